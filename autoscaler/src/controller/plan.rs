//! Stage two: the planner the spec asks for turns the observation into a [`Plan`]. Planners
//! are pure functions of the observation; adding a policy is adding a planner and the spec
//! field that selects it here. What planners remember for next time is recorded here too.

use std::time::SystemTime;

use super::observe::RecordsView;
use super::{Memory, Observation, Outcome};
use crate::actuator::Target;
use crate::colocation::{self, ColocationBounds};
use crate::crd::NodeSetAutoscalerSpec;
use crate::plan::Plan;
use crate::policy::{self, Bounds};
use crate::records::{self, Record};

/// Targets no planner can serve, and why: a NodeSet in `scalingMode: DaemonSet` runs one pod
/// per matching node and ignores replicas.
pub fn refusal(target: &Target) -> Option<&'static str> {
    (target.scaling_mode.as_deref() == Some("DaemonSet")).then_some(
        "the NodeSet uses scalingMode DaemonSet: one pod per matching node, replicas are ignored; it cannot be autoscaled",
    )
}

/// The plan for now: the planner's, and whatever policy it is, the node records the spec
/// keeps.
pub fn plan(spec: &NodeSetAutoscalerSpec, obs: &Observation) -> Plan {
    let mut plan = planned(spec, obs);
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
    records::missing(&view.wanted, &view.existing, features, &signals.shape)
}

fn planned(spec: &NodeSetAutoscalerSpec, obs: &Observation) -> Plan {
    match (&spec.colocation, &obs.pool) {
        (Some(col), Some(pool)) => colocation::plan(
            &ColocationBounds::from(col),
            &pool.nodes,
            &pool.pods,
            &obs.signals,
            pool.ledger.as_ref().map(|_| ()).map_err(String::as_str),
            obs.target.replicas,
            &obs.memory.pool,
            obs.now,
        ),
        _ => policy::decide(
            &Bounds::from(spec),
            &obs.signals,
            obs.target.replicas,
            &obs.memory.history,
            obs.now,
        ),
    }
}

/// Right after planning, whatever happens next: the policy's windows read every
/// recommendation it made.
pub fn remember_plan(
    memory: &mut Memory,
    spec: &NodeSetAutoscalerSpec,
    plan: &Plan,
    now: SystemTime,
) {
    if spec.colocation.is_none() {
        let bounds = Bounds::from(spec);
        memory.history.record(plan, now, bounds.history_span());
    }
}

/// Once carried out: a pool's cooldown reads which way capacity last moved.
pub fn remember_outcome(
    memory: &mut Memory,
    spec: &NodeSetAutoscalerSpec,
    plan: &Plan,
    outcome: &Outcome,
    now: SystemTime,
) {
    if spec.colocation.is_some() && outcome.acted {
        memory.pool.record(plan, outcome.before, now);
    }
}
