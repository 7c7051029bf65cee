//! The policy of a NodeSet that follows slurmctld's own plan (power-ups and power-downs):
//! the pure decision is [`decide::decide`]; here, what it reads, how the
//! decision becomes a plan with its effects, the configuration each record was last resumed
//! under, and its records' power states in the metrics.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use slurmscale_exporter::metrics::unix_seconds;

mod decide;
mod metrics;
mod observe;

use futures::future::BoxFuture;

use super::{Policy, Refusal};
use crate::actuator::Target;
use crate::controller::observation::Inputs;
use crate::controller::observation::{OwnInput, Reading};
use crate::controller::{Observation, Outcome};
use crate::crd::NodeSetAutoscalerSpec;
use crate::error::Result;
use crate::metrics::Row;
use crate::plan::{Bounds, frozen, unix_time};
use crate::plan::{Effects, Move, Plan, Reason, Write};
use crate::records;
use decide::Power;
use metrics::PlannedRow;
use observe::PlannedView;

/// A NodeSet following exactly the nodes slurmctld powers up and down ([`decide`]).
#[derive(Default)]
pub(super) struct FollowSlurm {
    /// Each record this replica resumed or refreshed, by name, and the configuration
    /// generation slurmctld ran then: a reload since leaves it to be refreshed. Per record,
    /// because the reload and a resume can cross: a record resumed just before a reload may
    /// show unheard only in a later look than the one that saw the reload.
    resumed_under: HashMap<String, (i64, u64)>,
    /// The generation this replica first saw: another one later is a reload it saw happen.
    first_seen: Option<(i64, u64)>,
    /// Records this replica powered up ahead, and when (unix seconds): slurmctld may show
    /// one still powered down for a pass or two after the request, and asking again would
    /// count and announce the same power-up twice.
    powered_up: HashMap<String, i64>,
}

/// How long a schedulable job of the partition waits, while resumed records sit idle, before
/// a replica that did not see slurmctld reload takes the records for unschedulable and
/// refreshes them: longer than slurmctld's scheduling interval (`sched_interval`, 60 s by
/// default), so a job it has yet to place is not taken for one it refuses.
const STUCK_AFTER_SECS: f64 = 60.0;

impl FollowSlurm {
    pub(super) const NAME: &'static str = "slurm-planned";
}

impl Policy for FollowSlurm {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn inputs(&self, spec: &NodeSetAutoscalerSpec) -> Inputs {
        // Demand is read for the status and metrics only: slurmctld decides.
        Inputs {
            max_nodes: Some(Bounds::from(spec).max),
            // Slurm plans on CLOUD records, one per ordinal.
            records: Some(records::Kind::Cloud),
            ..Inputs::default()
        }
    }

    fn observe<'a>(&'a self, reading: Reading<'a>) -> BoxFuture<'a, Result<Option<OwnInput>>> {
        Box::pin(observe::observe(reading))
    }

    /// Following slurmctld's power requests cannot also share a pool, and needs the pods'
    /// slurmd to run with `-b` (a pod does not reboot a node, and slurmctld ignores a
    /// powering-up node's registration without it until `ResumeTimeout`).
    fn refuse(&self, spec: &NodeSetAutoscalerSpec, target: &Target) -> Option<Refusal> {
        let refuse = |why: &str| {
            Some(Refusal {
                reason: "SlurmPlannedNotSetUp",
                why: why.to_string(),
            })
        };
        if spec.colocation.is_some() {
            return refuse(
                "mode SlurmPlanned follows slurmctld's power requests and cannot also share a colocated pool: remove spec.colocation or the mode",
            );
        }
        let is_nodeset = spec.scale_target_ref.kind == "NodeSet";
        if is_nodeset && !target.nodes.slurmd_args.iter().any(|a| a == "-b") {
            return refuse(
                "mode SlurmPlanned needs the NodeSet's slurmd to run with -b (add it to spec.slurmd.args): without it slurmctld ignores a powered-up pod's registration until ResumeTimeout and requeues its job",
            );
        }
        None
    }

    fn plan(&self, spec: &NodeSetAutoscalerSpec, obs: &Observation) -> Plan {
        let mut plan = self.follow(spec, obs);
        // A reload while slurmctld powers a node up has tripped Slurm before: wait.
        plan.reload_waits = obs
            .input::<PlannedView>()
            .is_some_and(|p| p.ordinals.iter().any(|o| o.power == Power::Up));
        plan
    }

    /// Resumed or refreshed: schedulable until slurmctld reloads again.
    fn acted(&mut self, plan: &Plan, outcome: &Outcome, now: SystemTime) {
        let Some(moves) = plan.effects::<PlannedMoves>() else {
            return;
        };
        let at = unix_seconds(now) as i64;
        self.powered_up.retain(|_, then| at - *then < 3600);
        for (_, name) in outcome.written.iter().filter(|(w, _)| *w == Write::PowerUp) {
            self.powered_up.insert(name.clone(), at);
        }
        self.first_seen = self.first_seen.or(moves.generation);
        let Some(generation) = moves.generation else {
            return;
        };
        // What was written, not what the plan lists: a plan made on `/nodes` read before
        // an earlier resume lists it again, and the executor does not make it twice.
        for (_, name) in
            (outcome.written.iter()).filter(|(w, _)| matches!(w, Write::Resume | Write::Refresh(_)))
        {
            self.resumed_under.insert(name.clone(), generation);
        }
    }

    /// Records by power state, the pods added that slurmctld did not ask for, and the
    /// records powered up ahead of a planned start.
    fn metrics(&self, obs: &Observation, plan: &Plan, outcome: &Outcome, row: &mut Row) {
        let Some(view) = obs.input::<PlannedView>() else {
            return;
        };
        let mut p = row.policy::<PlannedRow>().cloned().unwrap_or_default();
        p.records = Power::ALL
            .iter()
            .map(|&power| {
                let n = view.ordinals.iter().filter(|o| o.power == power).count();
                (power.as_str(), n as u64)
            })
            .collect();
        if outcome.scaled() == Some(true) {
            p.unrequested_pods += plan.effects().map_or(0, |m: &PlannedMoves| m.unrequested);
        }
        let written = |w: Write| outcome.written.iter().filter(|(x, _)| *x == w).count();
        p.early_power_ups += written(Write::PowerUp) as u64;
        p.next_power_up = plan.effects().and_then(|m: &PlannedMoves| m.next_power_up);
        row.policy = Some(Arc::new(p));
    }
}

impl FollowSlurm {
    /// The plan following slurmctld's power-ups and power-downs.
    fn follow(&self, _spec: &NodeSetAutoscalerSpec, obs: &Observation) -> Plan {
        let current = obs.target.replicas;
        let hold = |why: String| frozen(current, why);
        let signals = match &obs.signals {
            Ok(s) => s,
            Err(why) => return hold(why.to_string()),
        };
        let (Some(view), Some(records)) = (obs.input::<PlannedView>(), &obs.records) else {
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
        // A refresh of a record slurmctld plans on is not harmless: a job it allocates the
        // record to in between is requeued by the DRAIN (22.05, 24.11), and waits minutes to start
        // again. So a record is refreshed at once only after a reload seen since this replica
        // resumed it; one resumed before this replica led waits for a reload seen here or
        // for evidence: a schedulable job left waiting.
        let generation = view.config_generation;
        let stuck = (signals.demand.oldest_submit)
            .is_some_and(|t| unix_seconds(obs.now) - t as f64 >= STUCK_AFTER_SECS);
        let reloaded: Vec<bool> = (0..view.ordinals.len())
            .map(|i| {
                generation.is_some_and(|g| match self.resumed_under.get(&records.wanted.name(i)) {
                    Some(&then) => then != g,
                    None => self.first_seen.is_some_and(|f| f != g) || stuck,
                })
            })
            .collect();
        let d = decide::decide(
            &view.ordinals,
            current,
            obs.target.status_replicas,
            &reloaded,
        );
        let name = |i: &usize| records.wanted.name(*i);
        let now = unix_seconds(obs.now) as i64;
        let early = (view.lead)
            .map(|lead| {
                // Asked within a lead: coming up (or failing, which slurmctld handles).
                let asked = (0..view.ordinals.len())
                    .filter(|i| (self.powered_up.get(&name(i))).is_some_and(|&at| now - at < lead));
                let skip: Vec<usize> = d.refresh.iter().copied().chain(asked).collect();
                decide::ahead(&view.ordinals, now, lead, &skip)
            })
            .unwrap_or_default();
        let reason = match d.replicas.cmp(&current) {
            std::cmp::Ordering::Greater => Reason::ScaleUp,
            std::cmp::Ordering::Less => Reason::ScaleDown,
            _ if obs.target.status_replicas != Some(current) => Reason::Stabilizing,
            _ => Reason::Steady,
        };
        let mut steps = d.steps;
        let power_up: Vec<String> = early.power_up.iter().map(name).collect();
        let for_jobs = planned_jobs(&early.jobs, now);
        if !power_up.is_empty() {
            steps.push(format!(
                "power up {} planned record(s) one boot ahead ({}s with the margin) of {for_jobs}",
                power_up.len(),
                view.lead.unwrap_or_default(),
            ));
        }
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
            revisit: early.next.map(unix_time),
            effects: Some(Arc::new(PlannedMoves {
                power_up,
                for_jobs,
                next_power_up: early.next,
                resume: d.resume.iter().map(name).collect(),
                drain: d.drain.iter().map(name).collect(),
                refresh: d.refresh.iter().map(name).collect(),
                retire: view.pod_names(&d.retire),
                unrequested: d.extra.len() as u64,
                generation,
            })),
            unsatisfiable_jobs: signals.demand.unsatisfiable_jobs,
            no_nodeset_jobs: signals.demand.no_nodeset_jobs,
            active: view.ordinals.iter().any(|o| o.power == Power::Busy),
            ..Plan::default()
        }
    }
}

/// The jobs records are powered up for, as steps and Events say them: `job 12 (slurmctld
/// plans its start in 95 s)`.
fn planned_jobs(jobs: &[(u64, i64)], now: i64) -> String {
    const SHOWN: usize = 3;
    let mut said: Vec<String> = (jobs.iter().take(SHOWN))
        .map(|&(job, start)| match start - now {
            s if s > 0 => format!("job {job} (slurmctld plans its start in {s} s)"),
            s => format!("job {job} (its planned start passed {} s ago)", -s),
        })
        .collect();
    if jobs.len() > SHOWN {
        said.push(format!("{} more job(s)", jobs.len() - SHOWN));
    }
    said.join(", ")
}

/// What following slurmctld's plan does besides replicas.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct PlannedMoves {
    /// Powered-down records to power up ahead of the job slurmctld plans on them.
    power_up: Vec<String>,
    /// The jobs they are for, as said.
    for_jobs: String,
    /// When the next planned record is due to be powered up (unix seconds).
    next_power_up: Option<i64>,
    /// NodeSet pods, by name, to go first on this plan's scale-in: the pods of the nodes
    /// slurmctld powers down.
    retire: Vec<String>,
    /// Slurm nodes to resume: their pod is gone, so slurmctld may plan on them again.
    resume: Vec<String>,
    /// Slurm nodes to drain while their pod waits to be retired.
    drain: Vec<String>,
    /// Slurm nodes to refresh, DRAIN then RESUME (records slurmctld stopped planning on when
    /// it loaded its configuration again).
    refresh: Vec<String>,
    /// Pods this plan adds that Slurm did not ask for (free ordinals below a wanted one,
    /// which the NodeSet creates first).
    unrequested: u64,
    /// The configuration generation the plan was made on
    /// ([`slurmscale_exporter::model::Diag::config_generation`]).
    generation: Option<(i64, u64)>,
}

/// Records refreshed after a reload, records drained while their pod waits to go, records
/// whose pod is gone resumed, then the pods of nodes slurmctld powers down marked to go.
impl Effects for PlannedMoves {
    fn moves(&self) -> Vec<Move> {
        let mut moves = Vec::new();
        if !self.refresh.is_empty() {
            let refresh = Write::Refresh("refresh after slurmctld loaded its configuration");
            let note = "refreshed {targets} (DRAIN, RESUME): slurmctld loaded its configuration again, after which it plans on a resumed record only once refreshed";
            moves.push(Move::new(refresh, self.refresh.clone(), "Refresh", note));
        }
        let drain = Write::Drain("retiring: its pod goes once no other pod is starting");
        let drained = "drained {targets} until its pod is retired: slurmctld powered it down, and would otherwise plan on it while the pod lingers";
        moves.extend(Move::each(drain, &self.drain, "Drain", drained));
        let resumed = "resumed {targets}: its pod is gone, so slurmctld may plan on it again";
        moves.extend(Move::each(Write::Resume, &self.resume, "Resume", resumed));
        if !self.power_up.is_empty() {
            let note = format!(
                "powered up {{targets}} one boot ahead of {}: slurmctld planned them for it, and the node is to be up when it starts rather than the job waiting a boot then",
                self.for_jobs
            );
            moves.push(Move::new(
                Write::PowerUp,
                self.power_up.clone(),
                "PowerUp",
                &note,
            ));
        }
        if !self.retire.is_empty() {
            let note = "pod(s) {targets} go first: slurmctld powers their nodes down";
            moves.push(Move::new(
                Write::MarkPods,
                self.retire.clone(),
                "Retire",
                note,
            ));
        }
        moves
    }
}
