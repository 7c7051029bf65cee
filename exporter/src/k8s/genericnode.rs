//! `GenericNode` (`kai.alibabacloud.com/v1alpha1`, cluster-scoped): the ledger between Slurm
//! and Kubernetes on a colocated node (ACK's ack-slurm-operator). Named after the Kubernetes
//! node; `spec.alias` is the Slurm node name; `status.allocatedResources` lists what each
//! scheduler holds, as Kubernetes quantities.
//!
//! No schema is published, so these types are deliberately loose (strings and maps, unknown
//! fields preserved): parsing quantities and validating owners happens later, where a
//! malformed object can be skipped and counted instead of failing the whole list.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Label carrying the Slurm cluster name on a GenericNode.
pub const CLUSTER_NAME_LABEL: &str = "kai.alibabacloud.com/cluster-name";

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "kai.alibabacloud.com",
    version = "v1alpha1",
    kind = "GenericNode",
    plural = "genericnodes",
    doc = "The colocation ledger of one Kubernetes node shared with Slurm (ACK ack-slurm-operator).",
    status = "GenericNodeStatus",
    printcolumn(name = "Alias", type_ = "string", json_path = ".spec.alias"),
    printcolumn(name = "Type", type_ = "string", json_path = ".spec.type")
)]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct GenericNodeSpec {
    /// The Slurm node name of this Kubernetes node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    /// The kind of generic node, e.g. `Slurm`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct GenericNodeStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allocated_resources: Vec<AllocatedResources>,
    /// Pending admission checks (shape assumed: not documented publicly).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "list_of_open_objects")]
    pub admission_checks: Vec<serde_json::Value>,
}

/// A structural schema for a list of objects whose shape we do not know.
fn list_of_open_objects(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "items": { "type": "object", "x-kubernetes-preserve-unknown-fields": true }
    })
}

/// What one scheduler (`type`: `Slurm` or `Kubernetes`) holds on the node.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct AllocatedResources {
    #[serde(rename = "type")]
    pub type_: String,
    /// Resource name → quantity, e.g. `cpu: 1735m`, `memory: 2393Mi`.
    #[serde(default)]
    pub allocated: BTreeMap<String, IntOrString>,
}
