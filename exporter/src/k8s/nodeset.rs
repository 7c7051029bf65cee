//! Slinky `NodeSet` (`slinky.slurm.net`): `v1alpha1` in slurm-operator 0.1-0.4 and `v1beta1`
//! from 1.0. A NodeSet is a set of slurmd pods serving one Slurm partition; its scale
//! subresource (`.spec.replicas` / `.status.replicas` / `.status.selector`) is what KEDA and our
//! autoscaler move. When replicas drop, the operator drains the Slurm node and deletes the pod
//! only once the node is drained.
//!
//! Both versions share the status shape and most of the spec; `v1beta1` adds `scalingMode`
//! (a `DaemonSet` NodeSet ignores replicas, so it must never be autoscaled).

use crate::model::demand::Shape;
use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The Slurm controller (a `Controller` CR) this NodeSet belongs to.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
pub struct ControllerRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// The partition the operator creates for this NodeSet.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
pub struct NodeSetPartition {
    #[serde(default)]
    pub enabled: bool,
    /// Extra text for the partition line, e.g. `MaxTime=UNLIMITED`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
}

/// Observed state, shared by both versions (v1alpha1 simply lacks `desired`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct NodeSetStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable_replicas: Option<i32>,
    /// v1beta1 only: nodes that should run a pod (replicas, or matching nodes in DaemonSet mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm_idle: Option<i32>,
    /// Pods whose Slurm node is ALLOCATED or MIXED.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm_allocated: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm_down: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm_drain: Option<i32>,
    /// Label selector of the pods, in string form, for the scale subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The operator's controller-revision hash; required by the official schema whenever a
    /// status is written, so anything playing the operator must set it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_set_hash: Option<String>,
}

/// How a v1beta1 NodeSet places pods. Unknown values are kept, not rejected: a newer operator
/// must not make us fail to read the object.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(from = "String", into = "String")]
#[schemars(with = "String")]
pub enum ScalingMode {
    StatefulSet,
    DaemonSet,
    Other(String),
}

impl From<String> for ScalingMode {
    fn from(s: String) -> Self {
        match s.as_str() {
            "StatefulSet" => Self::StatefulSet,
            "DaemonSet" => Self::DaemonSet,
            _ => Self::Other(s),
        }
    }
}

impl From<ScalingMode> for String {
    fn from(m: ScalingMode) -> Self {
        match m {
            ScalingMode::StatefulSet => "StatefulSet".into(),
            ScalingMode::DaemonSet => "DaemonSet".into(),
            ScalingMode::Other(s) => s,
        }
    }
}

/// Labels and annotations of the pod template: the `pod-deletion-cost` steering and the
/// partition mapping read them.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct PodTemplate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMetadata>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
pub struct TemplateMetadata {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

pub mod v1beta1 {
    use kube::CustomResource;

    use super::*;

    #[derive(
        CustomResource, Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema,
    )]
    #[kube(
        group = "slinky.slurm.net",
        version = "v1beta1",
        kind = "NodeSet",
        plural = "nodesets",
        doc = "A set of slurmd pods serving one Slurm partition (Slinky slurm-operator).",
        shortname = "nss",
        namespaced,
        status = "NodeSetStatus",
        scale(
            spec_replicas_path = ".spec.replicas",
            status_replicas_path = ".status.replicas",
            label_selector_path = ".status.selector"
        ),
        printcolumn(name = "Desired", type_ = "integer", json_path = ".status.desired"),
        printcolumn(name = "Replicas", type_ = "integer", json_path = ".status.replicas"),
        printcolumn(name = "Ready", type_ = "integer", json_path = ".status.readyReplicas"),
        printcolumn(name = "Idle", type_ = "integer", json_path = ".status.slurmIdle"),
        printcolumn(
            name = "Allocated",
            type_ = "integer",
            json_path = ".status.slurmAllocated"
        )
    )]
    #[serde(rename_all = "camelCase")]
    #[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
    pub struct NodeSetSpec {
        #[serde(default)]
        pub controller_ref: ControllerRef,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub replicas: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub scaling_mode: Option<ScalingMode>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub partition: Option<NodeSetPartition>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub template: Option<PodTemplate>,
    }
}

pub mod v1alpha1 {
    use kube::CustomResource;

    use super::*;

    #[derive(
        CustomResource, Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema,
    )]
    #[kube(
        group = "slinky.slurm.net",
        version = "v1alpha1",
        kind = "NodeSet",
        plural = "nodesets",
        doc = "A set of slurmd pods serving one Slurm partition (Slinky slurm-operator).",
        shortname = "nss",
        namespaced,
        status = "NodeSetStatus",
        scale(
            spec_replicas_path = ".spec.replicas",
            status_replicas_path = ".status.replicas",
            label_selector_path = ".status.selector"
        ),
        printcolumn(name = "Replicas", type_ = "integer", json_path = ".status.replicas"),
        printcolumn(name = "Ready", type_ = "integer", json_path = ".status.readyReplicas"),
        printcolumn(name = "Idle", type_ = "integer", json_path = ".status.slurmIdle"),
        printcolumn(
            name = "Allocated",
            type_ = "integer",
            json_path = ".status.slurmAllocated"
        )
    )]
    #[serde(rename_all = "camelCase")]
    #[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
    pub struct NodeSetSpec {
        #[serde(default)]
        pub controller_ref: ControllerRef,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub replicas: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub partition: Option<NodeSetPartition>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub template: Option<PodTemplate>,
    }
}

/// Annotation naming the Slurm partition a NodeSet serves (default: the NodeSet's name, which
/// is the partition slurm-operator creates for it).
pub const PARTITION_ANNOTATION: &str = "slurmscale.io/partition";
/// Annotation naming the Slurm cluster (the `cluster` label) a NodeSet belongs to; needed only
/// when the exporter reads several clusters.
pub const CLUSTER_ANNOTATION: &str = "slurmscale.io/cluster";
/// Annotation capping the nodes a NodeSet should have (default: the partition's size).
pub const MAX_NODES_ANNOTATION: &str = "slurmscale.io/max-nodes";
/// Annotation giving the shape of the nodes a NodeSet adds (`cpus=32,memory=128Gi,gpus=8`),
/// for packing demand where the partition cannot tell (default: the partition's own).
pub const NODE_SHAPE_ANNOTATION: &str = "slurmscale.io/node-shape";

/// The Slurm partition a NodeSet (or any scale target) serves: its [`PARTITION_ANNOTATION`],
/// else its name. The exporter's NodeSet series and the autoscaler both read it here.
pub fn partition_of(annotations: Option<&BTreeMap<String, String>>, name: &str) -> String {
    annotations
        .and_then(|a| a.get(PARTITION_ANNOTATION))
        .map(|p| p.trim())
        .filter(|p| !p.is_empty())
        .unwrap_or(name)
        .to_string()
}

/// A NodeSet of either version, as the exporter and autoscaler see it.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeSetView {
    pub namespace: String,
    pub name: String,
    /// `slinky.slurm.net/v1beta1` or `slinky.slurm.net/v1alpha1`.
    pub api_version: &'static str,
    /// `spec.replicas` (absent: the operator's default).
    pub replicas: Option<i32>,
    pub status: NodeSetStatus,
    /// v1beta1 only; v1alpha1 NodeSets are always StatefulSet-like.
    pub scaling_mode: Option<ScalingMode>,
    pub partition: String,
    pub cluster: Option<String>,
    pub max_nodes: Option<u64>,
    /// From [`NODE_SHAPE_ANNOTATION`]; what it leaves out comes from the partition.
    pub shape: Shape,
}

impl NodeSetView {
    fn from_parts(
        meta: &kube::api::ObjectMeta,
        api_version: &'static str,
        replicas: Option<i32>,
        status: Option<&NodeSetStatus>,
        scaling_mode: Option<ScalingMode>,
    ) -> Self {
        let annotation = |k: &str| {
            meta.annotations
                .as_ref()
                .and_then(|a| a.get(k))
                .map(|v| v.trim().to_string())
        };
        let name = meta.name.clone().unwrap_or_default();
        Self {
            namespace: meta.namespace.clone().unwrap_or_default(),
            partition: partition_of(meta.annotations.as_ref(), &name),
            cluster: annotation(CLUSTER_ANNOTATION).filter(|c| !c.is_empty()),
            max_nodes: annotation(MAX_NODES_ANNOTATION).and_then(|m| m.parse().ok()),
            shape: annotation(NODE_SHAPE_ANNOTATION)
                .map(|s| Shape::parse(&s))
                .unwrap_or_default(),
            name,
            api_version,
            replicas,
            status: status.cloned().unwrap_or_default(),
            scaling_mode,
        }
    }

    /// Replicas as the scale subresource reports them (absent means 0).
    pub fn spec_replicas(&self) -> u64 {
        self.replicas
            .and_then(|r| u64::try_from(r).ok())
            .unwrap_or(0)
    }
}

impl From<&v1beta1::NodeSet> for NodeSetView {
    fn from(n: &v1beta1::NodeSet) -> Self {
        Self::from_parts(
            &n.metadata,
            "slinky.slurm.net/v1beta1",
            n.spec.replicas,
            n.status.as_ref(),
            n.spec.scaling_mode.clone(),
        )
    }
}

impl From<&v1alpha1::NodeSet> for NodeSetView {
    fn from(n: &v1alpha1::NodeSet) -> Self {
        Self::from_parts(
            &n.metadata,
            "slinky.slurm.net/v1alpha1",
            n.spec.replicas,
            n.status.as_ref(),
            None,
        )
    }
}
