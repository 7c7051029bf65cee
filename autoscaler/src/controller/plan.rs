//! Stage two: the scaling policy the spec asks for turns the observation into a [`Plan`].
//! A policy is a [`Policy`]: a pure planner, what it reads beyond the target and Slurm's
//! signals, and what it remembers between reconciles. [`for_spec`] is the one place the spec
//! picks a policy, so a new policy is one type implementing the trait and one arm there.
//! The node records a spec keeps are planned here for every policy.

use std::time::SystemTime;

use super::observe::RecordsView;
use super::{Observation, Outcome};
use crate::actuator::Target;
use crate::colocation::{self, ColocationBounds, ColocationHistory};
use crate::crd::{ColocationSpec, NodeSetAutoscalerSpec};
use crate::plan::Plan;
use crate::policy::{self, Bounds, History};
use crate::records::{self, Record};

/// A scaling policy and its memory. Planning is pure: everything it looks at is in the
/// observation or in what it remembered itself.
pub trait Policy: Send {
    /// Its name; an autoscaler whose spec changes policy starts the new one afresh.
    fn name(&self) -> &'static str;
    /// What it needs observed besides the target and Slurm's signals.
    fn inputs<'a>(&self, spec: &'a NodeSetAutoscalerSpec) -> Inputs<'a>;
    /// The plan for now.
    fn plan(&self, spec: &NodeSetAutoscalerSpec, obs: &Observation) -> Plan;
    /// Right after planning, whatever happens next.
    fn planned(&mut self, _spec: &NodeSetAutoscalerSpec, _plan: &Plan, _now: SystemTime) {}
    /// Once a plan was carried out (not by a standby, not in a dry run).
    fn acted(&mut self, _plan: &Plan, _outcome: &Outcome, _now: SystemTime) {}
}

/// What a policy reads.
#[derive(Clone, Copy, Debug, Default)]
pub struct Inputs<'a> {
    /// Jobs needing more nodes than this are unsatisfiable, not demand.
    pub max_nodes: Option<u64>,
    /// Only the first partition counts.
    pub one_partition: bool,
    /// The colocated pool to read: its ledger, nodes and the pods that want room.
    pub pool: Option<&'a ColocationSpec>,
}

/// The policy `spec` asks for. `current` carries on (with its memory) while the spec asks
/// for the same one; only a change of policy makes a new one.
pub fn for_spec(spec: &NodeSetAutoscalerSpec, current: Option<Box<dyn Policy>>) -> Box<dyn Policy> {
    let (name, new): (&str, fn() -> Box<dyn Policy>) = match spec.colocation {
        Some(_) => (SharePool::NAME, fresh::<SharePool>),
        None => (FollowDemand::NAME, fresh::<FollowDemand>),
    };
    match current {
        Some(p) if p.name() == name => p,
        _ => new(),
    }
}

fn fresh<P: Policy + Default + 'static>() -> Box<dyn Policy> {
    Box::<P>::default()
}

/// A NodeSet following its partitions' demand, within bounds ([`policy`]).
#[derive(Default)]
struct FollowDemand {
    /// Recent recommendations and idle time, for the windows.
    history: History,
}

impl FollowDemand {
    const NAME: &'static str = "demand";
}

impl Policy for FollowDemand {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn inputs<'a>(&self, spec: &'a NodeSetAutoscalerSpec) -> Inputs<'a> {
        // A NodeSet may serve several partitions; jobs it could never hold within
        // maxReplicas are not its demand.
        Inputs {
            max_nodes: Some(Bounds::from(spec).max),
            ..Inputs::default()
        }
    }

    fn plan(&self, spec: &NodeSetAutoscalerSpec, obs: &Observation) -> Plan {
        policy::decide(
            &Bounds::from(spec),
            &obs.signals,
            obs.target.replicas,
            &self.history,
            obs.now,
        )
    }

    /// The windows read every recommendation made.
    fn planned(&mut self, spec: &NodeSetAutoscalerSpec, plan: &Plan, now: SystemTime) {
        let keep = Bounds::from(spec).history_span();
        self.history.record(plan, now, keep);
    }
}

/// A pool of nodes shared with Kubernetes ([`colocation`]).
#[derive(Default)]
struct SharePool {
    /// When capacity last moved each way, for the cooldown.
    history: ColocationHistory,
}

impl SharePool {
    const NAME: &'static str = "colocation";
}

impl Policy for SharePool {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn inputs<'a>(&self, spec: &'a NodeSetAutoscalerSpec) -> Inputs<'a> {
        // A pool is one partition's.
        Inputs {
            max_nodes: None,
            one_partition: true,
            pool: spec.colocation.as_ref(),
        }
    }

    fn plan(&self, spec: &NodeSetAutoscalerSpec, obs: &Observation) -> Plan {
        let (Some(col), Some(pool)) = (&spec.colocation, &obs.pool) else {
            // Not reached: observing with this policy's inputs reads the pool or fails.
            return Plan {
                replicas: obs.target.replicas,
                reason: crate::plan::Reason::Frozen,
                steps: vec!["the shared pool was not observed".into()],
                frozen: true,
                ..Plan::default()
            };
        };
        colocation::plan(
            &ColocationBounds::from(col),
            &pool.nodes,
            &pool.pods,
            &obs.signals,
            pool.ledger.as_ref().map(|_| ()).map_err(String::as_str),
            obs.target.replicas,
            &self.history,
            obs.now,
        )
    }

    /// The cooldown reads which way capacity last moved.
    fn acted(&mut self, plan: &Plan, outcome: &Outcome, now: SystemTime) {
        self.history.record(plan, outcome.before, now);
    }
}

/// Targets no policy can serve, and why: a NodeSet in `scalingMode: DaemonSet` runs one pod
/// per matching node and ignores replicas.
pub fn refusal(target: &Target) -> Option<&'static str> {
    (target.scaling_mode.as_deref() == Some("DaemonSet")).then_some(
        "the NodeSet uses scalingMode DaemonSet: one pod per matching node, replicas are ignored; it cannot be autoscaled",
    )
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
    records::missing(&view.wanted, &view.existing, features, &signals.shape)
}
