//! One job as a wire module reads it: the fields every API version's decoder fills, borrowed
//! from the response bytes, and what follows from them alone (held, GPUs, memory). Both the
//! job table ([`super::jobs`]) and the rules that say where a job comes from
//! ([`super::origin`]) read it.

use super::JobState;
use crate::model::text::{tres_gpus, tres_mem_mib, tres_per_gpus};

/// One job as a wire module reads it, borrowing from the response bytes.
#[derive(Clone, Debug, Default)]
pub struct JobRecord<'a> {
    pub id: u64,
    pub state: Option<JobState>,
    pub reason: &'a str,
    /// `a` or, for a job pending in several partitions, `a,b`.
    pub partition: &'a str,
    pub user: &'a str,
    pub account: &'a str,
    /// For a pending job: the minimum node count it asks for; running: nodes it holds.
    pub nodes: Option<u64>,
    /// The most nodes it accepts (0/None when not given).
    pub max_nodes: Option<u64>,
    pub cpus: Option<u64>,
    pub tasks: Option<u64>,
    pub memory_per_node_mib: Option<u64>,
    pub memory_per_cpu_mib: Option<u64>,
    pub hold: bool,
    /// Shares its nodes with no other job (`shared: none`, which `--exclusive` sets).
    pub whole_node: bool,
    pub tres_per_job: &'a str,
    pub tres_per_node: &'a str,
    pub tres_per_task: &'a str,
    pub tres_req: &'a str,
    pub tres_alloc: &'a str,
    /// GPUs summed over `gres_detail` (one entry per allocated node).
    pub gres_detail_gpus: Option<u64>,
    pub array_job_id: Option<u64>,
    pub array_task_id: Option<u64>,
    pub array_task_string: &'a str,
    pub array_max_tasks: Option<u64>,
    pub submit_time: Option<i64>,
    /// Host list of the nodes a running job holds (`c[1-2]`).
    pub node_list: &'a str,
    /// When a running job reaches its time limit (unix seconds); `None` without one.
    pub end_time: Option<i64>,
    /// When slurmctld expects the job to start: for a pending job the backfill scheduler's
    /// plan (or its begin time), unix seconds; `None` when unset.
    pub start_time: Option<i64>,
    /// The nodes the backfill scheduler holds for a pending job's planned start (a host list;
    /// v0.0.40 on, empty when none).
    pub scheduled_nodes: &'a str,
    /// What says where a job comes from ([`super::origin`]).
    pub name: &'a str,
    pub comment: &'a str,
    pub admin_comment: &'a str,
    pub wckey: &'a str,
    pub mcs_label: &'a str,
    /// The `EXTERNAL_JOB` flag (v0.0.43 on): a placeholder for work run elsewhere.
    pub external: bool,
}

impl JobRecord<'_> {
    /// Held by its user or an admin: the hold flag (24.11+), or a `JobHeld*` reason (22.05).
    pub fn held(&self) -> bool {
        super::held(self.hold, self.reason)
    }

    pub(super) fn node_count(&self) -> u64 {
        self.nodes.filter(|n| *n > 0).unwrap_or(1)
    }

    /// GPUs a running job holds.
    pub(super) fn gpus_alloc(&self) -> u64 {
        tres_gpus(self.tres_alloc)
            .or(self.gres_detail_gpus.filter(|g| *g > 0))
            .or_else(|| self.requested_gpus())
            .unwrap_or(0)
    }

    /// GPUs a job asks for in all (per job, per node × nodes, per task × tasks).
    pub(super) fn requested_gpus(&self) -> Option<u64> {
        tres_per_gpus(self.tres_per_job)
            .or_else(|| {
                tres_per_gpus(self.tres_per_node).map(|g| g.saturating_mul(self.node_count()))
            })
            .or_else(|| {
                tres_per_gpus(self.tres_per_task)
                    .map(|g| g.saturating_mul(self.tasks.filter(|t| *t > 0).unwrap_or(1)))
            })
            .or_else(|| tres_gpus(self.tres_req))
    }

    pub(super) fn memory_bytes(&self) -> u64 {
        let mib = match (self.memory_per_node_mib, self.memory_per_cpu_mib) {
            (Some(per_node), _) if per_node > 0 => per_node.saturating_mul(self.node_count()),
            (_, Some(per_cpu)) if per_cpu > 0 => {
                per_cpu.saturating_mul(self.cpus.unwrap_or(1).max(1))
            }
            _ => tres_mem_mib(self.tres_req).unwrap_or(0),
        };
        mib.saturating_mul(1024 * 1024)
    }
}
