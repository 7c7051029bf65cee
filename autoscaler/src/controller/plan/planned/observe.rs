//! What a slurm-planned NodeSet reads for itself: each ordinal's node record (by the name its
//! pod registers) and pod, and what says its partition cannot be followed (records `/nodes`
//! hides, a partition that never suspends).

use std::sync::Arc;

use slurmscale_exporter::model::Node;
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
    let ordinals = records
        .iter()
        .zip(&pods)
        .map(|(record, pod)| Ordinal::of(*record, *pod))
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
