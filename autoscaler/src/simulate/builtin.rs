//! The `builtin` policy: slurmscale's own [`Controller`], reconciling a real
//! NodeSetAutoscaler against Slurm snapshots of the simulated partition, on the simulation's
//! clock, through the in-memory [`Fake`] whose one scale target is the simulated NodeSet.
//! Nothing of the decision is re-implemented here.
//!
//! The real autoscaler polls slurmrestd every 2 s and reconciles each poll. Replaying months
//! tick by tick would be slow, so this one reconciles only on the 2 s polls where something
//! the policy reads changed (busy nodes, demand, replicas) and at the controller's own
//! [`Controller::next_revisit`] (a window or idle timeout ending); before such a poll it
//! also reconciles the poll just before, which saw the old inputs, so the decision history
//! holds the same records as a tick-by-tick run. A test checks both give the same schedule.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::watcher;
use slurmscale_exporter::model::{
    Gres, Jobs, Node, NodeBase, NodeFlags, NodeState, Partition, PendingClass, PendingJob,
};
use slurmscale_exporter::snapshot::ClusterSnapshot;
use tokio::sync::watch;

use super::Scaler;
use super::cluster::{Cluster, Counts};
use crate::controller::{Controller, ControllerConfig, Seam};
use crate::crd::{NodeSetAutoscaler, NodeSetAutoscalerSpec};
use crate::fakes::{Fake, FakeTarget, World, Write};
use crate::leader::Leadership;

const CLUSTER: &str = "simulated";
const PARTITION: &str = "sim";
const NAMESPACE: &str = "slurm";
/// The real autoscaler's default `--interval`.
const POLL: i64 = 2;

/// The NodeSetAutoscaler the builtin policy runs when none is given: the CRD's defaults,
/// scale to zero, up to the partition's size.
pub fn default_spec(max_nodes: u32) -> NodeSetAutoscalerSpec {
    serde_json::from_value(serde_json::json!({
        "scaleTargetRef": {"name": PARTITION},
        "maxReplicas": max_nodes,
    }))
    .expect("the default spec is valid")
}

pub struct Builtin {
    rt: tokio::runtime::Runtime,
    controller: Controller<Arc<Fake>, Arc<Fake>, Arc<Fake>>,
    target: Arc<Fake>,
    snapshots: watch::Sender<Arc<ClusterSnapshot>>,
    now_ms: Arc<AtomicU64>,
    _autoscalers: Writer<NodeSetAutoscaler>,
    /// Every node slot as /nodes would show it; changed in place (nothing else holds it
    /// between reconciles).
    nodes: Arc<Vec<Node>>,
    /// The pending jobs of the last reconcile.
    jobs: Arc<Jobs>,
    partitions: Arc<Vec<Partition>>,
    partition_list: Arc<[Arc<str>]>,
    /// What the policy read at the last reconcile, and when that was.
    seen: Option<(Counts, u32)>,
    last: Option<i64>,
    /// A poll is due at this time (something changed), or the controller asked to look.
    wake: Option<i64>,
    /// Reconcile at every poll instead of fast-forwarding (tests compare both).
    every_poll: bool,
    desired: u32,
}

fn node(i: u32, cluster: &Cluster) -> Node {
    let shape = cluster.shape;
    let gres = |count| {
        (shape.gpus > 0)
            .then(|| Gres {
                name: Arc::from("gpu"),
                kind: Arc::from(""),
                count,
            })
            .into_iter()
            .collect()
    };
    let mut n = Node {
        name: format!("{PARTITION}-{i}"),
        state: NodeState {
            base: NodeBase::Future,
            flags: NodeFlags::default(),
        },
        partitions: vec![Arc::from(PARTITION)],
        cpus: shape.cpus.into(),
        alloc_cpus: 0,
        memory_bytes: shape.memory_mib << 20,
        alloc_memory_bytes: 0,
        free_memory_bytes: None,
        gres: gres(shape.gpus.into()),
        gres_used: gres(0),
        reason: String::new(),
        reason_set_by: String::new(),
    };
    update(&mut n, i, cluster);
    n
}

/// Brings one node's Slurm view up to date: absent nodes (off, booting) are FUTURE.
fn update(n: &mut Node, i: u32, cluster: &Cluster) {
    match cluster.node_view(i) {
        None => {
            n.state.base = NodeBase::Future;
            n.state.flags = NodeFlags::default();
            n.alloc_cpus = 0;
            n.alloc_memory_bytes = 0;
        }
        Some((cpus, mem, gpus, draining)) => {
            n.state.base = match cpus {
                0 => NodeBase::Idle,
                c if c >= cluster.shape.cpus => NodeBase::Allocated,
                _ => NodeBase::Mixed,
            };
            n.state.flags = if draining {
                NodeFlags::DRAIN
            } else {
                NodeFlags::default()
            };
            n.alloc_cpus = cpus.into();
            n.alloc_memory_bytes = mem << 20;
            if let Some(g) = n.gres_used.first_mut() {
                g.count = gpus.into();
            }
        }
    }
    n.free_memory_bytes = Some(n.memory_bytes - n.alloc_memory_bytes);
}

/// The simulated NodeSet's replicas as its scale subresource shows them.
fn set_replicas(target: &Fake, replicas: u64) {
    target.with(|w| {
        if let Some(t) = w.targets.get_mut(PARTITION) {
            t.replicas = replicas;
        }
    });
}

impl Builtin {
    pub fn new(spec: &NodeSetAutoscalerSpec, cluster: &Cluster, every_poll: bool) -> Self {
        let mut spec = spec.clone();
        spec.scale_target_ref.name = PARTITION.into();
        spec.slurm.cluster = Some(CLUSTER.into());
        spec.slurm.partitions = vec![PARTITION.into()];
        spec.dry_run = false;
        spec.colocation = None;
        let mut nsa = NodeSetAutoscaler::new(PARTITION, spec);
        nsa.metadata.namespace = Some(NAMESPACE.into());
        nsa.metadata.generation = Some(1);
        let (store, mut writer) = reflector::store::<NodeSetAutoscaler>();
        writer.apply_watcher_event(&watcher::Event::Apply(nsa));
        let (snapshots, rx) = watch::channel(Arc::new(ClusterSnapshot::new(CLUSTER, "")));
        let now_ms = Arc::new(AtomicU64::new(0));
        let clock = {
            let now_ms = now_ms.clone();
            Arc::new(move || {
                SystemTime::UNIX_EPOCH + Duration::from_millis(now_ms.load(Ordering::Relaxed))
            })
        };
        let target = Arc::new(Fake::new(World {
            targets: [(PARTITION.to_string(), FakeTarget::default())].into(),
            ..World::default()
        }));
        set_replicas(&target, cluster.replicas().into());
        let seam = Seam {
            kubernetes: target.clone(),
            slurm: target.clone(),
            pool: target.clone(),
            clock,
        };
        let controller = Controller::new(
            seam,
            store,
            BTreeMap::from([(CLUSTER.to_string(), rx)]),
            Leadership::always(),
            ControllerConfig {
                resync: Duration::from_secs(POLL as u64),
                // Each reconcile reads a snapshot taken that instant.
                stale_after: slurmscale_exporter::signals::stale_after(Duration::from_secs(
                    POLL as u64,
                )),
                dry_run: false,
                concurrency: 1,
            },
        );
        let max = cluster.max_nodes();
        let shape = cluster.shape;
        Self {
            rt: tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("a current-thread runtime builds"),
            controller,
            target,
            snapshots,
            now_ms,
            _autoscalers: writer,
            nodes: Arc::new((0..max).map(|i| node(i, cluster)).collect()),
            jobs: Arc::new(Jobs::default()),
            partitions: Arc::new(vec![Partition {
                name: Arc::from(PARTITION),
                state: "UP".into(),
                total_nodes: max.into(),
                total_cpus: u64::from(max) * u64::from(shape.cpus),
                total_memory_bytes: (shape.memory_mib > 0)
                    .then(|| u64::from(max) * (shape.memory_mib << 20)),
                total_gpus: Some(u64::from(max) * u64::from(shape.gpus)),
                max_nodes_per_job: None,
                node_list: format!("{PARTITION}-[0-{}]", max.saturating_sub(1)),
            }]),
            partition_list: Arc::from(vec![Arc::from(PARTITION)]),
            seen: None,
            last: None,
            wake: Some(0),
            every_poll,
            desired: cluster.replicas(),
        }
    }

    fn pending(&self, cluster: &Cluster) -> Jobs {
        let reason: Arc<str> = Arc::from("Resources");
        let mb = |mib: u64| mib << 20;
        Jobs {
            pending: cluster
                .queue()
                .enumerate()
                .map(|(k, j)| PendingJob {
                    id: k as u64,
                    partitions: self.partition_list.clone(),
                    class: PendingClass::Schedulable,
                    reason: reason.clone(),
                    tasks: 1,
                    throttled: 0,
                    nodes: j.nodes.into(),
                    cpus: u64::from(j.cpus_per_node) * u64::from(j.nodes),
                    gpus: u64::from(j.gpus_per_node) * u64::from(j.nodes),
                    memory_bytes: mb(j.memory_mib_per_node) * u64::from(j.nodes),
                    whole_node: j.whole_nodes(&cluster.shape),
                    submit_time: Some(j.submit),
                    origin: slurmscale_exporter::model::origin::Origin::Batch,
                })
                .collect(),
            ..Jobs::default()
        }
    }

    /// One reconcile at `t` on the node and job data held now; returns the replicas asked.
    fn reconcile(&mut self, t: i64) -> Option<u64> {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(t.max(0) as u64);
        self.now_ms.store(t.max(0) as u64 * 1000, Ordering::Relaxed);
        let took = Duration::from_millis(1);
        let mut snap = ClusterSnapshot::new(CLUSTER, "simulated://");
        snap.nodes.succeed(at, took, None);
        snap.nodes.data = Some(self.nodes.clone());
        snap.jobs.succeed(at, took, None);
        snap.jobs.data = Some(self.jobs.clone());
        snap.partitions.succeed(at, took, None);
        snap.partitions.data = Some(self.partitions.clone());
        snap.collected_at = Some(at);
        self.snapshots.send_replace(Arc::new(snap));
        self.rt.block_on(self.controller.reconcile_all());
        // Let go of the node list so the next change is made in place.
        self.snapshots
            .send_replace(Arc::new(ClusterSnapshot::new(CLUSTER, "")));
        self.last = Some(t);
        let asked = self
            .target
            .take_writes()
            .into_iter()
            .filter_map(|w| match w {
                Write::Scale { replicas, .. } => Some(replicas),
                _ => None,
            })
            .next_back();
        if let Some(r) = asked {
            self.desired = r as u32;
        }
        asked
    }
}

impl Scaler for Builtin {
    fn wake(&self) -> Option<i64> {
        let revisit = self.controller.next_revisit().map(|t| {
            let s = t
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs_f64().ceil() as i64);
            // The first poll at or after it.
            s.div_euclid(POLL) * POLL + if s.rem_euclid(POLL) == 0 { 0 } else { POLL }
        });
        [self.wake, revisit].into_iter().flatten().min()
    }

    fn look(&mut self, now: i64, cluster: &mut Cluster) -> Option<u32> {
        let inputs = (cluster.counts, cluster.replicas());
        let poll = now.rem_euclid(POLL) == 0;
        if !poll {
            // Seen at the next poll.
            if self.seen != Some(inputs) {
                self.wake = Some(now - now.rem_euclid(POLL) + POLL);
            }
            return None;
        }
        // `wake()` covers both a poll asked for and the controller's revisit time.
        let due = self.wake().is_some_and(|w| w <= now) || self.seen != Some(inputs);
        self.wake = self.every_poll.then_some(now + POLL);
        if !due && !self.every_poll {
            return None;
        }
        // The poll before this one read what the last reconcile read: replay it.
        if let Some(last) = self.last
            && last < now - POLL
            && !self.every_poll
        {
            self.reconcile(now - POLL);
        }
        set_replicas(&self.target, cluster.replicas().into());
        let touched = cluster.take_touched();
        {
            let nodes = Arc::make_mut(&mut self.nodes);
            for i in touched {
                update(&mut nodes[i as usize], i, cluster);
            }
        }
        self.jobs = Arc::new(self.pending(cluster));
        self.seen = Some(inputs);
        let asked = self.reconcile(now)?;
        // The next poll reads the new replicas.
        self.wake = Some(now + POLL);
        Some(asked as u32)
    }

    fn desired(&self) -> u32 {
        self.desired
    }
}
