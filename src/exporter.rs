//! `slurmscale exporter`: one poller per Slurm cluster, a renderer, and the HTTP server, all
//! stopped cleanly on SIGTERM or Ctrl-C.

use std::sync::Arc;

use anyhow::Result;
use slurmscale_exporter::collect::{CollectorOptions, Poller};
use slurmscale_exporter::metrics::MetricsOptions;
use slurmscale_exporter::server::{self, AppState};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::cli::ExporterArgs;

pub async fn run(args: ExporterArgs) -> Result<()> {
    let (clusters, file_interval) = args.slurm.clusters()?;
    let opts = CollectorOptions {
        interval: file_interval.unwrap_or(args.interval),
        per_owner: args.per_user_metrics,
        diag: true,
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
    let page = server::spawn_renderer(
        receivers,
        changed,
        MetricsOptions {
            per_owner: args.per_user_metrics,
        },
        Vec::new(),
        stop.clone(),
    );
    tokio::spawn(crate::shutdown_on_signal(stop.clone()));
    server::serve(args.listen, AppState::new(page), stop).await?;
    info!("stopped");
    Ok(())
}
