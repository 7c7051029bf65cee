//! The only code that writes: the target's scale subresource (with the resourceVersion read,
//! so a concurrent change is a 409 and the decision is made again on fresh data), the
//! NodeSetAutoscaler's status, and Events. Any resource with a scale subresource works; the
//! API resource behind `scaleTargetRef` is found by discovery and cached. The controller sees
//! it through the [`Kubernetes`] trait, so the demo can put a simulated NodeSet in its place.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource};
use serde_json::{Value, json};
use slurmscale_exporter::k8s::quantity;
use tracing::warn;

use crate::colocation::{PendingPod, Placement, Requirement, Toleration};
use crate::crd::{NodeSetAutoscaler, ScaleTargetRef};
use crate::error::{Error, Result};

/// The target as the controller needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// `spec.replicas` of the scale subresource (absent at 0).
    pub replicas: u64,
    /// The scale's resourceVersion, sent back with the patch.
    pub resource_version: Option<String>,
    /// `spec.scalingMode` of a NodeSet (`DaemonSet` ones cannot be scaled).
    pub scaling_mode: Option<String>,
    /// The Slurm partition the target serves, if it says (`slurmscale.io/partition`).
    pub partition_annotation: Option<String>,
    /// The label selector of its pods (`status.selector`), to find them on nodes.
    pub selector: Option<String>,
}

/// The annotation slurm-operator reads to choose which NodeSet pods go first on scale-in.
pub const POD_DELETION_COST: &str = "nodeset.slinky.slurm.net/pod-deletion-cost";

pub struct Actuator {
    client: Client,
    recorder: Recorder,
    resources: Mutex<HashMap<(String, String), ApiResource>>,
}

impl Actuator {
    pub fn new(client: Client, identity: &str) -> Self {
        let reporter = Reporter {
            controller: "slurmscale-autoscaler".into(),
            instance: Some(identity.to_string()),
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            resources: Mutex::default(),
        }
    }

    async fn api(&self, namespace: &str, target: &ScaleTargetRef) -> Result<Api<DynamicObject>> {
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
                let (resource, caps) = kube::discovery::pinned_kind(&self.client, &gvk).await?;
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
        Ok(Api::namespaced_with(
            self.client.clone(),
            namespace,
            &resource,
        ))
    }
}

/// Everything the controller reads and writes in Kubernetes. [`Actuator`] does it through
/// the API server; `slurmscale demo` through a simulated NodeSet. Kept narrow on purpose:
/// the controller's decisions depend on nothing else.
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

    /// Marks the target's pods on `nodes` to be deleted first on scale-in; how many.
    fn mark_pods_to_go(
        &self,
        namespace: &str,
        selector: Option<&str>,
        nodes: &[String],
    ) -> impl Future<Output = Result<usize>> + Send;

    /// Nodes running a pod of `selector`: true when it serves (is not marked to go).
    fn pod_nodes(
        &self,
        namespace: &str,
        selector: &str,
    ) -> impl Future<Output = Result<BTreeMap<String, bool>>> + Send;

    /// Unschedulable pods with these labels, with what they request and where they may go.
    fn unschedulable_pods(
        &self,
        labels: &BTreeMap<String, String>,
    ) -> impl Future<Output = Result<Vec<PendingPod>>> + Send;

    /// Merges `status` into the autoscaler's status.
    fn status(
        &self,
        nsa: &NodeSetAutoscaler,
        status: Value,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Records an Event on the autoscaler (best effort).
    fn event(
        &self,
        nsa: &NodeSetAutoscaler,
        warning: bool,
        reason: &str,
        note: String,
    ) -> impl Future<Output = ()> + Send;
}

/// A shared one works too (the demo keeps a handle on what the controller did).
impl<K: Kubernetes> Kubernetes for std::sync::Arc<K> {
    fn read(
        &self,
        namespace: &str,
        target: &ScaleTargetRef,
    ) -> impl Future<Output = Result<Target>> + Send {
        (**self).read(namespace, target)
    }

    fn scale(
        &self,
        namespace: &str,
        target: &ScaleTargetRef,
        replicas: u64,
        resource_version: Option<&str>,
    ) -> impl Future<Output = Result<()>> + Send {
        (**self).scale(namespace, target, replicas, resource_version)
    }

    fn mark_pods_to_go(
        &self,
        namespace: &str,
        selector: Option<&str>,
        nodes: &[String],
    ) -> impl Future<Output = Result<usize>> + Send {
        (**self).mark_pods_to_go(namespace, selector, nodes)
    }

    fn pod_nodes(
        &self,
        namespace: &str,
        selector: &str,
    ) -> impl Future<Output = Result<BTreeMap<String, bool>>> + Send {
        (**self).pod_nodes(namespace, selector)
    }

    fn unschedulable_pods(
        &self,
        labels: &BTreeMap<String, String>,
    ) -> impl Future<Output = Result<Vec<PendingPod>>> + Send {
        (**self).unschedulable_pods(labels)
    }

    fn status(
        &self,
        nsa: &NodeSetAutoscaler,
        status: Value,
    ) -> impl Future<Output = Result<()>> + Send {
        (**self).status(nsa, status)
    }

    fn event(
        &self,
        nsa: &NodeSetAutoscaler,
        warning: bool,
        reason: &str,
        note: String,
    ) -> impl Future<Output = ()> + Send {
        (**self).event(nsa, warning, reason, note)
    }
}

impl Kubernetes for Actuator {
    /// Reads the target and its scale.
    async fn read(&self, namespace: &str, target: &ScaleTargetRef) -> Result<Target> {
        let api = self.api(namespace, target).await?;
        let object = api.get(&target.name).await?;
        let scale = api.get_scale(&target.name).await?;
        let spec = object.data.get("spec");
        Ok(Target {
            replicas: scale
                .spec
                .and_then(|s| s.replicas)
                .map_or(0, |r| u64::try_from(r).unwrap_or(0)),
            resource_version: scale.metadata.resource_version,
            scaling_mode: spec
                .and_then(|s| s.get("scalingMode"))
                .and_then(Value::as_str)
                .map(String::from),
            partition_annotation: object
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(slurmscale_exporter::k8s::nodeset::PARTITION_ANNOTATION))
                .cloned(),
            selector: object
                .data
                .get("status")
                .and_then(|s| s.get("selector"))
                .and_then(Value::as_str)
                .map(String::from),
        })
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
        api.patch_scale(&target.name, &PatchParams::default(), &Patch::Merge(patch))
            .await?;
        Ok(())
    }

    /// Marks the target's pods on `nodes` to be deleted first on the next scale-in (the
    /// operator then removes exactly the nodes we drained). Returns how many were marked.
    async fn mark_pods_to_go(
        &self,
        namespace: &str,
        selector: Option<&str>,
        nodes: &[String],
    ) -> Result<usize> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let mut lp = ListParams::default();
        if let Some(sel) = selector {
            lp = lp.labels(sel);
        }
        let mut marked = 0;
        for pod in pods.list(&lp).await?.items {
            let on = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
            if on.is_some_and(|n| nodes.iter().any(|x| x == n)) {
                let name = pod.metadata.name.clone().unwrap_or_default();
                let patch = json!({"metadata": {"annotations": {POD_DELETION_COST: "-100000"}}});
                pods.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                    .await?;
                marked += 1;
            }
        }
        Ok(marked)
    }

    /// The nodes the target's pods (by its `status.selector`) run on: node → whether a pod
    /// there is still serving (not yet marked to go). This, not Slurm, says which pool nodes
    /// Slurm holds: a node is Slurm's from its pod's start until the pod is marked.
    async fn pod_nodes(&self, namespace: &str, selector: &str) -> Result<BTreeMap<String, bool>> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let mut out = std::collections::BTreeMap::new();
        for pod in pods
            .list(&ListParams::default().labels(selector))
            .await?
            .items
        {
            let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) else {
                continue;
            };
            let leaving = pod.metadata.deletion_timestamp.is_some()
                || pod
                    .metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key(POD_DELETION_COST));
            *out.entry(node).or_insert(false) |= !leaving;
        }
        Ok(out)
    }

    /// Pending pods the scheduler could not place (PodScheduled=False, Unschedulable), with
    /// their CPU and memory requests, optionally only those with `labels`.
    async fn unschedulable_pods(
        &self,
        labels: &BTreeMap<String, String>,
    ) -> Result<Vec<PendingPod>> {
        let pods: Api<Pod> = Api::all(self.client.clone());
        let mut lp = ListParams::default().fields("status.phase=Pending");
        if !labels.is_empty() {
            let sel: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            lp = lp.labels(&sel.join(","));
        }
        let mut out = Vec::new();
        for pod in pods.list(&lp).await?.items {
            let unschedulable = pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| {
                    cs.iter().any(|c| {
                        c.type_ == "PodScheduled"
                            && c.status == "False"
                            && c.reason.as_deref() == Some("Unschedulable")
                    })
                });
            if !unschedulable {
                continue;
            }
            let (mut cpu, mut memory) = (0.0, 0.0);
            for c in pod.spec.iter().flat_map(|s| s.containers.iter()) {
                if let Some(req) = c.resources.as_ref().and_then(|r| r.requests.as_ref()) {
                    cpu += req
                        .get("cpu")
                        .and_then(|q| quantity::parse(&q.0))
                        .unwrap_or(0.0);
                    memory += req
                        .get("memory")
                        .and_then(|q| quantity::parse(&q.0))
                        .unwrap_or(0.0);
                }
            }
            let name = format!(
                "{}/{}",
                pod.metadata.namespace.unwrap_or_default(),
                pod.metadata.name.unwrap_or_default()
            );
            out.push(PendingPod {
                name,
                cpu,
                memory,
                placement: placement(pod.spec.as_ref()),
            });
        }
        Ok(out)
    }

    /// Merges `status` into the NodeSetAutoscaler's status.
    async fn status(&self, nsa: &NodeSetAutoscaler, status: Value) -> Result<()> {
        let namespace = nsa.metadata.namespace.clone().unwrap_or_default();
        let api: Api<NodeSetAutoscaler> = Api::namespaced(self.client.clone(), &namespace);
        let name = nsa.metadata.name.clone().unwrap_or_default();
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
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
        if let Err(e) = self.recorder.publish(&event, &reference).await {
            warn!(error = %e, reason, "cannot record an Event");
        }
    }
}

/// Where a pod may go, from its `nodeSelector`, required node affinity and tolerations.
fn placement(spec: Option<&k8s_openapi::api::core::v1::PodSpec>) -> Placement {
    let Some(spec) = spec else {
        return Placement::default();
    };
    let terms = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|r| {
            r.node_selector_terms
                .iter()
                .map(|t| {
                    let exprs = t.match_expressions.iter().flatten().map(|r| (r, false));
                    let fields = t.match_fields.iter().flatten().map(|r| (r, true));
                    exprs
                        .chain(fields)
                        .map(|(r, field)| Requirement {
                            key: r.key.clone(),
                            operator: r.operator.clone(),
                            values: r.values.clone().unwrap_or_default(),
                            field,
                        })
                        .collect()
                })
                .collect()
        })
        .unwrap_or_default();
    let tolerations = spec
        .tolerations
        .iter()
        .flatten()
        .map(|t| Toleration {
            key: t.key.clone().unwrap_or_default(),
            operator: t.operator.clone().unwrap_or_default(),
            value: t.value.clone().unwrap_or_default(),
            effect: t.effect.clone().unwrap_or_default(),
        })
        .collect();
    Placement {
        node_selector: spec.node_selector.clone().unwrap_or_default(),
        terms,
        tolerations,
    }
}
