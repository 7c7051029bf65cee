//! What a way of sharing did, from the waits and run times of its jobs and pods: the
//! quantiles' inputs and the slowdowns, Slurm's alone and both sides' weighted together.

use super::SharedStats;
use crate::pods::PodRequest;
use crate::trace::{NodeShape, TraceJob};

/// Waits and bounded slowdown of the jobs.
pub(super) fn finish_jobs(
    stats: &mut SharedStats,
    jobs: &[TraceJob],
    started: impl Fn(usize) -> Option<i64>,
    stopped: i64,
    shape: &NodeShape,
) {
    let mut slowdown = 0.0;
    for (j, job) in jobs.iter().enumerate() {
        let start = started(j);
        stats.starved_jobs += usize::from(start.is_none());
        let wait = start.unwrap_or(stopped) - job.submit;
        stats.job_waits.push(wait);
        let b = bounded_slowdown(wait, job.run);
        slowdown += b;
        let share = node_share(
            shape,
            f64::from(job.cpus_per_node),
            job.memory_mib_per_node,
            f64::from(job.gpus_per_node),
        );
        let weight = share * f64::from(job.nodes) * job.run as f64;
        stats.slowdown_weighted.0 += weight * b;
        stats.slowdown_weighted.1 += weight;
    }
    stats.jobs = jobs.len();
    stats.bounded_slowdown_mean = slowdown / jobs.len().max(1) as f64;
    stats.job_waits.sort_unstable();
}

/// Pods' waits, and the slowdown of jobs and pods together (after [`finish_jobs`]).
pub(super) fn finish_pods(
    stats: &mut SharedStats,
    pods: &[PodRequest],
    started: &[Option<i64>],
    stopped: i64,
    shape: &NodeShape,
) {
    for (p, pod) in pods.iter().enumerate() {
        stats.starved_pods += usize::from(started[p].is_none());
        let wait = started[p].unwrap_or(stopped) - pod.submit;
        stats.pod_waits.push(wait);
        let weight = node_share(shape, pod.cpus, pod.memory_mib, pod.gpus) * pod.run as f64;
        stats.slowdown_weighted.0 += weight * bounded_slowdown(wait, pod.run);
        stats.slowdown_weighted.1 += weight;
    }
    stats.pods = pods.len();
    stats.pod_waits.sort_unstable();
    let (sum, weights) = stats.slowdown_weighted;
    stats.combined_slowdown_mean = if weights > 0.0 { sum / weights } else { 1.0 };
}

/// Wait plus run over run, the run at least 10 s, at least 1.
fn bounded_slowdown(wait: i64, run: u64) -> f64 {
    let run = run as f64;
    ((wait as f64 + run) / run.max(10.0)).max(1.0)
}

/// What share of a node an ask takes: its largest share of any resource the node has.
fn node_share(shape: &NodeShape, cpus: f64, memory_mib: u64, gpus: f64) -> f64 {
    let of = |n: f64, d: f64| if d > 0.0 { n / d } else { 0.0 };
    of(cpus, f64::from(shape.cpus))
        .max(of(memory_mib as f64, shape.memory_mib as f64))
        .max(of(gpus, f64::from(shape.gpus)))
        .min(1.0)
}
