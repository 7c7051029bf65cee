//! The slurmscale autoscaler library: the `NodeSetAutoscaler` CRD ([`crd`]), the [`plan`]
//! every policy returns, the [`controller`] (with each policy in a room of its own, its pure
//! planner among it)
//! loop, the seam it acts and reads through ([`actuator`], [`slurm_nodes`], [`pool`], and
//! their in-memory [`fakes`]), [`leader`] election and the autoscaler's [`metrics`]: what
//! runs in production. [`run`] wires them together as `slurmscale autoscaler` runs them. (The
//! simulated world the replays and the demo run this controller in is `slurmscale-sim`.)

pub mod actuator;
pub mod controller;
pub mod crd;
pub mod error;
pub mod fakes;
pub mod leader;
pub mod metrics;
pub mod plan;
pub mod pool;
pub mod records;
pub mod slurm_nodes;
pub mod targets;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client};
use slurmscale_exporter::collect::{CollectorOptions, Poller};
use slurmscale_exporter::config::ClusterConfig;
use slurmscale_exporter::server::{self, AppState};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

pub use error::{Error, Result};

/// NodeSetAutoscalers reconciled at once. A NodeSet target is read from a watch
/// ([`targets`]), so a reconcile waits on the API server only for what it writes, or for a
/// target of another kind (two reads): 16 at a time keep a round of 200 autoscalers under a
/// poll interval even then, without a burst the API server's default limits would notice.
pub const RECONCILE_CONCURRENCY: usize = 16;

/// What `slurmscale autoscaler` runs with.
#[derive(Clone, Debug)]
pub struct AutoscalerConfig {
    pub clusters: Vec<ClusterConfig>,
    /// How often slurmrestd is polled (and decisions made).
    pub interval: Duration,
    /// The share of slurmrestd's time each kind of request may take.
    pub budget: slurmscale_exporter::collect::Budget,
    /// Live jobs above which the job list is never asked for in one answer.
    pub request_max_jobs: u64,
    pub listen: SocketAddr,
    /// Leader election; `None` to act alone.
    pub lease: Option<leader::LeaseConfig>,
    pub identity: String,
    /// Deadline of each Kubernetes read and write (not watches).
    pub kube_timeout: Duration,
    /// Decide and report for every autoscaler, never actuate.
    pub dry_run: bool,
    /// How to run `scontrol` for node updates on Slurm 22.05 (colocation only).
    pub scontrol: slurm_nodes::Scontrol,
    /// Where the GenericNode ledger is (colocation only).
    pub ledger: slurmscale_exporter::k8s::ledger::LedgerConfig,
    /// Serve the exporter's metrics too, from the same pollers (one poller per cluster for
    /// both roles); `None`: the autoscaler's own and its pollers' health only.
    pub exporter_metrics: Option<slurmscale_exporter::metrics::MetricsOptions>,
    /// TLS and basic auth for `/metrics` (`--web-config-file`); `None`: plain HTTP.
    pub web: Option<slurmscale_exporter::web::WebConfig>,
    /// Where the metrics page is served (`--web.telemetry-path`).
    pub telemetry_path: String,
}

/// NodeSetAutoscalers of every namespace, in memory, and whether the first list is in.
/// Every change wakes the controller through `changed`.
fn watch_autoscalers(
    client: Client,
    changed: Arc<Notify>,
    stop: CancellationToken,
) -> (reflector::Store<crd::NodeSetAutoscaler>, Arc<AtomicBool>) {
    let api: Api<crd::NodeSetAutoscaler> = Api::all(client);
    let (store, writer) = reflector::store();
    let listed = Arc::new(AtomicBool::new(false));
    let first_list = listed.clone();
    tokio::spawn(async move {
        let stream = reflector::reflector(writer, watcher(api, watcher::Config::default()))
            .default_backoff();
        let mut stream = std::pin::pin!(stream);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                e = stream.next() => match e {
                    None => return,
                    Some(Ok(watcher::Event::InitDone)) => {
                        first_list.store(true, Ordering::SeqCst);
                        changed.notify_one();
                    }
                    Some(Ok(_)) => changed.notify_one(),
                    Some(Err(e)) => warn!(error = %e, "NodeSetAutoscaler watch failed; retrying"),
                },
            }
        }
    });
    (store, listed)
}

/// Every cluster's latest Slurm snapshot, by name.
type Snapshots = BTreeMap<
    String,
    tokio::sync::watch::Receiver<Arc<slurmscale_exporter::snapshot::ClusterSnapshot>>,
>;

/// The `/metrics` page, re-rendered every second from the latest numbers: the pollers'
/// health and the autoscaler's own families, and with `exporter` the exporter's families
/// too — from the leader only, since a standby's are stale.
fn render_page(
    clusters: Snapshots,
    metrics: Arc<std::sync::Mutex<metrics::AutoscalerMetrics>>,
    exporter: Option<slurmscale_exporter::metrics::MetricsOptions>,
    leadership: leader::Leadership,
    watch: slurmscale_exporter::k8s::watch::KubeSource,
    stop: CancellationToken,
) -> tokio::sync::watch::Receiver<Arc<server::Page>> {
    let (tx, rx) = tokio::sync::watch::channel(Arc::new(server::Page::default()));
    tokio::spawn(async move {
        loop {
            let snapshots = clusters.values().map(|r| r.borrow().clone()).collect();
            let mut m = metrics.lock().unwrap_or_else(|e| e.into_inner()).clone();
            // As it is now, not as at the last reconcile (a minute ago at a long interval);
            // read once, so a page never says "standby" above the leader's Slurm data.
            let leading = leadership.is_leader();
            m.leader = leading;
            let full = exporter
                .as_ref()
                .filter(|_| leading)
                .map(|o| (o, watch.snapshot()));
            let page = metrics::page(snapshots, &m, full.as_ref().map(|(o, k)| (*o, k)));
            tx.send_replace(Arc::new(page));
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
    });
    rx
}

/// Runs the autoscaler until `stop`.
pub async fn run(client: Client, cfg: AutoscalerConfig, stop: CancellationToken) -> Result<()> {
    let changed = Arc::new(Notify::new());
    let leadership = match cfg.lease.clone() {
        Some(lease) => {
            let l = leader::Leadership::default();
            tokio::spawn(leader::run(client.clone(), lease, l.clone(), stop.clone()));
            l
        }
        None => leader::Leadership::always(),
    };
    // `POST /wake`: slurmctld's ResumeProgram says it powers nodes up; the pollers read
    // nodes at once instead of at their next interval.
    let (wake_tx, wake_rx) = tokio::sync::watch::channel(());
    // Only the leader polls Slurm in full; a standby pings, and takes over with a fresh
    // look before its first decision (its data is stale until then: it freezes).
    let opts = CollectorOptions {
        interval: cfg.interval,
        per_owner: cfg.exporter_metrics.as_ref().is_some_and(|m| m.per_owner),
        budget: cfg.budget,
        request_max_jobs: cfg.request_max_jobs,
        active: cfg.lease.is_some().then(|| leadership.watch()),
        wake: Some(wake_rx),
    };
    let mut clusters = BTreeMap::new();
    for c in &cfg.clusters {
        let (poller, rx) = Poller::new(c, opts.clone(), changed.clone())?;
        tokio::spawn(poller.run(stop.clone()));
        clusters.insert(c.name.clone(), rx);
    }

    let (store, listed) = watch_autoscalers(client.clone(), changed.clone(), stop.clone());
    if cfg.dry_run {
        info!("dry run: decisions are reported, nothing is scaled");
    }
    // The ledger and node capacity, pods and node writers, for colocated autoscalers.
    let watch = slurmscale_exporter::k8s::watch::KubeSource::start(
        client.clone(),
        cfg.ledger.clone(),
        changed.clone(),
        stop.clone(),
    );
    let seam = controller::Seam {
        kubernetes: actuator::Actuator::fenced(
            client.clone(),
            &cfg.identity,
            leadership.clone(),
            cfg.kube_timeout,
        ),
        slurm: slurm_nodes::SlurmNodeWriters::new(
            &cfg.clusters,
            &cfg.scontrol,
            leadership.clone(),
        )?,
        pool: pool::KubePool::new(client, Some(watch.clone())).with_timeout(cfg.kube_timeout),
        clock: controller::wall_clock(),
    };
    let controller = Arc::new(controller::Controller::new(
        seam,
        store,
        clusters.clone(),
        leadership.clone(),
        controller::ControllerConfig {
            resync: cfg.interval,
            stale_after: slurmscale_exporter::signals::stale_after(cfg.interval),
            dry_run: cfg.dry_run,
            concurrency: RECONCILE_CONCURRENCY,
        },
    ));
    tokio::spawn(controller.clone().run(changed, stop.clone()));

    let leading = leadership.clone();
    let rx = render_page(
        clusters,
        controller.metrics.clone(),
        cfg.exporter_metrics.clone(),
        leadership,
        watch,
        stop.clone(),
    );
    let mut state = AppState::new(rx);
    state.telemetry_path = cfg.telemetry_path.clone();
    state.extra_ready.push(Arc::new(move || {
        if listed.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err("NodeSetAutoscalers not listed yet".into())
        }
    }));
    let metrics = controller.metrics.clone();
    state.wake = Some(Arc::new(move || {
        if !leading.is_leader() {
            return Err("standby: the leader polls Slurm".into());
        }
        metrics.lock().unwrap_or_else(|e| e.into_inner()).wakes += 1;
        wake_tx.send_replace(());
        Ok(())
    }));
    server::serve_with(cfg.listen, state, stop, cfg.web.as_ref()).await?;
    Ok(())
}
