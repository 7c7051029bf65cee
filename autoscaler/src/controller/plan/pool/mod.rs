//! The policy of a pool shared with Kubernetes: the pure planner and its effects are
//! [`planner`]; here, what it reads, the cooldown's memory and the pool's part of
//! the status and metrics.

use std::time::SystemTime;

mod metrics;
mod observe;
mod planner;

use std::sync::Arc;

use futures::future::BoxFuture;

use super::{OwnCondition, Policy, PolicyStatus};
use crate::controller::observation::Inputs;
use crate::controller::observation::{OwnInput, Reading};
use crate::controller::{Observation, Outcome};
use crate::crd::{ColocationStatus, NodeSetAutoscalerSpec, count, replicas};
use crate::error::Result;
use crate::metrics::Row;
use crate::plan::Plan;
use metrics::ColocationRow;
use observe::PoolView;
use planner::{ColocationBounds, ColocationHistory, PoolMoves};

/// A pool of nodes shared with Kubernetes ([`planner`]).
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

    fn inputs(&self, spec: &NodeSetAutoscalerSpec) -> Inputs {
        // A pool is one partition's.
        Inputs {
            one_partition: true,
            ..Inputs::of(spec)
        }
    }

    fn observe<'a>(&'a self, reading: Reading<'a>) -> BoxFuture<'a, Result<Option<OwnInput>>> {
        Box::pin(observe::observe(reading))
    }

    fn plan(&self, spec: &NodeSetAutoscalerSpec, obs: &Observation) -> Plan {
        let (Some(col), Some(pool)) = (&spec.colocation, obs.input::<PoolView>()) else {
            // Not reached: observing with this policy's inputs reads the pool or fails.
            return Plan {
                replicas: obs.target.replicas,
                reason: crate::plan::Reason::Frozen,
                steps: vec!["the shared pool was not observed".into()],
                frozen: true,
                ..Plan::default()
            };
        };
        let mut plan = planner::plan(
            &ColocationBounds::from(col),
            &pool.nodes,
            &pool.pods,
            &obs.signals,
            pool.ledger.as_ref().map(|_| ()).map_err(String::as_str),
            obs.target.replicas,
            &self.history,
            obs.now,
        );
        if pool.unschedulable_nodeset_pods > 0 {
            // Slurm's growth the plan counts on has not reached slurmd yet: say why.
            plan.steps.push(format!(
                "{} NodeSet pod(s) found no node with room (PodScheduled=False): Slurm grows only as pool nodes empty of Kubernetes pods, and packing those pods empties whole nodes (docs/colocation.md)",
                pool.unschedulable_nodeset_pods
            ));
        }
        plan
    }

    /// The cooldown reads which way capacity last moved.
    fn acted(&mut self, plan: &Plan, outcome: &Outcome, now: SystemTime) {
        self.history.record(plan, outcome.before, now);
    }

    /// How the pool is shared, and `Reclaiming` while drained nodes still run jobs.
    fn status(&self, obs: &Observation, plan: &Plan) -> PolicyStatus {
        let Some(pool) = obs.input::<PoolView>() else {
            return PolicyStatus::default();
        };
        let needs = PoolMoves::of(plan).needs;
        let draining = draining(pool, plan);
        let reclaiming = if draining.is_empty() {
            OwnCondition {
                kind: "Reclaiming",
                holds: false,
                reason: "NoDrains",
                message: "no Slurm node is being drained for Kubernetes".into(),
            }
        } else {
            OwnCondition {
                kind: "Reclaiming",
                holds: true,
                reason: "WaitingForJobs",
                message: format!(
                    "drained for Kubernetes, waiting for their jobs to end: {}",
                    draining.join(", ")
                ),
            }
        };
        // Frozen on the ledger as well as on Slurm's data.
        let (reason, message) = if plan.frozen {
            ("DataUntrusted", plan.message())
        } else {
            ("DataFresh", "ledger and Slurm data are fresh".to_string())
        };
        let frozen = OwnCondition {
            kind: "Frozen",
            holds: plan.frozen,
            reason,
            message,
        };
        PolicyStatus {
            conditions: vec![frozen, reclaiming],
            colocation: Some(ColocationStatus {
                pool_nodes: count(pool.nodes.len()),
                slurm_nodes: count(held(pool)),
                kubernetes_need_nodes: replicas(needs.kubernetes),
                slurm_need_nodes: replicas(needs.slurm),
                draining,
                last_plan: plan.steps.clone(),
            }),
        }
    }

    fn metrics(&self, obs: &Observation, plan: &Plan, _outcome: &Outcome, row: &mut Row) {
        let Some(pool) = obs.input::<PoolView>() else {
            return;
        };
        let needs = PoolMoves::of(plan).needs;
        row.policy = Some(Arc::new(ColocationRow {
            pool: pool.nodes.len() as u64,
            slurm: held(pool) as u64,
            draining: draining(pool, plan).len() as u64,
            kubernetes_need: needs.kubernetes,
            slurm_need: needs.slurm,
            unschedulable_pods: pool.unschedulable_nodeset_pods,
        }));
    }
}

/// Slurm nodes drained for Kubernetes that still run jobs, and those the plan drains.
fn draining(pool: &PoolView, plan: &Plan) -> Vec<String> {
    pool.nodes
        .iter()
        .filter(|n| n.slurm.as_ref().is_some_and(|s| s.drained_by_us && s.busy))
        .map(|n| n.slurm_node.clone())
        .chain(PoolMoves::of(plan).drain.iter().cloned())
        .collect()
}

/// Pool nodes Slurm holds.
fn held(pool: &PoolView) -> usize {
    pool.nodes.iter().filter(|n| n.slurm.is_some()).count()
}
