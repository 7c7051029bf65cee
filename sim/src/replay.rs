//! The single-partition replay: one [`Cluster`] per policy schedules the trace's jobs while
//! the policy's [`Scaler`] sets its size, both stepped from event to event (a submit, a job
//! end, a node coming up, a backfill pass, a wake of the scaler); the node-seconds between
//! events become the run's [`Stats`] and timeline. Policies run on separate threads: they
//! share only the (read-only) jobs.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use slurmscale_autoscaler::crd::PlannedBoot;

use super::cluster::{Cluster, Mode, Requests};
use super::trace::{NodeShape, TraceJob};
use super::{
    Options, Point, Policy, Run, Scaler, SetStats, Stats, builtin, nodesets, rivals, view,
};
use crate::error::{Error, Result};

/// slurmctld's `power_save_interval` (its default): how often it sends power requests.
const POWER_SAVE_INTERVAL: i64 = 10;
/// slurmctld's `PERIODIC_TIMEOUT`: a job whose nodes were powered up leaves CONFIGURING at
/// this check (measured 6-23 s after the last node registered).
const PERIODIC_CHECK: i64 = 30;

/// After the last job, each policy runs this long so it can scale down.
pub(crate) const TAIL: i64 = 3600;
/// Once every job is in, a policy that starts and ends nothing for this long never will.
const STALL: i64 = 7 * 86400;

/// Timeline accounting: node-seconds per bucket, samples at bucket starts.
struct Timeline {
    origin: i64,
    width: i64,
    points: Vec<Point>,
    /// Where the demand it samples comes from: what the exporter would publish.
    view: view::SlurmView,
}

impl Timeline {
    fn account(&mut self, from: i64, to: i64, c: &Cluster, desired: u32) {
        let mut t = from;
        while t < to {
            let b = ((t - self.origin) / self.width) as usize;
            while self.points.len() <= b {
                let time = self.origin + self.points.len() as i64 * self.width;
                self.view.sync(c);
                self.points.push(Point {
                    time,
                    pending_jobs: c.counts.pending,
                    demand_nodes: self.view.signals().demand.nodes,
                    desired,
                    ..Point::default()
                });
            }
            let end = (self.origin + (b as i64 + 1) * self.width).min(to);
            let dt = (end - t) as f64;
            let p = &mut self.points[b];
            p.provisioned += f64::from(c.counts.provisioned) * dt;
            p.busy += f64::from(c.counts.busy) * dt;
            t = end;
        }
    }
}

/// The timeline bucket for a replay of `jobs`: about 1,500 points, whole minutes.
pub fn bucket_for(jobs: &[TraceJob]) -> i64 {
    let first = jobs.first().map_or(0, |j| j.submit);
    let last = jobs
        .iter()
        .map(|j| j.submit + j.run as i64)
        .max()
        .unwrap_or(first);
    ((last - first + TAIL) / 1500 / 60 + 1) * 60
}

impl Policy {
    /// How the simulated slurmctld treats nodes under this policy.
    fn mode(self, opts: &Options) -> Mode {
        match self {
            Policy::PowerSave => Mode::PowerSave {
                suspend_after: opts.suspend_time,
            },
            // slurmctld plans on the NodeSet's absent nodes (CLOUD records) and the
            // autoscaler carries out its power-ups and power-downs.
            Policy::SlurmPlanned | Policy::SlurmPlannedJustInTime => Mode::Planned(Requests {
                suspend_after: opts.suspend_time,
                interval: POWER_SAVE_INTERVAL,
                check_every: PERIODIC_CHECK,
            }),
            Policy::Static => Mode::Static,
            _ => Mode::Elastic,
        }
    }

    /// What decides the replicas under this policy.
    fn scaler(self, opts: &Options, cluster: &Cluster, start: i64) -> Box<dyn Scaler> {
        let keda = |trigger| {
            let up = opts.keda_up_tolerance;
            Box::new(rivals::Keda::new(trigger, opts.max_nodes, up, start))
        };
        match self {
            Policy::Builtin if opts.nodesets.is_some() => {
                Box::new(nodesets::Several::new(opts, cluster))
            }
            Policy::Builtin | Policy::SlurmPlanned => Box::new(builtin::Builtin::new(
                &opts.autoscaler,
                cluster,
                opts.every_poll,
            )),
            Policy::BuiltinJustInTime | Policy::SlurmPlannedJustInTime => {
                let mut spec = opts.autoscaler.clone();
                spec.planned_jobs.boot = PlannedBoot::JustInTime;
                Box::new(builtin::Builtin::new(&spec, cluster, opts.every_poll))
            }
            Policy::Keda => keda(rivals::Trigger::PendingJobs {
                threshold: opts.keda_threshold,
            }),
            Policy::KedaDesired => keda(rivals::Trigger::DesiredNodes),
            Policy::PowerSave | Policy::Static => Box::new(rivals::Fixed),
        }
    }
}

/// Each job's wait (a job never started waits until `stopped`), the waits sorted, the mean
/// bounded slowdown and the CPU-seconds of the work.
fn job_stats(
    stats: &mut Stats,
    jobs: &[TraceJob],
    cluster: &Cluster,
    stopped: i64,
    shape: NodeShape,
) {
    let mut slowdown = 0.0;
    for (j, job) in jobs.iter().enumerate() {
        let start = cluster.started(j);
        let wait = start.unwrap_or(stopped) - job.submit;
        stats.starved += usize::from(start.is_none());
        stats.waits.push(wait);
        if let Some(set) = start.and_then(|_| {
            let g = cluster.group_of(cluster.outcomes[j].node);
            stats.nodesets.get_mut(g)
        }) {
            set.waits.push(wait);
        }
        stats.starts.push(start);
        let run = job.run as f64;
        slowdown += ((wait as f64 + run) / run.max(10.0)).max(1.0);
        stats.cpu_seconds +=
            run * f64::from(job.cpus_per_node.min(shape.cpus)) * f64::from(job.nodes);
    }
    stats.jobs = jobs.len();
    stats.bounded_slowdown_mean = slowdown / jobs.len() as f64;
    stats.waits.sort_unstable();
    for set in &mut stats.nodesets {
        set.waits.sort_unstable();
    }
}

/// Replays `jobs` under one policy. `progress` counts submitted jobs as they go.
pub fn run_policy(
    policy: Policy,
    jobs: Arc<[TraceJob]>,
    opts: &Options,
    progress: Option<&AtomicU64>,
) -> Result<Run> {
    let mut r = Replay::new(policy, jobs, opts)?;
    loop {
        let t = r.next_time()?;
        r.account(t);
        r.now = t;
        if r.now >= r.stop() {
            break;
        }
        r.cluster.advance(r.now);
        if r.done_at.is_none() && r.cluster.done() {
            r.done_at = Some(r.now);
        }
        if r.starved() {
            break;
        }
        if let Some(n) = r.scaler.look(r.now, &mut r.cluster) {
            r.cluster.scale(n, r.now);
        }
        if let Some(p) = progress {
            let s = r.cluster.submitted();
            p.fetch_add((s - r.reported) as u64, Ordering::Relaxed);
            r.reported = s;
        }
    }
    Ok(r.finish())
}

/// One policy's replay in progress: the cluster, the scaler setting its size, and what has
/// been counted so far.
struct Replay {
    policy: Policy,
    jobs: Arc<[TraceJob]>,
    shape: NodeShape,
    cluster: Cluster,
    scaler: Box<dyn Scaler>,
    timeline: Timeline,
    stats: Stats,
    start: i64,
    /// Every step moves time forward: what is due at `now` was done in the last step.
    now: i64,
    /// Jobs submitted so far, as last reported to the progress counter.
    reported: usize,
    /// When the last job ended (or the replay was found starved).
    done_at: Option<i64>,
    /// The last time a job was submitted, started or ended (time, submitted, finished), and
    /// the node-seconds (provisioned, busy, idle while waiting) then.
    progress_at: (i64, usize, usize),
    seconds_at_progress: (f64, f64, f64),
    /// Over several NodeSets, each one's node-seconds (provisioned, busy) then.
    sets_at_progress: Vec<(f64, f64)>,
}

impl Replay {
    fn new(policy: Policy, jobs: Arc<[TraceJob]>, opts: &Options) -> Result<Self> {
        let Some(first) = jobs.first() else {
            return Err(Error::Simulate("no jobs to replay".into()));
        };
        let start = first.submit;
        let cluster = match &opts.nodesets {
            None => Cluster::new(
                opts.shape,
                opts.max_nodes,
                policy.mode(opts),
                opts.sched,
                jobs.clone(),
                start,
            ),
            Some(layout) => {
                if policy != Policy::Builtin {
                    return Err(Error::Simulate(format!(
                        "{} does not replay a partition over several NodeSets: builtin does",
                        policy.as_str()
                    )));
                }
                layout.cluster(opts.sched, jobs.clone(), start)
            }
        };
        let scaler = policy.scaler(opts, &cluster, start);
        let width = if opts.bucket > 0 {
            opts.bucket
        } else {
            bucket_for(&jobs)
        };
        let view = match &opts.nodesets {
            None => view::SlurmView::new(&cluster),
            Some(layout) => layout.view(&cluster),
        };
        let timeline = Timeline {
            origin: start,
            width,
            points: Vec::new(),
            view,
        };
        let stats = Stats {
            nodesets: vec![SetStats::default(); opts.nodesets.as_ref().map_or(0, |l| l.sets.len())],
            ..Stats::default()
        };
        Ok(Self {
            policy,
            jobs,
            shape: opts.shape,
            cluster,
            scaler,
            timeline,
            stats,
            start,
            now: start - 1,
            reported: 0,
            done_at: None,
            progress_at: (start - 1, 0, 0),
            seconds_at_progress: (0.0, 0.0, 0.0),
            sets_at_progress: Vec::new(),
        })
    }

    /// The replay ends a tail after the last job's end.
    fn stop(&self) -> i64 {
        self.done_at.map_or(i64::MAX, |d| d + TAIL)
    }

    /// The next time anything happens: an event of the cluster, a wake of the scaler, or the
    /// end; an error when nothing will ever happen again with jobs still waiting.
    fn next_time(&self) -> Result<i64> {
        let next = [self.cluster.next_event(), self.scaler.wake()]
            .into_iter()
            .flatten()
            .filter(|&t| t > self.now)
            .min();
        let stop = self.stop();
        match next {
            Some(t) if t <= stop => Ok(t),
            _ if self.done_at.is_some() => Ok(stop),
            _ => Err(Error::Simulate(format!(
                "{} stalled with {} jobs waiting (a job no node can ever hold?)",
                self.policy.as_str(),
                self.cluster.counts.pending
            ))),
        }
    }

    /// Node-seconds from `now` to `t`, as the cluster stood.
    fn account(&mut self, t: i64) {
        if self.now < self.start {
            return;
        }
        let (c, dt) = (&self.cluster.counts, (t - self.now) as f64);
        self.stats.node_seconds += f64::from(c.provisioned) * dt;
        self.stats.busy_node_seconds += f64::from(c.busy) * dt;
        if c.pending > 0 {
            self.stats.idle_waiting_node_seconds += f64::from(c.idle()) * dt;
        }
        for (set, g) in self.stats.nodesets.iter_mut().zip(self.cluster.groups()) {
            set.node_seconds += f64::from(g.provisioned) * dt;
            set.busy_node_seconds += f64::from(g.busy) * dt;
        }
        self.timeline
            .account(self.now, t, &self.cluster, self.scaler.desired());
    }

    /// Notes progress; true when the replay is starved: every job is in and nothing was
    /// submitted, started or ended for [`STALL`]. What waits then would wait forever under
    /// this policy: its replay ends as if the last progress had been the last job's end
    /// (what it holds now, held for the tail), so a starved run does not stretch the
    /// others' horizon.
    fn starved(&mut self) -> bool {
        let moved = (self.cluster.submitted(), self.cluster.finished());
        if moved != (self.progress_at.1, self.progress_at.2) || self.cluster.counts.pending == 0 {
            self.progress_at = (self.now, moved.0, moved.1);
            self.seconds_at_progress = (
                self.stats.node_seconds,
                self.stats.busy_node_seconds,
                self.stats.idle_waiting_node_seconds,
            );
            let sets = self.stats.nodesets.iter();
            self.sets_at_progress = sets
                .map(|s| (s.node_seconds, s.busy_node_seconds))
                .collect();
            return false;
        }
        if self.done_at.is_some()
            || self.cluster.submitted() != self.jobs.len()
            || self.now - self.progress_at.0 <= STALL
        {
            return false;
        }
        let (c, tail) = (&self.cluster.counts, TAIL as f64);
        let last = self.progress_at.0;
        self.done_at = Some(last);
        self.now = last + TAIL;
        self.stats.node_seconds = self.seconds_at_progress.0 + f64::from(c.provisioned) * tail;
        self.stats.busy_node_seconds = self.seconds_at_progress.1 + f64::from(c.busy) * tail;
        self.stats.idle_waiting_node_seconds =
            self.seconds_at_progress.2 + f64::from(c.idle()) * tail;
        let sets = self.stats.nodesets.iter_mut().zip(self.cluster.groups());
        for ((set, g), at) in sets.zip(&self.sets_at_progress) {
            set.node_seconds = at.0 + f64::from(g.provisioned) * tail;
            set.busy_node_seconds = at.1 + f64::from(g.busy) * tail;
        }
        self.timeline.points.retain(|p| p.time < last + TAIL);
        true
    }

    fn finish(mut self) -> Run {
        job_stats(
            &mut self.stats,
            &self.jobs,
            &self.cluster,
            self.now,
            self.shape,
        );
        self.stats.scale_ups = self.cluster.scale_ups;
        self.stats.scale_downs = self.cluster.scale_downs;
        self.stats.early_power_ups = self.cluster.early_power_ups;
        self.stats.boot_waits = std::mem::take(&mut self.cluster.boot_waits);
        self.stats.boot_waits.sort_unstable();
        let width = self.timeline.width as f64;
        for p in &mut self.timeline.points {
            p.provisioned /= width;
            p.busy /= width;
        }
        let final_by_set = match self.stats.nodesets.len() {
            0 => Vec::new(),
            _ => self
                .cluster
                .groups()
                .iter()
                .map(|g| g.provisioned)
                .collect(),
        };
        Run {
            policy: self.policy,
            stats: self.stats,
            timeline: self.timeline.points,
            last_end: self.done_at.unwrap_or(self.now),
            final_provisioned: self.cluster.counts.provisioned,
            final_by_set,
        }
    }
}

/// Replays `jobs` under every policy in `policies` (in parallel), then puts them on one
/// horizon: a policy that stopped earlier keeps its final nodes until the last one stops.
pub fn run(
    policies: &[Policy],
    jobs: Vec<TraceJob>,
    opts: &Options,
    progress: Option<Arc<AtomicU64>>,
) -> Result<Vec<Run>> {
    side_by_side(policies, jobs, |&policy, jobs| {
        run_policy(policy, jobs, opts, progress.as_deref())
    })
}

/// Replays `jobs` once for each of `each` (`replay` makes its run), each on a thread of its
/// own, then puts the runs on one horizon.
pub(crate) fn side_by_side<T: Sync>(
    each: &[T],
    jobs: Vec<TraceJob>,
    replay: impl Fn(&T, Arc<[TraceJob]>) -> Result<Run> + Sync,
) -> Result<Vec<Run>> {
    if jobs.is_empty() {
        return Err(Error::Simulate("the trace has no jobs to replay".into()));
    }
    let jobs: Arc<[TraceJob]> = jobs.into();
    let replay = &replay;
    let mut runs = std::thread::scope(|s| {
        let handles: Vec<_> = each
            .iter()
            .map(|item| {
                let jobs = jobs.clone();
                s.spawn(move || replay(item, jobs))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect::<Result<Vec<_>>>()
    })?;
    one_horizon(&mut runs);
    Ok(runs)
}

/// Puts runs on one horizon: a run that stopped earlier keeps its final nodes until the last
/// one stops.
fn one_horizon(runs: &mut [Run]) {
    let horizon = runs.iter().map(|r| r.last_end + TAIL).max().unwrap_or(0);
    for r in runs {
        let after = (horizon - (r.last_end + TAIL)) as f64;
        let held = after * f64::from(r.final_provisioned);
        r.stats.node_seconds += held;
        for (set, &n) in r.stats.nodesets.iter_mut().zip(&r.final_by_set) {
            set.node_seconds += after * f64::from(n);
        }
        if r.stats.starved > 0 {
            // Its starved jobs are still waiting.
            r.stats.idle_waiting_node_seconds += held;
        }
    }
}
