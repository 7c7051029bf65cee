//! A slurm-planned NodeSet, for autoscalers with `mode: SlurmPlanned` only: its node
//! records by power state as slurmctld reports them, and the pods it added that slurmctld
//! did not ask for (a NodeSet fills free ordinals below a wanted one first).

use slurmscale_exporter::metrics::Out;

use super::AutoscalerMetrics;

pub fn collect(out: &mut Out, m: &AutoscalerMetrics) {
    for r in m.rows.values() {
        let Some(p) = &r.planned else { continue };
        out.set_cluster(&r.cluster);
        let l = r.labels();
        for (power, n) in &p.records {
            out.gauge(
                "slurmscale_slurm_planned_records",
                "Node records of a slurm-planned NodeSet by power state as slurmctld reports it (off, up, down, idle, busy, failed, absent).",
                &[l[0], l[1], l[2], ("power", power)],
                *n as f64,
            );
        }
        out.counter(
            "slurmscale_slurm_planned_unrequested_pods_total",
            "Pods a slurm-planned NodeSet added that slurmctld did not ask for: free ordinals below a wanted one, which a NodeSet creates first.",
            &l,
            p.unrequested_pods as f64,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures;

    /// Only the slurm-planned fixture autoscaler (`gpu`) has series.
    #[test]
    fn renders_the_fixture_records() {
        fixtures::assert_text(
            &fixtures::render(super::collect),
            r#"
            # HELP slurmscale_slurm_planned_records Node records of a slurm-planned NodeSet by power state as slurmctld reports it (off, up, down, idle, busy, failed, absent).
            # TYPE slurmscale_slurm_planned_records gauge
            slurmscale_slurm_planned_records{cluster="lab",namespace="slurm",autoscaler="gpu",target="slurm-worker-gpu",power="busy"} 1
            slurmscale_slurm_planned_records{cluster="lab",namespace="slurm",autoscaler="gpu",target="slurm-worker-gpu",power="off"} 2
            slurmscale_slurm_planned_records{cluster="lab",namespace="slurm",autoscaler="gpu",target="slurm-worker-gpu",power="up"} 1
            # HELP slurmscale_slurm_planned_unrequested_pods_total Pods a slurm-planned NodeSet added that slurmctld did not ask for: free ordinals below a wanted one, which a NodeSet creates first.
            # TYPE slurmscale_slurm_planned_unrequested_pods_total counter
            slurmscale_slurm_planned_unrequested_pods_total{cluster="lab",namespace="slurm",autoscaler="gpu",target="slurm-worker-gpu"} 1
            "#,
        );
    }
}
