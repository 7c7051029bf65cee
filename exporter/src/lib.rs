//! The slurmscale exporter library.
//!
//! Data flows one way: slurmrestd answers are decoded by per-version wire modules
//! ([`slurm::wire`]) into the version-free [`model`], gathered by a per-cluster poller
//! ([`collect`]) into an immutable [`snapshot::ClusterSnapshot`], and rendered by the metric
//! families ([`metrics`]) that [`server`] serves. The autoscaler crate reads the same
//! snapshots. The exporter writes to neither Slurm nor Kubernetes; the Slurm client's two
//! commands ([`slurm::SlurmClient::post_json`] for node updates and records,
//! [`slurm::SlurmClient::get_command`] for `reconfigure/`) are there for the autoscaler.

pub mod collect;
pub mod config;
pub mod error;
pub mod histogram;
pub mod k8s;
pub mod metrics;
pub mod model;
pub mod quantity;
pub mod server;
pub mod signals;
pub mod slurm;
pub mod snapshot;
pub mod web;

pub use error::Error;
