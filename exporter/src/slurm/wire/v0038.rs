//! REST v0.0.38 (Slurm 22.05; 22.05 also serves 0.0.36/37, which we do not use).
//!
//! Plain numbers (`null` when unset, `-1` for unlimited), upper-case job states and
//! lower-case node states as single strings with flags in `state_flags`, `free_memory`,
//! `idle_cpus`, one key spelt `"min nodes per job"`, ping as `{"ping": "UP"}` and
//! `meta.Slurm` with numeric versions.

pub use super::job::{decode_job_table, decode_jobs};
pub use super::node::decode_nodes;
use super::{Decoded, Flag, List, Num, Str, decode_list, decode_object, micros, wire_struct};
use crate::model::text::{tres_gpus, tres_memory_bytes};
use crate::model::{Diag, NodeSets, Partition, Ping, RpcStat, Slurmctld};

wire_struct! {
    struct WirePartition<'a> {
        name: Str<'a>,
        state: Str<'a>,
        nodes: Str<'a>,
        total_nodes: Num,
        total_cpus: Num,
        tres: Str<'a>,
        maximum_nodes_per_job: Num,
    }
}

pub fn decode_partitions(bytes: &[u8]) -> serde_json::Result<Decoded<Vec<Partition>>> {
    decode_list(bytes, "partitions", |p: WirePartition| {
        (!p.name.0.is_empty()).then(|| Partition {
            name: p.name.as_str().into(),
            state: p.state.as_str().to_ascii_uppercase(),
            total_nodes: p.total_nodes.unsigned().unwrap_or(0),
            total_cpus: p.total_cpus.unsigned().unwrap_or(0),
            total_memory_bytes: tres_memory_bytes(p.tres.as_str()),
            total_gpus: tres_gpus(p.tres.as_str()),
            max_nodes_per_job: p.maximum_nodes_per_job.unsigned().filter(|m| *m > 0),
            node_list: p.nodes.0.into_owned(),
            never_suspends: false,
            node_sets: NodeSets::Unknown,
        })
    })
}

wire_struct! {
    struct WirePing<'a> {
        hostname: Str<'a>,
        ping: Str<'a>,
        mode: Str<'a>,
    }
}

pub fn decode_ping(bytes: &[u8]) -> serde_json::Result<Decoded<Ping>> {
    let decoded = decode_list(bytes, "pings", |p: WirePing| {
        Some(Slurmctld {
            hostname: p.hostname.0.into_owned(),
            mode: p.mode.0.into_owned(),
            responding: p.ping.as_str().eq_ignore_ascii_case("UP"),
            latency_seconds: None,
        })
    })?;
    let release = decoded.release.clone();
    Ok(decoded.map(|controllers| Ping {
        controllers,
        release,
    }))
}

wire_struct! {
    /// `/diag` `statistics`: the same names in v0.0.38 and v0.0.40+, only the number shapes
    /// differ, which [`Num`] absorbs; so this struct serves every version.
    pub(super) struct Statistics<'a> {
        server_thread_count: Num,
        agent_queue_size: Num,
        agent_count: Num,
        agent_thread_count: Num,
        dbd_agent_queue_size: Num,
        jobs_submitted: Num,
        jobs_started: Num,
        jobs_completed: Num,
        jobs_canceled: Num,
        jobs_failed: Num,
        jobs_pending: Num,
        jobs_running: Num,
        job_states_ts: Num,
        schedule_cycle_total: Num,
        schedule_cycle_last: Num,
        schedule_cycle_max: Num,
        schedule_cycle_mean: Num,
        schedule_cycle_mean_depth: Num,
        schedule_cycle_per_minute: Num,
        schedule_queue_length: Num,
        bf_backfilled_jobs: Num,
        bf_backfilled_het_jobs: Num,
        bf_cycle_counter: Num,
        bf_cycle_last: Num,
        bf_cycle_max: Num,
        bf_cycle_mean: Num,
        bf_depth_mean: Num,
        bf_queue_len: Num,
        bf_last_backfilled_jobs: Num,
        bf_active: Flag,
        bf_when_last_cycle: Num,
        rpcs_by_message_type: List<RpcType<'a>>,
        rpcs_by_user: List<RpcUser<'a>>,
        req_time_start: Num,
    }
}

wire_struct! {
    pub(super) struct RpcType<'a> {
        message_type: Str<'a>,
        count: Num,
        total_time: Num,
    }
}

wire_struct! {
    pub(super) struct RpcUser<'a> {
        user: Str<'a>,
        count: Num,
        total_time: Num,
    }
}

impl From<Statistics<'_>> for Diag {
    fn from(s: Statistics<'_>) -> Self {
        let rpc = |name: Str, count: Num, total: Num| RpcStat {
            name: name.0.into_owned(),
            count: count.unsigned().unwrap_or(0),
            total_seconds: micros(total).unwrap_or(0.0),
        };
        Diag {
            server_threads: s.server_thread_count.unsigned(),
            agent_queue_size: s.agent_queue_size.unsigned(),
            agent_count: s.agent_count.unsigned(),
            agent_threads: s.agent_thread_count.unsigned(),
            dbd_agent_queue_size: s.dbd_agent_queue_size.unsigned(),
            jobs_submitted: s.jobs_submitted.unsigned(),
            jobs_started: s.jobs_started.unsigned(),
            jobs_completed: s.jobs_completed.unsigned(),
            jobs_canceled: s.jobs_canceled.unsigned(),
            jobs_failed: s.jobs_failed.unsigned(),
            jobs_pending: s.jobs_pending.unsigned(),
            jobs_running: s.jobs_running.unsigned(),
            jobs_counted_at: s.job_states_ts.0.filter(|t| *t > 0),
            schedule_cycles: s.schedule_cycle_total.unsigned(),
            schedule_cycle_last_seconds: micros(s.schedule_cycle_last),
            schedule_cycle_max_seconds: micros(s.schedule_cycle_max),
            schedule_cycle_mean_seconds: micros(s.schedule_cycle_mean),
            schedule_cycle_mean_depth: s.schedule_cycle_mean_depth.unsigned(),
            schedule_cycles_per_minute: s.schedule_cycle_per_minute.unsigned(),
            schedule_queue_length: s.schedule_queue_length.unsigned(),
            bf_backfilled_jobs: s.bf_backfilled_jobs.unsigned(),
            bf_backfilled_het_jobs: s.bf_backfilled_het_jobs.unsigned(),
            bf_cycles: s.bf_cycle_counter.unsigned(),
            bf_cycle_last_seconds: micros(s.bf_cycle_last),
            bf_cycle_max_seconds: micros(s.bf_cycle_max),
            bf_cycle_mean_seconds: micros(s.bf_cycle_mean),
            bf_depth_mean: s.bf_depth_mean.unsigned(),
            bf_queue_length: s.bf_queue_len.unsigned(),
            bf_last_backfilled_jobs: s.bf_last_backfilled_jobs.unsigned(),
            bf_active: Some(s.bf_active.0),
            bf_last_cycle_timestamp: s.bf_when_last_cycle.0.filter(|t| *t > 0),
            stats_since: s.req_time_start.0.filter(|t| *t > 0),
            rpcs: s
                .rpcs_by_message_type
                .0
                .into_iter()
                .filter(|r| !r.message_type.0.is_empty())
                .map(|r| rpc(r.message_type, r.count, r.total_time))
                .collect(),
            rpcs_by_user: s
                .rpcs_by_user
                .0
                .into_iter()
                .filter(|r| !r.user.0.is_empty())
                .map(|r| rpc(r.user, r.count, r.total_time))
                .collect(),
        }
    }
}

pub fn decode_diag(bytes: &[u8]) -> serde_json::Result<Decoded<Diag>> {
    Ok(decode_object::<Statistics>(bytes, "statistics")?.map(Diag::from))
}
