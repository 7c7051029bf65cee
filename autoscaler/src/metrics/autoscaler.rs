//! One series per NodeSetAutoscaler and family, whatever its policy: replicas decided,
//! current and recommended, why, whether scale-down is frozen or the target is capped, how
//! often it scaled each way and when it last acted. Labels: the autoscaler's namespace and
//! name and its target NodeSet, after the Slurm cluster it reads.

use slurmscale_exporter::metrics::{Out, unix_seconds};

use super::AutoscalerMetrics;

pub fn collect(out: &mut Out, m: &AutoscalerMetrics) {
    for r in m.rows.values() {
        out.set_cluster(&r.cluster);
        let l = r.labels();
        out.gauge(
            "slurmscale_autoscaler_desired_replicas",
            "Replicas the policy decided the target should have now.",
            &l,
            r.desired as f64,
        );
        out.gauge(
            "slurmscale_autoscaler_current_replicas",
            "Replicas the target has (its scale subresource).",
            &l,
            r.current as f64,
        );
        out.gauge(
            "slurmscale_autoscaler_recommended_replicas",
            "Busy nodes plus pending demand within bounds, before stabilization and step limits.",
            &l,
            r.recommendation as f64,
        );
        out.gauge(
            "slurmscale_autoscaler_frozen",
            "1 while scale-down is suspended because the Slurm data is stale, partial or failing.",
            &l,
            f64::from(u8::from(r.frozen)),
        );
        out.gauge(
            "slurmscale_autoscaler_limited",
            "1 while busy nodes and demand exceed maxReplicas.",
            &l,
            f64::from(u8::from(r.limited)),
        );
        out.gauge(
            "slurmscale_autoscaler_unsatisfiable_jobs",
            "Pending jobs needing more nodes than maxReplicas: reported, not chased.",
            &l,
            r.unsatisfiable as f64,
        );
        out.info(
            "slurmscale_autoscaler_decision_info",
            "The reason of the latest decision (ScaleUp, ScaleDown, Idle, Steady, Stabilizing, Frozen).",
            &[l[0], l[1], l[2], ("reason", r.reason.as_str())],
        );
        out.counter(
            "slurmscale_autoscaler_scale_ups_total",
            "Times the target was scaled up.",
            &l,
            r.scale_ups as f64,
        );
        out.counter(
            "slurmscale_autoscaler_scale_downs_total",
            "Times the target was scaled down.",
            &l,
            r.scale_downs as f64,
        );
        out.gauge(
            "slurmscale_autoscaler_decision_duration_seconds",
            "Time the last reconcile took (reads, decision, writes).",
            &l,
            r.decision_seconds,
        );
        for (activity, t) in [
            ("decision", r.last_decision),
            ("scale_up", r.last_scale_up),
            ("scale_down", r.last_scale_down),
        ] {
            if let Some(t) = t {
                out.gauge(
                    "slurmscale_autoscaler_last_activity_timestamp_seconds",
                    "When the autoscaler last decided, scaled up and scaled down.",
                    &[l[0], l[1], l[2], ("activity", activity)],
                    unix_seconds(t),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures;

    /// Both fixture autoscalers, each under the Slurm cluster it reads; the one that never
    /// scaled down has no `scale_down` activity series (absent, not zero: zero is 1970).
    #[test]
    fn renders_the_fixture_autoscalers() {
        fixtures::assert_text(
            &fixtures::render(super::collect),
            r#"
            # HELP slurmscale_autoscaler_desired_replicas Replicas the policy decided the target should have now.
            # TYPE slurmscale_autoscaler_desired_replicas gauge
            slurmscale_autoscaler_desired_replicas{cluster="lab",namespace="slurm",autoscaler="gpu",target="slurm-worker-gpu"} 3
            slurmscale_autoscaler_desired_replicas{cluster="lab",namespace="slurm",autoscaler="pool",target="slurm-worker-pool"} 2
            # HELP slurmscale_autoscaler_current_replicas Replicas the target has (its scale subresource).
            # TYPE slurmscale_autoscaler_current_replicas gauge
            slurmscale_autoscaler_current_replicas{cluster="lab",namespace="slurm",autoscaler="gpu",target="slurm-worker-gpu"} 1
            slurmscale_autoscaler_current_replicas{cluster="lab",namespace="slurm",autoscaler="pool",target="slurm-worker-pool"} 2
            # HELP slurmscale_autoscaler_recommended_replicas Busy nodes plus pending demand within bounds, before stabilization and step limits.
            # TYPE slurmscale_autoscaler_recommended_replicas gauge
            slurmscale_autoscaler_recommended_replicas{cluster="lab",namespace="slurm",autoscaler="gpu",target="slurm-worker-gpu"} 4
            slurmscale_autoscaler_recommended_replicas{cluster="lab",namespace="slurm",autoscaler="pool",target="slurm-worker-pool"} 1
            # HELP slurmscale_autoscaler_frozen 1 while scale-down is suspended because the Slurm data is stale, partial or failing.
            # TYPE slurmscale_autoscaler_frozen gauge
            slurmscale_autoscaler_frozen{cluster="lab",namespace="slurm",autoscaler="gpu",target="slurm-worker-gpu"} 0
            slurmscale_autoscaler_frozen{cluster="lab",namespace="slurm",autoscaler="pool",target="slurm-worker-pool"} 1
            # HELP slurmscale_autoscaler_limited 1 while busy nodes and demand exceed maxReplicas.
            # TYPE slurmscale_autoscaler_limited gauge
            slurmscale_autoscaler_limited{cluster="lab",namespace="slurm",autoscaler="gpu",target="slurm-worker-gpu"} 1
            slurmscale_autoscaler_limited{cluster="lab",namespace="slurm",autoscaler="pool",target="slurm-worker-pool"} 0
            # HELP slurmscale_autoscaler_unsatisfiable_jobs Pending jobs needing more nodes than maxReplicas: reported, not chased.
            # TYPE slurmscale_autoscaler_unsatisfiable_jobs gauge
            slurmscale_autoscaler_unsatisfiable_jobs{cluster="lab",namespace="slurm",autoscaler="gpu",target="slurm-worker-gpu"} 1
            slurmscale_autoscaler_unsatisfiable_jobs{cluster="lab",namespace="slurm",autoscaler="pool",target="slurm-worker-pool"} 0
            # HELP slurmscale_autoscaler_decision_info The reason of the latest decision (ScaleUp, ScaleDown, Idle, Steady, Stabilizing, Frozen).
            # TYPE slurmscale_autoscaler_decision_info gauge
            slurmscale_autoscaler_decision_info{cluster="lab",namespace="slurm",autoscaler="gpu",target="slurm-worker-gpu",reason="ScaleUp"} 1
            slurmscale_autoscaler_decision_info{cluster="lab",namespace="slurm",autoscaler="pool",target="slurm-worker-pool",reason="Frozen"} 1
            # HELP slurmscale_autoscaler_scale_ups_total Times the target was scaled up.
            # TYPE slurmscale_autoscaler_scale_ups_total counter
            slurmscale_autoscaler_scale_ups_total{cluster="lab",namespace="slurm",autoscaler="gpu",target="slurm-worker-gpu"} 5
            slurmscale_autoscaler_scale_ups_total{cluster="lab",namespace="slurm",autoscaler="pool",target="slurm-worker-pool"} 2
            # HELP slurmscale_autoscaler_scale_downs_total Times the target was scaled down.
            # TYPE slurmscale_autoscaler_scale_downs_total counter
            slurmscale_autoscaler_scale_downs_total{cluster="lab",namespace="slurm",autoscaler="gpu",target="slurm-worker-gpu"} 4
            slurmscale_autoscaler_scale_downs_total{cluster="lab",namespace="slurm",autoscaler="pool",target="slurm-worker-pool"} 0
            # HELP slurmscale_autoscaler_decision_duration_seconds Time the last reconcile took (reads, decision, writes).
            # TYPE slurmscale_autoscaler_decision_duration_seconds gauge
            slurmscale_autoscaler_decision_duration_seconds{cluster="lab",namespace="slurm",autoscaler="gpu",target="slurm-worker-gpu"} 0.012
            slurmscale_autoscaler_decision_duration_seconds{cluster="lab",namespace="slurm",autoscaler="pool",target="slurm-worker-pool"} 0.25
            # HELP slurmscale_autoscaler_last_activity_timestamp_seconds When the autoscaler last decided, scaled up and scaled down.
            # TYPE slurmscale_autoscaler_last_activity_timestamp_seconds gauge
            slurmscale_autoscaler_last_activity_timestamp_seconds{cluster="lab",namespace="slurm",autoscaler="gpu",target="slurm-worker-gpu",activity="decision"} 1800000060
            slurmscale_autoscaler_last_activity_timestamp_seconds{cluster="lab",namespace="slurm",autoscaler="gpu",target="slurm-worker-gpu",activity="scale_up"} 1800000060
            slurmscale_autoscaler_last_activity_timestamp_seconds{cluster="lab",namespace="slurm",autoscaler="gpu",target="slurm-worker-gpu",activity="scale_down"} 1799999000
            slurmscale_autoscaler_last_activity_timestamp_seconds{cluster="lab",namespace="slurm",autoscaler="pool",target="slurm-worker-pool",activity="decision"} 1800000059.5
            slurmscale_autoscaler_last_activity_timestamp_seconds{cluster="lab",namespace="slurm",autoscaler="pool",target="slurm-worker-pool",activity="scale_up"} 1799990000
            "#,
        );
    }
}
