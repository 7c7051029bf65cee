//! The scheduler as `/diag` (sdiag) reports it. Slurm counts in microseconds and resets its
//! counters at midnight and on `sdiag --reset`; here durations are seconds and monotonic
//! counts are counters (Prometheus handles the resets), levels are gauges.

use super::{MetricsOptions, Out, Series, number};
use crate::model::{Diag, RpcStat};
use crate::snapshot::ClusterSnapshot;

/// Everything `/diag` says once per cluster.
const SCHEDULER: &[Series<Diag>] = &[
    Series::gauge(
        "slurm_scheduler_threads",
        "slurmctld server threads.",
        |d| d.server_threads.and_then(number),
    ),
    Series::gauge(
        "slurm_scheduler_agent_queue_size",
        "RPCs queued for slurmctld's agents.",
        |d| d.agent_queue_size.and_then(number),
    ),
    Series::gauge("slurm_scheduler_agents", "slurmctld agents running.", |d| {
        d.agent_count.and_then(number)
    }),
    Series::gauge(
        "slurm_scheduler_agent_threads",
        "slurmctld agent threads.",
        |d| d.agent_threads.and_then(number),
    ),
    Series::gauge(
        "slurm_scheduler_dbd_queue_size",
        "Messages queued for slurmdbd.",
        |d| d.dbd_agent_queue_size.and_then(number),
    ),
    Series::gauge(
        "slurm_scheduler_cycle_last_seconds",
        "Duration of the main scheduler's last cycle.",
        |d| d.schedule_cycle_last_seconds,
    ),
    Series::gauge(
        "slurm_scheduler_cycle_max_seconds",
        "Longest main scheduler cycle since the last reset.",
        |d| d.schedule_cycle_max_seconds,
    ),
    Series::gauge(
        "slurm_scheduler_cycle_mean_seconds",
        "Mean main scheduler cycle since the last reset.",
        |d| d.schedule_cycle_mean_seconds,
    ),
    Series::gauge(
        "slurm_scheduler_cycle_mean_depth",
        "Mean jobs examined per main scheduler cycle.",
        |d| d.schedule_cycle_mean_depth.and_then(number),
    ),
    Series::gauge(
        "slurm_scheduler_cycles_per_minute",
        "Main scheduler cycles per minute.",
        |d| d.schedule_cycles_per_minute.and_then(number),
    ),
    Series::gauge(
        "slurm_scheduler_queue_length",
        "Jobs in the main scheduler's queue.",
        |d| d.schedule_queue_length.and_then(number),
    ),
    Series::gauge(
        "slurm_scheduler_backfill_cycle_last_seconds",
        "Duration of the backfill scheduler's last cycle.",
        |d| d.bf_cycle_last_seconds,
    ),
    Series::gauge(
        "slurm_scheduler_backfill_cycle_max_seconds",
        "Longest backfill cycle since the last reset.",
        |d| d.bf_cycle_max_seconds,
    ),
    Series::gauge(
        "slurm_scheduler_backfill_cycle_mean_seconds",
        "Mean backfill cycle since the last reset.",
        |d| d.bf_cycle_mean_seconds,
    ),
    Series::gauge(
        "slurm_scheduler_backfill_depth_mean",
        "Mean jobs examined per backfill cycle.",
        |d| d.bf_depth_mean.and_then(number),
    ),
    Series::gauge(
        "slurm_scheduler_backfill_queue_length",
        "Jobs in the backfill scheduler's queue.",
        |d| d.bf_queue_length.and_then(number),
    ),
    Series::gauge(
        "slurm_scheduler_backfill_last_jobs",
        "Jobs started by backfill in its last cycle.",
        |d| d.bf_last_backfilled_jobs.and_then(number),
    ),
    Series::gauge(
        "slurm_scheduler_backfill_active",
        "1 while a backfill cycle runs.",
        |d| d.bf_active.map(|a| f64::from(u8::from(a))),
    ),
    Series::gauge(
        "slurm_scheduler_backfill_last_cycle_timestamp_seconds",
        "When the last backfill cycle ran.",
        |d| d.bf_last_cycle_timestamp.map(|t| t as f64),
    ),
    Series::counter(
        "slurm_scheduler_jobs_submitted_total",
        "Jobs submitted since the last sdiag reset.",
        |d| d.jobs_submitted.and_then(number),
    ),
    Series::counter(
        "slurm_scheduler_jobs_started_total",
        "Jobs started since the last sdiag reset.",
        |d| d.jobs_started.and_then(number),
    ),
    Series::counter(
        "slurm_scheduler_jobs_completed_total",
        "Jobs completed since the last sdiag reset.",
        |d| d.jobs_completed.and_then(number),
    ),
    Series::counter(
        "slurm_scheduler_jobs_canceled_total",
        "Jobs canceled since the last sdiag reset.",
        |d| d.jobs_canceled.and_then(number),
    ),
    Series::counter(
        "slurm_scheduler_jobs_failed_total",
        "Jobs failed since the last sdiag reset.",
        |d| d.jobs_failed.and_then(number),
    ),
    Series::counter(
        "slurm_scheduler_cycles_total",
        "Main scheduler cycles since the last sdiag reset.",
        |d| d.schedule_cycles.and_then(number),
    ),
    Series::counter(
        "slurm_scheduler_backfill_cycles_total",
        "Backfill cycles since the last sdiag reset.",
        |d| d.bf_cycles.and_then(number),
    ),
    Series::counter(
        "slurm_scheduler_backfilled_jobs_total",
        "Jobs started by backfill since the last sdiag reset.",
        |d| d.bf_backfilled_jobs.and_then(number),
    ),
    Series::counter(
        "slurm_scheduler_backfilled_het_jobs_total",
        "Heterogeneous job components started by backfill since the last sdiag reset.",
        |d| d.bf_backfilled_het_jobs.and_then(number),
    ),
];

pub fn collect(out: &mut Out, s: &ClusterSnapshot, opts: &MetricsOptions) {
    let Some(d) = &s.diag.data else { return };
    out.series(SCHEDULER, d, &[]);
    for r in &d.rpcs {
        out.series(RPC, r, &[("rpc", r.name.as_str())]);
    }
    if opts.per_owner {
        for r in &d.rpcs_by_user {
            out.series(USER_RPC, r, &[("username", r.name.as_str())]);
        }
    }
}

/// What slurmctld spent on each kind of RPC.
const RPC: &[Series<RpcStat>] = &[
    Series::counter(
        "slurm_rpc_calls_total",
        "RPCs slurmctld served, by message type.",
        |r| number(r.count),
    ),
    Series::counter(
        "slurm_rpc_duration_seconds_total",
        "Time slurmctld spent serving RPCs, by message type.",
        |r| Some(r.total_seconds),
    ),
];

/// What slurmctld spent on each user's RPCs (`--per-owner`).
const USER_RPC: &[Series<RpcStat>] = &[
    Series::counter(
        "slurm_user_rpc_calls_total",
        "RPCs slurmctld served, by user.",
        |r| number(r.count),
    ),
    Series::counter(
        "slurm_user_rpc_duration_seconds_total",
        "Time slurmctld spent serving RPCs, by user.",
        |r| Some(r.total_seconds),
    ),
];

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
