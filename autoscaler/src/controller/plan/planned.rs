//! The policy of a NodeSet that follows slurmctld's own plan (power-ups and power-downs):
//! the pure decision is [`crate::slurm_planned::decide`]; here, what it reads, how the
//! decision becomes a plan with its effects, and the configuration it last refreshed for.

use std::time::SystemTime;

use super::Policy;
use crate::controller::observe::Inputs;
use crate::controller::{Observation, Outcome};
use crate::crd::NodeSetAutoscalerSpec;
use crate::plan::{Effects, Plan, PlannedMoves, Reason};
use crate::policy::{self, Bounds};
use crate::slurm_planned;

/// A NodeSet following exactly the nodes slurmctld powers up and down ([`slurm_planned`]).
#[derive(Default)]
pub(super) struct FollowSlurm {
    /// The configuration generation the records were last refreshed for. `None` at first:
    /// what happened before this replica led is unknown, so it refreshes once.
    refreshed_for: Option<(i64, u64)>,
}

impl FollowSlurm {
    pub(super) const NAME: &'static str = "slurm-planned";
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
        let name = |i: &usize| records.wanted.name(*i);
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
                drain: d.drain.iter().map(name).collect(),
                refresh: generation
                    .filter(|_| reloaded)
                    .map(|g| (d.refresh.iter().map(name).collect(), g)),
                retire: view.pod_names(&d.retire),
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
