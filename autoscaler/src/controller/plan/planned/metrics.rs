//! A slurm-planned NodeSet in the autoscaler's metrics: its node records by power state as
//! slurmctld reports them, and the pods it added that slurmctld did not ask for (a NodeSet
//! fills free ordinals below a wanted one first).

use std::collections::BTreeMap;

use slurmscale_exporter::metrics::Out;

use crate::metrics::PolicyRow;

/// Where a slurm-planned NodeSet's records stand.
#[derive(Clone, Debug, Default)]
pub(super) struct PlannedRow {
    /// Records by power state (`off`, `up`, `down`, `idle`, `busy`, `failed`, `absent`).
    pub records: BTreeMap<&'static str, u64>,
    /// Pods added that slurmctld did not ask for (free ordinals below a wanted one).
    pub unrequested_pods: u64,
    /// Records powered up ahead of the start slurmctld plans on them (booting just in time).
    pub early_power_ups: u64,
    /// When the next planned record is due to be powered up (unix seconds), if one is.
    pub next_power_up: Option<i64>,
}

impl PolicyRow for PlannedRow {
    fn collect(&self, out: &mut Out, l: [(&'static str, &str); 3]) {
        let p = self;
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
        out.counter(
            "slurmscale_slurm_planned_early_power_ups_total",
            "Records of a slurm-planned NodeSet powered up one boot ahead of the start slurmctld plans on them (spec.plannedJobs.boot: JustInTime).",
            &l,
            p.early_power_ups as f64,
        );
        if let Some(t) = p.next_power_up {
            out.gauge(
                "slurmscale_slurm_planned_next_power_up_timestamp_seconds",
                "When the next record slurmctld plans a pending job on is to be powered up, one boot ahead of that start (unix seconds); absent when none waits.",
                &l,
                t as f64,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use crate::metrics::fixtures;

    /// The slurm-planned fixture autoscaler (`gpu`): four records, one pod added unasked.
    #[test]
    fn renders_the_fixture_records() {
        let row = super::PlannedRow {
            records: BTreeMap::from([("off", 2), ("up", 1), ("busy", 1)]),
            unrequested_pods: 1,
            early_power_ups: 2,
            next_power_up: Some(1_767_225_600),
        };
        fixtures::assert_text(
            &fixtures::render_policy("slurm/gpu", row),
            r#"
            # HELP slurmscale_slurm_planned_records Node records of a slurm-planned NodeSet by power state as slurmctld reports it (off, up, down, idle, busy, failed, absent).
            # TYPE slurmscale_slurm_planned_records gauge
            slurmscale_slurm_planned_records{cluster="lab",namespace="slurm",autoscaler="gpu",target="slurm-worker-gpu",power="busy"} 1
            slurmscale_slurm_planned_records{cluster="lab",namespace="slurm",autoscaler="gpu",target="slurm-worker-gpu",power="off"} 2
            slurmscale_slurm_planned_records{cluster="lab",namespace="slurm",autoscaler="gpu",target="slurm-worker-gpu",power="up"} 1
            # HELP slurmscale_slurm_planned_unrequested_pods_total Pods a slurm-planned NodeSet added that slurmctld did not ask for: free ordinals below a wanted one, which a NodeSet creates first.
            # TYPE slurmscale_slurm_planned_unrequested_pods_total counter
            slurmscale_slurm_planned_unrequested_pods_total{cluster="lab",namespace="slurm",autoscaler="gpu",target="slurm-worker-gpu"} 1
            # HELP slurmscale_slurm_planned_early_power_ups_total Records of a slurm-planned NodeSet powered up one boot ahead of the start slurmctld plans on them (spec.plannedJobs.boot: JustInTime).
            # TYPE slurmscale_slurm_planned_early_power_ups_total counter
            slurmscale_slurm_planned_early_power_ups_total{cluster="lab",namespace="slurm",autoscaler="gpu",target="slurm-worker-gpu"} 2
            # HELP slurmscale_slurm_planned_next_power_up_timestamp_seconds When the next record slurmctld plans a pending job on is to be powered up, one boot ahead of that start (unix seconds); absent when none waits.
            # TYPE slurmscale_slurm_planned_next_power_up_timestamp_seconds gauge
            slurmscale_slurm_planned_next_power_up_timestamp_seconds{cluster="lab",namespace="slurm",autoscaler="gpu",target="slurm-worker-gpu"} 1767225600
            "#,
        );
    }
}
