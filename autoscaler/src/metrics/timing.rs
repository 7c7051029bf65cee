//! Just in time: the pending jobs Slurm has planned that an autoscaler boots nothing for
//! now — because Slurm's plan starts them on nodes that free up sooner than new ones could,
//! or because the new nodes they need are booted later, one boot before those free up —
//! and when the next such boot is due. A deferral is the policy working, never an error: no
//! alert reads these.

use slurmscale_exporter::metrics::Out;

use super::AutoscalerMetrics;

pub fn collect(out: &mut Out, m: &AutoscalerMetrics) {
    for r in m.rows.values().filter(|r| r.timing.known) {
        out.set_cluster(&r.cluster);
        let l = r.labels();
        let t = r.timing;
        for (boot, jobs) in [("wait", t.waiting_jobs), ("later", t.deferred_jobs)] {
            out.gauge(
                "slurmscale_autoscaler_planned_jobs_not_booted_for",
                "Pending jobs Slurm has planned that no node is booted for now: `wait`, its plan starts them on nodes that free up sooner than new ones could; `later`, new nodes start them sooner, booted one boot before the busy nodes they also need free up.",
                &[l[0], l[1], l[2], ("boot", boot)],
                jobs as f64,
            );
        }
        out.gauge(
            "slurmscale_autoscaler_deferred_nodes",
            "New nodes to be booted later for the jobs of boot=\"later\".",
            &l,
            t.deferred_nodes as f64,
        );
        // Absent, not zero, while nothing is deferred.
        if let Some(at) = t.next_boot {
            out.gauge(
                "slurmscale_autoscaler_next_boot_timestamp_seconds",
                "When the first node deferred for a planned job is to be asked for (unix seconds).",
                &l,
                at as f64,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures;

    /// The fixture's `gpu` autoscaler waits on Slurm's plan for two jobs and boots one node
    /// later for a third; `pool` has not read Slurm: no series.
    #[test]
    fn renders_what_waits_for_slurms_plan() {
        fixtures::assert_text(
            &fixtures::render(super::collect),
            r#"
            # HELP slurmscale_autoscaler_planned_jobs_not_booted_for Pending jobs Slurm has planned that no node is booted for now: `wait`, its plan starts them on nodes that free up sooner than new ones could; `later`, new nodes start them sooner, booted one boot before the busy nodes they also need free up.
            # TYPE slurmscale_autoscaler_planned_jobs_not_booted_for gauge
            slurmscale_autoscaler_planned_jobs_not_booted_for{cluster="lab",namespace="slurm",autoscaler="gpu",target="slurm-worker-gpu",boot="wait"} 2
            slurmscale_autoscaler_planned_jobs_not_booted_for{cluster="lab",namespace="slurm",autoscaler="gpu",target="slurm-worker-gpu",boot="later"} 1
            # HELP slurmscale_autoscaler_deferred_nodes New nodes to be booted later for the jobs of boot="later".
            # TYPE slurmscale_autoscaler_deferred_nodes gauge
            slurmscale_autoscaler_deferred_nodes{cluster="lab",namespace="slurm",autoscaler="gpu",target="slurm-worker-gpu"} 1
            # HELP slurmscale_autoscaler_next_boot_timestamp_seconds When the first node deferred for a planned job is to be asked for (unix seconds).
            # TYPE slurmscale_autoscaler_next_boot_timestamp_seconds gauge
            slurmscale_autoscaler_next_boot_timestamp_seconds{cluster="lab",namespace="slurm",autoscaler="gpu",target="slurm-worker-gpu"} 1800000600
            "#,
        );
    }
}
