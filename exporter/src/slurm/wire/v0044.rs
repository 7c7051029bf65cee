//! REST v0.0.44 (Slurm 25.11, 26.05).
//!
//! Against v0.0.43, for what we read: nothing. Jobs gain `step_id` and `submit_line`; a
//! `/resources/{job_id}` endpoint appears. The v0.0.40 structs serve.

pub use super::v0040::{
    decode_diag, decode_job_states, decode_job_table, decode_jobs, decode_nodes, decode_partitions,
    decode_ping,
};
