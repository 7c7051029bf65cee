//! The bound every way of sharing is measured against: one scheduler over both queues, with
//! every run time known and no handover time.

use std::sync::Arc;

use super::stats::{finish_jobs, finish_pods};
use super::{SharedOptions, SharedRun, SharedStats, Sharing, TAIL};
use crate::cluster::{Cluster, Mode};
use crate::error::Result;
use crate::pods::PodRequest;
use crate::trace::TraceJob;

/// One scheduler over both queues: each pod a one-node job of its whole-unit share (CPUs and
/// GPUs rounded up, as Slurm allocates them), in submit order with the jobs, EASY backfill,
/// on every node, no handover.
pub(super) fn oracle(
    jobs: Arc<[TraceJob]>,
    pods: Arc<[PodRequest]>,
    opts: &SharedOptions,
    start: i64,
) -> Result<SharedRun> {
    let mut all: Vec<(TraceJob, Option<usize>)> = jobs.iter().map(|j| (j.clone(), None)).collect();
    for (i, p) in pods.iter().enumerate() {
        all.push((
            TraceJob {
                id: p.name.clone(),
                submit: p.submit,
                run: p.run.max(1),
                limit: p.run.max(1),
                nodes: 1,
                cpus_per_node: (p.cpus.ceil() as u32).clamp(1, opts.shape.cpus),
                memory_mib_per_node: if opts.shape.memory_mib == 0 {
                    0
                } else {
                    p.memory_mib
                },
                gpus_per_node: (p.gpus.ceil() as u32).min(opts.shape.gpus),
                recorded_wait: None,
            },
            Some(i),
        ));
    }
    all.sort_by_key(|(j, _)| j.submit);
    let merged: Arc<[TraceJob]> = all.iter().map(|(j, _)| j.clone()).collect();
    let mut c = Cluster::new(
        opts.shape,
        opts.nodes,
        Mode::Static,
        opts.sched,
        merged.clone(),
        start,
    );
    let mut stats = SharedStats::default();
    let mut now = start;
    let mut done_at: Option<i64> = None;
    loop {
        let stop = done_at.map_or(i64::MAX, |d| d + TAIL);
        let t = match c.next_event() {
            Some(t) if t <= stop => t,
            _ => stop.min(now + 7 * 86400),
        };
        let dt = (t - now) as f64;
        let idle = opts.nodes - c.counts.busy;
        stats.idle_node_seconds += f64::from(idle) * dt;
        stats.stranded_node_seconds += c.counts.pending_job_nodes.min(u64::from(idle)) as f64 * dt;
        now = t;
        if now >= stop {
            break;
        }
        c.advance(now);
        if done_at.is_none() && c.done() {
            done_at = Some(now);
        }
    }
    // Work done, by side: nodes × run of the jobs, a pod's share of a node × its run.
    let shape = opts.shape;
    for (job, pod) in &all {
        let seconds = job.run as f64 * f64::from(job.nodes);
        match pod {
            None => stats.slurm_node_seconds += seconds,
            Some(_) => {
                stats.kube_node_seconds +=
                    seconds * f64::from(job.cpus_per_node) / f64::from(shape.cpus)
            }
        }
    }
    let index: Vec<(usize, Option<usize>)> =
        all.iter().enumerate().map(|(k, (_, p))| (k, *p)).collect();
    let job_starts: Vec<Option<i64>> = index
        .iter()
        .filter(|(_, p)| p.is_none())
        .map(|(k, _)| c.started(*k))
        .collect();
    let mut pod_starts = vec![None; pods.len()];
    for (k, p) in &index {
        if let Some(p) = p {
            pod_starts[*p] = c.started(*k);
        }
    }
    // The merged order keeps the jobs' relative order (a stable sort by submit).
    finish_jobs(&mut stats, &jobs, |j| job_starts[j], now, &opts.shape);
    finish_pods(&mut stats, &pods, &pod_starts, now, &opts.shape);
    Ok(SharedRun {
        sharing: Sharing::Oracle,
        stats,
        timeline: Vec::new(),
        job_starts,
        pod_starts,
    })
}
