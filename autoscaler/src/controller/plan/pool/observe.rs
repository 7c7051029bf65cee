//! What a colocated autoscaler reads for itself: the pool's GenericNodes (ledger and
//! capacity), who holds each node (Slurm while a NodeSet pod is bound there and not on its way
//! out), Slurm's view of each, and the pods that want room.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kube::ResourceExt;
use slurmscale_exporter::k8s::ledger::Owner;
use slurmscale_exporter::k8s::watch::KubeSnapshot;
use slurmscale_exporter::model::{Jobs, Node, NodeBase, NodeFlags, NodeWork};
use slurmscale_exporter::snapshot::ClusterSnapshot;

use super::planner::{PoolNode, SlurmNode};
use crate::controller::observation::{OwnInput, Reading};
use crate::crd::ColocationSpec;
use crate::error::{Error, Result};
use crate::pool::{NodeSetPod, PendingPod};
use crate::slurm_nodes::DRAIN_PREFIX;

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

/// The pool, for an autoscaler that shares one (`spec.colocation`); its Slurm data must be
/// there.
pub(super) async fn observe(reading: Reading<'_>) -> Result<Option<OwnInput>> {
    let Some(col) = &reading.nsa.spec.colocation else {
        return Ok(None);
    };
    let snap = reading
        .snapshot
        .map_err(|why| Error::NoSlurm(why.to_string()))?;
    let pool = read(&reading, col, snap).await?;
    Ok(Some(Arc::new(pool)))
}

/// The pool of a colocated autoscaler: the GenericNodes labelled with its pool (default: the
/// Slurm cluster's name), who holds each, and the pods that want room.
async fn read(
    reading: &Reading<'_>,
    col: &ColocationSpec,
    snap: &ClusterSnapshot,
) -> Result<PoolView> {
    let (reader, nsa, target) = (reading.pool, reading.nsa, reading.target);
    let partition = reading.partitions[0].as_str();
    let kube = reader.ledger().ok_or_else(|| {
        Error::Target(
            nsa.name_any(),
            "colocation needs the GenericNode watch".into(),
        )
    })?;
    let selector = reading.selector(" on the pool's nodes")?;
    let pods = reader.pod_nodes(&reading.namespace(), selector).await?;
    let name = col
        .pool
        .as_deref()
        .unwrap_or(reading.cluster.unwrap_or_default());
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
    let work = |n: &str| node_work(snap.jobs.data.as_deref(), n);
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

/// The jobs running on node `n` as the job list shows them. Its jobs may be requeued only if
/// the list shows every job running anywhere: a job it has seen start but not where, or has
/// yet to see at all, may run on that node and be one Slurm would kill, not requeue.
fn node_work(jobs: Option<&Jobs>, n: &str) -> NodeWork {
    let Some(jobs) = jobs else {
        return NodeWork::default();
    };
    let whole = jobs.running_unplaced == 0 && !jobs.uncertain.unseen_new;
    let mut w = jobs.running_on.get(n).copied().unwrap_or_default();
    w.requeueable &= whole;
    w
}

/// A pool node as Slurm has it. Our drains carry our reason prefix; anyone else's drain,
/// and a node down, failing or not responding, is not ours to touch.
fn slurm_node(n: &Node, work: NodeWork, partition: &str) -> SlurmNode {
    let ours = n.state.drain() && n.reason.starts_with(DRAIN_PREFIX);
    SlurmNode {
        running_jobs: work.jobs,
        free_at: work.free_at,
        requeueable: work.requeueable,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nodes_jobs_may_be_requeued_only_while_the_list_shows_every_running_job() {
        let mut jobs = Jobs::default();
        let work = NodeWork {
            jobs: 1,
            free_at: Some(1_800_000_000),
            requeueable: true,
        };
        jobs.running_on.insert("c1".into(), work);
        assert_eq!(node_work(Some(&jobs), "c1"), work);
        assert_eq!(node_work(Some(&jobs), "c2"), NodeWork::default());
        assert_eq!(node_work(None, "c1"), NodeWork::default());
        // A job seen to start, its nodes not read yet; a new job not found yet.
        jobs.running_unplaced = 1;
        assert!(!node_work(Some(&jobs), "c1").requeueable);
        jobs.running_unplaced = 0;
        jobs.uncertain.unseen_new = true;
        let w = node_work(Some(&jobs), "c1");
        assert_eq!((w.jobs, w.requeueable), (1, false));
    }
}
