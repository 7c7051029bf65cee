//! `slurmscale`: one binary, one subcommand per role. Argument parsing and process wiring,
//! plus the demo's live loop and `simulate`'s command line; the exporter and the controller
//! live in the `slurmscale-exporter` and `slurmscale-autoscaler` libraries and the simulated
//! world (the demo's cluster, the replay engine) in `slurmscale-sim`, so tests, the demo and
//! `simulate` run the same code.

mod autoscaler;
mod check;
mod cli;
mod demo;
mod exporter;
mod simulate;
mod telemetry;

use std::process::ExitCode;

use anyhow::Result;
use clap::Parser;
use slurmscale_exporter::k8s::crd;
use tokio_util::sync::CancellationToken;

use cli::{Cli, Command, CrdName};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // `{:#}` prints the cause chain on one line; no backtrace for a usage error.
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(mut cli: Cli) -> Result<()> {
    // A replay makes thousands of decisions a minute: its report is the output, not the log.
    if matches!(cli.command, Command::Simulate(_)) && cli.log.log == "info" {
        cli.log.log = "warn".into();
    }
    telemetry::init(&cli.log)?;
    match cli.command {
        Command::Crds { which } => {
            let crd = match which {
                CrdName::Nodeset => crd::nodeset()?,
                CrdName::Genericnode => crd::genericnode(),
                CrdName::Nodesetautoscaler => {
                    use kube::CustomResourceExt;
                    slurmscale_autoscaler::crd::NodeSetAutoscaler::crd()
                }
            };
            print!("{}", crd::to_yaml(&crd)?);
            Ok(())
        }
        Command::Exporter(args) => runtime()?.block_on(exporter::run(*args)),
        Command::Autoscaler(args) => runtime()?.block_on(autoscaler::run(*args)),
        Command::Check(args) => runtime()?.block_on(check::run(*args)),
        Command::Demo(args) => runtime()?.block_on(demo::run(args)),
        Command::Simulate(args) => simulate::run(*args),
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

/// Cancels `stop` on SIGTERM (what Kubernetes sends) or Ctrl-C.
async fn shutdown_on_signal(stop: CancellationToken) {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    tracing::info!("shutting down");
    stop.cancel();
}
