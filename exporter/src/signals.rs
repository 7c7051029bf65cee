//! What a scaler may conclude about one Slurm partition from a snapshot — busy nodes, size,
//! pending demand — or why it must not conclude anything. The exporter's desired-nodes
//! metric and the autoscaler's policy both start here, so KEDA and the built-in controller
//! see the same numbers and the same refusals.

use std::fmt;
use std::time::{Duration, SystemTime};

use std::collections::HashMap;

use crate::model::demand::{Demand, Room, Shape, Take, demand_of, in_any};
use crate::model::grows::{Takes, of_nodeset};
use crate::model::timing::Timeline;
use crate::model::{Jobs, Node, NodeBase, PendingClass, PendingJob};
use crate::slurm::Endpoint;
use crate::snapshot::{ClusterSnapshot, EndpointState};

#[derive(Clone, Debug, PartialEq)]
pub struct PartitionSignals {
    /// Nodes of the partition running work (allocated, mixed, completing).
    pub busy_nodes: u64,
    /// Nodes configured in the partition, FUTURE ones included.
    pub total_nodes: u64,
    pub demand: Demand,
    /// The node shape demand was packed onto, and where its CPUs came from
    /// ([`ShapeHints::source`]).
    pub shape: Shape,
    pub shape_source: &'static str,
    /// When the oldest of the data used was confirmed by slurmrestd.
    pub as_of: SystemTime,
}

/// What may say the shape of a partition's nodes besides the partition itself, strongest
/// first: what a site set (a NodeSetAutoscaler's `spec.nodeShape`, a NodeSet's annotation),
/// then the partition's own nodes, then the pod template of the NodeSet that adds them —
/// all a Slinky partition with no pod yet has.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ShapeHints {
    pub set: Shape,
    /// Who set `set`, for reports (`NodeSetAutoscaler`, `NodeSet annotation`).
    pub set_by: &'static str,
    pub template: Shape,
}

impl ShapeHints {
    /// The shape over `partition`'s own, and where its CPUs come from: `set_by`,
    /// `partition`, `pod template`, or `unknown` (each job then counts its own nodes).
    pub fn resolve(&self, partition: Shape) -> (Shape, &'static str) {
        let shape = self.template.or(partition).or(self.set);
        let source = if self.set.cpus.is_some() {
            self.set_by
        } else if partition.cpus.is_some() {
            "partition"
        } else if self.template.cpus.is_some() {
            "pod template"
        } else {
            "unknown"
        };
        (shape, source)
    }
}

impl PartitionSignals {
    /// Nodes Slurm certainly needs: its busy nodes and those its pending work needs, less
    /// what jobs that may have started since the job list was last exact would take
    /// ([`Demand::floor_nodes`]). Every scaler grows Slurm only this far, so no node is
    /// added or kept back from Kubernetes for work that may already run.
    pub fn certain_need(&self) -> u64 {
        let need = self.busy_nodes.saturating_add(self.demand.floor_nodes());
        need.max(self.demand.plan_keeps)
    }

    /// What `slurm_nodeset_desired_nodes` publishes for a NodeSet of at most `max` nodes
    /// (`None`: no bound): the nodes Slurm certainly needs, capped, never below its busy
    /// ones. KEDA scales on this, so while the job list catches up it asks for no node that
    /// work which may already run would take (its scale-down stabilization absorbs the dip).
    pub fn published_desired(&self, max: Option<u64>) -> u64 {
        desired_nodes(
            self.busy_nodes,
            self.certain_need() - self.busy_nodes,
            0,
            max.unwrap_or(u64::MAX),
        )
    }

    /// Nodes Slurm may need: all its pending work counted. Every scaler gives up nothing
    /// below this, and nothing at all (`None`) while new jobs may be missing from the list.
    pub fn possible_need(&self) -> Option<u64> {
        let need = self.busy_nodes.saturating_add(self.demand.nodes);
        (!self.demand.open_ended).then(|| need.max(self.demand.plan_keeps))
    }
}

/// Why the data cannot be trusted for a decision.
#[derive(Clone, Debug, PartialEq)]
pub enum Untrusted {
    /// The endpoint never answered well.
    NoData(Endpoint),
    /// Its last attempt failed (its data is kept but may be wrong by now).
    Failing(Endpoint, String),
    /// Its data is older than allowed.
    Stale(Endpoint, Duration),
    /// slurmctld does not know the partition.
    UnknownPartition(String),
    /// The cluster is not one this process reads (`None`: the spec names none, and several
    /// are read).
    UnknownCluster(Option<String>),
    /// Kubernetes' NodeSets are not all listed yet, so which NodeSet a job grows is not known.
    NodeSetsUnlisted,
}

impl Untrusted {
    /// A bounded label value.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::NoData(_) => "no_data",
            Self::Failing(..) => "failing",
            Self::Stale(..) => "stale",
            Self::UnknownPartition(_) => "unknown_partition",
            Self::UnknownCluster(_) => "unknown_cluster",
            Self::NodeSetsUnlisted => "nodesets_unlisted",
        }
    }
}

impl fmt::Display for Untrusted {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Self::NoData(e) => write!(f, "slurmrestd has not answered {e} yet"),
            Self::Failing(e, why) => write!(f, "{e} is failing: {why}"),
            Self::Stale(e, age) => write!(f, "{e} data is {}s old", age.as_secs()),
            Self::UnknownPartition(p) => write!(f, "Slurm has no partition {p:?}"),
            Self::UnknownCluster(None) => {
                write!(f, "no spec.slurm.cluster, and several clusters are read")
            }
            Self::UnknownCluster(Some(c)) => write!(f, "cluster {c:?} is not read by this process"),
            Self::NodeSetsUnlisted => write!(f, "Kubernetes' NodeSets are not listed yet"),
        }
    }
}

fn trusted<T>(
    state: &EndpointState<T>,
    e: Endpoint,
    now: SystemTime,
    max_age: Duration,
) -> Result<SystemTime, Untrusted> {
    let Some(at) = state.last_success.filter(|_| state.data.is_some()) else {
        return Err(Untrusted::NoData(e));
    };
    if !state.up {
        return Err(Untrusted::Failing(
            e,
            state.last_error.clone().unwrap_or_default(),
        ));
    }
    // A slow but healthy slurmrestd is polled less often (the poll budget): data is stale
    // only when older than three of its current gaps (a failing one is `Failing` above).
    let limit = max_age.max(state.cadence.map_or(Duration::ZERO, |c| c * 3));
    let age = now.duration_since(at).unwrap_or_default();
    if age > limit {
        return Err(Untrusted::Stale(e, age));
    }
    Ok(at)
}

/// The signals of `partitions` together (a NodeSet may serve several), if jobs, nodes and
/// partitions are all good and younger than `max_age`: a node or a pending job in two of them
/// counts once. Jobs needing more than `max_nodes` (a NodeSet's bound; none: any size may
/// come) are unsatisfiable, not demand — never the partition's size, which for a Slinky
/// partition is just the pods there are now. Demand is packed onto the partitions' free room
/// and new nodes of the shape `hints` resolve to (the first partition's nodes standing for
/// the NodeSet's where it has the partitions to itself). With `lead` (seconds from asking
/// for a node to its taking jobs, margin included), jobs Slurm has planned are booted for
/// just in time ([`crate::model::timing`]).
#[allow(clippy::too_many_arguments)]
pub fn partition_signals(
    snap: &ClusterSnapshot,
    partitions: &[&str],
    max_nodes: Option<u64>,
    hints: &ShapeHints,
    takes: &Takes<'_>,
    lead: Option<i64>,
    now: SystemTime,
    max_age: Duration,
) -> Result<PartitionSignals, Untrusted> {
    let as_of = [
        trusted(&snap.jobs, Endpoint::Jobs, now, max_age)?,
        trusted(&snap.nodes, Endpoint::Nodes, now, max_age)?,
        trusted(&snap.partitions, Endpoint::Partitions, now, max_age)?,
    ]
    .into_iter()
    .min()
    .unwrap_or(now);
    let (Some(jobs), Some(nodes), Some(known)) =
        (&snap.jobs.data, &snap.nodes.data, &snap.partitions.data)
    else {
        return Err(Untrusted::NoData(Endpoint::Jobs));
    };
    let listed = partitions
        .iter()
        .map(|name| {
            known
                .iter()
                .find(|p| &*p.name == *name)
                .ok_or_else(|| Untrusted::UnknownPartition(name.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let first = listed
        .first()
        .ok_or_else(|| Untrusted::UnknownPartition(String::new()))?;
    // Where other NodeSets share the partitions, the NodeSet's busy nodes and room are its
    // own nodes only, and its shape its pod template's (the partitions' average node mixes
    // NodeSets).
    let own = takes.own_nodes_in(partitions);
    let members: Vec<&Node> = nodes
        .iter()
        .filter(|n| in_any(n, partitions) && own.is_none_or(|o| of_nodeset(&n.name, o)))
        .collect();
    // FUTURE nodes are not listed, only counted in each partition's total (whose NodeSet's
    // they are, where several share it, is not said).
    let hidden: u64 = listed
        .iter()
        .filter(|_| own.is_none())
        .map(|p| {
            let shown = members.iter().filter(|n| in_any(n, &[&p.name])).count() as u64;
            p.total_nodes.saturating_sub(shown)
        })
        .sum();
    let average = match own {
        Some(_) => Shape::default(),
        None => Shape::of(first, nodes),
    };
    let (shape, shape_source) = hints.resolve(average);
    let room = Room::new(partitions, members.iter().copied(), shape);
    // A node a running job is on is busy whatever its state says: a slurmctld that restarted
    // shows its nodes idle or unknown until each slurmd registers again, while their jobs run
    // on — taking them for idle would scale running work away.
    let busy = |n: &&&Node| n.busy() || jobs.running_on.contains_key(n.name.as_str());
    let timed = lead.map(|lead| {
        let now = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        // FUTURE records (listed by some sources) are room, not nodes.
        let has = members.iter().filter(|n| n.state.base != NodeBase::Future);
        let room = max_nodes.map_or(u64::MAX, |m| m.saturating_sub(has.count() as u64));
        let line = Timeline::new(now.as_secs() as i64, lead, free_at(jobs, &members), room);
        timed(jobs, partitions, line, max_nodes, takes)
    });
    let take = |j: &PendingJob| match timed.as_ref().and_then(|t| t.get(&j.id)) {
        Some(t) => *t,
        None => takes.job(j),
    };
    let total_nodes = members.len() as u64 + hidden;
    let counted =
        members.iter().filter(busy).count() as u64 + unlisted_busy(jobs, nodes, &listed, own);
    Ok(PartitionSignals {
        busy_nodes: counted.max(widest_running(jobs, &listed, own).min(total_nodes)),
        total_nodes,
        demand: demand_of(jobs, partitions, max_nodes, Some(&room), &take),
        shape,
        shape_source,
        as_of,
    })
}

/// However its nodes show, a job running in a partition holds as many as it was given: the
/// busy nodes are never fewer than the widest one's. The node-by-node count can miss them (a
/// restarted slurmctld shows nodes idle, unknown or not at all, and a job record may not name
/// its nodes while they are rebuilt), and a miss there would scale running work away. Only
/// where the partitions are the NodeSet's alone (`own` unnamed): a job in a partition several
/// NodeSets share may be on another's nodes.
fn widest_running(jobs: &Jobs, partitions: &[&crate::model::Partition], own: Option<&str>) -> u64 {
    if own.is_some() {
        return 0;
    }
    (partitions.iter())
        .filter_map(|p| jobs.partitions.get(&*p.name))
        .map(|c| c.running_nodes_max)
        .max()
        .unwrap_or(0)
}

/// Nodes of `partitions` (of NodeSet `own`, where named) that a running job is on but `/nodes`
/// does not list: a slurmctld that restarted shows a node a FUTURE record, left out of
/// `/nodes`, until its slurmd registers again, while its job runs on. Busy all the same.
fn unlisted_busy(
    jobs: &Jobs,
    nodes: &[Node],
    partitions: &[&crate::model::Partition],
    own: Option<&str>,
) -> u64 {
    // Every poll of every autoscaler passes here: no allocation while each node a job runs on
    // is listed (node names are unique), which is all the time but after a restart.
    let listed_running = (nodes.iter())
        .filter(|n| jobs.running_on.contains_key(n.name.as_str()))
        .count();
    if listed_running == jobs.running_on.len() {
        return 0;
    }
    let shown: std::collections::HashSet<&str> = nodes.iter().map(|n| &*n.name).collect();
    let unlisted: Vec<&str> = jobs
        .running_on
        .keys()
        .map(|n| &**n)
        .filter(|n| !shown.contains(n))
        .collect();
    // The partitions' node lists, expanded once (only here: a restart is rare).
    let listed: std::collections::HashSet<String> = match own {
        Some(_) => Default::default(),
        None => partitions
            .iter()
            .flat_map(|p| crate::model::text::expand_hostlist(&p.node_list, p.total_nodes as usize))
            .collect(),
    };
    let ours = |n: &str| own.map_or_else(|| listed.contains(n), |o| of_nodeset(n, o));
    unlisted.into_iter().filter(|n| ours(n)).count() as u64
}

/// When each of `members` is free for new work: idle ones now, busy ones when the last of
/// their jobs reaches its time limit (`None`: a time not known); nodes that take no job
/// (down, drained, FUTURE) are left out.
fn free_at<'a>(jobs: &'a Jobs, members: &'a [&Node]) -> impl Iterator<Item = Option<i64>> + 'a {
    members
        .iter()
        .filter_map(|n| match jobs.running_on.get(n.name.as_str()) {
            Some(work) => Some(work.free_at),
            None if n.usable() && !n.busy() => Some(Some(i64::MIN)),
            None if n.busy() => Some(None),
            None => None,
        })
}

/// How the NodeSet takes each job of `partitions` Slurm has a fresh plan for, by job id:
/// through `line` (its nodes and room), once the jobs without one (booted for at once, as
/// before) took their room, in the order the jobs are listed (slurmctld's, by job id: first
/// come, first served, as the backfill scheduler tests them where no priority of its own
/// reorders them). Jobs of more than `max_nodes` are unsatisfiable, not timed.
fn timed(
    jobs: &Jobs,
    partitions: &[&str],
    mut line: Timeline,
    max_nodes: Option<u64>,
    takes: &Takes<'_>,
) -> HashMap<u64, Take> {
    let mut planned = Vec::new();
    for job in jobs.pending.iter().filter(|j| {
        j.class == PendingClass::Schedulable
            && j.tasks > 0
            && j.partitions.iter().any(|p| partitions.contains(&&**p))
    }) {
        let nodes = match takes.job(job) {
            Take::Yes => job.nodes,
            Take::Part(n) => n,
            _ => continue,
        };
        if max_nodes.is_some_and(|m| nodes > m) {
            continue;
        }
        match &job.planned_start {
            Some(p) if job.tasks == 1 && line.fresh(p.start) => {
                planned.push((p.start, job.id, nodes));
            }
            _ => line.reserve(job.tasks.saturating_mul(nodes)),
        }
    }
    planned
        .into_iter()
        .map(|(start, id, nodes)| (id, Take::timed(line.when(start, nodes), nodes)))
        .collect()
}

/// The partitions a NodeSet serves: the one a site names (its `slurmscale.io/partition`
/// annotation); else those Slurm lists it in ([`partitions_listing`]); else, where slurmrestd
/// does not say (v0.0.38), no partition lists it or no snapshot is there yet, the partition
/// of its name in Slurm, as slurm-operator 1.0 makes it.
pub fn partitions_served(
    snap: Option<&ClusterSnapshot>,
    named: Option<&str>,
    slurm_name: &str,
) -> Vec<String> {
    if let Some(p) = named {
        return vec![p.to_string()];
    }
    let listing = snap.map_or_else(Vec::new, |s| partitions_listing(s, slurm_name));
    if listing.is_empty() {
        vec![slurm_name.to_string()]
    } else {
        listing
    }
}

/// The partitions Slurm lists the NodeSet `slurm_name` in: those whose `Nodes=` names its
/// `NodeSet=` (slurm-operator's own per-NodeSet partition, and from 1.1 a site's partitions
/// over several NodeSets) or is `ALL`, in Slurm's order.
pub fn partitions_listing(snap: &ClusterSnapshot, slurm_name: &str) -> Vec<String> {
    snap.partitions
        .data
        .iter()
        .flat_map(|ps| ps.iter())
        .filter(|p| p.node_sets.includes(slurm_name) == Some(true))
        .map(|p| p.name.to_string())
        .collect()
}

/// How old Slurm data may be before a scaler must not act on it: three poll intervals (two
/// polls may fail or run late before anything is concluded) plus the time one collection
/// itself may take (a large `/jobs` answers in seconds) — or three of the endpoint's current
/// gaps, when the poll budget spaces its requests further apart (a slow but healthy
/// slurmrestd; see `trusted`). The exporter's desired-nodes metric and the autoscaler both
/// use it, so KEDA and the built-in controller refuse the same data.
pub fn stale_after(interval: Duration) -> Duration {
    interval * 3 + Duration::from_secs(5)
}

/// The Slurm cluster a NodeSet or a NodeSetAutoscaler belongs to: the one it names, else
/// the only one read; `None` when it names none and several are read.
pub fn cluster_of<'a>(
    named: Option<&'a str>,
    mut read: impl ExactSizeIterator<Item = &'a str>,
) -> Option<&'a str> {
    match named {
        Some(c) => Some(c),
        None if read.len() == 1 => read.next(),
        None => None,
    }
}

/// Nodes a partition should have now: busy nodes plus the nodes pending work needs, within
/// `[min, max]`. Busy nodes are never given up, even above `max`.
pub fn desired_nodes(busy: u64, demand_nodes: u64, min: u64, max: u64) -> u64 {
    busy.saturating_add(demand_nodes)
        .clamp(min, max.max(min))
        .max(busy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::fixtures;
    use crate::model::PendingClass;

    /// The fixture cluster as a slurm-operator 1.1 site lays it out: `all` over every node
    /// (`Nodes=ALL`), `fast` over the NodeSet `bravo` (no pod yet), the fixture's `cpu` and
    /// `gpu` of named nodes; bob's pending two-node job is submitted to both `cpu` and `all`.
    fn site() -> ClusterSnapshot {
        let nodes = fixtures::NODES
            .replace(r#"["cpu"]"#, r#"["cpu", "all"]"#)
            .replace(r#"["gpu"]"#, r#"["gpu", "all"]"#);
        let partitions = fixtures::PARTITIONS.replace(
            r#"{"partitions": ["#,
            r#"{"partitions": [
              {"name": "all", "node_sets": "ALL", "nodes": {"configured": "c[1-3],g1", "total": 4},
               "cpus": {"total": 40}, "partition": {"state": ["UP"]}},
              {"name": "fast", "node_sets": "bravo", "nodes": {"configured": "", "total": 0},
               "cpus": {"total": 0}, "partition": {"state": ["UP"]}},"#,
        );
        let jobs = fixtures::JOBS.replace(
            r#""partition": "cpu", "user_name": "bob""#,
            r#""partition": "cpu,all", "user_name": "bob""#,
        );
        fixtures::snapshot_of(&nodes, &partitions, &jobs)
    }

    /// The signals of `partitions` of `s`, every job counted, at the fixture's time.
    fn signals_of(s: &ClusterSnapshot, partitions: &[&str]) -> Result<PartitionSignals, Untrusted> {
        partition_signals(
            s,
            partitions,
            None,
            &ShapeHints::default(),
            &Takes::ALL,
            None,
            fixtures::now(),
            Duration::from_secs(600),
        )
    }

    #[test]
    fn a_nodeset_serves_the_partition_named_for_it_else_those_slurm_puts_it_in() {
        let s = site();
        // In `fast` by name, in `all` as every NodeSet is.
        assert_eq!(partitions_served(Some(&s), None, "bravo"), ["all", "fast"]);
        assert_eq!(partitions_served(Some(&s), None, "charlie"), ["all"]);
        // A site's annotation decides.
        assert_eq!(partitions_served(Some(&s), Some("gpu"), "bravo"), ["gpu"]);
        // Where slurmrestd does not say (v0.0.38) or nothing lists it: its own name, the
        // partition slurm-operator 1.0 makes for it.
        let old = fixtures::snapshot();
        assert_eq!(partitions_served(Some(&old), None, "cpu"), ["cpu"]);
    }

    /// After a slurmctld restart a node may show idle (or not responding) until its slurmd
    /// registers again, while the job list says a job still runs there: busy all the same.
    #[test]
    fn a_node_a_running_job_is_on_is_busy_whatever_its_state_says() {
        let mut s = fixtures::snapshot();
        let signals = |s: &ClusterSnapshot| signals_of(s, &["cpu"]).unwrap().busy_nodes;
        assert_eq!(signals(&s), 1);
        let jobs = s.jobs.data.as_deref().unwrap();
        assert!(jobs.running_on.contains_key("c2"), "{:?}", jobs.running_on);
        let mut nodes = (**s.nodes.data.as_ref().unwrap()).clone();
        let c2 = nodes.iter_mut().find(|n| n.name == "c2").unwrap();
        c2.state.base = crate::model::NodeBase::Idle;
        c2.state.flags = crate::model::NodeFlags::NOT_RESPONDING;
        c2.alloc_cpus = 0;
        c2.alloc_memory_bytes = 0;
        assert!(!c2.busy());
        s.nodes.data = Some(std::sync::Arc::new(nodes));
        assert_eq!(signals(&s), 1, "c2 still runs its job");
        // Not listed at all (24.11 shows a FUTURE record, left out of /nodes, until the
        // slurmd registers again): busy still, as a node of the partition.
        let listed = s.nodes.data.as_ref().unwrap().clone();
        let without: Vec<_> = listed.iter().filter(|n| n.name != "c2").cloned().collect();
        s.nodes.data = Some(std::sync::Arc::new(without));
        assert_eq!(signals(&s), 1, "c2 runs its job, unlisted");
        s.nodes.data = Some(listed);
        // The job's record names no node (or none the partition lists): the job still holds
        // one of the partition's nodes, and the NodeSet keeps it.
        let mut jobs = (**s.jobs.data.as_ref().unwrap()).clone();
        jobs.running_on.clear();
        s.jobs.data = Some(std::sync::Arc::new(jobs.clone()));
        assert_eq!(
            signals(&s),
            1,
            "a job runs in the partition, its nodes not named"
        );
        // Without the job, the same node is idle.
        jobs.partitions.get_mut("cpu").unwrap().running_nodes_max = 0;
        s.jobs.data = Some(std::sync::Arc::new(jobs));
        assert_eq!(signals(&s), 0);
    }

    #[test]
    fn a_node_or_a_job_in_two_served_partitions_counts_once() {
        let s = site();
        let signals = |partitions: &[&str]| signals_of(&s, partitions).unwrap();
        let (cpu, both) = (signals(&["cpu"]), signals(&["cpu", "all"]));
        // c2 runs a job in `cpu` and `all`; g1 in `all` only.
        assert_eq!((cpu.busy_nodes, both.busy_nodes), (1, 2));
        assert_eq!((cpu.total_nodes, both.total_nodes), (3, 4));
        // Bob's job, pending in both, is demand once: as much as in `cpu` alone.
        assert_eq!(both.demand.jobs(PendingClass::Schedulable), 1);
        assert_eq!(both.demand.nodes, cpu.demand.nodes);
        assert!(cpu.demand.nodes > 0);
        // A partition Slurm does not know is no partition to scale for.
        assert!(matches!(
            signals_of(&s, &["cpu", "gone"]),
            Err(Untrusted::UnknownPartition(p)) if p == "gone"
        ));
    }

    #[test]
    fn data_is_stale_after_three_intervals_and_a_collection() {
        assert_eq!(stale_after(Duration::from_secs(2)), Duration::from_secs(11));
        assert_eq!(
            stale_after(Duration::from_secs(30)),
            Duration::from_secs(95)
        );
    }

    #[test]
    fn the_cluster_is_the_one_named_or_the_only_one() {
        let one = ["a"];
        let two = ["a", "b"];
        assert_eq!(cluster_of(Some("b"), one.into_iter()), Some("b"));
        assert_eq!(cluster_of(None, one.into_iter()), Some("a"));
        assert_eq!(cluster_of(None, two.into_iter()), None);
        assert_eq!(cluster_of(None, [].into_iter()), None);
    }

    #[test]
    fn desired_is_busy_plus_demand_within_bounds_and_never_below_busy() {
        assert_eq!(desired_nodes(0, 0, 0, 8), 0);
        assert_eq!(desired_nodes(0, 3, 0, 8), 3);
        assert_eq!(desired_nodes(2, 3, 0, 8), 5);
        assert_eq!(desired_nodes(2, 30, 0, 8), 8);
        assert_eq!(desired_nodes(0, 0, 1, 8), 1);
        assert_eq!(
            desired_nodes(9, 0, 0, 8),
            9,
            "busy nodes are never given up"
        );
    }
}
