//! The shared-pool replay: a Slurm job log and a Kubernetes pod log on one pool of identical
//! nodes, shared as a site could share it, so a site sees what slurmscale's colocation
//! planner recovers of the pool against the alternatives.
//!
//! * `builtin` ([`builtin`]) — the real controller with a colocated NodeSetAutoscaler,
//!   through the in-memory seam: it sees the GenericNode ledger, the NodeSet's pods and the pods
//!   Kubernetes cannot place, drains Slurm nodes by name, marks the pods to go first and sets
//!   replicas; the pool plays slurm-operator (new NodeSet pods land on empty nodes, a removed
//!   pod's node drains first and goes once empty, marked pods go first) and slurmctld.
//! * `static` — a fixed split: nodes `0..split` Slurm's, the rest Kubernetes'.
//! * `slurm-first` ([`rivals`]) — CoreWeave SUNK's model: every node is Slurm's, pods run on nodes Slurm
//!   runs nothing on, and a Slurm job that takes a node evicts the pods there.
//! * `first-come` ([`rivals`]) — ACK's, as described: a node goes to whichever side asks once it is empty
//!   (the side whose work has waited longest first), nothing is preempted.
//! * `oracle` ([`oracle`]) — one scheduler over both queues, pods as one-node jobs, no handover time: the
//!   bound the others are measured against.
//!
//! The headline is **stranded node-hours**: time a node runs nothing on either side while
//! work that would fit it waits on either side — counted as the idle nodes, at most the
//! nodes the waiting work would fill. The pool's counts are kept in [`pool`], and what a run
//! did is summed up in [`stats`].

mod builtin;
mod oracle;
mod pool;
mod rivals;
mod stats;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::cluster::SchedConfig;
use super::kube::Scoring;
use super::pods::PodRequest;
use super::report::quantile;
use super::trace::{NodeShape, TraceJob};
use super::view::PARTITION;
use crate::error::{Error, Result};
use builtin::Autoscaler;
use oracle::oracle;
use pool::{Pool, SharedTimeline, bucket_for};
use slurmscale_autoscaler::crd::NodeSetAutoscalerSpec;
use stats::{finish_jobs, finish_pods};

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
            autoscaler: default_spec(nodes, split),
            bucket: 0,
            scoring: Scoring::default(),
        }
    }
}

/// The label every replayed pod carries, so `evictablePods` can name them all.
pub const POD_LABEL: (&str, &str) = ("simulate.slurmscale.io/pod-log", "replayed");

/// The colocated NodeSetAutoscaler `builtin` runs when none is given: the CRD's defaults
/// but for shares — Slurm's share is the `split` the `static` row holds, and every replayed
/// pod may be evicted when Slurm reclaims its share — so every replay compares `builtin`
/// with the split it was given.
pub fn default_spec(nodes: u32, split: u32) -> NodeSetAutoscalerSpec {
    serde_json::from_value(serde_json::json!({
        "scaleTargetRef": {"name": PARTITION},
        "maxReplicas": nodes,
        "colocation": {"shares": {"slurm": split, "evictablePods": {POD_LABEL.0: POD_LABEL.1}}},
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
    /// Jobs requeued (`requeueAfterSeconds`) and the node-seconds of their runs lost.
    pub jobs_requeued: u64,
    pub job_node_seconds_lost: f64,
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
            auto.as_mut().and_then(|a| a.wake(&pool, now)),
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
    stats.jobs_requeued = pool.cluster.requeued;
    stats.job_node_seconds_lost = pool.cluster.lost_node_seconds;
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
        // The real planner without shares (Kubernetes first) preempts nothing: the job waits
        // for pods to end instead.
        let mut first = opts.clone();
        first.autoscaler.colocation.as_mut().unwrap().shares = None;
        let b = run_sharing(Sharing::Builtin, jobs, pods, &first)
            .unwrap()
            .stats;
        assert_eq!((b.evictions, b.pod_seconds_lost), (0, 0.0));
    }

    #[test]
    fn under_shares_a_job_gets_slurms_share_back_within_the_reclaim_time() {
        // Slurm's share is two of four nodes. Four ten-hour pods come first: two run on
        // Kubernetes' share, two borrow Slurm's idle nodes (drained, handed over). An hour
        // in, a two-node job comes: both borrowed nodes are reserved at once and their pods
        // evicted one reclaim time (600 s) less a boot later, so the job waits about that.
        let jobs: Arc<[TraceJob]> = vec![job("two", HOUR, HOUR as u64, 2)].into();
        let pods: Arc<[PodRequest]> = (0..4)
            .map(|i| pod(&format!("web-{i}"), 0, 10 * HOUR as u64))
            .collect::<Vec<_>>()
            .into();
        let opts = SharedOptions::new(shape(), 4, 2);
        let s = run_sharing(Sharing::Builtin, jobs, pods, &opts)
            .unwrap()
            .stats;
        assert_eq!(s.evictions, 2, "{s:?}");
        assert_eq!(s.jobs_killed, 0);
        assert!((500..=800).contains(&s.job_waits[0]), "{:?}", s.job_waits);
        // Each evicted pod had run about 1 h 10 min, lost.
        let lost = s.pod_seconds_lost / 2.0;
        assert!((HOUR as f64..HOUR as f64 + 900.0).contains(&lost), "{lost}");
    }

    #[test]
    fn with_requeue_after_kubernetes_gets_its_share_back_from_long_jobs_and_the_runs_are_lost() {
        // Slurm's share is two of four nodes. Four ten-hour jobs come first and borrow all
        // four; an hour in, two pods come. The two borrowed nodes are drained at once; by
        // default the pods wait for the jobs' nine hours left, with `requeueAfterSeconds`
        // 600 their jobs are requeued ten minutes after the drains, their hour and ten
        // minutes of run lost, and the pods start then.
        let jobs: Arc<[TraceJob]> = (0..4)
            .map(|i| job(&format!("long-{i}"), 0, 10 * HOUR as u64, 1))
            .collect::<Vec<_>>()
            .into();
        let pods: Arc<[PodRequest]> = (0..2)
            .map(|i| pod(&format!("web-{i}"), HOUR, HOUR as u64))
            .collect::<Vec<_>>()
            .into();
        let mut opts = SharedOptions::new(shape(), 4, 2);
        let default = run_sharing(Sharing::Builtin, jobs.clone(), pods.clone(), &opts)
            .unwrap()
            .stats;
        assert_eq!(default.jobs_requeued, 0, "off by default");
        assert!(
            default.pod_waits.iter().all(|&w| w >= 8 * HOUR),
            "{:?}",
            default.pod_waits
        );
        let shares = opts.autoscaler.colocation.as_mut().unwrap();
        shares.shares.as_mut().unwrap().requeue_after_seconds = Some(600);
        let s = run_sharing(Sharing::Builtin, jobs, pods, &opts)
            .unwrap()
            .stats;
        assert_eq!(
            (s.jobs_requeued, s.jobs_killed, s.starved_jobs),
            (2, 0, 0),
            "{s:?}"
        );
        assert!(
            s.pod_waits.iter().all(|&w| (600..=900).contains(&w)),
            "{:?}",
            s.pod_waits
        );
        let lost = s.job_node_seconds_lost / 2.0;
        let ran = (HOUR + 600) as f64;
        assert!((ran..ran + 300.0).contains(&lost), "{lost}");
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
