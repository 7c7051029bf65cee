//! Stage four: the one place the typed status, its conditions and the autoscaler's metrics
//! are filled, from the observation, the plan and what was done. Timestamps come from the
//! observation's clock reading; a status is written only when it differs from the last one.

use std::cmp::Ordering;
use std::time::SystemTime;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::plan::Refusal;
use super::{Observation, Outcome, Policy};
use crate::actuator::Kubernetes;
use crate::crd::{
    LastDecision, NodeRecordsStatus, NodeSetAutoscaler, NodeSetAutoscalerStatus, count, replicas,
};
use crate::error::{Error, Result};
use crate::metrics::AutoscalerMetrics;
use crate::plan::{Plan, Reason};

/// What the reporter last wrote.
#[derive(Debug, Default)]
pub struct Reported {
    /// The last decision reported; its time stays while it stays the same.
    decision: Option<LastDecision>,
    written: Option<NodeSetAutoscalerStatus>,
    last_scale: Option<Time>,
}

/// Writes `status` unless it is what was written last.
pub async fn write<K: Kubernetes>(
    kube: &K,
    nsa: &NodeSetAutoscaler,
    memory: &mut Reported,
    status: NodeSetAutoscalerStatus,
) -> Result<()> {
    if memory.written.as_ref() == Some(&status) {
        return Ok(());
    }
    kube.status(nsa, &status).await?;
    memory.written = Some(status);
    Ok(())
}

/// The status after a reconcile that planned (and perhaps acted); `reload_pending`: records
/// were made that wait for slurmctld to reload.
pub fn status(
    nsa: &NodeSetAutoscaler,
    (obs, plan, outcome): (&Observation, &Plan, &Outcome),
    policy: &dyn Policy,
    memory: &mut Reported,
    reload_pending: bool,
) -> NodeSetAutoscalerStatus {
    let now = obs.now;
    if outcome.scaled().is_some() {
        memory.last_scale = Some(time(now));
    }
    let decision = LastDecision {
        replicas: replicas(plan.replicas),
        reason: plan.reason.as_str().into(),
        message: plan.message(),
        time: time(now),
    };
    let same = memory.decision.as_ref().is_some_and(|d| {
        (d.replicas, &d.reason, &d.message)
            == (decision.replicas, &decision.reason, &decision.message)
    });
    if !same {
        memory.decision = Some(decision);
    }
    let mut conditions = vec![
        condition(
            nsa,
            now,
            ("Ready", true),
            "TargetFound",
            "the target is found and scalable",
        ),
        frozen(nsa, now, plan),
        limited(nsa, now, plan),
    ];
    let signals = obs.signals.as_ref().ok();
    // The policy's own part after the part every policy has; its condition of a type every
    // policy has takes that one's place (a pool freezes on its ledger too, and says so).
    let own = policy.status(obs, plan);
    for c in &own.conditions {
        let c = condition(nsa, now, (c.kind, c.holds), c.reason, &c.message);
        match conditions.iter_mut().find(|d| d.type_ == c.type_) {
            Some(d) => *d = c,
            None => conditions.push(c),
        }
    }
    NodeSetAutoscalerStatus {
        current_replicas: Some(replicas(outcome.replicas)),
        desired_replicas: Some(replicas(plan.replicas)),
        last_scale_time: memory.last_scale.clone(),
        last_decision: memory.decision.clone(),
        conditions,
        observed_generation: nsa.metadata.generation,
        colocation: own.colocation,
        node_shape: signals.map(|s| format!("{} ({})", s.shape, s.shape_source)),
        node_records: obs.records.as_ref().map(|r| NodeRecordsStatus {
            wanted: count(r.wanted.len()),
            existing: count(r.existing.iter().filter(|e| **e).count()),
            message: plan.records.as_ref().err().cloned(),
            reload_pending,
        }),
        boot_time: obs.boot.describe(),
    }
}

/// The target cannot be read, or its scale written: only `Ready` changes.
pub fn unreachable(nsa: &NodeSetAutoscaler, e: &Error, now: SystemTime) -> NodeSetAutoscalerStatus {
    let reason = if e.kind() == "not_found" {
        "TargetNotFound"
    } else {
        "TargetUnavailable"
    };
    NodeSetAutoscalerStatus {
        conditions: vec![condition(
            nsa,
            now,
            ("Ready", false),
            reason,
            &e.to_string(),
        )],
        ..Default::default()
    }
}

/// The target can never be autoscaled (a DaemonSet NodeSet).
pub fn refused(
    nsa: &NodeSetAutoscaler,
    refusal: &Refusal,
    current: u64,
    now: SystemTime,
) -> NodeSetAutoscalerStatus {
    NodeSetAutoscalerStatus {
        conditions: vec![condition(
            nsa,
            now,
            ("Ready", false),
            refusal.reason,
            &refusal.why,
        )],
        current_replicas: Some(replicas(current)),
        ..Default::default()
    }
}

/// The autoscaler's metrics row.
pub fn metrics(
    m: &mut AutoscalerMetrics,
    nsa: &NodeSetAutoscaler,
    obs: &Observation,
    (plan, outcome): (&Plan, &Outcome),
    policy: &dyn Policy,
) {
    let row = m.rows.entry(super::key(nsa)).or_default();
    row.cluster = obs.cluster.clone().unwrap_or_default();
    row.namespace = nsa.namespace().unwrap_or_default();
    row.name = nsa.name_any();
    row.target = nsa.spec.scale_target_ref.name.clone();
    row.desired = plan.replicas;
    row.current = outcome.replicas;
    row.recommendation = plan.recommendation;
    row.frozen = plan.frozen;
    row.limited = plan.limited;
    row.unsatisfiable = plan.unsatisfiable_jobs;
    row.boot = obs.boot;
    row.timing = match &obs.signals {
        Ok(s) if obs.lead.is_some() => crate::metrics::Timing {
            known: true,
            waiting_jobs: s.demand.planned_jobs,
            deferred_jobs: s.demand.deferred_jobs,
            deferred_nodes: s.demand.deferred_nodes,
            next_boot: s.demand.next_boot,
        },
        _ => crate::metrics::Timing::default(),
    };
    row.reason = metric_reason(plan, outcome.before);
    match outcome.scaled() {
        Some(true) => {
            row.scale_ups += 1;
            row.last_scale_up = Some(obs.now);
        }
        Some(false) => {
            row.scale_downs += 1;
            row.last_scale_down = Some(obs.now);
        }
        None => {}
    }
    policy.metrics(obs, plan, outcome, row);
}

/// `decision_info`'s reason. Its values predate colocated pools, whose status says
/// `Rebalance` or `Balanced`: for those it says which way replicas move.
fn metric_reason(plan: &Plan, before: u64) -> Reason {
    match plan.reason {
        Reason::Rebalance | Reason::Balanced => match plan.replicas.cmp(&before) {
            Ordering::Greater => Reason::ScaleUp,
            Ordering::Less => Reason::ScaleDown,
            Ordering::Equal => Reason::Steady,
        },
        r => r,
    }
}

/// `Frozen`: the data behind the plan cannot be trusted (Slurm's; a pool's ledger too).
fn frozen(nsa: &NodeSetAutoscaler, now: SystemTime, plan: &Plan) -> Condition {
    let (reason, message) = if plan.frozen {
        ("SlurmDataUntrusted", plan.message())
    } else {
        ("SlurmDataFresh", "Slurm data is fresh".to_string())
    };
    condition(nsa, now, ("Frozen", plan.frozen), reason, &message)
}

/// `Limited`: demand beyond `maxReplicas`, or jobs that can never fit.
fn limited(nsa: &NodeSetAutoscaler, now: SystemTime, plan: &Plan) -> Condition {
    let max = nsa.spec.max_replicas;
    let (reason, message) = if plan.limited {
        (
            "MaxReplicas",
            format!(
                "busy nodes and demand ({}) exceed maxReplicas {max}",
                plan.recommendation
            ),
        )
    } else if plan.unsatisfiable_jobs > 0 {
        (
            "UnsatisfiableJobs",
            unsatisfiable(plan.unsatisfiable_jobs, plan.no_nodeset_jobs, max),
        )
    } else {
        ("WithinBounds", "within bounds".to_string())
    };
    let status = plan.limited || plan.unsatisfiable_jobs > 0;
    condition(nsa, now, ("Limited", status), reason, &message)
}

/// What the unsatisfiable jobs are: too large for `maxReplicas`, or fit for no NodeSet.
fn unsatisfiable(all: u64, no_nodeset: u64, max: u32) -> String {
    let too_large = all.saturating_sub(no_nodeset);
    let mut parts = Vec::new();
    if too_large > 0 {
        parts.push(format!(
            "{too_large} pending job(s) need more nodes than maxReplicas {max}"
        ));
    }
    if no_nodeset > 0 {
        parts.push(format!(
            "{no_nodeset} pending job(s) fit no NodeSet of its partitions (node shape, GPUs or features)"
        ));
    }
    format!("{}: not chased", parts.join("; "))
}

/// A condition, keeping the previous transition time when its status did not change.
fn condition(
    nsa: &NodeSetAutoscaler,
    now: SystemTime,
    (type_, status): (&str, bool),
    reason: &str,
    message: &str,
) -> Condition {
    let status = if status { "True" } else { "False" }.to_string();
    let previous = nsa
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == type_))
        .filter(|c| c.status == status)
        .map(|c| c.last_transition_time.clone());
    Condition {
        type_: type_.into(),
        status,
        reason: reason.into(),
        message: message.chars().take(1024).collect(),
        last_transition_time: previous.unwrap_or_else(|| time(now)),
        observed_generation: nsa.metadata.generation,
    }
}

/// A status timestamp from the clock's reading.
pub(crate) fn time(t: SystemTime) -> Time {
    Time(Timestamp::try_from(t).unwrap_or(Timestamp::UNIX_EPOCH))
}
