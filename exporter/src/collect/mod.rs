//! One poller per Slurm cluster. It keeps a [`ClusterSnapshot`] current and publishes an
//! immutable copy after every answer; scrapes and the autoscaler only ever read published
//! snapshots, so slurmctld sees our requests and nothing else however many readers there are.
//!
//! Requests go in three lanes that never wait for each other: ping, partitions, and the
//! work lane — nodes, then `/diag` and what changed in the job list ([`jobs`]), in that
//! order, so that a job seen running on a node is never still pending in the same snapshot
//! (which would count it twice and scale up for it). A lane never has two requests out, and
//! each kind of request keeps to its [`pace`]: every `interval`, or less often when
//! slurmrestd took long to answer it last time, so that it spends at most `budget` of its
//! time on each. A standby (the autoscaler's replicas that do not lead) only pings, slowly;
//! when it starts leading, every lane goes at once. A wake-up (the autoscaler's `POST /wake`,
//! which slurmctld's ResumeProgram calls as it powers nodes up) brings the work lane forward:
//! the next read of nodes goes at once, or right after the one in flight, which may have
//! started before the news, and at most once a [`WAKE_GAP`], however often it is called.

pub mod jobs;
pub mod pace;
pub mod source;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use self::jobs::{JobTracker, Synced};
pub use self::pace::{Budget, Pace};
use crate::config::ClusterConfig;
use crate::error::{Error, Result};
use crate::model::{Diag, Node, Partition, Ping};
use crate::slurm::fetch::{self, Outcome};
use crate::slurm::{ApiVersion, Endpoint, SlurmClient};
use crate::snapshot::{ClusterSnapshot, EndpointState, JobsEffort};

/// A standby's health poll.
pub const STANDBY_PING: Duration = Duration::from_secs(30);
/// The shortest time between two wake-ups' reads: slurmctld's power-save pass runs at most
/// once a second, so a faster caller gains nothing and would only cost slurmrestd.
pub const WAKE_GAP: Duration = Duration::from_secs(1);
/// The most single-job reads one jobs step makes (the budget usually allows fewer).
pub const MAX_SINGLE_READS: u32 = 50;

#[derive(Clone, Debug)]
pub struct CollectorOptions {
    pub interval: Duration,
    /// Count jobs per user and account (a cardinality cost: off by default).
    pub per_owner: bool,
    /// The share of slurmrestd's time each kind of request may take.
    pub budget: Budget,
    /// Live jobs above which the job list is never asked for in one answer.
    pub request_max_jobs: u64,
    /// Poll while this says `true`; otherwise only ping, every [`STANDBY_PING`].
    /// `None`: always.
    pub active: Option<watch::Receiver<bool>>,
    /// Each value sent asks for nodes and jobs now (see the module's comment). `None`: the
    /// pace alone.
    pub wake: Option<watch::Receiver<()>>,
}

impl Default for CollectorOptions {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(30),
            per_owner: false,
            budget: Budget::DEFAULT,
            request_max_jobs: jobs::REQUEST_MAX_JOBS,
            active: None,
            wake: None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Lane {
    Ping,
    /// Nodes, then `/diag` and the job list.
    Jobs,
    Partitions,
}

impl Lane {
    const ALL: [Lane; 3] = [Self::Ping, Self::Jobs, Self::Partitions];
}

/// When a request started, what it took, and its answer.
type Timed<T> = (Instant, Duration, Result<Outcome<T>>);

/// A lane's request, answered.
enum Done {
    Ping(Instant, Duration, Result<Outcome<Ping>>),
    Jobs(Box<JobTracker>, Box<JobsDone>),
    Partitions(Instant, Duration, Result<Outcome<Vec<Partition>>>),
}

struct JobsDone {
    started: Instant,
    /// Nodes, when their pace allowed: read first.
    nodes: Option<Timed<Vec<Node>>>,
    diag: (Duration, Result<Outcome<Diag>>),
    jobs: (Duration, Result<(Synced, JobsEffort)>),
}

type LaneFuture = Pin<Box<dyn Future<Output = Done> + Send>>;

pub struct Poller {
    client: Arc<SlurmClient>,
    pinned: Option<ApiVersion>,
    opts: CollectorOptions,
    snapshot: ClusterSnapshot,
    /// The job list between polls; out (`None`) while its lane runs.
    tracker: Option<Box<JobTracker>>,
    paces: BTreeMap<Lane, Pace>,
    /// Nodes are read in the jobs lane, at their own pace.
    nodes_pace: Pace,
    busy: BTreeSet<Lane>,
    tx: watch::Sender<Arc<ClusterSnapshot>>,
    changed: Arc<Notify>,
    /// A wake-up not yet turned into a read (one was in flight).
    wake_pending: bool,
    /// When the last wake-up's read was due.
    last_wake: Option<Instant>,
}

impl Poller {
    /// A poller for one cluster, and the receiver its snapshots are published on. `changed`
    /// is notified after every publication (one renderer may watch many pollers).
    pub fn new(
        cluster: &ClusterConfig,
        opts: CollectorOptions,
        changed: Arc<Notify>,
    ) -> Result<(Self, watch::Receiver<Arc<ClusterSnapshot>>)> {
        let mut client_opts = cluster.client_options();
        (client_opts.max_requests_per_second, client_opts.burst) = request_budget(cluster, &opts);
        let client = Arc::new(SlurmClient::new(&client_opts, cluster.token_source()?)?);
        let mut snapshot = ClusterSnapshot::new(&cluster.name, &cluster.url);
        snapshot.api_version = cluster.api_version;
        let (tx, rx) = watch::channel(Arc::new(snapshot.clone()));
        let poller = Self {
            client,
            pinned: cluster.api_version,
            tracker: Some(Box::new(JobTracker::new(
                opts.per_owner,
                opts.budget,
                cluster.kubernetes_jobs.clone(),
                opts.request_max_jobs,
            ))),
            opts,
            snapshot,
            paces: BTreeMap::new(),
            nodes_pace: Pace::default(),
            busy: BTreeSet::new(),
            tx,
            changed,
            wake_pending: false,
            last_wake: None,
        };
        Ok((poller, rx))
    }

    fn active(&self) -> bool {
        self.opts.active.as_ref().is_none_or(|a| *a.borrow())
    }

    /// Polls until `stop` is cancelled. Every lane starts at once.
    pub async fn run(mut self, stop: CancellationToken) {
        let mut out: FuturesUnordered<LaneFuture> = FuturesUnordered::new();
        let mut active_rx = self.opts.active.clone();
        let mut wake_rx = self.opts.wake.clone();
        let mut was_active = self.active();
        loop {
            let active = self.active();
            if active && !was_active {
                // Taking over: what we knew as a standby is old; start from a full look.
                info!(cluster = %self.snapshot.cluster, "leading: polling Slurm");
                for p in self.paces.values_mut() {
                    p.now();
                }
                self.nodes_pace.now();
                if let Some(t) = self.tracker.as_mut() {
                    t.reset();
                }
            } else if !active && was_active {
                info!(cluster = %self.snapshot.cluster, "standby: only pinging Slurm");
            }
            was_active = active;
            self.snapshot.standby = !active;
            // A standby reads no nodes: its wake-ups go unheeded.
            self.wake_pending &= active;
            if self.wake_pending && !self.busy.contains(&Lane::Jobs) {
                self.wake_up();
            }

            if out.is_empty()
                && self.snapshot.api_version.is_none()
                && self.pinned.is_none()
                && let Err(e) = self.probe().await
            {
                warn!(cluster = %self.snapshot.cluster, error = %e, "cannot find a slurmrestd API version");
                self.fail_all(&e);
                self.publish();
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(self.opts.interval) => continue,
                }
            }
            if let Some(version) = self.pinned.or(self.snapshot.api_version) {
                for lane in Lane::ALL {
                    if self.may_start(lane, active) {
                        out.push(self.start(lane, version));
                    }
                }
            }
            let wake = self.next_start(active);
            tokio::select! {
                _ = stop.cancelled() => return,
                Some(done) = out.next(), if !out.is_empty() => self.finish(done),
                _ = tokio::time::sleep_until(wake.into()) => {}
                _ = changed(&mut active_rx) => {}
                _ = changed(&mut wake_rx) => self.wake_pending = true,
            }
        }
    }

    /// The work lane (nodes first) due now, or a [`WAKE_GAP`] after the last wake-up's.
    fn wake_up(&mut self) {
        let now = Instant::now();
        let at = self.last_wake.map_or(now, |t| (t + WAKE_GAP).max(now));
        self.last_wake = Some(at);
        self.wake_pending = false;
        self.nodes_pace.due_by(at);
        self.paces.entry(Lane::Jobs).or_default().due_by(at);
    }

    /// Every lane once, now, whatever the pace (benchmarks and tests).
    pub async fn collect_once(&mut self) {
        if self.snapshot.api_version.is_none()
            && self.pinned.is_none()
            && let Err(e) = self.probe().await
        {
            self.fail_all(&e);
            self.publish();
            return;
        }
        let Some(version) = self.pinned.or(self.snapshot.api_version) else {
            return;
        };
        let lanes: Vec<LaneFuture> = Lane::ALL.iter().map(|l| self.start(*l, version)).collect();
        for done in futures::future::join_all(lanes).await {
            self.finish(done);
        }
    }

    fn may_start(&self, lane: Lane, active: bool) -> bool {
        (active || lane == Lane::Ping)
            && !self.busy.contains(&lane)
            && self.paces.get(&lane).is_none_or(|p| p.ready())
    }

    /// When the next idle lane may start.
    fn next_start(&self, active: bool) -> Instant {
        let far = Instant::now() + self.opts.interval.max(STANDBY_PING);
        Lane::ALL
            .iter()
            .filter(|l| (active || **l == Lane::Ping) && !self.busy.contains(l))
            .filter_map(|l| self.paces.get(l).and_then(|p| p.next()))
            .min()
            .map_or(far, |t| t.min(far))
    }

    fn start(&mut self, lane: Lane, version: ApiVersion) -> LaneFuture {
        self.busy.insert(lane);
        let client = self.client.clone();
        let started = Instant::now();
        match lane {
            Lane::Ping => Box::pin(async move {
                let r = fetch::ping(&client, version).await;
                Done::Ping(started, started.elapsed(), r)
            }),
            // Always in full: a node joining or leaving a partition (a Slinky pod's `slurmd -Z`
            // registering, its record deleted) moves no `update_time`, so a conditional read
            // would keep the old membership and size; and an "unchanged" answer costs
            // slurmrestd within a few percent of a full one (benches README).
            Lane::Partitions => Box::pin(async move {
                let r = fetch::partitions(&client, version).await;
                Done::Partitions(started, started.elapsed(), r)
            }),
            Lane::Jobs => {
                // Out only while its lane runs, which is not now.
                let Some(mut tracker) = self.tracker.take() else {
                    return Box::pin(std::future::pending());
                };
                let interval = self.opts.interval;
                let with_nodes = self.nodes_pace.ready();
                Box::pin(async move {
                    let nodes = if with_nodes {
                        let r = fetch::nodes(&client, version).await;
                        Some((started, started.elapsed(), r))
                    } else {
                        None
                    };
                    let diag_started = Instant::now();
                    let diag = fetch::diag(&client, version).await;
                    let diag_took = diag_started.elapsed();
                    let counters = match &diag {
                        Ok(Outcome::Fresh { data, .. }) => Some(data),
                        _ => None,
                    };
                    let rest = source::Rest {
                        client: &client,
                        version,
                    };
                    let jobs = tracker.step(&rest, counters, interval).await;
                    let took = started.elapsed();
                    Done::Jobs(
                        tracker,
                        Box::new(JobsDone {
                            started: diag_started,
                            nodes,
                            diag: (diag_took, diag),
                            jobs: (took, jobs),
                        }),
                    )
                })
            }
        }
    }

    fn finish(&mut self, done: Done) {
        let (interval, budget) = (self.opts.interval, self.opts.budget);
        let active = self.active();
        let cluster = self.snapshot.cluster.clone();
        let mut seen = Seen::default();
        match done {
            Done::Ping(started, took, r) => {
                self.busy.remove(&Lane::Ping);
                let every = if active { interval } else { STANDBY_PING };
                let pace = self.paces.entry(Lane::Ping).or_default();
                pace.done_every(started, pace::cost(took, &r), budget, every);
                self.snapshot.ping.cadence = pace.gap();
                seen.apply(&cluster, &mut self.snapshot.ping, Endpoint::Ping, took, r);
            }

            Done::Partitions(started, took, r) => {
                self.busy.remove(&Lane::Partitions);
                let pace = self.paces.entry(Lane::Partitions).or_default();
                pace.done_every(started, pace::cost(took, &r), budget, interval);
                self.snapshot.partitions.cadence = pace.gap();
                seen.apply(
                    &cluster,
                    &mut self.snapshot.partitions,
                    Endpoint::Partitions,
                    took,
                    r,
                );
            }
            Done::Jobs(tracker, d) => self.jobs_done(tracker, *d, &mut seen),
        }
        let upgraded = match (&self.snapshot.release, &seen.release) {
            (Some(was), Some(now)) => was != now,
            _ => false,
        };
        if let Some(release) = seen.release {
            self.snapshot.release = Some(release);
        }
        if (seen.version_gone || upgraded)
            && self.pinned.is_none()
            && self.snapshot.api_version.is_some()
        {
            // slurmrestd was upgraded or restarted with other plugins: probe again. Only
            // on such evidence — an endpoint the version needs not served, another release —
            // never on an optional endpoint (accounting) that is absent.
            info!(cluster = %cluster, upgraded, "slurmrestd changed: probing its API version again");
            self.snapshot.api_version = None;
            if let Some(t) = self.tracker.as_mut() {
                t.reset();
            }
        }
        if let Some(t) = self.tracker.as_ref() {
            self.snapshot.job_list = t.read();
        }
        self.publish();
    }

    /// The jobs lane's step is back: nodes, `/diag` and the job list into the snapshot, and
    /// the lane's pace from what `/diag` cost (the tracker paces its full reads itself).
    fn jobs_done(&mut self, tracker: Box<JobTracker>, d: JobsDone, seen: &mut Seen) {
        let (interval, budget) = (self.opts.interval, self.opts.budget);
        let cluster = self.snapshot.cluster.clone();
        self.busy.remove(&Lane::Jobs);
        if let Some((started, took, r)) = d.nodes {
            self.nodes_pace
                .done_every(started, pace::cost(took, &r), budget, interval);
            self.snapshot.nodes.cadence = self.nodes_pace.gap();
            seen.apply(&cluster, &mut self.snapshot.nodes, Endpoint::Nodes, took, r);
        }
        let full_gap = tracker.full_gap();
        self.tracker = Some(tracker);
        let (diag_took, diag) = d.diag;
        let counted =
            matches!(&diag, Ok(Outcome::Fresh { data, .. }) if data.jobs_submitted.is_some());
        let diag_cost = pace::cost(diag_took, &diag);
        seen.apply(
            &cluster,
            &mut self.snapshot.diag,
            Endpoint::Diag,
            diag_took,
            diag,
        );
        let pace = self.paces.entry(Lane::Jobs).or_default();
        // The step itself is cheap; its full fetches keep their own pace.
        pace.done_every(d.started, diag_cost, budget, interval);
        // Without counters, only full fetches confirm the list: at their pace.
        self.snapshot.jobs.cadence = if counted {
            pace.gap()
        } else {
            full_gap.or(pace.gap())
        };
        self.snapshot.diag.cadence = pace.gap();
        let (took, r) = d.jobs;
        let r = r.map(|(synced, effort)| {
            self.snapshot.jobs_effort += effort;
            match synced {
                Synced::Changed(jobs) => Some(Outcome::Fresh {
                    data: *jobs,
                    release: None,
                    last_update: None,
                }),
                Synced::Unchanged => Some(Outcome::Unchanged),
                Synced::Waiting => None,
            }
        });
        match r {
            Ok(None) => {}
            Ok(Some(o)) => seen.apply(
                &cluster,
                &mut self.snapshot.jobs,
                Endpoint::Jobs,
                took,
                Ok(o),
            ),
            Err(e) => seen.apply::<crate::model::Jobs>(
                &cluster,
                &mut self.snapshot.jobs,
                Endpoint::Jobs,
                took,
                Err(e),
            ),
        }
        self.snapshot.cycles += 1;
        self.snapshot.collection_duration = Some(took);
    }

    async fn probe(&mut self) -> Result<ApiVersion> {
        let v = fetch::probe(&self.client).await?;
        info!(cluster = %self.snapshot.cluster, version = %v, "using slurmrestd API version");
        self.snapshot.api_version = Some(v);
        Ok(v)
    }

    fn fail_all(&mut self, e: &Error) {
        let now = SystemTime::now();
        let s = &mut self.snapshot;
        s.ping.fail(now, Duration::ZERO, e);
        s.diag.fail(now, Duration::ZERO, e);
        s.jobs.fail(now, Duration::ZERO, e);
        s.nodes.fail(now, Duration::ZERO, e);
        s.partitions.fail(now, Duration::ZERO, e);
    }

    fn publish(&mut self) {
        self.snapshot.collected_at = Some(SystemTime::now());
        self.snapshot.requests = self.client.request_stats();
        self.tx.send_replace(Arc::new(self.snapshot.clone()));
        self.changed.notify_one();
    }

    /// The latest published snapshot.
    pub fn snapshot(&self) -> Arc<ClusterSnapshot> {
        self.tx.borrow().clone()
    }
}

/// Waits until `rx` sees a new value — leadership flips, a wake-up — (never, without one to
/// watch or once its sender is gone).
async fn changed<T>(rx: &mut Option<watch::Receiver<T>>) {
    match rx {
        Some(rx) => {
            if rx.changed().await.is_err() {
                // The sender is gone: nothing will change any more.
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending::<()>().await,
    }
}

/// What answers said beyond their data.
#[derive(Default)]
struct Seen {
    /// An endpoint the API version needs was not served.
    version_gone: bool,
    release: Option<String>,
}

impl Seen {
    /// Folds one endpoint's result into its state.
    fn apply<T>(
        &mut self,
        cluster: &str,
        state: &mut EndpointState<T>,
        endpoint: Endpoint,
        took: Duration,
        result: Result<Outcome<T>>,
    ) {
        let now = SystemTime::now();
        match result {
            Ok(outcome) => {
                if state.last_attempt.is_some() && !state.up {
                    info!(%cluster, %endpoint, "slurmrestd answers again");
                }
                match outcome {
                    Outcome::Fresh { data, release, .. } => {
                        self.release = release.or(self.release.take());
                        state.succeed(now, took, Some(data));
                    }
                    Outcome::Unchanged => state.succeed(now, took, None),
                }
            }
            Err(e) => {
                self.version_gone |= e.version_gone();
                let message = e.to_string();
                if state.last_error.as_deref() != Some(message.as_str()) {
                    warn!(%cluster, %endpoint, kind = e.kind(), error = %message, "keeping the last good data");
                } else {
                    debug!(%cluster, %endpoint, error = %message, "still failing");
                }
                state.fail(now, took, &e);
            }
        }
    }
}

/// The rate limit of one cluster's requests: what the user set, or what one collection
/// needs at the poll interval (its requests spread over the interval, all of them at once as
/// a burst), so the limiter never slows a collection the interval asks for. A limit that
/// cannot keep up is kept — the user may want exactly that — and said at start.
fn request_budget(cluster: &ClusterConfig, opts: &CollectorOptions) -> (NonZeroU32, NonZeroU32) {
    // Every interval: ping, diag, nodes, partitions, and a full /jobs or /jobs/state/ now
    // and then; in bursts, single-job reads on top.
    let per_collection = Endpoint::ALL.len() as u32;
    let interval = opts.interval.as_secs_f64().max(0.001);
    let needed = (f64::from(per_collection) / interval).ceil() as u32;
    let rate = match cluster.max_requests_per_second {
        Some(r) => {
            if r.get() < needed {
                warn!(
                    cluster = %cluster.name,
                    max_requests_per_second = r.get(),
                    interval = ?opts.interval,
                    "one collection makes {per_collection} requests: at this limit a collection takes {:.1} s, longer than the interval, so data arrives late; raise --max-requests-per-second to {needed} or lengthen --interval",
                    f64::from(per_collection) / f64::from(r.get())
                );
            }
            r
        }
        // Twice what a quiet collection needs: room for single-job reads and retries.
        None => NonZeroU32::new(needed * 2).unwrap_or(NonZeroU32::MIN),
    };
    let burst = NonZeroU32::new((per_collection + MAX_SINGLE_READS).max(rate.get()))
        .unwrap_or(NonZeroU32::MIN);
    (rate, burst)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AuthConfig;

    fn cluster(limit: Option<u32>) -> ClusterConfig {
        ClusterConfig {
            name: "c".into(),
            url: "http://127.0.0.1:1".into(),
            user: "slurm".into(),
            auth: AuthConfig::Token(crate::slurm::Secret::new("t")),
            api_version: None,
            ca_file: None,
            timeout: Duration::from_secs(1),
            max_requests_per_second: limit.and_then(NonZeroU32::new),
            kubernetes_jobs: Default::default(),
        }
    }

    fn opts(interval: u64) -> CollectorOptions {
        CollectorOptions {
            interval: Duration::from_secs(interval),
            ..Default::default()
        }
    }

    #[test]
    fn the_default_limit_lets_every_collection_through_on_time() {
        // A quiet collection is one request per endpoint; a busy step adds up to
        // MAX_SINGLE_READS single-job reads at once.
        let quiet = Endpoint::ALL.len() as f64;
        for interval in [1, 2, 5, 30, 300] {
            let (rate, burst) = request_budget(&cluster(None), &opts(interval));
            let per_interval = f64::from(rate.get()) * interval as f64;
            // Room for twice a quiet collection every interval (reads again, retries)…
            assert!(per_interval >= 2.0 * quiet, "{interval}s: {rate}/s");
            // …and the busiest step goes out at once, never queued behind the limiter.
            assert!(burst.get() >= Endpoint::ALL.len() as u32 + MAX_SINGLE_READS);
        }
        // What the user sets stands, even when it cannot keep up.
        let (rate, _) = request_budget(&cluster(Some(2)), &opts(1));
        assert_eq!(rate.get(), 2);
    }
}
