//! The policy of a pool shared with Kubernetes: the pure planner is
//! [`crate::colocation::plan`]; here, what it reads and the cooldown's memory.

use std::time::SystemTime;

use super::Policy;
use crate::colocation::{self, ColocationBounds, ColocationHistory};
use crate::controller::observe::Inputs;
use crate::controller::{Observation, Outcome};
use crate::crd::NodeSetAutoscalerSpec;
use crate::plan::Plan;

/// A pool of nodes shared with Kubernetes ([`colocation`]).
#[derive(Default)]
pub(super) struct SharePool {
    /// When capacity last moved each way, for the cooldown.
    history: ColocationHistory,
}

impl SharePool {
    pub(super) const NAME: &'static str = "colocation";
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
