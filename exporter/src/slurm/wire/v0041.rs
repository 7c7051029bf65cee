//! REST v0.0.41 (Slurm 24.05, 24.11).
//!
//! Against v0.0.40, for what we read: `job_resources` is nested (`nodes.count`, `cpus`),
//! which [`super::job`] already reads; nodes gain `gpu_spec` and
//! `res_cores_per_gpu`, partitions `select_type`, diag more backfill fields. Nothing else we
//! decode changed, so the v0.0.40 structs serve.

pub use super::v0040::{
    decode_diag, decode_job_states, decode_job_table, decode_jobs, decode_nodes, decode_partitions,
    decode_ping,
};
