//! A colocated pool as Kubernetes keeps it: which side holds each node, slurm-operator's
//! NodeSet following `spec.replicas`, and Kubernetes' own pods ([`Kube`]). One world for the
//! shared-pool replay (`simulate --pods`) and the demo's cpu pool, so the planner is shown in
//! the demo the cluster it is judged on in the replay. The pool's slurmctld (a [`Cluster`]
//! in its pool mode) is passed in: the replay keeps it beside its counts, the demo beside its
//! other partitions.
//!
//! The controller reads the NodeSet's pods by node, the pods that wait and the GenericNode
//! ledger from here, and its writes — replicas, drains and resumes, pods marked to go — are
//! carried out here ([`PoolWorld::apply`]), as slurm-operator and slurmctld would.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use slurmscale_autoscaler::fakes::{self, Recorded};
use slurmscale_autoscaler::pool::{GPU, NodeSetPod, PendingPod, Placement, RESERVED_TAINT};
use slurmscale_exporter::k8s::ledger::{Capacity, LedgerNode, Owner, Taint};
use slurmscale_exporter::k8s::watch::KubeSnapshot;

use super::cluster::{Cluster, Slot};
use super::kube::{Kube, Res};
use super::operator;
use super::pods::PodRequest;
use super::trace::NodeShape;

/// Who holds a node of the pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holder {
    Slurm,
    Kube,
}

/// The NodeSet as slurm-operator keeps it.
#[derive(Debug, Default)]
pub struct NodeSet {
    /// `spec.replicas`, as the autoscaler set it.
    pub replicas: u32,
    /// Pods created but not placed yet (no empty node for them).
    pub unplaced: u32,
    /// Slots Slurm holds whose pod is not being removed.
    pub active: u32,
    /// Slots whose pod carries the deletion cost that makes it go first.
    pub marked: BTreeSet<u32>,
    /// Slots whose pod is being removed (the node drains, then goes).
    pub leaving: BTreeSet<u32>,
}

pub struct PoolWorld {
    pub kube: Kube,
    pub holder: Vec<Holder>,
    pub nodeset: NodeSet,
    /// Slurm's nodes are `<partition>-<slot>`.
    partition: String,
    /// Nodes handed from Slurm to Kubernetes, and back.
    pub to_kubernetes: u64,
    pub to_slurm: u64,
    /// Drains the autoscaler set.
    pub drains: u64,
    /// Slots whose holder changed since [`PoolWorld::take_changed`].
    changed: Vec<u32>,
    /// Slots the autoscaler reserved for the NodeSet's pods (tainted: no new pod lands
    /// there, and a new NodeSet pod takes an empty one first).
    pub reserved: BTreeSet<u32>,
    /// Bumped whenever `reserved` changes, so a reader shows the taints again.
    pub reserved_version: u64,
}

impl PoolWorld {
    /// Slots `0..split` Slurm's (their NodeSet pods up at `start` when `provide`), the rest
    /// Kubernetes'; pods may use every node when `pods_anywhere` (Slurm-first sharing).
    pub fn new(
        cluster: &mut Cluster,
        pods: Arc<[PodRequest]>,
        (split, provide, pods_anywhere): (u32, bool, bool),
        partition: &str,
        start: i64,
    ) -> Self {
        let nodes = cluster.max_nodes();
        let split = split.min(nodes);
        let mut kube = Kube::new(&cluster.shape, nodes, pods);
        let mut holder = vec![Holder::Kube; nodes as usize];
        for i in 0..nodes {
            if i < split {
                holder[i as usize] = Holder::Slurm;
                if provide {
                    cluster.provide_now(i, start);
                }
            }
            kube.set_usable(i, pods_anywhere || holder[i as usize] == Holder::Kube);
        }
        Self {
            kube,
            holder,
            nodeset: NodeSet {
                replicas: split,
                active: split,
                ..NodeSet::default()
            },
            partition: partition.into(),
            to_kubernetes: 0,
            to_slurm: 0,
            drains: 0,
            changed: Vec::new(),
            reserved: BTreeSet::new(),
            reserved_version: 0,
        }
    }

    pub fn nodes(&self) -> u32 {
        self.holder.len() as u32
    }

    pub fn slurms(&self, i: u32) -> bool {
        self.holder[i as usize] == Holder::Slurm
    }

    /// Nodes Slurm holds (its NodeSet pod is there, leaving or not).
    pub fn slurm_nodes(&self) -> u64 {
        self.holder.iter().filter(|h| **h == Holder::Slurm).count() as u64
    }

    /// The slots whose holder changed since the last call.
    pub fn take_changed(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.changed)
    }

    pub fn hand_to_kube(&mut self, i: u32) {
        self.holder[i as usize] = Holder::Kube;
        self.kube.set_usable(i, !self.reserved.contains(&i));
        self.to_kubernetes += 1;
        self.changed.push(i);
    }

    pub fn hand_to_slurm(&mut self, cluster: &mut Cluster, i: u32, now: i64) {
        self.holder[i as usize] = Holder::Slurm;
        self.kube.set_usable(i, false);
        cluster.provide(i, now);
        self.to_slurm += 1;
        self.changed.push(i);
    }

    /// Slots whose NodeSet pod was removed and whose node is gone go to Kubernetes.
    fn collect_released(&mut self, cluster: &Cluster) {
        let gone: Vec<u32> = self
            .nodeset
            .leaving
            .iter()
            .copied()
            .filter(|&i| cluster.slot(i) == Slot::Off)
            .collect();
        for i in gone {
            self.nodeset.leaving.remove(&i);
            self.nodeset.marked.remove(&i);
            self.hand_to_kube(i);
        }
    }

    /// slurm-operator following `spec.replicas`: removes the pods it ranks first
    /// ([`operator::condemn`]; pods not placed yet are unbound and go first), and creates new
    /// ones, which land — after the pods already waiting, as the scheduler takes them in
    /// creation order — on nodes left empty.
    pub fn operate(&mut self, cluster: &mut Cluster, now: i64) {
        let ns = &mut self.nodeset;
        let have = ns.active + ns.unplaced;
        if ns.replicas < have {
            let nodes = self.holder.len() as u32;
            let unplaced = (0..ns.unplaced).map(|k| operator::Pod {
                ordinal: nodes + k,
                bound: false,
                ready: false,
                marked: false,
                deadline: None,
                cordoned: false,
            });
            let placed = (0..nodes)
                .filter(|&i| self.holder[i as usize] == Holder::Slurm && !ns.leaving.contains(&i))
                .map(|i| cluster.nodeset_pod(i, ns.marked.contains(&i)));
            let pods = placed.chain(unplaced).collect();
            for pod in operator::condemn(pods, (have - ns.replicas) as usize) {
                if !pod.bound {
                    ns.unplaced -= 1;
                    continue;
                }
                ns.leaving.insert(pod.ordinal);
                ns.active -= 1;
                cluster.retire(pod.ordinal);
            }
        } else if ns.replicas > have {
            ns.unplaced += ns.replicas - have;
        }
        self.collect_released(cluster);
        self.kube.schedule(now);
        while self.nodeset.unplaced > 0 {
            // A node reserved for the NodeSet first: its taint keeps other pods off.
            let reserved = (self.reserved.iter().copied())
                .find(|&i| self.holder[i as usize] == Holder::Kube && self.kube.empty(i));
            let Some(i) = reserved.or_else(|| self.kube.first_empty()) else {
                break;
            };
            self.nodeset.unplaced -= 1;
            self.nodeset.active += 1;
            self.hand_to_slurm(cluster, i, now);
        }
    }

    /// One of the autoscaler's writes, carried out as slurm-operator and slurmctld would
    /// (a colocated pool's autoscaler keeps no records and retires no pod by name).
    pub fn apply(&mut self, cluster: &mut Cluster, write: &Recorded, now: i64) {
        match write {
            Recorded::Scale { replicas, .. } => {
                self.nodeset.replicas = *replicas as u32;
            }
            Recorded::Drain { node, .. } => {
                if let Some(i) = self.slot_of(node) {
                    cluster.drain(i, true, now);
                    self.drains += 1;
                }
            }
            Recorded::Resume { node } => {
                if let Some(i) = self.slot_of(node) {
                    cluster.drain(i, false, now);
                }
            }
            Recorded::Down { node, .. } => {
                if let Some(i) = self.slot_of(node) {
                    cluster.requeue_on(i, now);
                }
            }
            Recorded::MarkPodsOn { nodes } => {
                let slots = nodes.iter().filter_map(|n| slot_of_k8s(n));
                self.nodeset.marked.extend(slots);
            }
            Recorded::UnmarkPodsOn { nodes } => {
                for i in nodes.iter().filter_map(|n| slot_of_k8s(n)) {
                    self.nodeset.marked.remove(&i);
                }
            }
            Recorded::Reserve { node, on } => {
                if let Some(i) = slot_of_k8s(node) {
                    let changed = if *on {
                        self.reserved.insert(i)
                    } else {
                        self.reserved.remove(&i)
                    };
                    if self.holder[i as usize] == Holder::Kube {
                        self.kube.set_usable(i, !*on);
                    }
                    self.reserved_version += u64::from(changed);
                }
            }
            Recorded::EvictPodsOn { node } => {
                if let Some(i) = slot_of_k8s(node) {
                    self.kube.evict(i, now);
                }
            }
            Recorded::Create { .. }
            | Recorded::Reconfigure
            | Recorded::PowerUp { .. }
            | Recorded::MarkPods { .. }
            | Recorded::UnmarkPods { .. }
            | Recorded::Event { .. } => {}
        }
    }

    /// Kubernetes node `k8s_node`'s taints as the API server shows them: ours while it is
    /// reserved.
    pub fn show_reservation(&self, taints: &mut Vec<Taint>, k8s_node: &str) {
        taints.retain(|t| t.key != RESERVED_TAINT);
        if slot_of_k8s(k8s_node).is_some_and(|i| self.reserved.contains(&i)) {
            taints.push(Taint {
                key: RESERVED_TAINT.into(),
                value: String::new(),
                effect: "NoSchedule".into(),
            });
        }
    }

    /// The NodeSet's pods by Kubernetes node. Pods being removed are still bound: replicas
    /// below the pods tell them apart.
    pub fn pods_by_node(&self) -> BTreeMap<String, NodeSetPod> {
        (0..self.nodes())
            .filter(|&i| self.slurms(i))
            .map(|i| {
                let state = if self.nodeset.marked.contains(&i) {
                    NodeSetPod::Marked
                } else {
                    NodeSetPod::Serving
                };
                (k8s_name(i), state)
            })
            .collect()
    }

    /// What the controller reads of the pool's Kubernetes side into the in-memory seam:
    /// the NodeSet `target`'s replicas, its pods (matched by `selector`) by node and how many
    /// of them wait for a node, the pods no node has room for (written again only when they
    /// changed since `shown_pending`), and `ledger`, the GenericNode ledger with the nodes'
    /// capacity.
    pub fn show(
        &self,
        w: &mut fakes::World,
        (target, selector): (&str, &str),
        ledger: KubeSnapshot,
        shown_pending: &mut Option<u64>,
    ) {
        if *shown_pending != Some(self.kube.pending_version()) {
            *shown_pending = Some(self.kube.pending_version());
            w.unschedulable = self.unschedulable();
        }
        if let Some(t) = w.targets.get_mut(target) {
            t.replicas = u64::from(self.nodeset.replicas);
            t.version += 1;
        }
        w.pods.insert(selector.into(), self.pods_by_node());
        w.unscheduled
            .insert(selector.into(), u64::from(self.nodeset.unplaced));
        w.ledger = Some(ledger);
    }

    /// The pods no node has room for, as the controller lists them.
    pub fn unschedulable(&self) -> Vec<PendingPod> {
        self.kube
            .pending()
            .map(|p| PendingPod {
                name: p.name.clone(),
                cpu: p.cpus,
                memory: (p.memory_mib << 20) as f64,
                gpu: p.gpus,
                placement: Placement::default(),
            })
            .collect()
    }

    /// Slurm's node of slot `i`.
    pub fn slurm_name(&self, i: u32) -> String {
        format!("{}-{i}", self.partition)
    }

    fn slot_of(&self, slurm_node: &str) -> Option<u32> {
        let i = slurm_node
            .strip_prefix(self.partition.as_str())?
            .strip_prefix('-')?
            .parse()
            .ok()?;
        (i < self.nodes()).then_some(i)
    }

    /// The pool's GenericNode ledger with nothing held yet (see [`Self::set_kube_held`]), and its
    /// nodes' capacity; `cluster` is the Slurm cluster it is shared with.
    pub fn empty_ledger(
        &self,
        shape: &NodeShape,
        cluster: &str,
    ) -> (Vec<LedgerNode>, BTreeMap<String, Capacity>) {
        let node = Res::of_node(shape);
        let mut ledger = Vec::with_capacity(self.holder.len());
        let mut capacity = BTreeMap::new();
        for i in 0..self.nodes() {
            let allocated = ["cpu", "memory", GPU]
                .into_iter()
                .map(|r| ((Owner::Kubernetes, r.to_string()), 0.0))
                .collect();
            ledger.push(LedgerNode {
                name: k8s_name(i),
                alias: self.slurm_name(i),
                cluster: cluster.into(),
                allocated,
                pending_checks: 0,
            });
            let resources = [
                ("cpu".to_string(), node.cpu_m as f64 / 1000.0),
                // As the replay packs it: unbounded when memory is left out.
                ("memory".to_string(), node.mem_mib as f64 * 1_048_576.0),
                (GPU.to_string(), node.gpu_m as f64 / 1000.0),
            ]
            .into();
            capacity.insert(
                k8s_name(i),
                Capacity {
                    resources,
                    ..Capacity::default()
                },
            );
        }
        (ledger, capacity)
    }

    /// Writes what Kubernetes' pods hold on slot `i` into its ledger entry.
    pub fn set_kube_held(&self, entry: &mut LedgerNode, i: u32) {
        let held = self.kube.held(i);
        for (resource, v) in [
            ("cpu", held.cpu_m as f64 / 1000.0),
            ("memory", (held.mem_mib << 20) as f64),
            (GPU, held.gpu_m as f64 / 1000.0),
        ] {
            if let Some(slot) = entry
                .allocated
                .get_mut(&(Owner::Kubernetes, resource.to_string()))
            {
                *slot = v;
            }
        }
    }
}

/// The Kubernetes node of slot `i`.
pub fn k8s_name(i: u32) -> String {
    format!("pool-{i}")
}

fn slot_of_k8s(k8s_node: &str) -> Option<u32> {
    k8s_node.strip_prefix("pool-")?.parse().ok()
}
