//! The shared-pool replay: a Slurm job log and a Kubernetes pod log on one pool of identical
//! nodes, shared as a site could share it, so a site sees what slurmscale's colocation
//! planner recovers of the pool against the alternatives.
//!
//! * `builtin` — the real controller with a colocated NodeSetAutoscaler, through the
//!   in-memory [`Fake`]: it sees the GenericNode ledger, the NodeSet's pods and the pods
//!   Kubernetes cannot place, drains Slurm nodes by name, marks the pods to go first and sets
//!   replicas; the pool plays slurm-operator (new NodeSet pods land on empty nodes, a removed
//!   pod's node drains first and goes once empty, marked pods go first) and slurmctld.
//! * `static` — a fixed split: nodes `0..split` Slurm's, the rest Kubernetes'.
//! * `slurm-first` — CoreWeave SUNK's model: every node is Slurm's, pods run on nodes Slurm
//!   runs nothing on, and a Slurm job that takes a node evicts the pods there.
//! * `first-come` — ACK's, as described: a node goes to whichever side asks once it is empty
//!   (the side whose work has waited longest first), nothing is preempted.
//! * `oracle` — one scheduler over both queues, pods as one-node jobs, no handover time: the
//!   bound the others are measured against.
//!
//! The headline is **stranded node-hours**: time a node runs nothing on either side while
//! work that would fit it waits on either side — counted as the idle nodes, at most the
//! nodes the waiting work would fill.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use slurmscale_exporter::k8s::ledger::{Capacity, LedgerNode};
use slurmscale_exporter::k8s::watch::{KubeSnapshot, WatchHealth};

use super::cluster::{Cluster, Mode, SchedConfig, Slot};
use super::colocated::PoolWorld;
use super::kube::Scoring;
use super::pods::PodRequest;
use super::report::quantile;
use super::trace::{NodeShape, TraceJob};
use super::view::{CLUSTER, PARTITION, POLL, SlurmView, replay_controller};
use crate::error::{Error, Result};
use slurmscale_autoscaler::crd::NodeSetAutoscalerSpec;
use slurmscale_autoscaler::fakes::{OnFake, Write};

/// The NodeSet's pods, as its status.selector says.
const SELECTOR: &str = "app.kubernetes.io/name=slurmd";
/// After both logs are done, the replay runs this long more.
const TAIL: i64 = 3600;

/// How the pool is shared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Sharing {
    Builtin,
    /// Nodes `0..n` Slurm's, the rest Kubernetes'.
    Static(u32),
    SlurmFirst,
    FirstCome,
    Oracle,
}

impl Sharing {
    pub fn name(self) -> String {
        match self {
            Self::Builtin => "builtin".into(),
            Self::Static(n) => format!("static({n})"),
            Self::SlurmFirst => "slurm-first".into(),
            Self::FirstCome => "first-come".into(),
            Self::Oracle => "oracle".into(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct SharedOptions {
    pub shape: NodeShape,
    pub nodes: u32,
    pub sched: SchedConfig,
    /// Nodes Slurm holds at the start (and always, under `static`).
    pub split: u32,
    /// The colocated NodeSetAutoscaler `builtin` runs.
    pub autoscaler: NodeSetAutoscalerSpec,
    /// Timeline resolution (seconds); 0 picks one for about 1,500 points.
    pub bucket: i64,
    /// How the simulated kube-scheduler places pods (the oracle has its own scheduler).
    pub scoring: Scoring,
}

impl SharedOptions {
    pub fn new(shape: NodeShape, nodes: u32, split: u32) -> Self {
        Self {
            shape,
            nodes,
            sched: SchedConfig::default(),
            split,
            autoscaler: default_spec(nodes),
            bucket: 0,
            scoring: Scoring::default(),
        }
    }
}

/// The colocated NodeSetAutoscaler `builtin` runs when none is given: the CRD's defaults.
pub fn default_spec(nodes: u32) -> NodeSetAutoscalerSpec {
    serde_json::from_value(serde_json::json!({
        "scaleTargetRef": {"name": PARTITION},
        "maxReplicas": nodes,
        "colocation": {},
    }))
    .expect("the default colocated spec is valid")
}

/// What one way of sharing did over the replay.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SharedStats {
    pub jobs: usize,
    pub pods: usize,
    /// Idle while work that would fit waited (see the module's note).
    pub stranded_node_seconds: f64,
    /// Node-seconds each side held (Slurm: its NodeSet pod there, booting, idle or busy;
    /// under `slurm-first` and `oracle`, running a Slurm job), and running nothing at all.
    pub slurm_node_seconds: f64,
    pub kube_node_seconds: f64,
    pub idle_node_seconds: f64,
    /// Sorted waits (seconds): jobs from submit to start, pods from creation to their
    /// (last) binding.
    pub job_waits: Vec<i64>,
    pub pod_waits: Vec<i64>,
    /// Of Slurm's jobs alone.
    pub bounded_slowdown_mean: f64,
    /// Of jobs and pods together, each weighted by the node-hours it runs (its share of a
    /// node, by its largest ask, times nodes and run time): the one figure both sides feel,
    /// so a way of sharing cannot look good by starving one side.
    pub combined_slowdown_mean: f64,
    /// Its weighted sum and weights so far (jobs, then pods added).
    slowdown_weighted: (f64, f64),
    pub drains: u64,
    /// Nodes handed from Slurm to Kubernetes and back.
    pub to_kubernetes: u64,
    pub to_slurm: u64,
    pub evictions: u64,
    pub pod_seconds_lost: f64,
    /// Idle node-time Slurm kept for the first waiting job's planned start while pods waited
    /// for room (at most as many nodes as they would fill): the most that lending such nodes
    /// to pods until the start could have used.
    pub lendable_node_seconds: f64,
    pub jobs_killed: u64,
    /// Work never placed when the replay stopped.
    pub starved_jobs: usize,
    pub starved_pods: usize,
}

/// The timeline: at `time`, what waited; over the bucket from there, the average nodes each
/// side held and idle.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SharedPoint {
    pub time: i64,
    pub slurm_nodes: f64,
    pub kube_nodes: f64,
    pub idle_nodes: f64,
    pub jobs_waiting: u32,
    pub pods_waiting: u32,
}

#[derive(Clone, Debug)]
pub struct SharedRun {
    pub sharing: Sharing,
    pub stats: SharedStats,
    pub timeline: Vec<SharedPoint>,
    /// When each job and each pod (last) started, in the logs' order (`None`: never).
    pub job_starts: Vec<Option<i64>>,
    pub pod_starts: Vec<Option<i64>>,
}

/// What one node slot adds to the pool's counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Part {
    /// Slurm holds it (under `slurm-first`: runs a Slurm job there).
    slurm: bool,
    /// Kubernetes holds it (under `slurm-first`: pods run there and no Slurm job).
    kube: bool,
    /// Nothing runs there.
    idle: bool,
    /// Slurm holds it and its node is idle or booting (first-come's Slurm has room).
    slurm_free: bool,
}

/// The pool: Slurm's partition, Kubernetes' nodes, who holds each node, and counts kept up
/// to date from what changed (a replay has millions of events; none walks every node).
struct Pool {
    sharing: Sharing,
    cluster: Cluster,
    /// Who holds each node, the NodeSet, Kubernetes' pods.
    world: PoolWorld,
    stats: SharedStats,
    parts: Vec<Part>,
    /// Sums of `parts`: slurm, kube, idle, slurm_free.
    totals: [u32; 4],
    /// Slurm-held slots whose node is up and idle, lowest first.
    slurm_idle: BTreeSet<u32>,
    /// Where the counts are in each side's record of changed slots.
    cursors: (u64, u64),
    /// The waiting pods' packed node count, by the pending set it was worked out for.
    pod_need: (u64, u64),
}

impl Pool {
    fn new(
        sharing: Sharing,
        jobs: Arc<[TraceJob]>,
        pods: Arc<[PodRequest]>,
        opts: &SharedOptions,
        start: i64,
    ) -> Self {
        let mode = match sharing {
            Sharing::SlurmFirst => Mode::Static,
            _ => Mode::Pool,
        };
        let mut cluster = Cluster::new(opts.shape, opts.nodes, mode, opts.sched, jobs, start);
        let split = match sharing {
            Sharing::Static(n) => n,
            Sharing::SlurmFirst => opts.nodes,
            _ => opts.split,
        };
        let how = (split, mode == Mode::Pool, sharing == Sharing::SlurmFirst);
        let mut world = PoolWorld::new(&mut cluster, pods, how, PARTITION, start);
        world.kube.scoring = opts.scoring;
        let n = opts.nodes as usize;
        let mut p = Self {
            sharing,
            cluster,
            world,
            stats: SharedStats::default(),
            parts: vec![Part::default(); n],
            totals: [0; 4],
            slurm_idle: BTreeSet::new(),
            cursors: (0, 0),
            pod_need: (u64::MAX, 0),
        };
        for i in 0..opts.nodes {
            p.refresh(i);
        }
        p.cursors = (
            p.cluster.touched_since(0).1,
            p.world.kube.touched_since(0).1,
        );
        p
    }

    fn part(&self, i: u32) -> Part {
        let slot = self.cluster.slot(i);
        let pods = !self.world.kube.empty(i);
        let slurm_work = slot == Slot::Busy;
        let idle = !slurm_work && !pods;
        match self.sharing {
            Sharing::SlurmFirst => Part {
                slurm: slurm_work,
                kube: !slurm_work && pods,
                idle,
                slurm_free: false,
            },
            _ => {
                let slurm = self.world.slurms(i);
                Part {
                    slurm: slurm && slot != Slot::Off,
                    kube: !slurm,
                    idle,
                    slurm_free: slurm && matches!(slot, Slot::Idle | Slot::Booting),
                }
            }
        }
    }

    /// Brings slot `i`'s share of the counts up to date.
    fn refresh(&mut self, i: u32) {
        let new = self.part(i);
        let old = std::mem::replace(&mut self.parts[i as usize], new);
        for (k, (o, n)) in [
            (old.slurm, new.slurm),
            (old.kube, new.kube),
            (old.idle, new.idle),
            (old.slurm_free, new.slurm_free),
        ]
        .into_iter()
        .enumerate()
        {
            self.totals[k] = self.totals[k] + u32::from(n) - u32::from(o);
        }
        let idle_slurm = self.world.slurms(i) && self.cluster.slot(i) == Slot::Idle;
        if idle_slurm {
            self.slurm_idle.insert(i);
        } else {
            self.slurm_idle.remove(&i);
        }
    }

    /// Refreshes the slots either side changed since last time.
    fn refresh_changed(&mut self) {
        let all = self.world.nodes();
        let (slots, c) = self.cluster.touched_since(self.cursors.0);
        let slots: Vec<u32> = slots.map_or_else(|| (0..all).collect(), <[u32]>::to_vec);
        let (kslots, k) = self.world.kube.touched_since(self.cursors.1);
        let kslots: Vec<u32> = kslots.map_or_else(|| (0..all).collect(), <[u32]>::to_vec);
        self.cursors = (c, k);
        for i in slots.into_iter().chain(kslots) {
            self.refresh(i);
        }
    }

    /// Brings the counts of the slots whose holder changed up to date.
    fn refresh_handed(&mut self) {
        for i in self.world.take_changed() {
            self.refresh(i);
        }
    }

    fn hand_to_kube(&mut self, i: u32) {
        self.world.hand_to_kube(i);
        self.refresh_handed();
    }

    fn hand_to_slurm(&mut self, i: u32, now: i64) {
        self.world.hand_to_slurm(&mut self.cluster, i, now);
        self.refresh_handed();
    }

    /// slurm-operator and the Kubernetes scheduler (see [`PoolWorld::operate`]).
    fn operate(&mut self, now: i64) {
        self.world.operate(&mut self.cluster, now);
        self.refresh_handed();
    }

    /// ACK's first-come handover: while a side has work waiting that its own nodes cannot
    /// take, an empty node of the other side goes to it, the side whose work has waited
    /// longest first.
    fn first_come(&mut self, now: i64) {
        loop {
            self.refresh_changed();
            let slurm_since = self
                .cluster
                .head_nodes()
                .filter(|&need| need > self.totals[3])
                .and_then(|_| self.cluster.oldest_pending());
            let kube_since = (self.world.kube.first_empty().is_none())
                .then(|| self.world.kube.oldest_pending())
                .flatten();
            let to_slurm = match (slurm_since, kube_since) {
                (Some(s), Some(k)) => s <= k,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => return,
            };
            if to_slurm {
                let Some(i) = self.world.kube.first_empty() else {
                    return;
                };
                self.hand_to_slurm(i, now);
            } else {
                let Some(i) = self.slurm_idle.first().copied() else {
                    return;
                };
                self.cluster.retire(i);
                self.hand_to_kube(i);
                self.world.kube.schedule(now);
            }
        }
    }

    /// Slurm-first: a job on a node evicts the pods there; pods may use nodes Slurm runs
    /// nothing on.
    fn slurm_first(&mut self, now: i64) {
        let all = self.world.nodes();
        let (slots, c) = self.cluster.touched_since(self.cursors.0);
        let slots: Vec<u32> = slots.map_or_else(|| (0..all).collect(), <[u32]>::to_vec);
        for &i in &slots {
            let busy = self.cluster.slot(i) == Slot::Busy;
            if busy && !self.world.kube.empty(i) {
                self.world.kube.evict(i, now);
            }
            self.world.kube.set_usable(i, !busy);
        }
        // The counts see these slots on their next refresh.
        let _ = c;
        self.world.kube.schedule(now);
    }

    /// Accounts `dt` seconds of the pool as it stands.
    fn account(&mut self, dt: f64) {
        if self.pod_need.0 != self.world.kube.pending_version() {
            self.pod_need = (
                self.world.kube.pending_version(),
                self.world.kube.pending_nodes(),
            );
        }
        let [slurm, kube, idle, _] = self.totals;
        let waiting = self
            .cluster
            .counts
            .pending_job_nodes
            .saturating_add(self.pod_need.1);
        self.stats.slurm_node_seconds += f64::from(slurm) * dt;
        self.stats.kube_node_seconds += f64::from(kube) * dt;
        self.stats.idle_node_seconds += f64::from(idle) * dt;
        self.stats.stranded_node_seconds += waiting.min(u64::from(idle)) as f64 * dt;
        if self.pod_need.1 > 0
            && let Some(plan) = self.cluster.plan()
        {
            let held = plan
                .nodes
                .iter()
                .filter(|i| self.slurm_idle.contains(i))
                .count() as u64;
            self.stats.lendable_node_seconds += held.min(self.pod_need.1) as f64 * dt;
        }
    }

    fn point(&self, time: i64) -> SharedPoint {
        SharedPoint {
            time,
            jobs_waiting: self.cluster.counts.pending,
            pods_waiting: self.world.kube.pending_count() as u32,
            ..SharedPoint::default()
        }
    }
}

/// What a poll of `builtin` looks at to decide whether to plan at all.
type Inputs = ([u64; 4], u64, [u32; 2], (u32, u32));

/// The real controller on the pool, as `builtin` runs it.
struct Autoscaler {
    rt: tokio::runtime::Runtime,
    on: OnFake,
    view: SlurmView,
    /// What it last looked at.
    seen: Option<Inputs>,
    /// The ledger and capacity it shows, kept between looks: only what changed is written.
    ledger: Arc<Vec<LedgerNode>>,
    capacity: Arc<BTreeMap<String, Capacity>>,
    ledger_cursor: Option<u64>,
    shown_pending: Option<u64>,
    next_poll: i64,
}

impl Autoscaler {
    fn new(spec: &NodeSetAutoscalerSpec, pool: &Pool, start: i64) -> Self {
        let on = replay_controller(spec, Some(SELECTOR));
        let (ledger, capacity) = pool.world.empty_ledger(&pool.cluster.shape, CLUSTER);
        Self {
            rt: tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("a current-thread runtime builds"),
            on,
            view: SlurmView::new(&pool.cluster),
            seen: None,
            ledger: Arc::new(ledger),
            capacity: Arc::new(capacity),
            ledger_cursor: None,
            shown_pending: None,
            // The first poll at or after the start, as a controller started then polls.
            next_poll: start + (POLL - start.rem_euclid(POLL)) % POLL,
        }
    }

    /// What the planner acts on, coarsely: a poll where none of it moved is skipped (the
    /// real controller would plan the same).
    fn inputs(pool: &Pool) -> Inputs {
        let c = pool.cluster.counts;
        (
            [
                u64::from(c.busy),
                u64::from(c.pending),
                c.pending_job_nodes,
                u64::from(c.provisioned),
            ],
            pool.world.kube.pending_version(),
            // Nodes Slurm holds and of those idle; pods coming and going while none waits
            // move nothing the planner reads.
            [pool.totals[0], pool.totals[3]],
            (pool.world.nodeset.replicas, pool.world.nodeset.unplaced),
        )
    }

    /// The next poll that has something to look at, if any.
    fn wake(&self, pool: &Pool, now: i64) -> Option<i64> {
        let next = |t: i64| t - t.rem_euclid(POLL) + POLL;
        if self.seen != Some(Self::inputs(pool)) {
            return Some(next(now).max(self.next_poll));
        }
        let revisit = self.on.controller.next_revisit()?;
        let secs = revisit
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs_f64().ceil() as i64);
        Some(next(secs - 1).max(self.next_poll))
    }

    /// A poll at `now`: when something it reads changed (or its controller asked to look
    /// again), the world as the API server and slurmrestd would show it, one reconcile, and
    /// what it wrote carried out.
    fn look(&mut self, now: i64, pool: &mut Pool) {
        if now < self.next_poll || now.rem_euclid(POLL) != 0 {
            return;
        }
        self.next_poll = now + POLL;
        let inputs = Self::inputs(pool);
        let revisit =
            self.on.controller.next_revisit().is_some_and(|t| {
                t <= SystemTime::UNIX_EPOCH + Duration::from_secs(now.max(0) as u64)
            });
        if self.seen == Some(inputs) && !revisit {
            return;
        }
        self.seen = Some(inputs);
        self.show(pool);
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(now.max(0) as u64);
        self.on.set_now(at);
        self.view.sync(&pool.cluster);
        let mut snap = self.view.snapshot(at);
        // Colocation ranks drain candidates by their jobs' ends.
        snap.jobs.data = Some(Arc::new(self.view.jobs_with_running(&pool.cluster)));
        self.on.publish(Arc::new(snap));
        self.rt.block_on(self.on.controller.reconcile_all());
        let writes = self.on.fake.take_writes();
        // What it wrote changes what it reads (a drained node is a node to release): the next
        // poll looks again, as the real autoscaler's would.
        if writes.iter().any(|w| !matches!(w, Write::Event { .. })) {
            self.seen = None;
        }
        for w in writes {
            pool.world.apply(&mut pool.cluster, &w, now);
        }
    }

    /// What the controller reads of Kubernetes: replicas, the NodeSet's pods by node, the
    /// pods that wait, the ledger and the nodes' capacity.
    fn show(&mut self, pool: &Pool) {
        let ledger_stale = self.ledger_cursor.is_none();
        // The ledger: only the nodes whose pods changed are written again.
        let (touched, cursor) = pool
            .world
            .kube
            .touched_since(self.ledger_cursor.unwrap_or(0));
        let slots: Vec<u32> = match touched.filter(|_| !ledger_stale) {
            Some(t) => t.to_vec(),
            None => (0..pool.world.nodes()).collect(),
        };
        self.ledger_cursor = Some(cursor);
        // The last snapshot shown lets go of the ledger, so it is changed in place.
        self.on.fake.with(|w| w.ledger = None);
        {
            let ledger = Arc::make_mut(&mut self.ledger);
            for i in slots {
                pool.world.set_kube_held(&mut ledger[i as usize], i);
            }
        }
        if self.shown_pending != Some(pool.world.kube.pending_version()) {
            self.shown_pending = Some(pool.world.kube.pending_version());
            let unschedulable = pool.world.unschedulable();
            self.on.fake.with(|w| w.unschedulable = unschedulable);
        }
        let pods = pool.world.pods_by_node();
        let kube = KubeSnapshot {
            ledger: self.ledger.clone(),
            capacity: self.capacity.clone(),
            watches: ["nodes", "genericnodes"]
                .into_iter()
                .map(|r| {
                    (
                        r,
                        WatchHealth {
                            probed: true,
                            served: true,
                            synced: true,
                            version: None,
                            last_error: None,
                        },
                    )
                })
                .collect(),
            ..KubeSnapshot::default()
        };
        self.on.fake.with(|w| {
            if let Some(t) = w.targets.get_mut(PARTITION) {
                t.replicas = u64::from(pool.world.nodeset.replicas);
                t.version += 1;
            }
            w.pods.insert(SELECTOR.into(), pods);
            let waiting = u64::from(pool.world.nodeset.unplaced);
            w.unscheduled.insert(SELECTOR.into(), waiting);
            w.ledger = Some(kube);
        });
    }
}

/// The timeline bucket: about 1,500 points, whole minutes.
fn bucket_for(start: i64, end: i64) -> i64 {
    ((end - start + TAIL) / 1500 / 60 + 1) * 60
}

/// Replays `jobs` and `pods` (unix seconds, sorted by submit) on the pool as `sharing` says.
pub fn run_sharing(
    sharing: Sharing,
    jobs: Arc<[TraceJob]>,
    pods: Arc<[PodRequest]>,
    opts: &SharedOptions,
) -> Result<SharedRun> {
    let (start, last) = span(&jobs, &pods)?;
    if sharing == Sharing::Oracle {
        return oracle(jobs, pods, opts, start);
    }
    let width = if opts.bucket > 0 {
        opts.bucket
    } else {
        bucket_for(start, last)
    };
    let mut pool = Pool::new(sharing, jobs.clone(), pods.clone(), opts, start);
    let mut auto =
        (sharing == Sharing::Builtin).then(|| Autoscaler::new(&opts.autoscaler, &pool, start));
    let mut timeline = SharedTimeline {
        start,
        width,
        points: Vec::new(),
    };
    let mut now = start;
    let mut done = Progress::new(start);
    // Each turn plays what happens at `now` (the log's first instant included), then
    // accounts the pool up to the next thing that happens.
    loop {
        turn(sharing, &mut pool, auto.as_mut(), now);
        done.note(&pool, (jobs.len(), pods.len()), now);
        let next = [
            pool.cluster.next_event(),
            pool.world.kube.next_event(),
            auto.as_ref().and_then(|a| a.wake(&pool, now)),
        ]
        .into_iter()
        .flatten()
        .filter(|&t| t > now)
        .min();
        let stop = done.stop();
        let t = match next {
            Some(t) if t <= stop => t,
            _ => stop.min(now + 7 * 86400),
        };
        timeline.account(&mut pool, now, t);
        now = t;
        if now >= stop {
            break;
        }
    }
    let mut stats = pool.stats;
    finish_jobs(
        &mut stats,
        &jobs,
        |j| pool.cluster.started(j),
        now,
        &opts.shape,
    );
    finish_pods(
        &mut stats,
        &pods,
        &pool.world.kube.started,
        now,
        &opts.shape,
    );
    stats.evictions = pool.world.kube.evictions;
    stats.drains = pool.world.drains;
    stats.to_kubernetes = pool.world.to_kubernetes;
    stats.to_slurm = pool.world.to_slurm;
    stats.pod_seconds_lost = pool.world.kube.lost_seconds;
    Ok(SharedRun {
        sharing,
        stats,
        timeline: timeline.finish(),
        job_starts: (0..jobs.len()).map(|j| pool.cluster.started(j)).collect(),
        pod_starts: pool.world.kube.started.clone(),
    })
}

/// The first and last submit of both logs together.
fn span(jobs: &[TraceJob], pods: &[PodRequest]) -> Result<(i64, i64)> {
    let start = [
        jobs.first().map(|j| j.submit),
        pods.first().map(|p| p.submit),
    ]
    .into_iter()
    .flatten()
    .min()
    .ok_or_else(|| Error::Simulate("nothing to replay".into()))?;
    let last = jobs
        .iter()
        .map(|j| j.submit)
        .chain(pods.iter().map(|p| p.submit))
        .max()
        .unwrap_or(start);
    Ok((start, last))
}

/// What happens at `now`: the logs' work, then the way of sharing moves capacity.
fn turn(sharing: Sharing, pool: &mut Pool, auto: Option<&mut Autoscaler>, now: i64) {
    pool.cluster.advance(now);
    pool.world.kube.advance(now);
    match sharing {
        Sharing::Builtin => {
            pool.refresh_changed();
            if let Some(a) = auto {
                a.look(now, pool);
            }
            pool.operate(now);
            pool.cluster.advance(now);
        }
        Sharing::FirstCome => pool.first_come(now),
        Sharing::SlurmFirst => pool.slurm_first(now),
        Sharing::Static(_) | Sharing::Oracle => {}
    }
    pool.refresh_changed();
}

/// When the replay is done: both logs ran out, or a week passed with everything submitted
/// and nothing finishing (work that can never be placed under this way of sharing).
struct Progress {
    /// The last time a job or pod finished, and how many had then.
    at: i64,
    finished: (usize, usize),
    done_at: Option<i64>,
}

impl Progress {
    fn new(start: i64) -> Self {
        Self {
            at: start,
            finished: (0, 0),
            done_at: None,
        }
    }

    fn note(&mut self, pool: &Pool, (jobs, pods): (usize, usize), now: i64) {
        let moved = (pool.cluster.finished(), pool.world.kube.finished());
        if moved != self.finished {
            self.finished = moved;
            self.at = now;
        }
        let all_in = pool.cluster.submitted() == jobs && pool.world.kube.submitted() == pods;
        let stuck = all_in && now - self.at >= 7 * 86400;
        if self.done_at.is_none() && ((pool.cluster.done() && pool.world.kube.done()) || stuck) {
            self.done_at = Some(now);
        }
    }

    /// The replay ends a tail after it is done.
    fn stop(&self) -> i64 {
        self.done_at.map_or(i64::MAX, |d| d + TAIL)
    }
}

/// Node-seconds per timeline bucket, sampled at bucket starts.
struct SharedTimeline {
    start: i64,
    width: i64,
    points: Vec<SharedPoint>,
}

impl SharedTimeline {
    /// Accounts the pool over [`from`, `to`), bucket by bucket.
    fn account(&mut self, pool: &mut Pool, from: i64, to: i64) {
        let mut a = from;
        while a < to {
            let b = ((a - self.start) / self.width) as usize;
            while self.points.len() <= b {
                let time = self.start + self.points.len() as i64 * self.width;
                self.points.push(pool.point(time));
            }
            let end = (self.start + (b as i64 + 1) * self.width).min(to);
            let before = (
                pool.stats.slurm_node_seconds,
                pool.stats.kube_node_seconds,
                pool.stats.idle_node_seconds,
            );
            pool.account((end - a) as f64);
            let p = &mut self.points[b];
            p.slurm_nodes += pool.stats.slurm_node_seconds - before.0;
            p.kube_nodes += pool.stats.kube_node_seconds - before.1;
            p.idle_nodes += pool.stats.idle_node_seconds - before.2;
            a = end;
        }
    }

    /// Node counts, averaged over each bucket.
    fn finish(mut self) -> Vec<SharedPoint> {
        let width = self.width as f64;
        for p in &mut self.points {
            p.slurm_nodes /= width;
            p.kube_nodes /= width;
            p.idle_nodes /= width;
        }
        self.points
    }
}

/// Waits and bounded slowdown of the jobs.
fn finish_jobs(
    stats: &mut SharedStats,
    jobs: &[TraceJob],
    started: impl Fn(usize) -> Option<i64>,
    stopped: i64,
    shape: &NodeShape,
) {
    let mut slowdown = 0.0;
    for (j, job) in jobs.iter().enumerate() {
        let start = started(j);
        stats.starved_jobs += usize::from(start.is_none());
        let wait = start.unwrap_or(stopped) - job.submit;
        stats.job_waits.push(wait);
        let b = bounded_slowdown(wait, job.run);
        slowdown += b;
        let share = node_share(
            shape,
            f64::from(job.cpus_per_node),
            job.memory_mib_per_node,
            f64::from(job.gpus_per_node),
        );
        let weight = share * f64::from(job.nodes) * job.run as f64;
        stats.slowdown_weighted.0 += weight * b;
        stats.slowdown_weighted.1 += weight;
    }
    stats.jobs = jobs.len();
    stats.bounded_slowdown_mean = slowdown / jobs.len().max(1) as f64;
    stats.job_waits.sort_unstable();
}

/// Pods' waits, and the slowdown of jobs and pods together (after [`finish_jobs`]).
fn finish_pods(
    stats: &mut SharedStats,
    pods: &[PodRequest],
    started: &[Option<i64>],
    stopped: i64,
    shape: &NodeShape,
) {
    for (p, pod) in pods.iter().enumerate() {
        stats.starved_pods += usize::from(started[p].is_none());
        let wait = started[p].unwrap_or(stopped) - pod.submit;
        stats.pod_waits.push(wait);
        let weight = node_share(shape, pod.cpus, pod.memory_mib, pod.gpus) * pod.run as f64;
        stats.slowdown_weighted.0 += weight * bounded_slowdown(wait, pod.run);
        stats.slowdown_weighted.1 += weight;
    }
    stats.pods = pods.len();
    stats.pod_waits.sort_unstable();
    let (sum, weights) = stats.slowdown_weighted;
    stats.combined_slowdown_mean = if weights > 0.0 { sum / weights } else { 1.0 };
}

/// Wait plus run over run, the run at least 10 s, at least 1.
fn bounded_slowdown(wait: i64, run: u64) -> f64 {
    let run = run as f64;
    ((wait as f64 + run) / run.max(10.0)).max(1.0)
}

/// What share of a node an ask takes: its largest share of any resource the node has.
fn node_share(shape: &NodeShape, cpus: f64, memory_mib: u64, gpus: f64) -> f64 {
    let of = |n: f64, d: f64| if d > 0.0 { n / d } else { 0.0 };
    of(cpus, f64::from(shape.cpus))
        .max(of(memory_mib as f64, shape.memory_mib as f64))
        .max(of(gpus, f64::from(shape.gpus)))
        .min(1.0)
}

/// One scheduler over both queues: each pod a one-node job of its whole-unit share (CPUs and
/// GPUs rounded up, as Slurm allocates them), in submit order with the jobs, EASY backfill,
/// on every node, no handover.
fn oracle(
    jobs: Arc<[TraceJob]>,
    pods: Arc<[PodRequest]>,
    opts: &SharedOptions,
    start: i64,
) -> Result<SharedRun> {
    let mut all: Vec<(TraceJob, Option<usize>)> = jobs.iter().map(|j| (j.clone(), None)).collect();
    for (i, p) in pods.iter().enumerate() {
        all.push((
            TraceJob {
                id: p.name.clone(),
                submit: p.submit,
                run: p.run.max(1),
                limit: p.run.max(1),
                nodes: 1,
                cpus_per_node: (p.cpus.ceil() as u32).clamp(1, opts.shape.cpus),
                memory_mib_per_node: if opts.shape.memory_mib == 0 {
                    0
                } else {
                    p.memory_mib
                },
                gpus_per_node: (p.gpus.ceil() as u32).min(opts.shape.gpus),
                recorded_wait: None,
            },
            Some(i),
        ));
    }
    all.sort_by_key(|(j, _)| j.submit);
    let merged: Arc<[TraceJob]> = all.iter().map(|(j, _)| j.clone()).collect();
    let mut c = Cluster::new(
        opts.shape,
        opts.nodes,
        Mode::Static,
        opts.sched,
        merged.clone(),
        start,
    );
    let mut stats = SharedStats::default();
    let mut now = start;
    let mut done_at: Option<i64> = None;
    loop {
        let stop = done_at.map_or(i64::MAX, |d| d + TAIL);
        let t = match c.next_event() {
            Some(t) if t <= stop => t,
            _ => stop.min(now + 7 * 86400),
        };
        let dt = (t - now) as f64;
        let idle = opts.nodes - c.counts.busy;
        stats.idle_node_seconds += f64::from(idle) * dt;
        stats.stranded_node_seconds += c.counts.pending_job_nodes.min(u64::from(idle)) as f64 * dt;
        now = t;
        if now >= stop {
            break;
        }
        c.advance(now);
        if done_at.is_none() && c.done() {
            done_at = Some(now);
        }
    }
    // Work done, by side: nodes × run of the jobs, a pod's share of a node × its run.
    let shape = opts.shape;
    for (job, pod) in &all {
        let seconds = job.run as f64 * f64::from(job.nodes);
        match pod {
            None => stats.slurm_node_seconds += seconds,
            Some(_) => {
                stats.kube_node_seconds +=
                    seconds * f64::from(job.cpus_per_node) / f64::from(shape.cpus)
            }
        }
    }
    let index: Vec<(usize, Option<usize>)> =
        all.iter().enumerate().map(|(k, (_, p))| (k, *p)).collect();
    let job_starts: Vec<Option<i64>> = index
        .iter()
        .filter(|(_, p)| p.is_none())
        .map(|(k, _)| c.started(*k))
        .collect();
    let mut pod_starts = vec![None; pods.len()];
    for (k, p) in &index {
        if let Some(p) = p {
            pod_starts[*p] = c.started(*k);
        }
    }
    // The merged order keeps the jobs' relative order (a stable sort by submit).
    finish_jobs(&mut stats, &jobs, |j| job_starts[j], now, &opts.shape);
    finish_pods(&mut stats, &pods, &pod_starts, now, &opts.shape);
    Ok(SharedRun {
        sharing: Sharing::Oracle,
        stats,
        timeline: Vec::new(),
        job_starts,
        pod_starts,
    })
}

/// `static-best`: the fixed split with the fewest stranded node-hours among those where
/// *neither* side waits longer at p95 than at the even split (`even`), so the best split
/// cannot win on stranded hours by starving one side; `None` when no split qualifies.
pub fn best_static<'a>(runs: &'a [SharedRun], even: &SharedRun) -> Option<&'a SharedRun> {
    let p95 = |waits: &[i64]| quantile(waits, 0.95);
    runs.iter()
        .filter(|r| matches!(r.sharing, Sharing::Static(_)))
        .filter(|r| {
            p95(&r.stats.job_waits) <= p95(&even.stats.job_waits)
                && p95(&r.stats.pod_waits) <= p95(&even.stats.pod_waits)
        })
        .min_by(|a, b| {
            a.stats
                .stranded_node_seconds
                .total_cmp(&b.stats.stranded_node_seconds)
        })
}

/// The ways of sharing `slurmscale simulate --pods` knows, in report order.
pub const POLICIES: [&str; 6] = [
    "builtin",
    "static",
    "static-best",
    "slurm-first",
    "first-come",
    "oracle",
];

/// Splits `static-best` tries: 20, evenly over the pool, ends included.
fn sweep(nodes: u32) -> Vec<u32> {
    let mut v: Vec<u32> = (0..20u32).map(|i| i * nodes / 19).collect();
    v.dedup();
    v
}

/// Replays both logs under every way of sharing in `policies` (names of [`POLICIES`]), on
/// as many threads as the machine has; the runs come back named, in the order asked.
pub fn run(
    policies: &[String],
    jobs: Vec<TraceJob>,
    pods: Vec<PodRequest>,
    opts: &SharedOptions,
    progress: Option<&AtomicU64>,
) -> Result<Vec<(String, SharedRun)>> {
    let mut wanted: BTreeSet<Sharing> = BTreeSet::new();
    for p in policies {
        match p.as_str() {
            "builtin" => wanted.insert(Sharing::Builtin),
            "static" => wanted.insert(Sharing::Static(opts.split)),
            "static-best" => {
                wanted.insert(Sharing::Static(opts.split));
                wanted.extend(sweep(opts.nodes).into_iter().map(Sharing::Static));
                true
            }
            "slurm-first" => wanted.insert(Sharing::SlurmFirst),
            "first-come" => wanted.insert(Sharing::FirstCome),
            "oracle" => wanted.insert(Sharing::Oracle),
            other => {
                return Err(Error::Simulate(format!(
                    "{other:?} is no way of sharing a pool: {}",
                    POLICIES.join(", ")
                )));
            }
        };
    }
    let jobs: Arc<[TraceJob]> = jobs.into();
    let pods: Arc<[PodRequest]> = pods.into();
    let queue: std::sync::Mutex<Vec<Sharing>> =
        std::sync::Mutex::new(wanted.iter().rev().copied().collect());
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let results: std::sync::Mutex<BTreeMap<Sharing, Result<SharedRun>>> = Default::default();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let next = queue.lock().unwrap_or_else(|e| e.into_inner()).pop();
                    let Some(sharing) = next else { break };
                    let r = run_sharing(sharing, jobs.clone(), pods.clone(), opts);
                    if let Some(p) = progress {
                        p.fetch_add(1, Ordering::Relaxed);
                    }
                    results
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(sharing, r);
                }
            });
        }
    });
    let mut done: BTreeMap<Sharing, SharedRun> = BTreeMap::new();
    for (k, r) in results.into_inner().unwrap_or_else(|e| e.into_inner()) {
        done.insert(k, r?);
    }
    let mut out = Vec::new();
    for p in policies {
        let run = match p.as_str() {
            "builtin" => done.get(&Sharing::Builtin).cloned(),
            "static" => done.get(&Sharing::Static(opts.split)).cloned(),
            "static-best" => {
                let reference = &done[&Sharing::Static(opts.split)];
                let sweep: Vec<SharedRun> = done
                    .values()
                    .filter(|r| matches!(r.sharing, Sharing::Static(_)))
                    .cloned()
                    .collect();
                best_static(&sweep, reference).cloned()
            }
            "slurm-first" => done.get(&Sharing::SlurmFirst).cloned(),
            "first-come" => done.get(&Sharing::FirstCome).cloned(),
            "oracle" => done.get(&Sharing::Oracle).cloned(),
            _ => None,
        };
        if let Some(r) = run {
            out.push((p.clone(), r));
        }
    }
    Ok(out)
}

/// How many runs [`run`] makes for `policies`, for a progress bar.
pub fn runs_for(policies: &[String], nodes: u32) -> usize {
    let mut n: BTreeSet<String> = BTreeSet::new();
    for p in policies {
        if p == "static-best" {
            n.insert("static".into());
            n.extend(sweep(nodes).into_iter().map(|s| format!("static({s})")));
        } else {
            n.insert(p.clone());
        }
    }
    n.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3600;

    fn shape() -> NodeShape {
        NodeShape {
            cpus: 8,
            memory_mib: 16_384,
            gpus: 0,
        }
    }

    fn job(id: &str, submit: i64, run: u64, nodes: u32) -> TraceJob {
        TraceJob {
            id: id.into(),
            submit,
            run,
            limit: run,
            nodes,
            cpus_per_node: 8,
            memory_mib_per_node: 0,
            gpus_per_node: 0,
            recorded_wait: None,
        }
    }

    /// A pod that takes most of one node.
    fn pod(name: &str, submit: i64, run: u64) -> PodRequest {
        PodRequest {
            name: name.into(),
            submit,
            run,
            cpus: 6.0,
            memory_mib: 1024,
            gpus: 0.0,
            priority: 0,
        }
    }

    /// Four nodes, two Slurm's at the start: a four-node job, then, once it is over, four pods
    /// of one node each. Neither side fits in its half; both fit the pool in turn.
    fn turns() -> (Arc<[TraceJob]>, Arc<[PodRequest]>, SharedOptions) {
        let jobs = vec![job("wide", 0, 2 * HOUR as u64, 4)];
        let pods = (0..4)
            .map(|i| pod(&format!("web-{i}"), 3 * HOUR, HOUR as u64))
            .collect::<Vec<_>>();
        (jobs.into(), pods.into(), SharedOptions::new(shape(), 4, 2))
    }

    fn replay(sharing: Sharing) -> SharedStats {
        let (jobs, pods, opts) = turns();
        run_sharing(sharing, jobs, pods, &opts).unwrap().stats
    }

    #[test]
    fn the_real_planner_hands_the_pool_to_each_side_in_turn_and_kills_nothing() {
        let s = replay(Sharing::Builtin);
        assert_eq!((s.starved_jobs, s.starved_pods), (0, 0), "{s:?}");
        assert!(s.to_slurm >= 2, "Slurm got the Kubernetes half: {s:?}");
        assert!(s.to_kubernetes >= 2, "Kubernetes got nodes back: {s:?}");
        assert_eq!((s.evictions, s.jobs_killed), (0, 0));
        assert_eq!(s.pod_seconds_lost, 0.0);
        // The job waits for two nodes to change hands, not for the pods' hour.
        assert!(s.job_waits[0] < 600, "job waited {}s", s.job_waits[0]);
        assert!(s.pod_waits.iter().all(|&w| w < 900), "{:?}", s.pod_waits);
    }

    #[test]
    fn a_fixed_split_never_runs_work_larger_than_its_half_and_says_so() {
        let s = replay(Sharing::Static(2));
        assert_eq!(s.starved_jobs, 1, "the four-node job never fits two nodes");
        // Two pods run at once on Kubernetes' half: the other two wait an hour.
        assert_eq!(s.pod_waits, [0, 0, HOUR, HOUR]);
        // Stranded: all four nodes for the three hours the job waits alone, then Slurm's two
        // while two pods wait, then all four again until the replay gives the job up.
        let (first, then) = (4.0 * 3.0 * HOUR as f64, 2.0 * HOUR as f64);
        assert!(
            s.stranded_node_seconds >= first + then,
            "{}",
            s.stranded_node_seconds
        );
    }

    #[test]
    fn the_oracle_strands_nothing_and_bounds_the_others() {
        let o = replay(Sharing::Oracle);
        assert_eq!(o.stranded_node_seconds, 0.0);
        assert_eq!(o.job_waits, [0]);
        assert_eq!(o.pod_waits, [0, 0, 0, 0]);
        for sharing in [Sharing::Builtin, Sharing::FirstCome, Sharing::SlurmFirst] {
            let s = replay(sharing);
            assert!(
                s.stranded_node_seconds >= o.stranded_node_seconds,
                "{sharing:?} beat the bound"
            );
        }
    }

    #[test]
    fn slurm_first_evicts_pods_for_a_job_and_counts_the_work_lost() {
        // The pods come first and hold every node; a two-node job arrives an hour in.
        let jobs: Arc<[TraceJob]> = vec![job("two", HOUR, HOUR as u64, 2)].into();
        let pods: Arc<[PodRequest]> = (0..4)
            .map(|i| pod(&format!("web-{i}"), 0, 10 * HOUR as u64))
            .collect::<Vec<_>>()
            .into();
        let opts = SharedOptions::new(shape(), 4, 2);
        let s = run_sharing(Sharing::SlurmFirst, jobs.clone(), pods.clone(), &opts)
            .unwrap()
            .stats;
        assert_eq!(s.evictions, 2, "{s:?}");
        assert_eq!(s.job_waits, [0]);
        // Each evicted pod had run an hour, and runs again from the start.
        assert!(
            (s.pod_seconds_lost - 2.0 * HOUR as f64).abs() < 10.0,
            "{}",
            s.pod_seconds_lost
        );
        // The real planner preempts nothing: the job waits for pods to end instead.
        let b = run_sharing(Sharing::Builtin, jobs, pods, &opts)
            .unwrap()
            .stats;
        assert_eq!((b.evictions, b.pod_seconds_lost), (0, 0.0));
    }

    #[test]
    fn idle_nodes_kept_for_a_planned_start_while_pods_wait_are_counted_as_lendable() {
        // Slurm holds two of three nodes: one runs a ten-hour job, so a two-node job plans to
        // start on both when it ends and keeps the other idle meanwhile. Kubernetes' node
        // runs a long pod; a second pod waits for room the whole time.
        let jobs: Arc<[TraceJob]> = vec![
            job("long", 0, 10 * HOUR as u64, 1),
            job("wide", 60, HOUR as u64, 2),
        ]
        .into();
        let with_pods = |pods: Vec<PodRequest>| {
            let opts = SharedOptions::new(shape(), 3, 2);
            run_sharing(Sharing::Static(2), jobs.clone(), pods.into(), &opts)
                .unwrap()
                .stats
        };
        let s = with_pods(vec![pod("big", 0, 20 * HOUR as u64), pod("late", 120, 600)]);
        assert_eq!(s.job_waits[1], 10 * HOUR - 60, "{s:?}");
        // From the plan (the first backfill pass, within 30 s of the wide job) until it
        // starts, one held node while one pod waits.
        let lendable = s.lendable_node_seconds;
        assert!(
            (10.0 * HOUR as f64 - 200.0..=10.0 * HOUR as f64 - 120.0).contains(&lendable),
            "{lendable}"
        );
        // No pod waiting: nothing to lend to.
        let s = with_pods(vec![pod("big", 0, 20 * HOUR as u64)]);
        assert_eq!(s.lendable_node_seconds, 0.0, "{s:?}");
    }

    #[test]
    fn an_unknown_way_of_sharing_is_refused_by_name() {
        let (jobs, pods, opts) = turns();
        let err = run(&["fair".into()], jobs.to_vec(), pods.to_vec(), &opts, None).unwrap_err();
        assert!(err.to_string().contains("\"fair\""), "{err}");
    }
}
