//! REST v0.0.40 (Slurm 23.11, 24.05, 24.11).
//!
//! Against v0.0.38: job and node states become arrays (`["IDLE","DRAIN"]`), most numbers
//! become `{set, infinite, number}`, jobs gain a `hold` flag, node memory is `free_mem` and
//! idle CPUs `alloc_idle_cpus`, partitions nest (`nodes.total`, `cpus.total`,
//! `partition.state`, `maximums.nodes`), ping says `pinged` (`responding` from v0.0.41), and
//! `meta.slurm` carries string versions. `job_resources` still has the flat shape
//! (`allocated_hosts`, `allocated_cpus`); v0.0.41 nests it, and [`super::job`] reads both (jobs
//! and nodes decode with one struct each for every version: [`super::job`], [`super::node`]).
//! These structs serve v0.0.41-v0.0.45 too, whose differences do not touch the fields we read.

pub use super::job::{decode_job_table, decode_jobs};
pub use super::node::decode_nodes;
use super::v0038::Statistics;
use super::{
    Decoded, EachSeed, Flag, Num, Str, Words, decode_envelope, decode_list, decode_object,
    wire_struct,
};
use crate::model::job_table::StateEntry;
use crate::model::text::{tres_gpus, tres_memory_bytes};
use crate::model::{Diag, JobState, NodeSets, Partition, Ping, Slurmctld};

wire_struct! {
    struct PartitionNodes<'a> {
        configured: Str<'a>,
        total: Num,
    }
}

wire_struct! {
    struct Total {
        total: Num,
    }
}

wire_struct! {
    struct PartitionState<'a> {
        state: Words<'a>,
    }
}

wire_struct! {
    struct Maximums {
        nodes: Num,
    }
}

wire_struct! {
    struct PartitionTres<'a> {
        configured: Str<'a>,
    }
}

wire_struct! {
    /// A `{set, infinite, number}` whose "infinite" matters (a [`Num`] reads it as unset).
    struct NoVal {
        infinite: Flag,
    }
}

wire_struct! {
    struct WirePartition<'a> {
        name: Str<'a>,
        nodes: PartitionNodes<'a>,
        cpus: Total,
        tres: PartitionTres<'a>,
        partition: PartitionState<'a>,
        maximums: Maximums,
        suspend_time: NoVal,
        node_sets: Str<'a>,
    }
}

pub fn decode_partitions(bytes: &[u8]) -> serde_json::Result<Decoded<Vec<Partition>>> {
    decode_list(bytes, "partitions", |p: WirePartition| {
        (!p.name.0.is_empty()).then(|| Partition {
            name: p.name.as_str().into(),
            state: p.partition.state.first().to_ascii_uppercase(),
            total_nodes: p.nodes.total.unsigned().unwrap_or(0),
            total_cpus: p.cpus.total.unsigned().unwrap_or(0),
            total_memory_bytes: tres_memory_bytes(p.tres.configured.as_str()),
            total_gpus: tres_gpus(p.tres.configured.as_str()),
            max_nodes_per_job: p.maximums.nodes.unsigned().filter(|m| *m > 0),
            node_list: p.nodes.configured.0.into_owned(),
            never_suspends: p.suspend_time.infinite.0,
            node_sets: NodeSets::parse(p.node_sets.as_str()),
        })
    })
}

wire_struct! {
    struct WirePing<'a> {
        hostname: Str<'a>,
        pinged: Str<'a>,
        /// v0.0.42+ (v0.0.40/41 only have `pinged`).
        responding: Option<Flag>,
        mode: Str<'a>,
        /// Microseconds.
        latency: Num,
    }
}

pub fn decode_ping(bytes: &[u8]) -> serde_json::Result<Decoded<Ping>> {
    let decoded = decode_list(bytes, "pings", |p: WirePing| {
        // 24.11 answers a rejected token with `pinged: DOWN, responding: false`: both count.
        let up = p.pinged.as_str().eq_ignore_ascii_case("UP");
        Some(Slurmctld {
            hostname: p.hostname.0.into_owned(),
            mode: p.mode.0.into_owned(),
            responding: p.responding.map_or(up, |r| r.0 && up),
            latency_seconds: super::micros(p.latency),
        })
    })?;
    let release = decoded.release.clone();
    Ok(decoded.map(|controllers| Ping {
        controllers,
        release,
    }))
}

pub fn decode_diag(bytes: &[u8]) -> serde_json::Result<Decoded<Diag>> {
    Ok(decode_object::<Statistics>(bytes, "statistics")?.map(Diag::from))
}

wire_struct! {
    struct JobStateEntry<'a> {
        job_id: Str<'a>,
        state: Words<'a>,
    }
}

/// `/jobs/state/`: every job's id and state, a few dozen bytes each (a full `/jobs` is
/// ~8 KB a job). `job_id` is `<id>` or `<id>_<task>`: pending tasks of an unsplit array come
/// one by one as `<array id>_<task>`, and a split-off task as `<array id>_<task>` on v0.0.40
/// but `<its own id>_<task>` on v0.0.41/42 ([`StateEntry`] keeps both parts).
pub fn decode_job_states(bytes: &[u8]) -> serde_json::Result<Decoded<Vec<StateEntry>>> {
    let mut out: Vec<StateEntry> = Vec::new();
    let decoded = decode_envelope(
        bytes,
        "jobs",
        EachSeed::new(|j: JobStateEntry| {
            let id = j.job_id.as_str().trim();
            let (id, task) = match id.split_once('_') {
                Some((id, task)) => (id, task.parse::<u64>().ok()),
                None => (id, None),
            };
            if let Ok(id) = id.parse::<u64>() {
                out.push(StateEntry {
                    id,
                    task,
                    state: JobState::parse(j.state.first()),
                });
            }
        }),
    )?;
    Ok(decoded.map(|()| out))
}
