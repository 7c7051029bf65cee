//! REST v0.0.45 (Slurm 26.05).
//!
//! Against v0.0.44, for what we read: the controller ping drops `pinged` and `mode` and keeps
//! `responding` and `primary` (plus a `status` code), so ping has its own decoder here.
//! Partitions gain `flags` and `preempt_mode`, diag drops `parts_packed`, nodes drop `power`.
//! Jobs, nodes, partitions and diag decode with the v0.0.40 structs.

use super::{Decoded, Flag, Num, Str, decode_list, micros, wire_struct};
use crate::model::{Ping, Slurmctld};

pub use super::v0040::{
    decode_diag, decode_job_states, decode_job_table, decode_jobs, decode_nodes, decode_partitions,
};

wire_struct! {
    struct WirePing<'a> {
        hostname: Str<'a>,
        responding: Flag,
        primary: Flag,
        latency: Num,
    }
}

pub fn decode_ping(bytes: &[u8]) -> serde_json::Result<Decoded<Ping>> {
    let decoded = decode_list(bytes, "pings", |p: WirePing| {
        Some(Slurmctld {
            hostname: p.hostname.0.into_owned(),
            mode: if p.primary.0 { "primary" } else { "backup" }.to_string(),
            responding: p.responding.0,
            latency_seconds: micros(p.latency),
        })
    })?;
    let release = decoded.release.clone();
    Ok(decoded.map(|controllers| Ping {
        controllers,
        release,
    }))
}
