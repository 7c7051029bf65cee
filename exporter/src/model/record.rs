//! One job as a wire module reads it: the fields every API version's decoder fills, borrowed
//! from the response bytes, and what follows from them alone (held, GPUs, memory). Both the
//! job counts ([`super::jobs`]) and the rules that say where a job comes from
//! ([`super::origin`]) read it. The job table keeps the same fields with shared text
//! ([`super::job_table::OwnedJob`]): one struct, two kinds of text.

use super::JobState;
use crate::model::text::{tres_gpus, tres_mem_mib, tres_per_gpus};

/// One job: the fields every API version's decoder fills, with its text as `S`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Job<S> {
    pub id: u64,
    pub state: Option<JobState>,
    pub reason: S,
    /// `a` or, for a job pending in several partitions, `a,b`.
    pub partition: S,
    pub user: S,
    pub account: S,
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
    pub tres_per_job: S,
    pub tres_per_node: S,
    pub tres_per_task: S,
    pub tres_req: S,
    pub tres_alloc: S,
    /// GPUs summed over `gres_detail` (one entry per allocated node).
    pub gres_detail_gpus: Option<u64>,
    pub array_job_id: Option<u64>,
    pub array_task_id: Option<u64>,
    pub array_task_string: S,
    pub array_max_tasks: Option<u64>,
    pub submit_time: Option<i64>,
    /// Host list of the nodes a running job holds (`c[1-2]`).
    pub node_list: S,
    /// When a running job reaches its time limit (unix seconds); `None` without one.
    pub end_time: Option<i64>,
    /// When slurmctld expects the job to start: for a pending job the backfill scheduler's
    /// plan (or its begin time), unix seconds; `None` when unset.
    pub start_time: Option<i64>,
    /// The nodes the backfill scheduler holds for a pending job's planned start (a host list;
    /// v0.0.40 on, empty when none).
    pub scheduled_nodes: S,
    /// `--exclude`: nodes the job must not run on (a host list; empty when none).
    pub excluded_nodes: S,
    /// `--constraint`: the features the job's nodes must have ([`super::constraint`]).
    pub features: S,
    /// What says where a job comes from ([`super::origin`]).
    pub name: S,
    pub comment: S,
    pub admin_comment: S,
    pub wckey: S,
    pub mcs_label: S,
    /// The `EXTERNAL_JOB` flag (v0.0.43 on): a placeholder for work run elsewhere.
    pub external: bool,
    /// Slurm may requeue it: a batch job with `requeue` (`--requeue`, or `JobRequeue=1`, the
    /// default); absent reads as not.
    pub requeue: bool,
}

/// A job as a wire module reads it, borrowing from the response bytes.
pub type JobRecord<'a> = Job<&'a str>;

/// How a text field's values spread over jobs: a partition or user repeats across many jobs,
/// a node list or array task string is mostly the job's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Text {
    Shared,
    Own,
}

impl<S> Job<S> {
    /// The same job with each text field turned by `text`: borrowed to shared when a job is
    /// kept, back to borrowed when it is read.
    pub fn map_text<'s, T>(&'s self, mut text: impl FnMut(&'s S, Text) -> T) -> Job<T> {
        Job {
            id: self.id,
            state: self.state,
            reason: text(&self.reason, Text::Shared),
            partition: text(&self.partition, Text::Shared),
            user: text(&self.user, Text::Shared),
            account: text(&self.account, Text::Shared),
            nodes: self.nodes,
            max_nodes: self.max_nodes,
            cpus: self.cpus,
            tasks: self.tasks,
            memory_per_node_mib: self.memory_per_node_mib,
            memory_per_cpu_mib: self.memory_per_cpu_mib,
            hold: self.hold,
            whole_node: self.whole_node,
            tres_per_job: text(&self.tres_per_job, Text::Shared),
            tres_per_node: text(&self.tres_per_node, Text::Shared),
            tres_per_task: text(&self.tres_per_task, Text::Shared),
            tres_req: text(&self.tres_req, Text::Shared),
            tres_alloc: text(&self.tres_alloc, Text::Shared),
            gres_detail_gpus: self.gres_detail_gpus,
            array_job_id: self.array_job_id,
            array_task_id: self.array_task_id,
            array_task_string: text(&self.array_task_string, Text::Own),
            array_max_tasks: self.array_max_tasks,
            submit_time: self.submit_time,
            node_list: text(&self.node_list, Text::Own),
            end_time: self.end_time,
            start_time: self.start_time,
            scheduled_nodes: text(&self.scheduled_nodes, Text::Shared),
            excluded_nodes: text(&self.excluded_nodes, Text::Shared),
            features: text(&self.features, Text::Shared),
            name: text(&self.name, Text::Shared),
            comment: text(&self.comment, Text::Shared),
            admin_comment: text(&self.admin_comment, Text::Shared),
            wckey: text(&self.wckey, Text::Shared),
            mcs_label: text(&self.mcs_label, Text::Shared),
            external: self.external,
            requeue: self.requeue,
        }
    }
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
        if self.all_of_a_nodes_memory() {
            return 0;
        }
        let mib = match (self.memory_per_node_mib, self.memory_per_cpu_mib) {
            (Some(per_node), _) if per_node > 0 => per_node.saturating_mul(self.node_count()),
            (_, Some(per_cpu)) if per_cpu > 0 => {
                per_cpu.saturating_mul(self.cpus.unwrap_or(1).max(1))
            }
            _ => tres_mem_mib(self.tres_req).unwrap_or(0),
        };
        mib.saturating_mul(1024 * 1024)
    }

    /// Memory per node set to 0 (`--mem=0`, or no request where the site sets no default:
    /// Slinky's chart sets none) is all the memory of whichever node the job lands on. Its
    /// TRES then names the largest node's memory, which is no need of the job's: it fits any
    /// node and takes that node whole.
    pub(super) fn all_of_a_nodes_memory(&self) -> bool {
        self.memory_per_node_mib == Some(0) && self.memory_per_cpu_mib.unwrap_or(0) == 0
    }
}
