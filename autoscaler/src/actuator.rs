//! The only code that writes: the target's scale subresource (with the resourceVersion read,
//! so a concurrent change is a 409 and the decision is made again on fresh data), the
//! NodeSetAutoscaler's status, and Events. Any resource with a scale subresource works; the
//! API resource behind `scaleTargetRef` is found by discovery and cached.

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource};
use serde_json::{Value, json};
use tracing::warn;

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
}

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

    /// Reads the target and its scale.
    pub async fn read(&self, namespace: &str, target: &ScaleTargetRef) -> Result<Target> {
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
        })
    }

    /// Sets the target's replicas, if its scale is still at `resource_version`.
    pub async fn scale(
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

    /// Merges `status` into the NodeSetAutoscaler's status.
    pub async fn status(&self, nsa: &NodeSetAutoscaler, status: Value) -> Result<()> {
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
    pub async fn event(&self, nsa: &NodeSetAutoscaler, warning: bool, reason: &str, note: String) {
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
