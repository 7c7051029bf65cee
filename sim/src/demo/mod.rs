//! The demo's simulated cluster: three partitions on the simulated slurmctld that
//! `slurmscale simulate` replays traces on ([`Cluster`]: EASY backfill, calibrated against
//! the real one) — a NodeSet for the `burst` partition, four fixed GPU nodes, and the `cpu`
//! partition on a pool shared with Kubernetes ([`pool`]) — fed by the demo's job generator
//! ([`workload`](crate::workload)). It stands where slurmrestd and the kube-apiserver stand
//! in production: it hands out the same [`ClusterSnapshot`] a poller publishes (nodes and
//! jobs as the replays' [`view`] shows them, jobs folded by the exporter's own builder, with
//! Slurm's planned starts) and the same [`KubeSnapshot`] the watchers keep, and takes what
//! the autoscaler writes — replicas, drains, resumes, pods marked to go — as Slurm and
//! Kubernetes would ([`AtPoll`], the world the driver runs the controller in).
//!
//! One simulated second per step, on an even unix second at step 0, so the autoscaler's
//! 2 s polls fall where `simulate`'s do and both give the burst jobs the same waits.

mod pool;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::cluster::{Cluster, Mode, SchedConfig, Slot};
use crate::driver::World;
use crate::pods::PodRequest;
use crate::shared::SharedOptions;
use crate::trace::{NodeShape, TraceJob};
use crate::view::{self, Listed, Listing, SlurmView};
use slurmscale_autoscaler::crd::NodeSetAutoscalerSpec;
use slurmscale_autoscaler::fakes::{Fake, Recorded};
use slurmscale_exporter::k8s::nodeset::{NodeSetStatus, NodeSetView, ScalingMode};
use slurmscale_exporter::k8s::watch::{KubeSnapshot, WatchHealth};
use slurmscale_exporter::model::{Diag, Ping, Slurmctld};
use slurmscale_exporter::slurm::ApiVersion;
use slurmscale_exporter::snapshot::ClusterSnapshot;

use crate::workload::{DemoJob, Part, Phase, Workload};

pub const CLUSTER: &str = "demo";
pub const NAMESPACE: &str = "slurm";
/// The autoscaled partition and its NodeSet.
pub const BURST: &str = "burst";
pub const BURST_MAX: usize = 16;
pub use pool::{POOL_NODES, Pool, web_pods};

/// The colocated partition and its NodeSet.
pub const POOL: &str = "cpu";
/// Seconds from a NodeSet pod's creation to its slurmd taking jobs.
pub const BOOT_SECONDS: i64 = 8;
/// Finished jobs stay visible this long, as with Slurm's MinJobAge.
const MIN_JOB_AGE: u64 = 300;
const MIB: u64 = 1 << 20;
/// Node shapes of the three partitions (memory in MiB).
const CPU_NODE: NodeShape = NodeShape {
    cpus: 32,
    memory_mib: 128 * 1024,
    gpus: 0,
};
const GPU_NODE: NodeShape = NodeShape {
    cpus: 32,
    memory_mib: 256 * 1024,
    gpus: 4,
};
pub const BURST_NODE: NodeShape = NodeShape {
    cpus: 16,
    memory_mib: 64 * 1024,
    gpus: 0,
};

impl Part {
    fn name(self) -> &'static str {
        match self {
            Part::Cpu => POOL,
            Part::Gpu => "gpu",
            Part::Burst => BURST,
        }
    }

    fn shape(self) -> NodeShape {
        match self {
            Part::Cpu => CPU_NODE,
            Part::Gpu => GPU_NODE,
            Part::Burst => BURST_NODE,
        }
    }

    fn nodes(self) -> u32 {
        match self {
            Part::Cpu => POOL_NODES as u32,
            Part::Gpu => 4,
            Part::Burst => BURST_MAX as u32,
        }
    }

    fn mode(self) -> Mode {
        match self {
            Part::Cpu => Mode::Pool,
            Part::Gpu => Mode::Static,
            Part::Burst => Mode::Elastic,
        }
    }
}

/// The jobs of `part` as its slurmctld gets them: in the order they become eligible, fitted
/// to its nodes as `simulate` fits a trace's.
pub fn trace_jobs(workload: &Workload, part: Part, base: i64) -> (Vec<DemoJob>, Vec<TraceJob>) {
    let mut jobs: Vec<DemoJob> = workload
        .jobs
        .iter()
        .filter(|j| j.partition == part)
        .cloned()
        .collect();
    jobs.sort_by_key(|j| (j.eligible(), j.id));
    let traced = jobs
        .iter()
        .map(|j| {
            j.request(base)
                .fit(&part.shape(), part.nodes())
                .expect("the demo's jobs fit their partition")
        })
        .collect();
    (jobs, traced)
}

/// The demo's colocated pool as `simulate --pods` replays it: the cpu partition's jobs of
/// `seed` over `ticks` seconds from `base`, the web pods, and the pool — eight cpu nodes, all
/// Slurm's at the start, booting as the demo's do — under the colocated `autoscaler`.
pub fn pool_replay(
    seed: u64,
    ticks: u64,
    base: i64,
    autoscaler: NodeSetAutoscalerSpec,
) -> (Vec<TraceJob>, Vec<PodRequest>, SharedOptions) {
    let workload = Workload::generate(seed, ticks);
    let (_, jobs) = trace_jobs(&workload, Part::Cpu, base);
    let nodes = POOL_NODES as u32;
    let opts = SharedOptions {
        sched: SchedConfig {
            boot: BOOT_SECONDS,
            ..SchedConfig::default()
        },
        autoscaler,
        ..SharedOptions::new(CPU_NODE, nodes, nodes)
    };
    (jobs, web_pods(seed, ticks, base), opts)
}

/// One partition: its slurmctld, what slurmrestd shows of it, and its jobs as submitted
/// (in the cluster's order).
struct Partition {
    cluster: Cluster,
    view: SlurmView,
    jobs: Vec<DemoJob>,
    /// Jobs before this one ended more than [`MIN_JOB_AGE`] ago and are no longer listed.
    listed_from: usize,
}

impl Partition {
    fn new(part: Part, workload: &Workload, base: i64) -> Self {
        let (jobs, traced) = trace_jobs(workload, part, base);
        let sched = SchedConfig {
            boot: BOOT_SECONDS,
            ..SchedConfig::default()
        };
        let cluster = Cluster::new(
            part.shape(),
            part.nodes(),
            part.mode(),
            sched,
            traced.into(),
            base,
        );
        let view = SlurmView::named(&cluster, part.name());
        Self {
            cluster,
            view,
            jobs,
            listed_from: 0,
        }
    }

    /// Job `j`'s start and end, once slurmctld started it (by `now`).
    fn ran(&self, j: usize, now: i64) -> Option<(i64, i64)> {
        let start = self.cluster.started(j).filter(|&s| s <= now)?;
        Some((start, start + self.jobs[j].seconds as i64))
    }

    /// Nodes up (registered) and busy.
    fn up_and_busy(&self) -> (u64, u64) {
        let up = (0..self.cluster.max_nodes())
            .filter(|&i| matches!(self.cluster.slot(i), Slot::Idle | Slot::Busy))
            .count() as u64;
        (up, self.cluster.counts.busy.into())
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
    /// Unix seconds of step 0.
    pub base: i64,
    /// The second the last step simulated.
    pub tick: u64,
    stepped: bool,
    workload: Workload,
    /// Cpu, gpu, burst, as [`Part::ALL`].
    parts: [Partition; 3],
    /// The Kubernetes side of the cpu partition's pool.
    pub pool: Pool,
    seconds: Totals,
}

impl Simulation {
    /// `ticks` seconds of the workload of `seed`, from `start` (moved back to an even unix
    /// second, where the autoscaler's polls fall).
    pub fn new(seed: u64, start: SystemTime, ticks: u64) -> Self {
        let unix = start
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let base = unix - unix.rem_euclid(2);
        let workload = Workload::generate(seed, ticks);
        let mut parts = Part::ALL.map(|p| Partition::new(p, &workload, base));
        let pods = pool::web_pods(seed, ticks, base);
        let pool = Pool::new(&mut parts[0].cluster, pods, base);
        Self {
            base,
            tick: 0,
            stepped: false,
            workload,
            parts,
            pool,
            seconds: Totals::default(),
        }
    }

    pub fn now(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs((self.base + self.tick as i64) as u64)
    }

    fn unix(&self) -> i64 {
        self.base + self.tick as i64
    }

    pub fn phase(&self) -> Phase {
        self.workload.phase(self.tick)
    }

    fn burst(&self) -> &Partition {
        &self.parts[2]
    }

    /// One simulated second with no autoscaler: [`Self::advance`], then [`Self::settle`].
    pub fn step(&mut self) {
        self.advance();
        self.settle();
    }

    /// The next simulated second: everything slurmctld has due (submits, ends, nodes coming
    /// up, scheduling), and Kubernetes' pods in the pool. The autoscaler looks after this.
    pub fn advance(&mut self) {
        if self.stepped {
            self.tick += 1;
        }
        self.stepped = true;
        let now = self.unix();
        for p in &mut self.parts {
            p.cluster.advance(now);
        }
        self.pool.advance(now);
    }

    /// The rest of the second, after the autoscaler's writes: slurm-operator and the
    /// Kubernetes scheduler act in the pool (as the shared-pool replay orders them).
    pub fn settle(&mut self) {
        let now = self.unix();
        self.pool.settle(&mut self.parts[0].cluster, now);
        let s = &mut self.seconds;
        let burst = self.parts[2].cluster.counts;
        s.burst_seconds += u64::from(burst.provisioned);
        s.burst_busy_seconds += u64::from(burst.busy);
        s.pool_seconds += self.pool.held();
        s.pool_busy_seconds += u64::from(self.parts[0].cluster.counts.busy);
    }

    /// The autoscaler's write: the burst NodeSet's `spec.replicas`.
    pub fn scale(&mut self, replicas: u64) {
        let now = self.unix();
        let r = replicas.min(BURST_MAX as u64) as u32;
        self.parts[2].cluster.scale(r, now);
    }

    /// The autoscaler's write to the cpu NodeSet or its nodes (replicas, a drain or resume,
    /// pods marked to go), as slurm-operator and slurmctld carry it out.
    pub fn apply_to_pool(&mut self, write: &Recorded) {
        let now = self.unix();
        self.pool.apply(&mut self.parts[0].cluster, write, now);
    }

    /// The burst NodeSet as its status tells it: `[replicas, pods, ready, busy]`.
    pub fn burst_nodeset(&self) -> [u64; 4] {
        let b = self.burst();
        let (ready, busy) = b.up_and_busy();
        let pods = u64::from(b.cluster.counts.provisioned);
        [b.cluster.replicas().into(), pods, ready, busy]
    }

    /// Jobs submitted, started and finished so far, from the clusters' own counters (held
    /// jobs reach their cluster when released): what every tick's snapshot and line need,
    /// without walking the jobs.
    fn counts(&self) -> [u64; 3] {
        let submitted = self
            .workload
            .jobs
            .partition_point(|j| j.submit <= self.tick) as u64;
        let (mut started, mut finished) = (0, 0);
        for p in &self.parts {
            let c = &p.cluster;
            started += (c.submitted() - c.counts.pending as usize) as u64;
            finished += c.finished() as u64;
        }
        [submitted, started, finished]
    }

    pub fn pending(&self) -> u64 {
        let [submitted, started, _] = self.counts();
        submitted - started
    }

    /// The jobs so far: submitted, started, finished, and the waits of those started.
    pub fn totals(&self) -> Totals {
        let now = self.unix();
        let mut t = self.seconds.clone();
        t.submitted = self
            .workload
            .jobs
            .partition_point(|j| j.submit <= self.tick) as u64;
        for p in &self.parts {
            for (j, job) in p.jobs.iter().enumerate() {
                if let Some((start, end)) = p.ran(j, now) {
                    t.started += 1;
                    t.completed += u64::from(end <= now);
                    t.waits.push((start - self.base) as u64 - job.submit);
                }
            }
        }
        t
    }

    /// The burst jobs started so far, by id, and when (unix seconds): what a replay of the
    /// same workload is held to.
    pub fn burst_starts(&self) -> Vec<(String, i64)> {
        let b = self.burst();
        let now = self.unix();
        (0..b.jobs.len())
            .filter_map(|j| Some((b.jobs[j].id.to_string(), b.ran(j, now)?.0)))
            .collect()
    }

    /// When each job of the pool's cpu partition started (unix seconds), in the order
    /// [`pool_replay`] gives them.
    pub fn pool_job_starts(&self) -> Vec<Option<i64>> {
        let c = &self.parts[0].cluster;
        (0..self.parts[0].jobs.len())
            .map(|j| c.started(j))
            .collect()
    }

    /// Jobs listed by /jobs now: drops those that ended more than MinJobAge ago.
    fn list(&mut self) {
        let now = self.unix();
        for p in &mut self.parts {
            while p.listed_from < p.jobs.len()
                && p.ran(p.listed_from, now)
                    .is_some_and(|(_, end)| end + (MIN_JOB_AGE as i64) < now)
            {
                p.listed_from += 1;
            }
        }
    }

    /// What a poller would have published after polling slurmrestd now.
    pub fn snapshot(&mut self) -> ClusterSnapshot {
        self.list();
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
        for p in &mut self.parts {
            p.view.sync(&p.cluster);
        }
        let nodes = self.parts.iter().flat_map(|p| p.view.nodes()).cloned();
        snap.nodes.succeed(now, took, Some(nodes.collect()));
        let partitions = self.parts.iter().map(|p| p.view.partition().clone());
        snap.partitions
            .succeed(now, took, Some(partitions.collect()));
        snap.jobs.succeed(now, took, Some(self.jobs_model()));
        let [submitted, started, completed] = self.counts();
        let pending = submitted - started;
        snap.diag.succeed(
            now,
            took,
            Some(Diag {
                server_threads: Some(3),
                agent_queue_size: Some(0),
                jobs_submitted: Some(submitted),
                jobs_started: Some(started),
                jobs_completed: Some(completed),
                jobs_canceled: Some(0),
                jobs_failed: Some(0),
                schedule_cycles: Some(self.tick),
                schedule_cycle_last_seconds: Some(0.0002 + pending as f64 * 0.00003),
                schedule_cycle_max_seconds: Some(0.004),
                schedule_cycle_mean_seconds: Some(0.0008),
                schedule_queue_length: Some(pending),
                bf_cycles: Some(self.tick / 30),
                bf_backfilled_jobs: Some(started / 4),
                bf_active: Some(false),
                ..Default::default()
            }),
        );
        snap.cycles = self.tick;
        snap.collected_at = Some(now);
        snap.collection_duration = Some(took * 5);
        snap
    }

    /// /jobs: every job submitted and not yet aged out, as the replays' view lists them
    /// (with Slurm's planned start and the work on each node).
    fn jobs_model(&self) -> slurmscale_exporter::model::Jobs {
        let parts = self.parts.iter().map(|p| Listing {
            view: &p.view,
            cluster: &p.cluster,
            jobs: p
                .jobs
                .iter()
                .enumerate()
                .skip(p.listed_from)
                .filter(|(_, job)| job.submit <= self.tick)
                .map(|(j, job)| {
                    let at = |s: u64| self.base + s as i64;
                    let listed = Listed {
                        id: job.id,
                        user: job.user,
                        account: job.account,
                        submit: at(job.submit),
                        released: at(job.eligible()),
                    };
                    (j, listed)
                })
                .collect(),
        });
        view::listing(parts, self.unix())
    }

    /// What the Kubernetes watchers would hold: the two NodeSets, and the GenericNode ledger
    /// of the pool, which Slurm's cpu partition shares with Kubernetes pods.
    pub fn kube_snapshot(&self) -> KubeSnapshot {
        let cpu = &self.parts[0];
        let (up, busy) = cpu.up_and_busy();
        let pool = [self.pool.replicas(), self.pool.held(), up, busy];
        let (ledger, capacity) = self.pool.ledger(&cpu.cluster);
        let mut k = KubeSnapshot {
            nodesets: vec![
                nodeset(BURST, self.burst_nodeset(), BURST_MAX as u64),
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

/// The simulation at one poll of the demo's controller: what slurmrestd and the watchers
/// showed this second (the page shows the same), and where the writes land.
pub struct AtPoll<'a> {
    pub sim: &'a mut Simulation,
    pub snapshot: Arc<ClusterSnapshot>,
    pub kube: &'a KubeSnapshot,
}

impl World for AtPoll<'_> {
    /// The targets' replicas, the pool's NodeSet pods, the pods Kubernetes cannot place and
    /// the ledger.
    fn show(&mut self, fake: &Fake, _: SystemTime) -> Arc<ClusterSnapshot> {
        let burst = self.sim.burst_nodeset()[0];
        let pool = &mut self.sim.pool;
        fake.with(|w| {
            if let Some(t) = w.targets.get_mut(BURST) {
                t.replicas = burst;
            }
            let selector = selector(POOL);
            let ledger = self.kube.clone();
            pool.world
                .show(w, (POOL, &selector), ledger, &mut pool.shown_pending);
        });
        self.snapshot.clone()
    }

    /// As slurm-operator, slurmctld and the API server would (the demo's autoscalers keep
    /// no node records and follow no power requests).
    fn apply(&mut self, write: &Recorded, _: i64) {
        match write {
            Recorded::Scale { target, replicas } if target == BURST => self.sim.scale(*replicas),
            w @ (Recorded::Scale { .. }
            | Recorded::Drain { .. }
            | Recorded::Resume { .. }
            | Recorded::Down { .. }
            | Recorded::MarkPodsOn { .. }
            | Recorded::UnmarkPodsOn { .. }
            | Recorded::Reserve { .. }
            | Recorded::EvictPodsOn { .. }) => self.sim.apply_to_pool(w),
            Recorded::Create { .. }
            | Recorded::Reconfigure
            | Recorded::PowerUp { .. }
            | Recorded::MarkPods { .. }
            | Recorded::UnmarkPods { .. }
            | Recorded::Event { .. } => {}
        }
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
        named_partition: None,
        slurm_name: name.into(),
        cluster: Some(CLUSTER.into()),
        controller: None,
        max_nodes: Some(max),
        shape: Default::default(),
        template_shape: Default::default(),
        features: Vec::new(),
        weight: 1,
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
    use slurmscale_exporter::model::PendingClass;

    fn run(seed: u64, ticks: u64) -> Simulation {
        let mut s = Simulation::new(seed, SystemTime::UNIX_EPOCH, ticks);
        s.scale(4);
        for _ in 0..ticks {
            s.step();
            // Never more allocated than there is.
            for n in s.snapshot().nodes.data.iter().flat_map(|n| n.iter()) {
                assert!(n.alloc_cpus <= n.cpus, "{n:?}");
            }
            // The counters every tick reads agree with the jobs themselves.
            let t = s.totals();
            assert_eq!(s.counts(), [t.submitted, t.started, t.completed]);
        }
        s
    }

    #[test]
    fn a_seed_replays_the_same_day() {
        let a = run(7, 400);
        let b = run(7, 400);
        let c = run(8, 400);
        let counts = |s: &Simulation| {
            let t = s.totals();
            (t.submitted, t.started, t.completed)
        };
        assert_eq!(counts(&a), counts(&b));
        assert_eq!(a.totals().waits, b.totals().waits);
        let t = a.totals();
        assert_eq!(
            a.counts(),
            [t.submitted, t.started, t.completed],
            "counters = the walk"
        );
        assert_ne!(counts(&a), counts(&c));
        assert!(a.totals().completed > 20, "{:?}", counts(&a));
    }

    /// A held job is listed as held (not demand) until its user releases it, then waits
    /// for room like any other.
    #[test]
    fn held_jobs_are_listed_held_until_released() {
        let mut s = Simulation::new(3, SystemTime::UNIX_EPOCH, 1200);
        let held_job = s
            .workload
            .jobs
            .iter()
            .find(|j| j.held)
            .cloned()
            .expect("a held job in 1200 s");
        while s.tick < held_job.submit + 1 {
            s.step();
        }
        let class = |s: &mut Simulation| {
            let snap = s.snapshot();
            let jobs = snap.jobs.data.clone().expect("jobs");
            let held = jobs.cluster.held;
            let class = jobs
                .pending
                .iter()
                .find(|p| p.id == held_job.id)
                .map(|p| p.class);
            (class, held)
        };
        let (c, held) = class(&mut s);
        assert_eq!(
            c,
            Some(PendingClass::Held),
            "a held job is listed, and is no demand"
        );
        assert!(held >= 1);
        while s.tick < held_job.eligible() + 1 {
            s.step();
        }
        let p = &s.parts[held_job.partition as usize];
        let j = p
            .jobs
            .iter()
            .position(|j| j.id == held_job.id)
            .expect("its partition's");
        let started = p.cluster.started(j).is_some();
        let (c, _) = class(&mut s);
        assert!(
            started || c == Some(PendingClass::Schedulable),
            "released: waiting for room or running ({c:?})"
        );
    }

    /// /jobs carries the backfill scheduler's plan, as the replays' view does: the page's
    /// `slurm_partition_planned_*` read it.
    #[test]
    fn jobs_carry_slurm_s_planned_start() {
        let mut s = Simulation::new(2, SystemTime::UNIX_EPOCH, 900);
        for _ in 0..900 {
            s.step();
            let snap = s.snapshot();
            let jobs = snap.jobs.data.clone().expect("jobs");
            let Some((job, plan)) = jobs
                .pending
                .iter()
                .find_map(|j| Some((j, j.planned_start.clone()?)))
            else {
                continue;
            };
            let part = &job.partitions[0];
            assert_eq!(job.class, PendingClass::Schedulable);
            assert!(plan.start >= s.unix(), "{plan:?} at {}", s.unix());
            assert!(!plan.nodes.is_empty());
            assert!(
                plan.nodes
                    .iter()
                    .all(|n| n.starts_with(&format!("{part}-")))
            );
            return;
        }
        panic!("no job had a planned start in 900 s");
    }

    #[test]
    fn scale_in_never_removes_a_busy_node_and_new_nodes_boot_first() {
        let mut s = run(11, 120);
        let busy = s.burst_nodeset()[3];
        s.scale(0);
        s.step();
        assert!(s.burst_nodeset()[1] >= busy, "a busy node went");
        let before = s.burst_nodeset()[1];
        s.scale(before + 2);
        s.step();
        let [_, pods, ready, _] = s.burst_nodeset();
        assert_eq!(pods, before + 2);
        assert!(ready <= before, "new pods need time to boot");
    }

    /// Kubernetes pods wait for room from the first second; a drained node whose pod is
    /// marked goes to one of them when replicas drop, and a new NodeSet pod lands only on a
    /// node Kubernetes runs nothing on.
    #[test]
    fn the_pool_hands_a_drained_node_to_a_waiting_pod_and_takes_one_back() {
        let mut s = Simulation::new(5, SystemTime::UNIX_EPOCH, 600);
        s.step();
        assert_eq!((s.pool.held(), s.pool.waiting()), (8, 2));
        assert_eq!(s.pool.world.unschedulable().len(), 2);
        let snap = s.snapshot();
        let idle = snap
            .nodes
            .data
            .iter()
            .flat_map(|n| n.iter())
            .find(|n| n.name.starts_with("cpu-") && n.alloc_cpus == 0)
            .map(|n| n.name.clone())
            .expect("an idle pool node");
        let k8s_node = idle.replace("cpu-", "pool-");
        s.apply_to_pool(&Recorded::Drain {
            node: idle.clone(),
            reason: "slurmscale: to Kubernetes".into(),
        });
        s.step();
        let drained = s.snapshot().nodes.data.clone().unwrap_or_default();
        let n = drained
            .iter()
            .find(|n| n.name == idle)
            .expect("still in Slurm");
        assert!(
            n.state.drain() && n.reason.starts_with("slurmscale:"),
            "{n:?}"
        );
        assert_eq!(n.alloc_cpus, 0, "no job starts on a drained node");
        s.apply_to_pool(&Recorded::MarkPodsOn {
            nodes: vec![k8s_node.clone()],
        });
        assert_eq!(s.pool.world.pods_by_node()[&k8s_node], NodeSetPod::Marked);
        let scale = |replicas| Recorded::Scale {
            target: POOL.into(),
            replicas,
        };
        s.apply_to_pool(&scale(7));
        s.step();
        assert_eq!((s.pool.held(), s.pool.waiting()), (7, 1));
        assert!(!s.pool.world.pods_by_node().contains_key(&k8s_node));
        // Back to 8: no node is empty but the web pod's, so the NodeSet's pod waits.
        s.apply_to_pool(&scale(8));
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
