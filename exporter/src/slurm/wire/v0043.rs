//! REST v0.0.43 (Slurm 25.05, 25.11).
//!
//! Against v0.0.42, for what we read: nothing. Jobs gain `licenses_allocated` and
//! `segment_size`, nodes `topology` and TLS certificate fields, partitions `topology`.
//! The v0.0.40 structs serve.

pub use super::v0040::{
    decode_diag, decode_job_states, decode_job_table, decode_jobs, decode_nodes, decode_partitions,
    decode_ping,
};
