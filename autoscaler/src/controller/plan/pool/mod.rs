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
use crate::crd::{ColocationStatus, NodeSetAutoscalerSpec, SharesStatus, count, replicas};
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
        let mut bounds = ColocationBounds::from(col);
        if let Some(shares) = &mut bounds.shares {
            let boot = obs.boot.seconds.unwrap_or(0.0).max(0.0);
            shares.boot = std::time::Duration::from_secs_f64(boot);
        }
        let mut plan = planner::plan(
            &bounds,
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
        let mut conditions = vec![frozen, reclaiming];
        let shares = PoolMoves::of(plan).shares.map(|s| {
            conditions.push(self.below_share(&s, obs.now));
            let since =
                |i: usize| self.history.below_share_since[i].map(crate::controller::report::time);
            SharesStatus {
                slurm_share_nodes: replicas(s.slurm),
                kubernetes_share_nodes: replicas(s.kubernetes),
                slurm_borrowed_nodes: replicas(s.slurm_holds.saturating_sub(s.slurm)),
                kubernetes_borrowed_nodes: replicas(
                    s.kubernetes_holds.saturating_sub(s.kubernetes),
                ),
                reserved: PoolMoves::of(plan).reserved.clone(),
                slurm_below_share_since: since(0),
                kubernetes_below_share_since: since(1),
            }
        });
        PolicyStatus {
            conditions,
            colocation: Some(ColocationStatus {
                pool_nodes: count(pool.nodes.len()),
                slurm_nodes: count(held(pool)),
                kubernetes_need_nodes: replicas(needs.kubernetes),
                slurm_need_nodes: replicas(needs.slurm),
                draining,
                last_plan: plan.steps.clone(),
                shares,
            }),
        }
    }

    fn metrics(&self, obs: &Observation, plan: &Plan, _outcome: &Outcome, row: &mut Row) {
        let Some(pool) = obs.input::<PoolView>() else {
            return;
        };
        let needs = PoolMoves::of(plan).needs;
        let shares = PoolMoves::of(plan).shares.map(|s| metrics::SharesRow {
            share: [s.slurm, s.kubernetes],
            reserved: PoolMoves::of(plan).reserved.len() as u64,
            below_share_seconds: [0, 1].map(|i| self.below_share_for(i, obs.now).as_secs_f64()),
            reclaim_seconds: s.reclaim_seconds,
        });
        row.policy = Some(Arc::new(ColocationRow {
            shares,
            pool: pool.nodes.len() as u64,
            slurm: held(pool) as u64,
            draining: draining(pool, plan).len() as u64,
            kubernetes_need: needs.kubernetes,
            slurm_need: needs.slurm,
            unschedulable_pods: pool.unschedulable_nodeset_pods,
        }));
    }
}

impl SharePool {
    /// How long side `i` (0 Slurm, 1 Kubernetes) has had work and held less than its share.
    fn below_share_for(&self, i: usize, now: SystemTime) -> std::time::Duration {
        self.history.below_share_since[i]
            .and_then(|t| now.duration_since(t).ok())
            .unwrap_or_default()
    }

    /// `BelowShare`: a side with work has held less than its share for longer than the
    /// reclaim time — the promise of shares, broken.
    fn below_share(&self, s: &planner::ShareState, now: SystemTime) -> OwnCondition {
        let reclaim = std::time::Duration::from_secs(s.reclaim_seconds);
        let late: Vec<String> = [
            ("Slurm", s.slurm, s.slurm_owed),
            ("Kubernetes", s.kubernetes, s.kubernetes_owed),
        ]
        .into_iter()
        .enumerate()
        .filter(|(i, _)| self.below_share_for(*i, now) > reclaim)
        .map(|(i, (side, share, owed))| {
            format!(
                "{side} has waited {}s for {owed} node(s) of its share of {share}",
                self.below_share_for(i, now).as_secs()
            )
        })
        .collect();
        if late.is_empty() {
            OwnCondition {
                kind: "BelowShare",
                holds: false,
                reason: "SharesMet",
                message: "no side with work has waited longer than the reclaim time for its share"
                    .into(),
            }
        } else {
            OwnCondition {
                kind: "BelowShare",
                holds: true,
                reason: "ReclaimLate",
                message: format!("{} (reclaim time {}s)", late.join("; "), s.reclaim_seconds),
            }
        }
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
