//! The Kubernetes side of the controller's seam: the [`Kubernetes`] trait — read the target,
//! write its scale subresource (with the resourceVersion read, so a concurrent change is a
//! 409 and the plan is made again on fresh data), mark NodeSet pods to go first, write the
//! NodeSetAutoscaler's status and record Events — and [`Actuator`], which does it through the
//! API server. Any resource with a scale subresource works; the API resource behind
//! `scaleTargetRef` is found by discovery and cached. Tests, the demo and `simulate` put the
//! in-memory [`crate::fakes::Fake`] in its place.
//!
//! Every request has a deadline, so a slow or silent API server costs one timeout, never a
//! hung controller (the client itself waits forever by default). Every write is also fenced
//! by the lease: it is sent only while [`Leadership::write_deadline`] says the lease is
//! certainly ours, and abandoned (its connection closed) if unanswered by then — a write held
//! up in the network past the lease would otherwise land after a standby's first write.
//! Rate limiting (429 with `Retry-After`) and 503/504 are retried by the client, which waits
//! as long as the server asks; those retries run within the same deadlines.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource};
use serde_json::{Value, json};
use slurmscale_exporter::k8s::nodeset::{
    NODE_SHAPE_ANNOTATION, features, named_partition, node_prefix, slurm_name, template_shape,
    v1beta1, weight,
};
use slurmscale_exporter::model::demand::Shape;
use tracing::warn;

use crate::crd::{NodeSetAutoscaler, NodeSetAutoscalerStatus, ScaleTargetRef};
use crate::error::{Error, Result};
use crate::leader::Leadership;
use crate::targets::Targets;

/// How long a Kubernetes read or write may take unless `--kube-timeout` says otherwise.
pub const DEFAULT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// A Kubernetes request, abandoned after `timeout`.
pub(crate) async fn within<T>(
    timeout: std::time::Duration,
    what: &'static str,
    request: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T> {
    match tokio::time::timeout(timeout, request).await {
        Ok(answer) => Ok(answer?),
        Err(_) => Err(Error::KubeTimeout(what, timeout)),
    }
}

/// The target as the controller needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// `spec.replicas` of the scale subresource (absent at 0).
    pub replicas: u64,
    /// `status.replicas` of the scale: the pods the target has (unknown until its
    /// controller reported).
    pub status_replicas: Option<u64>,
    /// The scale's resourceVersion, sent back with the patch.
    pub resource_version: Option<String>,
    /// `spec.scalingMode` of a NodeSet (`DaemonSet` ones cannot be scaled).
    pub scaling_mode: Option<String>,
    /// The Slurm partition a site names for the target (`slurmscale.io/partition`); without
    /// one, Slurm says which partitions its NodeSet is in.
    pub named_partition: Option<String>,
    /// The target's name in Slurm: a NodeSet's `NodeSet=` (its host name, trimmed), else the
    /// target's own name.
    pub slurm_name: String,
    /// The label selector of its pods (`status.selector`), to find them on nodes.
    pub selector: Option<String>,
    /// What a NodeSet says of its pods' nodes (nothing, for other kinds of target).
    pub nodes: NodeFacts,
}

/// What a NodeSet says of the nodes its pods register: the shape its
/// `slurmscale.io/node-shape` annotation sets, the shape its pod template implies, the
/// features, and how its pods' node names are written — a prefix and the ordinal, padded
/// (for [`crate::records`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeFacts {
    pub shape: Shape,
    pub template_shape: Shape,
    pub features: Vec<String>,
    /// Its nodes' `Weight=` (Slurm's default, 1, when its `--conf` sets none).
    pub weight: u64,
    /// What its pods' Slurm node names start with ([`node_prefix`]: `gpu-` for a NodeSet
    /// whose pods are `gpu-0`, `gpu-1`, …).
    pub node_prefix: String,
    pub ordinal_padding: u32,
    /// Arguments added to the pods' slurmd (`spec.slurmd.args`).
    pub slurmd_args: Vec<String>,
}

impl NodeFacts {
    /// From a NodeSet's name, annotations and spec (either version).
    pub fn of_nodeset(
        name: &str,
        annotations: Option<&BTreeMap<String, String>>,
        spec: Option<&Value>,
    ) -> Self {
        let hostname = nodeset_hostname(spec);
        let spec: v1beta1::NodeSetSpec = spec
            .and_then(|s| serde_json::from_value(s.clone()).ok())
            .unwrap_or_default();
        Self {
            shape: annotations
                .and_then(|a| a.get(NODE_SHAPE_ANNOTATION))
                .map(|s| Shape::parse(s))
                .unwrap_or_default(),
            template_shape: template_shape(spec.extra_conf.as_deref(), spec.slurmd.as_ref()),
            features: features(&slurm_name(name, hostname), spec.extra_conf.as_deref()),
            weight: weight(spec.extra_conf.as_deref()),
            node_prefix: node_prefix(name, hostname),
            ordinal_padding: spec.ordinal_padding.unwrap_or(0),
            slurmd_args: spec.slurmd.map(|c| c.args).unwrap_or_default(),
        }
    }
}

/// A NodeSet's pod template host name (`spec.template.spec.hostname`), from its spec as read.
fn nodeset_hostname(spec: Option<&Value>) -> Option<&str> {
    spec?
        .get("template")?
        .get("spec")?
        .get("hostname")?
        .as_str()
}

/// The annotation slurm-operator reads to choose which NodeSet pods go first on scale-in.
pub const POD_DELETION_COST: &str = "nodeset.slinky.slurm.net/pod-deletion-cost";

/// The deletion cost that makes a pod go first: below any a site would set.
const MARK: &str = "-100000";

/// Which of a target's pods: those bound to these Kubernetes nodes, or these by name.
#[derive(Clone, Copy, Debug)]
pub enum PodsBy<'a> {
    Node(&'a [String]),
    Name(&'a [String]),
}

impl PodsBy<'_> {
    fn matches(&self, pod: &Pod) -> bool {
        let (list, key) = match self {
            Self::Node(nodes) => (
                nodes,
                pod.spec.as_ref().and_then(|s| s.node_name.as_deref()),
            ),
            Self::Name(names) => (names, pod.metadata.name.as_deref()),
        };
        key.is_some_and(|k| list.iter().any(|x| x == k))
    }
}

/// An autoscaler's Events of one reason and type: its uid, the reason, a warning.
type EventsOf = (String, String, bool);

pub struct Actuator {
    client: Client,
    reporter: Reporter,
    /// The recorder of each autoscaler's Events of one reason and type, with the note it
    /// last said. kube's recorder folds an Event into the last one of the same reason (for
    /// six minutes) keeping the *first* note, so "resumed planned-0" would show as a second
    /// "resumed planned-3": a new note gets a new recorder, hence an Event of its own, and
    /// only the same note said again is counted in the Event's series.
    recorders: Mutex<HashMap<EventsOf, (String, Recorder)>>,
    resources: Mutex<HashMap<(String, String), ApiResource>>,
    /// NodeSets as a watch keeps them: read without a request.
    targets: Targets,
    /// Writes are sent and answered within the lease only.
    leadership: Leadership,
    /// Each request is abandoned after this.
    timeout: std::time::Duration,
}

impl Actuator {
    /// Acts alone (no election) with the default timeout.
    pub fn new(client: Client, identity: &str) -> Self {
        Self::fenced(client, identity, Leadership::always(), DEFAULT_TIMEOUT)
    }

    /// Writes only within `leadership`'s lease; every request within `timeout`.
    pub fn fenced(
        client: Client,
        identity: &str,
        leadership: Leadership,
        timeout: std::time::Duration,
    ) -> Self {
        let reporter = Reporter {
            controller: "slurmscale-autoscaler".into(),
            instance: Some(identity.to_string()),
        };
        Self {
            reporter,
            recorders: Mutex::default(),
            targets: Targets::new(client.clone()),
            client,
            resources: Mutex::default(),
            leadership,
            timeout,
        }
    }

    /// A read, abandoned after the timeout.
    async fn read_within<T>(
        &self,
        what: &'static str,
        request: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T> {
        within(self.timeout, what, request).await
    }

    /// A write: sent only while the lease is certainly ours, abandoned when it may not be
    /// any more or after the timeout, whichever comes first.
    async fn write_within<T>(
        &self,
        what: &'static str,
        request: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T> {
        self.leadership
            .fence(what, within(self.timeout, what, request))
            .await
    }

    async fn api(&self, namespace: &str, target: &ScaleTargetRef) -> Result<Api<DynamicObject>> {
        let resource = self.resource(target).await?;
        Ok(Api::namespaced_with(
            self.client.clone(),
            namespace,
            &resource,
        ))
    }

    /// The API resource behind `target`, found by discovery once.
    async fn resource(&self, target: &ScaleTargetRef) -> Result<ApiResource> {
        let key = (target.api_version.clone(), target.kind.clone());
        let cached = self
            .resources
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned();
        let resource = match cached {
            Some(r) => r,
            None => {
                let (group, version) = match target.api_version.rsplit_once('/') {
                    Some((g, v)) => (g, v),
                    None => ("", target.api_version.as_str()),
                };
                let gvk = GroupVersionKind::gvk(group, version, &target.kind);
                let (resource, caps) = self
                    .read_within(
                        "discovery",
                        kube::discovery::pinned_kind(&self.client, &gvk),
                    )
                    .await?;
                if !caps.supports_operation(kube::discovery::verbs::PATCH) {
                    return Err(Error::Target(
                        target.name.clone(),
                        format!("{} cannot be patched", target.kind),
                    ));
                }
                self.resources
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(key, resource.clone());
                resource
            }
        };
        Ok(resource)
    }
}

/// What an eviction round did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Evicted {
    /// Pods the API server accepted an eviction for.
    pub evicted: usize,
    /// Pods a PodDisruptionBudget keeps for now (`namespace/name`): asked again later, never
    /// deleted around it.
    pub blocked: Vec<String>,
}

/// The taint that reserves a node for the NodeSet's pods.
fn reservation() -> Value {
    json!({"key": crate::pool::RESERVED_TAINT, "effect": "NoSchedule"})
}

/// Everything the controller reads and writes of its targets in Kubernetes (the pool's reads
/// are [`crate::pool::PoolReader`]'s, Slurm's writes [`crate::slurm_nodes::SlurmNodes`]').
/// [`Actuator`] does it through the API server; the demo, `simulate` and the unit tests
/// through [`crate::fakes::Fake`]. Kept narrow on purpose: a fake stands in for all of it.
pub trait Kubernetes: Send + Sync + 'static {
    /// Reads the target and its scale.
    fn read(
        &self,
        namespace: &str,
        target: &ScaleTargetRef,
    ) -> impl Future<Output = Result<Target>> + Send;

    /// Sets the target's replicas, if its scale is still at `resource_version`.
    fn scale(
        &self,
        namespace: &str,
        target: &ScaleTargetRef,
        replicas: u64,
        resource_version: Option<&str>,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Marks the target's pods `which` to be deleted first on scale-in; how many.
    fn mark_pods_to_go(
        &self,
        namespace: &str,
        selector: Option<&str>,
        which: PodsBy<'_>,
    ) -> impl Future<Output = Result<usize>> + Send;

    /// Takes back the mark [`Kubernetes::mark_pods_to_go`] set on the target's pods
    /// `which` (a deletion cost someone else set stays); how many.
    fn unmark_pods(
        &self,
        namespace: &str,
        selector: Option<&str>,
        which: PodsBy<'_>,
    ) -> impl Future<Output = Result<usize>> + Send;

    /// Merges `status` into the autoscaler's status.
    fn status(
        &self,
        nsa: &NodeSetAutoscaler,
        status: &NodeSetAutoscalerStatus,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Records an Event on the autoscaler (best effort).
    fn event(
        &self,
        nsa: &NodeSetAutoscaler,
        warning: bool,
        reason: &str,
        note: String,
    ) -> impl Future<Output = ()> + Send;

    /// Puts our reservation taint on Kubernetes node `node` (`on`) or takes it off.
    fn reserve_node(&self, node: &str, on: bool) -> impl Future<Output = Result<()>> + Send;

    /// Evicts the pods on Kubernetes node `node` that carry all the labels `evictable` (none
    /// when it is empty), lowest priority first, through the Eviction API.
    fn evict_pods_on(
        &self,
        node: &str,
        evictable: &BTreeMap<String, String>,
    ) -> impl Future<Output = Result<Evicted>> + Send;
}

impl Actuator {
    /// Sets (`go`) or takes back our deletion cost on the pods `which` of `selector`.
    async fn set_marks(
        &self,
        namespace: &str,
        selector: Option<&str>,
        which: PodsBy<'_>,
        go: bool,
    ) -> Result<usize> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let mut lp = ListParams::default();
        if let Some(sel) = selector {
            lp = lp.labels(sel);
        }
        let ours = |pod: &Pod| {
            (pod.metadata.annotations.as_ref())
                .and_then(|a| a.get(POD_DELETION_COST))
                .is_some_and(|v| v == MARK)
        };
        let value = if go { json!(MARK) } else { json!(null) };
        let mut changed = 0;
        for pod in self.read_within("pod list", pods.list(&lp)).await?.items {
            if which.matches(&pod) && (go || ours(&pod)) {
                let name = pod.metadata.name.clone().unwrap_or_default();
                let patch = json!({"metadata": {"annotations": {POD_DELETION_COST: value}}});
                let (params, patch) = (PatchParams::default(), Patch::Merge(patch));
                self.write_within("pod patch", pods.patch(&name, &params, &patch))
                    .await?;
                changed += 1;
            }
        }
        Ok(changed)
    }
}

impl Kubernetes for Actuator {
    /// A merge patch of the Node's taints, at the version read: a taint someone else adds
    /// meanwhile fails it (409) rather than being lost, and the next look tries again.
    async fn reserve_node(&self, node: &str, on: bool) -> Result<()> {
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(self.client.clone());
        let n = self.read_within("node read", nodes.get(node)).await?;
        let mut taints: Vec<Value> = (n.spec.and_then(|s| s.taints).unwrap_or_default())
            .into_iter()
            .map(|t| serde_json::to_value(t).unwrap_or_default())
            .collect();
        let ours = |t: &Value| t["key"] == crate::pool::RESERVED_TAINT;
        let had = taints.iter().any(ours);
        if had == on {
            return Ok(());
        }
        taints.retain(|t| !ours(t));
        if on {
            taints.push(reservation());
        }
        let patch = json!({
            "metadata": {"resourceVersion": n.metadata.resource_version},
            "spec": {"taints": taints},
        });
        let (params, patch) = (PatchParams::default(), Patch::Merge(patch));
        self.write_within("node taint", nodes.patch(node, &params, &patch))
            .await?;
        Ok(())
    }

    async fn evict_pods_on(
        &self,
        node: &str,
        evictable: &BTreeMap<String, String>,
    ) -> Result<Evicted> {
        let mut done = Evicted::default();
        if evictable.is_empty() {
            return Ok(done);
        }
        let labels: Vec<String> = evictable.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let lp = ListParams::default()
            .fields(&format!("spec.nodeName={node}"))
            .labels(&labels.join(","));
        let all: Api<Pod> = Api::all(self.client.clone());
        let mut pods: Vec<Pod> = (self.read_within("pod list", all.list(&lp)).await?.items)
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| {
                let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
                !matches!(phase, Some("Succeeded" | "Failed"))
            })
            .collect();
        pods.sort_by_key(|p| p.spec.as_ref().and_then(|s| s.priority).unwrap_or(0));
        for pod in pods {
            let ns = pod.metadata.namespace.clone().unwrap_or_default();
            let name = pod.metadata.name.clone().unwrap_or_default();
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
            let params = kube::api::EvictParams::default();
            match self
                .write_within("pod eviction", api.evict(&name, &params))
                .await
            {
                Ok(_) => done.evicted += 1,
                Err(Error::Kube(kube::Error::Api(s))) if s.code == 429 => {
                    done.blocked.push(format!("{ns}/{name}"));
                }
                Err(Error::Kube(kube::Error::Api(s))) if s.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }

    /// Reads the target and its scale.
    async fn read(&self, namespace: &str, target: &ScaleTargetRef) -> Result<Target> {
        let resource = self.resource(target).await?;
        if let Some(object) = self.targets.get(namespace, target, &resource) {
            // A NodeSet's scale is its spec.replicas and status.replicas, at its version; the
            // API server answers 0 for either when the object leaves it out (as its
            // controller does at 0 pods).
            let at = |path: [&str; 2]| {
                (object.data.get(path[0]))
                    .and_then(|v| v.get(path[1]))
                    .and_then(Value::as_i64)
                    .and_then(|r| u64::try_from(r).ok())
                    .unwrap_or(0)
            };
            let scale = Scale {
                replicas: at(["spec", "replicas"]),
                status_replicas: Some(at(["status", "replicas"])),
                resource_version: object.metadata.resource_version.clone(),
            };
            return Ok(target_of(target, &object, scale));
        }
        let api = Api::<DynamicObject>::namespaced_with(self.client.clone(), namespace, &resource);
        let object = self
            .read_within("target read", api.get(&target.name))
            .await?;
        let scale = self
            .read_within("scale read", api.get_scale(&target.name))
            .await?;
        let scale = Scale {
            replicas: scale
                .spec
                .and_then(|s| s.replicas)
                .map_or(0, |r| u64::try_from(r).unwrap_or(0)),
            status_replicas: scale.status.and_then(|s| u64::try_from(s.replicas).ok()),
            resource_version: scale.metadata.resource_version,
        };
        Ok(target_of(target, &object, scale))
    }

    /// Sets the target's replicas, if its scale is still at `resource_version`.
    async fn scale(
        &self,
        namespace: &str,
        target: &ScaleTargetRef,
        replicas: u64,
        resource_version: Option<&str>,
    ) -> Result<()> {
        let api = self.api(namespace, target).await?;
        let mut patch = json!({"spec": {"replicas": replicas}});
        if let Some(rv) = resource_version {
            patch["metadata"] = json!({"resourceVersion": rv});
        }
        let params = PatchParams::default();
        let patch = Patch::Merge(patch);
        let written = self
            .write_within(
                "scale patch",
                api.patch_scale(&target.name, &params, &patch),
            )
            .await;
        match &written {
            Ok(scale) => {
                let rv = scale.metadata.resource_version.as_deref();
                self.targets.wrote(namespace, target, rv);
            }
            Err(e) if e.is_conflict() => self.targets.conflicted(namespace, target),
            Err(_) => {}
        }
        written.map(|_| ())
    }

    /// Marks the target's pods `which` to be deleted first on the next scale-in (the
    /// operator then removes exactly the nodes we drained, or the pods slurmctld powers
    /// down). Returns how many were marked.
    async fn mark_pods_to_go(
        &self,
        namespace: &str,
        selector: Option<&str>,
        which: PodsBy<'_>,
    ) -> Result<usize> {
        self.set_marks(namespace, selector, which, true).await
    }

    /// Only a pod carrying our own value loses it: a site may rank its pods itself.
    async fn unmark_pods(
        &self,
        namespace: &str,
        selector: Option<&str>,
        which: PodsBy<'_>,
    ) -> Result<usize> {
        self.set_marks(namespace, selector, which, false).await
    }

    /// Merges `status` into the NodeSetAutoscaler's status.
    async fn status(
        &self,
        nsa: &NodeSetAutoscaler,
        status: &NodeSetAutoscalerStatus,
    ) -> Result<()> {
        let namespace = nsa.metadata.namespace.clone().unwrap_or_default();
        let api: Api<NodeSetAutoscaler> = Api::namespaced(self.client.clone(), &namespace);
        let name = nsa.metadata.name.clone().unwrap_or_default();
        let (params, patch) = (
            PatchParams::default(),
            Patch::Merge(json!({ "status": status })),
        );
        self.write_within("status patch", api.patch_status(&name, &params, &patch))
            .await?;
        Ok(())
    }

    /// Records an Event on the NodeSetAutoscaler; failures are logged, never fatal.
    async fn event(&self, nsa: &NodeSetAutoscaler, warning: bool, reason: &str, note: String) {
        let reference: ObjectReference = nsa.object_ref(&());
        let event = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_string(),
            note: Some(note.chars().take(1000).collect()),
            action: "Scale".into(),
            secondary: None,
        };
        let key = (
            reference
                .uid
                .clone()
                .unwrap_or_else(|| format!("{:?}/{:?}", reference.namespace, reference.name)),
            reason.to_string(),
            warning,
        );
        let recorder = {
            let mut recorders = self.recorders.lock().unwrap_or_else(|e| e.into_inner());
            match recorders.get(&key) {
                Some((said, r)) if event.note.as_deref() == Some(said.as_str()) => r.clone(),
                _ => {
                    let r = Recorder::new(self.client.clone(), self.reporter.clone());
                    let said = event.note.clone().unwrap_or_default();
                    recorders.insert(key, (said, r.clone()));
                    r
                }
            }
        };
        let published = self
            .write_within("event", recorder.publish(&event, &reference))
            .await;
        if let Err(e) = published {
            warn!(error = %e, reason, "cannot record an Event");
        }
    }
}

/// A target's scale subresource, as read.
struct Scale {
    replicas: u64,
    status_replicas: Option<u64>,
    resource_version: Option<String>,
}

/// The target as the controller needs it, from the object and its scale.
fn target_of(target: &ScaleTargetRef, object: &DynamicObject, scale: Scale) -> Target {
    let spec = object.data.get("spec");
    Target {
        replicas: scale.replicas,
        status_replicas: scale.status_replicas,
        resource_version: scale.resource_version,
        scaling_mode: spec
            .and_then(|s| s.get("scalingMode"))
            .and_then(Value::as_str)
            .map(String::from),
        named_partition: named_partition(object.metadata.annotations.as_ref()),
        slurm_name: if target.kind == "NodeSet" {
            slurm_name(&target.name, nodeset_hostname(spec))
        } else {
            target.name.clone()
        },
        selector: object
            .data
            .get("status")
            .and_then(|s| s.get("selector"))
            .and_then(Value::as_str)
            .map(String::from),
        nodes: if target.kind == "NodeSet" {
            NodeFacts::of_nodeset(&target.name, object.metadata.annotations.as_ref(), spec)
        } else {
            NodeFacts::default()
        },
    }
}
