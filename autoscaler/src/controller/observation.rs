//! What a reconcile observed, as plain data: the [`Observation`] every plan is made from, and
//! what a policy is given to read its own input with. Below both the stage that reads
//! (`observe`) and the one that plans (`plan`), which both use it.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use kube::ResourceExt;
use slurmscale_exporter::signals::Untrusted;
use slurmscale_exporter::slurm::ApiVersion;
use slurmscale_exporter::snapshot::ClusterSnapshot;

use super::boot::BootTime;
use crate::actuator::Target;
use crate::crd::{NodeSetAutoscaler, NodeSetAutoscalerSpec};
use crate::error::{Error, Result};
use crate::plan::Signals;
use crate::pool::PoolReader;
use crate::records;

/// Everything a plan is made from.
#[derive(Clone, Debug)]
pub struct Observation {
    pub now: SystemTime,
    pub target: Target,
    /// The Slurm cluster the autoscaler reads, when it can be told.
    pub cluster: Option<String>,
    /// Busy nodes and demand of its partitions, or why they cannot be trusted.
    pub signals: Signals,
    /// Autoscalers that keep node records (`spec.nodeRecords`, or a policy's own kind): what
    /// there is.
    pub records: Option<RecordsView>,
    /// What the policy read for itself ([`crate::controller::Policy::observe`]), in its own
    /// type.
    pub own: Option<OwnInput>,
    /// The slurmrestd API version, for Slurm node writes (unknown until it answered).
    pub slurm_api: Option<ApiVersion>,
    /// The Slurm release slurmrestd says it runs, e.g. `24.11.5`.
    pub slurm_release: Option<String>,
    /// When slurmrestd last confirmed the Slurm nodes seen: a node write sent after that
    /// cannot show in them yet.
    pub slurm_nodes_at: Option<SystemTime>,
    /// The target's nodes registered in Slurm (up, not powered down or up); `None` when
    /// Slurm's nodes are not known.
    pub registered: Option<u64>,
    /// How long its new nodes take to boot, as far as known ([`super::boot`]): filled by the
    /// controller from what it has seen, after the observation is made.
    pub boot: BootTime,
    /// Seconds from asking for a node to a planned job starting on it, where jobs Slurm
    /// planned are booted for just in time (`spec.plannedJobs`).
    pub lead: Option<i64>,
}

/// How the reads every policy gets are made for one: Slurm's signals, and which node
/// records are kept for the target's pods.
#[derive(Clone, Copy, Debug, Default)]
pub struct Inputs {
    /// Jobs needing more nodes than this are unsatisfiable, not demand.
    pub max_nodes: Option<u64>,
    /// Only the first partition counts.
    pub one_partition: bool,
    /// Jobs Slurm has planned are booted for just in time (`spec.plannedJobs`), where a boot
    /// time is known.
    pub timed: bool,
    /// The node records kept, if any.
    pub records: Option<records::Kind>,
}

impl Inputs {
    /// What the spec asks of every policy: the records `spec.nodeRecords` names.
    pub fn of(spec: &NodeSetAutoscalerSpec) -> Self {
        Self {
            records: records::Kind::of(spec),
            ..Self::default()
        }
    }
}

impl Observation {
    /// The policy's own input, if it is of type `T` (a policy reads its own back).
    pub fn input<T: Input>(&self) -> Option<&T> {
        let any: &dyn std::any::Any = self.own.as_deref()?;
        any.downcast_ref()
    }
}

/// The node records of the target's pods, as slurmctld has them.
#[derive(Clone, Debug)]
pub struct RecordsView {
    /// One per ordinal below `maxReplicas`, named as the pods are.
    pub wanted: records::Names,
    /// Which of them slurmctld has in the partition (records and registered nodes).
    pub existing: Vec<bool>,
    /// What the records are.
    pub kind: records::Kind,
}

/// A policy's own input, in a type of its own; planning reads it back with
/// [`Observation::input`].
pub trait Input: Any + fmt::Debug + Send + Sync {}

impl<T: Any + fmt::Debug + Send + Sync> Input for T {}

/// A policy's input as the observation holds it.
pub type OwnInput = Arc<dyn Input>;

/// What a policy reads its own input from: the autoscaler and its target, Slurm as the
/// observation found it, and the Kubernetes reads of the seam.
pub struct Reading<'a> {
    pub nsa: &'a NodeSetAutoscaler,
    pub target: &'a Target,
    /// The Slurm cluster the autoscaler reads, when it can be told.
    pub cluster: Option<&'a str>,
    /// Its latest snapshot, or why there is none.
    pub snapshot: Result<&'a ClusterSnapshot, &'a Untrusted>,
    /// The partitions whose work counts, the one the target serves first.
    pub partitions: &'a [String],
    /// The node records the target's pods need, where the spec keeps them.
    pub records: Option<&'a RecordsView>,
    pub pool: &'a dyn PoolReader,
    /// When the observation is made.
    pub now: SystemTime,
    /// Seconds from asking for a node to a planned job starting on it, where the spec boots
    /// for Slurm's plan just in time (`spec.plannedJobs`) and a boot time is known.
    pub lead: Option<i64>,
}

impl<'a> Reading<'a> {
    /// The target's pod selector, or why its pods cannot be found (`looking`: where, said
    /// after "found").
    pub fn selector(&self, looking: &str) -> Result<&'a str> {
        self.target.selector.as_deref().ok_or_else(|| {
            Error::Target(
                self.nsa.spec.scale_target_ref.name.clone(),
                format!("has no status.selector, so its pods cannot be found{looking}"),
            )
        })
    }

    /// The autoscaler's namespace, where its target's pods are.
    pub fn namespace(&self) -> String {
        self.nsa.namespace().unwrap_or_default()
    }
}
