//! The Kubernetes read side of colocated pools, behind the [`PoolReader`] trait: the
//! GenericNode ledger and Node capacity (kept by the exporter's watchers), the nodes the
//! NodeSet's pods run on, and the pods Kubernetes cannot place; and a NodeSet's pods by
//! name. [`KubePool`] reads them from
//! the API server; tests and the demo read an in-memory pool instead
//! ([`crate::fakes::Fake`]), so the controller's colocated path runs without a cluster.

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams};
use slurmscale_exporter::k8s::ledger::Taint;
use slurmscale_exporter::k8s::nodeset::NodeSetView;
use slurmscale_exporter::k8s::watch::{KubeSnapshot, KubeSource};
use slurmscale_exporter::quantity;

use crate::actuator::POD_DELETION_COST;

/// The taint (`NoSchedule`) a colocated autoscaler with shares puts on a node it reserves
/// for the NodeSet's pods, so that no other pod lands there meanwhile; the NodeSet's pods
/// must tolerate it.
pub const RESERVED_TAINT: &str = "slurmscale.io/reserved-for-slurm";
use crate::error::Result;

/// The resource name of GPUs in requests, allocatable and the ledger.
pub const GPU: &str = "nvidia.com/gpu";

/// A NodeSet pod bound to a pool node, as the planner reads it. Ordered so that where
/// several are bound to one node, the one that holds it most wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum NodeSetPod {
    /// Being deleted: the node is on its way to Kubernetes.
    Terminating,
    /// Carries the deletion cost that makes it go first when replicas next drop. Only a
    /// mark followed by the drop hands the node over: the planner tells the two apart.
    Marked,
    /// Runs slurmd for the partition.
    Serving,
}

/// A pending pod that could use the pool.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingPod {
    pub name: String,
    /// Requests: CPU cores, memory bytes, GPUs (`nvidia.com/gpu`).
    pub cpu: f64,
    pub memory: f64,
    pub gpu: f64,
    pub placement: Placement,
}

/// Where a pod may run: its `nodeSelector`, its required node affinity and its tolerations.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Placement {
    pub node_selector: BTreeMap<String, String>,
    /// Required node-affinity terms: a node must satisfy every requirement of one of them.
    /// None at all: any node.
    pub terms: Vec<Vec<Requirement>>,
    pub tolerations: Vec<Toleration>,
}

/// One of a pod's `tolerations`, as the scheduler reads it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Toleration {
    /// Empty with `Exists`: every taint.
    pub key: String,
    /// `Equal` (the default) or `Exists`.
    pub operator: String,
    pub value: String,
    /// Empty: every effect.
    pub effect: String,
}

impl Toleration {
    /// Whether the pod may run on a node with taint `t`.
    pub fn tolerates(&self, t: &Taint) -> bool {
        let effect = self.effect.is_empty() || self.effect == t.effect;
        let key = self.key.is_empty() || self.key == t.key;
        let value = match self.operator.as_str() {
            "Exists" => true,
            "" | "Equal" => !self.key.is_empty() && self.value == t.value,
            _ => false,
        };
        effect && key && value
    }
}

/// One `matchExpressions` (on labels) or `matchFields` (on `metadata.name`) entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Requirement {
    pub key: String,
    pub operator: String,
    pub values: Vec<String>,
    /// A `matchFields` entry: `key` is a field of the node (only `metadata.name` exists).
    pub field: bool,
}

impl Requirement {
    /// Whether node `node` with `labels` satisfies it.
    pub fn matches(&self, node: &str, labels: &BTreeMap<String, String>) -> bool {
        let value = if self.field {
            (self.key == "metadata.name").then_some(node)
        } else {
            labels.get(&self.key).map(String::as_str)
        };
        let number = |v: &str| v.parse::<i64>().ok();
        let bound = self.values.first().and_then(|v| number(v));
        match self.operator.as_str() {
            "In" => value.is_some_and(|v| self.values.iter().any(|x| x == v)),
            "NotIn" => value.is_none_or(|v| self.values.iter().all(|x| x != v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            "Gt" => matches!((value.and_then(number), bound), (Some(v), Some(b)) if v > b),
            "Lt" => matches!((value.and_then(number), bound), (Some(v), Some(b)) if v < b),
            // An operator we do not know: assume the pod cannot use the node.
            _ => false,
        }
    }
}

/// A NodeSet's pods by name, shared: a large NodeSet's list is read every poll.
pub type NamedPods = std::sync::Arc<BTreeMap<String, PodState>>;

/// How a pod read by name stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodState {
    /// Created, not yet ready.
    Starting,
    Ready,
    /// Being deleted: gone as far as planning goes.
    Terminating,
}

/// The ordinal of a NodeSet's pod: its pods are `<name>-<ordinal>`.
pub fn pod_ordinal(name: &str) -> Option<usize> {
    name.rsplit_once('-').and_then(|(_, o)| o.parse().ok())
}

/// The NodeSet's pods as the colocation planner reads them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeSetPods {
    /// Kubernetes node → how the NodeSet pod bound there stands.
    pub by_node: BTreeMap<String, NodeSetPod>,
    /// Pods kube-scheduler found no node for (`PodScheduled=False`, `Unschedulable`): Slurm's
    /// growth waits for a pool node with room for a whole NodeSet pod.
    pub unschedulable: u64,
}

/// What a policy reads of Kubernetes besides the target. A trait object (its reads are
/// boxed futures), as policies are: each reads its own input through it.
pub trait PoolReader: Send + Sync + 'static {
    /// The GenericNode ledger, Node capacity and the health of their watches; `None` when
    /// nothing watches them.
    fn ledger(&self) -> Option<KubeSnapshot>;

    /// Every NodeSet (all namespaces): which NodeSet grows for a job of a partition they
    /// share is chosen among them. `None` until the watch has listed them all: a partial list
    /// would make every job of a shared partition look like any one NodeSet's.
    fn nodesets(&self) -> Option<Vec<NodeSetView>>;

    /// Nodes a pod of `selector` is bound to, and how it stands, and how many of its pods no
    /// node has room for. This, not Slurm, says which pool nodes Slurm holds: a node is
    /// Slurm's from its pod's binding until the pod is marked and replicas drop below it.
    fn pod_nodes<'a>(
        &'a self,
        namespace: &'a str,
        selector: &'a str,
    ) -> BoxFuture<'a, Result<NodeSetPods>>;

    /// Unschedulable pods with these labels, with what they request and where they may go.
    fn unschedulable_pods<'a>(
        &'a self,
        labels: &'a BTreeMap<String, String>,
    ) -> BoxFuture<'a, Result<Vec<PendingPod>>>;

    /// The pods of `selector` by name, and how each stands.
    fn named_pods<'a>(
        &'a self,
        namespace: &'a str,
        selector: &'a str,
    ) -> BoxFuture<'a, Result<NamedPods>>;
}

/// The pool as the API server has it.
pub struct KubePool {
    client: Client,
    watch: Option<KubeSource>,
    /// Each read is abandoned after this (`--kube-timeout`).
    timeout: std::time::Duration,
}

impl KubePool {
    /// Reads pods with `client` and the ledger from `watch` (`None`: colocation cannot run).
    pub fn new(client: Client, watch: Option<KubeSource>) -> Self {
        Self {
            client,
            watch,
            timeout: crate::actuator::DEFAULT_TIMEOUT,
        }
    }

    /// Abandons each read after `timeout`.
    pub fn with_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.timeout = timeout;
        self
    }

    async fn list(&self, api: &Api<Pod>, lp: &ListParams) -> Result<Vec<Pod>> {
        Ok(
            crate::actuator::within(self.timeout, "pod list", api.list(lp))
                .await?
                .items,
        )
    }

    /// The pods of `selector` in `namespace`.
    async fn selected(&self, namespace: &str, selector: &str) -> Result<Vec<Pod>> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        self.list(&pods, &ListParams::default().labels(selector))
            .await
    }
}

impl PoolReader for KubePool {
    fn ledger(&self) -> Option<KubeSnapshot> {
        self.watch.as_ref().map(KubeSource::snapshot)
    }

    fn nodesets(&self) -> Option<Vec<NodeSetView>> {
        match &self.watch {
            Some(w) => w.nodesets_listed(),
            // Nothing watches Kubernetes: no NodeSet is known to share a partition.
            None => Some(Vec::new()),
        }
    }

    fn pod_nodes<'a>(
        &'a self,
        namespace: &'a str,
        selector: &'a str,
    ) -> BoxFuture<'a, Result<NodeSetPods>> {
        Box::pin(async move {
            let mut out = NodeSetPods::default();
            for pod in self.selected(namespace, selector).await? {
                let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) else {
                    out.unschedulable += u64::from(unschedulable(&pod));
                    continue;
                };
                let state = if pod.metadata.deletion_timestamp.is_some() {
                    NodeSetPod::Terminating
                } else if pod
                    .metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key(POD_DELETION_COST))
                {
                    NodeSetPod::Marked
                } else {
                    NodeSetPod::Serving
                };
                let held = out.by_node.entry(node).or_insert(state);
                *held = (*held).max(state);
            }
            Ok(out)
        })
    }

    /// Pending pods the scheduler could not place (PodScheduled=False, Unschedulable), with
    /// their CPU and memory requests, optionally only those with `labels`.
    fn unschedulable_pods<'a>(
        &'a self,
        labels: &'a BTreeMap<String, String>,
    ) -> BoxFuture<'a, Result<Vec<PendingPod>>> {
        Box::pin(async move {
            let pods: Api<Pod> = Api::all(self.client.clone());
            let mut lp = ListParams::default().fields("status.phase=Pending");
            if !labels.is_empty() {
                let sel: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                lp = lp.labels(&sel.join(","));
            }
            Ok(self
                .list(&pods, &lp)
                .await?
                .into_iter()
                .filter(unschedulable)
                .map(pending_pod)
                .collect())
        })
    }

    /// Terminating once deleted, ready with condition `Ready=True`, else starting.
    fn named_pods<'a>(
        &'a self,
        namespace: &'a str,
        selector: &'a str,
    ) -> BoxFuture<'a, Result<NamedPods>> {
        Box::pin(async move {
            let named: BTreeMap<String, PodState> = self
                .selected(namespace, selector)
                .await?
                .into_iter()
                .filter_map(|p| {
                    let state = if p.metadata.deletion_timestamp.is_some() {
                        PodState::Terminating
                    } else if ready(&p) {
                        PodState::Ready
                    } else {
                        PodState::Starting
                    };
                    Some((p.metadata.name?, state))
                })
                .collect();
            Ok(named.into())
        })
    }
}

fn ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// `PodScheduled=False` with reason `Unschedulable`: the scheduler found no node.
fn unschedulable(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.type_ == "PodScheduled"
                    && c.status == "False"
                    && c.reason.as_deref() == Some("Unschedulable")
            })
        })
}

/// A pod as the planner sees it: its containers' CPU, memory and GPU requests and its
/// placement.
fn pending_pod(pod: Pod) -> PendingPod {
    let (mut cpu, mut memory, mut gpu) = (0.0, 0.0, 0.0);
    for c in pod.spec.iter().flat_map(|s| s.containers.iter()) {
        if let Some(req) = c.resources.as_ref().and_then(|r| r.requests.as_ref()) {
            let get = |k: &str| {
                req.get(k)
                    .and_then(|q| quantity::parse(&q.0))
                    .unwrap_or(0.0)
            };
            cpu += get("cpu");
            memory += get("memory");
            gpu += get(GPU);
        }
    }
    PendingPod {
        name: format!(
            "{}/{}",
            pod.metadata.namespace.unwrap_or_default(),
            pod.metadata.name.unwrap_or_default()
        ),
        cpu,
        memory,
        gpu,
        placement: placement(pod.spec.as_ref()),
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
