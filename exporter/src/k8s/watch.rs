//! The Kubernetes source: kube-runtime reflectors for Nodes, GenericNodes and NodeSets, kept
//! in memory and read as a [`KubeSnapshot`] whenever metrics render.
//!
//! A resource that is not served (no GenericNode CRD on a Slinky-only cluster, no NodeSet CRD
//! on an ACK one) is probed again every 30 s instead of failing: it only holds up readiness
//! once it exists. NodeSets are watched in the newest version served (v1beta1, else v1alpha1),
//! never both, since the same objects would come twice. Objects are trimmed before they are
//! stored (managed fields, node images and conditions) so 10,000 nodes stay cheap.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::ledger::{self, Capacity, LedgerConfig, LedgerNode, Malformed};
use super::nodeset::{NodeSetView, v1alpha1, v1beta1};

/// How often an unserved resource is probed again.
const PROBE_EVERY: Duration = Duration::from_secs(30);

/// The health of one watch, for metrics and `/readyz`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WatchHealth {
    /// The API server has been asked at least once.
    pub probed: bool,
    /// The API server serves the resource.
    pub served: bool,
    /// The initial list is complete (the store reflects the server).
    pub synced: bool,
    /// The served version, for NodeSets.
    pub version: Option<String>,
    pub last_error: Option<String>,
}

type Health = Arc<Mutex<BTreeMap<&'static str, WatchHealth>>>;

fn update(health: &Health, resource: &'static str, f: impl FnOnce(&mut WatchHealth)) {
    let mut all = health.lock().unwrap_or_else(|e| e.into_inner());
    let h = all.entry(resource).or_default();
    h.probed = true;
    f(h);
}

/// The resources watched, each reported from the start (unprobed until asked).
const RESOURCES: [&str; 4] = ["genericnodes", "nodes", "nodesetautoscalers", "nodesets"];

/// Everything the Kubernetes metric families read.
#[derive(Clone, Debug, Default)]
pub struct KubeSnapshot {
    pub nodesets: Vec<NodeSetView>,
    /// Shared, as the capacity is: a colocated autoscaler reads them on every reconcile.
    pub ledger: Arc<Vec<LedgerNode>>,
    /// Skipped GenericNodes by (cluster label, reason).
    pub malformed: BTreeMap<(String, Malformed), u64>,
    /// Node name → allocatable.
    pub capacity: Arc<BTreeMap<String, Capacity>>,
    /// (namespace, NodeSet) → the NodeSetAutoscaler that scales it.
    pub autoscaled: BTreeMap<(String, String), Autoscaled>,
    pub watches: BTreeMap<&'static str, WatchHealth>,
}

impl KubeSnapshot {
    /// The most nodes a NodeSet may have: its `slurmscale.io/max-nodes` annotation, else
    /// the `maxReplicas` of a NodeSetAutoscaler that targets it, else no bound. Never how
    /// many nodes its partition has now: a Slinky partition at zero pods has none.
    pub fn max_nodes(&self, ns: &NodeSetView) -> Option<u64> {
        ns.max_nodes
            .or_else(|| self.autoscaler_of(ns).map(|a| a.max_replicas))
    }

    /// The `priority` of the NodeSetAutoscaler that scales `ns` (0 without one).
    pub fn priority(&self, ns: &NodeSetView) -> i32 {
        self.autoscaler_of(ns).map_or(0, |a| a.priority)
    }

    fn autoscaler_of(&self, ns: &NodeSetView) -> Option<&Autoscaled> {
        self.autoscaled
            .get(&(ns.namespace.clone(), ns.name.clone()))
    }
}

/// What the exporter reads of a NodeSetAutoscaler: what bounds its NodeSet and ranks it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Autoscaled {
    pub max_replicas: u64,
    pub priority: i32,
}

#[derive(Clone)]
enum NodeSets {
    None,
    Beta(Store<v1beta1::NodeSet>),
    Alpha(Store<v1alpha1::NodeSet>),
}

#[derive(Clone)]
pub struct KubeSource {
    nodes: Store<Node>,
    genericnodes: Store<DynamicObject>,
    autoscalers: Store<DynamicObject>,
    nodesets: Arc<Mutex<NodeSets>>,
    health: Health,
    ledger: LedgerConfig,
    /// Malformed objects already logged (name, reason), so each is logged once.
    logged: Arc<Mutex<std::collections::HashSet<(String, Malformed)>>>,
}

impl KubeSource {
    /// Starts the watches; `changed` is notified on every event.
    pub fn start(
        client: Client,
        ledger: LedgerConfig,
        changed: Arc<Notify>,
        stop: CancellationToken,
    ) -> Self {
        let health: Health = Arc::new(Mutex::new(
            RESOURCES
                .iter()
                .map(|r| (*r, WatchHealth::default()))
                .collect(),
        ));

        let watching = |resource| Watching {
            resource,
            health: health.clone(),
            changed: changed.clone(),
            stop: stop.clone(),
        };
        let (nodes, writer) = reflector::store();
        tokio::spawn(watch_when_served(
            Api::<Node>::all(client.clone()),
            writer,
            trim_node,
            watching("nodes"),
        ));

        let gvk = GroupVersionKind::gvk(&ledger.group, &ledger.version, &ledger.kind);
        let resource = ApiResource::from_gvk_with_plural(&gvk, &ledger.plural);
        let writer = reflector::store::Writer::new(resource.clone());
        let genericnodes = writer.as_reader();
        tokio::spawn(watch_when_served(
            Api::<DynamicObject>::all_with(client.clone(), &resource),
            writer,
            trim_genericnode(&ledger),
            watching("genericnodes"),
        ));

        // NodeSetAutoscalers bound the NodeSets they scale: read, never required (an
        // exporter-only install has no such CRD).
        let gvk = GroupVersionKind::gvk("slurmscale.io", "v1alpha1", "NodeSetAutoscaler");
        let resource = ApiResource::from_gvk_with_plural(&gvk, "nodesetautoscalers");
        let writer = reflector::store::Writer::new(resource.clone());
        let autoscalers = writer.as_reader();
        tokio::spawn(watch_when_served(
            Api::<DynamicObject>::all_with(client.clone(), &resource),
            writer,
            trim_autoscaler,
            watching("nodesetautoscalers"),
        ));

        let nodesets = Arc::new(Mutex::new(NodeSets::None));
        tokio::spawn(watch_nodesets(
            client,
            nodesets.clone(),
            watching("nodesets"),
        ));
        Self {
            nodes,
            genericnodes,
            autoscalers,
            nodesets,
            health,
            ledger,
            logged: Arc::default(),
        }
    }

    pub fn snapshot(&self) -> KubeSnapshot {
        let mut snap = KubeSnapshot {
            watches: self
                .health
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            ..Default::default()
        };
        snap.capacity = Arc::new(
            self.nodes
                .state()
                .iter()
                .filter_map(|n| Some((n.metadata.name.clone()?, Capacity::of(n))))
                .collect(),
        );
        let mut ledger = Vec::new();
        for obj in self.genericnodes.state() {
            match ledger::parse(&obj, &self.ledger) {
                Ok(node) => ledger.push(node),
                Err(reason) => {
                    let name = obj.metadata.name.clone().unwrap_or_default();
                    let cluster = obj
                        .metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(&self.ledger.cluster_label))
                        .cloned()
                        .unwrap_or_default();
                    *snap.malformed.entry((cluster, reason)).or_default() += 1;
                    if self
                        .logged
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert((name.clone(), reason))
                    {
                        warn!(genericnode = %name, reason = reason.as_str(), "skipping a GenericNode that cannot be read");
                    }
                }
            }
        }
        snap.ledger = Arc::new(ledger);
        snap.autoscaled = self
            .autoscalers
            .state()
            .iter()
            .filter_map(|a| autoscaled(a))
            .collect();
        snap.nodesets = self.nodesets();
        snap
    }

    /// The NodeSets alone, without the rest of a snapshot (the autoscaler reads them at
    /// every reconcile).
    pub fn nodesets(&self) -> Vec<NodeSetView> {
        match &*self.nodesets.lock().unwrap_or_else(|e| e.into_inner()) {
            NodeSets::None => Vec::new(),
            NodeSets::Beta(s) => s
                .state()
                .iter()
                .map(|n| NodeSetView::from(n.as_ref()))
                .collect(),
            NodeSets::Alpha(s) => s
                .state()
                .iter()
                .map(|n| NodeSetView::from(n.as_ref()))
                .collect(),
        }
    }

    /// The NodeSets once their watch has listed them completely (or found them not served);
    /// `None` before, when the store may lack some.
    pub fn nodesets_listed(&self) -> Option<Vec<NodeSetView>> {
        let health = self.health.lock().unwrap_or_else(|e| e.into_inner());
        let h = health.get("nodesets")?;
        let listed = h.probed && (h.synced || !h.served);
        drop(health);
        listed.then(|| self.nodesets())
    }

    /// Ready once every resource has been asked for and every served one listed completely.
    pub fn ready(&self) -> Result<(), String> {
        let health = self.health.lock().unwrap_or_else(|e| e.into_inner());
        let waiting: Vec<String> = health
            .iter()
            .filter(|(_, h)| !h.probed || (h.served && !h.synced))
            .map(|(r, h)| {
                format!(
                    "kubernetes: {r} not listed yet{}",
                    h.last_error
                        .as_ref()
                        .map(|e| format!(": {e}"))
                        .unwrap_or_default()
                )
            })
            .collect();
        if waiting.is_empty() {
            Ok(())
        } else {
            Err(waiting.join("\n"))
        }
    }
}

/// Only a node's name and allocatable are used.
fn trim_node(node: &mut Node) {
    let meta = &mut node.metadata;
    // Labels and taints stay: colocation places pending pods by nodeSelector, required
    // affinity and tolerations against them.
    *meta = kube::api::ObjectMeta {
        name: meta.name.take(),
        namespace: meta.namespace.take(),
        uid: meta.uid.take(),
        resource_version: meta.resource_version.take(),
        labels: meta.labels.take(),
        ..Default::default()
    };
    let taints = node.spec.as_mut().and_then(|s| s.taints.take());
    node.spec = taints.map(|taints| k8s_openapi::api::core::v1::NodeSpec {
        taints: Some(taints),
        ..Default::default()
    });
    let allocatable = node.status.as_mut().and_then(|s| s.allocatable.take());
    node.status = Some(k8s_openapi::api::core::v1::NodeStatus {
        allocatable,
        ..Default::default()
    });
}

/// Keeps only what the ledger reads: the configured paths and the cluster label.
fn trim_genericnode(cfg: &LedgerConfig) -> impl FnMut(&mut DynamicObject) + Send + 'static {
    let paths = [
        cfg.alias_path.clone(),
        cfg.allocations_path.clone(),
        cfg.admission_checks_path.clone(),
    ];
    let label = cfg.cluster_label.clone();
    move |o| {
        let mut kept = serde_json::Value::Object(Default::default());
        for path in &paths {
            let keys: Vec<&str> = path.split('.').filter(|k| !k.is_empty()).collect();
            let Some(value) = keys.iter().try_fold(&o.data, |v, k| v.get(k)) else {
                continue;
            };
            let mut slot = &mut kept;
            for k in &keys {
                slot = &mut slot[*k];
            }
            *slot = value.clone();
        }
        o.data = kept;
        let labels = o
            .metadata
            .labels
            .take()
            .map(|mut l| l.remove_entry(&label).into_iter().collect());
        o.metadata = kube::api::ObjectMeta {
            name: o.metadata.name.take(),
            uid: o.metadata.uid.take(),
            resource_version: o.metadata.resource_version.take(),
            labels,
            ..Default::default()
        };
    }
}

/// The NodeSet a NodeSetAutoscaler scales, by (namespace, name), and what it says of it;
/// `None` for one that targets no NodeSet or says no `maxReplicas`.
fn autoscaled(a: &DynamicObject) -> Option<((String, String), Autoscaled)> {
    let target = a.data.pointer("/spec/scaleTargetRef")?;
    let kind = target.get("kind").and_then(|k| k.as_str());
    if kind.is_some_and(|k| k != "NodeSet") {
        return None;
    }
    let at = (
        a.metadata.namespace.clone()?,
        target.get("name")?.as_str()?.to_string(),
    );
    let priority = a.data.pointer("/spec/priority").and_then(|p| p.as_i64());
    Some((
        at,
        Autoscaled {
            max_replicas: a.data.pointer("/spec/maxReplicas")?.as_u64()?,
            priority: priority.and_then(|p| i32::try_from(p).ok()).unwrap_or(0),
        },
    ))
}

/// Keeps only what bounds and ranks a NodeSet ([`Autoscaled`]): the target, `maxReplicas`
/// and `priority`.
fn trim_autoscaler(o: &mut DynamicObject) {
    let spec = o.data.get("spec");
    o.data = serde_json::json!({"spec": {
        "scaleTargetRef": spec.and_then(|s| s.get("scaleTargetRef")),
        "maxReplicas": spec.and_then(|s| s.get("maxReplicas")),
        "priority": spec.and_then(|s| s.get("priority")),
    }});
    o.metadata = kube::api::ObjectMeta {
        name: o.metadata.name.take(),
        namespace: o.metadata.namespace.take(),
        uid: o.metadata.uid.take(),
        resource_version: o.metadata.resource_version.take(),
        ..Default::default()
    };
}

fn probe_failed(health: &Health, resource: &'static str, e: &kube::Error) {
    let message = e.to_string();
    let mut all = health.lock().unwrap_or_else(|e| e.into_inner());
    let h = all.entry(resource).or_default();
    h.probed = true;
    if h.last_error.as_deref() != Some(message.as_str()) {
        warn!(resource, error = %message, "cannot list; will retry (check the RBAC rules in examples/rbac)");
    }
    h.served = true;
    h.last_error = Some(message);
}

/// Is the resource served? 404 (or 405) means no; other errors are reported as they are.
async fn served<K: Clone + DeserializeOwned + Debug>(api: &Api<K>) -> Result<bool, kube::Error> {
    match api.list(&ListParams::default().limit(1)).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 405 => Ok(false),
        Err(e) => Err(e),
    }
}

/// What every watch reports to and stops on: its resource's name in the health map, the
/// health map, the notification that something changed, and the stop token.
#[derive(Clone)]
struct Watching {
    resource: &'static str,
    health: Health,
    changed: Arc<Notify>,
    stop: CancellationToken,
}

/// Probes until the resource is served, then runs a reflector into `writer` until stopped.
async fn watch_when_served<K>(
    api: Api<K>,
    writer: reflector::store::Writer<K>,
    trim: impl FnMut(&mut K) + Send + 'static,
    w: Watching,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    loop {
        match served(&api).await {
            Ok(true) => break,
            Ok(false) => update(&w.health, w.resource, |h| {
                h.served = false;
                h.last_error = None;
            }),
            // Not a "no": forbidden, unreachable... Readiness waits for it and says why.
            Err(e) => probe_failed(&w.health, w.resource, &e),
        }
        tokio::select! {
            _ = w.stop.cancelled() => return,
            _ = tokio::time::sleep(PROBE_EVERY) => {}
        }
    }
    info!(resource = w.resource, "watching");
    update(&w.health, w.resource, |h| h.served = true);
    run_reflector(api, writer, trim, w).await;
}

async fn run_reflector<K>(
    api: Api<K>,
    writer: reflector::store::Writer<K>,
    trim: impl FnMut(&mut K) + Send + 'static,
    w: Watching,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    let stream = reflector::reflector(
        writer,
        watcher(api, watcher::Config::default()).modify(trim),
    )
    .default_backoff();
    let mut stream = std::pin::pin!(stream);
    loop {
        let event = tokio::select! {
            _ = w.stop.cancelled() => return,
            e = stream.next() => e,
        };
        match event {
            None => return,
            Some(Ok(watcher::Event::InitDone)) => {
                update(&w.health, w.resource, |h| {
                    h.synced = true;
                    h.last_error = None;
                });
                w.changed.notify_one();
            }
            Some(Ok(watcher::Event::Init | watcher::Event::InitApply(_))) => {}
            Some(Ok(_)) => w.changed.notify_one(),
            Some(Err(e)) => {
                warn!(resource = w.resource, error = %e, "watch failed; retrying with backoff (the last good state is kept)");
                update(&w.health, w.resource, |h| {
                    h.last_error = Some(e.to_string())
                });
            }
        }
    }
}

/// Finds the NodeSet version served (v1beta1 first) and watches it.
async fn watch_nodesets(client: Client, slot: Arc<Mutex<NodeSets>>, w: Watching) {
    loop {
        let beta = Api::<v1beta1::NodeSet>::all(client.clone());
        let alpha = Api::<v1alpha1::NodeSet>::all(client.clone());
        let found = match served(&beta).await {
            Ok(true) => Some("v1beta1"),
            Ok(false) => match served(&alpha).await {
                Ok(true) => Some("v1alpha1"),
                Ok(false) => None,
                Err(e) => {
                    probe_failed(&w.health, w.resource, &e);
                    None
                }
            },
            Err(e) => {
                probe_failed(&w.health, w.resource, &e);
                None
            }
        };
        if let Some(version) = found {
            info!(resource = w.resource, version, "watching");
            update(&w.health, w.resource, |h| {
                h.served = true;
                h.version = Some(version.to_string());
            });
            if version == "v1beta1" {
                let (store, writer) = reflector::store();
                *slot.lock().unwrap_or_else(|e| e.into_inner()) = NodeSets::Beta(store);
                run_reflector(beta, writer, trim_nodeset, w).await;
            } else {
                let (store, writer) = reflector::store();
                *slot.lock().unwrap_or_else(|e| e.into_inner()) = NodeSets::Alpha(store);
                run_reflector(alpha, writer, trim_nodeset, w).await;
            }
            return;
        }
        update(&w.health, w.resource, |h| h.served = h.last_error.is_some());
        tokio::select! {
            _ = w.stop.cancelled() => return,
            _ = tokio::time::sleep(PROBE_EVERY) => {}
        }
    }
}

fn trim_nodeset<K: Resource>(n: &mut K) {
    n.meta_mut().managed_fields = None;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the exporter keeps of an autoscaler is what bounds and ranks its NodeSet.
    #[test]
    fn an_autoscaler_gives_its_nodesets_bound_and_priority() {
        let nsa = |spec: serde_json::Value| {
            let mut o: DynamicObject = serde_json::from_value(serde_json::json!({
                "apiVersion": "slurmscale.io/v1alpha1",
                "kind": "NodeSetAutoscaler",
                "metadata": {"name": "a", "namespace": "slurm", "labels": {"x": "y"}},
                "spec": spec,
            }))
            .unwrap();
            trim_autoscaler(&mut o);
            autoscaled(&o)
        };
        let at = ("slurm".to_string(), "gpu".to_string());
        let target = serde_json::json!({"kind": "NodeSet", "name": "gpu"});
        assert_eq!(
            nsa(
                serde_json::json!({"scaleTargetRef": target, "maxReplicas": 4, "priority": -3,
                "minReplicas": 1})
            ),
            Some((
                at.clone(),
                Autoscaled {
                    max_replicas: 4,
                    priority: -3
                }
            ))
        );
        assert_eq!(
            nsa(serde_json::json!({"scaleTargetRef": target, "maxReplicas": 4})),
            Some((
                at,
                Autoscaled {
                    max_replicas: 4,
                    priority: 0
                }
            ))
        );
        let deployment = serde_json::json!({"kind": "Deployment", "name": "gpu"});
        assert_eq!(
            nsa(serde_json::json!({"scaleTargetRef": deployment, "maxReplicas": 4})),
            None
        );
    }
}
