//! The policy of a NodeSet that follows its partitions' demand: the pure planner is
//! [`decide`]; here, what it reads and the windows' memory.

use std::time::SystemTime;

mod decide;

use super::Policy;
use crate::controller::Observation;
use crate::controller::observation::Inputs;
use crate::crd::NodeSetAutoscalerSpec;
use crate::plan::Bounds;
use crate::plan::Plan;
use decide::History;

/// A NodeSet following its partitions' demand, within bounds ([`decide`]).
#[derive(Default)]
pub(super) struct FollowDemand {
    /// Recent recommendations and idle time, for the windows.
    history: History,
}

impl FollowDemand {
    pub(super) const NAME: &'static str = "demand";
}

impl Policy for FollowDemand {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn inputs(&self, spec: &NodeSetAutoscalerSpec) -> Inputs {
        // A NodeSet may serve several partitions; jobs it could never hold within
        // maxReplicas are not its demand. Jobs Slurm has planned are booted for just in time.
        Inputs {
            max_nodes: Some(Bounds::from(spec).max),
            timed: true,
            ..Inputs::of(spec)
        }
    }

    fn plan(&self, spec: &NodeSetAutoscalerSpec, obs: &Observation) -> Plan {
        decide::decide(
            &Bounds::from(spec),
            &obs.signals,
            obs.target.replicas,
            &self.history,
            obs.now,
        )
    }

    /// The windows read every recommendation made.
    fn remember(&mut self, spec: &NodeSetAutoscalerSpec, plan: &Plan, now: SystemTime) {
        let keep = Bounds::from(spec).history_span();
        self.history.record(plan, now, keep);
    }
}
