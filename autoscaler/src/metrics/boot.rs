//! How long each autoscaler's NodeSet takes to boot a node (scale-up to its slurmd
//! registering in Slurm), learned from the boots it saw or set by its spec, and how many it
//! saw: a site's boot time, and what deciding when to boot for planned work starts from.

use slurmscale_exporter::metrics::Out;

use super::AutoscalerMetrics;

pub fn collect(out: &mut Out, m: &AutoscalerMetrics) {
    for r in m.rows.values() {
        out.set_cluster(&r.cluster);
        let l = r.labels();
        // Absent, not zero, until a boot was seen or one is set.
        if let Some(seconds) = r.boot.seconds {
            let source = if r.boot.set { "spec" } else { "learned" };
            out.gauge(
                "slurmscale_autoscaler_boot_seconds",
                "How long a new node takes from the scale-up to its slurmd registering: the median of the last 16 boots seen, or spec.bootTimeSeconds.",
                &[l[0], l[1], l[2], ("source", source)],
                seconds,
            );
        }
        out.counter(
            "slurmscale_autoscaler_boots_observed_total",
            "New nodes seen registering in Slurm after a scale-up asked for them.",
            &l,
            r.boot.observed as f64,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures;

    /// The fixture's `gpu` autoscaler learned 92 s from 5 boots; `pool` has seen none and
    /// sets none: no boot time series, a zero count.
    #[test]
    fn renders_the_boot_time_where_known() {
        fixtures::assert_text(
            &fixtures::render(super::collect),
            r#"
            # HELP slurmscale_autoscaler_boot_seconds How long a new node takes from the scale-up to its slurmd registering: the median of the last 16 boots seen, or spec.bootTimeSeconds.
            # TYPE slurmscale_autoscaler_boot_seconds gauge
            slurmscale_autoscaler_boot_seconds{cluster="lab",namespace="slurm",autoscaler="gpu",target="slurm-worker-gpu",source="learned"} 92
            # HELP slurmscale_autoscaler_boots_observed_total New nodes seen registering in Slurm after a scale-up asked for them.
            # TYPE slurmscale_autoscaler_boots_observed_total counter
            slurmscale_autoscaler_boots_observed_total{cluster="lab",namespace="slurm",autoscaler="gpu",target="slurm-worker-gpu"} 5
            slurmscale_autoscaler_boots_observed_total{cluster="lab",namespace="slurm",autoscaler="pool",target="slurm-worker-pool"} 0
            "#,
        );
    }
}
