//! In-memory stand-ins for everything the controller reaches through its seam: scale targets
//! by name, the NodeSet pods on pool nodes, the pods Kubernetes cannot place, the GenericNode
//! ledger, and a log of every write in the order it was made. One [`Fake`] is the
//! controller's [`Kubernetes`], [`SlurmNodes`] and [`PoolReader`] at once. `slurmscale demo`
//! and `simulate`'s builtin policy run the real controller on it (their simulations apply
//! the logged writes to the simulated cluster); the controller's unit tests script it.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use futures::future::BoxFuture;
use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::watcher;
use slurmscale_exporter::snapshot::ClusterSnapshot;
use tokio::sync::watch;

use kube::ResourceExt;
use kube::core::Status;
use slurmscale_exporter::k8s::nodeset::NodeSetView;
use slurmscale_exporter::k8s::watch::KubeSnapshot;
use slurmscale_exporter::slurm::ApiVersion;

use crate::actuator::{Kubernetes, NodeFacts, PodsBy, Target};
use crate::controller::{Controller, ControllerConfig, Seam};
use crate::crd::{NodeSetAutoscaler, NodeSetAutoscalerStatus, ScaleTargetRef};
use crate::error::{Error, Result};
use crate::leader::Leadership;
use crate::pool::PendingPod;
use crate::pool::{NamedPods, NodeSetPod, NodeSetPods, PoolReader};
use crate::records::Record;
use crate::slurm_nodes::{SlurmNodes, drain_reason};

/// Everything the fake holds; change it through [`Fake::with`].
#[derive(Clone, Debug, Default)]
pub struct World {
    /// Scale targets by name (namespaces are not told apart).
    pub targets: BTreeMap<String, FakeTarget>,
    /// Per pod selector: the nodes its pods are bound to, and how each stands.
    pub pods: BTreeMap<String, BTreeMap<String, NodeSetPod>>,
    /// Per pod selector: how many of its pods no node has room for.
    pub unscheduled: BTreeMap<String, u64>,
    /// Per pod selector: its pods by name, and how each stands (for policies that read pods by name).
    pub named_pods: BTreeMap<String, NamedPods>,
    /// Pods Kubernetes cannot place (pod selectors are not applied to them).
    pub unschedulable: Vec<PendingPod>,
    /// The GenericNode ledger and Node capacity; `None`: nothing watches them.
    pub ledger: Option<KubeSnapshot>,
    /// The NodeSets a watch would show (none: the choice of which grows sees only the target).
    pub nodesets: Vec<NodeSetView>,
    /// The NodeSet watch has not listed them all yet.
    pub nodesets_unlisted: bool,
    /// Each scale patch first finds that someone else set the target to the next of these
    /// replicas since it was read, and answers 409.
    pub races: VecDeque<u64>,
    /// Each autoscaler's status by name, merged as the API server merges a patch.
    pub status: BTreeMap<String, NodeSetAutoscalerStatus>,
    /// Every write, in order.
    pub writes: Vec<Recorded>,
    /// Per Kubernetes node: pods an eviction there would evict.
    pub evictable: BTreeMap<String, usize>,
}

/// A scale target.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FakeTarget {
    pub replicas: u64,
    /// The pods its controller reports; `None`: as many as `replicas`, at once.
    pub status_replicas: Option<u64>,
    /// Bumped by every change, as a resourceVersion is.
    pub version: u64,
    pub scaling_mode: Option<String>,
    /// The partition annotation; without it, the target's name.
    pub partition: Option<String>,
    pub selector: Option<String>,
    pub nodes: NodeFacts,
}

/// One write the controller made, as the fake recorded it (the seam's calls; the plan's
/// own vocabulary is [`crate::plan::Write`], whose mark names these follow).
#[derive(Clone, Debug, PartialEq)]
pub enum Recorded {
    Scale {
        target: String,
        replicas: u64,
    },
    Drain {
        node: String,
        reason: String,
    },
    Resume {
        node: String,
    },
    /// Set DOWN: its jobs requeued.
    Down {
        node: String,
        reason: String,
    },
    /// A powered-down record told to power up.
    PowerUp {
        node: String,
    },
    /// A Slurm node record, as `scontrol create` takes it.
    Create {
        conf: String,
    },
    /// slurmctld told to load its configuration again.
    Reconfigure,
    /// Pods on these nodes got the deletion cost that makes them go first.
    MarkPodsOn {
        nodes: Vec<String>,
    },
    /// These pods, by name, got the deletion cost that makes them go first.
    MarkPods {
        pods: Vec<String>,
    },
    /// Pods on these nodes lost that deletion cost.
    UnmarkPodsOn {
        nodes: Vec<String>,
    },
    /// These pods, by name, lost that deletion cost.
    UnmarkPods {
        pods: Vec<String>,
    },
    /// A Kubernetes node got (`on`) or lost our reservation taint.
    Reserve {
        node: String,
        on: bool,
    },
    /// The evictable pods on a Kubernetes node were evicted.
    EvictPodsOn {
        node: String,
    },
    Event {
        /// The autoscaler's name.
        autoscaler: String,
        warning: bool,
        reason: String,
        note: String,
    },
}

/// A handle on one world: its clones are the controller's three seams and the caller's view
/// of what the controller did.
#[derive(Clone, Debug, Default)]
pub struct Fake {
    world: Arc<Mutex<World>>,
}

impl Fake {
    pub fn new(world: World) -> Self {
        Self {
            world: Arc::new(Mutex::new(world)),
        }
    }

    fn world(&self) -> MutexGuard<'_, World> {
        self.world.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads or changes the world.
    pub fn with<R>(&self, f: impl FnOnce(&mut World) -> R) -> R {
        f(&mut self.world())
    }

    /// The writes made since the last call.
    pub fn take_writes(&self) -> Vec<Recorded> {
        std::mem::take(&mut self.world().writes)
    }

    /// The status of the autoscaler `name` as last written.
    pub fn status(&self, name: &str) -> Option<NodeSetAutoscalerStatus> {
        self.world().status.get(name).cloned()
    }

    /// Sets (`go`) or takes back the mark that makes pods go first; how many pods changed
    /// (by name: how many exist). Recorded as one write.
    fn set_marks(&self, selector: Option<&str>, which: PodsBy<'_>, go: bool) -> usize {
        let mut w = self.world();
        let selector = selector.unwrap_or_default().to_string();
        match which {
            PodsBy::Node(nodes) => {
                let pods = w.pods.entry(selector).or_default();
                let mut changed = 0;
                for node in nodes {
                    let pod = pods.get_mut(node);
                    if let Some(pod) = pod.filter(|p| go || **p == NodeSetPod::Marked) {
                        *pod = if go {
                            NodeSetPod::Marked
                        } else {
                            NodeSetPod::Serving
                        };
                        changed += 1;
                    }
                }
                let nodes = nodes.to_vec();
                let write = if go {
                    Recorded::MarkPodsOn { nodes }
                } else {
                    Recorded::UnmarkPodsOn { nodes }
                };
                w.writes.push(write);
                changed
            }
            PodsBy::Name(names) => {
                let pods = w.named_pods.entry(selector).or_default();
                let changed = names.iter().filter(|n| pods.contains_key(*n)).count();
                let pods = names.to_vec();
                let write = if go {
                    Recorded::MarkPods { pods }
                } else {
                    Recorded::UnmarkPods { pods }
                };
                w.writes.push(write);
                changed
            }
        }
    }
}

/// What the API server answers with `code`.
fn api_error(code: u16, reason: &str, message: String) -> Error {
    Error::Kube(kube::Error::Api(
        Status::failure(&message, reason).with_code(code).boxed(),
    ))
}

impl Kubernetes for Fake {
    /// Also on the node's taints in the ledger, when there is one.
    async fn reserve_node(&self, node: &str, on: bool) -> Result<()> {
        let mut w = self.world();
        let taints = (w.ledger.as_mut())
            .and_then(|l| std::sync::Arc::make_mut(&mut l.capacity).get_mut(node))
            .map(|c| &mut c.taints);
        if let Some(taints) = taints {
            taints.retain(|t| t.key != crate::pool::RESERVED_TAINT);
            if on {
                taints.push(slurmscale_exporter::k8s::ledger::Taint {
                    key: crate::pool::RESERVED_TAINT.into(),
                    value: String::new(),
                    effect: "NoSchedule".into(),
                });
            }
        }
        w.writes.push(Recorded::Reserve {
            node: node.into(),
            on,
        });
        Ok(())
    }

    async fn evict_pods_on(
        &self,
        node: &str,
        evictable: &BTreeMap<String, String>,
    ) -> Result<crate::actuator::Evicted> {
        let mut w = self.world();
        let n = w.evictable.remove(node).unwrap_or(0);
        w.writes.push(Recorded::EvictPodsOn { node: node.into() });
        Ok(crate::actuator::Evicted {
            evicted: if evictable.is_empty() { 0 } else { n },
            blocked: Vec::new(),
        })
    }

    async fn read(&self, _: &str, target: &ScaleTargetRef) -> Result<Target> {
        let w = self.world();
        let t = w
            .targets
            .get(&target.name)
            .ok_or_else(|| api_error(404, "NotFound", format!("{} not found", target.name)))?;
        Ok(Target {
            replicas: t.replicas,
            status_replicas: Some(t.status_replicas.unwrap_or(t.replicas)),
            resource_version: Some(t.version.to_string()),
            scaling_mode: t.scaling_mode.clone(),
            named_partition: t.partition.clone(),
            slurm_name: target.name.clone(),
            selector: t.selector.clone(),
            nodes: t.nodes.clone(),
        })
    }

    async fn scale(
        &self,
        _: &str,
        target: &ScaleTargetRef,
        replicas: u64,
        resource_version: Option<&str>,
    ) -> Result<()> {
        let mut w = self.world();
        let race = w.races.pop_front();
        let t = w
            .targets
            .get_mut(&target.name)
            .ok_or_else(|| api_error(404, "NotFound", format!("{} not found", target.name)))?;
        if let Some(r) = race {
            t.replicas = r;
            t.version += 1;
        }
        if resource_version.is_some_and(|v| v != t.version.to_string()) {
            return Err(api_error(409, "Conflict", "the scale changed".into()));
        }
        t.replicas = replicas;
        t.version += 1;
        w.writes.push(Recorded::Scale {
            target: target.name.clone(),
            replicas,
        });
        Ok(())
    }

    async fn mark_pods_to_go(
        &self,
        _: &str,
        selector: Option<&str>,
        which: PodsBy<'_>,
    ) -> Result<usize> {
        Ok(self.set_marks(selector, which, true))
    }

    async fn unmark_pods(
        &self,
        _: &str,
        selector: Option<&str>,
        which: PodsBy<'_>,
    ) -> Result<usize> {
        Ok(self.set_marks(selector, which, false))
    }

    async fn status(
        &self,
        nsa: &NodeSetAutoscaler,
        status: &NodeSetAutoscalerStatus,
    ) -> Result<()> {
        let mut w = self.world();
        merge_status(w.status.entry(nsa.name_any()).or_default(), status);
        Ok(())
    }

    async fn event(&self, nsa: &NodeSetAutoscaler, warning: bool, reason: &str, note: String) {
        self.world().writes.push(Recorded::Event {
            autoscaler: nsa.name_any(),
            warning,
            reason: reason.into(),
            note,
        });
    }
}

/// `patch` applied to `old` as the API server applies the controller's JSON merge patch of the
/// status: what the patch leaves out (a `None`, an empty list) stays, the rest replaces. Typed,
/// because `simulate` writes statuses tens of thousands of times and a round trip through JSON
/// was a third of its time. The destructuring fails to compile when the status gains a field.
fn merge_status(old: &mut NodeSetAutoscalerStatus, patch: &NodeSetAutoscalerStatus) {
    let NodeSetAutoscalerStatus {
        current_replicas,
        desired_replicas,
        last_scale_time,
        last_decision,
        conditions,
        observed_generation,
        colocation,
        node_shape,
        node_records,
        boot_time,
    } = patch;
    fn set<T: Clone>(old: &mut Option<T>, new: &Option<T>) {
        if new.is_some() {
            old.clone_from(new);
        }
    }
    set(&mut old.current_replicas, current_replicas);
    set(&mut old.desired_replicas, desired_replicas);
    set(&mut old.last_scale_time, last_scale_time);
    set(&mut old.last_decision, last_decision);
    set(&mut old.observed_generation, observed_generation);
    set(&mut old.node_shape, node_shape);
    // Written as null when absent: a merge patch removes them.
    old.node_records.clone_from(node_records);
    old.boot_time.clone_from(boot_time);
    if !conditions.is_empty() {
        old.conditions.clone_from(conditions);
    }
    let kept_plan = old
        .colocation
        .take()
        .map(|c| c.last_plan)
        .filter(|_| colocation.as_ref().is_some_and(|c| c.last_plan.is_empty()));
    old.colocation = colocation.clone().map(|mut merged| {
        if let Some(plan) = kept_plan {
            merged.last_plan = plan;
        }
        merged
    });
}

impl SlurmNodes for Fake {
    async fn drain(&self, _: &str, _: ApiVersion, node: &str, why: &str) -> Result<()> {
        self.world().writes.push(Recorded::Drain {
            node: node.into(),
            reason: drain_reason(why),
        });
        Ok(())
    }

    async fn down(&self, _: &str, _: ApiVersion, node: &str, why: &str) -> Result<()> {
        self.world().writes.push(Recorded::Down {
            node: node.into(),
            reason: drain_reason(why),
        });
        Ok(())
    }

    async fn resume(&self, _: &str, _: ApiVersion, node: &str) -> Result<()> {
        self.world()
            .writes
            .push(Recorded::Resume { node: node.into() });
        Ok(())
    }

    async fn power_up(&self, _: &str, _: ApiVersion, node: &str) -> Result<()> {
        self.world()
            .writes
            .push(Recorded::PowerUp { node: node.into() });
        Ok(())
    }

    async fn create(&self, _: &str, _: ApiVersion, record: &Record) -> Result<()> {
        self.world().writes.push(Recorded::Create {
            conf: record.conf.clone(),
        });
        Ok(())
    }

    async fn reconfigure(&self, _: &str, _: ApiVersion) -> Result<()> {
        self.world().writes.push(Recorded::Reconfigure);
        Ok(())
    }
}

impl PoolReader for Fake {
    fn ledger(&self) -> Option<KubeSnapshot> {
        self.world().ledger.clone()
    }

    fn nodesets(&self) -> Option<Vec<NodeSetView>> {
        let w = self.world();
        (!w.nodesets_unlisted).then(|| w.nodesets.clone())
    }

    fn pod_nodes<'a>(
        &'a self,
        _: &'a str,
        selector: &'a str,
    ) -> BoxFuture<'a, Result<NodeSetPods>> {
        let w = self.world();
        let pods = NodeSetPods {
            by_node: w.pods.get(selector).cloned().unwrap_or_default(),
            unschedulable: w.unscheduled.get(selector).copied().unwrap_or_default(),
        };
        Box::pin(std::future::ready(Ok(pods)))
    }

    fn unschedulable_pods<'a>(
        &'a self,
        _: &'a BTreeMap<String, String>,
    ) -> BoxFuture<'a, Result<Vec<PendingPod>>> {
        Box::pin(std::future::ready(Ok(self.world().unschedulable.clone())))
    }

    fn named_pods<'a>(&'a self, _: &'a str, selector: &'a str) -> BoxFuture<'a, Result<NamedPods>> {
        let named = self.world().named_pods.get(selector).cloned();
        Box::pin(std::future::ready(Ok(named.unwrap_or_default())))
    }
}

/// The real [`Controller`] on a [`Fake`]: its autoscalers, one Slurm cluster's snapshots as
/// a poller would publish them, and a clock the caller moves. The one way the unit tests,
/// `simulate` and the demo put the controller on an in-memory world.
pub struct OnFake {
    pub controller: Controller<Fake, Fake, Fake>,
    pub fake: Fake,
    snapshots: watch::Sender<Arc<ClusterSnapshot>>,
    now_ms: Arc<AtomicU64>,
    /// Keeps the autoscalers' store alive.
    _autoscalers: Writer<NodeSetAutoscaler>,
}

impl OnFake {
    /// `autoscalers` reading Slurm cluster `cluster`, on `world`, the clock at `now`.
    pub fn new(
        world: World,
        cluster: &str,
        autoscalers: impl IntoIterator<Item = NodeSetAutoscaler>,
        cfg: ControllerConfig,
        now: SystemTime,
    ) -> Self {
        let (store, mut writer) = reflector::store::<NodeSetAutoscaler>();
        for nsa in autoscalers {
            writer.apply_watcher_event(&watcher::Event::Apply(nsa));
        }
        let (snapshots, rx) = watch::channel(Arc::new(ClusterSnapshot::new(cluster, "")));
        let now_ms = Arc::new(AtomicU64::new(millis(now)));
        let clock = {
            let now_ms = now_ms.clone();
            Arc::new(move || {
                SystemTime::UNIX_EPOCH + Duration::from_millis(now_ms.load(Ordering::SeqCst))
            })
        };
        let fake = Fake::new(world);
        let seam = Seam {
            kubernetes: fake.clone(),
            slurm: fake.clone(),
            pool: fake.clone(),
            clock,
        };
        let controller = Controller::new(
            seam,
            store,
            BTreeMap::from([(cluster.to_string(), rx)]),
            Leadership::always(),
            cfg,
        );
        Self {
            controller,
            fake,
            snapshots,
            now_ms,
            _autoscalers: writer,
        }
    }

    /// Adds an autoscaler, or changes one, as a watch would show it.
    pub fn apply(&mut self, nsa: NodeSetAutoscaler) {
        self._autoscalers
            .apply_watcher_event(&watcher::Event::Apply(nsa));
    }

    /// Moves the clock.
    pub fn set_now(&self, now: SystemTime) {
        self.now_ms.store(millis(now), Ordering::SeqCst);
    }

    /// Publishes what slurmrestd shows now, as a poller does.
    pub fn publish(&self, snap: Arc<ClusterSnapshot>) {
        self.snapshots.send_replace(snap);
    }
}

fn millis(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{ColocationStatus, LastDecision, NodeRecordsStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use serde_json::Value;

    /// A JSON merge patch (RFC 7386): objects merge, everything else replaces.
    fn merge(into: &mut Value, patch: &Value) {
        match (into, patch) {
            (Value::Object(a), Value::Object(b)) => {
                for (k, v) in b {
                    if v.is_null() {
                        a.remove(k);
                    } else {
                        merge(a.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
            (into, patch) => *into = patch.clone(),
        }
    }

    /// The typed merge is the API server's JSON merge patch, on statuses that leave out some
    /// fields and fill others.
    #[test]
    fn the_status_merges_as_a_json_merge_patch() {
        let t = |s| Time(k8s_openapi::jiff::Timestamp::from_second(s).unwrap());
        let decision = |r: u32| LastDecision {
            replicas: r,
            reason: "demand".into(),
            message: format!("{r} nodes"),
            time: t(100 + i64::from(r)),
        };
        let condition = |status: &str| Condition {
            type_: "Frozen".into(),
            status: status.into(),
            reason: "Fresh".into(),
            message: String::new(),
            last_transition_time: t(5),
            observed_generation: None,
        };
        let coloc = |plan: &[&str]| ColocationStatus {
            pool_nodes: 4,
            last_plan: plan.iter().map(|p| p.to_string()).collect(),
            ..Default::default()
        };
        let full = NodeSetAutoscalerStatus {
            current_replicas: Some(2),
            desired_replicas: Some(3),
            last_scale_time: Some(t(7)),
            last_decision: Some(decision(3)),
            conditions: vec![condition("False")],
            observed_generation: Some(4),
            colocation: Some(coloc(&["drain c1"])),
            node_shape: Some("4 CPUs (pod template)".into()),
            node_records: Some(NodeRecordsStatus {
                wanted: 4,
                existing: 2,
                message: Some("no CPUs".into()),
                reload_pending: true,
            }),
            boot_time: Some("90s, learned from 3 boots".into()),
        };
        let sparse = NodeSetAutoscalerStatus {
            desired_replicas: Some(1),
            colocation: Some(coloc(&[])),
            ..Default::default()
        };
        let other = NodeSetAutoscalerStatus {
            last_decision: Some(decision(1)),
            conditions: vec![condition("True")],
            colocation: Some(coloc(&["resume c2"])),
            // A message gone is cleared, not kept.
            node_records: Some(NodeRecordsStatus {
                wanted: 4,
                existing: 4,
                message: None,
                reload_pending: false,
            }),
            ..Default::default()
        };
        for (old, patch) in [
            (NodeSetAutoscalerStatus::default(), full.clone()),
            (full.clone(), sparse.clone()),
            (full.clone(), other.clone()),
            (sparse.clone(), full.clone()),
            (other, sparse),
        ] {
            let mut json = serde_json::to_value(&old).unwrap();
            merge(&mut json, &serde_json::to_value(&patch).unwrap());
            let mut typed = old.clone();
            merge_status(&mut typed, &patch);
            assert_eq!(
                typed,
                serde_json::from_value(json).unwrap(),
                "{old:?} + {patch:?}"
            );
        }
    }
}
