//! Slurm node records for a Slinky NodeSet's pods, kept while no pod runs.
//!
//! Slinky defines a NodeSet's partition by feature (`NodeSet=<name> Feature=<name>`,
//! `PartitionName=<name> Nodes=<name>`): its nodes exist only once a pod's `slurmd -Z`
//! registers one. At zero pods the partition has no node, so Slurm 24.11 refuses every job
//! submitted to it ("Requested node configuration is not available") and nothing waits
//! that could scale it up; 22.05 accepts the job but cannot plan it. A record per ordinal,
//! created `State=FUTURE` with the NodeSet's features and shape, gives the partition its
//! size and shape without a pod, and the pod's registration under the same name takes it
//! over (`slurmd -Z` joins an existing record). Records are created, never deleted: a
//! record a pod left behind is the one its next pod joins.
//!
//! In slurm-planned mode ([`crate::slurm_planned`]) the records are `State=CLOUD` instead:
//! powered down, which slurmctld plans jobs on and powers up when it starts one, with
//! `Weight` rising by ordinal so that it picks the lowest ordinals first, as a NodeSet
//! creates its pods (22.05 ignores weights among powered-down nodes and picks by index,
//! which creation in ordinal order makes the same).
//!
//! Which records are missing is pure ([`missing`]); the executor creates them through the
//! Slurm side of the seam ([`crate::slurm_nodes::SlurmNodes::create`]) and the next poll's
//! partition list says whether they exist (slurmctld 22.05 answers `scontrol create` with
//! success even when it refused).

use std::collections::BTreeSet;

use slurmscale_exporter::model::demand::Shape;
use slurmscale_exporter::model::text::expand_hostlist;
use slurmscale_exporter::slurm::ApiVersion;
use slurmscale_exporter::snapshot::ClusterSnapshot;

use crate::crd::{NodeRecords, NodeSetAutoscalerSpec, ScalingMode};

/// The records an autoscaler keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `State=FUTURE`: the partition's size and shape at zero pods.
    Future,
    /// `State=CLOUD` with `Weight` by ordinal: nodes slurmctld plans on and powers up.
    Cloud,
}

impl Kind {
    /// What `spec` keeps, if anything: slurm-planned mode needs CLOUD records.
    pub fn of(spec: &NodeSetAutoscalerSpec) -> Option<Self> {
        match (spec.mode, spec.node_records) {
            (ScalingMode::SlurmPlanned, _) => Some(Self::Cloud),
            (ScalingMode::Replicas, NodeRecords::Future) => Some(Self::Future),
            (ScalingMode::Replicas, NodeRecords::None) => None,
        }
    }

    /// Slurm's word for the state records are created in.
    pub fn state(self) -> &'static str {
        match self {
            Self::Future => "FUTURE",
            Self::Cloud => "CLOUD",
        }
    }
}

/// One record, as `scontrol create` and REST `new/node` take it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub name: String,
    pub conf: String,
}

/// The names a NodeSet's pods' nodes take: `<prefix><ordinal>` (the prefix is the pod
/// template's host name, `gpu-`, else `<nodeset>-`), the ordinal padded to `padding` digits,
/// for ordinals below `count`.
pub fn names(prefix: &str, padding: u32, count: u64) -> Vec<String> {
    let width = padding as usize;
    (0..count).map(|i| format!("{prefix}{i:0width$}")).collect()
}

/// The node names slurmctld has in `partition`: its node list (FUTURE records, which
/// `/nodes` hides, included) and the registered nodes that say they are in it.
pub fn existing(snap: &ClusterSnapshot, partition: &str, limit: usize) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    if let Some(p) = snap
        .partitions
        .data
        .as_deref()
        .and_then(|ps| ps.iter().find(|p| &*p.name == partition))
    {
        names.extend(expand_hostlist(&p.node_list, limit));
    }
    if let Some(nodes) = snap.nodes.data.as_deref() {
        names.extend(
            nodes
                .iter()
                .filter(|n| n.partitions.iter().any(|p| &**p == partition))
                .map(|n| n.name.clone()),
        );
    }
    names
}

/// The records of `wanted` (by ordinal) that `existing` lacks, each with the NodeSet's
/// `features` and `shape`, of `kind`; an error when the shape does not say how many CPUs a
/// node has (a record needs them, and a wrong count would mislead the scheduler).
pub fn missing(
    wanted: &[String],
    existing: &BTreeSet<String>,
    features: &[String],
    shape: &Shape,
    kind: Kind,
) -> Result<Vec<Record>, String> {
    let absent: Vec<(usize, &String)> = wanted
        .iter()
        .enumerate()
        .filter(|(_, n)| !existing.contains(*n))
        .collect();
    if absent.is_empty() {
        return Ok(Vec::new());
    }
    let cpus = shape.cpus.filter(|c| *c > 0).ok_or_else(|| {
        "the node shape is unknown (no CPUs): set spec.nodeShape, the NodeSet's slurmscale.io/node-shape annotation, or CPUs= in its extraConf".to_string()
    })?;
    let mut tail = format!("Feature={} CPUs={cpus}", features.join(","));
    if let Some(m) = shape.memory_bytes.filter(|m| *m > 0) {
        tail.push_str(&format!(" RealMemory={}", m >> 20));
    }
    if let Some(g) = shape.gpus.filter(|g| *g > 0) {
        tail.push_str(&format!(" Gres=gpu:{g}"));
    }
    let state = kind.state();
    Ok(absent
        .into_iter()
        .map(|(ordinal, name)| {
            let weight = match kind {
                // Slurm's default weight is 1; lower weights are allocated first.
                Kind::Cloud => format!(" Weight={}", ordinal + 1),
                Kind::Future => String::new(),
            };
            Record {
                name: name.clone(),
                conf: format!("NodeName={name} {tail}{weight} State={state}"),
            }
        })
        .collect())
}

/// Whether slurmctld must load its configuration again before it allocates `kind` records
/// just created, on a Slurm that speaks `version`. Two releases need it, each seen on the
/// harness: Slurm 24.11.5 plans on CLOUD records created after any dynamic node was deleted
/// (every pod of slurm-operator ≤ 1.1 deletes its node) but never allocates them — jobs pend
/// with `Resources` — until it reloads (fixed in 26.05.3); and 26.05.5 starts no power saving
/// when it started with no node to save power on (the global `SuspendTime` INFINITE, the
/// NodeSet's partition empty until its records are made at run time: "power: automatic
/// power save mode disabled"), so it allocates the records and never asks for them to be
/// powered up, until it reloads. So a reload is asked for from every release that has REST
/// `reconfigure/` (23.11 on, v0.0.40): after one, records not heard from since they were
/// resumed need a refresh ([`crate::slurm_planned`] does it), which costs less than records
/// that take no job. 22.05 is affected by neither.
pub fn reload_after_creating(kind: Kind, version: ApiVersion) -> bool {
    kind == Kind::Cloud && version.reconfigures()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reload_follows_new_cloud_records_where_slurmctld_can_be_asked() {
        assert!(reload_after_creating(Kind::Cloud, ApiVersion::V0042));
        assert!(reload_after_creating(Kind::Cloud, ApiVersion::V0045));
        assert!(!reload_after_creating(Kind::Cloud, ApiVersion::V0038));
        assert!(!reload_after_creating(Kind::Future, ApiVersion::V0042));
    }

    #[test]
    fn names_follow_the_nodesets_ordinals() {
        assert_eq!(names("gpu-", 0, 3), ["gpu-0", "gpu-1", "gpu-2"]);
        assert_eq!(names("gpu-", 3, 2), ["gpu-000", "gpu-001"]);
        assert_eq!(names("gpu", 0, 2), ["gpu0", "gpu1"]);
        assert!(names("gpu-", 0, 0).is_empty());
    }

    #[test]
    fn only_missing_records_are_made_with_the_nodesets_features_and_shape() {
        let wanted = names("slinky-", 0, 4);
        let existing: BTreeSet<String> =
            ["slinky-0", "slinky-2", "other-9"].map(String::from).into();
        let shape = Shape {
            cpus: Some(4),
            memory_bytes: Some(8000 << 20),
            gpus: Some(2),
        };
        let features = ["slinky".to_string(), "ib".to_string()];
        let made = missing(&wanted, &existing, &features, &shape, Kind::Future).unwrap();
        assert_eq!(
            made,
            [
                Record {
                    name: "slinky-1".into(),
                    conf: "NodeName=slinky-1 Feature=slinky,ib CPUs=4 RealMemory=8000 Gres=gpu:2 State=FUTURE".into()
                },
                Record {
                    name: "slinky-3".into(),
                    conf: "NodeName=slinky-3 Feature=slinky,ib CPUs=4 RealMemory=8000 Gres=gpu:2 State=FUTURE".into()
                }
            ]
        );
        // Nothing missing needs no shape; something missing does.
        let all: BTreeSet<String> = wanted.iter().cloned().collect();
        assert_eq!(
            missing(&wanted, &all, &features, &Shape::default(), Kind::Future),
            Ok(vec![])
        );
        let err = missing(
            &wanted,
            &existing,
            &features,
            &Shape::default(),
            Kind::Cloud,
        );
        assert!(err.unwrap_err().contains("spec.nodeShape"));
    }

    /// Slurm-planned records are CLOUD, weighted by ordinal so slurmctld picks the lowest
    /// first, as the NodeSet creates them.
    #[test]
    fn cloud_records_weigh_by_ordinal() {
        let wanted = names("planned-", 0, 3);
        let existing: BTreeSet<String> = ["planned-0".to_string()].into();
        let shape = Shape {
            cpus: Some(4),
            ..Shape::default()
        };
        let made = missing(&wanted, &existing, &["planned".into()], &shape, Kind::Cloud);
        let confs: Vec<String> = made.unwrap().into_iter().map(|r| r.conf).collect();
        assert_eq!(
            confs,
            [
                "NodeName=planned-1 Feature=planned CPUs=4 Weight=2 State=CLOUD",
                "NodeName=planned-2 Feature=planned CPUs=4 Weight=3 State=CLOUD"
            ]
        );
    }
}
