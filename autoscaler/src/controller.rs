//! The control loop: whenever a Slurm snapshot is published (every poll, seconds apart) or
//! a NodeSetAutoscaler changes, each autoscaler is reconciled — read the target, compute the
//! signals of its partitions, ask the policy, and, if this replica leads, actuate and report.
//! Reading and deciding happen on every replica (so a standby's metrics are warm); writing
//! happens only on the leader.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::reflector::Store;
use serde_json::{Value, json};
use slurmscale_exporter::model::demand::Demand;
use slurmscale_exporter::signals::{PartitionSignals, Untrusted, partition_signals};
use slurmscale_exporter::snapshot::ClusterSnapshot;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::actuator::{Actuator, Target};
use crate::crd::NodeSetAutoscaler;
use crate::error::{Error, Result};
use crate::leader::Leadership;
use crate::metrics::AutoscalerMetrics;
use crate::policy::{Bounds, Decision, History, Reason, Signals, decide};

#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// Reconcile at least this often even without news.
    pub resync: Duration,
    /// Slurm data older than this is stale: no scale-down.
    pub stale_after: Duration,
    /// Every autoscaler in dry run (`--dry-run`).
    pub dry_run: bool,
}

/// Per-autoscaler memory between reconciles.
#[derive(Default)]
struct Entry {
    history: History,
    /// The last decision reported (replicas, reason, message) and when.
    reported: Option<(u64, Reason, String, Time)>,
    last_status: Option<Value>,
    last_scale: Option<Time>,
    frozen: bool,
    /// The last error reported as an Event, so each is reported once.
    last_error: Option<String>,
    retry_at: Option<Instant>,
    failures: u32,
}

pub struct Controller {
    actuator: Actuator,
    autoscalers: Store<NodeSetAutoscaler>,
    clusters: BTreeMap<String, watch::Receiver<Arc<ClusterSnapshot>>>,
    leadership: Leadership,
    cfg: ControllerConfig,
    entries: Mutex<HashMap<String, Entry>>,
    pub metrics: Arc<Mutex<AutoscalerMetrics>>,
}

impl Controller {
    pub fn new(
        actuator: Actuator,
        autoscalers: Store<NodeSetAutoscaler>,
        clusters: BTreeMap<String, watch::Receiver<Arc<ClusterSnapshot>>>,
        leadership: Leadership,
        cfg: ControllerConfig,
    ) -> Self {
        Self {
            actuator,
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

    pub async fn reconcile_all(&self) {
        let leader = self.leadership.is_leader();
        self.metrics
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .leader = leader;
        let live: Vec<Arc<NodeSetAutoscaler>> = self.autoscalers.state();
        let keys: Vec<String> = live.iter().map(|n| key(n)).collect();
        {
            let mut m = self.metrics.lock().unwrap_or_else(|e| e.into_inner());
            m.rows.retain(|k, _| keys.contains(k));
            self.entries
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|k, _| keys.contains(k));
        }
        for nsa in live {
            let k = key(&nsa);
            let mut entry = self
                .entries
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&k)
                .unwrap_or_default();
            if entry.retry_at.is_none_or(|t| Instant::now() >= t) {
                let started = Instant::now();
                let result = self.reconcile(&nsa, &mut entry, leader).await;
                let took = started.elapsed();
                {
                    let mut m = self.metrics.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some(row) = m.rows.get_mut(&k) {
                        row.decision_seconds = took.as_secs_f64();
                        row.last_decision = Some(SystemTime::now());
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
                    Err(e) => self.failed(&nsa, &mut entry, &e, leader).await,
                }
            }
            self.entries
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(k, entry);
        }
    }

    /// Backs off from transient errors (429, 5xx, transport) exponentially; reports each
    /// distinct error once.
    async fn failed(&self, nsa: &NodeSetAutoscaler, entry: &mut Entry, e: &Error, leader: bool) {
        entry.failures += 1;
        if e.is_transient() {
            let pause = Duration::from_millis(500 * 2u64.pow(entry.failures.min(6)));
            entry.retry_at = Some(Instant::now() + pause);
        }
        let message = e.to_string();
        if entry.last_error.as_deref() != Some(message.as_str()) {
            warn!(autoscaler = %key(nsa), kind = e.kind(), error = %message, "reconcile failed");
            if leader {
                self.actuator
                    .event(nsa, true, "ReconcileFailed", message.clone())
                    .await;
            }
            entry.last_error = Some(message);
        }
    }

    async fn reconcile(
        &self,
        nsa: &NodeSetAutoscaler,
        entry: &mut Entry,
        leader: bool,
    ) -> Result<()> {
        let namespace = nsa.namespace().unwrap_or_default();
        let spec = &nsa.spec;
        let dry_run = spec.dry_run || self.cfg.dry_run;
        let target = match self.actuator.read(&namespace, &spec.scale_target_ref).await {
            Ok(t) => t,
            Err(e) => {
                let reason = if e.kind() == "not_found" {
                    "TargetNotFound"
                } else {
                    "TargetUnavailable"
                };
                if leader {
                    let cond = vec![condition(nsa, "Ready", false, reason, &e.to_string())];
                    self.write_status(nsa, entry, json!({ "conditions": cond }))
                        .await?;
                }
                return Err(e);
            }
        };
        if target.scaling_mode.as_deref() == Some("DaemonSet") {
            let message = "the NodeSet uses scalingMode DaemonSet: one pod per matching node, replicas are ignored; it cannot be autoscaled";
            if leader && entry.last_error.as_deref() != Some(message) {
                self.actuator
                    .event(nsa, true, "DaemonSetScalingMode", message.into())
                    .await;
                entry.last_error = Some(message.into());
            }
            if leader {
                let cond = vec![condition(
                    nsa,
                    "Ready",
                    false,
                    "DaemonSetScalingMode",
                    message,
                )];
                self.write_status(
                    nsa,
                    entry,
                    json!({ "conditions": cond, "currentReplicas": target.replicas }),
                )
                .await?;
            }
            return Ok(());
        }

        let now = SystemTime::now();
        let bounds = Bounds::from(spec);
        let signals = self.signals(nsa, &target, &bounds, now);
        let mut decision = decide(&bounds, &signals, target.replicas, &entry.history, now);
        entry.history.record(
            &decision,
            now,
            bounds.down_window.max(bounds.up_window) + Duration::from_secs(60),
        );

        let mut current = target.replicas;
        if decision.replicas != current && leader && !dry_run {
            match self
                .actuator
                .scale(
                    &namespace,
                    &spec.scale_target_ref,
                    decision.replicas,
                    target.resource_version.as_deref(),
                )
                .await
            {
                Ok(()) => {}
                Err(e) if e.is_conflict() => {
                    // Someone else changed the scale since we read it: decide again on fresh data.
                    let fresh = self
                        .actuator
                        .read(&namespace, &spec.scale_target_ref)
                        .await?;
                    decision = decide(&bounds, &signals, fresh.replicas, &entry.history, now);
                    current = fresh.replicas;
                    if decision.replicas != current {
                        self.actuator
                            .scale(
                                &namespace,
                                &spec.scale_target_ref,
                                decision.replicas,
                                fresh.resource_version.as_deref(),
                            )
                            .await?;
                    }
                }
                Err(e) => return Err(e),
            }
            if decision.replicas != current {
                let up = decision.replicas > current;
                info!(autoscaler = %key(nsa), from = current, to = decision.replicas, reason = %decision.reason, "{}", decision.message);
                self.actuator
                    .event(
                        nsa,
                        false,
                        if up { "ScaledUp" } else { "ScaledDown" },
                        decision.message.clone(),
                    )
                    .await;
                entry.last_scale = Some(Time(Timestamp::now()));
                let mut m = self.metrics.lock().unwrap_or_else(|e| e.into_inner());
                let row = m.rows.entry(key(nsa)).or_default();
                if up {
                    row.scale_ups += 1;
                    row.last_scale_up = Some(now);
                } else {
                    row.scale_downs += 1;
                    row.last_scale_down = Some(now);
                }
                current = decision.replicas;
            }
        } else {
            debug!(autoscaler = %key(nsa), replicas = decision.replicas, reason = %decision.reason, "{}", decision.message);
        }

        if decision.frozen != entry.frozen && leader {
            let (warning, reason) = if decision.frozen {
                (true, "Frozen")
            } else {
                (false, "Unfrozen")
            };
            self.actuator
                .event(nsa, warning, reason, decision.message.clone())
                .await;
        }
        if leader && dry_run && decision.replicas != current {
            let changed = entry
                .reported
                .as_ref()
                .is_none_or(|(r, ..)| *r != decision.replicas);
            if changed {
                self.actuator
                    .event(
                        nsa,
                        false,
                        "DryRun",
                        format!(
                            "would set {current} → {}: {}",
                            decision.replicas, decision.message
                        ),
                    )
                    .await;
            }
        }
        entry.frozen = decision.frozen;
        entry.last_error = None;
        self.record_metrics(nsa, &decision, current, &signals);
        if leader {
            let status = self.status_for(nsa, entry, &decision, current);
            self.write_status(nsa, entry, status).await?;
        }
        Ok(())
    }

    /// The Slurm side for the target's partitions, merged.
    fn signals(
        &self,
        nsa: &NodeSetAutoscaler,
        target: &Target,
        bounds: &Bounds,
        now: SystemTime,
    ) -> Signals {
        let spec = &nsa.spec;
        let cluster = match (&spec.slurm.cluster, self.clusters.len()) {
            (Some(c), _) => c.clone(),
            (None, 1) => self.clusters.keys().next().cloned().unwrap_or_default(),
            (None, _) => {
                return Err(Untrusted::UnknownPartition(
                    "no spec.slurm.cluster, and several clusters are read".into(),
                ));
            }
        };
        let Some(rx) = self.clusters.get(&cluster) else {
            return Err(Untrusted::UnknownPartition(format!(
                "cluster {cluster:?} is not read by this autoscaler"
            )));
        };
        let snap = rx.borrow().clone();
        let partitions = if spec.slurm.partitions.is_empty() {
            vec![
                target
                    .partition_annotation
                    .clone()
                    .unwrap_or_else(|| spec.scale_target_ref.name.clone()),
            ]
        } else {
            spec.slurm.partitions.clone()
        };
        let mut merged: Option<PartitionSignals> = None;
        for p in &partitions {
            let s = partition_signals(&snap, p, Some(bounds.max), now, self.cfg.stale_after)?;
            merged = Some(match merged {
                None => s,
                Some(m) => PartitionSignals {
                    busy_nodes: m.busy_nodes + s.busy_nodes,
                    total_nodes: m.total_nodes + s.total_nodes,
                    demand: Demand {
                        nodes: m.demand.nodes + s.demand.nodes,
                        unsatisfiable_jobs: m.demand.unsatisfiable_jobs
                            + s.demand.unsatisfiable_jobs,
                        ..m.demand
                    },
                    as_of: m.as_of.min(s.as_of),
                },
            });
        }
        merged.ok_or_else(|| Untrusted::UnknownPartition(String::new()))
    }

    fn record_metrics(
        &self,
        nsa: &NodeSetAutoscaler,
        d: &Decision,
        current: u64,
        signals: &Signals,
    ) {
        let cluster = nsa.spec.slurm.cluster.clone().or_else(|| {
            (self.clusters.len() == 1)
                .then(|| self.clusters.keys().next().cloned().unwrap_or_default())
        });
        let mut m = self.metrics.lock().unwrap_or_else(|e| e.into_inner());
        let row = m.rows.entry(key(nsa)).or_default();
        row.cluster = cluster.unwrap_or_default();
        row.namespace = nsa.namespace().unwrap_or_default();
        row.name = nsa.name_any();
        row.target = nsa.spec.scale_target_ref.name.clone();
        row.desired = d.replicas;
        row.current = current;
        row.recommendation = d.recommendation;
        row.frozen = d.frozen;
        row.limited = d.limited;
        row.unsatisfiable = d.unsatisfiable_jobs;
        row.reason = d.reason;
        row.frozen_because = signals.as_ref().err().map(|u| u.kind());
    }

    fn status_for(
        &self,
        nsa: &NodeSetAutoscaler,
        entry: &mut Entry,
        d: &Decision,
        current: u64,
    ) -> Value {
        let same = entry.reported.as_ref().is_some_and(|(r, why, msg, _)| {
            *r == d.replicas && *why == d.reason && *msg == d.message
        });
        if !same {
            entry.reported = Some((
                d.replicas,
                d.reason,
                d.message.clone(),
                Time(Timestamp::now()),
            ));
        }
        let (replicas, reason, message, time) = entry.reported.clone().unwrap_or((
            d.replicas,
            d.reason,
            d.message.clone(),
            Time(Timestamp::now()),
        ));
        let frozen_msg = if d.frozen {
            d.message.as_str()
        } else {
            "Slurm data is fresh"
        };
        let limited_msg = if d.limited {
            format!(
                "busy nodes and demand ({}) exceed maxReplicas {}",
                d.recommendation, nsa.spec.max_replicas
            )
        } else if d.unsatisfiable_jobs > 0 {
            format!(
                "{} pending job(s) need more nodes than maxReplicas {} and are not chased",
                d.unsatisfiable_jobs, nsa.spec.max_replicas
            )
        } else {
            "within bounds".into()
        };
        let mut status = json!({
            "currentReplicas": current,
            "desiredReplicas": d.replicas,
            "lastDecision": {"replicas": replicas, "reason": reason.as_str(), "message": message, "time": time},
            "observedGeneration": nsa.metadata.generation,
            "conditions": [
                condition(nsa, "Ready", true, "TargetFound", "the target is found and scalable"),
                condition(nsa, "Frozen", d.frozen, if d.frozen { "SlurmDataUntrusted" } else { "SlurmDataFresh" }, frozen_msg),
                condition(nsa, "Limited", d.limited || d.unsatisfiable_jobs > 0, if d.limited { "MaxReplicas" } else if d.unsatisfiable_jobs > 0 { "UnsatisfiableJobs" } else { "WithinBounds" }, &limited_msg),
            ],
        });
        if let Some(t) = &entry.last_scale {
            status["lastScaleTime"] = json!(t);
        }
        status
    }

    /// Patches the status when it differs from what was last written.
    async fn write_status(
        &self,
        nsa: &NodeSetAutoscaler,
        entry: &mut Entry,
        status: Value,
    ) -> Result<()> {
        if entry.last_status.as_ref() == Some(&status) {
            return Ok(());
        }
        self.actuator.status(nsa, status.clone()).await?;
        entry.last_status = Some(status);
        Ok(())
    }
}

fn key(nsa: &NodeSetAutoscaler) -> String {
    format!("{}/{}", nsa.namespace().unwrap_or_default(), nsa.name_any())
}

/// A condition, keeping the previous transition time when the status did not change.
fn condition(
    nsa: &NodeSetAutoscaler,
    type_: &str,
    status: bool,
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
        last_transition_time: previous.unwrap_or(Time(Timestamp::now())),
        observed_generation: nsa.metadata.generation,
    }
}
