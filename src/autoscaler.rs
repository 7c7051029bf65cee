//! `slurmscale autoscaler`: pollers at a short interval, the NodeSetAutoscaler controller,
//! leader election and the HTTP server, stopped cleanly on SIGTERM or Ctrl-C (a leader
//! releases its Lease on the way out so a standby takes over at once).

use anyhow::{Context, Result};
use slurmscale_autoscaler::leader::LeaseConfig;
use slurmscale_autoscaler::{AutoscalerConfig, run as run_autoscaler};
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::cli::AutoscalerArgs;

pub async fn run(args: AutoscalerArgs) -> Result<()> {
    let (clusters, file_interval) = args.slurm.clusters()?;
    let client = args
        .kube
        .client()
        .await?
        .context("the autoscaler acts on Kubernetes: --no-kubernetes cannot be used with it")?;
    let identity = args.identity.clone().unwrap_or_else(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        format!("{}-{}", host.trim(), std::process::id())
    });
    let interval = file_interval.unwrap_or(args.interval);
    let lease = LeaseConfig {
        namespace: args.leader_election_namespace.clone(),
        name: args.leader_election_lease.clone(),
        identity: identity.clone(),
        duration: args.leader_election_duration,
        renew: (args.leader_election_duration / 5).max(std::time::Duration::from_secs(1)),
    };
    info!(%identity, ?interval, lease = %lease.name, "autoscaler starting");
    let cfg = AutoscalerConfig {
        clusters,
        interval,
        budget: args.slurm.poll_budget,
        request_max_jobs: args.slurm.request_max_jobs,
        web: args
            .web
            .web_config_file
            .as_deref()
            .map(slurmscale_exporter::web::WebConfig::load)
            .transpose()?,
        telemetry_path: args.web.telemetry_path.clone(),
        exporter_metrics: args
            .exporter_metrics
            .then(|| args.collectors.metrics(interval)),
        listen: args.listen,
        lease: Some(lease),
        identity,
        kube_timeout: args.kube_timeout,
        dry_run: args.dry_run,
        scontrol: slurmscale_autoscaler::slurm_nodes::Scontrol {
            bin: args.scontrol.clone(),
            conf: args.scontrol_conf.clone(),
        },
        ledger: args.ledger.config(),
    };
    let stop = CancellationToken::new();
    tokio::spawn(crate::shutdown_on_signal(stop.clone()));
    run_autoscaler(client, cfg, stop.clone()).await?;
    // Give the election a moment to release the Lease.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    info!("stopped");
    Ok(())
}
