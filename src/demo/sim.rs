//! A simulated Slurm cluster, the NodeSet that grows its burst partition and the colocated
//! pool its cpu partition shares with Kubernetes ([`pool`]), for `slurmscale demo`. It stands
//! where slurmrestd and the kube-apiserver stand in production: it hands out the same
//! [`ClusterSnapshot`] a poller publishes (jobs folded by the exporter's own [`JobsBuilder`])
//! and the same [`KubeSnapshot`] the watchers keep, and takes what the autoscaler writes —
//! replicas, drains, resumes, pods marked to go — as Slurm and Kubernetes would.
//!
//! Everything is driven by seeded generators and a tick counter (one simulated second per
//! step), so a seed always replays the same day: bursts, steady work and idle stretches of
//! single-node, multi-node and GPU jobs, and waves of Kubernetes pods wanting room. The
//! first second already has work for both autoscalers, so a newcomer sees them act at once.

mod pool;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use slurmscale_exporter::k8s::nodeset::{NodeSetStatus, NodeSetView, ScalingMode};
use slurmscale_exporter::k8s::watch::{KubeSnapshot, WatchHealth};
use slurmscale_exporter::model::jobs::{JobRecord, JobsBuilder};
use slurmscale_exporter::model::{
    Diag, Gres, JobState, Node, NodeBase, NodeFlags, NodeState, Partition, Ping, Slurmctld,
};
use slurmscale_exporter::slurm::ApiVersion;
use slurmscale_exporter::snapshot::ClusterSnapshot;

pub const CLUSTER: &str = "demo";
pub const NAMESPACE: &str = "slurm";
/// The autoscaled partition and its NodeSet.
pub const BURST: &str = "burst";
pub const BURST_MAX: usize = 16;
pub use pool::{POOL_NODES, Pool};

/// The colocated partition and its NodeSet.
pub const POOL: &str = "cpu";
/// Seconds from a scale-up to the new node's slurmd registering.
const BOOT_SECONDS: u64 = 8;
/// Finished jobs stay visible this long, as with Slurm's MinJobAge.
const MIN_JOB_AGE: u64 = 300;
const GIB: u64 = 1 << 30;
/// Node shapes of the three partitions: CPUs, GPUs, memory.
const CPU_NODE: (u64, u64, u64) = (32, 0, 128 * GIB);
const GPU_NODE: (u64, u64, u64) = (32, 4, 256 * GIB);
const BURST_NODE: (u64, u64, u64) = (16, 0, 64 * GIB);

/// SplitMix64: tiny, fast and the same on every platform, which is all a replayable demo needs.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

/// The workload's mood, cycling so a few minutes show every kind of decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Steady,
    Burst,
    Idle,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Steady => "steady",
            Self::Burst => "burst",
            Self::Idle => "idle",
        }
    }

    /// Jobs arriving per second, on average.
    fn rate(self) -> f64 {
        match self {
            Self::Steady => 0.12,
            Self::Burst => 0.5,
            Self::Idle => 0.0,
        }
    }
}

#[derive(Clone, Debug)]
struct SimNode {
    name: String,
    partition: Arc<str>,
    cpus: u64,
    gpus: u64,
    memory: u64,
    alloc_cpus: u64,
    alloc_gpus: u64,
    alloc_memory: u64,
    /// DRAIN, with its reason.
    drain: Option<String>,
}

impl SimNode {
    fn new(name: String, partition: &Arc<str>, (cpus, gpus, memory): (u64, u64, u64)) -> Self {
        Self {
            name,
            partition: partition.clone(),
            cpus,
            gpus,
            memory,
            alloc_cpus: 0,
            alloc_gpus: 0,
            alloc_memory: 0,
            drain: None,
        }
    }

    /// Running work, as the exporter's model (and so the autoscaler) tells it.
    fn busy(&self) -> bool {
        self.model().busy()
    }

    /// A new job may start here: not drained, and its share fits.
    fn fits(&self, j: &SimJob) -> bool {
        self.drain.is_none()
            && self.cpus - self.alloc_cpus >= j.cpus_per_node
            && self.gpus - self.alloc_gpus >= j.gpus_per_node
            && self.memory - self.alloc_memory >= j.memory_per_node
    }

    fn take(&mut self, j: &SimJob, sign: i8) {
        let apply = |v: &mut u64, d: u64| {
            *v = if sign > 0 {
                *v + d
            } else {
                v.saturating_sub(d)
            };
        };
        apply(&mut self.alloc_cpus, j.cpus_per_node);
        apply(&mut self.alloc_gpus, j.gpus_per_node);
        apply(&mut self.alloc_memory, j.memory_per_node);
    }

    fn model(&self) -> Node {
        let base = match self.alloc_cpus {
            0 => NodeBase::Idle,
            a if a >= self.cpus => NodeBase::Allocated,
            _ => NodeBase::Mixed,
        };
        let gres = |count| {
            (self.gpus > 0)
                .then(|| Gres {
                    name: Arc::from("gpu"),
                    kind: Arc::from("a100"),
                    count,
                })
                .into_iter()
                .collect()
        };
        Node {
            name: self.name.clone(),
            state: NodeState {
                base,
                flags: if self.drain.is_some() {
                    NodeFlags::DRAIN
                } else {
                    NodeFlags::default()
                },
            },
            partitions: vec![self.partition.clone()],
            cpus: self.cpus,
            alloc_cpus: self.alloc_cpus,
            memory_bytes: self.memory,
            alloc_memory_bytes: self.alloc_memory,
            free_memory_bytes: Some(self.memory - self.alloc_memory),
            gres: gres(self.gpus),
            gres_used: gres(self.alloc_gpus),
            reason: self.drain.clone().unwrap_or_default(),
            reason_set_by: String::new(),
        }
    }
}

/// Where a node lives: a fixed (GPU) node, a burst slot or a pool node, by index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Fixed(usize),
    Burst(usize),
    Pool(usize),
}

#[derive(Clone, Debug)]
struct SimJob {
    id: u64,
    partition: Arc<str>,
    user: &'static str,
    account: &'static str,
    nodes: u64,
    cpus_per_node: u64,
    gpus_per_node: u64,
    memory_per_node: u64,
    seconds: u64,
    submit: u64,
    /// Held by its user until this tick.
    held_until: Option<u64>,
    running: Option<(u64, Vec<Place>)>,
    ended: Option<(u64, JobState)>,
}

/// A job as the workload submits it: partition (index), nodes, per-node CPUs, GPUs and
/// memory, run time, (user, account), and whether its user holds it for a minute.
struct Submission {
    partition: usize,
    nodes: u64,
    cpus: u64,
    gpus: u64,
    memory: u64,
    seconds: u64,
    owner: (&'static str, &'static str),
    held: bool,
}

/// A job of the burst partition (whole 16-CPU nodes) as submitted.
#[derive(Clone, Copy, Debug)]
pub struct BurstJob {
    /// Seconds from the start.
    pub submit: u64,
    pub nodes: u64,
    pub memory_per_node: u64,
    pub seconds: u64,
}

/// The burst partition's NodeSet: `replicas` is what the autoscaler set; a slot's slurmd
/// registers `BOOT_SECONDS` after it is created.
#[derive(Clone, Debug, Default)]
pub struct NodeSet {
    pub replicas: u64,
    /// Slot index → tick its node is ready (nodes `burst-1` … are slots 0 …).
    slots: BTreeMap<usize, u64>,
}

impl NodeSet {
    pub fn pods(&self) -> u64 {
        self.slots.len() as u64
    }

    pub fn ready(&self, tick: u64) -> u64 {
        self.slots.values().filter(|t| **t <= tick).count() as u64
    }
}

/// What a run did, for the demo's summary.
#[derive(Clone, Debug, Default)]
pub struct Totals {
    pub submitted: u64,
    pub started: u64,
    pub completed: u64,
    /// Seconds each started job waited.
    pub waits: Vec<u64>,
    /// Node-seconds the burst NodeSet's pods existed, and ran jobs.
    pub burst_seconds: u64,
    pub burst_busy_seconds: u64,
    /// Node-seconds Slurm held pool nodes, and ran jobs on them.
    pub pool_seconds: u64,
    pub pool_busy_seconds: u64,
}

pub struct Simulation {
    rng: Rng,
    start: SystemTime,
    pub tick: u64,
    pub phase: Phase,
    phase_left: u64,
    /// The GPU partition's nodes.
    fixed: Vec<SimNode>,
    burst: Vec<Option<SimNode>>,
    pub nodeset: NodeSet,
    /// The cpu partition's nodes, on the colocated pool.
    pub pool: Pool,
    jobs: Vec<SimJob>,
    finished: VecDeque<SimJob>,
    /// Every job submitted to the burst partition, for `simulate --workload demo`.
    pub burst_submitted: Vec<BurstJob>,
    next_id: u64,
    pub totals: Totals,
    partitions: [Arc<str>; 3],
}

impl Simulation {
    pub fn new(seed: u64, start: SystemTime) -> Self {
        let partitions = [Arc::from(POOL), Arc::from("gpu"), Arc::from(BURST)];
        let fixed = (1..=4)
            .map(|i| SimNode::new(format!("gpu-{i}"), &partitions[1], GPU_NODE))
            .collect();
        Self {
            rng: Rng::new(seed),
            start,
            tick: 0,
            phase: Phase::Burst,
            phase_left: 30,
            fixed,
            burst: vec![None; BURST_MAX],
            nodeset: NodeSet::default(),
            pool: Pool::new(seed, &partitions[0]),
            jobs: Vec::new(),
            finished: VecDeque::new(),
            burst_submitted: Vec::new(),
            next_id: 1000,
            totals: Totals::default(),
            partitions,
        }
    }

    pub fn now(&self) -> SystemTime {
        self.start + Duration::from_secs(self.tick)
    }

    /// One simulated second: the workload, job ends, the NodeSets' pods and the pool's
    /// Kubernetes side, then scheduling.
    pub fn step(&mut self) {
        self.tick += 1;
        self.next_phase();
        if self.tick == 1 {
            self.opening();
        }
        self.arrivals();
        self.finish_jobs();
        self.reconcile_nodeset();
        self.pool.step(self.tick);
        self.schedule();
        self.account();
    }

    /// A two-node job for the burst partition in the first second: the NodeSet, at zero,
    /// has something to do at once.
    fn opening(&mut self) {
        self.push(Submission {
            partition: 2,
            nodes: 2,
            cpus: 16,
            gpus: 0,
            memory: 48 * GIB,
            seconds: 40,
            owner: ("alice", "physics"),
            held: false,
        });
    }

    /// Node-seconds provisioned and busy.
    fn account(&mut self) {
        let busy_burst = self.busy_burst_nodes();
        let t = &mut self.totals;
        t.burst_seconds += self.nodeset.pods();
        t.burst_busy_seconds += busy_burst;
        let (_, busy) = self.pool.slurm_nodes();
        t.pool_seconds += self.pool.held();
        t.pool_busy_seconds += busy;
    }

    /// The autoscaler's write: the NodeSet's `spec.replicas`.
    pub fn scale(&mut self, replicas: u64) {
        self.nodeset.replicas = replicas.min(BURST_MAX as u64);
    }

    fn next_phase(&mut self) {
        if self.phase_left > 0 {
            self.phase_left -= 1;
            return;
        }
        let (phase, lo, hi) = match self.phase {
            Phase::Steady if self.rng.chance(0.5) => (Phase::Burst, 20, 40),
            Phase::Steady => (Phase::Idle, 150, 220),
            Phase::Burst => (Phase::Steady, 30, 60),
            Phase::Idle => (Phase::Burst, 20, 40),
        };
        self.phase = phase;
        self.phase_left = self.rng.range(lo, hi);
    }

    fn arrivals(&mut self) {
        let rate = self.phase.rate();
        let mut n = rate.floor() as u64;
        if self.rng.chance(rate.fract()) {
            n += 1;
        }
        for _ in 0..n {
            self.submit();
        }
    }

    fn submit(&mut self) {
        let burst_share = if self.phase == Phase::Burst { 0.5 } else { 0.2 };
        let r = &mut self.rng;
        let users = [("alice", "physics"), ("bob", "chemistry"), ("carol", "ml")];
        let owner = users[r.range(0, 2) as usize];
        let (partition, nodes, cpus, gpus, memory, seconds) = if r.chance(burst_share) {
            // Whole burst nodes, one to three of them.
            (2, r.range(1, 3), 16, 0, 48 * GIB, r.range(15, 45))
        } else if r.chance(0.2) {
            let g = r.range(1, 4);
            (1, 1, g * 4, g, g * 32 * GIB, r.range(30, 150))
        } else if r.chance(0.2) {
            (0, r.range(2, 4), 32, 0, 100 * GIB, r.range(30, 90))
        } else {
            let c = r.range(1, 16);
            (0, 1, c, 0, c * 2 * GIB, r.range(20, 120))
        };
        let held = r.chance(0.03);
        self.push(Submission {
            partition,
            nodes,
            cpus,
            gpus,
            memory,
            seconds,
            owner,
            held,
        });
    }

    fn push(&mut self, j: Submission) {
        if j.partition == 2 {
            self.burst_submitted.push(BurstJob {
                submit: self.tick,
                nodes: j.nodes,
                memory_per_node: j.memory,
                seconds: j.seconds,
            });
        }
        self.jobs.push(SimJob {
            id: self.next_id,
            partition: self.partitions[j.partition].clone(),
            user: j.owner.0,
            account: j.owner.1,
            nodes: j.nodes,
            cpus_per_node: j.cpus,
            gpus_per_node: j.gpus,
            memory_per_node: j.memory,
            seconds: j.seconds,
            submit: self.tick,
            held_until: j.held.then_some(self.tick + 60),
            running: None,
            ended: None,
        });
        self.next_id += 1;
        self.totals.submitted += 1;
    }

    fn node(&mut self, place: Place) -> Option<&mut SimNode> {
        match place {
            Place::Fixed(i) => self.fixed.get_mut(i),
            Place::Burst(i) => self.burst.get_mut(i).and_then(Option::as_mut),
            Place::Pool(i) => self.pool.slots.get_mut(i).and_then(|s| s.slurm.as_mut()),
        }
    }

    fn finish_jobs(&mut self) {
        let tick = self.tick;
        let mut i = 0;
        while i < self.jobs.len() {
            let done = self.jobs[i]
                .running
                .as_ref()
                .is_some_and(|(start, _)| start + self.jobs[i].seconds <= tick);
            if !done {
                i += 1;
                continue;
            }
            let mut job = self.jobs.swap_remove(i);
            if let Some((_, places)) = &job.running {
                for p in places.clone() {
                    if let Some(n) = self.node(p) {
                        n.take(&job, -1);
                    }
                }
            }
            job.ended = Some((tick, JobState::Completed));
            self.totals.completed += 1;
            self.finished.push_back(job);
        }
        self.jobs.sort_by_key(|j| j.id);
        while self
            .finished
            .front()
            .is_some_and(|j| j.ended.is_some_and(|(t, _)| t + MIN_JOB_AGE < tick))
        {
            self.finished.pop_front();
        }
    }

    /// The operator: pods to `replicas`. New pods boot; on scale-in idle nodes go first
    /// (what pod-deletion-cost arranges), never one running a job.
    fn reconcile_nodeset(&mut self) {
        let tick = self.tick;
        let want = self.nodeset.replicas as usize;
        while self.nodeset.slots.len() < want {
            let Some(free) = (0..BURST_MAX).find(|i| !self.nodeset.slots.contains_key(i)) else {
                break;
            };
            self.nodeset.slots.insert(free, tick + BOOT_SECONDS);
        }
        while self.nodeset.slots.len() > want {
            let busy = |i: &usize| self.burst[*i].as_ref().is_some_and(SimNode::busy);
            let Some(victim) = self
                .nodeset
                .slots
                .iter()
                .filter(|(i, _)| !busy(i))
                // Not yet booted first, then the highest index.
                .max_by_key(|(i, ready)| (**ready > tick, **i))
                .map(|(i, _)| *i)
            else {
                break;
            };
            self.nodeset.slots.remove(&victim);
            self.burst[victim] = None;
        }
        for (&i, &ready) in &self.nodeset.slots {
            if ready <= tick && self.burst[i].is_none() {
                self.burst[i] = Some(SimNode::new(
                    format!("{BURST}-{}", i + 1),
                    &self.partitions[2],
                    BURST_NODE,
                ));
            }
        }
    }

    /// First come, first served, with backfill: any pending job that fits now starts.
    fn schedule(&mut self) {
        let tick = self.tick;
        for j in 0..self.jobs.len() {
            let job = &self.jobs[j];
            if job.running.is_some() || job.held_until.is_some_and(|t| t > tick) {
                continue;
            }
            let candidates: Vec<Place> = if &*job.partition == BURST {
                (0..BURST_MAX)
                    .filter(|i| self.burst[*i].as_ref().is_some_and(|n| n.fits(job)))
                    .map(Place::Burst)
                    .collect()
            } else if &*job.partition == POOL {
                let slots = &self.pool.slots;
                (0..slots.len())
                    .filter(|i| slots[*i].slurm.as_ref().is_some_and(|n| n.fits(job)))
                    .map(Place::Pool)
                    .collect()
            } else {
                (0..self.fixed.len())
                    .filter(|i| {
                        self.fixed[*i].partition == job.partition && self.fixed[*i].fits(job)
                    })
                    .map(Place::Fixed)
                    .collect()
            };
            if (candidates.len() as u64) < job.nodes {
                continue;
            }
            let places: Vec<Place> = candidates.into_iter().take(job.nodes as usize).collect();
            let job = self.jobs[j].clone();
            for p in &places {
                if let Some(n) = self.node(*p) {
                    n.take(&job, 1);
                }
            }
            self.jobs[j].running = Some((tick, places));
            self.jobs[j].held_until = None;
            self.totals.started += 1;
            self.totals.waits.push(tick - job.submit);
        }
    }

    /// Busy burst nodes (running a job), what the policy must never go below.
    pub fn busy_burst_nodes(&self) -> u64 {
        self.burst.iter().flatten().filter(|n| n.busy()).count() as u64
    }

    pub fn pending(&self) -> u64 {
        self.jobs.iter().filter(|j| j.running.is_none()).count() as u64
    }

    /// What a poller would have published after polling slurmrestd now.
    pub fn snapshot(&self) -> ClusterSnapshot {
        let now = self.now();
        let took = Duration::from_millis(3);
        let mut snap = ClusterSnapshot::new(CLUSTER, "simulated://demo");
        snap.release = Some("24.11.5".into());
        snap.api_version = Some(ApiVersion::V0042);
        snap.ping.succeed(
            now,
            took,
            Some(Ping {
                controllers: vec![Slurmctld {
                    hostname: "slurmctld-0".into(),
                    mode: "primary".into(),
                    responding: true,
                    latency_seconds: Some(0.0004),
                }],
                release: Some("24.11.5".into()),
            }),
        );
        snap.nodes.succeed(
            now,
            took,
            Some(
                self.fixed
                    .iter()
                    .chain(self.pool.slots.iter().filter_map(|s| s.slurm.as_ref()))
                    .chain(self.burst.iter().flatten())
                    .map(SimNode::model)
                    .collect(),
            ),
        );
        // As slurmctld reports them: configured TRES over every node, FUTURE ones included.
        let partition = |name: &Arc<str>, nodes: u64, (cpus, gpus, memory), list: &str| Partition {
            name: name.clone(),
            state: "UP".into(),
            total_nodes: nodes,
            total_cpus: nodes * cpus,
            total_memory_bytes: Some(nodes * memory),
            total_gpus: Some(nodes * gpus),
            max_nodes_per_job: None,
            node_list: list.into(),
        };
        snap.partitions.succeed(
            now,
            took,
            Some(vec![
                partition(&self.partitions[0], 8, CPU_NODE, "cpu-[1-8]"),
                partition(&self.partitions[1], 4, GPU_NODE, "gpu-[1-4]"),
                partition(
                    &self.partitions[2],
                    BURST_MAX as u64,
                    BURST_NODE,
                    "burst-[1-16]",
                ),
            ]),
        );
        snap.jobs.succeed(now, took, Some(self.jobs_model()));
        let pending = self.pending();
        snap.diag.succeed(
            now,
            took,
            Some(Diag {
                server_threads: Some(3),
                agent_queue_size: Some(0),
                jobs_submitted: Some(self.totals.submitted),
                jobs_started: Some(self.totals.started),
                jobs_completed: Some(self.totals.completed),
                jobs_canceled: Some(0),
                jobs_failed: Some(0),
                schedule_cycles: Some(self.tick),
                schedule_cycle_last_seconds: Some(0.0002 + pending as f64 * 0.00003),
                schedule_cycle_max_seconds: Some(0.004),
                schedule_cycle_mean_seconds: Some(0.0008),
                schedule_queue_length: Some(pending),
                bf_cycles: Some(self.tick / 30),
                bf_backfilled_jobs: Some(self.totals.started / 4),
                bf_active: Some(false),
                ..Default::default()
            }),
        );
        snap.cycles = self.tick;
        snap.collected_at = Some(now);
        snap.collection_duration = Some(took * 5);
        snap
    }

    fn jobs_model(&self) -> slurmscale_exporter::model::Jobs {
        let mut b = JobsBuilder::new(false);
        for j in self.jobs.iter().chain(self.finished.iter()) {
            let gres = if j.gpus_per_node > 0 {
                format!("gres/gpu:{}", j.gpus_per_node)
            } else {
                String::new()
            };
            let (state, reason) = match (&j.running, j.ended) {
                (_, Some((_, s))) => (s, "None"),
                (Some(_), None) => (JobState::Running, "None"),
                (None, None) if j.held_until.is_some_and(|t| t > self.tick) => {
                    (JobState::Pending, "JobHeldUser")
                }
                (None, None) => (JobState::Pending, "Resources"),
            };
            let alloc = if state == JobState::Running {
                format!(
                    "cpu={},mem={}G,node={},billing={}{}",
                    j.cpus_per_node * j.nodes,
                    j.memory_per_node * j.nodes / GIB,
                    j.nodes,
                    j.cpus_per_node * j.nodes,
                    if j.gpus_per_node > 0 {
                        format!(",gres/gpu={}", j.gpus_per_node * j.nodes)
                    } else {
                        String::new()
                    }
                )
            } else {
                String::new()
            };
            b.add(JobRecord {
                id: j.id,
                state: Some(state),
                reason,
                partition: &j.partition,
                user: j.user,
                account: j.account,
                nodes: Some(j.nodes),
                cpus: Some(j.cpus_per_node * j.nodes),
                tasks: Some(j.nodes),
                memory_per_node_mib: Some(j.memory_per_node >> 20),
                hold: reason == "JobHeldUser",
                tres_per_node: &gres,
                tres_alloc: &alloc,
                submit_time: Some(
                    slurmscale_exporter::metrics::unix_seconds(self.start) as i64 + j.submit as i64,
                ),
                ..Default::default()
            });
        }
        b.finish()
    }

    /// What the Kubernetes watchers would hold: the two NodeSets, and the GenericNode ledger
    /// of the pool, which Slurm's cpu partition shares with Kubernetes pods.
    pub fn kube_snapshot(&self) -> KubeSnapshot {
        let burst = [
            self.nodeset.replicas,
            self.nodeset.pods(),
            self.nodeset.ready(self.tick),
            self.busy_burst_nodes(),
        ];
        let (up, busy) = self.pool.slurm_nodes();
        let pool = [self.pool.replicas, self.pool.held(), up, busy];
        let (ledger, capacity) = self.pool.ledger();
        let mut k = KubeSnapshot {
            nodesets: vec![
                nodeset(BURST, burst, BURST_MAX as u64),
                nodeset(POOL, pool, POOL_NODES as u64),
            ],
            ledger: ledger.into(),
            capacity: capacity.into(),
            ..Default::default()
        };
        for r in ["nodes", "genericnodes", "nodesets"] {
            k.watches.insert(
                r,
                WatchHealth {
                    probed: true,
                    served: true,
                    synced: true,
                    version: (r == "nodesets").then(|| "v1beta1".into()),
                    last_error: None,
                },
            );
        }
        k
    }
}

/// A NodeSet as the watchers see it: `[replicas, pods, ready, busy]`.
fn nodeset(name: &str, [replicas, pods, ready, busy]: [u64; 4], max: u64) -> NodeSetView {
    let n = |v: u64| Some(i32::try_from(v).unwrap_or(i32::MAX));
    NodeSetView {
        namespace: NAMESPACE.into(),
        name: name.into(),
        api_version: "slinky.slurm.net/v1beta1",
        replicas: n(replicas),
        status: NodeSetStatus {
            replicas: n(pods),
            ready_replicas: n(ready),
            available_replicas: n(ready),
            desired: n(replicas),
            slurm_idle: n(ready.saturating_sub(busy)),
            slurm_allocated: n(busy),
            selector: Some(selector(name)),
            ..Default::default()
        },
        scaling_mode: Some(ScalingMode::StatefulSet),
        partition: name.into(),
        cluster: Some(CLUSTER.into()),
        max_nodes: Some(max),
        shape: Default::default(),
        template_shape: Default::default(),
    }
}

/// The label selector of a NodeSet's pods.
pub fn selector(nodeset: &str) -> String {
    format!("app.kubernetes.io/instance={nodeset}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurmscale_autoscaler::pool::NodeSetPod;
    use slurmscale_exporter::k8s::ledger::Owner;

    fn run(seed: u64, ticks: u64) -> Simulation {
        let mut s = Simulation::new(seed, SystemTime::UNIX_EPOCH);
        s.scale(4);
        for _ in 0..ticks {
            s.step();
            // Never more allocated than there is.
            let pool = s.pool.slots.iter().filter_map(|s| s.slurm.as_ref());
            for n in s.fixed.iter().chain(pool).chain(s.burst.iter().flatten()) {
                assert!(n.alloc_cpus <= n.cpus && n.alloc_gpus <= n.gpus, "{n:?}");
            }
        }
        s
    }

    #[test]
    fn a_seed_replays_the_same_day() {
        let a = run(7, 400);
        let b = run(7, 400);
        let c = run(8, 400);
        let counts = |s: &Simulation| (s.totals.submitted, s.totals.started, s.totals.completed);
        assert_eq!(counts(&a), counts(&b));
        assert_eq!(a.totals.waits, b.totals.waits);
        assert_ne!(counts(&a), counts(&c));
    }

    #[test]
    fn the_workload_has_every_kind_of_job_and_phase() {
        let mut s = Simulation::new(3, SystemTime::UNIX_EPOCH);
        s.scale(8);
        let mut phases = std::collections::BTreeSet::new();
        let (mut multi, mut gpu, mut burst) = (false, false, false);
        for _ in 0..1200 {
            s.step();
            phases.insert(s.phase.as_str());
            for j in &s.jobs {
                multi |= j.nodes > 1;
                gpu |= j.gpus_per_node > 0;
                burst |= &*j.partition == BURST;
            }
        }
        assert_eq!(phases.len(), 3, "{phases:?}");
        assert!(multi && gpu && burst);
        assert!(s.totals.completed > 100, "{}", s.totals.completed);
    }

    #[test]
    fn scale_in_never_removes_a_busy_node_and_new_nodes_boot_first() {
        let mut s = run(11, 120);
        s.scale(0);
        s.step();
        for j in &s.jobs {
            for p in j.running.iter().flat_map(|(_, places)| places) {
                if let Place::Burst(i) = p {
                    assert!(
                        s.burst[*i].is_some(),
                        "burst-{} was removed under job {}",
                        i + 1,
                        j.id
                    );
                }
            }
        }
        let before = s.nodeset.pods();
        s.scale(before + 2);
        s.step();
        assert_eq!(s.nodeset.pods(), before + 2);
        assert_eq!(
            s.nodeset.ready(s.tick),
            before,
            "new pods need time to boot"
        );
    }

    /// Kubernetes pods wait for room from the first second; a drained node whose pod is
    /// marked goes to one of them when replicas drop, and a new NodeSet pod lands only where
    /// Kubernetes leaves room.
    #[test]
    fn the_pool_hands_a_drained_node_to_a_waiting_pod_and_takes_one_back() {
        let mut s = Simulation::new(5, SystemTime::UNIX_EPOCH);
        s.step();
        assert_eq!((s.pool.held(), s.pool.waiting()), (8, 2));
        assert_eq!(s.pool.unschedulable().len(), 2);
        let idle = s
            .pool
            .slots
            .iter()
            .find(|n| n.slurm.as_ref().is_some_and(|n| !n.busy()))
            .map(|n| (n.k8s_node.clone(), n.slurm.as_ref().map(|n| n.name.clone())))
            .expect("an idle pool node");
        let (k8s_node, slurm_node) = (idle.0, idle.1.unwrap_or_default());
        s.pool
            .drain(&slurm_node, Some("slurmscale: capacity for Kubernetes"));
        s.step();
        let drained = s.snapshot().nodes.data.clone().unwrap_or_default();
        let n = drained
            .iter()
            .find(|n| n.name == slurm_node)
            .expect("still in Slurm");
        assert!(
            n.state.drain() && n.reason.starts_with("slurmscale:"),
            "{n:?}"
        );
        assert_eq!(n.alloc_cpus, 0, "no job starts on a drained node");
        s.pool.mark(std::slice::from_ref(&k8s_node));
        assert_eq!(s.pool.pod_nodes()[&k8s_node], NodeSetPod::Marked);
        s.pool.scale(7);
        s.step();
        assert_eq!((s.pool.held(), s.pool.waiting()), (7, 1));
        assert!(!s.pool.pod_nodes().contains_key(&k8s_node));
        // Back to 8: no node has room for slurmd but the web pod's, so the pod waits.
        s.pool.scale(8);
        s.step();
        assert_eq!(s.pool.held(), 7);
        let ledger = s.kube_snapshot().ledger;
        let k8s = ledger
            .iter()
            .find(|l| l.name == k8s_node)
            .expect("in the ledger");
        assert!(k8s.held(Owner::Kubernetes, "cpu") >= 24.0);
    }
}
