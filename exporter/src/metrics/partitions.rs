//! Partitions: configured size, node states and CPUs/memory/GPUs over the partition's nodes
//! (native `slurm_partition_nodes_*`, `slurm_partition_cpus`). A node in two partitions
//! counts in both. Job counts per partition are in [`super::jobs`], demand in
//! [`super::demand`].

use std::collections::BTreeMap;

use super::nodes::{drained, draining};
use super::{MetricsOptions, Out};
use crate::model::{Node, NodeBase};
use crate::snapshot::ClusterSnapshot;

#[derive(Default)]
struct Sums {
    listed: u64,
    by_base: BTreeMap<NodeBase, u64>,
    drain: u64,
    draining: u64,
    usable_idle: u64,
    unavailable: u64,
    cpus_alloc: u64,
    cpus_idle: u64,
    cpus_usable_idle: u64,
    cpus_unavailable: u64,
    memory: u64,
    memory_alloc: u64,
    gpus: u64,
    gpus_alloc: u64,
}

impl Sums {
    fn add(&mut self, n: &Node) {
        self.listed += 1;
        *self.by_base.entry(n.state.base).or_default() += 1;
        self.drain += u64::from(drained(n));
        self.draining += u64::from(draining(n));
        // Values come from the wire: saturate rather than trust them to be small.
        self.cpus_alloc = self.cpus_alloc.saturating_add(n.alloc_cpus);
        self.cpus_idle = self.cpus_idle.saturating_add(n.idle_cpus());
        self.usable_idle += u64::from(n.state.base == NodeBase::Idle && n.usable());
        self.unavailable += u64::from(!n.usable());
        self.cpus_usable_idle = self.cpus_usable_idle.saturating_add(n.usable_idle_cpus());
        self.cpus_unavailable = self.cpus_unavailable.saturating_add(n.unavailable_cpus());
        self.memory = self.memory.saturating_add(n.memory_bytes);
        self.memory_alloc = self.memory_alloc.saturating_add(n.alloc_memory_bytes);
        self.gpus = self.gpus.saturating_add(n.gpus());
        self.gpus_alloc = self.gpus_alloc.saturating_add(n.gpus_alloc());
    }
}

pub fn collect(out: &mut Out, s: &ClusterSnapshot, _: &MetricsOptions) {
    let Some(partitions) = &s.partitions.data else {
        return;
    };
    let mut sums: BTreeMap<&str, Sums> = BTreeMap::new();
    for n in s.nodes.data.iter().flat_map(|n| n.iter()) {
        for p in &n.partitions {
            sums.entry(&**p).or_default().add(n);
        }
    }
    out.gauge(
        "slurm_partitions",
        "Partitions configured.",
        &[],
        partitions.len() as f64,
    );
    let empty = Sums::default();
    for p in partitions.iter() {
        let part = [("partition", &*p.name)];
        let sum = sums.get(&*p.name).unwrap_or(&empty);
        out.info(
            "slurm_partition_info",
            "The partition's state (UP, DOWN, DRAIN, INACTIVE).",
            &[("partition", &*p.name), ("state", &p.state)],
        );
        out.gauge(
            "slurm_partition_nodes",
            "Nodes configured in the partition, FUTURE ones included.",
            &part,
            p.total_nodes as f64,
        );
        out.gauge(
            "slurm_partition_cpus",
            "CPUs configured in the partition.",
            &part,
            p.total_cpus as f64,
        );
        if let Some(max) = p.max_nodes_per_job {
            out.gauge(
                "slurm_partition_max_nodes_per_job",
                "The most nodes one job may use in the partition (absent: unlimited).",
                &part,
                max as f64,
            );
        }
        let base = |b| sum.by_base.get(&b).copied().unwrap_or(0) as f64;
        // FUTURE nodes are hidden from /nodes but counted in the partition's total.
        let future = base(NodeBase::Future) + p.total_nodes.saturating_sub(sum.listed) as f64;
        out.gauge(
            "slurm_partition_nodes_alloc",
            "Nodes of the partition whose base state is ALLOCATED.",
            &part,
            base(NodeBase::Allocated),
        );
        out.gauge(
            "slurm_partition_nodes_idle",
            "Nodes of the partition whose base state is IDLE.",
            &part,
            base(NodeBase::Idle),
        );
        out.gauge(
            "slurm_partition_nodes_mixed",
            "Nodes of the partition whose base state is MIXED.",
            &part,
            base(NodeBase::Mixed),
        );
        out.gauge(
            "slurm_partition_nodes_down",
            "Nodes of the partition whose base state is DOWN.",
            &part,
            base(NodeBase::Down),
        );
        out.gauge(
            "slurm_partition_nodes_future",
            "Nodes of the partition whose base state is FUTURE (not yet up).",
            &part,
            future,
        );
        out.gauge(
            "slurm_partition_nodes_drain",
            "Nodes of the partition drained (DRAIN flag, no work left).",
            &part,
            sum.drain as f64,
        );
        out.gauge(
            "slurm_partition_nodes_draining",
            "Nodes of the partition with the DRAIN flag still running work.",
            &part,
            sum.draining as f64,
        );
        out.gauge(
            "slurm_partition_nodes_cpus_alloc",
            "Allocated CPUs summed over the partition's nodes.",
            &part,
            sum.cpus_alloc as f64,
        );
        out.gauge(
            "slurm_partition_nodes_cpus_idle",
            "Idle CPUs summed over the partition's nodes (native: drained and down nodes' included).",
            &part,
            sum.cpus_idle as f64,
        );
        out.gauge(
            "slurm_partition_nodes_usable_idle",
            "Idle nodes of the partition a job can start on now (slurm_partition_nodes_idle counts drained, reserved and unresponsive ones too).",
            &part,
            sum.usable_idle as f64,
        );
        out.gauge(
            "slurm_partition_nodes_unavailable",
            "Nodes of the partition up in Slurm's view but taking no new work (drained, draining, down, reserved, unresponsive...).",
            &part,
            sum.unavailable as f64,
        );
        out.gauge(
            "slurm_partition_nodes_cpus_usable_idle",
            "Idle CPUs of the partition a job can use now (sinfo's I of A/I/O/T).",
            &part,
            sum.cpus_usable_idle as f64,
        );
        out.gauge(
            "slurm_partition_nodes_cpus_unavailable",
            "CPUs of the partition neither allocated nor usable (sinfo's O of A/I/O/T).",
            &part,
            sum.cpus_unavailable as f64,
        );
        out.gauge(
            "slurm_partition_memory_bytes",
            "Memory summed over the partition's nodes.",
            &part,
            sum.memory as f64,
        );
        out.gauge(
            "slurm_partition_memory_alloc_bytes",
            "Allocated memory summed over the partition's nodes.",
            &part,
            sum.memory_alloc as f64,
        );
        out.gauge(
            "slurm_partition_gpus",
            "GPUs summed over the partition's nodes.",
            &part,
            sum.gpus as f64,
        );
        out.gauge(
            "slurm_partition_gpus_alloc",
            "Allocated GPUs summed over the partition's nodes.",
            &part,
            sum.gpus_alloc as f64,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures;

    /// The family alone on the fixture cluster (`metrics::fixtures`), line by line.
    #[test]
    fn renders_the_fixture_cluster() {
        fixtures::assert_text(
            &fixtures::render(super::collect),
            r#"
            # HELP slurm_partitions Partitions configured.
            # TYPE slurm_partitions gauge
            slurm_partitions{cluster="fixture"} 2
            # HELP slurm_partition_info The partition's state (UP, DOWN, DRAIN, INACTIVE).
            # TYPE slurm_partition_info gauge
            slurm_partition_info{cluster="fixture",partition="cpu",state="UP"} 1
            slurm_partition_info{cluster="fixture",partition="gpu",state="UP"} 1
            # HELP slurm_partition_nodes Nodes configured in the partition, FUTURE ones included.
            # TYPE slurm_partition_nodes gauge
            slurm_partition_nodes{cluster="fixture",partition="cpu"} 3
            slurm_partition_nodes{cluster="fixture",partition="gpu"} 1
            # HELP slurm_partition_cpus CPUs configured in the partition.
            # TYPE slurm_partition_cpus gauge
            slurm_partition_cpus{cluster="fixture",partition="cpu"} 24
            slurm_partition_cpus{cluster="fixture",partition="gpu"} 16
            # HELP slurm_partition_nodes_alloc Nodes of the partition whose base state is ALLOCATED.
            # TYPE slurm_partition_nodes_alloc gauge
            slurm_partition_nodes_alloc{cluster="fixture",partition="cpu"} 0
            slurm_partition_nodes_alloc{cluster="fixture",partition="gpu"} 1
            # HELP slurm_partition_nodes_idle Nodes of the partition whose base state is IDLE.
            # TYPE slurm_partition_nodes_idle gauge
            slurm_partition_nodes_idle{cluster="fixture",partition="cpu"} 2
            slurm_partition_nodes_idle{cluster="fixture",partition="gpu"} 0
            # HELP slurm_partition_nodes_mixed Nodes of the partition whose base state is MIXED.
            # TYPE slurm_partition_nodes_mixed gauge
            slurm_partition_nodes_mixed{cluster="fixture",partition="cpu"} 1
            slurm_partition_nodes_mixed{cluster="fixture",partition="gpu"} 0
            # HELP slurm_partition_nodes_down Nodes of the partition whose base state is DOWN.
            # TYPE slurm_partition_nodes_down gauge
            slurm_partition_nodes_down{cluster="fixture",partition="cpu"} 0
            slurm_partition_nodes_down{cluster="fixture",partition="gpu"} 0
            # HELP slurm_partition_nodes_future Nodes of the partition whose base state is FUTURE (not yet up).
            # TYPE slurm_partition_nodes_future gauge
            slurm_partition_nodes_future{cluster="fixture",partition="cpu"} 0
            slurm_partition_nodes_future{cluster="fixture",partition="gpu"} 0
            # HELP slurm_partition_nodes_drain Nodes of the partition drained (DRAIN flag, no work left).
            # TYPE slurm_partition_nodes_drain gauge
            slurm_partition_nodes_drain{cluster="fixture",partition="cpu"} 0
            slurm_partition_nodes_drain{cluster="fixture",partition="gpu"} 0
            # HELP slurm_partition_nodes_draining Nodes of the partition with the DRAIN flag still running work.
            # TYPE slurm_partition_nodes_draining gauge
            slurm_partition_nodes_draining{cluster="fixture",partition="cpu"} 1
            slurm_partition_nodes_draining{cluster="fixture",partition="gpu"} 0
            # HELP slurm_partition_nodes_cpus_alloc Allocated CPUs summed over the partition's nodes.
            # TYPE slurm_partition_nodes_cpus_alloc gauge
            slurm_partition_nodes_cpus_alloc{cluster="fixture",partition="cpu"} 4
            slurm_partition_nodes_cpus_alloc{cluster="fixture",partition="gpu"} 16
            # HELP slurm_partition_nodes_cpus_idle Idle CPUs summed over the partition's nodes (native: drained and down nodes' included).
            # TYPE slurm_partition_nodes_cpus_idle gauge
            slurm_partition_nodes_cpus_idle{cluster="fixture",partition="cpu"} 20
            slurm_partition_nodes_cpus_idle{cluster="fixture",partition="gpu"} 0
            # HELP slurm_partition_nodes_usable_idle Idle nodes of the partition a job can start on now (slurm_partition_nodes_idle counts drained, reserved and unresponsive ones too).
            # TYPE slurm_partition_nodes_usable_idle gauge
            slurm_partition_nodes_usable_idle{cluster="fixture",partition="cpu"} 1
            slurm_partition_nodes_usable_idle{cluster="fixture",partition="gpu"} 0
            # HELP slurm_partition_nodes_unavailable Nodes of the partition up in Slurm's view but taking no new work (drained, draining, down, reserved, unresponsive...).
            # TYPE slurm_partition_nodes_unavailable gauge
            slurm_partition_nodes_unavailable{cluster="fixture",partition="cpu"} 2
            slurm_partition_nodes_unavailable{cluster="fixture",partition="gpu"} 0
            # HELP slurm_partition_nodes_cpus_usable_idle Idle CPUs of the partition a job can use now (sinfo's I of A/I/O/T).
            # TYPE slurm_partition_nodes_cpus_usable_idle gauge
            slurm_partition_nodes_cpus_usable_idle{cluster="fixture",partition="cpu"} 8
            slurm_partition_nodes_cpus_usable_idle{cluster="fixture",partition="gpu"} 0
            # HELP slurm_partition_nodes_cpus_unavailable CPUs of the partition neither allocated nor usable (sinfo's O of A/I/O/T).
            # TYPE slurm_partition_nodes_cpus_unavailable gauge
            slurm_partition_nodes_cpus_unavailable{cluster="fixture",partition="cpu"} 12
            slurm_partition_nodes_cpus_unavailable{cluster="fixture",partition="gpu"} 0
            # HELP slurm_partition_memory_bytes Memory summed over the partition's nodes.
            # TYPE slurm_partition_memory_bytes gauge
            slurm_partition_memory_bytes{cluster="fixture",partition="cpu"} 50331648000
            slurm_partition_memory_bytes{cluster="fixture",partition="gpu"} 67108864000
            # HELP slurm_partition_memory_alloc_bytes Allocated memory summed over the partition's nodes.
            # TYPE slurm_partition_memory_alloc_bytes gauge
            slurm_partition_memory_alloc_bytes{cluster="fixture",partition="cpu"} 4194304000
            slurm_partition_memory_alloc_bytes{cluster="fixture",partition="gpu"} 8388608000
            # HELP slurm_partition_gpus GPUs summed over the partition's nodes.
            # TYPE slurm_partition_gpus gauge
            slurm_partition_gpus{cluster="fixture",partition="cpu"} 0
            slurm_partition_gpus{cluster="fixture",partition="gpu"} 4
            # HELP slurm_partition_gpus_alloc Allocated GPUs summed over the partition's nodes.
            # TYPE slurm_partition_gpus_alloc gauge
            slurm_partition_gpus_alloc{cluster="fixture",partition="cpu"} 0
            slurm_partition_gpus_alloc{cluster="fixture",partition="gpu"} 2
            
            "#,
        );
    }
}
