//! `slurmscale exporter`: one poller per Slurm cluster, the Kubernetes watches (unless
//! --no-kubernetes), a renderer, and the HTTP server, all stopped cleanly on SIGTERM or Ctrl-C.

use std::sync::Arc;

use anyhow::Result;
use slurmscale_exporter::collect::{CollectorOptions, Poller};
use slurmscale_exporter::k8s::watch::KubeSource;
use slurmscale_exporter::server::{self, AppState};
use slurmscale_exporter::web::WebConfig;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::cli::ExporterArgs;

pub async fn run(args: ExporterArgs) -> Result<()> {
    let web = args
        .web
        .web_config_file
        .as_deref()
        .map(WebConfig::load)
        .transpose()?;
    let (clusters, file_interval) = args.slurm.clusters()?;
    let opts = CollectorOptions {
        interval: file_interval.unwrap_or(args.interval),
        per_owner: args.collectors.per_user_metrics,
        budget: args.slurm.poll_budget,
        request_max_jobs: args.slurm.request_max_jobs,
        ..CollectorOptions::default()
    };
    let stop = CancellationToken::new();
    let changed = Arc::new(Notify::new());
    let mut receivers = Vec::new();
    for cluster in &clusters {
        let (poller, rx) = Poller::new(cluster, opts.clone(), changed.clone())?;
        info!(cluster = %cluster.name, url = %cluster.url, interval = ?opts.interval, "polling slurmrestd");
        tokio::spawn(poller.run(stop.clone()));
        receivers.push(rx);
    }
    let kube = match args.kube.client().await? {
        Some(client) => {
            info!("watching Kubernetes: NodeSets, GenericNodes, Nodes");
            Some(KubeSource::start(
                client,
                args.ledger.config(),
                changed.clone(),
                stop.clone(),
            ))
        }
        None => None,
    };
    let metrics = args.collectors.metrics(opts.interval);
    let page = server::spawn_renderer(receivers, kube.clone(), changed, metrics, stop.clone());
    let mut state = AppState::new(page);
    state.telemetry_path = args.web.telemetry_path.clone();
    if let Some(kube) = kube {
        state.extra_ready.push(Arc::new(move || kube.ready()));
    }
    tokio::spawn(crate::shutdown_on_signal(stop.clone()));
    server::serve_with(args.listen, state, stop, web.as_ref()).await?;
    info!("stopped");
    Ok(())
}
