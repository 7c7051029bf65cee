//! Stage two: the scaling policy the spec asks for turns the observation into a [`Plan`].
//! A policy is a [`Policy`]: a pure planner, what it reads beyond the target and Slurm's
//! signals, and what it remembers between reconciles. [`for_spec`] is the one place the spec
//! picks a policy, so a new policy is one type implementing the trait and one arm there.
//! The node records a spec keeps are planned here for every policy.

use std::time::SystemTime;

use super::observe::{Inputs, RecordsView};
use super::{Observation, Outcome};
use crate::actuator::Target;
use crate::colocation::{self, ColocationBounds, ColocationHistory};
use crate::crd::{NodeSetAutoscalerSpec, ScalingMode};
use crate::plan::{Effects, Plan, PlannedMoves, Reason};
use crate::policy::{self, Bounds, History};
use crate::records::{self, Record};
use crate::slurm_planned;

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
            one_partition: true,
            pool: spec.colocation.as_ref(),
            ..Inputs::default()
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

/// A NodeSet following exactly the nodes slurmctld powers up and down ([`slurm_planned`]).
#[derive(Default)]
struct FollowSlurm {
    /// The configuration generation the records were last refreshed for. `None` at first:
    /// what happened before this replica led is unknown, so it refreshes once.
    refreshed_for: Option<(i64, u64)>,
}

impl FollowSlurm {
    const NAME: &'static str = "slurm-planned";
}

impl Policy for FollowSlurm {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn inputs<'a>(&self, spec: &'a NodeSetAutoscalerSpec) -> Inputs<'a> {
        // Demand is read for the status and metrics only: slurmctld decides.
        Inputs {
            max_nodes: Some(Bounds::from(spec).max),
            ordinals: true,
            ..Inputs::default()
        }
    }

    fn plan(&self, _spec: &NodeSetAutoscalerSpec, obs: &Observation) -> Plan {
        let current = obs.target.replicas;
        let hold = |why: String| policy::frozen(current, why);
        let signals = match &obs.signals {
            Ok(s) => s,
            Err(why) => return hold(why.to_string()),
        };
        let (Some(view), Some(records)) = (&obs.planned, &obs.records) else {
            return hold("slurmctld's nodes have not been read yet".into());
        };
        if !view.hidden.is_empty() {
            return hold(format!(
                "slurmctld lists {} record(s) of the partition that /nodes does not show ({}): powered-down CLOUD nodes are hidden on Slurm 22.05 unless slurm.conf has PrivateData=cloud",
                view.hidden.len(),
                view.hidden.join(",")
            ));
        }
        if let Some(partition) = &view.never_suspends {
            return hold(format!(
                "partition {partition} has SuspendTime=INFINITE: slurmctld never powers its nodes down, so pods it asked for would stay for good; set SuspendTime, SuspendTimeout and ResumeTimeout on it (docs/slurm-planned.md)"
            ));
        }
        let generation = view.config_generation;
        let reloaded = generation.is_some() && generation != self.refreshed_for;
        let d = slurm_planned::decide(
            &view.ordinals,
            current,
            obs.target.status_replicas,
            reloaded,
        );
        let name = |i: &usize| records.wanted[*i].clone();
        let reason = match d.replicas.cmp(&current) {
            std::cmp::Ordering::Greater => Reason::ScaleUp,
            std::cmp::Ordering::Less => Reason::ScaleDown,
            _ if obs.target.status_replicas != Some(current) => Reason::Stabilizing,
            _ => Reason::Steady,
        };
        let mut steps = d.steps;
        if steps.is_empty() {
            steps.push(format!(
                "{current} pod(s) cover what slurmctld has powered up"
            ));
        }
        Plan {
            replicas: d.replicas,
            recommendation: d.replicas,
            reason,
            steps,
            effects: Effects::SlurmPlanned(PlannedMoves {
                resume: d.resume.iter().map(name).collect(),
                refresh: generation
                    .filter(|_| reloaded)
                    .map(|g| (d.refresh.iter().map(name).collect(), g)),
                retire: d
                    .retire
                    .iter()
                    .filter_map(|&i| view.pods[i].clone())
                    .collect(),
                unrequested: d.extra.len() as u64,
            }),
            unsatisfiable_jobs: signals.demand.unsatisfiable_jobs,
            active: view
                .ordinals
                .iter()
                .any(|o| o.power == slurm_planned::Power::Busy),
            ..Plan::default()
        }
    }

    /// Refreshed: until slurmctld reloads again.
    fn acted(&mut self, plan: &Plan, _outcome: &Outcome, _now: SystemTime) {
        if let Some((_, generation)) = &plan.slurm_planned().refresh {
            self.refreshed_for = Some(*generation);
        }
    }
}

/// Why a target cannot be autoscaled as its spec asks: the reason word and the message.
pub struct Refusal {
    pub reason: &'static str,
    pub why: String,
}

/// Targets the spec's policy cannot serve, and why: a NodeSet in `scalingMode: DaemonSet`
/// runs one pod per matching node and ignores replicas; slurm-planned mode cannot share a
/// pool, and needs the pods' slurmd to run with `-b` (a pod does not reboot a node, and
/// slurmctld ignores a powering-up node's registration without it until `ResumeTimeout`).
pub fn refusal(spec: &NodeSetAutoscalerSpec, target: &Target) -> Option<Refusal> {
    let refuse = |reason, why: &str| {
        Some(Refusal {
            reason,
            why: why.to_string(),
        })
    };
    if target.scaling_mode.as_deref() == Some("DaemonSet") {
        return refuse(
            "DaemonSetScalingMode",
            "the NodeSet uses scalingMode DaemonSet: one pod per matching node, replicas are ignored; it cannot be autoscaled",
        );
    }
    if spec.mode != ScalingMode::SlurmPlanned {
        return None;
    }
    if spec.colocation.is_some() {
        return refuse(
            "SlurmPlannedNotSetUp",
            "mode SlurmPlanned follows slurmctld's power requests and cannot also share a colocated pool: remove spec.colocation or the mode",
        );
    }
    let is_nodeset = spec.scale_target_ref.kind == "NodeSet";
    if is_nodeset && !target.nodes.slurmd_args.iter().any(|a| a == "-b") {
        return refuse(
            "SlurmPlannedNotSetUp",
            "mode SlurmPlanned needs the NodeSet's slurmd to run with -b (add it to spec.slurmd.args): without it slurmctld ignores a powered-up pod's registration until ResumeTimeout and requeues its job",
        );
    }
    None
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
