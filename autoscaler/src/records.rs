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
//! Which records are missing is pure ([`missing`]); the executor creates them through the
//! Slurm side of the seam ([`crate::slurm_nodes::SlurmNodes::create`]) and the next poll's
//! partition list says whether they exist (slurmctld 22.05 answers `scontrol create` with
//! success even when it refused).

use std::collections::BTreeSet;

use slurmscale_exporter::model::demand::Shape;
use slurmscale_exporter::model::text::expand_hostlist;
use slurmscale_exporter::snapshot::ClusterSnapshot;

/// Slurm's state for the records we keep.
pub const STATE: &str = "FUTURE";

/// One record, as `scontrol create` and REST `new/node` take it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub name: String,
    pub conf: String,
}

/// The names a NodeSet gives its pods' nodes: `<name>-<ordinal>`, the ordinal padded to
/// `padding` digits, for ordinals below `count`.
pub fn names(nodeset: &str, padding: u32, count: u64) -> Vec<String> {
    let width = padding as usize;
    (0..count)
        .map(|i| format!("{nodeset}-{i:0width$}"))
        .collect()
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

/// The records of `wanted` that `existing` lacks, each with the NodeSet's `features` and
/// `shape`; an error when the shape does not say how many CPUs a node has (a record needs
/// them, and a wrong count would mislead the scheduler).
pub fn missing(
    wanted: &[String],
    existing: &BTreeSet<String>,
    features: &[String],
    shape: &Shape,
) -> Result<Vec<Record>, String> {
    let absent: Vec<&String> = wanted.iter().filter(|n| !existing.contains(*n)).collect();
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
    Ok(absent
        .into_iter()
        .map(|name| Record {
            name: name.clone(),
            conf: format!("NodeName={name} {tail} State={STATE}"),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_nodesets_ordinals() {
        assert_eq!(names("gpu", 0, 3), ["gpu-0", "gpu-1", "gpu-2"]);
        assert_eq!(names("gpu", 3, 2), ["gpu-000", "gpu-001"]);
        assert!(names("gpu", 0, 0).is_empty());
    }

    #[test]
    fn only_missing_records_are_made_with_the_nodesets_features_and_shape() {
        let wanted = names("slinky", 0, 4);
        let existing: BTreeSet<String> =
            ["slinky-0", "slinky-2", "other-9"].map(String::from).into();
        let shape = Shape {
            cpus: Some(4),
            memory_bytes: Some(8000 << 20),
            gpus: Some(2),
        };
        let features = ["slinky".to_string(), "ib".to_string()];
        let made = missing(&wanted, &existing, &features, &shape).unwrap();
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
            missing(&wanted, &all, &features, &Shape::default()),
            Ok(vec![])
        );
        let err = missing(&wanted, &existing, &features, &Shape::default()).unwrap_err();
        assert!(err.contains("spec.nodeShape"), "{err}");
    }
}
