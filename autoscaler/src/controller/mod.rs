//! The control loop, one shape for every NodeSetAutoscaler, run whenever a Slurm snapshot is
//! published (every poll, seconds apart) or an autoscaler changes, and at least every resync:
//!
//! 1. [`observe`] gathers every input into one plain [`Observation`]: the target, the Slurm
//!    signals of its partitions, what the autoscaler's policy reads besides (for a colocated
//!    pool the ledger, its nodes and the pods that want room) and the time;
//! 2. [`plan`] hands it to the policy the spec picks ([`Policy`]), a pure planner with its own
//!    memory, which returns one [`Plan`](crate::plan::Plan) of effects with reasons;
//! 3. [`act`] carries the plan out through the seam — the only place writes happen, and so
//!    the only place dry run and leadership are looked at. A scale that meets a concurrent
//!    change (409) goes back to 1 once, on fresh data;
//! 4. [`report`] fills the typed status, conditions and metrics from the plan and what was
//!    done.
//!
//! Observing and planning happen on every replica (so a standby's metrics are warm); writing
//! happens only on the leader. Everything outside the process — Kubernetes, Slurm node
//! writes, the pool's reads and the clock — comes through [`Seam`], so the unit tests and the
//! demo run this very loop on [`crate::fakes::Fake`].

mod act;
mod boot;
mod observation;
mod observe;
mod plan;
pub(crate) mod report;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use kube::ResourceExt;
use kube::runtime::reflector::Store;
use slurmscale_exporter::signals::cluster_of;
use slurmscale_exporter::snapshot::ClusterSnapshot;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::actuator::{Actuator, Kubernetes, Target};
use crate::crd::NodeSetAutoscaler;
use crate::error::{Error, Result};
use crate::leader::Leadership;
use crate::metrics::AutoscalerMetrics;
use crate::pool::{KubePool, PoolReader};
use crate::slurm_nodes::{SlurmNodeWriters, SlurmNodes};

pub use act::{MARKS_SETTLE, Mode, Outcome};
pub use boot::BootTime;
pub use observation::{Input, Inputs, Observation, OwnInput, Reading};
pub use plan::{OwnCondition, Policy, PolicyStatus, Refusal};

/// Where "now" comes from: the wall clock, or a simulation's.
pub type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

pub fn wall_clock() -> Clock {
    Arc::new(SystemTime::now)
}

/// Everything the controller reads and writes besides its Slurm snapshots, and its clock.
pub struct Seam<K = Actuator, S = SlurmNodeWriters, P = KubePool> {
    /// The target, its scale, pods' deletion cost, status and Events.
    pub kubernetes: K,
    /// Drains and resumes of Slurm nodes.
    pub slurm: S,
    /// The ledger, Nodes and pods of colocated pools.
    pub pool: P,
    /// Every time the controller uses: decisions, status timestamps, back-off.
    pub clock: Clock,
}

#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// Reconcile at least this often even without news.
    pub resync: Duration,
    /// Slurm data older than this is stale: nothing changes.
    pub stale_after: Duration,
    /// Every autoscaler in dry run (`--dry-run`).
    pub dry_run: bool,
    /// Autoscalers reconciled at once (1: one after another, in order, as the simulations
    /// need to be reproducible).
    pub concurrency: usize,
}

/// Per-autoscaler memory between reconciles, one part per stage.
#[derive(Default)]
struct Entry {
    /// The policy the spec picks, with what it remembers.
    policy: Option<Box<dyn Policy>>,
    announced: act::Announced,
    /// Node moves made, until the data a plan is made on shows them.
    moved: act::Moved,
    reported: report::Reported,
    /// The last error reported as an Event, so each is reported once.
    last_error: Option<String>,
    retry_at: Option<SystemTime>,
    failures: u32,
    /// When the last plan may come out differently on the same inputs.
    revisit: Option<SystemTime>,
    /// The boots seen so far.
    boot: boot::BootClock,
}

pub struct Controller<K = Actuator, S = SlurmNodeWriters, P = KubePool> {
    seam: Seam<K, S, P>,
    autoscalers: Store<NodeSetAutoscaler>,
    clusters: BTreeMap<String, watch::Receiver<Arc<ClusterSnapshot>>>,
    leadership: Leadership,
    cfg: ControllerConfig,
    entries: Mutex<HashMap<String, Entry>>,
    pub metrics: Arc<Mutex<AutoscalerMetrics>>,
}

impl<K: Kubernetes, S: SlurmNodes, P: PoolReader> Controller<K, S, P> {
    pub fn new(
        seam: Seam<K, S, P>,
        autoscalers: Store<NodeSetAutoscaler>,
        clusters: BTreeMap<String, watch::Receiver<Arc<ClusterSnapshot>>>,
        leadership: Leadership,
        cfg: ControllerConfig,
    ) -> Self {
        Self {
            seam,
            autoscalers,
            clusters,
            leadership,
            cfg,
            entries: Mutex::default(),
            metrics: Arc::default(),
        }
    }

    /// Reconciles on every `changed` notification and at least every `resync`, until `stop`.
    pub async fn run(self: Arc<Self>, changed: Arc<Notify>, stop: CancellationToken) {
        let mut tick = tokio::time::interval(self.cfg.resync);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
                _ = changed.notified() => {}
            }
            self.reconcile_all().await;
        }
    }

    /// The earliest time a plan may change with nothing new from Slurm or Kubernetes (a
    /// stabilization window or an idle timeout ends): reconciling then, and on every new
    /// input, is all it takes to decide as if reconciling without pause.
    pub fn next_revisit(&self) -> Option<SystemTime> {
        self.entries().values().filter_map(|e| e.revisit).min()
    }

    fn entries(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn metrics(&self) -> MutexGuard<'_, AutoscalerMetrics> {
        self.metrics.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now(&self) -> SystemTime {
        (self.seam.clock)()
    }

    /// The Slurm cluster an autoscaler reads: the one it names, else the only one polled.
    fn cluster_of<'a>(&'a self, nsa: &'a NodeSetAutoscaler) -> Option<&'a str> {
        cluster_of(
            nsa.spec.slurm.cluster.as_deref(),
            self.clusters.keys().map(String::as_str),
        )
    }

    pub async fn reconcile_all(&self) {
        let leader = self.leadership.is_leader();
        self.metrics().leader = leader;
        // Autoscalers naming a Slurm cluster this process does not poll belong to another
        // slurmscale (one per cluster is a supported layout): left alone, not reported on.
        let live: Vec<Arc<NodeSetAutoscaler>> = self
            .autoscalers
            .state()
            .into_iter()
            .filter(|n| {
                n.spec
                    .slurm
                    .cluster
                    .as_ref()
                    .is_none_or(|c| self.clusters.contains_key(c))
            })
            .collect();
        let keys: Vec<String> = live.iter().map(|n| key(n)).collect();
        self.metrics().rows.retain(|k, _| keys.contains(k));
        self.entries().retain(|k, _| keys.contains(k));
        // A reconcile may wait on the API server (its writes; the reads of a target that is
        // not watched): one after another, 200 autoscalers took longer than a poll interval,
        // so the last of them decided on data a poll old and later than its interval. They
        // are independent (each has its own entry, taken out while it runs), so up to
        // `concurrency` run at once.
        futures::stream::iter(live)
            .for_each_concurrent(self.cfg.concurrency.max(1), |nsa| async move {
                let k = key(&nsa);
                let mut entry = self.entries().remove(&k).unwrap_or_default();
                if entry.retry_at.is_none_or(|t| self.now() >= t) {
                    self.reconcile_timed(&nsa, &mut entry, leader).await;
                }
                self.entries().insert(k, entry);
            })
            .await;
    }

    /// One reconcile, timed and counted; failures back off.
    async fn reconcile_timed(&self, nsa: &NodeSetAutoscaler, entry: &mut Entry, leader: bool) {
        // The reconcile's own cost, in real time whatever the clock says.
        let started = Instant::now();
        let result = self.reconcile(nsa, entry, leader).await;
        {
            let mut m = self.metrics();
            if let Some(row) = m.rows.get_mut(&key(nsa)) {
                row.decision_seconds = started.elapsed().as_secs_f64();
                row.last_decision = Some(self.now());
            }
            if let Err(e) = &result {
                *m.errors.entry(e.kind()).or_default() += 1;
            }
        }
        match result {
            Ok(()) => {
                entry.failures = 0;
                entry.retry_at = None;
            }
            Err(e) => self.failed(nsa, entry, &e, leader).await,
        }
    }

    /// Observe → plan → act → report.
    async fn reconcile(
        &self,
        nsa: &NodeSetAutoscaler,
        entry: &mut Entry,
        leader: bool,
    ) -> Result<()> {
        let now = self.now();
        let kube = &self.seam.kubernetes;
        let spec = &nsa.spec;
        let current = entry.policy.take();
        let was = current.as_ref().map(|p| p.name());
        let policy = entry.policy.insert(plan::for_spec(spec, current));
        if was.is_some_and(|was| was != policy.name())
            && let Some(row) = self.metrics().rows.get_mut(&key(nsa))
        {
            row.forget_policy();
        }
        let mode = Mode::of(leader, spec.dry_run || self.cfg.dry_run);
        let mut conflicts = 0;
        let (obs, plan, outcome) = loop {
            let target = match observe::target(kube, nsa).await {
                Ok(t) => t,
                Err(e) => {
                    if leader {
                        let status = report::unreachable(nsa, &e, now);
                        report::write(kube, nsa, &mut entry.reported, status).await?;
                    }
                    return Err(e);
                }
            };
            if let Some(refusal) = plan::refusal(policy.as_ref(), spec, &target) {
                let memory = (&mut entry.last_error, &mut entry.reported);
                return self.refuse(nsa, memory, leader, &target, refusal).await;
            }
            // Jobs Slurm has planned are booted for one boot before they can start (the boot
            // time as known before this observation).
            let lead = spec
                .planned_jobs
                .lead(entry.boot.current(spec.boot_time_seconds));
            let mut obs = observe::observe(self, nsa, policy.as_ref(), (target, lead), now).await?;
            let (replicas, set) = (obs.target.replicas, spec.boot_time_seconds);
            obs.boot = entry.boot.observe(now, replicas, obs.registered, set);
            let plan = plan::plan(policy.as_ref(), spec, &obs);
            entry.revisit = plan.revisit;
            policy.remember(spec, &plan, now);
            match act::act(
                &self.seam,
                nsa,
                &obs,
                &plan,
                mode,
                &mut entry.announced,
                &mut entry.moved,
            )
            .await
            {
                // Someone changed the scale since we read it: observe and plan again, once.
                Err(e) if e.is_conflict() && conflicts == 0 => conflicts += 1,
                // The target read (from the watch) but not written: said in the status as a
                // target that cannot be read is.
                Err(e @ (Error::Kube(_) | Error::KubeTimeout(..))) if !e.is_conflict() => {
                    if leader {
                        let status = report::unreachable(nsa, &e, now);
                        report::write(kube, nsa, &mut entry.reported, status).await?;
                    }
                    return Err(e);
                }
                acted => break (obs, plan, acted?),
            }
        };
        if outcome.acted {
            policy.acted(&plan, &outcome, now);
        }
        if let Some(at) = outcome.again_at {
            entry.revisit = Some(entry.revisit.map_or(at, |r| r.min(at)));
        }
        entry.last_error = None;
        let done = (&plan, &outcome);
        report::metrics(&mut self.metrics(), nsa, &obs, done, policy.as_ref());
        if leader {
            let pending = entry.announced.reload_pending();
            let done = (&obs, &plan, &outcome);
            let status = report::status(nsa, done, policy.as_ref(), &mut entry.reported, pending);
            report::write(kube, nsa, &mut entry.reported, status).await?;
        }
        Ok(())
    }

    /// A target that cannot be autoscaled at all: said once as an Event, and in the status.
    async fn refuse(
        &self,
        nsa: &NodeSetAutoscaler,
        (last_error, reported): (&mut Option<String>, &mut report::Reported),
        leader: bool,
        target: &Target,
        refusal: plan::Refusal,
    ) -> Result<()> {
        if !leader {
            return Ok(());
        }
        let kube = &self.seam.kubernetes;
        let why = refusal.why.as_str();
        if last_error.as_deref() != Some(why) {
            kube.event(nsa, true, refusal.reason, why.into()).await;
            *last_error = Some(why.into());
        }
        let status = report::refused(nsa, &refusal, target.replicas, self.now());
        report::write(kube, nsa, reported, status).await
    }

    /// Backs off from transient errors (429, 5xx, transport) exponentially; reports each
    /// distinct error once.
    async fn failed(&self, nsa: &NodeSetAutoscaler, entry: &mut Entry, e: &Error, leader: bool) {
        entry.failures += 1;
        if e.is_transient() {
            let pause = Duration::from_millis(500 * 2u64.pow(entry.failures.min(6)));
            entry.retry_at = Some(self.now() + pause);
        }
        let message = e.to_string();
        if entry.last_error.as_deref() != Some(message.as_str()) {
            warn!(autoscaler = %key(nsa), kind = e.kind(), error = %message, "reconcile failed");
            if leader {
                self.seam
                    .kubernetes
                    .event(nsa, true, "ReconcileFailed", message.clone())
                    .await;
            }
            entry.last_error = Some(message);
        }
    }
}

fn key(nsa: &NodeSetAutoscaler) -> String {
    format!("{}/{}", nsa.namespace().unwrap_or_default(), nsa.name_any())
}
