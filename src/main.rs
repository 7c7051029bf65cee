//! `slurmscale`: one binary, one subcommand per role. Argument parsing and process wiring
//! only; everything else lives in the `slurmscale-exporter` and `slurmscale-autoscaler`
//! libraries so tests and the demo run the same code.

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "slurmscale",
    version,
    about = "Prometheus exporter and autoscaler for Slurm beside Kubernetes"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the CustomResourceDefinitions slurmscale's types describe, as YAML.
    Crds {
        /// Which CRD: the NodeSet and GenericNode CRDs are the ones our tests serve in place
        /// of the operators' own.
        #[arg(value_enum)]
        which: CrdName,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum CrdName {
    Nodeset,
    Genericnode,
}

fn main() -> Result<()> {
    use slurmscale_exporter::k8s::crd;
    match Cli::parse().command {
        Command::Crds { which } => {
            let crd = match which {
                CrdName::Nodeset => crd::nodeset()?,
                CrdName::Genericnode => crd::genericnode(),
            };
            print!("{}", crd::to_yaml(&crd)?);
        }
    }
    Ok(())
}
