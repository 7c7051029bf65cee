//! What a slurm-planned NodeSet reads for itself: each ordinal's node record (by the name its
//! pod registers) and pod, and what says its partition cannot be followed (records `/nodes`
//! hides, a partition that never suspends); booting just in time, also the earliest start
//! slurmctld plans for a pending job on each record.

use std::sync::Arc;

use slurmscale_exporter::metrics::unix_seconds;
use slurmscale_exporter::model::timing::STALE_AFTER_SECONDS;
use slurmscale_exporter::model::{Jobs, Node};
use slurmscale_exporter::snapshot::ClusterSnapshot;

use super::decide::Ordinal;
use crate::controller::observation::{OwnInput, Reading, RecordsView};
use crate::error::Result;
use crate::pool::{NamedPods, PodState, pod_ordinal};

/// A slurm-planned NodeSet, ordinal by ordinal.
#[derive(Clone, Debug)]
pub struct PlannedView {
    /// Index = ordinal, below `maxReplicas`.
    pub ordinals: Vec<Ordinal>,
    /// The NodeSet's pods by name (their ordinals' pods are in `ordinals`).
    pub pods: NamedPods,
    /// Records slurmctld lists in the partition that `/nodes` does not show (22.05 hides
    /// powered-down CLOUD nodes without `PrivateData=cloud`).
    pub hidden: Vec<String>,
    /// The partition, when it has `SuspendTime=INFINITE`: slurmctld never asks for a node
    /// to go, so pods would stay for good.
    pub never_suspends: Option<String>,
    /// Which configuration slurmctld runs on (`/diag`: moves when it reloads).
    pub config_generation: Option<(i64, u64)>,
    /// Booting just in time for Slurm's plan: seconds from a power-up to a job starting on
    /// the node (boot time and margin); `None`, slurmctld powers nodes up as it allocates.
    pub lead: Option<i64>,
}

/// The earliest start slurmctld plans for a pending job on each ordinal's record (unix
/// seconds, by index = ordinal), and the job: only plans it renewed lately.
fn planned_starts(jobs: &Jobs, records: &RecordsView, now: i64) -> Vec<Option<(i64, u64)>> {
    let mut earliest: Vec<Option<(i64, u64)>> = vec![None; records.wanted.len()];
    let fresh = jobs.pending.iter().filter_map(|j| {
        let plan = j.planned_start.as_ref()?;
        (plan.start >= now - STALE_AFTER_SECONDS).then_some((j.id, plan))
    });
    for (id, plan) in fresh {
        for name in &plan.nodes {
            if let Some(slot) = records
                .wanted
                .ordinal(name)
                .and_then(|o| earliest.get_mut(o))
                && slot.is_none_or(|(t, _)| plan.start < t)
            {
                *slot = Some((plan.start, id));
            }
        }
    }
    earliest
}

/// The view, once `/nodes` has answered and the records are known.
pub(super) async fn observe(reading: Reading<'_>) -> Result<Option<OwnInput>> {
    let (Some(records), Ok(snap)) = (reading.records, reading.snapshot) else {
        return Ok(None);
    };
    let view = read(&reading, records, snap).await?;
    Ok(view.map(|v| Arc::new(v) as OwnInput))
}

/// Each ordinal's record (by the name its pod registers) and pod; `None` while `/nodes`
/// has not answered.
async fn read(
    reading: &Reading<'_>,
    view: &RecordsView,
    snap: &ClusterSnapshot,
) -> Result<Option<PlannedView>> {
    let Some(nodes) = snap.nodes.data.as_deref() else {
        return Ok(None);
    };
    let selector = reading.selector("")?;
    let named = reading
        .pool
        .named_pods(&reading.namespace(), selector)
        .await?;
    let mut pods: Vec<Option<PodState>> = vec![None; view.wanted.len()];
    for (name, pod) in named.iter() {
        if let Some(slot) = pod_ordinal(name).and_then(|o| pods.get_mut(o)) {
            *slot = Some(*pod);
        }
    }
    let mut records: Vec<Option<&Node>> = vec![None; view.wanted.len()];
    for n in nodes.iter() {
        if let Some(o) = view.wanted.ordinal(&n.name) {
            records[o] = Some(n);
        }
    }
    // Plans are read only where they are acted on.
    let now = unix_seconds(reading.now) as i64;
    let plans = match (reading.lead, snap.jobs.data.as_deref()) {
        (Some(_), Some(jobs)) => planned_starts(jobs, view, now),
        _ => vec![None; view.wanted.len()],
    };
    let ordinals = records
        .iter()
        .zip(&pods)
        .zip(plans)
        .map(|((record, pod), planned)| Ordinal {
            planned,
            ..Ordinal::of(*record, *pod)
        })
        .collect();
    let hidden = (0..view.wanted.len())
        .filter(|&o| view.existing[o] && records[o].is_none())
        .map(|o| view.wanted.name(o))
        .collect();
    let never_suspends = snap
        .partitions
        .data
        .as_deref()
        .and_then(|ps| ps.iter().find(|p| *p.name == *reading.partitions[0]))
        .filter(|p| p.never_suspends)
        .map(|p| p.name.to_string());
    Ok(Some(PlannedView {
        ordinals,
        pods: named,
        hidden,
        never_suspends,
        config_generation: snap.diag.data.as_ref().and_then(|d| d.config_generation()),
        lead: reading.lead,
    }))
}

impl PlannedView {
    /// The names of the pods of `ordinals` (sorted), in ordinal order.
    pub fn pod_names(&self, ordinals: &[usize]) -> Vec<String> {
        if ordinals.is_empty() {
            return Vec::new();
        }
        let mut named: Vec<(usize, &String)> = self
            .pods
            .keys()
            .filter_map(|name| pod_ordinal(name).map(|o| (o, name)))
            .filter(|(o, _)| ordinals.binary_search(o).is_ok())
            .collect();
        named.sort();
        named.into_iter().map(|(_, name)| name.clone()).collect()
    }
}
