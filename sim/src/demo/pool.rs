//! The demo's colocated pool: eight Kubernetes nodes that Slurm's `cpu` partition and
//! Kubernetes' own pods share through the GenericNode ledger, as on ACK. It is the world the
//! shared-pool replay runs ([`PoolWorld`]: slurm-operator's NodeSet, the Kubernetes scheduler,
//! who holds each node), on the cpu partition's [`Cluster`], fed with `web` pods of 24 cores
//! that come in waves and fit only on a node Slurm does not hold. So `simulate --pods` of the
//! same jobs and pods gives what the demo shows, a test holds them to it.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::cluster::Cluster;
use crate::colocated::PoolWorld;
use crate::pods::PodRequest;
use crate::workload::Rng;
use slurmscale_autoscaler::fakes::Recorded;
use slurmscale_exporter::k8s::ledger::{Capacity, LedgerNode, Owner};

use super::{CLUSTER, MIB, POOL};

/// Nodes in the pool, all Slurm's at the start.
pub const POOL_NODES: usize = 8;
/// A `web` pod: what it asks for.
const WEB_CPU: f64 = 24.0;
const WEB_MEMORY_MIB: u64 = 16 * 1024;

/// The `web` pods of `seed` over `ticks` seconds from `base` (unix seconds): waves of one or
/// two every 150–300 s (two at the start), each pod running 60–150 s once placed.
pub fn web_pods(seed: u64, ticks: u64, base: i64) -> Vec<PodRequest> {
    let mut rng = Rng::new(seed ^ 0xC0_10CA7E);
    let mut pods = Vec::new();
    let mut tick = 0;
    while tick < ticks.max(1) {
        let n = if tick == 0 { 2 } else { rng.range(1, 3) };
        for _ in 0..n {
            pods.push(PodRequest {
                name: format!("web/web-{}", pods.len() + 1),
                submit: base + tick as i64,
                run: rng.range(60, 150),
                cpus: WEB_CPU,
                memory_mib: WEB_MEMORY_MIB,
                gpus: 0.0,
                priority: 0,
            });
        }
        tick += rng.range(150, 300);
    }
    pods
}

pub struct Pool {
    pub world: PoolWorld,
    /// The pods, as the world runs them.
    pods: Arc<[PodRequest]>,
    /// The waiting pods as last shown to the controller (their version).
    pub shown_pending: Option<u64>,
}

impl Pool {
    /// Slurm holds every node of `cluster` (the partition's, in its pool mode) from `base`.
    pub fn new(cluster: &mut Cluster, pods: Vec<PodRequest>, base: i64) -> Self {
        let pods: Arc<[PodRequest]> = pods.into();
        let nodes = POOL_NODES as u32;
        let world = PoolWorld::new(cluster, pods.clone(), (nodes, true, false), POOL, base);
        Self {
            world,
            pods,
            shown_pending: None,
        }
    }

    /// Kubernetes up to `now`: pods that are done leave, new ones arrive, the scheduler binds
    /// what fits.
    pub fn advance(&mut self, now: i64) {
        self.world.kube.advance(now);
    }

    /// slurm-operator follows the NodeSet's replicas, the scheduler binds what now fits, and
    /// slurmctld takes in the nodes that came and went.
    pub fn settle(&mut self, cluster: &mut Cluster, now: i64) {
        self.world.operate(cluster, now);
        cluster.advance(now);
    }

    /// One of the autoscaler's writes to the pool.
    pub fn apply(&mut self, cluster: &mut Cluster, write: &Recorded, now: i64) {
        self.world.apply(cluster, write, now);
    }

    /// Nodes Slurm holds.
    pub fn held(&self) -> u64 {
        self.world.slurm_nodes()
    }

    pub fn replicas(&self) -> u64 {
        self.world.nodeset.replicas.into()
    }

    /// Web pods waiting for a node.
    pub fn waiting(&self) -> u64 {
        self.world.kube.pending_count() as u64
    }

    /// The web pods placed so far, and when (unix seconds).
    fn placed(&self) -> impl Iterator<Item = (&PodRequest, i64)> {
        self.pods
            .iter()
            .zip(&self.world.kube.started)
            .filter_map(|(p, s)| Some((p, (*s)?)))
    }

    /// Seconds each placed web pod waited for its node.
    pub fn pod_waits(&self) -> Vec<u64> {
        self.placed().map(|(p, s)| (s - p.submit) as u64).collect()
    }

    /// Each pod's start (unix seconds), once placed.
    pub fn pod_starts(&self) -> Vec<(String, i64)> {
        self.placed().map(|(p, s)| (p.name.clone(), s)).collect()
    }

    /// The GenericNode ledger of the pool: what Kubernetes' pods hold, as the controller
    /// reads it, and what Slurm's jobs hold, which the exporter shows beside it.
    pub fn ledger(&self, slurm: &Cluster) -> (Vec<LedgerNode>, BTreeMap<String, Capacity>) {
        let (mut ledger, capacity) = self.world.empty_ledger(&slurm.shape, CLUSTER);
        for (i, entry) in ledger.iter_mut().enumerate() {
            let i = i as u32;
            self.world.set_kube_held(entry, i);
            let (cpu, memory) = slurm
                .node_view(i)
                .map_or((0, 0), |n| (n.alloc_cpus, n.alloc_memory_mib * MIB));
            entry
                .allocated
                .insert((Owner::Slurm, "cpu".into()), f64::from(cpu));
            entry
                .allocated
                .insert((Owner::Slurm, "memory".into()), memory as f64);
        }
        (ledger, capacity)
    }
}
