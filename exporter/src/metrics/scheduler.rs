//! The scheduler as `/diag` (sdiag) reports it. Slurm counts in microseconds and resets its
//! counters at midnight and on `sdiag --reset`; here durations are seconds and monotonic
//! counts are counters (Prometheus handles the resets), levels are gauges.

use super::{MetricsOptions, Out};
use crate::snapshot::ClusterSnapshot;

pub fn collect(out: &mut Out, s: &ClusterSnapshot, opts: &MetricsOptions) {
    let Some(d) = &s.diag.data else { return };
    let mut g = |name: &'static str, help: &'static str, v: Option<f64>| {
        if let Some(v) = v {
            out.gauge(name, help, &[], v);
        }
    };
    let f = |v: Option<u64>| v.map(|v| v as f64);
    g(
        "slurm_scheduler_threads",
        "slurmctld server threads.",
        f(d.server_threads),
    );
    g(
        "slurm_scheduler_agent_queue_size",
        "RPCs queued for slurmctld's agents.",
        f(d.agent_queue_size),
    );
    g(
        "slurm_scheduler_agents",
        "slurmctld agents running.",
        f(d.agent_count),
    );
    g(
        "slurm_scheduler_agent_threads",
        "slurmctld agent threads.",
        f(d.agent_threads),
    );
    g(
        "slurm_scheduler_dbd_queue_size",
        "Messages queued for slurmdbd.",
        f(d.dbd_agent_queue_size),
    );
    g(
        "slurm_scheduler_cycle_last_seconds",
        "Duration of the main scheduler's last cycle.",
        d.schedule_cycle_last_seconds,
    );
    g(
        "slurm_scheduler_cycle_max_seconds",
        "Longest main scheduler cycle since the last reset.",
        d.schedule_cycle_max_seconds,
    );
    g(
        "slurm_scheduler_cycle_mean_seconds",
        "Mean main scheduler cycle since the last reset.",
        d.schedule_cycle_mean_seconds,
    );
    g(
        "slurm_scheduler_cycle_mean_depth",
        "Mean jobs examined per main scheduler cycle.",
        f(d.schedule_cycle_mean_depth),
    );
    g(
        "slurm_scheduler_cycles_per_minute",
        "Main scheduler cycles per minute.",
        f(d.schedule_cycles_per_minute),
    );
    g(
        "slurm_scheduler_queue_length",
        "Jobs in the main scheduler's queue.",
        f(d.schedule_queue_length),
    );
    g(
        "slurm_scheduler_backfill_cycle_last_seconds",
        "Duration of the backfill scheduler's last cycle.",
        d.bf_cycle_last_seconds,
    );
    g(
        "slurm_scheduler_backfill_cycle_max_seconds",
        "Longest backfill cycle since the last reset.",
        d.bf_cycle_max_seconds,
    );
    g(
        "slurm_scheduler_backfill_cycle_mean_seconds",
        "Mean backfill cycle since the last reset.",
        d.bf_cycle_mean_seconds,
    );
    g(
        "slurm_scheduler_backfill_depth_mean",
        "Mean jobs examined per backfill cycle.",
        f(d.bf_depth_mean),
    );
    g(
        "slurm_scheduler_backfill_queue_length",
        "Jobs in the backfill scheduler's queue.",
        f(d.bf_queue_length),
    );
    g(
        "slurm_scheduler_backfill_last_jobs",
        "Jobs started by backfill in its last cycle.",
        f(d.bf_last_backfilled_jobs),
    );
    g(
        "slurm_scheduler_backfill_active",
        "1 while a backfill cycle runs.",
        d.bf_active.map(|a| f64::from(u8::from(a))),
    );
    g(
        "slurm_scheduler_backfill_last_cycle_timestamp_seconds",
        "When the last backfill cycle ran.",
        d.bf_last_cycle_timestamp.map(|t| t as f64),
    );
    let mut c = |name: &'static str, help: &'static str, v: Option<u64>| {
        if let Some(v) = v {
            out.counter(name, help, &[], v as f64);
        }
    };
    c(
        "slurm_scheduler_jobs_submitted_total",
        "Jobs submitted since the last sdiag reset.",
        d.jobs_submitted,
    );
    c(
        "slurm_scheduler_jobs_started_total",
        "Jobs started since the last sdiag reset.",
        d.jobs_started,
    );
    c(
        "slurm_scheduler_jobs_completed_total",
        "Jobs completed since the last sdiag reset.",
        d.jobs_completed,
    );
    c(
        "slurm_scheduler_jobs_canceled_total",
        "Jobs canceled since the last sdiag reset.",
        d.jobs_canceled,
    );
    c(
        "slurm_scheduler_jobs_failed_total",
        "Jobs failed since the last sdiag reset.",
        d.jobs_failed,
    );
    c(
        "slurm_scheduler_cycles_total",
        "Main scheduler cycles since the last sdiag reset.",
        d.schedule_cycles,
    );
    c(
        "slurm_scheduler_backfill_cycles_total",
        "Backfill cycles since the last sdiag reset.",
        d.bf_cycles,
    );
    c(
        "slurm_scheduler_backfilled_jobs_total",
        "Jobs started by backfill since the last sdiag reset.",
        d.bf_backfilled_jobs,
    );
    c(
        "slurm_scheduler_backfilled_het_jobs_total",
        "Heterogeneous job components started by backfill since the last sdiag reset.",
        d.bf_backfilled_het_jobs,
    );
    for r in &d.rpcs {
        let l = [("rpc", r.name.as_str())];
        out.counter(
            "slurm_rpc_calls_total",
            "RPCs slurmctld served, by message type.",
            &l,
            r.count as f64,
        );
        out.counter(
            "slurm_rpc_duration_seconds_total",
            "Time slurmctld spent serving RPCs, by message type.",
            &l,
            r.total_seconds,
        );
    }
    if opts.per_owner {
        for r in &d.rpcs_by_user {
            let l = [("username", r.name.as_str())];
            out.counter(
                "slurm_user_rpc_calls_total",
                "RPCs slurmctld served, by user.",
                &l,
                r.count as f64,
            );
            out.counter(
                "slurm_user_rpc_duration_seconds_total",
                "Time slurmctld spent serving RPCs, by user.",
                &l,
                r.total_seconds,
            );
        }
    }
}
