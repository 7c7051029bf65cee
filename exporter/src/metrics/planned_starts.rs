//! Slurm's plan for the jobs that wait: which of a partition's schedulable pending jobs the
//! backfill scheduler has planned a start for, how soon the first starts, and the nodes it
//! holds for them meanwhile — idle nodes a job is reserved, which nothing else of Slurm's may
//! use until then (REST v0.0.40 on says which nodes; 22.05 only when).

use std::collections::BTreeSet;

use super::{MetricsOptions, Out, pending_partitions, unix_seconds};
use crate::snapshot::ClusterSnapshot;

pub fn collect(out: &mut Out, s: &ClusterSnapshot, _: &MetricsOptions) {
    let Some(jobs) = &s.jobs.data else { return };
    let now = s.collected_at.map_or(0.0, unix_seconds);
    let names = pending_partitions(s, jobs);
    let idle: BTreeSet<&str> = s
        .nodes
        .data
        .as_deref()
        .into_iter()
        .flatten()
        .filter(|n| n.usable() && !n.busy())
        .map(|n| n.name.as_str())
        .collect();
    for name in names {
        let mut planned = 0u64;
        let mut first: Option<i64> = None;
        let mut held: BTreeSet<&str> = BTreeSet::new();
        for job in jobs
            .pending
            .iter()
            .filter(|j| j.partitions.iter().any(|p| &**p == name))
        {
            let Some(plan) = &job.planned_start else {
                continue;
            };
            planned += job.tasks.max(1);
            first = Some(first.map_or(plan.start, |f| f.min(plan.start)));
            held.extend(plan.nodes.iter().map(|n| &**n));
        }
        let part = [("partition", name)];
        out.gauge(
            "slurm_partition_planned_jobs",
            "Schedulable pending jobs of the partition slurmctld's backfill scheduler has planned a start for.",
            &part,
            planned as f64,
        );
        out.gauge(
            "slurm_partition_planned_nodes",
            "Nodes slurmctld holds for the planned starts of the partition's pending jobs (REST v0.0.40 on; 0 before).",
            &part,
            held.len() as f64,
        );
        out.gauge(
            "slurm_partition_planned_idle_nodes",
            "Of slurm_partition_planned_nodes, those idle now: kept free for a planned start, running nothing until then.",
            &part,
            held.iter().filter(|n| idle.contains(*n)).count() as f64,
        );
        if let Some(start) = first {
            out.gauge(
                "slurm_partition_next_planned_start_seconds",
                "Seconds from the data's collection to the earliest planned start among the partition's pending jobs (negative: overdue); absent when none is planned.",
                &part,
                start as f64 - now,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures;

    /// The family alone on the fixture cluster (`metrics::fixtures`), line by line.
    #[test]
    fn renders_the_fixture_cluster() {
        fixtures::assert_text(
            &fixtures::render(super::collect),
            r#"
            # HELP slurm_partition_planned_jobs Schedulable pending jobs of the partition slurmctld's backfill scheduler has planned a start for.
            # TYPE slurm_partition_planned_jobs gauge
            slurm_partition_planned_jobs{cluster="fixture",partition="cpu"} 1
            slurm_partition_planned_jobs{cluster="fixture",partition="gpu"} 0
            # HELP slurm_partition_planned_nodes Nodes slurmctld holds for the planned starts of the partition's pending jobs (REST v0.0.40 on; 0 before).
            # TYPE slurm_partition_planned_nodes gauge
            slurm_partition_planned_nodes{cluster="fixture",partition="cpu"} 2
            slurm_partition_planned_nodes{cluster="fixture",partition="gpu"} 0
            # HELP slurm_partition_planned_idle_nodes Of slurm_partition_planned_nodes, those idle now: kept free for a planned start, running nothing until then.
            # TYPE slurm_partition_planned_idle_nodes gauge
            slurm_partition_planned_idle_nodes{cluster="fixture",partition="cpu"} 1
            slurm_partition_planned_idle_nodes{cluster="fixture",partition="gpu"} 0
            # HELP slurm_partition_next_planned_start_seconds Seconds from the data's collection to the earliest planned start among the partition's pending jobs (negative: overdue); absent when none is planned.
            # TYPE slurm_partition_next_planned_start_seconds gauge
            slurm_partition_next_planned_start_seconds{cluster="fixture",partition="cpu"} 600
            "#,
        );
    }
}
