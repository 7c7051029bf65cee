//! Partitions: configured size, node states and CPUs/memory/GPUs over the partition's nodes
//! (native `slurm_partition_nodes_*`, `slurm_partition_cpus`). A node in two partitions
//! counts in both. Job counts per partition are in [`super::jobs`], demand in
//! [`super::demand`].

use std::collections::BTreeMap;

use super::nodes::Tally;
use super::{MetricsOptions, Out, Series, number};
use crate::model::{NodeBase, NodeSets, Partition};
use crate::snapshot::ClusterSnapshot;

/// One partition as its series read it: its configuration and its listed nodes' tally.
struct Row {
    nodes: u64,
    cpus: u64,
    max_nodes_per_job: Option<u64>,
    tally: Tally,
}

/// What each partition is and holds. FUTURE nodes are hidden from `/nodes` but counted in
/// the partition's total, so its hidden ones are the total's nodes `/nodes` did not list.
const PARTITION: &[Series<Row>] = &[
    Series::gauge(
        "slurm_partition_nodes",
        "Nodes configured in the partition, FUTURE ones included.",
        |r| number(r.nodes),
    ),
    Series::gauge(
        "slurm_partition_cpus",
        "CPUs configured in the partition.",
        |r| number(r.cpus),
    ),
    Series::gauge(
        "slurm_partition_max_nodes_per_job",
        "The most nodes one job may use in the partition (absent: unlimited).",
        |r| r.max_nodes_per_job.and_then(number),
    ),
    Series::gauge(
        "slurm_partition_nodes_alloc",
        "Nodes of the partition whose base state is ALLOCATED.",
        |r| r.tally.base(NodeBase::Allocated),
    ),
    Series::gauge(
        "slurm_partition_nodes_idle",
        "Nodes of the partition whose base state is IDLE.",
        |r| r.tally.base(NodeBase::Idle),
    ),
    Series::gauge(
        "slurm_partition_nodes_mixed",
        "Nodes of the partition whose base state is MIXED.",
        |r| r.tally.base(NodeBase::Mixed),
    ),
    Series::gauge(
        "slurm_partition_nodes_down",
        "Nodes of the partition whose base state is DOWN.",
        |r| r.tally.base(NodeBase::Down),
    ),
    Series::gauge(
        "slurm_partition_nodes_future",
        "Nodes of the partition whose base state is FUTURE (not yet up).",
        |r| r.tally.base(NodeBase::Future),
    ),
    Series::gauge(
        "slurm_partition_nodes_drain",
        "Nodes of the partition drained (DRAIN flag, no work left).",
        |r| number(r.tally.drain),
    ),
    Series::gauge(
        "slurm_partition_nodes_draining",
        "Nodes of the partition with the DRAIN flag still running work.",
        |r| number(r.tally.draining),
    ),
    Series::gauge(
        "slurm_partition_nodes_cpus_alloc",
        "Allocated CPUs summed over the partition's nodes.",
        |r| number(r.tally.cpus_alloc),
    ),
    Series::gauge(
        "slurm_partition_nodes_cpus_idle",
        "Idle CPUs summed over the partition's nodes (native: drained and down nodes' included).",
        |r| number(r.tally.cpus_idle),
    ),
    Series::gauge(
        "slurm_partition_nodes_usable_idle",
        "Idle nodes of the partition a job can start on now (slurm_partition_nodes_idle counts drained, reserved and unresponsive ones too).",
        |r| number(r.tally.usable_idle),
    ),
    Series::gauge(
        "slurm_partition_nodes_unavailable",
        "Nodes of the partition up in Slurm's view but taking no new work (drained, draining, down, reserved, unresponsive...).",
        |r| number(r.tally.unavailable),
    ),
    Series::gauge(
        "slurm_partition_nodes_cpus_usable_idle",
        "Idle CPUs of the partition a job can use now (sinfo's I of A/I/O/T).",
        |r| number(r.tally.cpus_usable_idle),
    ),
    Series::gauge(
        "slurm_partition_nodes_cpus_unavailable",
        "CPUs of the partition neither allocated nor usable (sinfo's O of A/I/O/T).",
        |r| number(r.tally.cpus_unavailable),
    ),
    Series::gauge(
        "slurm_partition_memory_bytes",
        "Memory summed over the partition's nodes.",
        |r| number(r.tally.memory),
    ),
    Series::gauge(
        "slurm_partition_memory_alloc_bytes",
        "Allocated memory summed over the partition's nodes.",
        |r| number(r.tally.memory_alloc),
    ),
    Series::gauge(
        "slurm_partition_gpus",
        "GPUs summed over the partition's nodes.",
        |r| number(r.tally.gpus),
    ),
    Series::gauge(
        "slurm_partition_gpus_alloc",
        "Allocated GPUs summed over the partition's nodes.",
        |r| number(r.tally.gpus_alloc),
    ),
];

pub fn collect(out: &mut Out, s: &ClusterSnapshot, _: &MetricsOptions) {
    let Some(partitions) = &s.partitions.data else {
        return;
    };
    let mut tallies: BTreeMap<&str, Tally> = BTreeMap::new();
    for n in s.nodes.data.iter().flat_map(|n| n.iter()) {
        for p in &n.partitions {
            tallies.entry(&**p).or_default().add(n);
        }
    }
    out.gauge(
        "slurm_partitions",
        "Partitions configured.",
        &[],
        partitions.len() as f64,
    );
    for p in partitions.iter() {
        out.info(
            "slurm_partition_info",
            "The partition's state (UP, DOWN, DRAIN, INACTIVE).",
            &[("partition", &*p.name), ("state", &p.state)],
        );
        node_sets(out, p);
        let mut tally = tallies.get(&*p.name).cloned().unwrap_or_default();
        tally.hidden = p.total_nodes.saturating_sub(tally.listed);
        let row = Row {
            nodes: p.total_nodes,
            cpus: p.total_cpus,
            max_nodes_per_job: p.max_nodes_per_job,
            tally,
        };
        out.series(PARTITION, &row, &[("partition", &*p.name)]);
    }
}

/// Which NodeSets feed the partition, one series each: with slurm-operator 1.1 several
/// NodeSets share a partition, and a NodeSet's own figures are read against its partitions.
/// `Nodes=ALL` is said as `nodeset="ALL"` (every NodeSet, the ones to come included); nothing
/// where slurmrestd does not say (v0.0.38).
fn node_sets(out: &mut Out, p: &Partition) {
    let names: &[String] = match &p.node_sets {
        NodeSets::Unknown => return,
        NodeSets::All => &[String::from("ALL")],
        NodeSets::Named(names) => names,
    };
    for n in names {
        out.info(
            "slurm_partition_nodeset_info",
            "A NodeSet (slurm.conf NodeSet=, Slinky's NodeSets) whose nodes join the partition; nodeset=\"ALL\" for Nodes=ALL.",
            &[("partition", &*p.name), ("nodeset", n)],
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
