//! `NodeSetAutoscaler` (`slurmscale.io/v1alpha1`, namespaced): which scalable resource to
//! drive, from which Slurm partitions, within which bounds and how fast. Generated into
//! `charts/slurmscale/crds/` from these types; a test fails when the two drift.

// `#[kube(printcolumn(type_ = "integer", ...))]` repeated per column looks like a duplicated
// attribute to clippy; it is not.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
pub use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use slurmscale_exporter::model::demand::Shape;
use slurmscale_exporter::quantity;

/// What to scale: any resource with a scale subresource (a Slinky NodeSet by default).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScaleTargetRef {
    /// e.g. `slinky.slurm.net/v1beta1`.
    #[serde(default = "default_api_version")]
    pub api_version: String,
    /// e.g. `NodeSet`.
    #[serde(default = "default_kind")]
    pub kind: String,
    /// The target's name, in the NodeSetAutoscaler's namespace.
    pub name: String,
}

fn default_api_version() -> String {
    "slinky.slurm.net/v1beta1".into()
}

fn default_kind() -> String {
    "NodeSet".into()
}

/// Where the demand comes from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SlurmSource {
    /// The Slurm cluster (the `cluster` name given to `slurmscale autoscaler`); may be left
    /// out when it reads only one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// The partitions whose busy nodes and pending demand count. Default: the NodeSet's
    /// (its `slurmscale.io/partition` annotation, else the partitions Slurm puts its NodeSet
    /// in, else the partition of its Slurm name: the pod template's host name with `-`
    /// trimmed, else the NodeSet's name).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partitions: Vec<String>,
    /// Which pending work counts: `batch` jobs, `kubernetes` placeholders (pods scheduled
    /// through Slurm, e.g. by Slinky's slurm-bridge), or both (the default, when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub origins: Vec<slurmscale_exporter::model::origin::Origin>,
}

/// How fast one direction may move.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScalingRules {
    /// The most replicas one step may add or remove (default: no limit up, 4 down).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_step: Option<u32>,
    /// Act only on what has been wanted for this long: up, the lowest recommendation of the
    /// window (default 0 s); down, the highest (default 300 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stabilization_window_seconds: Option<u32>,
}

#[derive(CustomResource, Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "slurmscale.io",
    version = "v1alpha1",
    kind = "NodeSetAutoscaler",
    plural = "nodesetautoscalers",
    shortname = "nsa",
    namespaced,
    status = "NodeSetAutoscalerStatus",
    doc = "Scales a NodeSet (or any resource with a scale subresource) on the busy nodes and pending demand of Slurm partitions.",
    printcolumn(
        name = "Target",
        type_ = "string",
        json_path = ".spec.scaleTargetRef.name"
    ),
    printcolumn(name = "Min", type_ = "integer", json_path = ".spec.minReplicas"),
    printcolumn(name = "Max", type_ = "integer", json_path = ".spec.maxReplicas"),
    printcolumn(
        name = "Current",
        type_ = "integer",
        json_path = ".status.currentReplicas"
    ),
    printcolumn(
        name = "Desired",
        type_ = "integer",
        json_path = ".status.desiredReplicas"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.lastDecision.reason"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
/// Which target to scale, on which Slurm partitions' work, within which bounds.
pub struct NodeSetAutoscalerSpec {
    pub scale_target_ref: ScaleTargetRef,
    #[serde(default)]
    pub slurm: SlurmSource,
    /// Replicas while there is work (default 0).
    #[serde(default)]
    pub min_replicas: u32,
    /// The most replicas it sets; jobs needing more nodes than this are unsatisfiable.
    pub max_replicas: u32,
    /// Replicas once idle for `idleTimeoutSeconds` (default 0: scale to zero). May be below
    /// `minReplicas`.
    #[serde(default)]
    pub idle_replicas: u32,
    /// How long nothing runs and nothing waits before going to `idleReplicas` (default 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout_seconds: Option<u32>,
    #[serde(default)]
    pub scale_up: ScalingRules,
    #[serde(default)]
    pub scale_down: ScalingRules,
    /// Decide and report, never change the target.
    #[serde(default)]
    pub dry_run: bool,
    /// Rebalance a colocated pool (GenericNodes) between Slurm and Kubernetes instead of
    /// following Slurm demand alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub colocation: Option<ColocationSpec>,
    /// The nodes the NodeSet adds, for packing pending jobs onto them. By default the
    /// partition's own (its CPUs and configured TRES over its node count); set what it
    /// cannot tell, such as GPUs when slurm.conf's AccountingStorageTRES leaves them out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_shape: Option<NodeShapeSpec>,
    /// Slurm node records for the NodeSet's pods, kept while no pod runs. `None` (default):
    /// none. `Future`: one `State=FUTURE` record per ordinal below `maxReplicas`, named as
    /// the pods are (`<nodeset>-<ordinal>`), with the NodeSet's features and node shape —
    /// what a Slinky partition (nodes by `NodeSet=` feature only) needs to accept jobs and
    /// show its size at zero pods. Created (by `scontrol create`, or REST from v0.0.44),
    /// never deleted; a pod's `slurmd -Z` joins its record.
    #[serde(default)]
    pub node_records: NodeRecords,
    /// How replicas are chosen. `Replicas` (default): from the partitions' busy nodes and
    /// pending demand. `SlurmPlanned`: slurmctld plans jobs on one powered-down
    /// `State=CLOUD` record per ordinal below `maxReplicas` (kept by the autoscaler, ordinal
    /// order by `Weight`) and the NodeSet follows exactly the nodes it powers up and down;
    /// Slurm's power saving must be set up for the partition and the NodeSet's slurmd must
    /// run with `-b` (docs/slurm-planned.md). `minReplicas`,
    /// `idleReplicas`, the idle timeout and the scaling rules do not apply: slurmctld's
    /// `SuspendTime` and `SuspendExcNodes` say how long nodes stay and how many stay warm.
    #[serde(default)]
    pub mode: ScalingMode,
    /// Where NodeSets share a partition and a pending job fits the nodes of several of the
    /// same node `Weight`, the one whose autoscaler has the highest priority grows for it
    /// (default 0; then the smallest node). Weight comes first, as Slurm places work by it.
    #[serde(default)]
    pub priority: i32,
    /// How long a new node takes from the scale-up that asks for it to its slurmd
    /// registering in Slurm. By default learned from the scale-ups the autoscaler sees (the
    /// median of the last 16, in `status.bootTime`); set it to say it before any is seen, or
    /// to override what is learned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_time_seconds: Option<u32>,
    /// When to boot for pending jobs Slurm has already planned (it says when each will
    /// start, on nodes that free up).
    #[serde(default, skip_serializing_if = "PlannedJobs::is_default")]
    pub planned_jobs: PlannedJobs,
}

/// When new nodes boot for a job Slurm has planned.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlannedJobs {
    /// `AtSubmit` (default): at once, as for any pending job (in mode `SlurmPlanned`, when
    /// slurmctld starts it and powers its nodes up). `JustInTime`: only where new nodes
    /// start the job sooner than Slurm's plan, and then one boot time (and `marginSeconds`)
    /// before they can — not while the nodes it also needs are still busy; no boot where
    /// the plan starts it as soon. In mode `SlurmPlanned`: the powered-down records
    /// slurmctld plans a job on are powered up one boot time (and `marginSeconds`) before
    /// its planned start (the partition's `SuspendTime` must be longer). Until a boot time
    /// is known (learned or `bootTimeSeconds`), as `AtSubmit`.
    #[serde(default)]
    pub boot: PlannedBoot,
    /// How long before the job can start a node booted for it is to be ready (default 30,
    /// one backfill interval of slurmctld's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub margin_seconds: Option<u32>,
}

impl PlannedJobs {
    /// Seconds from asking for a node to the job it is for starting, for a boot time of
    /// `boot` seconds (`None`: boot for planned jobs at submit).
    pub fn lead(&self, boot: Option<f64>) -> Option<i64> {
        match self.boot {
            PlannedBoot::AtSubmit => None,
            PlannedBoot::JustInTime => {
                boot.map(|b| b.ceil() as i64 + i64::from(self.margin_seconds.unwrap_or(30)))
            }
        }
    }

    fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// When to boot for a planned job.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum PlannedBoot {
    #[default]
    AtSubmit,
    JustInTime,
}

/// Who decides the replicas.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum ScalingMode {
    #[default]
    Replicas,
    SlurmPlanned,
}

/// Which Slurm node records the autoscaler keeps for the NodeSet's pods.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum NodeRecords {
    #[default]
    None,
    Future,
}

/// One node of the NodeSet; what is left out comes from the partition.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeShapeSpec {
    /// CPUs of one node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<u32>,
    /// A Kubernetes quantity (`128Gi`, `500G`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// GPUs of one node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<u32>,
}

impl NodeShapeSpec {
    /// As packing reads it; a memory quantity that does not parse is left to the partition
    /// (and reported by the controller).
    pub fn shape(&self) -> Shape {
        Shape {
            cpus: self.cpus.map(u64::from),
            memory_bytes: self
                .memory
                .as_deref()
                .and_then(quantity::parse)
                .map(|b| b as u64),
            gpus: self.gpus.map(u64::from),
        }
    }
}

/// The colocated pool and the rules for sharing it.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ColocationSpec {
    /// GenericNodes of the pool: those whose cluster-name label has this value (default:
    /// the Slurm cluster's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// Nodes Slurm always keeps (never drained for Kubernetes).
    #[serde(default)]
    pub min_slurm_nodes: u32,
    /// Nodes Kubernetes always keeps (never taken for Slurm).
    #[serde(default)]
    pub min_kubernetes_nodes: u32,
    /// The most nodes Slurm may borrow (default: the pool less `minKubernetesNodes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_slurm_nodes: Option<u32>,
    /// After capacity moves one way, nothing moves back for this long (default 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cooldown_seconds: Option<u32>,
    /// Idle Slurm nodes go back to Kubernetes (down to `minSlurmNodes`) even when Kubernetes
    /// is not asking (default false: an idle node a pod asks for is drained at once, and
    /// giving it away unasked only brings it back for the next job; see docs/simulate.md).
    #[serde(default)]
    pub release_idle_slurm_nodes: bool,
    /// Only pending pods with these labels count as Kubernetes demand (default: every
    /// unschedulable pod that fits a pool node).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_selector: BTreeMap<String, String>,
    /// Each side's nominal share of the pool, kept for it whatever the other side asks
    /// (default: none, Kubernetes first — Slurm keeps only `minSlurmNodes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shares: Option<SharesSpec>,
}

/// A pool split by nominal shares, as Kueue's cohorts split quota: each side is guaranteed
/// its share while it has work for it, borrows what the other leaves idle, and gives
/// borrowed nodes back within `reclaimSeconds` when the other side wants its share again.
/// With two sides, one's lending limit is the other's borrowing limit, so only borrowing
/// limits are set.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SharesSpec {
    /// Slurm's nominal share: a node count (`40`) or a part of the pool (`"50%"`, rounded
    /// down); Kubernetes' share is the rest of the pool.
    pub slurm: IntOrString,
    /// The most nodes Slurm may hold beyond its share (default: all the rest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm_borrowing_limit: Option<u32>,
    /// The most nodes Kubernetes may hold beyond its share (default: all the rest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_borrowing_limit: Option<u32>,
    /// A side below its share with work waiting gets borrowed nodes back within this long
    /// (default 600). Nodes Slurm borrowed are drained at once and handed over as their
    /// jobs end (no job is killed, nor requeued unless `requeueAfterSeconds` says); nodes Kubernetes borrowed are tainted at
    /// once (no new pod lands there) and their pods that `evictablePods` selects are evicted
    /// once this time has passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaim_seconds: Option<u32>,
    /// Off by default. Set, the jobs still running on a node Slurm borrowed this long after
    /// it was drained for Kubernetes, below its share with pods waiting, are requeued — only
    /// where Slurm may requeue every one of them (`--requeue`, `JobRequeue=1`); the others
    /// are waited for. Their run so far is lost; they start again from the queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeue_after_seconds: Option<u32>,
    /// Pods on a node Kubernetes borrowed that may be evicted (Eviction API: their
    /// PodDisruptionBudgets and grace periods kept, lowest priority first) when Slurm
    /// reclaims it (default: none — the node comes back as its pods end).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub evictable_pods: BTreeMap<String, String>,
}

impl SharesSpec {
    /// Slurm's nominal share of a pool of `pool` nodes; a percentage that does not parse is
    /// the error message.
    pub fn slurm_nodes(&self, pool: u64) -> Result<u64, String> {
        match &self.slurm {
            IntOrString::Int(n) => Ok(u64::try_from(*n).unwrap_or(0).min(pool)),
            IntOrString::String(s) => {
                let pct = s
                    .strip_suffix('%')
                    .and_then(|p| p.trim().parse::<f64>().ok())
                    .filter(|p| (0.0..=100.0).contains(p))
                    .ok_or_else(|| format!("shares.slurm {s:?} is neither a node count nor a percentage from 0% to 100%"))?;
                Ok(((pool as f64) * pct / 100.0).floor() as u64)
            }
        }
    }
}

/// What the colocation planner last saw and did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ColocationStatus {
    /// Nodes of the pool.
    pub pool_nodes: u32,
    /// Of those, the nodes Slurm holds.
    pub slurm_nodes: u32,
    /// Nodes the pending pods need.
    pub kubernetes_need_nodes: u32,
    /// Nodes Slurm's busy nodes and pending demand need.
    pub slurm_need_nodes: u32,
    /// Slurm nodes drained by us and not yet empty.
    // Always written, empty too: a merge patch that left it out would keep the drains of
    // the last plan.
    #[serde(default)]
    pub draining: Vec<String>,
    /// The steps of the last plan, in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub last_plan: Vec<String>,
    /// Under `spec.colocation.shares`: each side's share and what it borrows.
    // Written as `null` when absent, so a merge patch removes it once shares are.
    #[serde(default)]
    pub shares: Option<SharesStatus>,
}

/// Each side's nominal share, what it holds beyond it, and who waits for one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SharesStatus {
    /// Slurm's nominal share, in nodes.
    pub slurm_share_nodes: u32,
    /// Kubernetes' nominal share (the rest of the pool), in nodes.
    pub kubernetes_share_nodes: u32,
    /// Nodes Slurm holds beyond its share: borrowed from Kubernetes.
    pub slurm_borrowed_nodes: u32,
    /// Nodes Kubernetes holds beyond its share: borrowed from Slurm.
    pub kubernetes_borrowed_nodes: u32,
    /// Nodes reserved for Slurm (tainted) while their pods end or are evicted.
    // Always written, empty too (as `draining`).
    #[serde(default)]
    pub reserved: Vec<String>,
    /// Since when Slurm, or Kubernetes, has had work and held less than its share; past
    /// `reclaimSeconds` the `BelowShare` condition is True.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm_below_share_since: Option<Time>,
    /// Since when Kubernetes has had work and held less than its share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_below_share_since: Option<Time>,
}

/// One decision, as reported.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastDecision {
    /// The replicas it decided.
    pub replicas: u32,
    /// A short machine-readable reason (`ScaleUp`, `ScaleDown`, `Idle`, `Hold`, `Frozen`, ...).
    pub reason: String,
    /// What led to it, in words.
    pub message: String,
    pub time: Time,
}

/// What the autoscaler last saw and decided.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSetAutoscalerStatus {
    /// The target's replicas when it last looked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_replicas: Option<u32>,
    /// The replicas it last decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_replicas: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_scale_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_decision: Option<LastDecision>,
    /// `Ready` (the target is found and scalable), `Frozen` (scale-down suspended: Slurm data
    /// stale, partial or failing), `Limited` (demand beyond `maxReplicas`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The spec's generation the status answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// A colocated pool's share. This and `nodeRecords` are written as `null` when absent,
    /// so a merge patch removes them once the spec stops asking for them.
    #[serde(default)]
    pub colocation: Option<ColocationStatus>,
    /// The node shape pending jobs are packed onto (`4 CPUs, 8 GiB`) and where it came
    /// from: `NodeSetAutoscaler` (spec.nodeShape), `NodeSet annotation`, `partition` (its
    /// nodes), `pod template` (the NodeSet's slurmd `--conf` or resources: all a Slinky
    /// partition with no pod has), or `unknown` (each job counts its own nodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_shape: Option<String>,
    #[serde(default)]
    pub node_records: Option<NodeRecordsStatus>,
    /// How long a new node takes to boot (scale-up to its slurmd registering) and where the
    /// figure comes from: `92s, learned from 5 boots`, `300s, spec.bootTimeSeconds`; absent
    /// until known (written as `null` then, so a merge patch removes an old figure).
    #[serde(default)]
    pub boot_time: Option<String>,
}

/// The node records kept for the NodeSet.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeRecordsStatus {
    /// Records wanted (one per ordinal below `maxReplicas`) and those slurmctld has.
    pub wanted: u32,
    /// Of those, the records slurmctld has.
    pub existing: u32,
    /// Why some are missing, when they cannot be made. Always written (null when all is
    /// well): a merge patch that left it out would keep an old message.
    #[serde(default)]
    pub message: Option<String>,
    /// Records were made that this Slurm allocates only once slurmctld reloads its
    /// configuration, and it has not been asked to yet: a replica that takes the lead asks.
    #[serde(default)]
    pub reload_pending: bool,
}

impl NodeSetAutoscalerSpec {
    pub fn idle_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.idle_timeout_seconds.unwrap_or(300).into())
    }
}

/// Replicas as the status's int32 fields hold them (saturating).
pub fn replicas(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// A count as the status's int32 fields hold it (saturating).
pub fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}
