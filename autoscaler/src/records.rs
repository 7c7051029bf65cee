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
//! Records of kind CLOUD are `State=CLOUD` instead:
//! powered down, which slurmctld plans jobs on and powers up when it starts one, with
//! `Weight` rising by ordinal so that it picks the lowest ordinals first, as a NodeSet
//! creates its pods (22.05 ignores weights among powered-down nodes and picks by index,
//! which creation in ordinal order makes the same).
//!
//! Which records are missing is pure ([`missing`]); the executor creates them through the
//! Slurm side of the seam ([`crate::slurm_nodes::SlurmNodes::create`]) and the next poll's
//! partition list says whether they exist (slurmctld 22.05 answers `scontrol create` with
//! success even when it refused).

use slurmscale_exporter::model::demand::Shape;
use slurmscale_exporter::model::text::{for_each_host, split_top};
use slurmscale_exporter::slurm::ApiVersion;
use slurmscale_exporter::snapshot::ClusterSnapshot;

use crate::crd::{NodeRecords, NodeSetAutoscalerSpec};

/// The records an autoscaler keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `State=FUTURE`: the partition's size and shape at zero pods.
    Future,
    /// `State=CLOUD` with `Weight` by ordinal: nodes slurmctld plans on and powers up.
    Cloud,
}

impl Kind {
    /// What `spec.nodeRecords` asks to keep, if anything (a policy may keep records of its
    /// own kind instead, through its `Inputs`).
    pub fn of(spec: &NodeSetAutoscalerSpec) -> Option<Self> {
        match spec.node_records {
            NodeRecords::Future => Some(Self::Future),
            NodeRecords::None => None,
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
/// for ordinals below `count`. Worked out name by name, not listed: a NodeSet may have
/// thousands, and they are read every poll.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Names {
    prefix: String,
    width: usize,
    count: usize,
}

impl Names {
    pub fn new(prefix: &str, padding: u32, count: u64) -> Self {
        Self {
            prefix: prefix.to_string(),
            width: padding as usize,
            count: usize::try_from(count).unwrap_or(usize::MAX),
        }
    }

    /// How many ordinals there are.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The name of `ordinal`'s node.
    pub fn name(&self, ordinal: usize) -> String {
        let width = self.width;
        format!("{}{ordinal:0width$}", self.prefix)
    }

    /// The ordinal whose node is called `name`, if one is: exactly as [`Names::name`]
    /// writes it (`gpu-07` is not ordinal 7 of an unpadded NodeSet).
    pub fn ordinal(&self, name: &str) -> Option<usize> {
        let digits = name.strip_prefix(&self.prefix)?;
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let n: usize = digits.parse().ok()?;
        (n < self.count && self.written_as(n, digits.len())).then_some(n)
    }

    /// Whether `n` written with `len` digits (zero-padded) is how [`Names::name`] writes it.
    fn written_as(&self, n: usize, len: usize) -> bool {
        let natural = n.checked_ilog10().map_or(1, |l| l as usize + 1);
        natural.max(len) == natural.max(self.width)
    }

    /// Marks the ordinals of a host list item that is exactly `<prefix>[<ranges>]` (as
    /// Slinky's node lists are) without writing out a name; `false` for any other item.
    fn mark_range(&self, item: &str, have: &mut [bool]) -> bool {
        let Some(ranges) = item
            .strip_prefix(&self.prefix)
            .and_then(|r| r.strip_prefix('['))
            .and_then(|r| r.strip_suffix(']'))
            .filter(|r| !r.contains(['[', ']']))
        else {
            return false;
        };
        let mut spans = Vec::new();
        for range in ranges.split(',') {
            let (lo, hi) = range.split_once('-').unwrap_or((range, range));
            let (Ok(l), Ok(h)) = (lo.parse::<usize>(), hi.parse::<usize>()) else {
                return false;
            };
            spans.push((l, h, lo.len()));
        }
        for (lo, hi, width) in spans {
            let end = hi.saturating_add(1).min(have.len());
            for (n, on) in have.iter_mut().enumerate().take(end).skip(lo) {
                // `<prefix><n padded to width>` is this ordinal's name only if that is how
                // the NodeSet pads it.
                *on |= self.written_as(n, width);
            }
        }
        true
    }
}

/// Which of `names` slurmctld has in `partition`, by ordinal: its node list (FUTURE
/// records, which `/nodes` hides, included) and the registered nodes that say they are in it.
pub fn existing(snap: &ClusterSnapshot, partition: &str, names: &Names) -> Vec<bool> {
    let mut have = vec![false; names.len()];
    let mark = |have: &mut [bool], name: &str| {
        if let Some(o) = names.ordinal(name) {
            have[o] = true;
        }
    };
    if let Some(p) = snap
        .partitions
        .data
        .as_deref()
        .and_then(|ps| ps.iter().find(|p| &*p.name == partition))
    {
        // Other nodes may share the partition: look a little past the NodeSet's own.
        let mut left = names.len().saturating_add(1024);
        for item in split_top(&p.node_list) {
            if !names.mark_range(item, &mut have) {
                let mut seen = 0;
                for_each_host(item, left, |name| {
                    seen += 1;
                    mark(&mut have, name)
                });
                left -= seen;
                if left == 0 {
                    break;
                }
            }
        }
    }
    // Registered nodes are looked at only when the list left some out (it names them all,
    // as a rule: a NodeSet's thousands of names then cost no second reading).
    if let Some(nodes) = snap.nodes.data.as_deref().filter(|_| have.contains(&false)) {
        nodes
            .iter()
            .filter(|n| n.partitions.iter().any(|p| &**p == partition))
            .for_each(|n| mark(&mut have, &n.name));
    }
    have
}

/// The records of `wanted` (by ordinal) that `existing` lacks, each with the NodeSet's
/// `features` and `shape`, of `kind`; an error when the shape does not say how many CPUs a
/// node has (a record needs them, and a wrong count would mislead the scheduler).
pub fn missing(
    wanted: &Names,
    existing: &[bool],
    features: &[String],
    shape: &Shape,
    kind: Kind,
) -> Result<Vec<Record>, String> {
    let absent: Vec<(usize, String)> = (0..wanted.len())
        .filter(|&o| !existing.get(o).copied().unwrap_or(false))
        .map(|o| (o, wanted.name(o)))
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
                conf: format!("NodeName={name} {tail}{weight} State={state}"),
                name,
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
/// resumed need a refresh (the policy keeping CLOUD records does it), which costs less than records
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

    fn all(n: &Names) -> Vec<String> {
        (0..n.len()).map(|o| n.name(o)).collect()
    }

    #[test]
    fn names_follow_the_nodesets_ordinals() {
        assert_eq!(all(&Names::new("gpu-", 0, 3)), ["gpu-0", "gpu-1", "gpu-2"]);
        assert_eq!(all(&Names::new("gpu-", 3, 2)), ["gpu-000", "gpu-001"]);
        assert_eq!(all(&Names::new("gpu", 0, 2)), ["gpu0", "gpu1"]);
        assert!(Names::new("gpu-", 0, 0).is_empty());
        assert_eq!(Names::new("gpu-", 3, 1200).name(1001), "gpu-1001");
    }

    #[test]
    fn a_node_name_gives_its_ordinal_only_as_the_nodeset_writes_it() {
        let plain = Names::new("gpu-", 0, 20);
        assert_eq!(plain.ordinal("gpu-0"), Some(0));
        assert_eq!(plain.ordinal("gpu-19"), Some(19));
        for other in [
            "gpu-20", "gpu-07", "gpu-", "gpu-1a", "gpu--1", "cpu-1", "gpu-+1",
        ] {
            assert_eq!(plain.ordinal(other), None, "{other}");
        }
        let padded = Names::new("gpu-", 3, 2000);
        assert_eq!(padded.ordinal("gpu-007"), Some(7));
        assert_eq!(padded.ordinal("gpu-1234"), Some(1234));
        assert_eq!(padded.ordinal("gpu-7"), None);
        assert_eq!(padded.ordinal("gpu-0007"), None);
        for o in [0, 9, 10, 999, 1000, 1999] {
            assert_eq!(padded.ordinal(&padded.name(o)), Some(o));
        }
        let huge = format!("gpu-{}0", usize::MAX);
        assert_eq!(Names::new("gpu-", 0, u64::MAX).ordinal(&huge), None);
    }

    /// The partition's node list gives the records, whether written out, in ranges or
    /// padded; a name the NodeSet would not write is not one of its records.
    #[test]
    fn existing_records_are_read_from_the_node_list_as_the_nodeset_names_them() {
        use slurmscale_exporter::model::Partition;
        use std::sync::Arc;
        let list = |l: &str, padding: u32| {
            let mut snap = ClusterSnapshot::new("c", "");
            snap.partitions.data = Some(Arc::new(vec![Partition {
                name: "gpu".into(),
                state: "UP".into(),
                total_nodes: 0,
                total_cpus: 0,
                total_memory_bytes: None,
                total_gpus: None,
                max_nodes_per_job: None,
                node_list: l.into(),
                never_suspends: false,
                node_sets: Default::default(),
            }]));
            assert_eq!(
                existing(&snap, "other", &Names::new("gpu-", 0, 2)),
                [false; 2]
            );
            existing(&snap, "gpu", &Names::new("gpu-", padding, 12))
        };
        let want = |on: &[usize]| (0..12).map(|o| on.contains(&o)).collect::<Vec<_>>();
        assert_eq!(list("gpu-[0-1,3],login", 0), want(&[0, 1, 3]));
        assert_eq!(list("gpu-0,gpu-1,login,gpu-3", 0), want(&[0, 1, 3]));
        assert_eq!(
            list("gpu-[08-11]", 0),
            want(&[10, 11]),
            "gpu-08 is not ordinal 8"
        );
        assert_eq!(list("gpu-[08-11]", 2), want(&[8, 9, 10, 11]));
        assert_eq!(list("gpu-[8-9,10-99]", 2), want(&[10, 11]));
        assert_eq!(list("gpu-[1-2]x,gpu-[5-6]", 0), want(&[5, 6]));
    }

    #[test]
    fn only_missing_records_are_made_with_the_nodesets_features_and_shape() {
        let wanted = Names::new("slinky-", 0, 4);
        let existing = [true, false, true, false];
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
        assert_eq!(
            missing(
                &wanted,
                &[true; 4],
                &features,
                &Shape::default(),
                Kind::Future
            ),
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
        let wanted = Names::new("planned-", 0, 3);
        let existing = [true, false, false];
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
