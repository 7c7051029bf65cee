//! Nodes: cluster-wide counts by base state and flag, and per-node CPUs, memory, GPUs and
//! GRES (native names `slurm_nodes_*`, `slurm_node_*`).
//!
//! slurmrestd hides `State=FUTURE` nodes from `/nodes` (they are the elastic nodes a NodeSet
//! scales up), but partitions still list them; they are counted as future from the
//! partitions' node lists.

use std::collections::{BTreeMap, HashSet};

use super::{MetricsOptions, Out, Series, join, number};
use crate::model::text::expand_hostlist;
use crate::model::{Node, NodeBase, NodeFlags, Partition};
use crate::snapshot::ClusterSnapshot;

/// More names than this in partition node lists is not a real cluster.
const MAX_HOSTLIST: usize = 1_000_000;

/// DRAIN on a node still running work is "draining"; elsewhere "drained" (native `drain`).
pub fn draining(n: &Node) -> bool {
    n.state.drain()
        && matches!(
            n.state.base,
            NodeBase::Allocated | NodeBase::Mixed | NodeBase::Error
        )
}

pub fn drained(n: &Node) -> bool {
    n.state.drain() && !draining(n)
}

/// Nodes partitions list that `/nodes` does not show (FUTURE nodes).
pub fn hidden_nodes(nodes: &[Node], partitions: &[Partition]) -> usize {
    let listed: HashSet<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    let mut hidden = HashSet::new();
    for p in partitions {
        for name in expand_hostlist(&p.node_list, MAX_HOSTLIST) {
            if !listed.contains(name.as_str()) {
                hidden.insert(name);
            }
        }
    }
    hidden.len()
}

/// Native flag counts: (flag, metric name, help).
const FLAG_METRICS: [(NodeFlags, &str, &str); 8] = [
    (
        NodeFlags::MAINTENANCE,
        "slurm_nodes_maint",
        "Nodes in a maintenance reservation.",
    ),
    (
        NodeFlags::RESERVED,
        "slurm_nodes_resv",
        "Nodes in an advanced reservation.",
    ),
    (
        NodeFlags::NOT_RESPONDING,
        "slurm_nodes_noresp",
        "Nodes not responding to slurmctld.",
    ),
    (
        NodeFlags::COMPLETING,
        "slurm_nodes_completing",
        "Nodes with jobs completing.",
    ),
    (NodeFlags::FAIL, "slurm_nodes_fail", "Nodes flagged FAIL."),
    (
        NodeFlags::POWERED_DOWN,
        "slurm_nodes_powered_down",
        "Nodes powered down by power saving.",
    ),
    (
        NodeFlags::PLANNED,
        "slurm_nodes_planned",
        "Nodes planned for a pending job by the backfill scheduler.",
    ),
    (NodeFlags::CLOUD, "slurm_nodes_cloud", "Cloud nodes."),
];

/// A set of nodes counted once for the series over it: the cluster's (here) and each
/// partition's ([`super::partitions`]). Values come from the wire: sums saturate rather than
/// trust them to be small.
#[derive(Clone, Default)]
pub(super) struct Tally {
    /// Nodes `/nodes` shows.
    pub listed: u64,
    /// Nodes configured that `/nodes` does not show (FUTURE).
    pub hidden: u64,
    pub by_base: BTreeMap<NodeBase, u64>,
    pub drain: u64,
    pub draining: u64,
    pub usable_idle: u64,
    pub unavailable: u64,
    pub cpus_alloc: u64,
    pub cpus_idle: u64,
    pub cpus_usable_idle: u64,
    pub cpus_unavailable: u64,
    pub memory: u64,
    pub memory_alloc: u64,
    pub gpus: u64,
    pub gpus_alloc: u64,
}

impl Tally {
    pub fn add(&mut self, n: &Node) {
        self.listed += 1;
        *self.by_base.entry(n.state.base).or_default() += 1;
        self.drain += u64::from(drained(n));
        self.draining += u64::from(draining(n));
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

    /// Nodes whose base state is `b`; FUTURE counts the hidden ones too.
    pub fn base(&self, b: NodeBase) -> Option<f64> {
        let listed = self.by_base.get(&b).copied().unwrap_or(0);
        number(if b == NodeBase::Future {
            listed + self.hidden
        } else {
            listed
        })
    }
}

/// The cluster's node counts. The native `idle` includes drained, reserved and unresponsive
/// idle nodes; the `usable`/`unavailable` series are sinfo's allocated/idle/other split:
/// what a job can use now.
const CLUSTER: &[Series<Tally>] = &[
    Series::gauge(
        "slurm_nodes",
        "Nodes configured, FUTURE nodes hidden from /nodes included.",
        |t| number(t.listed + t.hidden),
    ),
    Series::gauge(
        "slurm_nodes_alloc",
        "Nodes whose base state is ALLOCATED.",
        |t| t.base(NodeBase::Allocated),
    ),
    Series::gauge("slurm_nodes_idle", "Nodes whose base state is IDLE.", |t| {
        t.base(NodeBase::Idle)
    }),
    Series::gauge(
        "slurm_nodes_mixed",
        "Nodes whose base state is MIXED (partly allocated).",
        |t| t.base(NodeBase::Mixed),
    ),
    Series::gauge("slurm_nodes_down", "Nodes whose base state is DOWN.", |t| {
        t.base(NodeBase::Down)
    }),
    Series::gauge(
        "slurm_nodes_future",
        "Nodes whose base state is FUTURE (declared, not yet up).",
        |t| t.base(NodeBase::Future),
    ),
    Series::gauge(
        "slurm_nodes_unknown",
        "Nodes whose base state is UNKNOWN.",
        |t| t.base(NodeBase::Unknown),
    ),
    Series::gauge(
        "slurm_nodes_error",
        "Nodes whose base state is ERROR.",
        |t| t.base(NodeBase::Error),
    ),
    Series::gauge(
        "slurm_nodes_drain",
        "Nodes drained: DRAIN flag and no work left (native meaning; draining nodes are separate).",
        |t| number(t.drain),
    ),
    Series::gauge(
        "slurm_nodes_draining",
        "Nodes with the DRAIN flag still running work.",
        |t| number(t.draining),
    ),
    Series::gauge(
        "slurm_nodes_usable_idle",
        "Idle nodes a job can start on now: base state IDLE, not drained, in maintenance or a reservation, unresponsive, failing, powering or rebooting (slurm_nodes_idle counts those too).",
        |t| number(t.usable_idle),
    ),
    Series::gauge(
        "slurm_nodes_unavailable",
        "Nodes that are up in Slurm's view but can take no new job (drained, draining, down, reserved, unresponsive, powered down...); FUTURE nodes are slurm_nodes_future.",
        |t| number(t.unavailable),
    ),
    Series::gauge(
        "slurm_nodes_cpus_usable_idle",
        "Idle CPUs a job can use now: on nodes that can take new work (sinfo's I of A/I/O/T).",
        |t| number(t.cpus_usable_idle),
    ),
    Series::gauge(
        "slurm_nodes_cpus_unavailable",
        "CPUs neither allocated nor usable: idle CPUs of nodes that can take no new work (sinfo's O of A/I/O/T).",
        |t| number(t.cpus_unavailable),
    ),
];

/// Each node's size and use (`--per-node`).
const NODE: &[Series<Node>] = &[
    Series::gauge("slurm_node_cpus", "CPUs of the node.", |n| {
        Some(n.cpus as f64)
    }),
    Series::gauge(
        "slurm_node_cpus_alloc",
        "CPUs of the node allocated to jobs.",
        |n| Some(n.alloc_cpus as f64),
    ),
    Series::gauge(
        "slurm_node_cpus_idle",
        "CPUs of the node not allocated.",
        |n| Some(n.idle_cpus() as f64),
    ),
    Series::gauge(
        "slurm_node_memory_bytes",
        "Memory of the node (RealMemory).",
        |n| Some(n.memory_bytes as f64),
    ),
    Series::gauge(
        "slurm_node_memory_alloc_bytes",
        "Memory of the node allocated to jobs.",
        |n| Some(n.alloc_memory_bytes as f64),
    ),
    Series::gauge(
        "slurm_node_memory_free_bytes",
        "Free memory slurmd reports for the node.",
        |n| n.free_memory_bytes.map(|b| b as f64),
    ),
    Series::gauge(
        "slurm_node_gpus",
        "GPUs of the node (gres/gpu, all types).",
        |n| Some(n.gpus() as f64),
    ),
    Series::gauge(
        "slurm_node_gpus_alloc",
        "GPUs of the node allocated to jobs.",
        |n| Some(n.gpus_alloc() as f64),
    ),
];

/// A node's generic resources of one name and type: (configured, allocated).
const GRES: &[Series<(u64, u64)>] = &[
    Series::gauge(
        "slurm_node_gres",
        "Generic resources of the node by name and type.",
        |(count, _)| number(*count),
    ),
    Series::gauge(
        "slurm_node_gres_alloc",
        "Generic resources of the node allocated, by name and type.",
        |(_, used)| number(*used),
    ),
];

pub fn collect(out: &mut Out, s: &ClusterSnapshot, opts: &MetricsOptions) {
    let Some(nodes) = &s.nodes.data else { return };
    let mut tally = Tally::default();
    nodes.iter().for_each(|n| tally.add(n));
    tally.hidden = s
        .partitions
        .data
        .as_ref()
        .map_or(0, |p| hidden_nodes(nodes, p) as u64);
    out.series(CLUSTER, &tally, &[]);
    for (flag, name, help) in FLAG_METRICS {
        let flagged = nodes.iter().filter(|n| n.state.flags.contains(flag));
        out.gauge(name, help, &[], flagged.count() as f64);
    }
    for node in nodes.iter().filter(|_| opts.per_node) {
        per_node(out, node);
    }
}

/// One node's series: its size and use, its GRES, its state and why it is down.
fn per_node(out: &mut Out, node: &Node) {
    out.series(NODE, node, &[("node", node.name.as_str())]);
    for g in &node.gres {
        let used = node
            .gres_used
            .iter()
            .find(|u| u.name == g.name && u.kind == g.kind)
            .map_or(0, |u| u.count);
        let labels = [
            ("node", node.name.as_str()),
            ("gres", &*g.name),
            ("type", &*g.kind),
        ];
        out.series(GRES, &(g.count, used), &labels);
    }
    let flags = join(
        NodeFlags::NAMED
            .iter()
            .filter(|(f, _)| node.state.flags.contains(*f))
            .map(|(_, name)| *name),
    );
    let partitions = join(node.partitions.iter().map(|p| &**p));
    out.info(
        "slurm_node_state_info",
        "The node's base state, its flags and its partitions.",
        &[
            ("node", node.name.as_str()),
            ("state", node.state.base.as_str()),
            ("flags", &flags),
            ("partitions", &partitions),
        ],
    );
    if !node.reason.is_empty() {
        out.info(
            "slurm_node_reason_info",
            "Why the node is down or drained, and who said so.",
            &[
                ("node", node.name.as_str()),
                ("reason", node.reason.as_str()),
                ("user", node.reason_set_by.as_str()),
            ],
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
            # HELP slurm_nodes Nodes configured, FUTURE nodes hidden from /nodes included.
            # TYPE slurm_nodes gauge
            slurm_nodes{cluster="fixture"} 4
            # HELP slurm_nodes_alloc Nodes whose base state is ALLOCATED.
            # TYPE slurm_nodes_alloc gauge
            slurm_nodes_alloc{cluster="fixture"} 1
            # HELP slurm_nodes_idle Nodes whose base state is IDLE.
            # TYPE slurm_nodes_idle gauge
            slurm_nodes_idle{cluster="fixture"} 2
            # HELP slurm_nodes_mixed Nodes whose base state is MIXED (partly allocated).
            # TYPE slurm_nodes_mixed gauge
            slurm_nodes_mixed{cluster="fixture"} 1
            # HELP slurm_nodes_down Nodes whose base state is DOWN.
            # TYPE slurm_nodes_down gauge
            slurm_nodes_down{cluster="fixture"} 0
            # HELP slurm_nodes_future Nodes whose base state is FUTURE (declared, not yet up).
            # TYPE slurm_nodes_future gauge
            slurm_nodes_future{cluster="fixture"} 0
            # HELP slurm_nodes_unknown Nodes whose base state is UNKNOWN.
            # TYPE slurm_nodes_unknown gauge
            slurm_nodes_unknown{cluster="fixture"} 0
            # HELP slurm_nodes_error Nodes whose base state is ERROR.
            # TYPE slurm_nodes_error gauge
            slurm_nodes_error{cluster="fixture"} 0
            # HELP slurm_nodes_drain Nodes drained: DRAIN flag and no work left (native meaning; draining nodes are separate).
            # TYPE slurm_nodes_drain gauge
            slurm_nodes_drain{cluster="fixture"} 0
            # HELP slurm_nodes_draining Nodes with the DRAIN flag still running work.
            # TYPE slurm_nodes_draining gauge
            slurm_nodes_draining{cluster="fixture"} 1
            # HELP slurm_nodes_usable_idle Idle nodes a job can start on now: base state IDLE, not drained, in maintenance or a reservation, unresponsive, failing, powering or rebooting (slurm_nodes_idle counts those too).
            # TYPE slurm_nodes_usable_idle gauge
            slurm_nodes_usable_idle{cluster="fixture"} 1
            # HELP slurm_nodes_unavailable Nodes that are up in Slurm's view but can take no new job (drained, draining, down, reserved, unresponsive, powered down...); FUTURE nodes are slurm_nodes_future.
            # TYPE slurm_nodes_unavailable gauge
            slurm_nodes_unavailable{cluster="fixture"} 2
            # HELP slurm_nodes_cpus_usable_idle Idle CPUs a job can use now: on nodes that can take new work (sinfo's I of A/I/O/T).
            # TYPE slurm_nodes_cpus_usable_idle gauge
            slurm_nodes_cpus_usable_idle{cluster="fixture"} 8
            # HELP slurm_nodes_cpus_unavailable CPUs neither allocated nor usable: idle CPUs of nodes that can take no new work (sinfo's O of A/I/O/T).
            # TYPE slurm_nodes_cpus_unavailable gauge
            slurm_nodes_cpus_unavailable{cluster="fixture"} 12
            # HELP slurm_nodes_maint Nodes in a maintenance reservation.
            # TYPE slurm_nodes_maint gauge
            slurm_nodes_maint{cluster="fixture"} 0
            # HELP slurm_nodes_resv Nodes in an advanced reservation.
            # TYPE slurm_nodes_resv gauge
            slurm_nodes_resv{cluster="fixture"} 0
            # HELP slurm_nodes_noresp Nodes not responding to slurmctld.
            # TYPE slurm_nodes_noresp gauge
            slurm_nodes_noresp{cluster="fixture"} 0
            # HELP slurm_nodes_completing Nodes with jobs completing.
            # TYPE slurm_nodes_completing gauge
            slurm_nodes_completing{cluster="fixture"} 0
            # HELP slurm_nodes_fail Nodes flagged FAIL.
            # TYPE slurm_nodes_fail gauge
            slurm_nodes_fail{cluster="fixture"} 0
            # HELP slurm_nodes_powered_down Nodes powered down by power saving.
            # TYPE slurm_nodes_powered_down gauge
            slurm_nodes_powered_down{cluster="fixture"} 1
            # HELP slurm_nodes_planned Nodes planned for a pending job by the backfill scheduler.
            # TYPE slurm_nodes_planned gauge
            slurm_nodes_planned{cluster="fixture"} 0
            # HELP slurm_nodes_cloud Cloud nodes.
            # TYPE slurm_nodes_cloud gauge
            slurm_nodes_cloud{cluster="fixture"} 0
            # HELP slurm_node_cpus CPUs of the node.
            # TYPE slurm_node_cpus gauge
            slurm_node_cpus{cluster="fixture",node="c1"} 8
            slurm_node_cpus{cluster="fixture",node="c2"} 8
            slurm_node_cpus{cluster="fixture",node="c3"} 8
            slurm_node_cpus{cluster="fixture",node="g1"} 16
            # HELP slurm_node_cpus_alloc CPUs of the node allocated to jobs.
            # TYPE slurm_node_cpus_alloc gauge
            slurm_node_cpus_alloc{cluster="fixture",node="c1"} 0
            slurm_node_cpus_alloc{cluster="fixture",node="c2"} 4
            slurm_node_cpus_alloc{cluster="fixture",node="c3"} 0
            slurm_node_cpus_alloc{cluster="fixture",node="g1"} 16
            # HELP slurm_node_cpus_idle CPUs of the node not allocated.
            # TYPE slurm_node_cpus_idle gauge
            slurm_node_cpus_idle{cluster="fixture",node="c1"} 8
            slurm_node_cpus_idle{cluster="fixture",node="c2"} 4
            slurm_node_cpus_idle{cluster="fixture",node="c3"} 8
            slurm_node_cpus_idle{cluster="fixture",node="g1"} 0
            # HELP slurm_node_memory_bytes Memory of the node (RealMemory).
            # TYPE slurm_node_memory_bytes gauge
            slurm_node_memory_bytes{cluster="fixture",node="c1"} 16777216000
            slurm_node_memory_bytes{cluster="fixture",node="c2"} 16777216000
            slurm_node_memory_bytes{cluster="fixture",node="c3"} 16777216000
            slurm_node_memory_bytes{cluster="fixture",node="g1"} 67108864000
            # HELP slurm_node_memory_alloc_bytes Memory of the node allocated to jobs.
            # TYPE slurm_node_memory_alloc_bytes gauge
            slurm_node_memory_alloc_bytes{cluster="fixture",node="c1"} 0
            slurm_node_memory_alloc_bytes{cluster="fixture",node="c2"} 4194304000
            slurm_node_memory_alloc_bytes{cluster="fixture",node="c3"} 0
            slurm_node_memory_alloc_bytes{cluster="fixture",node="g1"} 8388608000
            # HELP slurm_node_memory_free_bytes Free memory slurmd reports for the node.
            # TYPE slurm_node_memory_free_bytes gauge
            slurm_node_memory_free_bytes{cluster="fixture",node="c1"} 15728640000
            slurm_node_memory_free_bytes{cluster="fixture",node="c2"} 11534336000
            slurm_node_memory_free_bytes{cluster="fixture",node="g1"} 52428800000
            # HELP slurm_node_gpus GPUs of the node (gres/gpu, all types).
            # TYPE slurm_node_gpus gauge
            slurm_node_gpus{cluster="fixture",node="c1"} 0
            slurm_node_gpus{cluster="fixture",node="c2"} 0
            slurm_node_gpus{cluster="fixture",node="c3"} 0
            slurm_node_gpus{cluster="fixture",node="g1"} 4
            # HELP slurm_node_gpus_alloc GPUs of the node allocated to jobs.
            # TYPE slurm_node_gpus_alloc gauge
            slurm_node_gpus_alloc{cluster="fixture",node="c1"} 0
            slurm_node_gpus_alloc{cluster="fixture",node="c2"} 0
            slurm_node_gpus_alloc{cluster="fixture",node="c3"} 0
            slurm_node_gpus_alloc{cluster="fixture",node="g1"} 2
            # HELP slurm_node_state_info The node's base state, its flags and its partitions.
            # TYPE slurm_node_state_info gauge
            slurm_node_state_info{cluster="fixture",node="c1",state="idle",flags="",partitions="cpu"} 1
            slurm_node_state_info{cluster="fixture",node="c2",state="mixed",flags="drain",partitions="cpu"} 1
            slurm_node_state_info{cluster="fixture",node="c3",state="idle",flags="powered_down",partitions="cpu"} 1
            slurm_node_state_info{cluster="fixture",node="g1",state="alloc",flags="",partitions="gpu"} 1
            # HELP slurm_node_reason_info Why the node is down or drained, and who said so.
            # TYPE slurm_node_reason_info gauge
            slurm_node_reason_info{cluster="fixture",node="c2",reason="disk check",user=""} 1
            # HELP slurm_node_gres Generic resources of the node by name and type.
            # TYPE slurm_node_gres gauge
            slurm_node_gres{cluster="fixture",node="g1",gres="gpu",type=""} 4
            # HELP slurm_node_gres_alloc Generic resources of the node allocated, by name and type.
            # TYPE slurm_node_gres_alloc gauge
            slurm_node_gres_alloc{cluster="fixture",node="g1",gres="gpu",type=""} 2
            
            "#,
        );
    }
}
