//! Pending demand per partition: what schedulable pending jobs need now, the number KEDA or
//! the autoscaler scales on. Unlike job counts, demand counts every array task that may
//! start and every partition a job was submitted to; held and waiting jobs are counted by
//! class but add no demand. See [`crate::model::demand`].

use std::time::SystemTime;

use super::{MetricsOptions, Out, Series, number, pending_partitions};
use crate::model::PendingClass;
use crate::model::demand::{Demand, Room, Shape, Take, demand, demand_of};
use crate::model::origin::Origin;
use crate::snapshot::ClusterSnapshot;

/// What one partition's schedulable pending jobs need (the classes' job counts apart).
const DEMAND: &[Series<Demand>] = &[
    Series::gauge(
        "slurm_partition_demand_nodes",
        "Nodes beyond the busy ones the partition's schedulable pending jobs need, packed: idle nodes they would take plus new nodes of the partition's shape (64 one-CPU jobs on 32-CPU nodes: 2).",
        |d| number(d.nodes),
    ),
    Series::gauge(
        "slurm_partition_demand_job_nodes",
        "Nodes the partition's schedulable pending jobs ask for, one per job node and unpacked (a 3-node job counts 3, 64 one-CPU jobs count 64).",
        |d| number(d.job_nodes),
    ),
    Series::gauge(
        "slurm_partition_demand_cpus",
        "CPUs the partition's schedulable pending jobs need.",
        |d| number(d.cpus),
    ),
    Series::gauge(
        "slurm_partition_demand_gpus",
        "GPUs the partition's schedulable pending jobs need.",
        |d| number(d.gpus),
    ),
    Series::gauge(
        "slurm_partition_demand_memory_bytes",
        "Memory the partition's schedulable pending jobs need.",
        |d| number(d.memory_bytes),
    ),
    Series::gauge(
        "slurm_partition_demand_max_job_nodes",
        "Nodes the largest schedulable pending job of the partition needs at once.",
        |d| number(d.max_job_nodes),
    ),
    Series::gauge(
        "slurm_partition_demand_unsatisfiable_jobs",
        "Schedulable pending jobs asking for more nodes than the partition can ever give (not counted as demand).",
        |d| number(d.unsatisfiable_jobs),
    ),
];

/// What one origin's schedulable pending jobs of a partition need, alone.
const ORIGIN_DEMAND: &[Series<Demand>] = &[
    Series::gauge(
        "slurm_partition_origin_demand_jobs",
        "Schedulable pending job-equivalents of the partition by origin: batch, or kubernetes (placeholders pods are scheduled through, e.g. Slinky's slurm-bridge).",
        |d| number(d.jobs(PendingClass::Schedulable)),
    ),
    Series::gauge(
        "slurm_partition_origin_demand_nodes",
        "Nodes the partition's schedulable pending jobs of one origin would need alone, packed as slurm_partition_demand_nodes.",
        |d| number(d.nodes),
    ),
    Series::gauge(
        "slurm_partition_origin_demand_cpus",
        "CPUs the partition's schedulable pending jobs of one origin need.",
        |d| number(d.cpus),
    ),
    Series::gauge(
        "slurm_partition_origin_demand_gpus",
        "GPUs the partition's schedulable pending jobs of one origin need.",
        |d| number(d.gpus),
    ),
];

pub fn collect(out: &mut Out, s: &ClusterSnapshot, _: &MetricsOptions) {
    let Some(jobs) = &s.jobs.data else { return };
    let partitions = s
        .partitions
        .data
        .as_deref()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let names = pending_partitions(s, jobs);
    let now = s.collected_at.unwrap_or_else(SystemTime::now);
    let now = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);

    for name in names {
        let p = partitions.iter().find(|p| &*p.name == name);
        let limit = p.map(|p| {
            p.max_nodes_per_job
                .map_or(p.total_nodes, |m| m.min(p.total_nodes))
        });
        let room = p
            .zip(s.nodes.data.as_deref())
            .map(|(p, nodes)| Room::new(&[name], nodes, Shape::of(p, nodes)));
        let d = demand(jobs, name, limit.filter(|l| *l > 0), room.as_ref());
        let part = [("partition", name)];
        for class in PendingClass::ALL {
            out.gauge(
                "slurm_partition_demand_jobs",
                "Pending job-equivalents in the partition (array tasks counted) by class: schedulable, held, waiting (dependency, begin time, limits), throttled (array tasks beyond the array's %N throttle).",
                &[("partition", name), ("class", class.as_str())],
                d.jobs(class) as f64,
            );
        }
        out.series(DEMAND, &d, &part);
        if let Some(t) = d.oldest_submit {
            out.gauge(
                "slurm_partition_demand_oldest_job_age_seconds",
                "Age of the oldest schedulable pending job of the partition when the data was collected.",
                &part,
                (now - t).max(0) as f64,
            );
        }
        // By origin, in families of their own: the totals above keep their meaning (and
        // one series per partition) for the queries, dashboards and KEDA triggers on them.
        for origin in Origin::ALL {
            let d = demand_of(
                jobs,
                &[name],
                limit.filter(|l| *l > 0),
                room.as_ref(),
                &|j| {
                    if j.origin == origin {
                        Take::Yes
                    } else {
                        Take::Other
                    }
                },
            );
            let labels = [("partition", name), ("origin", origin.as_str())];
            out.series(ORIGIN_DEMAND, &d, &labels);
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
            # HELP slurm_partition_demand_jobs Pending job-equivalents in the partition (array tasks counted) by class: schedulable, held, waiting (dependency, begin time, limits), throttled (array tasks beyond the array's %N throttle).
            # TYPE slurm_partition_demand_jobs gauge
            slurm_partition_demand_jobs{cluster="fixture",partition="cpu",class="schedulable"} 1
            slurm_partition_demand_jobs{cluster="fixture",partition="cpu",class="held"} 1
            slurm_partition_demand_jobs{cluster="fixture",partition="cpu",class="waiting"} 0
            slurm_partition_demand_jobs{cluster="fixture",partition="cpu",class="throttled"} 0
            slurm_partition_demand_jobs{cluster="fixture",partition="gpu",class="schedulable"} 3
            slurm_partition_demand_jobs{cluster="fixture",partition="gpu",class="held"} 0
            slurm_partition_demand_jobs{cluster="fixture",partition="gpu",class="waiting"} 0
            slurm_partition_demand_jobs{cluster="fixture",partition="gpu",class="throttled"} 0
            # HELP slurm_partition_demand_nodes Nodes beyond the busy ones the partition's schedulable pending jobs need, packed: idle nodes they would take plus new nodes of the partition's shape (64 one-CPU jobs on 32-CPU nodes: 2).
            # TYPE slurm_partition_demand_nodes gauge
            slurm_partition_demand_nodes{cluster="fixture",partition="cpu"} 2
            slurm_partition_demand_nodes{cluster="fixture",partition="gpu"} 1
            # HELP slurm_partition_demand_job_nodes Nodes the partition's schedulable pending jobs ask for, one per job node and unpacked (a 3-node job counts 3, 64 one-CPU jobs count 64).
            # TYPE slurm_partition_demand_job_nodes gauge
            slurm_partition_demand_job_nodes{cluster="fixture",partition="cpu"} 2
            slurm_partition_demand_job_nodes{cluster="fixture",partition="gpu"} 3
            # HELP slurm_partition_demand_cpus CPUs the partition's schedulable pending jobs need.
            # TYPE slurm_partition_demand_cpus gauge
            slurm_partition_demand_cpus{cluster="fixture",partition="cpu"} 16
            slurm_partition_demand_cpus{cluster="fixture",partition="gpu"} 12
            # HELP slurm_partition_demand_gpus GPUs the partition's schedulable pending jobs need.
            # TYPE slurm_partition_demand_gpus gauge
            slurm_partition_demand_gpus{cluster="fixture",partition="cpu"} 0
            slurm_partition_demand_gpus{cluster="fixture",partition="gpu"} 3
            # HELP slurm_partition_demand_memory_bytes Memory the partition's schedulable pending jobs need.
            # TYPE slurm_partition_demand_memory_bytes gauge
            slurm_partition_demand_memory_bytes{cluster="fixture",partition="cpu"} 8388608000
            slurm_partition_demand_memory_bytes{cluster="fixture",partition="gpu"} 6291456000
            # HELP slurm_partition_demand_max_job_nodes Nodes the largest schedulable pending job of the partition needs at once.
            # TYPE slurm_partition_demand_max_job_nodes gauge
            slurm_partition_demand_max_job_nodes{cluster="fixture",partition="cpu"} 2
            slurm_partition_demand_max_job_nodes{cluster="fixture",partition="gpu"} 1
            # HELP slurm_partition_demand_unsatisfiable_jobs Schedulable pending jobs asking for more nodes than the partition can ever give (not counted as demand).
            # TYPE slurm_partition_demand_unsatisfiable_jobs gauge
            slurm_partition_demand_unsatisfiable_jobs{cluster="fixture",partition="cpu"} 0
            slurm_partition_demand_unsatisfiable_jobs{cluster="fixture",partition="gpu"} 0
            # HELP slurm_partition_demand_oldest_job_age_seconds Age of the oldest schedulable pending job of the partition when the data was collected.
            # TYPE slurm_partition_demand_oldest_job_age_seconds gauge
            slurm_partition_demand_oldest_job_age_seconds{cluster="fixture",partition="cpu"} 600
            slurm_partition_demand_oldest_job_age_seconds{cluster="fixture",partition="gpu"} 200
            # HELP slurm_partition_origin_demand_jobs Schedulable pending job-equivalents of the partition by origin: batch, or kubernetes (placeholders pods are scheduled through, e.g. Slinky's slurm-bridge).
            # TYPE slurm_partition_origin_demand_jobs gauge
            slurm_partition_origin_demand_jobs{cluster="fixture",partition="cpu",origin="batch"} 1
            slurm_partition_origin_demand_jobs{cluster="fixture",partition="cpu",origin="kubernetes"} 0
            slurm_partition_origin_demand_jobs{cluster="fixture",partition="gpu",origin="batch"} 3
            slurm_partition_origin_demand_jobs{cluster="fixture",partition="gpu",origin="kubernetes"} 0
            # HELP slurm_partition_origin_demand_nodes Nodes the partition's schedulable pending jobs of one origin would need alone, packed as slurm_partition_demand_nodes.
            # TYPE slurm_partition_origin_demand_nodes gauge
            slurm_partition_origin_demand_nodes{cluster="fixture",partition="cpu",origin="batch"} 2
            slurm_partition_origin_demand_nodes{cluster="fixture",partition="cpu",origin="kubernetes"} 0
            slurm_partition_origin_demand_nodes{cluster="fixture",partition="gpu",origin="batch"} 1
            slurm_partition_origin_demand_nodes{cluster="fixture",partition="gpu",origin="kubernetes"} 0
            # HELP slurm_partition_origin_demand_cpus CPUs the partition's schedulable pending jobs of one origin need.
            # TYPE slurm_partition_origin_demand_cpus gauge
            slurm_partition_origin_demand_cpus{cluster="fixture",partition="cpu",origin="batch"} 16
            slurm_partition_origin_demand_cpus{cluster="fixture",partition="cpu",origin="kubernetes"} 0
            slurm_partition_origin_demand_cpus{cluster="fixture",partition="gpu",origin="batch"} 12
            slurm_partition_origin_demand_cpus{cluster="fixture",partition="gpu",origin="kubernetes"} 0
            # HELP slurm_partition_origin_demand_gpus GPUs the partition's schedulable pending jobs of one origin need.
            # TYPE slurm_partition_origin_demand_gpus gauge
            slurm_partition_origin_demand_gpus{cluster="fixture",partition="cpu",origin="batch"} 0
            slurm_partition_origin_demand_gpus{cluster="fixture",partition="cpu",origin="kubernetes"} 0
            slurm_partition_origin_demand_gpus{cluster="fixture",partition="gpu",origin="batch"} 3
            slurm_partition_origin_demand_gpus{cluster="fixture",partition="gpu",origin="kubernetes"} 0
            
            "#,
        );
    }
}
