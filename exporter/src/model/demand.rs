//! Pending demand of a partition: what its schedulable pending jobs need, counted the way a
//! scaler must count it — an array's tasks each count, held jobs and jobs waiting on
//! dependencies or begin times do not, a job larger than the partition could ever be is
//! reported, not chased — and **packed**: the work first fills the free room of the nodes
//! that are up, then new nodes of the partition's shape ([`super::packing`]), so 64 one-CPU
//! jobs on 32-CPU nodes need 2 nodes, not 64. The exporter's demand metrics and the
//! autoscaler's policy both call [`demand`].
//!
//! The shape comes from the partition itself (its CPUs, and the memory and GPUs of its
//! configured TRES, over its node count: FUTURE nodes included, which `/nodes` hides), or
//! from an override. A dimension it cannot tell (GPUs missing from the TRES and no node of
//! the partition up to look at) is not guessed: jobs asking for it count one node per job
//! node, as before packing.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use super::packing::{self, Ask, FreeNode, Packed, Resources};
use super::{Jobs, Node, Partition, PendingClass};

/// The nodes a NodeSet adds to a partition; `None` where it is not known.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shape {
    pub cpus: Option<u64>,
    pub memory_bytes: Option<u64>,
    pub gpus: Option<u64>,
}

impl Shape {
    /// The average node of `partition` (exact for a NodeSet's partition, whose nodes share
    /// one pod template); GPUs, when its TRES does not say, from its nodes that are up.
    pub fn of(partition: &Partition, nodes: &[Node]) -> Self {
        let n = partition.total_nodes;
        let per = |total: u64| (n > 0 && total > 0).then(|| total / n);
        let up_gpus = || {
            nodes
                .iter()
                .filter(|node| in_any(node, &[&partition.name]))
                .map(Node::gpus)
                .max()
        };
        Self {
            cpus: per(partition.total_cpus),
            memory_bytes: partition.total_memory_bytes.and_then(per),
            // A partition with no nodes (a Slinky NodeSet's at zero pods) tells nothing.
            gpus: match partition.total_gpus {
                Some(g) => g.checked_div(n),
                None => up_gpus(),
            },
        }
    }

    /// `cpus=32,memory=128Gi,gpus=8` (any of them; memory as a Kubernetes quantity). What
    /// does not parse is left out, so the partition's own value stands.
    pub fn parse(s: &str) -> Self {
        let mut shape = Self::default();
        for (key, value) in s.split(',').filter_map(|kv| kv.split_once('=')) {
            let value = value.trim();
            match key.trim() {
                "cpus" => shape.cpus = value.parse().ok(),
                "memory" => shape.memory_bytes = crate::quantity::parse(value).map(|b| b as u64),
                "gpus" => shape.gpus = value.parse().ok(),
                _ => {}
            }
        }
        shape
    }

    /// `self`, with what `over` says instead where it says something.
    pub fn or(self, over: Shape) -> Self {
        Self {
            cpus: over.cpus.or(self.cpus),
            memory_bytes: over.memory_bytes.or(self.memory_bytes),
            gpus: over.gpus.or(self.gpus),
        }
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} CPUs", self.cpus.unwrap_or(0))?;
        if let Some(m) = self.memory_bytes.filter(|m| *m > 0) {
            let gib = m as f64 / f64::from(1u32 << 30);
            if gib.fract() == 0.0 {
                write!(f, ", {gib} GiB")?;
            } else {
                write!(f, ", {gib:.1} GiB")?;
            }
        }
        match self.gpus {
            Some(g) if g > 0 => write!(f, ", {g} GPUs"),
            _ => Ok(()),
        }
    }
}

/// Where a partition's pending work can go: the free room of its nodes that are up, and new
/// nodes of its shape.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Room {
    pub shape: Shape,
    pub free: Vec<FreeNode>,
}

impl Room {
    /// The room of the nodes of `partitions` (each node once), for new nodes of `shape`.
    pub fn new<'a>(
        partitions: &[&str],
        nodes: impl IntoIterator<Item = &'a Node>,
        shape: Shape,
    ) -> Self {
        let free = nodes
            .into_iter()
            .filter(|n| n.usable() && n.idle_cpus() > 0)
            .filter(|n| in_any(n, partitions))
            .map(|n| {
                let total = Resources {
                    cpus: n.cpus,
                    memory_bytes: n.memory_bytes,
                    gpus: n.gpus(),
                };
                FreeNode {
                    total,
                    free: Resources {
                        cpus: n.idle_cpus(),
                        memory_bytes: n.memory_bytes.saturating_sub(n.alloc_memory_bytes),
                        gpus: total.gpus.saturating_sub(n.gpus_alloc()),
                    },
                    idle: !n.busy(),
                }
            })
            .collect();
        Self { shape, free }
    }
}

/// Whether `n` is in one of `partitions`.
pub fn in_any(n: &Node, partitions: &[&str]) -> bool {
    n.partitions.iter().any(|p| partitions.contains(&&**p))
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Demand {
    /// Job-equivalents (array tasks counted) pending in the partition, by class.
    pub jobs: BTreeMap<PendingClass, u64>,
    /// Nodes the schedulable jobs that fit need beyond the busy ones: the idle nodes they
    /// would land on plus the new nodes they need, packed. Without a known shape, as
    /// `job_nodes`.
    pub nodes: u64,
    /// One node per job node (a 3-node job counts 3, eight 1-CPU jobs count 8): the figure
    /// before packing, kept for dashboards.
    pub job_nodes: u64,
    /// Of `nodes`, those that jobs which may have started since the job list was last exact
    /// would take ([`super::Uncertainty`]): `nodes` less this is certainly needed, and a
    /// scaler grows only that far. 0 when the list is exact.
    pub maybe_started_nodes: u64,
    /// New jobs may be missing from the list: more nodes than `nodes` may be needed, so a
    /// scaler must not shrink.
    pub open_ended: bool,
    /// How the packed figure came about; `None` without a known shape.
    pub packing: Option<(Shape, Packed)>,
    /// CPUs, GPUs and bytes of memory schedulable jobs that fit need, all together.
    pub cpus: u64,
    pub gpus: u64,
    pub memory_bytes: u64,
    /// The largest node count one fitting schedulable job needs at once.
    pub max_job_nodes: u64,
    /// Schedulable jobs that can never start here: more nodes than the limit, or more on
    /// one node than the partition's nodes have.
    pub unsatisfiable_jobs: u64,
    /// Submit time of the oldest schedulable job.
    pub oldest_submit: Option<i64>,
    /// Schedulable jobs of the partitions another NodeSet grows for ([`super::grows`]):
    /// not counted above.
    pub elsewhere_jobs: u64,
    /// Of `unsatisfiable_jobs`, those no NodeSet of the partitions can run (their node
    /// shape, GPUs or features; [`Take::Nobody`]).
    pub no_nodeset_jobs: u64,
    /// Schedulable jobs counted above whose nodes span this NodeSet and others
    /// ([`Take::Part`]): only its part of their nodes is counted.
    pub part_jobs: u64,
    /// Schedulable jobs Slurm plans to start on nodes that free up no later than new ones
    /// could ([`Take::Planned`]): not counted above.
    pub planned_jobs: u64,
    /// Schedulable jobs that new nodes start sooner than Slurm's plan, but only once busy
    /// nodes free up ([`Take::Deferred`]): not counted above; the new nodes they need, and
    /// when the first must be asked for (unix seconds).
    pub deferred_jobs: u64,
    pub deferred_nodes: u64,
    pub next_boot: Option<i64>,
    /// The nodes the widest of those needs: slurmctld plans a job only on nodes that exist,
    /// so the NodeSet keeps at least this many (a job it stopped planning would no longer
    /// hold its reservation, and smaller jobs would pass it for good).
    pub plan_keeps: u64,
}

impl Demand {
    pub fn jobs(&self, class: PendingClass) -> u64 {
        self.jobs.get(&class).copied().unwrap_or(0)
    }

    /// Nodes certainly needed (see [`Self::maybe_started_nodes`]).
    pub fn floor_nodes(&self) -> u64 {
        self.nodes.saturating_sub(self.maybe_started_nodes)
    }

    /// One line on how the node figure came about, for decisions and events:
    /// `64 pending jobs (64 CPUs) fit 2 new nodes of 32 CPUs`.
    pub fn explain(&self) -> String {
        let jobs = (self.jobs(PendingClass::Schedulable))
            .saturating_sub(self.planned_jobs + self.deferred_jobs);
        let what = format!("{jobs} pending jobs ({} CPUs", self.cpus);
        let what = if self.gpus > 0 {
            format!("{what}, {} GPUs)", self.gpus)
        } else {
            format!("{what})")
        };
        let mut said = match &self.packing {
            Some((shape, p)) => {
                let mut s = format!("{what} fit {} new nodes of {shape}", p.new_nodes);
                if p.idle_nodes_used > 0 {
                    s.push_str(&format!(" and {} idle ones", p.idle_nodes_used));
                }
                if p.on_free_nodes > 0 {
                    s.push_str(&format!(", {} on free room", p.on_free_nodes));
                }
                s
            }
            None => format!("{what} need {} nodes (node shape unknown)", self.job_nodes),
        };
        if self.part_jobs > 0 {
            said.push_str(&format!(
                "; {} of them span other NodeSets too, counted for their nodes here",
                self.part_jobs
            ));
        }
        if self.elsewhere_jobs > 0 {
            said.push_str(&format!(
                "; {} more grow other NodeSets of its partitions",
                self.elsewhere_jobs
            ));
        }
        said.push_str(&self.explain_timing());
        said
    }

    /// What the planned jobs left out of the node figure wait for ([`super::timing`]);
    /// empty when none.
    pub fn explain_timing(&self) -> String {
        let mut said = String::new();
        if self.planned_jobs > 0 {
            said.push_str(&format!(
                "; {} more Slurm plans to start on nodes that free up sooner than new ones could",
                self.planned_jobs
            ));
        }
        if let (true, Some(at)) = (self.deferred_jobs > 0, self.next_boot) {
            let at = chrono::DateTime::from_timestamp(at, 0).unwrap_or_default();
            said.push_str(&format!(
                "; {} more start sooner than Slurm's plan on {} new nodes once busy ones free \
                 up: the first booted at {} (one boot before)",
                self.deferred_jobs,
                self.deferred_nodes,
                at.format("%H:%M:%SZ")
            ));
        }
        said
    }
}

/// Demand in `partition`. Jobs needing more than `max_nodes` nodes (the partition's size, or
/// a NodeSet's maximum) are unsatisfiable, not demand. With `room`, the work is packed onto
/// it; without, each job counts its own nodes.
pub fn demand(jobs: &Jobs, partition: &str, max_nodes: Option<u64>, room: Option<&Room>) -> Demand {
    demand_of(jobs, &[partition], max_nodes, room, &|_| Take::Yes)
}

/// What a scaler makes of one pending job of its partitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Take {
    /// Its demand.
    Yes,
    /// Not its to count: another origin's.
    Other,
    /// Another NodeSet of its partitions grows for it.
    Elsewhere,
    /// Nothing can run it: unsatisfiable, never demand.
    Nobody,
    /// This many of its nodes: it spans this NodeSet and others.
    Part(u64),
    /// Slurm's plan starts it on nodes that free up no later than new ones could
    /// ([`super::timing::When::Wait`]): not demand, but its `.0` nodes must stay for Slurm
    /// to keep planning it.
    Planned(u64),
    /// New nodes start it sooner than Slurm's plan once busy ones free up: `nodes` of them
    /// booted at `at` ([`super::timing::When::Later`]), not now; its `of` nodes must stay
    /// for Slurm to keep planning it.
    Deferred { at: i64, nodes: u64, of: u64 },
    /// This many of its nodes are demand now; the rest free up before new ones could boot
    /// ([`super::timing::When::Now`]).
    Now(u64),
}

impl Take {
    /// What a job of `nodes` nodes that [`super::timing`] found `w` is.
    pub fn timed(w: super::timing::When, nodes: u64) -> Self {
        use super::timing::When;
        match w {
            When::Now(0) | When::Wait(_) => Self::Planned(nodes),
            When::Now(nodes) => Self::Now(nodes),
            When::Later { at, nodes: new } => Self::Deferred {
                at,
                nodes: new,
                of: nodes,
            },
        }
    }
}

/// As [`demand`], over the jobs pending in any of `partitions` (each job once), as `take`
/// says of each (for a NodeSet: [`super::grows::Takes`]).
pub fn demand_of(
    jobs: &Jobs,
    partitions: &[&str],
    max_nodes: Option<u64>,
    room: Option<&Room>,
    take: &dyn Fn(&super::PendingJob) -> Take,
) -> Demand {
    let mut d = Demand::default();
    let mut fitting = Vec::new();
    let shape = room.map(|r| r.shape).filter(|s| s.cpus.is_some());
    for job in jobs
        .pending
        .iter()
        .filter(|j| j.partitions.iter().any(|p| partitions.contains(&&**p)))
    {
        let take = take(job);
        if take == Take::Other {
            continue;
        }
        if take == Take::Elsewhere {
            if job.class == PendingClass::Schedulable {
                d.elsewhere_jobs += job.tasks;
            }
            continue;
        }
        *d.jobs.entry(job.class).or_default() += job.tasks;
        if job.throttled > 0 {
            *d.jobs.entry(PendingClass::Throttled).or_default() += job.throttled;
        }
        if job.class != PendingClass::Schedulable || job.tasks == 0 {
            continue;
        }
        if d.waits_for_plan(take, job.tasks) {
            continue;
        }
        // A job spanning NodeSets counts only its part here, as many nodes as it holds; a
        // planned job, the nodes it needs now.
        let job = match take {
            Take::Part(nodes) | Take::Now(nodes) => Cow::Owned(part(job, nodes)),
            _ => Cow::Borrowed(job),
        };
        if take == Take::Nobody || max_nodes.is_some_and(|max| job.nodes > max) {
            d.unsatisfiable_jobs += job.tasks;
            if take == Take::Nobody {
                d.no_nodeset_jobs += job.tasks;
            }
            continue;
        }
        if matches!(take, Take::Part(_)) {
            d.part_jobs += job.tasks;
        }
        d.job_nodes = d
            .job_nodes
            .saturating_add(job.tasks.saturating_mul(job.nodes));
        d.cpus = d.cpus.saturating_add(job.tasks.saturating_mul(job.cpus));
        d.gpus = d.gpus.saturating_add(job.tasks.saturating_mul(job.gpus));
        d.memory_bytes = d
            .memory_bytes
            .saturating_add(job.tasks.saturating_mul(job.memory_bytes));
        d.max_job_nodes = d.max_job_nodes.max(job.nodes);
        if let Some(t) = job.submit_time {
            d.oldest_submit = Some(d.oldest_submit.map_or(t, |o| o.min(t)));
        }
        fitting.push((job.tasks, job));
    }
    let (nodes, packed) = nodes_for(&fitting, shape.zip(room), max_nodes);
    d.nodes = nodes;
    if let Some(p) = packed {
        d.unsatisfiable_jobs += p.1.unsatisfiable;
        d.packing = Some(p);
    }
    // A job list kept incrementally may still count jobs that have started (and whose
    // nodes are already busy): at least what is left without the largest of them is
    // certainly wanted.
    let maybe_left = jobs.uncertain.maybe_left;
    if maybe_left > 0 {
        fitting.sort_by_key(|(_, j)| std::cmp::Reverse((j.nodes, j.cpus, j.gpus)));
        let mut left = maybe_left;
        for (tasks, _) in fitting.iter_mut() {
            let take = left.min(*tasks);
            *tasks -= take;
            left -= take;
        }
        let floor = nodes_for(&fitting, shape.zip(room), max_nodes).0;
        d.maybe_started_nodes = d.nodes.saturating_sub(floor);
    }
    d.open_ended = jobs.uncertain.unseen_new || jobs.uncertain.unread > 0;
    d
}

impl Demand {
    /// Counts a job that `take` says waits for Slurm's plan ([`Take::Planned`],
    /// [`Take::Deferred`]); false for any other.
    fn waits_for_plan(&mut self, take: Take, tasks: u64) -> bool {
        let of = match take {
            Take::Planned(of) => {
                self.planned_jobs += tasks;
                of
            }
            Take::Deferred { at, nodes, of } => {
                self.deferred_jobs += tasks;
                self.deferred_nodes += nodes;
                self.next_boot = Some(self.next_boot.map_or(at, |t| t.min(at)));
                of
            }
            _ => return false,
        };
        self.plan_keeps = self.plan_keeps.max(of);
        true
    }
}

/// `job` on `nodes` of its nodes: the same share of each node.
fn part(job: &super::PendingJob, nodes: u64) -> super::PendingJob {
    let of = job.nodes.max(1);
    let share = |v: u64| v.div_ceil(of).saturating_mul(nodes);
    super::PendingJob {
        nodes,
        cpus: share(job.cpus),
        gpus: share(job.gpus),
        memory_bytes: share(job.memory_bytes),
        ..job.clone()
    }
}

/// Nodes `jobs` (tasks of each) need: packed onto `room` and new nodes of its shape when
/// the shape is known, else one per job node.
fn nodes_for(
    jobs: &[(u64, Cow<'_, super::PendingJob>)],
    room: Option<(Shape, &Room)>,
    max_nodes: Option<u64>,
) -> (u64, Option<(Shape, Packed)>) {
    let Some((shape, room)) = room else {
        let sum = jobs.iter().fold(0u64, |n, (tasks, j)| {
            n.saturating_add(tasks.saturating_mul(j.nodes))
        });
        return (sum, None);
    };
    let asks: Vec<Ask> = jobs
        .iter()
        .filter(|(tasks, _)| *tasks > 0)
        .map(|(tasks, j)| ask(*tasks, j.nodes, j, shape))
        .collect();
    let node = Resources {
        cpus: shape.cpus.unwrap_or(0),
        memory_bytes: shape.memory_bytes.unwrap_or(0),
        gpus: shape.gpus.unwrap_or(0),
    };
    let p = packing::pack(&room.free, node, &asks, max_nodes.unwrap_or(u64::MAX));
    (p.nodes(), Some((shape, p)))
}

/// A job as packing sees it: its share of each of its nodes. What the shape cannot tell
/// (memory or GPUs of unknown nodes) makes the job take whole nodes, as before packing.
fn ask(count: u64, nodes: u64, job: &super::PendingJob, shape: Shape) -> Ask {
    let nodes = nodes.max(1);
    let share = |v: u64| v.div_ceil(nodes);
    let memory = share(job.memory_bytes);
    let gpus = share(job.gpus);
    let unknown =
        (memory > 0 && shape.memory_bytes.is_none()) || (gpus > 0 && shape.gpus.is_none());
    Ask {
        count,
        nodes,
        per_node: Resources {
            cpus: share(job.cpus),
            memory_bytes: if shape.memory_bytes.is_some() {
                memory
            } else {
                0
            },
            gpus: if shape.gpus.is_some() { gpus } else { 0 },
        },
        whole_node: job.whole_node || unknown,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::{Gres, NodeState, PendingJob};

    const GIB: u64 = 1 << 30;

    fn partition(nodes: u64, cpus: u64, memory: Option<u64>, gpus: Option<u64>) -> Partition {
        Partition {
            name: Arc::from("p"),
            state: "UP".into(),
            total_nodes: nodes,
            total_cpus: nodes * cpus,
            total_memory_bytes: memory.map(|m| nodes * m),
            total_gpus: gpus.map(|g| nodes * g),
            max_nodes_per_job: None,
            node_list: String::new(),
            never_suspends: false,
            node_sets: Default::default(),
        }
    }

    fn node(name: &str, words: &str, alloc_cpus: u64, gpus: u64) -> Node {
        let gres = |count| {
            vec![Gres {
                name: Arc::from("gpu"),
                kind: Arc::from(""),
                count,
            }]
        };
        Node {
            name: name.into(),
            state: NodeState::from_words([words]),
            partitions: vec![Arc::from("p")],
            cpus: 8,
            alloc_cpus,
            memory_bytes: 32 * GIB,
            alloc_memory_bytes: alloc_cpus * GIB,
            free_memory_bytes: None,
            gres: gres(gpus),
            gres_used: gres(0),
            reason: String::new(),
            reason_set_by: String::new(),
        }
    }

    fn jobs(list: &[(u64, u64, u64, u64, bool)]) -> Jobs {
        let parts: Arc<[Arc<str>]> = Arc::from(vec![Arc::from("p")]);
        Jobs {
            pending: list
                .iter()
                .enumerate()
                .map(|(i, &(tasks, nodes, cpus, gpus, whole_node))| PendingJob {
                    id: i as u64,
                    partitions: parts.clone(),
                    class: PendingClass::Schedulable,
                    reason: Arc::from("Resources"),
                    tasks,
                    throttled: 0,
                    nodes,
                    cpus,
                    gpus,
                    memory_bytes: cpus * GIB,
                    whole_node,
                    constraint: Arc::from(""),
                    excluded: Arc::from(""),
                    submit_time: None,
                    origin: super::super::origin::Origin::Batch,
                    planned_start: None,
                })
                .collect(),
            ..Jobs::default()
        }
    }

    #[test]
    fn the_shape_comes_from_the_partitions_configured_tres() {
        let p = partition(8, 4, Some(8000 << 20), None);
        let shape = Shape::of(&p, &[]);
        assert_eq!(shape.cpus, Some(4));
        assert_eq!(shape.memory_bytes, Some(8000 << 20));
        assert_eq!(
            shape.gpus, None,
            "no GPUs in the TRES and no node up to look at"
        );
        // GPUs from a node of the partition that is up.
        let shape = Shape::of(&p, &[node("g1", "IDLE", 0, 4)]);
        assert_eq!(shape.gpus, Some(4));
        // An override wins where it says something.
        let over = Shape::parse("gpus=8, memory=64Gi, bogus=1, cpus=x");
        assert_eq!(
            over,
            Shape {
                cpus: None,
                memory_bytes: Some(64 * GIB),
                gpus: Some(8)
            }
        );
        assert_eq!(shape.or(over).gpus, Some(8));
        assert_eq!(shape.or(over).cpus, Some(4));
    }

    #[test]
    fn packed_demand_and_the_unpacked_count_side_by_side() {
        let p = partition(8, 4, Some(32 * GIB), Some(0));
        let room = Room::new(&["p"], &[], Shape::of(&p, &[]));
        // Nine 1-CPU jobs: 3 nodes of 4 CPUs, 9 job nodes.
        let d = demand(&jobs(&[(9, 1, 1, 0, false)]), "p", Some(8), Some(&room));
        assert_eq!((d.nodes, d.job_nodes), (3, 9));
        assert_eq!(
            d.explain(),
            "9 pending jobs (9 CPUs) fit 3 new nodes of 4 CPUs, 32 GiB"
        );
        // Without a room (no partition data), the old count.
        let d = demand(&jobs(&[(9, 1, 1, 0, false)]), "p", Some(8), None);
        assert_eq!(d.nodes, 9);
        // Exclusive jobs take whole nodes.
        let d = demand(&jobs(&[(3, 1, 1, 0, true)]), "p", Some(8), Some(&room));
        assert_eq!(d.nodes, 3);
    }

    #[test]
    fn drained_and_down_nodes_offer_no_room() {
        let p = partition(8, 8, Some(32 * GIB), Some(0));
        let nodes = [
            node("a", "IDLE+DRAIN", 0, 0),
            node("b", "DOWN", 0, 0),
            node("c", "MIXED", 4, 0),
            node("d", "IDLE", 0, 0),
        ];
        let room = Room::new(&["p"], &nodes, Shape::of(&p, &nodes));
        assert_eq!(room.free.len(), 2, "only c (4 CPUs free) and d (idle)");
        // Twelve 1-CPU jobs: 4 on c's free room (busy already: no node added), 8 on d.
        let d = demand(&jobs(&[(12, 1, 1, 0, false)]), "p", Some(8), Some(&room));
        let packed = d.packing.unwrap().1;
        assert_eq!(
            (packed.idle_nodes_used, packed.new_nodes, d.nodes),
            (1, 0, 1)
        );
    }

    #[test]
    fn gpu_jobs_on_nodes_of_unknown_gpus_count_a_node_each() {
        let p = partition(4, 32, Some(256 * GIB), None);
        let room = Room::new(&["p"], &[], Shape::of(&p, &[]));
        let d = demand(&jobs(&[(4, 1, 2, 1, false)]), "p", Some(4), Some(&room));
        assert_eq!(
            d.nodes, 4,
            "never guess GPUs: one node per job, as before packing"
        );
        // Told the shape, they share one node.
        let room = Room::new(&["p"], &[], Shape::of(&p, &[]).or(Shape::parse("gpus=8")));
        let d = demand(&jobs(&[(4, 1, 2, 1, false)]), "p", Some(4), Some(&room));
        assert_eq!(d.nodes, 1);
    }

    #[test]
    fn jobs_that_may_have_started_lower_the_certain_demand_by_the_largest() {
        let p = partition(8, 4, Some(32 * GIB), Some(0));
        let room = Room::new(&["p"], &[], Shape::of(&p, &[]));
        // One 3-node exclusive job and four 1-CPU jobs: 3 + 1 nodes.
        let mut j = jobs(&[(1, 3, 3, 0, true), (4, 1, 1, 0, false)]);
        let d = demand(&j, "p", Some(8), Some(&room));
        assert_eq!((d.nodes, d.floor_nodes()), (4, 4));
        // One job may have started: the certain demand is what remains without the largest.
        j.uncertain.maybe_left = 1;
        let d = demand(&j, "p", Some(8), Some(&room));
        assert_eq!((d.nodes, d.floor_nodes(), d.open_ended), (4, 1, false));
        j.uncertain.unseen_new = true;
        assert!(demand(&j, "p", Some(8), Some(&room)).open_ended);
    }
}
