//! REST v0.0.40 (Slurm 23.11, 24.05, 24.11).
//!
//! Against v0.0.38: job and node states become arrays (`["IDLE","DRAIN"]`), most numbers
//! become `{set, infinite, number}`, jobs gain a `hold` flag, node memory is `free_mem` and
//! idle CPUs `alloc_idle_cpus`, partitions nest (`nodes.total`, `cpus.total`,
//! `partition.state`, `maximums.nodes`), ping says `pinged` (`responding` from v0.0.41), and
//! `meta.slurm` carries string versions. `job_resources` still has the flat shape
//! (`allocated_hosts`, `allocated_cpus`); v0.0.41 nests it, and [`JobResources`] reads both.
//! These structs serve v0.0.41-v0.0.45 too, whose differences do not touch the fields we read.

use serde::Deserialize;

use super::v0038::Statistics;
use super::{
    Decoded, EachSeed, FirstWord, Flag, GresDetailGpus, Num, Str, Words, decode_envelope,
    decode_list, decode_object, mib, wire_struct,
};
use crate::model::job_table::JobTable;
use crate::model::job_table::StateEntry;
use crate::model::jobs::{JobRecord, JobsBuilder};
use crate::model::text::{parse_gres, tres_gpus, tres_memory_bytes};
use crate::model::{Diag, JobState, Jobs, Node, NodeState, Partition, Ping, Slurmctld};

/// `job_resources` in either shape: v0.0.38/40 `{allocated_hosts, allocated_cpus,
/// allocated_cores, ...}` or v0.0.41+ `{nodes: {count, list, ...}, cpus}`. Only the counts
/// are kept; they stand in when `node_count` or `cpus` are missing.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct JobResources {
    pub nodes: Option<u64>,
    pub cpus: Option<u64>,
}

impl<'de> Deserialize<'de> for JobResources {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        wire_struct! {
            struct Nodes {
                count: Num,
            }
        }
        wire_struct! {
            struct Raw {
                allocated_hosts: Num,
                allocated_cpus: Num,
                allocated_cores: Num,
                nodes: Nodes,
                cpus: Num,
            }
        }
        let raw = Raw::deserialize(d)?;
        Ok(JobResources {
            nodes: raw
                .nodes
                .count
                .unsigned()
                .or(raw.allocated_hosts.unsigned())
                .filter(|n| *n > 0),
            cpus: raw
                .cpus
                .unsigned()
                .or(raw.allocated_cpus.unsigned().filter(|c| *c > 0))
                .or(raw.allocated_cores.unsigned())
                .filter(|c| *c > 0),
        })
    }
}

wire_struct! {
    pub(super) struct Job<'a> {
        job_id: Num,
        job_state: FirstWord<'a>,
        state_reason: Str<'a>,
        partition: Str<'a>,
        user_name: Str<'a>,
        account: Str<'a>,
        node_count: Num,
        max_nodes: Num,
        cpus: Num,
        tasks: Num,
        memory_per_node: Num,
        memory_per_cpu: Num,
        hold: Flag,
        shared: Words<'a>,
        tres_per_job: Str<'a>,
        tres_per_node: Str<'a>,
        tres_per_task: Str<'a>,
        tres_req_str: Str<'a>,
        tres_alloc_str: Str<'a>,
        gres_detail: GresDetailGpus,
        job_resources: JobResources,
        array_job_id: Num,
        array_task_id: Num,
        array_task_string: Str<'a>,
        array_max_tasks: Num,
        submit_time: Num,
        nodes: Str<'a>,
        end_time: Num,
        time_limit: Num,
        name: Str<'a>,
        comment: Str<'a>,
        admin_comment: Str<'a>,
        wckey: Str<'a>,
        mcs_label: Str<'a>,
        flags: Words<'a>,
    }
}

impl<'a> Job<'a> {
    pub(super) fn record(&'a self) -> JobRecord<'a> {
        let state = self.job_state.0.as_str();
        JobRecord {
            id: self.job_id.unsigned().unwrap_or(0),
            state: (!state.is_empty()).then(|| JobState::parse(state)),
            reason: self.state_reason.as_str(),
            partition: self.partition.as_str(),
            user: self.user_name.as_str(),
            account: self.account.as_str(),
            nodes: self
                .node_count
                .unsigned()
                .filter(|n| *n > 0)
                .or(self.job_resources.nodes),
            max_nodes: self.max_nodes.unsigned(),
            cpus: self
                .cpus
                .unsigned()
                .filter(|c| *c > 0)
                .or(self.job_resources.cpus),
            tasks: self.tasks.unsigned(),
            memory_per_node_mib: self.memory_per_node.unsigned(),
            memory_per_cpu_mib: self.memory_per_cpu.unsigned(),
            hold: self.hold.0,
            whole_node: self.shared.iter().any(|w| w.eq_ignore_ascii_case("none")),
            tres_per_job: self.tres_per_job.as_str(),
            tres_per_node: self.tres_per_node.as_str(),
            tres_per_task: self.tres_per_task.as_str(),
            tres_req: self.tres_req_str.as_str(),
            tres_alloc: self.tres_alloc_str.as_str(),
            gres_detail_gpus: self.gres_detail.0,
            array_job_id: self.array_job_id.unsigned(),
            array_task_id: self.array_task_id.unsigned(),
            array_task_string: self.array_task_string.as_str(),
            array_max_tasks: self.array_max_tasks.unsigned(),
            submit_time: self.submit_time.0,
            node_list: self.nodes.as_str(),
            // Without a time limit Slurm still fills end_time (a year out): not an end.
            end_time: self.time_limit.0.and(self.end_time.0),
            name: self.name.as_str(),
            comment: self.comment.as_str(),
            admin_comment: self.admin_comment.as_str(),
            wckey: self.wckey.as_str(),
            mcs_label: self.mcs_label.as_str(),
            external: self
                .flags
                .iter()
                .any(|f| f.eq_ignore_ascii_case("EXTERNAL_JOB")),
        }
    }
}

pub fn decode_jobs(bytes: &[u8], per_owner: bool) -> serde_json::Result<Decoded<Jobs>> {
    let mut builder = JobsBuilder::new(per_owner);
    let decoded = decode_envelope(
        bytes,
        "jobs",
        EachSeed::new(|j: Job| builder.add(j.record())),
    )?;
    Ok(decoded.map(|()| builder.finish()))
}

/// Decodes `/jobs` or `/job/{id}` into a table of records, for keeping between polls.
pub fn decode_job_table(bytes: &[u8]) -> serde_json::Result<Decoded<JobTable>> {
    let mut table = JobTable::default();
    let decoded = decode_envelope(
        bytes,
        "jobs",
        EachSeed::new(|j: Job| table.upsert(&j.record())),
    )?;
    Ok(decoded.map(|()| table))
}

wire_struct! {
    struct WireNode<'a> {
        name: Str<'a>,
        state: Words<'a>,
        partitions: Words<'a>,
        cpus: Num,
        alloc_cpus: Num,
        real_memory: Num,
        alloc_memory: Num,
        free_mem: Num,
        gres: Str<'a>,
        gres_used: Str<'a>,
        reason: Str<'a>,
        reason_set_by_user: Str<'a>,
    }
}

pub fn decode_nodes(bytes: &[u8]) -> serde_json::Result<Decoded<Vec<Node>>> {
    decode_list(bytes, "nodes", |n: WireNode| {
        let name = n.name.0.into_owned();
        (!name.is_empty()).then(|| Node {
            name,
            state: NodeState::from_words(n.state.iter()),
            partitions: n.partitions.iter().map(Into::into).collect(),
            cpus: n.cpus.unsigned().unwrap_or(0),
            alloc_cpus: n.alloc_cpus.unsigned().unwrap_or(0),
            memory_bytes: mib(n.real_memory.unsigned()).unwrap_or(0),
            alloc_memory_bytes: mib(n.alloc_memory.unsigned()).unwrap_or(0),
            free_memory_bytes: mib(n.free_mem.unsigned()),
            gres: parse_gres(n.gres.as_str()),
            gres_used: parse_gres(n.gres_used.as_str()),
            reason: n.reason.0.into_owned(),
            reason_set_by: n.reason_set_by_user.0.into_owned(),
        })
    })
}

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
