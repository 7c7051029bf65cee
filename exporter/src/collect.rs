//! One background poller per Slurm cluster: every interval it fetches the endpoints
//! concurrently, folds the answers into the cluster's [`ClusterSnapshot`] and publishes a new
//! immutable copy. Scrapes and the autoscaler only ever read published snapshots, so
//! slurmctld sees at most one request per endpoint per interval however many readers there
//! are.

use std::collections::HashMap;
use std::future::Future;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::config::ClusterConfig;
use crate::error::{Error, Result};
use crate::slurm::fetch::{self, Outcome};
use crate::slurm::{ApiVersion, ClientOptions, Endpoint, SlurmClient};
use crate::snapshot::{ClusterSnapshot, EndpointState};

/// `update_time` is sent this far behind the start of the previous fetch: slurmctld's change
/// times have one-second granularity and the two clocks may disagree a little.
const UPDATE_TIME_MARGIN: i64 = 5;
/// However quiet the cluster, fetch everything in full at least this often.
const FULL_REFRESH: Duration = Duration::from_secs(300);

#[derive(Clone, Debug)]
pub struct CollectorOptions {
    pub interval: Duration,
    /// Count jobs per user and account (a cardinality cost: off by default).
    pub per_owner: bool,
    /// Poll `/diag` (the autoscaler does not need it).
    pub diag: bool,
}

impl Default for CollectorOptions {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(30),
            per_owner: false,
            diag: true,
        }
    }
}

pub struct Poller {
    client: SlurmClient,
    pinned: Option<ApiVersion>,
    opts: CollectorOptions,
    snapshot: ClusterSnapshot,
    since: HashMap<Endpoint, (i64, Instant)>,
    tx: watch::Sender<Arc<ClusterSnapshot>>,
    changed: Arc<Notify>,
}

impl Poller {
    /// A poller for one cluster, and the receiver its snapshots are published on. `changed`
    /// is notified after every publication (one renderer may watch many pollers).
    pub fn new(
        cluster: &ClusterConfig,
        opts: CollectorOptions,
        changed: Arc<Notify>,
    ) -> Result<(Self, watch::Receiver<Arc<ClusterSnapshot>>)> {
        let mut client_opts = ClientOptions::new(&cluster.url, &cluster.user);
        client_opts.timeout = cluster.timeout;
        client_opts.ca_file = cluster.ca_file.clone();
        (client_opts.max_requests_per_second, client_opts.burst) = request_budget(cluster, &opts);
        let client = SlurmClient::new(&client_opts, cluster.token_source()?)?;
        let snapshot = ClusterSnapshot::new(&cluster.name, &cluster.url);
        let (tx, rx) = watch::channel(Arc::new(snapshot.clone()));
        let poller = Self {
            client,
            pinned: cluster.api_version,
            opts,
            snapshot,
            since: HashMap::new(),
            tx,
            changed,
        };
        Ok((poller, rx))
    }

    /// Polls until `stop` is cancelled. The first cycle starts at once.
    pub async fn run(mut self, stop: CancellationToken) {
        let mut tick = tokio::time::interval(self.opts.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = self.collect_once() => {}
            }
        }
    }

    /// One collection cycle: fetch, fold, publish.
    pub async fn collect_once(&mut self) {
        let started = Instant::now();
        let version = match self.version().await {
            Ok(v) => v,
            Err(e) => {
                let now = SystemTime::now();
                warn!(cluster = %self.snapshot.cluster, error = %e, "cannot find a slurmrestd API version");
                self.snapshot.ping.fail(now, started.elapsed(), &e);
                self.snapshot.jobs.fail(now, started.elapsed(), &e);
                self.snapshot.nodes.fail(now, started.elapsed(), &e);
                self.snapshot.partitions.fail(now, started.elapsed(), &e);
                if self.opts.diag {
                    self.snapshot.diag.fail(now, started.elapsed(), &e);
                }
                self.publish(started);
                return;
            }
        };
        let client = &self.client;
        let since = |e: Endpoint| {
            self.since
                .get(&e)
                .filter(|(_, full)| full.elapsed() < FULL_REFRESH)
                .map(|(t, _)| *t)
        };
        let request_start = unix_now() - UPDATE_TIME_MARGIN;
        let (ping, diag, jobs, nodes, partitions) = tokio::join!(
            timed(fetch::ping(client, version)),
            timed(async {
                if self.opts.diag {
                    Some(fetch::diag(client, version).await)
                } else {
                    None
                }
            }),
            timed(fetch::jobs(
                client,
                version,
                since(Endpoint::Jobs),
                self.opts.per_owner
            )),
            timed(fetch::nodes(client, version)),
            timed(fetch::partitions(
                client,
                version,
                since(Endpoint::Partitions)
            )),
        );

        let cluster = self.snapshot.cluster.clone();
        let mut cx = Apply {
            cluster: &cluster,
            since: &mut self.since,
            request_start,
            not_served: false,
            release: None,
        };
        let snap = &mut self.snapshot;
        cx.apply(&mut snap.ping, Endpoint::Ping, ping);
        if let (took, Some(r)) = diag {
            cx.apply(&mut snap.diag, Endpoint::Diag, (took, r));
        }
        cx.apply(&mut snap.jobs, Endpoint::Jobs, jobs);
        cx.apply(&mut snap.nodes, Endpoint::Nodes, nodes);
        cx.apply(&mut snap.partitions, Endpoint::Partitions, partitions);
        let (not_served, release) = (cx.not_served, cx.release);
        if release.is_some() {
            self.snapshot.release = release;
        }

        if not_served && self.pinned.is_none() {
            // slurmrestd was upgraded or restarted with other plugins: probe again.
            self.snapshot.api_version = None;
        }
        self.publish(started);
    }

    async fn version(&mut self) -> Result<ApiVersion> {
        if let Some(v) = self.pinned.or(self.snapshot.api_version) {
            self.snapshot.api_version = Some(v);
            return Ok(v);
        }
        let v = fetch::probe(&self.client).await?;
        info!(cluster = %self.snapshot.cluster, version = %v, "using slurmrestd API version");
        self.snapshot.api_version = Some(v);
        Ok(v)
    }

    fn publish(&mut self, started: Instant) {
        self.snapshot.cycles += 1;
        self.snapshot.collected_at = Some(SystemTime::now());
        self.snapshot.collection_duration = Some(started.elapsed());
        self.tx.send_replace(Arc::new(self.snapshot.clone()));
        self.changed.notify_one();
    }

    /// The latest published snapshot.
    pub fn snapshot(&self) -> Arc<ClusterSnapshot> {
        self.tx.borrow().clone()
    }
}

/// Folds one endpoint's result into its state; remembers what the next request needs.
struct Apply<'a> {
    cluster: &'a str,
    since: &'a mut HashMap<Endpoint, (i64, Instant)>,
    request_start: i64,
    not_served: bool,
    release: Option<String>,
}

impl Apply<'_> {
    fn apply<T>(
        &mut self,
        state: &mut EndpointState<T>,
        endpoint: Endpoint,
        (took, result): (Duration, Result<Outcome<T>>),
    ) {
        let now = SystemTime::now();
        let cluster = self.cluster;
        match result {
            Ok(outcome) => {
                if state.last_attempt.is_some() && !state.up {
                    info!(%cluster, %endpoint, "slurmrestd answers again");
                }
                match outcome {
                    Outcome::Fresh { data, release, .. } => {
                        self.release = release.or(self.release.take());
                        state.succeed(now, took, Some(data));
                        self.since
                            .insert(endpoint, (self.request_start, Instant::now()));
                    }
                    Outcome::Unchanged => {
                        state.succeed(now, took, None);
                        if let Some((t, _)) = self.since.get_mut(&endpoint) {
                            *t = self.request_start;
                        }
                    }
                }
            }
            Err(e) => {
                self.not_served |= matches!(e, Error::Http { status: 404, .. });
                let message = e.to_string();
                if state.last_error.as_deref() != Some(message.as_str()) {
                    warn!(%cluster, %endpoint, kind = e.kind(), error = %message, "keeping the last good data");
                } else {
                    debug!(%cluster, %endpoint, error = %message, "still failing");
                }
                state.fail(now, took, &e);
                // The next answer must be complete, not "unchanged since".
                self.since.remove(&endpoint);
            }
        }
    }
}

/// The rate limit of one cluster's requests: what the user set, or what one collection
/// needs at the poll interval (its requests spread over the interval, all of them at once as
/// a burst), so the limiter never slows a collection the interval asks for. A limit that
/// cannot keep up is kept — the user may want exactly that — and said at start.
fn request_budget(cluster: &ClusterConfig, opts: &CollectorOptions) -> (NonZeroU32, NonZeroU32) {
    let per_collection = Endpoint::ALL
        .iter()
        .filter(|e| opts.diag || **e != Endpoint::Diag)
        .count() as u32;
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
        None => NonZeroU32::new(needed).unwrap_or(NonZeroU32::MIN),
    };
    let burst = NonZeroU32::new(per_collection.max(rate.get())).unwrap_or(NonZeroU32::MIN);
    (rate, burst)
}

async fn timed<T>(f: impl Future<Output = T>) -> (Duration, T) {
    let start = Instant::now();
    let out = f.await;
    (start.elapsed(), out)
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
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
        }
    }

    fn opts(interval: u64, diag: bool) -> CollectorOptions {
        CollectorOptions {
            interval: Duration::from_secs(interval),
            per_owner: false,
            diag,
        }
    }

    #[test]
    fn the_default_limit_lets_every_collection_through_on_time() {
        let n = |r: NonZeroU32| r.get();
        // The autoscaler: 4 requests a collection.
        let (rate, burst) = request_budget(&cluster(None), &opts(1, false));
        assert_eq!((n(rate), n(burst)), (4, 4));
        let (rate, burst) = request_budget(&cluster(None), &opts(2, false));
        assert_eq!((n(rate), n(burst)), (2, 4));
        // The exporter: 5, every 30 s.
        let (rate, burst) = request_budget(&cluster(None), &opts(30, true));
        assert_eq!((n(rate), n(burst)), (1, 5));
        // What the user sets stands, even when it cannot keep up.
        let (rate, _) = request_budget(&cluster(Some(2)), &opts(1, true));
        assert_eq!(n(rate), 2);
    }
}
