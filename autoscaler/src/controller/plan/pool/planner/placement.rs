//! Where a pending pod may go in the pool, as kube-scheduler would judge it for the pool's
//! nodes: its size against what is free, its node selector and required node affinity, and
//! its tolerations against the node's taints. The planner ([`super::plan`]) asks these
//! predicates which Slurm nodes Kubernetes needs, and drains only nodes a pod could use.

use super::PoolNode;
use crate::pool::{PendingPod, Placement};

/// Whether the scheduler could put a pod of `placement` on `node` (size aside).
pub fn allows(placement: &Placement, node: &PoolNode) -> bool {
    let (labels, name) = (&node.labels, node.k8s_node.as_str());
    node.taints
        .iter()
        .all(|t| placement.tolerations.iter().any(|o| o.tolerates(t)))
        && placement
            .node_selector
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
        && (placement.terms.is_empty()
            || placement
                .terms
                .iter()
                // As in Kubernetes, an empty term matches no node.
                .any(|t| !t.is_empty() && t.iter().all(|r| r.matches(name, labels))))
}

/// Where the pending pods would go: first onto the room Kubernetes already has in the pool,
/// then onto Slurm nodes taken for it — our drains first, then `candidates` in drain order —
/// each pod only where its size, node selector, required affinity and tolerations allow.
/// Pods no pool node could take are left out: no rebalancing places them.
pub struct PodPlacement<'a> {
    /// Slurm nodes the pods need, in the order they were taken.
    pub taken: Vec<&'a PoolNode>,
}

impl PodPlacement<'_> {
    /// Nodes Kubernetes needs from Slurm.
    pub fn need(&self) -> u64 {
        self.taken.len() as u64
    }
}

/// Places `pods` (largest first) as [`PodPlacement`] says.
pub fn place_pods<'a>(
    pool: &'a [PoolNode],
    pods: &[PendingPod],
    candidates: &[&'a PoolNode],
) -> PodPlacement<'a> {
    let room = |n: &PoolNode| {
        [
            (n.cpu - n.k8s_cpu).max(0.0),
            (n.memory - n.k8s_memory).max(0.0),
            (n.gpu - n.k8s_gpu).max(0.0),
        ]
    };
    let mut bins: Vec<(&PoolNode, [f64; 3])> = pool
        .iter()
        .filter(|n| n.slurm.is_none())
        .map(|n| (n, room(n)))
        .collect();
    let ours = pool
        .iter()
        .filter(|n| n.slurm.as_ref().is_some_and(|s| s.drained_by_us));
    let mut spare: Vec<&PoolNode> = ours.chain(candidates.iter().copied()).collect();
    let mut pods: Vec<&PendingPod> = pods.iter().collect();
    pods.sort_by(|a, b| {
        (b.gpu.total_cmp(&a.gpu))
            .then(b.cpu.total_cmp(&a.cpu))
            .then(b.memory.total_cmp(&a.memory))
    });
    let mut taken = Vec::new();
    for p in pods {
        let ask = [p.cpu, p.memory, p.gpu];
        let fits = |n: &PoolNode, r: &[f64; 3]| {
            r.iter().zip(&ask).all(|(have, want)| have >= want) && allows(&p.placement, n)
        };
        let take = |r: &mut [f64; 3]| {
            r.iter_mut()
                .zip(&ask)
                .for_each(|(have, want)| *have -= want)
        };
        if let Some(bin) = bins.iter_mut().find(|(n, r)| fits(n, r)) {
            take(&mut bin.1);
            continue;
        }
        let Some(i) = spare.iter().position(|n| fits(n, &room(n))) else {
            continue;
        };
        let n = spare.remove(i);
        let mut r = room(n);
        take(&mut r);
        bins.push((n, r));
        taken.push(n);
    }
    PodPlacement { taken }
}

/// Nodes Kubernetes needs from Slurm for `pods`, any Slurm node of the pool being a
/// candidate (the planner's tests; the planner places them in drain order).
#[cfg(test)]
pub fn kubernetes_need(pool: &[PoolNode], pods: &[PendingPod]) -> u64 {
    let candidates: Vec<&PoolNode> = pool
        .iter()
        .filter(|n| n.slurm.as_ref().is_some_and(|s| !s.drained_by_us))
        .collect();
    place_pods(pool, pods, &candidates).need()
}
