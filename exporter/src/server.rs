//! The HTTP face: `/metrics`, `/healthz`, `/readyz`, and the autoscaler's `POST /wake`.
//!
//! A renderer task turns every newly published snapshot into exposition text once; a scrape
//! only copies that text and appends a few scrape-time gauges (data ages, process metrics).
//! So 100 concurrent scrapers cost microseconds each and never reach slurmrestd.
//!
//! `/healthz` is 200 while the process serves. `/readyz` is 200 once every cluster has
//! answered jobs, nodes and partitions at least once, and stays 200 afterwards: when Slurm
//! fails later the last good data is still served, marked stale by
//! `slurm_exporter_endpoint_up` and `slurm_exporter_endpoint_data_age_seconds` — restarting
//! or unrouting the exporter would only lose that data. Until then it is 503 and says which
//! endpoint has not answered and why.
//!
//! `POST /wake` (where the process has something to wake) asks for Slurm's nodes now: it
//! only brings a read forward, at most once a second, so it needs no password, like the
//! probes — slurmctld's ResumeProgram calls it with nothing but bash.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use futures::stream;
use prometheus::{Encoder, Registry, TextEncoder};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::error::Result;
use crate::k8s::watch::KubeSource;
use crate::metrics::{self, MetricsOptions};
use crate::slurm::Endpoint;
use crate::snapshot::{ClusterSnapshot, REQUIRED};
use crate::web;

/// The shortest time between two renders.
pub const RENDER_GAP: std::time::Duration = std::time::Duration::from_millis(200);

/// The rendered part of `/metrics` and the snapshots it was rendered from.
#[derive(Default)]
pub struct Page {
    pub text: Bytes,
    pub snapshots: Vec<Arc<ClusterSnapshot>>,
}

/// Renders a new page whenever `changed` fires (at most every [`RENDER_GAP`], so a burst of
/// watch events costs one render); stops with `stop`.
pub fn spawn_renderer(
    clusters: Vec<watch::Receiver<Arc<ClusterSnapshot>>>,
    kube: Option<KubeSource>,
    changed: Arc<Notify>,
    opts: MetricsOptions,
    stop: CancellationToken,
) -> watch::Receiver<Arc<Page>> {
    let (tx, rx) = watch::channel(Arc::new(Page::default()));
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = changed.notified() => {}
            }
            let snapshots: Vec<_> = clusters.iter().map(|r| r.borrow().clone()).collect();
            let (opts, kube) = (opts.clone(), kube.clone());
            let rendered = tokio::task::spawn_blocking(move || {
                let kube = kube.map(|k| k.snapshot());
                let input = metrics::PageInput {
                    snapshots: &snapshots,
                    kube: kube.as_ref(),
                    opts: &opts,
                    now: SystemTime::now(),
                    health_only: false,
                };
                let text = metrics::render(&input, |_| {});
                Page {
                    text: Bytes::from(text),
                    snapshots,
                }
            })
            .await;
            if let Ok(page) = rendered {
                tx.send_replace(Arc::new(page));
            }
            tokio::time::sleep(RENDER_GAP).await;
        }
    });
    rx
}

#[derive(Clone)]
pub struct AppState {
    pub page: watch::Receiver<Arc<Page>>,
    pub process: Registry,
    /// The scrape-time part of `/metrics` (ages, process metrics), reused for up to a second:
    /// under a scrape storm, reading /proc for every request would cost more than the page.
    dynamic: Arc<std::sync::Mutex<Option<(std::time::Instant, Bytes)>>>,
    /// Readiness beyond the Slurm clusters (e.g. Kubernetes caches synced).
    pub extra_ready: Vec<Arc<dyn Fn() -> Result<(), String> + Send + Sync>>,
    /// Serves `POST /wake` with it: `Err` says why this process will not poll (202 or 503).
    pub wake: Option<Arc<dyn Fn() -> Result<(), String> + Send + Sync>>,
    /// Where the metrics page is served (`--web.telemetry-path`).
    pub telemetry_path: String,
}

impl AppState {
    pub fn new(page: watch::Receiver<Arc<Page>>) -> Self {
        let process = Registry::new();
        #[cfg(target_os = "linux")]
        {
            let _ = process.register(Box::new(
                prometheus::process_collector::ProcessCollector::for_self(),
            ));
        }
        Self {
            page,
            process,
            extra_ready: Vec::new(),
            wake: None,
            telemetry_path: "/metrics".into(),
            dynamic: Arc::default(),
        }
    }
}

pub fn router(state: AppState) -> Router {
    router_with(state, None)
}

/// The routes; with `users`, `/` and `/metrics` need basic auth (the probes and `/wake` stay
/// open: kubelet and a ResumeProgram send no credentials).
pub fn router_with(state: AppState, users: Option<Arc<web::Users>>) -> Router {
    let mut guarded = Router::new()
        .route("/", get(index))
        .route(&state.telemetry_path, get(metrics_handler));
    if let Some(users) = users {
        guarded = guarded.layer(axum::middleware::from_fn_with_state(
            users,
            web::require_basic_auth,
        ));
    }
    let mut open = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz));
    if state.wake.is_some() {
        open = open.route("/wake", post(wake));
    }
    guarded.merge(open).with_state(state)
}

/// Serves until `stop` is cancelled, then finishes in-flight requests.
pub async fn serve(listen: SocketAddr, state: AppState, stop: CancellationToken) -> Result<()> {
    serve_with(listen, state, stop, None).await
}

/// [`serve`], locked down as `web` says (TLS, basic auth: `--web-config-file`).
pub async fn serve_with(
    listen: SocketAddr,
    state: AppState,
    stop: CancellationToken,
    web: Option<&web::WebConfig>,
) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(listen).await?;
    let app = router_with(state, web.and_then(|w| w.basic_auth()));
    let tls = web.and_then(|w| w.tls_server_config.as_ref());
    info!(
        address = %listener.local_addr()?,
        tls = tls.is_some(),
        basic_auth = web.is_some_and(|w| !w.basic_auth_users.is_empty()),
        "serving /metrics, /healthz, /readyz"
    );
    match tls {
        Some(tls) => {
            axum::serve(web::TlsListener::new(listener, tls)?, app)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await?
        }
        None => {
            axum::serve(listener, app)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await?
        }
    }
    Ok(())
}

/// [`serve`] on a listener already bound (to learn the port of `:0` before serving).
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    state: AppState,
    stop: CancellationToken,
) -> Result<()> {
    info!(address = %listener.local_addr()?, "serving /metrics, /healthz, /readyz");
    axum::serve(listener, router(state))
        .with_graceful_shutdown(stop.cancelled_owned())
        .await?;
    Ok(())
}

async fn wake(State(state): State<AppState>) -> Response {
    match state.wake.as_ref().map(|w| w()) {
        Some(Ok(())) => (StatusCode::ACCEPTED, "polling Slurm now\n").into_response(),
        Some(Err(why)) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn index(State(state): State<AppState>) -> String {
    format!("slurmscale: {} /healthz /readyz\n", state.telemetry_path)
}

/// How long the scrape-time part of `/metrics` may be reused.
const DYNAMIC_TTL: std::time::Duration = std::time::Duration::from_secs(1);

fn dynamic_part(state: &AppState, page: &Page) -> Bytes {
    let mut cached = state.dynamic.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((at, text)) = cached.as_ref()
        && at.elapsed() < DYNAMIC_TTL
    {
        return text.clone();
    }
    let mut dynamic = metrics::render_ages(&page.snapshots, SystemTime::now());
    let mut buf = Vec::new();
    if TextEncoder::new()
        .encode(&state.process.gather(), &mut buf)
        .is_ok()
    {
        dynamic.push_str(&String::from_utf8_lossy(&buf));
    }
    let text = Bytes::from(dynamic);
    *cached = Some((std::time::Instant::now(), text.clone()));
    text
}

async fn metrics_handler(State(state): State<AppState>) -> Response {
    let page = state.page.borrow().clone();
    let dynamic = dynamic_part(&state, &page);
    // The cached page is shared, not copied.
    let chunks = [Ok::<_, std::io::Error>(page.text.clone()), Ok(dynamic)];
    Response::builder()
        .header(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )
        .body(Body::from_stream(stream::iter(chunks)))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

async fn readyz(State(state): State<AppState>) -> Response {
    let page = state.page.borrow().clone();
    let mut missing = Vec::new();
    if page.snapshots.is_empty() {
        missing.push("no collection has finished yet".to_string());
    }
    for snap in &page.snapshots {
        // A standby only pings; it is ready to take over once slurmrestd answered that.
        let required: &[Endpoint] = if snap.standby {
            &[Endpoint::Ping]
        } else {
            &REQUIRED
        };
        for e in required.iter().copied() {
            let h = snap.health(e);
            if !h.has_data {
                let why = h.last_error.unwrap_or("no answer yet");
                missing.push(format!("cluster {}: {e}: {why}", snap.cluster));
            }
        }
    }
    for check in &state.extra_ready {
        if let Err(why) = check() {
            missing.push(why);
        }
    }
    if missing.is_empty() {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready:\n{}\n", missing.join("\n")),
        )
            .into_response()
    }
}
