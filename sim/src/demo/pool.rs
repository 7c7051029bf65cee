//! The demo's colocated pool: eight Kubernetes nodes that Slurm's `cpu` partition and
//! Kubernetes' own pods share through the GenericNode ledger, as on ACK. Slurm holds a node
//! while a pod of the `cpu` NodeSet runs there (the simulated slurmctld brings its node up
//! `BOOT_SECONDS` after the pod lands); Kubernetes runs a few cores of daemons everywhere
//! and, in waves, `web` pods of 24 cores that fit only on a node Slurm does not hold. The
//! autoscaler's colocation planner moves nodes between the two; this module does what
//! slurm-operator and the Kubernetes scheduler would do with its decisions, on the
//! partition's [`Cluster`] (in its pool mode: nodes come and go by slot).

use std::collections::BTreeMap;

use crate::cluster::{Cluster, Slot as Node};
use slurmscale_autoscaler::colocation::{PendingPod, Placement};
use slurmscale_autoscaler::pool::NodeSetPod as PodState;
use slurmscale_exporter::k8s::ledger::{Capacity, LedgerNode, Owner};

use super::{CLUSTER, CPU_NODE, MIB, POOL};
use crate::workload::Rng;

/// Nodes in the pool, all Slurm's at the start.
pub const POOL_NODES: usize = 8;
/// A `web` pod: what it asks for.
const WEB_CPU: f64 = 24.0;
const WEB_MEMORY: f64 = 16.0 * (1u64 << 30) as f64;
/// Kubernetes pods may hold at most this many cores of a node a NodeSet pod goes to.
const ROOM_FOR_SLURMD: f64 = 8.0;

/// One Kubernetes node of the pool.
#[derive(Clone, Debug)]
pub struct Slot {
    pub k8s_node: String,
    /// A NodeSet pod runs here; `true` once it is given the deletion cost that makes
    /// slurm-operator remove it first.
    pod: Option<bool>,
    /// Cores Kubernetes' daemons hold here.
    daemons: f64,
}

/// A Kubernetes workload pod; pending while it has no node.
#[derive(Clone, Debug)]
struct WebPod {
    name: String,
    submitted: u64,
    seconds: u64,
    /// (node, since)
    placed: Option<(usize, u64)>,
}

#[derive(Clone, Debug)]
pub struct Pool {
    pub slots: Vec<Slot>,
    /// The `cpu` NodeSet's replicas, as the autoscaler set them.
    pub replicas: u64,
    web: Vec<WebPod>,
    next_pod: u64,
    next_wave: u64,
    rng: Rng,
    /// Seconds each placed web pod waited for a node.
    pub pod_waits: Vec<u64>,
}

/// The Slurm node of slot `i`.
pub fn slurm_name(i: usize) -> String {
    format!("{POOL}-{i}")
}

impl Pool {
    /// Slurm holds every node (the partition's slots are provided from the start); the
    /// first web pods ask for room at once.
    pub fn new(seed: u64) -> Self {
        let slots = (0..POOL_NODES)
            .map(|i| Slot {
                k8s_node: format!("node-{}", slurm_name(i)),
                pod: Some(false),
                daemons: 2.0,
            })
            .collect();
        Self {
            slots,
            replicas: POOL_NODES as u64,
            web: Vec::new(),
            next_pod: 1,
            next_wave: 0,
            rng: Rng::new(seed ^ 0xC0_10CA7E),
            pod_waits: Vec::new(),
        }
    }

    /// One simulated second of Kubernetes: a wave of web pods now and then, pods that are
    /// done leave, the NodeSet's pods follow its replicas, pending pods land where there is
    /// room, daemons wander.
    pub fn step(&mut self, tick: u64, slurm: &mut Cluster, now: i64) {
        if tick >= self.next_wave {
            let n = if tick == 0 { 2 } else { self.rng.range(1, 3) };
            for _ in 0..n {
                let seconds = self.rng.range(60, 150);
                self.web.push(WebPod {
                    name: format!("web-{}", self.next_pod),
                    submitted: tick,
                    seconds,
                    placed: None,
                });
                self.next_pod += 1;
            }
            self.next_wave = tick + self.rng.range(150, 300);
        }
        self.web
            .retain(|p| p.placed.is_none_or(|(_, since)| since + p.seconds > tick));
        self.operate(slurm, now);
        self.schedule(tick);
        for s in &mut self.slots {
            let step = self.rng.range(0, 2) as f64 - 1.0;
            s.daemons = (s.daemons + step * 0.5).clamp(1.0, 4.0);
        }
    }

    /// slurm-operator: pods to `replicas`. On scale-in pods marked to go leave first, then
    /// those not yet up, then idle ones; never one whose node runs a job. New pods land on
    /// the least loaded node without one that leaves room for slurmd.
    fn operate(&mut self, slurm: &mut Cluster, now: i64) {
        let pods = |s: &[Slot]| s.iter().filter(|s| s.pod.is_some()).count() as u64;
        while pods(&self.slots) > self.replicas {
            let victim = (0..self.slots.len())
                .filter(|&i| self.slots[i].pod.is_some() && slurm.slot(i as u32) != Node::Busy)
                .max_by_key(|&i| {
                    let marked = self.slots[i].pod == Some(true);
                    (marked, slurm.slot(i as u32) == Node::Booting, i)
                });
            let Some(i) = victim else { break };
            self.slots[i].pod = None;
            slurm.retire(i as u32);
        }
        while pods(&self.slots) < self.replicas {
            let k8s = self.kubernetes_cpu();
            let free = (0..self.slots.len())
                .filter(|i| self.slots[*i].pod.is_none() && k8s[*i] <= ROOM_FOR_SLURMD)
                .min_by(|a, b| k8s[*a].total_cmp(&k8s[*b]));
            let Some(i) = free else { break };
            self.slots[i].pod = Some(false);
            slurm.provide(i as u32, now);
        }
    }

    /// The Kubernetes scheduler: a pending pod lands on a node without a NodeSet pod that
    /// has room for it.
    fn schedule(&mut self, tick: u64) {
        for p in 0..self.web.len() {
            if self.web[p].placed.is_some() {
                continue;
            }
            let k8s = self.kubernetes_cpu();
            let room = (0..self.slots.len()).find(|i| {
                self.slots[*i].pod.is_none() && f64::from(CPU_NODE.cpus) - k8s[*i] >= WEB_CPU
            });
            if let Some(i) = room {
                self.web[p].placed = Some((i, tick));
                self.pod_waits.push(tick - self.web[p].submitted);
            }
        }
    }

    /// Cores Kubernetes holds on each node: daemons and placed web pods.
    fn kubernetes_cpu(&self) -> Vec<f64> {
        let mut k8s: Vec<f64> = self.slots.iter().map(|s| s.daemons).collect();
        for p in &self.web {
            if let Some((i, _)) = p.placed {
                k8s[i] += WEB_CPU;
            }
        }
        k8s
    }

    /// The autoscaler's write: the NodeSet's `spec.replicas`.
    pub fn scale(&mut self, replicas: u64) {
        self.replicas = replicas.min(POOL_NODES as u64);
    }

    /// The deletion cost on the NodeSet pods of these Kubernetes nodes.
    pub fn mark(&mut self, nodes: &[String]) {
        for s in &mut self.slots {
            if nodes.contains(&s.k8s_node)
                && let Some(marked) = &mut s.pod
            {
                *marked = true;
            }
        }
    }

    /// Pool nodes running a NodeSet pod, and how it stands.
    pub fn pod_nodes(&self) -> BTreeMap<String, PodState> {
        self.slots
            .iter()
            .filter_map(|s| {
                let state = if s.pod? {
                    PodState::Marked
                } else {
                    PodState::Serving
                };
                Some((s.k8s_node.clone(), state))
            })
            .collect()
    }

    /// Web pods no node has room for.
    pub fn unschedulable(&self) -> Vec<PendingPod> {
        self.web
            .iter()
            .filter(|p| p.placed.is_none())
            .map(|p| PendingPod {
                name: format!("web/{}", p.name),
                cpu: WEB_CPU,
                memory: WEB_MEMORY,
                gpu: 0.0,
                placement: Placement::default(),
            })
            .collect()
    }

    /// Nodes Slurm holds (a serving NodeSet pod is there).
    pub fn held(&self) -> u64 {
        self.slots.iter().filter(|s| s.pod == Some(false)).count() as u64
    }

    /// Web pods waiting for a node.
    pub fn waiting(&self) -> u64 {
        self.web.iter().filter(|p| p.placed.is_none()).count() as u64
    }

    /// The GenericNode ledger of the pool and its Nodes' capacity.
    pub fn ledger(&self, slurm: &Cluster) -> (Vec<LedgerNode>, BTreeMap<String, Capacity>) {
        let k8s = self.kubernetes_cpu();
        let web_memory: Vec<f64> = (0..self.slots.len())
            .map(|i| {
                let pods = self
                    .web
                    .iter()
                    .filter(|p| p.placed.is_some_and(|(n, _)| n == i));
                pods.count() as f64 * WEB_MEMORY
            })
            .collect();
        let mut ledger = Vec::new();
        let mut capacity = BTreeMap::new();
        for (i, s) in self.slots.iter().enumerate() {
            let (cpu, memory) = slurm
                .node_view(i as u32)
                .map_or((0, 0), |n| (n.alloc_cpus, n.alloc_memory_mib * MIB));
            ledger.push(LedgerNode {
                name: s.k8s_node.clone(),
                alias: slurm_name(i),
                cluster: CLUSTER.into(),
                allocated: BTreeMap::from([
                    ((Owner::Slurm, "cpu".to_string()), f64::from(cpu)),
                    ((Owner::Slurm, "memory".to_string()), memory as f64),
                    ((Owner::Kubernetes, "cpu".to_string()), k8s[i]),
                    (
                        (Owner::Kubernetes, "memory".to_string()),
                        s.daemons * (1u64 << 30) as f64 + web_memory[i],
                    ),
                ]),
                pending_checks: 0,
            });
            capacity.insert(
                s.k8s_node.clone(),
                Capacity {
                    resources: BTreeMap::from([
                        ("cpu".to_string(), f64::from(CPU_NODE.cpus)),
                        ("memory".to_string(), (CPU_NODE.memory_mib * MIB) as f64),
                    ]),
                    ..Default::default()
                },
            );
        }
        (ledger, capacity)
    }
}
