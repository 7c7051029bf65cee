//! Slinky `NodeSet` (`slinky.slurm.net`): `v1alpha1` in slurm-operator 0.1-0.4 and `v1beta1`
//! from 1.0. A NodeSet is a set of slurmd pods serving one Slurm partition; its scale
//! subresource (`.spec.replicas` / `.status.replicas` / `.status.selector`) is what KEDA and our
//! autoscaler move. When replicas drop, the operator drains the Slurm node and deletes the pod
//! only once the node is drained.
//!
//! Both versions share the status shape and most of the spec; `v1beta1` adds `scalingMode`
//! (a `DaemonSet` NodeSet ignores replicas, so it must never be autoscaled).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::demand::Shape;
use crate::model::grows::{Candidate, Full, full, of_nodeset};
use crate::signals::partitions_listing;
use crate::snapshot::ClusterSnapshot;

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

/// The slurmd container of a NodeSet's pods (`spec.slurmd`): its resources, a last hint of
/// the node shape, and the arguments added to slurmd (`-b` where slurmctld powers the nodes
/// up).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct SlurmdContainer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<k8s_openapi::api::core::v1::ResourceRequirements>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
}

/// Labels and annotations of the pod template, which the `pod-deletion-cost` steering and the
/// partition mapping read, and its host name, which names the NodeSet in Slurm.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct PodTemplate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMetadata>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<TemplateSpec>,
}

/// The pod template's spec: its host name (Slinky's `slurm` Helm chart sets `<key>-` on every
/// NodeSet it renders).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct TemplateSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
}

impl PodTemplate {
    fn hostname(&self) -> Option<&str> {
        self.spec.as_ref()?.hostname.as_deref()
    }
}

/// The name a NodeSet goes by in Slurm, as slurm-operator writes its `NodeSet=`, `Feature=`
/// and `PartitionName=`: the pod template's host name with every leading and trailing `-`
/// trimmed when one is set (Slinky's chart names a NodeSet `slurm-worker-gpu` and sets host
/// name `gpu-`: Slurm knows it as `gpu`), else the object's name.
pub fn slurm_name(object_name: &str, hostname: Option<&str>) -> String {
    match hostname.filter(|h| !h.is_empty()) {
        Some(h) => h.trim_matches('-').to_string(),
        None => object_name.to_string(),
    }
}

/// What a NodeSet's pods' Slurm node names start with, before their ordinal: the template's
/// host name as it is (`gpu-` gives `gpu-0`, `gpu` gives `gpu0`), else the pod name's
/// `<object name>-` (slurm-operator's pods register under their host name).
pub fn node_prefix(object_name: &str, hostname: Option<&str>) -> String {
    match hostname.filter(|h| !h.is_empty()) {
        Some(h) => h.to_string(),
        None => format!("{object_name}-"),
    }
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
        /// slurmd's `--conf`: the node's features and shape as Slurm registers them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub extra_conf: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub slurmd: Option<SlurmdContainer>,
        /// Digits a pod's ordinal is padded to in its name (`slinky-007`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub ordinal_padding: Option<u32>,
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
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub extra_conf: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub slurmd: Option<SlurmdContainer>,
    }
}

/// Annotation naming the Slurm partition a NodeSet serves (default: its name in Slurm,
/// [`slurm_name`], which is the partition slurm-operator creates for it).
pub const PARTITION_ANNOTATION: &str = "slurmscale.io/partition";
/// Annotation naming the Slurm cluster (the `cluster` label) a NodeSet belongs to; needed only
/// when the exporter reads several clusters.
pub const CLUSTER_ANNOTATION: &str = "slurmscale.io/cluster";
/// Annotation capping the nodes a NodeSet should have (default: a NodeSetAutoscaler's
/// `maxReplicas`, else no bound).
pub const MAX_NODES_ANNOTATION: &str = "slurmscale.io/max-nodes";
/// Annotation giving the shape of the nodes a NodeSet adds (`cpus=32,memory=128Gi,gpus=8`),
/// for packing demand where the partition cannot tell (default: the partition's own).
pub const NODE_SHAPE_ANNOTATION: &str = "slurmscale.io/node-shape";

/// The Slurm partition a site names for a NodeSet (or any scale target): its
/// [`PARTITION_ANNOTATION`]. Without one, Slurm says which partitions the NodeSet is in
/// ([`crate::signals`]); the exporter's NodeSet series and the autoscaler both read it
/// there.
pub fn named_partition(annotations: Option<&BTreeMap<String, String>>) -> Option<String> {
    annotations
        .and_then(|a| a.get(PARTITION_ANNOTATION))
        .map(|p| p.trim())
        .filter(|p| !p.is_empty())
        .map(String::from)
}

/// The words of slurmd's `--conf` (`CPUs=4 RealMemory=8000 Features=a,b Gres=gpu:2`), by
/// key as Slurm spells it, case-insensitively.
fn conf_value<'a>(conf: &'a str, keys: &[&str]) -> Option<&'a str> {
    conf.split_ascii_whitespace()
        .filter_map(|w| w.split_once('='))
        .find(|(k, _)| keys.iter().any(|key| k.eq_ignore_ascii_case(key)))
        .map(|(_, v)| v)
}

/// GPUs in a `Gres=` value: `gpu:4`, `gpu:a100:4`, `gpu:2,nic:1`.
fn conf_gpus(gres: &str) -> Option<u64> {
    gres.split(',')
        .filter(|g| g.starts_with("gpu"))
        .map(|g| g.rsplit(':').next().and_then(|n| n.parse::<u64>().ok()))
        .sum()
}

/// The shape a NodeSet's pods register with, as far as its spec tells: slurmd's `--conf`
/// (`CPUs=`, else sockets × cores × threads; `RealMemory=` MiB; GPUs of `Gres=`), else the
/// slurmd container's resource limits (or requests: whole CPUs, memory, `nvidia.com/gpu`).
/// The last hint of all: a registered node says better, and a site can say it outright.
pub fn template_shape(extra_conf: Option<&str>, slurmd: Option<&SlurmdContainer>) -> Shape {
    let conf = extra_conf.unwrap_or_default();
    let num = |keys: &[&str]| conf_value(conf, keys).and_then(|v| v.parse::<u64>().ok());
    let cpus = num(&["CPUs", "Procs"]).or_else(|| {
        let (s, c, t) = (
            num(&["Sockets"])?,
            num(&["CoresPerSocket"])?,
            num(&["ThreadsPerCore"]).unwrap_or(1),
        );
        Some(s * c * t)
    });
    let resources = slurmd.and_then(|c| c.resources.as_ref());
    let resource = |name: &str| {
        let r = resources?;
        [&r.limits, &r.requests]
            .into_iter()
            .flatten()
            .find_map(|m| m.get(name))
            .and_then(|q| crate::quantity::parse(&q.0))
    };
    Shape {
        cpus: cpus.or_else(|| resource("cpu").map(|c| c.floor() as u64).filter(|c| *c > 0)),
        memory_bytes: num(&["RealMemory"])
            .map(|mib| mib << 20)
            .or_else(|| resource("memory").map(|b| b as u64)),
        gpus: conf_value(conf, &["Gres"])
            .and_then(conf_gpus)
            .or_else(|| resource("nvidia.com/gpu").map(|g| g as u64)),
    }
}

/// The features a NodeSet's pods register with: the NodeSet's name in Slurm ([`slurm_name`]:
/// slurm-operator's `NodeSet=<name> Feature=<name>` line selects its pods by it) and those of
/// its `--conf`.
pub fn features(name: &str, extra_conf: Option<&str>) -> Vec<String> {
    let mut all = vec![name.to_string()];
    for f in conf_value(extra_conf.unwrap_or_default(), &["Features", "Feature"])
        .into_iter()
        .flat_map(|v| v.split(','))
    {
        if !f.is_empty() && !all.iter().any(|a| a == f) {
            all.push(f.to_string());
        }
    }
    all
}

/// The `Weight=` a NodeSet's pods register with (slurmd's `--conf`): where slurmctld places
/// work first, lowest first; Slurm's default, 1, when it sets none.
pub fn weight(extra_conf: Option<&str>) -> u64 {
    conf_value(extra_conf.unwrap_or_default(), &["Weight"])
        .and_then(|w| w.parse().ok())
        .unwrap_or(1)
}

/// What a NodeSet's autoscaler adds to the choice: the most nodes it may have (`None`: no
/// bound known) and its priority.
pub type Rank = (Option<u64>, i32);

/// What the choice of which NodeSet grows runs over: `me`, as its own scaler sees it, and
/// its `rivals` ([`NodeSetView::rival`]) with each one's [`Rank`], each with its full nodes
/// in `snap`; `me` last, at the index returned.
pub fn with_rivals<'a>(
    me: Candidate,
    rivals: impl IntoIterator<Item = (&'a NodeSetView, Rank)>,
    snap: &ClusterSnapshot,
) -> (Vec<Candidate>, usize) {
    let mut all: Vec<Candidate> = rivals
        .into_iter()
        .map(|(n, rank)| n.rival(snap, rank))
        .collect();
    all.push(me);
    if let Some(nodes) = &snap.nodes.data {
        for c in &mut all {
            for n in nodes.iter().filter(|n| of_nodeset(&n.name, &c.name)) {
                match full(n) {
                    Some(Full::All) => c.full_nodes += 1,
                    Some(Full::Gpus) => c.gpu_full_nodes += 1,
                    None => {}
                }
            }
        }
    }
    let me = all.len() - 1;
    (all, me)
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
    /// The partition a site names for it ([`named_partition`]).
    pub named_partition: Option<String>,
    /// Its name in Slurm: its `NodeSet=` and feature ([`slurm_name`]).
    pub slurm_name: String,
    /// The features its pods' nodes register with ([`features`]).
    pub features: Vec<String>,
    /// Its nodes' `Weight=` ([`weight`]).
    pub weight: u64,
    pub cluster: Option<String>,
    /// The Controller it names (namespace, name): the Slurm cluster its nodes join.
    pub controller: Option<(String, String)>,
    pub max_nodes: Option<u64>,
    /// From [`NODE_SHAPE_ANNOTATION`]; what it leaves out comes from the partition.
    pub shape: Shape,
    /// From the pod template ([`template_shape`]): what neither the annotation nor the
    /// partition's nodes tell, as while it has none.
    pub template_shape: Shape,
}

impl NodeSetView {
    fn from_parts(
        meta: &kube::api::ObjectMeta,
        api_version: &'static str,
        replicas: Option<i32>,
        status: Option<&NodeSetStatus>,
        (scaling_mode, hostname): (Option<ScalingMode>, Option<&str>),
        (extra_conf, slurmd): (Option<&str>, Option<&SlurmdContainer>),
        controller: &ControllerRef,
    ) -> Self {
        let annotation = |k: &str| {
            meta.annotations
                .as_ref()
                .and_then(|a| a.get(k))
                .map(|v| v.trim().to_string())
        };
        let name = meta.name.clone().unwrap_or_default();
        let namespace = meta.namespace.clone().unwrap_or_default();
        Self {
            controller: controller.name.clone().map(|c| {
                let at = controller
                    .namespace
                    .clone()
                    .unwrap_or_else(|| namespace.clone());
                (at, c)
            }),
            namespace,
            named_partition: named_partition(meta.annotations.as_ref()),
            slurm_name: slurm_name(&name, hostname),
            features: features(&slurm_name(&name, hostname), extra_conf),
            weight: weight(extra_conf),
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
            template_shape: template_shape(extra_conf, slurmd),
        }
    }

    /// The NodeSet in the choice of which NodeSet grows ([`Candidate`]), serving
    /// `partitions`: its features, its nodes' shape as set or templated, its weight, and
    /// from its autoscaler: its bound and priority.
    pub fn candidate(&self, partitions: Vec<String>, (max_nodes, priority): Rank) -> Candidate {
        Candidate {
            name: self.slurm_name.clone(),
            partitions,
            features: self.features.clone(),
            shape: self.template_shape.or(self.shape),
            weight: self.weight,
            max_nodes,
            priority,
            full_nodes: 0,
            gpu_full_nodes: 0,
        }
    }

    /// The NodeSet as another's rival: in the partitions a site names for it or Slurm lists
    /// it in — not the partition of its name a NodeSet falls back to: a rival competes only
    /// where it is known to be.
    pub fn rival(&self, snap: &ClusterSnapshot, rank: Rank) -> Candidate {
        let partitions = match &self.named_partition {
            Some(p) => vec![p.clone()],
            None => partitions_listing(snap, &self.slurm_name),
        };
        self.candidate(partitions, rank)
    }

    /// Whether `other`'s nodes may join the same Slurm cluster as far as Kubernetes says:
    /// where this one names a Controller, `other` names the same (one that names none has no
    /// pods from slurm-operator); where this one names none, nothing is known and the cluster
    /// annotation decides.
    pub fn same_controller(&self, other: &NodeSetView) -> bool {
        match (&self.controller, &other.controller) {
            (Some(a), Some(b)) => a == b,
            (Some(_), None) => false,
            (None, _) => true,
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
            (
                n.spec.scaling_mode.clone(),
                n.spec.template.as_ref().and_then(PodTemplate::hostname),
            ),
            (n.spec.extra_conf.as_deref(), n.spec.slurmd.as_ref()),
            &n.spec.controller_ref,
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
            (
                None,
                n.spec.template.as_ref().and_then(PodTemplate::hostname),
            ),
            (n.spec.extra_conf.as_deref(), n.spec.slurmd.as_ref()),
            &n.spec.controller_ref,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ResourceRequirements;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    /// A NodeSet serves the partition of its name when Slurm lists it nowhere, but as another
    /// NodeSet's rival it competes only where Slurm lists it or a site names a partition.
    #[test]
    fn a_rival_competes_only_where_slurm_lists_it_or_a_site_names_it() {
        use crate::metrics::fixtures;
        let snap = fixtures::snapshot();
        let gpu = fixtures::kube().nodesets[0].clone();
        assert_eq!(gpu.slurm_name, "gpu");
        assert_eq!(
            crate::signals::partitions_served(Some(&snap), None, &gpu.slurm_name),
            ["gpu"]
        );
        assert!(gpu.rival(&snap, (None, 0)).partitions.is_empty());
        let named = NodeSetView {
            named_partition: Some("gpu".into()),
            ..gpu
        };
        assert_eq!(named.rival(&snap, (None, 0)).partitions, ["gpu"]);
    }

    /// NodeSets of two Controllers are two Slurm clusters' (a test's or another site's left
    /// in the same Kubernetes): neither is the other's rival, nor one that names no Controller.
    /// A NodeSet that names none knows nothing: the cluster annotation decides.
    #[test]
    fn nodesets_of_another_controller_are_no_rivals() {
        use crate::metrics::fixtures;
        let gpu = fixtures::kube().nodesets[0].clone();
        let of = |ns: &str, name: &str| NodeSetView {
            controller: Some((ns.into(), name.into())),
            ..gpu.clone()
        };
        assert!(of("site", "slurm").same_controller(&of("site", "slurm")));
        assert!(!of("site", "slurm").same_controller(&of("slurm-operator", "harness")));
        assert!(!of("a", "slurm").same_controller(&of("b", "slurm")));
        let none = NodeSetView {
            controller: None,
            ..gpu.clone()
        };
        assert!(none.same_controller(&of("a", "slurm")) && none.same_controller(&none));
        assert!(!of("a", "slurm").same_controller(&none));
        // The controllerRef's namespace defaults to the NodeSet's own.
        let beta: v1beta1::NodeSet = serde_json::from_value(serde_json::json!({
            "apiVersion": "slinky.slurm.net/v1beta1", "kind": "NodeSet",
            "metadata": {"name": "slurm-worker-a", "namespace": "site"},
            "spec": {"controllerRef": {"name": "slurm"}}
        }))
        .unwrap();
        assert_eq!(
            NodeSetView::from(&beta).controller,
            Some(("site".to_string(), "slurm".to_string()))
        );
    }

    fn container(limits: &[(&str, &str)], requests: &[(&str, &str)]) -> SlurmdContainer {
        let map = |kv: &[(&str, &str)]| {
            (!kv.is_empty()).then(|| {
                kv.iter()
                    .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                    .collect()
            })
        };
        SlurmdContainer {
            resources: Some(ResourceRequirements {
                limits: map(limits),
                requests: map(requests),
                ..Default::default()
            }),
            args: Vec::new(),
        }
    }

    #[test]
    fn the_pod_templates_shape_comes_from_slurmds_conf_then_its_resources() {
        let conf = "Features=a100,ib CPUs=64 RealMemory=512000 Gres=gpu:a100:8,nic:1";
        assert_eq!(
            template_shape(Some(conf), None),
            Shape {
                cpus: Some(64),
                memory_bytes: Some(512_000 << 20),
                gpus: Some(8)
            }
        );
        // Sockets × cores × threads when CPUs is not given; resources fill what --conf lacks.
        let slurmd = container(&[("cpu", "3500m"), ("memory", "16Gi")], &[]);
        assert_eq!(
            template_shape(
                Some("Sockets=2 CoresPerSocket=8 ThreadsPerCore=2"),
                Some(&slurmd)
            ),
            Shape {
                cpus: Some(32),
                memory_bytes: Some(16 << 30),
                gpus: None
            }
        );
        // Resources alone: whole CPUs of the limit (requests where no limit), GPUs.
        let slurmd = container(
            &[("nvidia.com/gpu", "4")],
            &[("cpu", "8"), ("memory", "1Gi")],
        );
        assert_eq!(
            template_shape(None, Some(&slurmd)),
            Shape {
                cpus: Some(8),
                memory_bytes: Some(1 << 30),
                gpus: Some(4)
            }
        );
        assert_eq!(template_shape(Some("Weight=10"), None), Shape::default());
    }

    #[test]
    fn a_template_host_name_names_the_nodeset_in_slurm_as_slurm_operator_does() {
        // Slinky's chart: `slurm-worker-gpu` with host name `gpu-`.
        assert_eq!(slurm_name("slurm-worker-gpu", Some("gpu-")), "gpu");
        assert_eq!(node_prefix("slurm-worker-gpu", Some("gpu-")), "gpu-");
        // Trimmed at both ends, every dash (Go's strings.Trim); the prefix is not.
        assert_eq!(slurm_name("x", Some("--gpu--")), "gpu");
        assert_eq!(node_prefix("x", Some("gpu")), "gpu");
        // No host name (or an empty one): the object's name, and its pods' names.
        for none in [None, Some("")] {
            assert_eq!(slurm_name("slinky", none), "slinky");
            assert_eq!(node_prefix("slinky", none), "slinky-");
        }
        let chart: v1beta1::NodeSet = serde_json::from_value(serde_json::json!({
            "apiVersion": "slinky.slurm.net/v1beta1",
            "kind": "NodeSet",
            "metadata": {"name": "slurm-worker-gpu", "namespace": "slurm"},
            "spec": {"template": {"spec": {"hostname": "gpu-", "containers": []}}}
        }))
        .unwrap();
        let view = NodeSetView::from(&chart);
        assert_eq!(
            (view.slurm_name.as_str(), view.named_partition),
            ("gpu", None)
        );
        // A site may name the partition.
        let mut annotated = chart.clone();
        annotated.metadata.annotations =
            Some([(PARTITION_ANNOTATION.to_string(), " batch".to_string())].into());
        let named = NodeSetView::from(&annotated).named_partition;
        assert_eq!(named.as_deref(), Some("batch"));
    }

    #[test]
    fn features_are_the_nodesets_name_and_those_its_pods_register() {
        assert_eq!(features("gpu", None), ["gpu"]);
        assert_eq!(
            features("gpu", Some("CPUs=4 Features=a100,gpu,ib")),
            ["gpu", "a100", "ib"]
        );
    }
}
