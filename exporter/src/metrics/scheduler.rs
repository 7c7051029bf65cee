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

#[cfg(test)]
mod tests {
    use super::super::fixtures;

    /// The family alone on the fixture cluster (`metrics::fixtures`), line by line.
    #[test]
    fn renders_the_fixture_cluster() {
        fixtures::assert_text(
            &fixtures::render(super::collect),
            r#"
            # HELP slurm_scheduler_threads slurmctld server threads.
            # TYPE slurm_scheduler_threads gauge
            slurm_scheduler_threads{cluster="fixture"} 3
            # HELP slurm_scheduler_agent_queue_size RPCs queued for slurmctld's agents.
            # TYPE slurm_scheduler_agent_queue_size gauge
            slurm_scheduler_agent_queue_size{cluster="fixture"} 0
            # HELP slurm_scheduler_agents slurmctld agents running.
            # TYPE slurm_scheduler_agents gauge
            slurm_scheduler_agents{cluster="fixture"} 0
            # HELP slurm_scheduler_agent_threads slurmctld agent threads.
            # TYPE slurm_scheduler_agent_threads gauge
            slurm_scheduler_agent_threads{cluster="fixture"} 0
            # HELP slurm_scheduler_dbd_queue_size Messages queued for slurmdbd.
            # TYPE slurm_scheduler_dbd_queue_size gauge
            slurm_scheduler_dbd_queue_size{cluster="fixture"} 2
            # HELP slurm_scheduler_cycle_last_seconds Duration of the main scheduler's last cycle.
            # TYPE slurm_scheduler_cycle_last_seconds gauge
            slurm_scheduler_cycle_last_seconds{cluster="fixture"} 0.00015
            # HELP slurm_scheduler_cycle_max_seconds Longest main scheduler cycle since the last reset.
            # TYPE slurm_scheduler_cycle_max_seconds gauge
            slurm_scheduler_cycle_max_seconds{cluster="fixture"} 0.004
            # HELP slurm_scheduler_cycle_mean_seconds Mean main scheduler cycle since the last reset.
            # TYPE slurm_scheduler_cycle_mean_seconds gauge
            slurm_scheduler_cycle_mean_seconds{cluster="fixture"} 0.0006
            # HELP slurm_scheduler_cycle_mean_depth Mean jobs examined per main scheduler cycle.
            # TYPE slurm_scheduler_cycle_mean_depth gauge
            slurm_scheduler_cycle_mean_depth{cluster="fixture"} 2
            # HELP slurm_scheduler_cycles_per_minute Main scheduler cycles per minute.
            # TYPE slurm_scheduler_cycles_per_minute gauge
            slurm_scheduler_cycles_per_minute{cluster="fixture"} 2
            # HELP slurm_scheduler_queue_length Jobs in the main scheduler's queue.
            # TYPE slurm_scheduler_queue_length gauge
            slurm_scheduler_queue_length{cluster="fixture"} 2
            # HELP slurm_scheduler_backfill_cycle_last_seconds Duration of the backfill scheduler's last cycle.
            # TYPE slurm_scheduler_backfill_cycle_last_seconds gauge
            slurm_scheduler_backfill_cycle_last_seconds{cluster="fixture"} 0.0008
            # HELP slurm_scheduler_backfill_cycle_max_seconds Longest backfill cycle since the last reset.
            # TYPE slurm_scheduler_backfill_cycle_max_seconds gauge
            slurm_scheduler_backfill_cycle_max_seconds{cluster="fixture"} 0.0012
            # HELP slurm_scheduler_backfill_cycle_mean_seconds Mean backfill cycle since the last reset.
            # TYPE slurm_scheduler_backfill_cycle_mean_seconds gauge
            slurm_scheduler_backfill_cycle_mean_seconds{cluster="fixture"} 0.0009
            # HELP slurm_scheduler_backfill_depth_mean Mean jobs examined per backfill cycle.
            # TYPE slurm_scheduler_backfill_depth_mean gauge
            slurm_scheduler_backfill_depth_mean{cluster="fixture"} 3
            # HELP slurm_scheduler_backfill_queue_length Jobs in the backfill scheduler's queue.
            # TYPE slurm_scheduler_backfill_queue_length gauge
            slurm_scheduler_backfill_queue_length{cluster="fixture"} 2
            # HELP slurm_scheduler_backfill_last_jobs Jobs started by backfill in its last cycle.
            # TYPE slurm_scheduler_backfill_last_jobs gauge
            slurm_scheduler_backfill_last_jobs{cluster="fixture"} 1
            # HELP slurm_scheduler_backfill_active 1 while a backfill cycle runs.
            # TYPE slurm_scheduler_backfill_active gauge
            slurm_scheduler_backfill_active{cluster="fixture"} 0
            # HELP slurm_scheduler_backfill_last_cycle_timestamp_seconds When the last backfill cycle ran.
            # TYPE slurm_scheduler_backfill_last_cycle_timestamp_seconds gauge
            slurm_scheduler_backfill_last_cycle_timestamp_seconds{cluster="fixture"} 1799999990
            # HELP slurm_scheduler_jobs_submitted_total Jobs submitted since the last sdiag reset.
            # TYPE slurm_scheduler_jobs_submitted_total counter
            slurm_scheduler_jobs_submitted_total{cluster="fixture"} 12
            # HELP slurm_scheduler_jobs_started_total Jobs started since the last sdiag reset.
            # TYPE slurm_scheduler_jobs_started_total counter
            slurm_scheduler_jobs_started_total{cluster="fixture"} 6
            # HELP slurm_scheduler_jobs_completed_total Jobs completed since the last sdiag reset.
            # TYPE slurm_scheduler_jobs_completed_total counter
            slurm_scheduler_jobs_completed_total{cluster="fixture"} 3
            # HELP slurm_scheduler_jobs_canceled_total Jobs canceled since the last sdiag reset.
            # TYPE slurm_scheduler_jobs_canceled_total counter
            slurm_scheduler_jobs_canceled_total{cluster="fixture"} 1
            # HELP slurm_scheduler_jobs_failed_total Jobs failed since the last sdiag reset.
            # TYPE slurm_scheduler_jobs_failed_total counter
            slurm_scheduler_jobs_failed_total{cluster="fixture"} 0
            # HELP slurm_scheduler_cycles_total Main scheduler cycles since the last sdiag reset.
            # TYPE slurm_scheduler_cycles_total counter
            slurm_scheduler_cycles_total{cluster="fixture"} 10
            # HELP slurm_scheduler_backfill_cycles_total Backfill cycles since the last sdiag reset.
            # TYPE slurm_scheduler_backfill_cycles_total counter
            slurm_scheduler_backfill_cycles_total{cluster="fixture"} 4
            # HELP slurm_scheduler_backfilled_jobs_total Jobs started by backfill since the last sdiag reset.
            # TYPE slurm_scheduler_backfilled_jobs_total counter
            slurm_scheduler_backfilled_jobs_total{cluster="fixture"} 1
            # HELP slurm_scheduler_backfilled_het_jobs_total Heterogeneous job components started by backfill since the last sdiag reset.
            # TYPE slurm_scheduler_backfilled_het_jobs_total counter
            slurm_scheduler_backfilled_het_jobs_total{cluster="fixture"} 0
            
            "#,
        );
    }
}
