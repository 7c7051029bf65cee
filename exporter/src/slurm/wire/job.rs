//! A job as every API version sends it, read with one struct: the fields that differ in
//! shape between versions are read by lenient types that take every shape (a state as a
//! string or an array, numbers plain or `{set, infinite, number}`, `shared` as a string or a
//! list, `job_resources` flat or nested), and what a version lacks reads as absent (22.05's
//! hold flag: its held jobs are told by priority 0 and a `JobHeld*` reason). The wire
//! modules of each version re-export [`decode_jobs`] and [`decode_job_table`].

use serde::Deserialize;

use super::{
    Decoded, EachSeed, FirstWord, Flag, GresDetailGpus, Num, Str, Words, decode_envelope,
    wire_struct,
};
use crate::model::job_table::JobTable;
use crate::model::jobs::{JobRecord, JobsBuilder};
use crate::model::{JobState, Jobs};

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
    struct Job<'a> {
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
        priority: Num,
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
        start_time: Num,
        scheduled_nodes: Str<'a>,
        excluded_nodes: Str<'a>,
        features: Str<'a>,
        name: Str<'a>,
        comment: Str<'a>,
        admin_comment: Str<'a>,
        wckey: Str<'a>,
        mcs_label: Str<'a>,
        flags: Words<'a>,
        requeue: Flag,
        batch_flag: Flag,
    }
}

impl<'a> Job<'a> {
    fn record(&'a self) -> JobRecord<'a> {
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
            // 22.05 has no hold flag: a held job there has priority 0 and a JobHeld* reason.
            hold: self.hold.0
                || (self.priority.0 == Some(0)
                    && crate::model::held(false, self.state_reason.as_str())),
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
            start_time: self.start_time.0.filter(|t| *t > 0),
            scheduled_nodes: self.scheduled_nodes.as_str(),
            excluded_nodes: self.excluded_nodes.as_str(),
            features: self.features.as_str(),
            name: self.name.as_str(),
            comment: self.comment.as_str(),
            admin_comment: self.admin_comment.as_str(),
            wckey: self.wckey.as_str(),
            mcs_label: self.mcs_label.as_str(),
            external: self
                .flags
                .iter()
                .any(|f| f.eq_ignore_ascii_case("EXTERNAL_JOB")),
            // slurmctld requeues batch jobs only (an `srun` job is killed instead).
            requeue: self.requeue.0 && self.batch_flag.0,
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
