//! Reading the colocation ledger from GenericNode objects.
//!
//! Alibaba publishes no schema for GenericNode, so where things live is configuration
//! ([`LedgerConfig`], defaults from the public docs) and objects are read as untyped JSON. An
//! object that cannot be read completely — no status yet, allocations that are not a list,
//! an unknown scheduler type, a quantity that does not parse — is rejected whole with a
//! [`Malformed`] reason, counted and logged by the caller; half a ledger would be worse than
//! none.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use kube::api::DynamicObject;
use serde_json::Value;

use crate::quantity;

/// Where GenericNodes are and where in them the ledger lives.
#[derive(Clone, Debug, PartialEq)]
pub struct LedgerConfig {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    /// Dotted path to the Slurm node name.
    pub alias_path: String,
    /// Dotted path to the list of `{type, allocated: {resource: quantity}}`.
    pub allocations_path: String,
    /// Dotted path to the pending admission checks (shape assumed: objects with `state`).
    pub admission_checks_path: String,
    /// Label holding the Slurm cluster name.
    pub cluster_label: String,
}

impl Default for LedgerConfig {
    fn default() -> Self {
        Self {
            group: "kai.alibabacloud.com".into(),
            version: "v1alpha1".into(),
            kind: "GenericNode".into(),
            plural: "genericnodes".into(),
            alias_path: "spec.alias".into(),
            allocations_path: "status.allocatedResources".into(),
            admission_checks_path: "status.admissionChecks".into(),
            cluster_label: super::genericnode::CLUSTER_NAME_LABEL.into(),
        }
    }
}

/// Which scheduler holds a share.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Owner {
    Slurm,
    Kubernetes,
}

impl Owner {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Slurm => "slurm",
            Self::Kubernetes => "kubernetes",
        }
    }
}

/// Why a GenericNode was skipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Malformed {
    NoStatus,
    NotAList,
    BadEntry,
    UnknownOwner,
    BadQuantity,
}

impl Malformed {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoStatus => "no_status",
            Self::NotAList => "allocations_not_a_list",
            Self::BadEntry => "bad_entry",
            Self::UnknownOwner => "unknown_type",
            Self::BadQuantity => "bad_quantity",
        }
    }
}

/// One GenericNode's ledger, quantities in base units (cores, bytes, counts).
#[derive(Clone, Debug, PartialEq)]
pub struct LedgerNode {
    /// The GenericNode's (= Kubernetes node's) name.
    pub name: String,
    /// The Slurm node name.
    pub alias: String,
    /// The Slurm cluster, from the cluster label ("" when unlabelled).
    pub cluster: String,
    /// (owner, resource) → amount held.
    pub allocated: BTreeMap<(Owner, String), f64>,
    pub pending_checks: u64,
}

impl LedgerNode {
    pub fn held(&self, owner: Owner, resource: &str) -> f64 {
        self.allocated
            .get(&(owner, resource.to_string()))
            .copied()
            .unwrap_or(0.0)
    }
}

fn at<'a>(root: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .filter(|p| !p.is_empty())
        .try_fold(root, |v, key| v.get(key))
}

/// Reads one GenericNode.
pub fn parse(obj: &DynamicObject, cfg: &LedgerConfig) -> Result<LedgerNode, Malformed> {
    let name = obj.metadata.name.clone().unwrap_or_default();
    let alias = at(&obj.data, &cfg.alias_path)
        .and_then(Value::as_str)
        .unwrap_or(&name)
        .to_string();
    let cluster = obj
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(&cfg.cluster_label))
        .cloned()
        .unwrap_or_default();
    let allocations = match at(&obj.data, &cfg.allocations_path) {
        None | Some(Value::Null) => return Err(Malformed::NoStatus),
        Some(Value::Array(a)) => a,
        Some(_) => return Err(Malformed::NotAList),
    };
    let mut allocated = BTreeMap::new();
    for entry in allocations {
        let owner = match entry.get("type").and_then(Value::as_str) {
            None => return Err(Malformed::BadEntry),
            Some(t) if t.eq_ignore_ascii_case("slurm") => Owner::Slurm,
            Some(t) if t.eq_ignore_ascii_case("kubernetes") => Owner::Kubernetes,
            Some(_) => return Err(Malformed::UnknownOwner),
        };
        let resources = match entry.get("allocated") {
            Some(Value::Object(r)) => r,
            None | Some(Value::Null) => continue,
            Some(_) => return Err(Malformed::BadEntry),
        };
        for (resource, q) in resources {
            let amount = quantity::parse_json(q).ok_or(Malformed::BadQuantity)?;
            *allocated.entry((owner, resource.clone())).or_insert(0.0) += amount;
        }
    }
    let pending_checks = at(&obj.data, &cfg.admission_checks_path)
        .and_then(Value::as_array)
        .map(|checks| {
            checks
                .iter()
                .filter(|c| {
                    let state = c
                        .get("state")
                        .or_else(|| c.get("status"))
                        .and_then(Value::as_str);
                    state.is_none_or(|s| s.eq_ignore_ascii_case("pending"))
                })
                .count() as u64
        })
        .unwrap_or(0);
    Ok(LedgerNode {
        name,
        alias,
        cluster,
        allocated,
        pending_checks,
    })
}

/// What a Kubernetes node can give (`status.allocatable`), in base units.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Capacity {
    pub resources: BTreeMap<String, f64>,
    /// The node's labels, to match pods' node selectors against.
    pub labels: BTreeMap<String, String>,
    /// Its `NoSchedule` and `NoExecute` taints: a pod must tolerate each to land there.
    pub taints: Vec<Taint>,
}

/// A node taint that keeps pods off (`PreferNoSchedule` ones only discourage, and are left out).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: String,
}

impl Capacity {
    pub fn of(node: &Node) -> Self {
        let resources = node
            .status
            .as_ref()
            .and_then(|s| s.allocatable.as_ref())
            .map(|a| {
                a.iter()
                    .filter_map(|(k, q)| Some((k.clone(), quantity::parse(&q.0)?)))
                    .collect()
            })
            .unwrap_or_default();
        let labels = node.metadata.labels.clone().unwrap_or_default();
        let taints = node
            .spec
            .iter()
            .flat_map(|s| s.taints.iter().flatten())
            .filter(|t| t.effect != "PreferNoSchedule")
            .map(|t| Taint {
                key: t.key.clone(),
                value: t.value.clone().unwrap_or_default(),
                effect: t.effect.clone(),
            })
            .collect();
        Self {
            resources,
            labels,
            taints,
        }
    }

    pub fn get(&self, resource: &str) -> Option<f64> {
        self.resources.get(resource).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(status: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "kai.alibabacloud.com/v1alpha1", "kind": "GenericNode",
            "metadata": {"name": "node-a", "labels": {"kai.alibabacloud.com/cluster-name": "prod"}},
            "spec": {"alias": "n1", "type": "Slurm"},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn the_documented_example_reads_in_base_units() {
        let n = parse(
            &object(json!({"allocatedResources": [
                {"allocated": {"cpu": "0", "memory": "0"}, "type": "Slurm"},
                {"allocated": {"cpu": "1735m", "memory": "2393Mi", "nvidia.com/gpu": 1}, "type": "Kubernetes"},
            ], "admissionChecks": [{"name": "a", "state": "Pending"}, {"name": "b", "state": "Ready"}]})),
            &LedgerConfig::default(),
        )
        .unwrap();
        assert_eq!((n.alias.as_str(), n.cluster.as_str()), ("n1", "prod"));
        assert_eq!(n.held(Owner::Kubernetes, "cpu"), 1.735);
        assert_eq!(n.held(Owner::Kubernetes, "memory"), 2393.0 * 1048576.0);
        assert_eq!(n.held(Owner::Kubernetes, "nvidia.com/gpu"), 1.0);
        assert_eq!(n.held(Owner::Slurm, "cpu"), 0.0);
        assert_eq!(n.pending_checks, 1);
    }

    #[test]
    fn malformed_ledgers_are_rejected_whole() {
        let cfg = LedgerConfig::default();
        let mut no_status = object(json!(null));
        no_status.data.as_object_mut().unwrap().remove("status");
        assert_eq!(parse(&no_status, &cfg), Err(Malformed::NoStatus));
        assert_eq!(
            parse(&object(json!({"allocatedResources": "lots"})), &cfg),
            Err(Malformed::NotAList)
        );
        assert_eq!(
            parse(
                &object(json!({"allocatedResources": [{"type": "Volcano", "allocated": {}}]})),
                &cfg
            ),
            Err(Malformed::UnknownOwner)
        );
        assert_eq!(
            parse(
                &object(
                    json!({"allocatedResources": [{"type": "Slurm", "allocated": {"cpu": "two"}}]})
                ),
                &cfg
            ),
            Err(Malformed::BadQuantity)
        );
        assert_eq!(
            parse(&object(json!({"allocatedResources": [42]})), &cfg),
            Err(Malformed::BadEntry)
        );
    }
}
