//! The slurmscale exporter library.
//!
//! Data flows one way: Slurm (slurmrestd) and Kubernetes are read into an immutable,
//! version-free snapshot; metric families render from that snapshot, and the autoscaler
//! crate decides from the same snapshot. This crate holds everything up to and including
//! the metrics; nothing in it writes to Slurm or Kubernetes.

pub mod error;
pub mod k8s;

pub use error::Error;
