//! REST v0.0.42 (Slurm 24.11, 25.05).
//!
//! Against v0.0.41, for what we read: ping gains `responding` and `primary` (read by the
//! v0.0.40 decoder when present); jobs gain `priority_by_partition` and lose `show_flags`,
//! `exclusive` and `oversubscribe`. `update_time` now takes unix seconds (v0.0.40/41 reject
//! them). The v0.0.40 structs serve.

pub use super::v0040::{
    decode_diag, decode_job_states, decode_job_table, decode_jobs, decode_nodes, decode_partitions,
    decode_ping,
};
