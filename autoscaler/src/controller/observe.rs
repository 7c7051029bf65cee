//! Stage one: every input of a plan, gathered into one plain [`Observation`] — the target,
//! the Slurm signals of its partitions, what the policy asks for besides (for a colocated
//! pool the ledger, its nodes and the pods that want room) and the time. Reads only; what is
//! read here and what a policy remembered itself is all it may look at, which is what keeps
//! planning pure.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use kube::ResourceExt;
use slurmscale_exporter::k8s::ledger::Owner;
use slurmscale_exporter::k8s::watch::KubeSnapshot;
use slurmscale_exporter::model::demand::Demand;
use slurmscale_exporter::model::origin::Origin;
use slurmscale_exporter::model::{Node, NodeBase, NodeFlags, NodeWork};
use slurmscale_exporter::signals::{PartitionSignals, ShapeHints, Untrusted, partition_signals};
use slurmscale_exporter::slurm::ApiVersion;
use slurmscale_exporter::snapshot::ClusterSnapshot;

use super::Controller;
use crate::actuator::{Kubernetes, Target};
use crate::colocation::{PendingPod, PoolNode, SlurmNode};
use crate::crd::{ColocationSpec, NodeSetAutoscaler, NodeSetAutoscalerSpec};
use crate::error::{Error, Result};
use crate::policy::{Bounds, Signals};
use crate::pool::{NodeSetPod, PoolReader};
use crate::records;
use crate::slurm_nodes::SlurmNodes;
use crate::slurm_planned::Ordinal;

/// Everything a plan is made from.
#[derive(Clone, Debug)]
pub struct Observation {
    pub now: SystemTime,
    pub target: Target,
    /// The Slurm cluster the autoscaler reads, when it can be told.
    pub cluster: Option<String>,
    /// Busy nodes and demand of its partitions, or why they cannot be trusted.
    pub signals: Signals,
    /// Colocated autoscalers: the pool.
    pub pool: Option<PoolView>,
    /// Autoscalers that keep node records (`spec.nodeRecords`, slurm-planned mode): what
    /// there is.
    pub records: Option<RecordsView>,
    /// Slurm-planned autoscalers: each ordinal's record and pod, once both could be read.
    pub planned: Option<PlannedView>,
    /// The slurmrestd API version, for Slurm node writes (unknown until it answered).
    pub slurm_api: Option<ApiVersion>,
    /// The Slurm release slurmrestd says it runs, e.g. `24.11.5`.
    pub slurm_release: Option<String>,
    /// When slurmrestd last confirmed the Slurm nodes seen: a node write sent after that
    /// cannot show in them yet.
    pub slurm_nodes_at: Option<SystemTime>,
}

/// A slurm-planned NodeSet, ordinal by ordinal.
#[derive(Clone, Debug)]
pub struct PlannedView {
    /// Index = ordinal, below `maxReplicas`.
    pub ordinals: Vec<Ordinal>,
    /// The NodeSet's pods by name (their ordinals' pods are in `ordinals`).
    pub pods: crate::pool::NamedPods,
    /// Records slurmctld lists in the partition that `/nodes` does not show (22.05 hides
    /// powered-down CLOUD nodes without `PrivateData=cloud`).
    pub hidden: Vec<String>,
    /// The partition, when it has `SuspendTime=INFINITE`: slurmctld never asks for a node
    /// to go, so pods would stay for good.
    pub never_suspends: Option<String>,
    /// Which configuration slurmctld runs on (`/diag`: moves when it reloads).
    pub config_generation: Option<(i64, u64)>,
}

/// What a policy reads.
#[derive(Clone, Copy, Debug, Default)]
pub struct Inputs<'a> {
    /// Jobs needing more nodes than this are unsatisfiable, not demand.
    pub max_nodes: Option<u64>,
    /// Only the first partition counts.
    pub one_partition: bool,
    /// The colocated pool to read: its ledger, nodes and the pods that want room.
    pub pool: Option<&'a ColocationSpec>,
    /// Each ordinal's node record and pod (slurm-planned).
    pub ordinals: bool,
}

/// The node records of the target's pods, as slurmctld has them.
#[derive(Clone, Debug)]
pub struct RecordsView {
    /// One per ordinal below `maxReplicas`, named as the pods are.
    pub wanted: records::Names,
    /// Which of them slurmctld has in the partition (records and registered nodes).
    pub existing: Vec<bool>,
    /// What the records are.
    pub kind: records::Kind,
}

/// A colocated pool as observed.
#[derive(Clone, Debug)]
pub struct PoolView {
    pub nodes: Vec<PoolNode>,
    /// Pods Kubernetes cannot place.
    pub pods: Vec<PendingPod>,
    /// The NodeSet's own pods no node has room for.
    pub unschedulable_nodeset_pods: u64,
    /// Whether the GenericNode and Node watches can be trusted, or why not.
    pub ledger: Result<(), String>,
}

/// The target and its scale.
pub async fn target<K: Kubernetes>(kube: &K, nsa: &NodeSetAutoscaler) -> Result<Target> {
    kube.read(
        &nsa.namespace().unwrap_or_default(),
        &nsa.spec.scale_target_ref,
    )
    .await
}

/// Everything else the policy reads (`inputs`).
pub async fn observe<K: Kubernetes, S: SlurmNodes, P: PoolReader>(
    ctl: &Controller<K, S, P>,
    nsa: &NodeSetAutoscaler,
    inputs: Inputs<'_>,
    target: Target,
    now: SystemTime,
) -> Result<Observation> {
    let spec = &nsa.spec;
    let cluster = ctl.cluster_of(nsa).map(String::from);
    let snapshot = snapshot(ctl, cluster.as_deref());
    let mut partitions = partitions(spec, &target);
    if inputs.one_partition {
        partitions.truncate(1);
    }
    // What the site set (the autoscaler's spec over the NodeSet's annotation), then the
    // partition's nodes, then the NodeSet's pod template.
    let set = target.nodes.shape.or(spec
        .node_shape
        .as_ref()
        .map(|s| s.shape())
        .unwrap_or_default());
    let shape = ShapeHints {
        set,
        set_by: if spec.node_shape.as_ref().is_some_and(|s| s.cpus.is_some()) {
            "NodeSetAutoscaler"
        } else {
            "NodeSet annotation"
        },
        template: target.nodes.template_shape,
    };
    let origins: &[Origin] = if spec.slurm.origins.is_empty() {
        &Origin::ALL
    } else {
        &spec.slurm.origins
    };
    let ask = Ask {
        max_nodes: inputs.max_nodes,
        shape,
        origins,
    };
    let signals = snapshot
        .as_ref()
        .map_err(Clone::clone)
        .and_then(|s| signals(s, &partitions, &ask, now, ctl.cfg.stale_after));
    let snap = snapshot.as_deref().ok();
    let records = records::Kind::of(spec).map(|kind| {
        let prefix = match target.nodes.node_prefix.as_str() {
            "" => format!("{}-", spec.scale_target_ref.name),
            p => p.to_string(),
        };
        let wanted = records::Names::new(
            &prefix,
            target.nodes.ordinal_padding,
            Bounds::from(spec).max,
        );
        RecordsView {
            existing: snap.map_or_else(
                || vec![false; wanted.len()],
                |s| records::existing(s, &partitions[0], &wanted),
            ),
            kind,
            wanted,
        }
    });
    let planned = match (inputs.ordinals, &records, snap) {
        (true, Some(view), Some(snap)) => {
            planned(&ctl.seam.pool, nsa, (&target, &partitions[0]), view, snap).await?
        }
        _ => None,
    };
    let slurm_api = snap.and_then(|s| s.api_version);
    let slurm_release = snap.and_then(|s| s.release.clone());
    let slurm_nodes_at = snap.and_then(|s| s.nodes.last_success);
    let pool = match inputs.pool {
        None => None,
        Some(col) => {
            let snap = snapshot.map_err(|why| Error::NoSlurm(why.to_string()))?;
            let scope = (
                cluster.as_deref().unwrap_or_default(),
                partitions[0].as_str(),
            );
            Some(pool(&ctl.seam.pool, nsa, col, &target, &snap, scope).await?)
        }
    };
    Ok(Observation {
        now,
        target,
        cluster,
        signals,
        pool,
        records,
        planned,
        slurm_api,
        slurm_release,
        slurm_nodes_at,
    })
}

/// Each ordinal's record (by the name its pod registers) and pod; `None` while `/nodes`
/// has not answered.
async fn planned<P: PoolReader>(
    reader: &P,
    nsa: &NodeSetAutoscaler,
    (target, partition): (&Target, &str),
    view: &RecordsView,
    snap: &ClusterSnapshot,
) -> Result<Option<PlannedView>> {
    let Some(nodes) = snap.nodes.data.as_deref() else {
        return Ok(None);
    };
    let selector = target.selector.as_deref().ok_or_else(|| {
        Error::Target(
            nsa.spec.scale_target_ref.name.clone(),
            "has no status.selector, so its pods cannot be found".into(),
        )
    })?;
    let named = reader
        .named_pods(&nsa.namespace().unwrap_or_default(), selector)
        .await?;
    let mut pods: Vec<Option<crate::pool::PodState>> = vec![None; view.wanted.len()];
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
        .and_then(|ps| ps.iter().find(|p| &*p.name == partition))
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

/// The ordinal of a NodeSet's pod: its pods are `<name>-<ordinal>`.
pub fn pod_ordinal(name: &str) -> Option<usize> {
    name.rsplit_once('-').and_then(|(_, o)| o.parse().ok())
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

/// The latest snapshot of the autoscaler's Slurm cluster, or why there is none.
fn snapshot<K, S, P>(
    ctl: &Controller<K, S, P>,
    cluster: Option<&str>,
) -> Result<std::sync::Arc<ClusterSnapshot>, Untrusted> {
    let cluster = cluster.ok_or(Untrusted::UnknownCluster(None))?;
    let rx = ctl
        .clusters
        .get(cluster)
        .ok_or_else(|| Untrusted::UnknownCluster(Some(cluster.to_string())))?;
    Ok(rx.borrow().clone())
}

/// The partitions whose work counts: the spec's, else the one the target serves.
fn partitions(spec: &NodeSetAutoscalerSpec, target: &Target) -> Vec<String> {
    if spec.slurm.partitions.is_empty() {
        vec![target.partition.clone()]
    } else {
        spec.slurm.partitions.clone()
    }
}

/// What an autoscaler asks of its partitions' pending work.
struct Ask<'a> {
    /// Jobs needing more nodes than this are unsatisfiable.
    max_nodes: Option<u64>,
    shape: ShapeHints,
    origins: &'a [Origin],
}

/// The Slurm side of `partitions`, merged: busy nodes and demand add up, the oldest data
/// counts. Jobs needing more than `ask.max_nodes` are unsatisfiable, not demand.
fn signals(
    snap: &ClusterSnapshot,
    partitions: &[String],
    ask: &Ask<'_>,
    now: SystemTime,
    stale_after: Duration,
) -> Signals {
    let mut merged: Option<PartitionSignals> = None;
    for p in partitions {
        let s = partition_signals(
            snap,
            p,
            ask.max_nodes,
            &ask.shape,
            ask.origins,
            now,
            stale_after,
        )?;
        merged = Some(match merged {
            None => s,
            Some(m) => PartitionSignals {
                busy_nodes: m.busy_nodes + s.busy_nodes,
                total_nodes: m.total_nodes + s.total_nodes,
                demand: Demand {
                    nodes: m.demand.nodes + s.demand.nodes,
                    maybe_started_nodes: m.demand.maybe_started_nodes
                        + s.demand.maybe_started_nodes,
                    open_ended: m.demand.open_ended || s.demand.open_ended,
                    unsatisfiable_jobs: m.demand.unsatisfiable_jobs + s.demand.unsatisfiable_jobs,
                    ..m.demand
                },
                // The first partition's shape stands for the NodeSet's nodes.
                shape: m.shape,
                shape_source: m.shape_source,
                as_of: m.as_of.min(s.as_of),
            },
        });
    }
    merged.ok_or_else(|| Untrusted::UnknownPartition(String::new()))
}

/// The pool of a colocated autoscaler: the GenericNodes labelled with its pool (default: the
/// Slurm cluster's name), who holds each, and the pods that want room. `scope` is the Slurm
/// cluster and the partition.
async fn pool<P: PoolReader>(
    reader: &P,
    nsa: &NodeSetAutoscaler,
    col: &ColocationSpec,
    target: &Target,
    snap: &ClusterSnapshot,
    (cluster, partition): (&str, &str),
) -> Result<PoolView> {
    let kube = reader.ledger().ok_or_else(|| {
        Error::Target(
            nsa.name_any(),
            "colocation needs the GenericNode watch".into(),
        )
    })?;
    let selector = target.selector.as_deref().ok_or_else(|| {
        Error::Target(
            nsa.spec.scale_target_ref.name.clone(),
            "has no status.selector, so its pods cannot be found on the pool's nodes".into(),
        )
    })?;
    let pods = reader
        .pod_nodes(&nsa.namespace().unwrap_or_default(), selector)
        .await?;
    let name = col.pool.as_deref().unwrap_or(cluster);
    let held = slurm_held(&pods.by_node, target.replicas, snap, &kube);
    let nodes = pool_nodes(&kube, name, &held, snap, partition);
    Ok(PoolView {
        nodes,
        pods: reader.unschedulable_pods(&col.pod_selector).await?,
        unschedulable_nodeset_pods: pods.unschedulable,
        ledger: watches_trusted(&kube),
    })
}

/// The ledger can be trusted once the GenericNode and Node watches list and nothing fails.
fn watches_trusted(kube: &KubeSnapshot) -> Result<(), String> {
    ["genericnodes", "nodes"]
        .iter()
        .try_for_each(|r| match kube.watches.get(r) {
            Some(h) if h.served && h.synced && h.last_error.is_none() => Ok(()),
            Some(h) => Err(format!(
                "{r} watch: {}",
                h.last_error.clone().unwrap_or_else(|| "not listed".into())
            )),
            None => Err(format!("{r} not watched")),
        })
}

/// The nodes Slurm holds: those a NodeSet pod is bound to, less those on their way to
/// Kubernetes — a terminating pod's, and a marked pod's while replicas are below the pods
/// bound (slurm-operator removes marked pods first). A mark with no drop behind it (replicas
/// rose again before the operator acted) hands nothing over: that node is still Slurm's,
/// and left as "leaving" it would belong to neither side for good. Of several marked pods,
/// those on nodes drained empty are taken to go first.
fn slurm_held(
    pods: &BTreeMap<String, NodeSetPod>,
    replicas: u64,
    snap: &ClusterSnapshot,
    kube: &KubeSnapshot,
) -> BTreeSet<String> {
    let bound = pods
        .values()
        .filter(|p| **p != NodeSetPod::Terminating)
        .count() as u64;
    let mut going = bound.saturating_sub(replicas) as usize;
    let mut held: BTreeSet<String> = pods
        .iter()
        .filter(|(_, p)| **p == NodeSetPod::Serving)
        .map(|(n, _)| n.clone())
        .collect();
    let mut marked: Vec<&String> = pods
        .iter()
        .filter(|(_, p)| **p == NodeSetPod::Marked)
        .map(|(n, _)| n)
        .collect();
    if going < marked.len() {
        let aliases: std::collections::HashMap<&str, &str> = kube
            .ledger
            .iter()
            .map(|l| (l.name.as_str(), l.alias.as_str()))
            .collect();
        let drained_empty: BTreeSet<&str> = snap
            .nodes
            .data
            .as_deref()
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .filter(|n| n.state.drain() && !n.busy())
            .map(|n| n.name.as_str())
            .collect();
        let empty_drained = |k8s: &str| aliases.get(k8s).is_some_and(|a| drained_empty.contains(a));
        marked.sort_by_key(|n| !empty_drained(n));
    }
    for n in marked {
        if going > 0 {
            going -= 1;
        } else {
            held.insert(n.clone());
        }
    }
    held
}

/// The pool's nodes. Slurm holds a node while a pod of the NodeSet is bound there and not on
/// its way out ([`slurm_held`]); a node it holds that Slurm does not know (yet) is held but
/// not ours to drain. A node whose capacity is unknown cannot be accounted for: left out.
fn pool_nodes(
    kube: &KubeSnapshot,
    pool: &str,
    held: &BTreeSet<String>,
    snap: &ClusterSnapshot,
    partition: &str,
) -> Vec<PoolNode> {
    let slurm_nodes: std::collections::HashMap<&str, &Node> = snap
        .nodes
        .data
        .as_deref()
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .map(|n| (n.name.as_str(), n))
        .collect();
    let running_on = snap.jobs.data.as_ref().map(|j| &j.running_on);
    let work = |n: &str| {
        running_on
            .and_then(|r| r.get(n))
            .copied()
            .unwrap_or_default()
    };
    kube.ledger
        .iter()
        .filter(|l| l.cluster == pool)
        .filter_map(|ln| {
            let cap = kube.capacity.get(&ln.name)?;
            let slurm = held.contains(&ln.name).then(|| {
                slurm_nodes.get(ln.alias.as_str()).map_or(
                    SlurmNode {
                        unavailable: true,
                        ..Default::default()
                    },
                    |n| slurm_node(n, work(&n.name), partition),
                )
            });
            Some(PoolNode {
                k8s_node: ln.name.clone(),
                slurm_node: ln.alias.clone(),
                cpu: cap.get("cpu").unwrap_or(0.0),
                memory: cap.get("memory").unwrap_or(0.0),
                gpu: cap.get(crate::pool::GPU).unwrap_or(0.0),
                labels: cap.labels.clone(),
                taints: cap.taints.clone(),
                k8s_cpu: ln.held(Owner::Kubernetes, "cpu"),
                k8s_memory: ln.held(Owner::Kubernetes, "memory"),
                k8s_gpu: ln.held(Owner::Kubernetes, crate::pool::GPU),
                slurm,
            })
        })
        .collect()
}

/// A pool node as Slurm has it. Our drains carry our reason prefix; anyone else's drain,
/// and a node down, failing or not responding, is not ours to touch.
fn slurm_node(n: &Node, work: NodeWork, partition: &str) -> SlurmNode {
    let ours = n.state.drain() && n.reason.starts_with(crate::slurm_nodes::DRAIN_PREFIX);
    SlurmNode {
        running_jobs: work.jobs,
        free_at: work.free_at,
        in_partition: n.partitions.iter().any(|p| **p == *partition),
        busy: n.busy(),
        alloc_cpus: n.alloc_cpus,
        drained_by_us: ours,
        unavailable: (n.state.drain() && !ours)
            || matches!(
                n.state.base,
                NodeBase::Down | NodeBase::Error | NodeBase::Future
            )
            || n.state.flags.contains(NodeFlags::NOT_RESPONDING),
    }
}
