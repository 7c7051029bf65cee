//! Pending demand of a partition: what its schedulable pending jobs need, counted the way a
//! scaler must count it — a 4-node job needs 4 nodes, an array's tasks each count, held jobs
//! and jobs waiting on dependencies or begin times do not, and a job larger than the
//! partition could ever be is reported, not chased. The exporter's demand metrics and the
//! autoscaler's policy both call [`demand`].

use std::collections::BTreeMap;

use super::{Jobs, PendingClass};

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Demand {
    /// Job-equivalents (array tasks counted) pending in the partition, by class.
    pub jobs: BTreeMap<PendingClass, u64>,
    /// Nodes, CPUs, GPUs and bytes of memory schedulable jobs that fit need, all together.
    pub nodes: u64,
    pub cpus: u64,
    pub gpus: u64,
    pub memory_bytes: u64,
    /// The largest node count one fitting schedulable job needs at once.
    pub max_job_nodes: u64,
    /// Schedulable jobs that need more nodes than the limit: they can never start here.
    pub unsatisfiable_jobs: u64,
    /// Submit time of the oldest schedulable job.
    pub oldest_submit: Option<i64>,
}

impl Demand {
    pub fn jobs(&self, class: PendingClass) -> u64 {
        self.jobs.get(&class).copied().unwrap_or(0)
    }
}

/// Demand in `partition`; jobs needing more than `max_nodes` nodes (the partition's size, or a
/// NodeSet's maximum) count as unsatisfiable instead.
pub fn demand(jobs: &Jobs, partition: &str, max_nodes: Option<u64>) -> Demand {
    let mut d = Demand::default();
    for job in jobs
        .pending
        .iter()
        .filter(|j| j.partitions.iter().any(|p| &**p == partition))
    {
        *d.jobs.entry(job.class).or_default() += job.tasks;
        if job.class != PendingClass::Schedulable || job.tasks == 0 {
            continue;
        }
        if max_nodes.is_some_and(|max| job.nodes > max) {
            d.unsatisfiable_jobs += job.tasks;
            continue;
        }
        d.nodes = d.nodes.saturating_add(job.tasks.saturating_mul(job.nodes));
        d.cpus = d.cpus.saturating_add(job.tasks.saturating_mul(job.cpus));
        d.gpus = d.gpus.saturating_add(job.tasks.saturating_mul(job.gpus));
        d.memory_bytes = d
            .memory_bytes
            .saturating_add(job.tasks.saturating_mul(job.memory_bytes));
        d.max_job_nodes = d.max_job_nodes.max(job.nodes);
        if let Some(t) = job.submit_time {
            d.oldest_submit = Some(d.oldest_submit.map_or(t, |o| o.min(t)));
        }
    }
    d
}
