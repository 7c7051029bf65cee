//! The simulated partition: nodes that boot, run jobs and go away, and a scheduler that
//! places jobs the way slurmctld's does for one partition of identical nodes.
//!
//! * Priority is submit order. The main scheduler runs whenever something changed (a job
//!   was submitted or ended, a node came up) and starts jobs in priority order until the
//!   first that does not fit: like slurmctld, it stops there so later jobs cannot delay it.
//! * EASY backfill runs every `bf_interval` (30 s, Slurm's default) when something changed:
//!   the first waiting job gets a reservation (the earliest time, from the running jobs'
//!   time limits, at which enough nodes are free for it, and which nodes); later jobs start
//!   now if they fit and either end before that time or leave the reserved nodes alone.
//! * Placement is best fit by CPUs over nodes with enough free CPUs, memory and GPUs, so
//!   small jobs pack onto partly used nodes and whole-node jobs take idle ones.
//! * Nodes are `Off`, `Booting` or `Up`. An elastic partition (a NodeSet) has `replicas`
//!   nodes: more boot and are usable `boot` seconds later; fewer go booting first, then idle,
//!   then busy ones are drained and leave when their last job ends (slurm-operator drains a
//!   Slurm node before deleting its pod). Under power saving every node is allocatable: a
//!   powered-down node the scheduler picks boots, its job starts when all its nodes are up,
//!   and a node idle for `SuspendTime` powers down. When a NodeSet follows slurmctld's
//!   requests ([`Mode::Planned`]), slurmctld only asks — a power-up or power-down posted at its
//!   next power-save pass, shown on the record — and a node exists while its pod does: whoever
//!   plays the autoscaler and slurm-operator adds and removes pods, a registering pod brings
//!   its node up, and a job on nodes that were powered down starts at slurmctld's periodic
//!   check after the last one is up.
//!
//! Times are unix seconds. Everything here is deterministic: the same trace and the same
//! scaling gives the same schedule. The scheduler and backfill are in [`scheduler`], what a
//! NodeSet following slurmctld's requests adds in [`planned`], a pool's NodeSet in [`pool`].

mod planned;
mod pool;
mod scheduler;

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};
use std::sync::Arc;

use super::operator;
use super::touched::Touched;
use super::trace::{NodeShape, TraceJob};

/// How nodes come and go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// A NodeSet: `replicas` nodes, set by a scaling policy.
    Elastic,
    /// A NodeSet on a pool shared with Kubernetes: which node slots it holds is decided
    /// outside ([`Cluster::provide`], [`Cluster::retire`]), as its pods land on and leave
    /// the pool's nodes, and its nodes can be drained and resumed by name.
    Pool,
    /// Slurm power saving: every node allocatable, powered down after `suspend_after` idle;
    /// slurmctld's ResumeProgram boots a node the moment it allocates it.
    PowerSave { suspend_after: i64 },
    /// Slurm power saving carried out by a NodeSet that follows slurmctld's requests
    /// (`slurm-planned`): slurmctld only asks, and a node exists while a pod does
    /// ([`Cluster::add_pod`], [`Cluster::remove_pod`], [`Cluster::resume_record`]).
    Planned(Requests),
    /// Every node up all the time.
    Static,
}

/// slurmctld's side of a NodeSet that follows its power requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Requests {
    /// `SuspendTime`: an idle node is asked to power down after this long.
    pub suspend_after: i64,
    /// `power_save_interval`: its power-save pass, which posts both kinds of request, runs
    /// on this grid.
    pub interval: i64,
    /// `PERIODIC_TIMEOUT`: a job whose nodes were powered up leaves CONFIGURING at this
    /// check after the last one registered.
    pub check_every: i64,
}

/// The first time at or after `t` on a grid of `every` seconds (`t` itself for 0).
fn grid(t: i64, every: i64) -> i64 {
    if every <= 0 {
        return t;
    }
    t.div_euclid(every) * every + if t.rem_euclid(every) == 0 { 0 } else { every }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Power {
    Off,
    Booting {
        ready_at: i64,
    },
    /// `Planned`: slurmctld allocated the powered-down node and asks for it (POWERING_UP
    /// once its power-save pass posted the request: `posted`); its pod makes it come up.
    Asked {
        posted: bool,
    },
    Up,
}

/// `Planned`: the NodeSet pod of a node slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pod {
    None,
    Starting { ready_at: i64 },
    Ready,
}

#[derive(Clone, Debug)]
struct Node {
    /// The NodeSet ([`Group`]) it belongs to.
    group: u32,
    power: Power,
    /// Accepts no new jobs; goes away when its last job ends.
    draining: bool,
    /// DRAINed by the autoscaler (pools): accepts no new jobs, stays when empty.
    drained: bool,
    free_cpus: u32,
    free_mem: u64,
    free_gpus: u32,
    /// Running (or, while booting, allocated) jobs.
    jobs: Vec<usize>,
    /// When it last became empty (power saving suspends from here).
    idle_since: i64,
    /// `Planned`: its pod; slurmctld asked it to power down (POWERING_DOWN) and its pod
    /// has not gone yet; its pod went and slurm-operator's scale-in left the record DRAIN,
    /// which only a RESUME clears.
    pod: Pod,
    powering_down: bool,
    left_drained: bool,
}

#[derive(Clone, Debug)]
struct Running {
    nodes: Vec<u32>,
    /// When backfill expects it to end: start + time limit.
    expected_end: i64,
}

/// What one job went through.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobTimes {
    pub start: i64,
    pub end: i64,
    /// The first node slot it was given.
    pub node: u32,
}

/// Scheduler tunables, as slurm.conf names them.
#[derive(Clone, Copy, Debug)]
pub struct SchedConfig {
    /// `bf_interval`: seconds between backfill passes.
    pub bf_interval: i64,
    /// `bf_max_job_test`: jobs one backfill pass considers.
    pub bf_max_job_test: usize,
    /// Seconds from asking for a node to its slurmd taking jobs.
    pub boot: i64,
}

impl Default for SchedConfig {
    fn default() -> Self {
        Self {
            bf_interval: 30,
            bf_max_job_test: 500,
            boot: 90,
        }
    }
}

/// A node as slurmrestd shows it: what is allocated, who drains it, its power state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeView {
    pub alloc_cpus: u32,
    pub alloc_memory_mib: u64,
    pub alloc_gpus: u32,
    pub drain: Option<DrainedBy>,
    pub power: PowerFlag,
}

/// The power flag slurmctld shows on a record (`Planned`; always `None` otherwise).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PowerFlag {
    None,
    PoweredDown,
    PoweringUp,
    PoweringDown,
}

/// Who set a node's DRAIN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DrainedBy {
    /// slurm-operator, removing the node's pod once its jobs end.
    Operator,
    /// The autoscaler, handing the node to Kubernetes (reason `slurmscale: …`).
    Autoscaler,
}

/// A node slot as a pool sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    Off,
    Booting,
    Idle,
    Busy,
}

/// Counters that change with every event, kept up to date so a policy or the statistics
/// never walk the nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Booting, up or draining: nodes someone pays for.
    pub provisioned: u32,
    /// Up and running at least one job.
    pub busy: u32,
    /// Jobs waiting.
    pub pending: u32,
    /// Nodes the waiting jobs ask for, summed job by job: it moves whenever the queue
    /// changes, so a scaler can tell its demand may have. Not the demand itself: that is
    /// what the exporter publishes, packed ([`super::view::SlurmView`]).
    pub pending_job_nodes: u64,
    /// `Planned`: bumped whenever a record's power state or a pod changes, so the
    /// autoscaler following slurmctld's requests knows to look.
    pub power_changes: u64,
    /// Bumped whenever a backfill pass plans other starts than the last, so a policy that
    /// reads the plans knows to look.
    pub plan_changes: u64,
}

impl Counts {
    /// Provisioned and running nothing: booting, idle or drained empty.
    pub fn idle(&self) -> u32 {
        self.provisioned.saturating_sub(self.busy)
    }
}

/// EASY backfill's one reservation: when the first waiting job starts at the latest, and the
/// nodes kept for it meanwhile.
#[derive(Clone, Debug, PartialEq)]
pub struct Reservation {
    pub job: usize,
    pub start: i64,
    pub nodes: Vec<u32>,
}

/// One NodeSet of a partition over several (a Slinky 1.1 layout): node slots
/// `first..first + len`, of one shape and one `Weight`, with replicas of its own. A cluster
/// made with [`Cluster::new`] is one group over every slot.
#[derive(Clone, Debug)]
pub struct Group {
    pub shape: NodeShape,
    /// Its nodes' `Weight=`: slurmctld allocates the lowest first.
    pub weight: u64,
    pub first: u32,
    pub len: u32,
    /// Its replicas: as scaled (elastic), its pods (slurm-planned, pools), or its size
    /// (static, power saving).
    pub replicas: u32,
    /// Booting, up or draining: nodes someone pays for.
    pub provisioned: u32,
    /// Up and running at least one job.
    pub busy: u32,
}

impl Group {
    fn slots(&self) -> std::ops::Range<u32> {
        self.first..self.first + self.len
    }
}

pub struct Cluster {
    /// Every node's shape (the first NodeSet's, when there are several: [`Cluster::groups`]).
    pub shape: NodeShape,
    pub mode: Mode,
    groups: Vec<Group>,
    /// The groups' indices, lowest `Weight` first (their order among equals): the order
    /// slurmctld looks through them.
    by_weight: Vec<usize>,
    cfg: SchedConfig,
    jobs: Arc<[TraceJob]>,
    nodes: Vec<Node>,
    /// Waiting jobs by priority (index order is submit order).
    queue: BTreeSet<usize>,
    /// Allocatable nodes with free CPUs, by (free CPUs, node): best fit is a range scan.
    free: BTreeSet<(u32, u32)>,
    /// Powered-down nodes, lowest first.
    off: BTreeSet<u32>,
    running: Vec<Option<Running>>,
    /// Running jobs by (expected end, job): what backfill plans with.
    by_expected_end: BTreeSet<(i64, usize)>,
    ends: BinaryHeap<Reverse<(i64, usize)>>,
    readies: BinaryHeap<Reverse<(i64, u32)>>,
    suspends: BinaryHeap<Reverse<(i64, u32)>>,
    /// `Planned`: power-ups slurmctld's next power-save pass posts.
    requests: BinaryHeap<Reverse<(i64, u32)>>,
    next_submit: usize,
    /// Since when something changed that backfill has not looked at.
    dirty: Option<i64>,
    /// Node slots whose Slurm view changed; each reader keeps its own place in it
    /// ([`Cluster::touched_since`]).
    touched: Touched,
    /// Counts every change of what slurmrestd would show (a node's state, the queue), so a
    /// view knows when what it worked out is out of date.
    changes: u64,
    pub counts: Counts,
    pub outcomes: Vec<JobTimes>,
    finished: usize,
    /// Scratch for backfill: nodes reserved for the first waiting job.
    reserved: Vec<bool>,
    /// The last backfill pass's reservation, as slurmrestd shows it (the job's planned
    /// start and scheduled nodes) until the next pass.
    plan: Option<Reservation>,
    /// The starts the last backfill pass planned for the waiting jobs after the first, by
    /// job ([`Cluster::planned_start`]): worked out when first read after the pass, which
    /// ran at `planned_at`.
    plans: std::cell::RefCell<Option<Vec<(usize, i64)>>>,
    planned_at: i64,
    pub scale_ups: u64,
    pub scale_downs: u64,
    /// `Planned`: records the autoscaler powered up ahead of a planned start.
    pub early_power_ups: u64,
    /// Pools: jobs requeued ([`Cluster::requeue_on`]) and the node-seconds of their runs lost.
    pub requeued: u64,
    pub lost_node_seconds: f64,
    /// `Planned`: how long each job that waited for a powered-down node to boot waited in
    /// CONFIGURING, from its allocation to its run (seconds).
    pub boot_waits: Vec<i64>,
}

impl Cluster {
    /// A partition of `max_nodes` nodes of `shape` for `jobs` (sorted by submit time).
    pub fn new(
        shape: NodeShape,
        max_nodes: u32,
        mode: Mode,
        cfg: SchedConfig,
        jobs: Arc<[TraceJob]>,
        start: i64,
    ) -> Self {
        Self::grouped(&[(shape, 1, max_nodes)], mode, cfg, jobs, start)
    }

    /// A partition over several NodeSets, each `(shape, weight, max_nodes)`, their slots in
    /// that order. Several are elastic only: each is scaled by [`Cluster::scale_group`].
    pub fn grouped(
        sets: &[(NodeShape, u64, u32)],
        mode: Mode,
        cfg: SchedConfig,
        jobs: Arc<[TraceJob]>,
        start: i64,
    ) -> Self {
        assert!(
            sets.len() == 1 || mode == Mode::Elastic,
            "a partition over several NodeSets is elastic"
        );
        let mut groups = Vec::with_capacity(sets.len());
        let mut nodes = Vec::new();
        for (g, &(shape, weight, len)) in sets.iter().enumerate() {
            groups.push(Group {
                shape,
                weight,
                first: nodes.len() as u32,
                len,
                replicas: 0,
                provisioned: 0,
                busy: 0,
            });
            let node = Node {
                group: g as u32,
                power: Power::Off,
                draining: false,
                drained: false,
                free_cpus: shape.cpus,
                free_mem: shape.memory_mib,
                free_gpus: shape.gpus,
                jobs: Vec::new(),
                idle_since: start,
                pod: Pod::None,
                powering_down: false,
                left_drained: false,
            };
            nodes.extend(std::iter::repeat_n(node, len as usize));
        }
        let mut by_weight: Vec<usize> = (0..groups.len()).collect();
        by_weight.sort_by_key(|&g| groups[g].weight);
        let max_nodes = nodes.len() as u32;
        let shape = sets[0].0;
        let n = jobs.len();
        let mut c = Self {
            shape,
            mode,
            groups,
            by_weight,
            cfg,
            jobs,
            nodes,
            queue: BTreeSet::new(),
            free: BTreeSet::new(),
            off: (0..max_nodes).collect(),
            running: vec![None; n],
            by_expected_end: BTreeSet::new(),
            ends: BinaryHeap::new(),
            readies: BinaryHeap::new(),
            suspends: BinaryHeap::new(),
            requests: BinaryHeap::new(),
            next_submit: 0,
            dirty: None,
            touched: Touched::default(),
            changes: 0,
            counts: Counts::default(),
            outcomes: vec![JobTimes::default(); n],
            finished: 0,
            reserved: vec![false; max_nodes as usize],
            plan: None,
            plans: std::cell::RefCell::new(None),
            planned_at: start,
            scale_ups: 0,
            scale_downs: 0,
            early_power_ups: 0,
            requeued: 0,
            lost_node_seconds: 0.0,
            boot_waits: Vec::new(),
        };
        match mode {
            Mode::Static => {
                for i in 0..max_nodes {
                    c.off.remove(&i);
                    c.power_on(i, start, true);
                }
                c.groups[0].replicas = max_nodes;
            }
            Mode::PowerSave { .. } => c.groups[0].replicas = max_nodes,
            Mode::Planned(_) => {}
            Mode::Elastic | Mode::Pool => {}
        }
        c
    }

    pub fn max_nodes(&self) -> u32 {
        self.nodes.len() as u32
    }

    /// The NodeSets' replicas together (the partition's size when it is no NodeSet).
    pub fn replicas(&self) -> u32 {
        self.groups.iter().map(|g| g.replicas).sum()
    }

    /// Its NodeSets (one, unless made by [`Cluster::grouped`]), in slot order.
    pub fn groups(&self) -> &[Group] {
        &self.groups
    }

    /// The NodeSet slot `i` is in.
    pub fn group_of(&self, i: u32) -> usize {
        self.nodes[i as usize].group as usize
    }

    pub fn jobs(&self) -> &[TraceJob] {
        &self.jobs
    }

    /// Waiting jobs in priority order.
    pub fn queue(&self) -> impl Iterator<Item = &TraceJob> {
        self.queue.iter().map(|&j| &self.jobs[j])
    }

    /// Waiting jobs in priority order, with their index in [`Cluster::jobs`].
    pub fn queued(&self) -> impl Iterator<Item = (usize, &TraceJob)> {
        self.queue.iter().map(|&j| (j, &self.jobs[j]))
    }

    /// The reservation the last backfill pass made, while its job still waits.
    pub fn plan(&self) -> Option<&Reservation> {
        self.plan.as_ref().filter(|r| self.queue.contains(&r.job))
    }

    /// Every job submitted and finished.
    pub fn done(&self) -> bool {
        self.finished == self.jobs.len()
    }

    /// Jobs that ran to their end so far.
    pub fn finished(&self) -> usize {
        self.finished
    }

    /// Jobs submitted so far.
    pub fn submitted(&self) -> usize {
        self.next_submit
    }

    /// The next time something happens on its own (a submit, a job end, a node coming up or
    /// powering down, a backfill pass), if anything will.
    pub fn next_event(&self) -> Option<i64> {
        let submit = self.jobs.get(self.next_submit).map(|j| j.submit);
        let end = self.ends.peek().map(|Reverse((t, _))| *t);
        let ready = self.readies.peek().map(|Reverse((t, _))| *t);
        let suspend = self.suspends.peek().map(|Reverse((t, _))| *t);
        let request = self.requests.peek().map(|Reverse((t, _))| *t);
        let backfill = self
            .dirty
            .filter(|_| !self.queue.is_empty())
            .map(|t| self.backfill_due(t));
        [submit, end, ready, suspend, request, backfill]
            .into_iter()
            .flatten()
            .min()
    }

    /// Everything due at `now`, in slurmctld's order: nodes come up and jobs end, new jobs
    /// arrive, the main scheduler runs, then backfill when its interval is up.
    pub fn advance(&mut self, now: i64) {
        let mut changed = false;
        while let Some(&Reverse((t, i))) = self.readies.peek() {
            if t > now {
                break;
            }
            self.readies.pop();
            let n = &self.nodes[i as usize];
            if n.power == (Power::Booting { ready_at: t }) {
                self.node_up(i, now);
                changed = true;
            } else if n.pod == (Pod::Starting { ready_at: t }) {
                self.pod_ready(i, now);
                changed = true;
            }
        }
        while let Some(&Reverse((t, j))) = self.ends.peek() {
            if t > now {
                break;
            }
            self.ends.pop();
            // Not a requeued job's old end (its new run, if any, has another).
            if self.outcomes[j].end == t {
                self.end(j, now);
                changed = true;
            }
        }
        while let Some(job) = self.jobs.get(self.next_submit) {
            if job.submit > now {
                break;
            }
            let j = self.next_submit;
            self.next_submit += 1;
            self.queue.insert(j);
            self.changes += 1;
            self.counts.pending += 1;
            self.counts.pending_job_nodes += u64::from(job.nodes);
            changed = true;
        }
        if changed {
            self.dirty.get_or_insert(now);
            self.schedule(now);
        }
        if let Some(since) = self.dirty
            && now >= self.backfill_due(since)
        {
            self.backfill(now);
            self.dirty = None;
        }
        while let Some(&Reverse((t, i))) = self.requests.peek() {
            if t > now {
                break;
            }
            self.requests.pop();
            if self.nodes[i as usize].power == (Power::Asked { posted: false }) {
                self.nodes[i as usize].power = Power::Asked { posted: true };
                self.power_touch(i);
            }
        }
        while let Some(&Reverse((t, i))) = self.suspends.peek() {
            if t > now {
                break;
            }
            self.suspends.pop();
            let n = &self.nodes[i as usize];
            if n.power == Power::Up
                && n.jobs.is_empty()
                && !n.powering_down
                && self.suspend_at(n.idle_since) == t
            {
                match self.mode {
                    Mode::Planned(_) => self.ask_down(i),
                    _ => self.power_off(i),
                }
            }
        }
    }

    /// Power saving: powered-down nodes are allocatable (slurmctld plans on them).
    fn power_saving(&self) -> bool {
        matches!(self.mode, Mode::PowerSave { .. } | Mode::Planned(_))
    }

    /// Backfill passes run on a fixed `bf_interval` grid: the first pass at or after `since`.
    fn backfill_due(&self, since: i64) -> i64 {
        grid(since, self.cfg.bf_interval)
    }

    /// Power saving: when a node idle since `idle_since` powers down (or, `Planned`, is
    /// asked to).
    fn suspend_at(&self, idle_since: i64) -> i64 {
        match self.mode {
            Mode::PowerSave { suspend_after } => idle_since + suspend_after,
            Mode::Planned(r) => grid(idle_since + r.suspend_after, r.interval),
            _ => i64::MAX,
        }
    }

    /// Node slots whose Slurm view (state, allocation, drain) changed since a reader's
    /// `cursor` (0 at first), and its new cursor; `None` when the record no longer reaches
    /// back that far and every slot must be read again.
    pub fn touched_since(&self, cursor: u64) -> (Option<&[u32]>, u64) {
        self.touched.since(cursor)
    }

    /// How many changes of what slurmrestd would show there have been so far.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// A record's power state or a pod changed (`Planned`).
    fn power_touch(&mut self, i: u32) {
        self.counts.power_changes += 1;
        self.touch(&[i]);
    }

    fn touch(&mut self, nodes: &[u32]) {
        self.touched.record(nodes, self.nodes.len());
        self.changes += 1;
    }

    fn start(&mut self, j: usize, nodes: Vec<u32>, now: i64) {
        self.queue.remove(&j);
        let job = &self.jobs[j];
        let (cpus, mem, gpus) = (
            job.cpus_per_node,
            job.memory_mib_per_node,
            job.gpus_per_node,
        );
        let limit = job.limit as i64;
        self.counts.pending -= 1;
        self.counts.pending_job_nodes -= u64::from(job.nodes);
        let mut start = now;
        let mut configuring = false;
        self.touch(&nodes);
        for &i in &nodes {
            if self.nodes[i as usize].power == Power::Off {
                // Power saving: the scheduler picked a powered-down node; it resumes, or
                // (`Planned`) slurmctld asks for it at its next power-save pass.
                self.off.remove(&i);
                match self.mode {
                    Mode::Planned(r) => {
                        self.nodes[i as usize].power = Power::Asked { posted: false };
                        self.requests.push(Reverse((grid(now, r.interval), i)));
                        self.power_touch(i);
                    }
                    _ => self.power_on(i, now, false),
                }
            }
            let n = &mut self.nodes[i as usize];
            match n.power {
                Power::Booting { ready_at } => start = start.max(ready_at),
                Power::Asked { .. } => configuring = true,
                _ => {}
            }
            self.free.remove(&(n.free_cpus, i));
            let was_busy = n.power == Power::Up && !n.jobs.is_empty();
            n.free_cpus -= cpus;
            n.free_mem -= mem;
            n.free_gpus -= gpus;
            n.jobs.push(j);
            if n.free_cpus > 0 {
                self.free.insert((n.free_cpus, i));
            }
            if n.power == Power::Up && !was_busy {
                self.counts.busy += 1;
                self.groups[n.group as usize].busy += 1;
            }
        }
        // Until it runs, backfill expects it to end a time limit from now, as slurmctld
        // does for a job waiting in CONFIGURING.
        self.by_expected_end.insert((start + limit, j));
        self.running[j] = Some(Running {
            nodes,
            expected_end: start + limit,
        });
        if !configuring {
            self.run(j, start);
        }
    }

    /// Job `j`, allocated, runs from `start` (its nodes are up by then).
    fn run(&mut self, j: usize, start: i64) {
        let job = &self.jobs[j];
        let (run, limit) = (job.run as i64, job.limit as i64);
        let r = self.running[j].as_mut().expect("an allocated job");
        self.by_expected_end.remove(&(r.expected_end, j));
        r.expected_end = start + limit;
        self.by_expected_end.insert((start + limit, j));
        self.outcomes[j] = JobTimes {
            start,
            end: start + run,
            node: r.nodes[0],
        };
        self.ends.push(Reverse((start + run, j)));
    }

    fn end(&mut self, j: usize, now: i64) {
        if self.release(j, now) {
            self.finished += 1;
        }
    }

    /// Frees what job `j` holds (its run ended or it was requeued); whether it held anything.
    fn release(&mut self, j: usize, now: i64) -> bool {
        let Some(run) = self.running[j].take() else {
            return false;
        };
        self.by_expected_end.remove(&(run.expected_end, j));
        let job = &self.jobs[j];
        let (cpus, mem, gpus) = (
            job.cpus_per_node,
            job.memory_mib_per_node,
            job.gpus_per_node,
        );
        self.touch(&run.nodes);
        let suspend = self.suspend_at(now);
        let power_saving = self.power_saving();
        for &i in &run.nodes {
            let n = &mut self.nodes[i as usize];
            let allocatable = !n.draining && !n.drained && !n.powering_down;
            if n.free_cpus > 0 && allocatable {
                self.free.remove(&(n.free_cpus, i));
            }
            n.free_cpus += cpus;
            n.free_mem += mem;
            n.free_gpus += gpus;
            n.jobs.retain(|&x| x != j);
            if n.jobs.is_empty() {
                n.idle_since = now;
                self.counts.busy -= 1;
                self.groups[n.group as usize].busy -= 1;
                if n.draining {
                    n.draining = false;
                    self.power_off(i);
                    continue;
                }
                if power_saving {
                    self.suspends.push(Reverse((suspend, i)));
                }
            }
            if allocatable {
                self.free.insert((n.free_cpus, i));
            }
        }
        true
    }

    /// A node is asked for: it boots (or, for a static partition, is simply there).
    fn power_on(&mut self, i: u32, now: i64, at_once: bool) {
        self.counts.provisioned += 1;
        self.groups[self.nodes[i as usize].group as usize].provisioned += 1;
        self.touch(&[i]);
        let ready_at = now + self.cfg.boot;
        let n = &mut self.nodes[i as usize];
        n.idle_since = now;
        if at_once {
            n.power = Power::Up;
            self.free.insert((n.free_cpus, i));
            return;
        }
        n.power = Power::Booting { ready_at };
        self.readies.push(Reverse((ready_at, i)));
        if matches!(self.mode, Mode::PowerSave { .. }) {
            // Slurm allocates powering-up nodes: they stay in the free index.
            self.free.insert((n.free_cpus, i));
        }
    }

    fn node_up(&mut self, i: u32, now: i64) {
        let elastic = !matches!(self.mode, Mode::PowerSave { .. });
        self.touch(&[i]);
        let suspend = self.suspend_at(now);
        let n = &mut self.nodes[i as usize];
        n.power = Power::Up;
        if !n.jobs.is_empty() {
            // Jobs waited for this boot (power saving); each runs once all its nodes are up.
            self.counts.busy += 1;
            self.groups[n.group as usize].busy += 1;
        } else {
            n.idle_since = now;
            if !elastic {
                self.suspends.push(Reverse((suspend, i)));
            }
        }
        if elastic && n.free_cpus > 0 && !n.drained {
            self.free.insert((n.free_cpus, i));
        }
    }

    fn power_off(&mut self, i: u32) {
        self.touch(&[i]);
        let planned = matches!(self.mode, Mode::Planned(_));
        let n = &mut self.nodes[i as usize];
        debug_assert!(n.jobs.is_empty());
        if n.free_cpus > 0 {
            self.free.remove(&(n.free_cpus, i));
        }
        n.power = Power::Off;
        n.draining = false;
        n.drained = false;
        self.counts.provisioned -= 1;
        self.groups[n.group as usize].provisioned -= 1;
        if planned {
            // Its pod went: slurm-operator's scale-in leaves the record DRAIN until
            // someone resumes it, and powered down.
            n.pod = Pod::None;
            n.powering_down = false;
            n.left_drained = true;
            self.counts.power_changes += 1;
        } else {
            self.off.insert(i);
        }
    }

    /// The NodeSet is scaled to `replicas` (elastic partitions of one NodeSet only).
    pub fn scale(&mut self, replicas: u32, now: i64) {
        self.scale_group(0, replicas, now);
    }

    /// NodeSet `g` is scaled to `replicas` (elastic partitions only): drained nodes return
    /// first, then new ones boot on its lowest free slots; going down, slurm-operator picks
    /// the pods ([`operator::condemn`]): an idle or booting node goes at once, a busy one
    /// drains and goes when its last job ends.
    pub fn scale_group(&mut self, g: usize, replicas: u32, now: i64) {
        if self.mode != Mode::Elastic {
            return;
        }
        let group = &mut self.groups[g];
        let replicas = replicas.min(group.len);
        if replicas > group.replicas {
            self.scale_ups += 1;
        } else if replicas < group.replicas {
            self.scale_downs += 1;
        } else {
            return;
        }
        group.replicas = replicas;
        let slots = group.slots();
        let active = |n: &Node| n.power != Power::Off && !n.draining;
        let mut have = slots
            .clone()
            .filter(|&i| active(&self.nodes[i as usize]))
            .count() as u32;
        if replicas > have {
            let mut undrained = false;
            for i in slots.clone() {
                if have == replicas {
                    break;
                }
                let n = &mut self.nodes[i as usize];
                if n.draining {
                    n.draining = false;
                    if n.free_cpus > 0 {
                        self.free.insert((n.free_cpus, i));
                    }
                    self.touch(&[i]);
                    undrained = true;
                    have += 1;
                }
            }
            while have < replicas {
                let Some(&i) = self.off.range(slots.clone()).next() else {
                    break;
                };
                self.off.remove(&i);
                self.power_on(i, now, false);
                have += 1;
            }
            // Nodes that stopped draining take work at once.
            if undrained {
                self.dirty.get_or_insert(now);
                self.schedule(now);
            }
            return;
        }
        let pods = slots
            .filter(|&i| active(&self.nodes[i as usize]))
            .map(|i| self.nodeset_pod(i, false))
            .collect();
        for pod in operator::condemn(pods, (have - replicas) as usize) {
            let i = pod.ordinal;
            let n = &mut self.nodes[i as usize];
            if n.jobs.is_empty() {
                self.power_off(i);
                continue;
            }
            n.draining = true;
            if n.free_cpus > 0 {
                self.free.remove(&(n.free_cpus, i));
            }
            self.touch(&[i]);
        }
    }

    /// Slot `i`'s NodeSet pod as slurm-operator ranks it for a scale-in, `marked` to go
    /// first or not: ready once its slurmd registered (a pod of its own, following
    /// slurmctld's requests; else the node up), its deadline the latest time limit of the
    /// jobs on the node, cordoned while the node drains for an earlier scale-in.
    pub fn nodeset_pod(&self, i: u32, marked: bool) -> operator::Pod {
        let n = &self.nodes[i as usize];
        let ready = match self.mode {
            Mode::Planned(_) => n.pod == Pod::Ready,
            _ => n.power == Power::Up,
        };
        operator::Pod {
            ordinal: i,
            bound: true,
            ready,
            marked,
            deadline: self.node_work(i).1,
            cordoned: n.draining,
        }
    }

    /// The Slurm view of a node slot, for a snapshot: `None` for nodes that do not exist
    /// (off or still booting).
    pub fn node_view(&self, i: u32) -> Option<NodeView> {
        let n = &self.nodes[i as usize];
        let shape = self.groups[n.group as usize].shape;
        let planned = matches!(self.mode, Mode::Planned(_));
        let power = match n.power {
            _ if !planned => PowerFlag::None,
            Power::Off | Power::Asked { posted: false } => PowerFlag::PoweredDown,
            Power::Asked { posted: true } => PowerFlag::PoweringUp,
            _ if n.powering_down => PowerFlag::PoweringDown,
            _ => PowerFlag::None,
        };
        (planned || n.power == Power::Up).then(|| NodeView {
            alloc_cpus: shape.cpus - n.free_cpus,
            alloc_memory_mib: shape.memory_mib - n.free_mem,
            alloc_gpus: shape.gpus - n.free_gpus,
            drain: if n.drained {
                Some(DrainedBy::Autoscaler)
            } else if n.draining || n.left_drained {
                Some(DrainedBy::Operator)
            } else {
                None
            },
            power,
        })
    }

    /// Where slot `i` stands, for a pool's bookkeeping.
    pub fn slot(&self, i: u32) -> Slot {
        let n = &self.nodes[i as usize];
        match n.power {
            Power::Off => Slot::Off,
            Power::Booting { .. } | Power::Asked { .. } => Slot::Booting,
            Power::Up if n.jobs.is_empty() => Slot::Idle,
            Power::Up => Slot::Busy,
        }
    }

    /// The nodes the first waiting job needs, if a job waits.
    pub fn head_nodes(&self) -> Option<u32> {
        self.queue.first().map(|&j| self.jobs[j].nodes)
    }

    /// The submit time of the first waiting job.
    pub fn oldest_pending(&self) -> Option<i64> {
        self.queue.first().map(|&j| self.jobs[j].submit)
    }

    /// The jobs running on slot `i` and when the last of them reaches its time limit.
    pub fn node_work(&self, i: u32) -> (u64, Option<i64>) {
        let n = &self.nodes[i as usize];
        let free_at = n
            .jobs
            .iter()
            .filter_map(|&j| self.running[j].as_ref().map(|r| r.expected_end))
            .max();
        (n.jobs.len() as u64, free_at)
    }

    /// When job `j` started (or will, once its nodes are up), if it has been scheduled.
    pub fn started(&self, j: usize) -> Option<i64> {
        (self.outcomes[j].end > 0).then_some(self.outcomes[j].start)
    }

    #[cfg(test)]
    pub fn job_nodes_for_test(&self, j: usize) -> Vec<u32> {
        self.running[j]
            .as_ref()
            .map(|r| r.nodes.clone())
            .unwrap_or_default()
    }

    #[cfg(test)]
    pub fn check(&self) {
        // The counters agree with the nodes.
        let planned = matches!(self.mode, Mode::Planned(_));
        let provisioned = self
            .nodes
            .iter()
            .filter(|n| match planned {
                true => n.pod != Pod::None,
                false => n.power != Power::Off,
            })
            .count() as u32;
        assert_eq!(provisioned, self.counts.provisioned);
        let busy = self
            .nodes
            .iter()
            .filter(|n| n.power == Power::Up && !n.jobs.is_empty())
            .count() as u32;
        assert_eq!(busy, self.counts.busy);
        for (g, group) in self.groups.iter().enumerate() {
            let of = |n: &&Node| n.group as usize == g;
            let busy = self.nodes.iter().filter(of);
            let busy = busy.filter(|n| n.power == Power::Up && !n.jobs.is_empty());
            assert_eq!(busy.count() as u32, group.busy, "group {g}");
            if !planned {
                let up = self
                    .nodes
                    .iter()
                    .filter(of)
                    .filter(|n| n.power != Power::Off);
                assert_eq!(up.count() as u32, group.provisioned, "group {g}");
            }
        }
        for (i, n) in self.nodes.iter().enumerate() {
            let indexed = self.free.contains(&(n.free_cpus, i as u32));
            let allocatable = match n.power {
                Power::Up => !n.draining && !n.drained && !n.powering_down,
                Power::Booting { .. } => matches!(self.mode, Mode::PowerSave { .. }),
                Power::Asked { .. } => true,
                Power::Off => false,
            };
            assert_eq!(indexed, allocatable && n.free_cpus > 0, "node {i}: {n:?}");
            let plannable = n.power == Power::Off && !n.left_drained;
            assert_eq!(self.off.contains(&(i as u32)), plannable, "node {i}: {n:?}");
        }
    }
}
