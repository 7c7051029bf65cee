//! Stage two: the scaling policy the spec asks for turns the observation into a [`Plan`].
//! A policy is a [`Policy`], one room each here (`demand`, `pool`, `planned`): what it
//! reads beyond the target and Slurm's signals, its pure planner, the effects its plans
//! carry (a type of its own, which the executor sees only as [`crate::plan::Move`]s), what
//! it remembers between reconciles, and its own part of the status and metrics.
//! [`for_spec`] is the one place the spec picks a policy, so a new policy is one room and
//! one arm there. The node records a spec keeps are planned here for every policy.

mod demand;
mod planned;
mod pool;

use std::time::SystemTime;

use futures::future::BoxFuture;

use super::observation::{Inputs, OwnInput, Reading, RecordsView};
use super::{Observation, Outcome};
use crate::actuator::Target;
use crate::crd::{ColocationStatus, NodeSetAutoscalerSpec, ScalingMode};
use crate::error::Result;
use crate::metrics::Row;
use crate::plan::Plan;
use crate::records::{self, Record};
use demand::FollowDemand;
use planned::FollowSlurm;
use pool::SharePool;

/// A scaling policy and its memory. Planning is pure: everything it looks at is in the
/// observation (its own input among it) or in what it remembered itself.
pub trait Policy: Send + Sync {
    /// Its name; an autoscaler whose spec changes policy starts the new one afresh.
    fn name(&self) -> &'static str;
    /// How Slurm's signals are read for it (the bound on a job's nodes, which partitions).
    fn inputs(&self, spec: &NodeSetAutoscalerSpec) -> Inputs;
    /// Its own input, read through the seam ([`Observation::input`]); `None`: it needs
    /// nothing beyond what every policy gets.
    fn observe<'a>(&'a self, _reading: Reading<'a>) -> BoxFuture<'a, Result<Option<OwnInput>>> {
        Box::pin(std::future::ready(Ok(None)))
    }
    /// The plan for now.
    fn plan(&self, spec: &NodeSetAutoscalerSpec, obs: &Observation) -> Plan;
    /// What to remember of the plan just made, right after planning, whatever happens next
    /// (the demand policy's recommendations for its windows).
    fn remember(&mut self, _spec: &NodeSetAutoscalerSpec, _plan: &Plan, _now: SystemTime) {}
    /// Once a plan was carried out (not by a standby, not in a dry run).
    fn acted(&mut self, _plan: &Plan, _outcome: &Outcome, _now: SystemTime) {}
    /// Targets it cannot serve as the spec asks, and why (checked before anything is read).
    fn refuse(&self, _spec: &NodeSetAutoscalerSpec, _target: &Target) -> Option<Refusal> {
        None
    }
    /// Its own part of the status, which the reporter adds after the part every policy has.
    fn status(&self, _obs: &Observation, _plan: &Plan) -> PolicyStatus {
        PolicyStatus::default()
    }
    /// Its own part of the autoscaler's metrics row.
    fn metrics(&self, _obs: &Observation, _plan: &Plan, _outcome: &Outcome, _row: &mut Row) {}
}

/// The policy `spec` asks for. `current` carries on (with its memory) while the spec asks
/// for the same one; only a change of policy makes a new one.
pub fn for_spec(spec: &NodeSetAutoscalerSpec, current: Option<Box<dyn Policy>>) -> Box<dyn Policy> {
    let (name, new): (&str, fn() -> Box<dyn Policy>) = match (spec.mode, &spec.colocation) {
        (ScalingMode::SlurmPlanned, _) => (FollowSlurm::NAME, fresh::<FollowSlurm>),
        (ScalingMode::Replicas, Some(_)) => (SharePool::NAME, fresh::<SharePool>),
        (ScalingMode::Replicas, None) => (FollowDemand::NAME, fresh::<FollowDemand>),
    };
    match current {
        Some(p) if p.name() == name => p,
        _ => new(),
    }
}

fn fresh<P: Policy + Default + 'static>() -> Box<dyn Policy> {
    Box::<P>::default()
}

/// Why a target cannot be autoscaled as its spec asks: the reason word and the message.
pub struct Refusal {
    pub reason: &'static str,
    pub why: String,
}

/// A policy's own part of the status: conditions besides those every policy has, and the
/// pool's section.
#[derive(Debug, Default)]
pub struct PolicyStatus {
    pub conditions: Vec<OwnCondition>,
    pub colocation: Option<ColocationStatus>,
}

/// A condition as a policy states it; the reporter keeps its transition time.
#[derive(Debug)]
pub struct OwnCondition {
    pub kind: &'static str,
    pub holds: bool,
    pub reason: &'static str,
    pub message: String,
}

/// Targets `policy` cannot serve, and why: a NodeSet in `scalingMode: DaemonSet` runs one
/// pod per matching node and ignores replicas, whatever the policy; then the policy's own
/// refusals.
pub fn refusal(
    policy: &dyn Policy,
    spec: &NodeSetAutoscalerSpec,
    target: &Target,
) -> Option<Refusal> {
    if target.scaling_mode.as_deref() == Some("DaemonSet") {
        return Some(Refusal {
            reason: "DaemonSetScalingMode",
            why: "the NodeSet uses scalingMode DaemonSet: one pod per matching node, replicas are ignored; it cannot be autoscaled".into(),
        });
    }
    policy.refuse(spec, target)
}

/// The plan for now: the policy's, and whatever policy it is, the node records the spec
/// keeps.
pub fn plan(policy: &dyn Policy, spec: &NodeSetAutoscalerSpec, obs: &Observation) -> Plan {
    let mut plan = policy.plan(spec, obs);
    if let Some(view) = &obs.records {
        plan.records = missing_records(spec, obs, view);
    }
    plan
}

/// The records `view` lacks, made with the NodeSet's features and the node shape demand is
/// packed onto; nothing while the Slurm data cannot be trusted (what exists is not known).
fn missing_records(
    spec: &NodeSetAutoscalerSpec,
    obs: &Observation,
    view: &RecordsView,
) -> Result<Vec<Record>, String> {
    let Ok(signals) = &obs.signals else {
        return Ok(Vec::new());
    };
    let features = match &obs.target.nodes.features[..] {
        [] => std::slice::from_ref(&spec.scale_target_ref.name),
        f => f,
    };
    records::missing(
        &view.wanted,
        &view.existing,
        features,
        &signals.shape,
        view.kind,
    )
}
