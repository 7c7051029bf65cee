//! What this replica itself is and has done, whatever it scales: whether it leads, the wakes
//! it heeded, its failed reconciles by kind. No target and no Slurm cluster (`cluster=""`):
//! a standby replica has these and nothing else.

use slurmscale_exporter::metrics::Out;

use super::AutoscalerMetrics;

pub fn collect(out: &mut Out, m: &AutoscalerMetrics) {
    out.set_cluster("");
    out.gauge(
        "slurmscale_autoscaler_leader",
        "1 while this replica holds the lease and may actuate.",
        &[],
        f64::from(u8::from(m.leader)),
    );
    out.counter(
        "slurmscale_autoscaler_wakes_total",
        "POST /wake calls heeded by this replica (slurmctld's ResumeProgram asking for a poll now; a standby answers 503).",
        &[],
        m.wakes as f64,
    );
    for (kind, n) in &m.errors {
        out.counter(
            "slurmscale_autoscaler_errors_total",
            "Failed reconciles by kind (conflict, throttled, server, timeout, transport, not_leader, not_found, forbidden, rejected, target, config, and the Slurm kinds).",
            &[("kind", kind)],
            *n as f64,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures;

    #[test]
    fn renders_the_fixture_replica() {
        fixtures::assert_text(
            &fixtures::render(super::collect),
            r#"
            # HELP slurmscale_autoscaler_leader 1 while this replica holds the lease and may actuate.
            # TYPE slurmscale_autoscaler_leader gauge
            slurmscale_autoscaler_leader{cluster=""} 1
            # HELP slurmscale_autoscaler_wakes_total POST /wake calls heeded by this replica (slurmctld's ResumeProgram asking for a poll now; a standby answers 503).
            # TYPE slurmscale_autoscaler_wakes_total counter
            slurmscale_autoscaler_wakes_total{cluster=""} 3
            # HELP slurmscale_autoscaler_errors_total Failed reconciles by kind (conflict, throttled, server, timeout, transport, not_leader, not_found, forbidden, rejected, target, config, and the Slurm kinds).
            # TYPE slurmscale_autoscaler_errors_total counter
            slurmscale_autoscaler_errors_total{cluster="",kind="conflict"} 2
            slurmscale_autoscaler_errors_total{cluster="",kind="slurm"} 1
            "#,
        );
    }

    #[test]
    fn a_standby_says_so_and_has_no_errors_to_show() {
        let standby = super::AutoscalerMetrics::default();
        fixtures::assert_text(
            &fixtures::render_of(super::collect, &standby),
            r#"
            # HELP slurmscale_autoscaler_leader 1 while this replica holds the lease and may actuate.
            # TYPE slurmscale_autoscaler_leader gauge
            slurmscale_autoscaler_leader{cluster=""} 0
            # HELP slurmscale_autoscaler_wakes_total POST /wake calls heeded by this replica (slurmctld's ResumeProgram asking for a poll now; a standby answers 503).
            # TYPE slurmscale_autoscaler_wakes_total counter
            slurmscale_autoscaler_wakes_total{cluster=""} 0
            "#,
        );
    }
}
