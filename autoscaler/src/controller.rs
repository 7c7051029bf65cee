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
use slurmscale_exporter::model::demand::{Demand, Shape};
use slurmscale_exporter::signals::{PartitionSignals, Untrusted, partition_signals};
use slurmscale_exporter::snapshot::ClusterSnapshot;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::actuator::{Actuator, Kubernetes, Target};
use crate::colocation::{self, ColocationBounds, ColocationHistory, PoolNode, SlurmNode};
use crate::crd::NodeSetAutoscaler;
use crate::error::{Error, Result};
use crate::leader::Leadership;
use crate::metrics::AutoscalerMetrics;
use crate::policy::{Bounds, Decision, History, Reason, Signals, decide};
use crate::slurm_nodes::SlurmNodeWriter;
use slurmscale_exporter::k8s::ledger::Owner;
use slurmscale_exporter::k8s::watch::KubeSource;
use slurmscale_exporter::model::{NodeBase, NodeFlags};

/// Where "now" comes from: the wall clock, or the demo's simulated one.
pub type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

pub fn wall_clock() -> Clock {
    Arc::new(SystemTime::now)
}

#[derive(Clone)]
pub struct ControllerConfig {
    /// Reconcile at least this often even without news.
    pub resync: Duration,
    /// Slurm data older than this is stale: no scale-down.
    pub stale_after: Duration,
    /// Every autoscaler in dry run (`--dry-run`).
    pub dry_run: bool,
    pub clock: Clock,
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
    colocation: ColocationHistory,
    /// When the last decision may come out differently on the same inputs.
    revisit: Option<SystemTime>,
}

/// What colocated autoscalers need besides Slurm demand.
#[derive(Default)]
pub struct ColocationSources {
    /// The GenericNode ledger and Node capacity.
    pub kube: Option<KubeSource>,
    /// Per Slurm cluster, what drains and resumes its nodes.
    pub writers: BTreeMap<String, SlurmNodeWriter>,
}

pub struct Controller<K: Kubernetes = Actuator> {
    actuator: K,
    colocation: ColocationSources,
    autoscalers: Store<NodeSetAutoscaler>,
    clusters: BTreeMap<String, watch::Receiver<Arc<ClusterSnapshot>>>,
    leadership: Leadership,
    cfg: ControllerConfig,
    entries: Mutex<HashMap<String, Entry>>,
    pub metrics: Arc<Mutex<AutoscalerMetrics>>,
}

impl<K: Kubernetes> Controller<K> {
    pub fn new(
        actuator: K,
        autoscalers: Store<NodeSetAutoscaler>,
        clusters: BTreeMap<String, watch::Receiver<Arc<ClusterSnapshot>>>,
        leadership: Leadership,
        cfg: ControllerConfig,
        colocation: ColocationSources,
    ) -> Self {
        Self {
            actuator,
            colocation,
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

    /// The earliest time a decision may change with nothing new from Slurm or Kubernetes
    /// (a stabilization window or an idle timeout ends): reconciling then, and on every new
    /// input, is all it takes to decide as if reconciling without pause.
    pub fn next_revisit(&self) -> Option<SystemTime> {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter_map(|e| e.revisit)
            .min()
    }

    pub async fn reconcile_all(&self) {
        let leader = self.leadership.is_leader();
        self.metrics
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .leader = leader;
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
                        row.last_decision = Some((self.cfg.clock)());
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

        if let Some(col) = &spec.colocation {
            return self
                .reconcile_colocated(nsa, entry, &target, col, leader, dry_run)
                .await;
        }
        let now = (self.cfg.clock)();
        let bounds = Bounds::from(spec);
        let signals = self.signals(nsa, &target, &bounds, now);
        let mut decision = decide(&bounds, &signals, target.replicas, &entry.history, now);
        entry.revisit = decision.revisit;
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
        let shape = spec
            .node_shape
            .as_ref()
            .map(|s| s.shape())
            .unwrap_or_default();
        let mut merged: Option<PartitionSignals> = None;
        for p in &partitions {
            let s =
                partition_signals(&snap, p, Some(bounds.max), shape, now, self.cfg.stale_after)?;
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

    fn cluster_of(&self, nsa: &NodeSetAutoscaler) -> Option<String> {
        nsa.spec.slurm.cluster.clone().or_else(|| {
            (self.clusters.len() == 1)
                .then(|| self.clusters.keys().next().cloned())
                .flatten()
        })
    }

    /// The colocated path: plan drains, resumes and replicas from the ledger, pending pods
    /// and Slurm, then carry the plan out (leader only) and explain every step.
    async fn reconcile_colocated(
        &self,
        nsa: &NodeSetAutoscaler,
        entry: &mut Entry,
        target: &Target,
        col: &crate::crd::ColocationSpec,
        leader: bool,
        dry_run: bool,
    ) -> Result<()> {
        let namespace = nsa.namespace().unwrap_or_default();
        let now = (self.cfg.clock)();
        let cluster = self
            .cluster_of(nsa)
            .ok_or_else(|| Error::UnknownCluster(String::new()))?;
        let kube = self.colocation.kube.as_ref().ok_or_else(|| {
            Error::Target(
                nsa.name_any(),
                "colocation needs the GenericNode watch".into(),
            )
        })?;
        let ksnap = kube.snapshot();
        let ledger =
            ["genericnodes", "nodes"]
                .iter()
                .try_for_each(|r| match ksnap.watches.get(r) {
                    Some(h) if h.served && h.synced && h.last_error.is_none() => Ok(()),
                    Some(h) => Err(format!(
                        "{r} watch: {}",
                        h.last_error.clone().unwrap_or_else(|| "not listed".into())
                    )),
                    None => Err(format!("{r} not watched")),
                });
        let snap = self
            .clusters
            .get(&cluster)
            .map(|r| r.borrow().clone())
            .ok_or_else(|| Error::UnknownCluster(cluster.clone()))?;
        let partition = nsa
            .spec
            .slurm
            .partitions
            .first()
            .cloned()
            .unwrap_or_else(|| {
                target
                    .partition_annotation
                    .clone()
                    .unwrap_or_else(|| nsa.spec.scale_target_ref.name.clone())
            });
        let pool_name = col.pool.clone().unwrap_or_else(|| cluster.clone());
        let selector = target.selector.as_deref().ok_or_else(|| {
            Error::Target(
                nsa.spec.scale_target_ref.name.clone(),
                "has no status.selector, so its pods cannot be found on the pool's nodes".into(),
            )
        })?;
        let serving = self.actuator.pod_nodes(&namespace, selector).await?;
        let slurm_nodes = snap.nodes.data.clone().unwrap_or_default();
        let running_on = snap
            .jobs
            .data
            .as_ref()
            .map(|j| j.running_on.clone())
            .unwrap_or_default();
        let mut pool = Vec::new();
        for ln in ksnap.ledger.iter().filter(|l| l.cluster == pool_name) {
            // A node whose capacity is unknown cannot be accounted for: left out.
            let Some(cap) = ksnap.capacity.get(&ln.name) else {
                continue;
            };
            // Slurm holds the node while a serving pod of the NodeSet runs there; a node it
            // holds that Slurm does not know (yet) is held but not ours to drain.
            let held = serving.get(&ln.name).copied().unwrap_or(false);
            let known = slurm_nodes.iter().find(|n| n.name == ln.alias);
            let slurm = held.then(|| {
                known.map_or(
                    SlurmNode {
                        unavailable: true,
                        ..Default::default()
                    },
                    |n| {
                        let ours =
                            n.state.drain() && n.reason.starts_with(colocation::DRAIN_PREFIX);
                        let work = running_on.get(n.name.as_str()).copied().unwrap_or_default();
                        SlurmNode {
                            running_jobs: work.jobs,
                            free_at: work.free_at,
                            in_partition: n.partitions.iter().any(|p| **p == *partition),
                            busy: n.busy(),
                            alloc_cpus: n.alloc_cpus,
                            drained_by_us: ours,
                            unavailable: (n.state.drain() && !ours)
                                || matches!(
                                    n.state.base,
                                    NodeBase::Down | NodeBase::Error | NodeBase::Future
                                )
                                || n.state.flags.contains(NodeFlags::NOT_RESPONDING),
                        }
                    },
                )
            });
            pool.push(PoolNode {
                k8s_node: ln.name.clone(),
                slurm_node: ln.alias.clone(),
                cpu: cap.get("cpu").unwrap_or(0.0),
                memory: cap.get("memory").unwrap_or(0.0),
                labels: cap.labels.clone(),
                taints: cap.taints.clone(),
                k8s_cpu: ln.held(Owner::Kubernetes, "cpu"),
                k8s_memory: ln.held(Owner::Kubernetes, "memory"),
                slurm,
            });
        }
        let pods = self.actuator.unschedulable_pods(&col.pod_selector).await?;
        let bounds = ColocationBounds {
            min_slurm: col.min_slurm_nodes.into(),
            min_kubernetes: col.min_kubernetes_nodes.into(),
            max_slurm: col.max_slurm_nodes.map_or(u64::MAX, u64::from),
            cooldown: Duration::from_secs(col.cooldown_seconds.unwrap_or(300).into()),
            release_idle: col.release_idle_slurm_nodes,
        };
        let signals: Signals = partition_signals(
            &snap,
            &partition,
            None,
            Shape::default(),
            now,
            self.cfg.stale_after,
        );
        let plan = colocation::plan(
            &bounds,
            &pool,
            &pods,
            &signals,
            ledger,
            target.replicas,
            &entry.colocation,
            now,
        );

        let acting = leader && !dry_run;
        if acting {
            let version = snap
                .api_version
                .ok_or_else(|| Error::UnknownCluster(cluster.clone()))?;
            let writer = self
                .colocation
                .writers
                .get(&cluster)
                .ok_or_else(|| Error::UnknownCluster(cluster.clone()))?;
            for node in &plan.drain {
                writer
                    .drain(version, node, "capacity for Kubernetes")
                    .await?;
                self.actuator
                    .event(
                        nsa,
                        false,
                        "Drain",
                        format!("drained {node} for Kubernetes (reason prefix slurmscale:)"),
                    )
                    .await;
            }
            for node in &plan.resume {
                writer.resume(version, node).await?;
                self.actuator
                    .event(
                        nsa,
                        false,
                        "Resume",
                        format!("resumed {node}: Slurm has demand again"),
                    )
                    .await;
            }
            if !plan.release.is_empty() {
                let marked = self
                    .actuator
                    .mark_pods_to_go(&namespace, target.selector.as_deref(), &plan.release)
                    .await?;
                self.actuator
                    .event(
                        nsa,
                        false,
                        "Release",
                        format!(
                            "handing {} to Kubernetes ({marked} pod(s) marked to go first)",
                            plan.release.join(", ")
                        ),
                    )
                    .await;
            }
            if plan.replicas != target.replicas {
                self.actuator
                    .scale(
                        &namespace,
                        &nsa.spec.scale_target_ref,
                        plan.replicas,
                        target.resource_version.as_deref(),
                    )
                    .await?;
                let up = plan.replicas > target.replicas;
                self.actuator
                    .event(
                        nsa,
                        false,
                        if up { "ScaledUp" } else { "ScaledDown" },
                        plan.steps.join("; "),
                    )
                    .await;
                entry.last_scale = Some(Time(Timestamp::now()));
            }
            entry.colocation.record(&plan, now);
        } else if leader
            && dry_run
            && (!plan.drain.is_empty()
                || !plan.resume.is_empty()
                || plan.replicas != target.replicas)
        {
            self.actuator
                .event(
                    nsa,
                    false,
                    "DryRun",
                    format!("would: {}", plan.steps.join("; ")),
                )
                .await;
        }
        if plan.frozen != entry.frozen && leader {
            let (warning, reason) = if plan.frozen {
                (true, "Frozen")
            } else {
                (false, "Unfrozen")
            };
            self.actuator
                .event(nsa, warning, reason, plan.steps.join("; "))
                .await;
        }
        entry.frozen = plan.frozen;
        entry.last_error = None;

        let draining: Vec<String> = pool
            .iter()
            .filter(|n| n.slurm.as_ref().is_some_and(|s| s.drained_by_us && s.busy))
            .map(|n| n.slurm_node.clone())
            .chain(plan.drain.iter().cloned())
            .collect();
        let held = pool.iter().filter(|n| n.slurm.is_some()).count() as u64;
        {
            let mut m = self.metrics.lock().unwrap_or_else(|e| e.into_inner());
            let row = m.rows.entry(key(nsa)).or_default();
            row.cluster = cluster.clone();
            row.namespace = namespace.clone();
            row.name = nsa.name_any();
            row.target = nsa.spec.scale_target_ref.name.clone();
            row.desired = plan.replicas;
            row.current = if acting {
                plan.replicas
            } else {
                target.replicas
            };
            row.recommendation = plan.replicas;
            row.frozen = plan.frozen;
            row.reason = if plan.frozen {
                Reason::Frozen
            } else if plan.replicas > target.replicas {
                Reason::ScaleUp
            } else if plan.replicas < target.replicas {
                Reason::ScaleDown
            } else {
                Reason::Steady
            };
            if acting && plan.replicas > target.replicas {
                row.scale_ups += 1;
                row.last_scale_up = Some(now);
            } else if acting && plan.replicas < target.replicas {
                row.scale_downs += 1;
                row.last_scale_down = Some(now);
            }
            row.colocation = Some(crate::metrics::ColocationRow {
                pool: pool.len() as u64,
                slurm: held,
                draining: draining.len() as u64,
                kubernetes_need: plan.kubernetes_need,
                slurm_need: plan.slurm_need,
            });
        }
        if leader {
            let moved = !(plan.drain.is_empty()
                && plan.resume.is_empty()
                && plan.release.is_empty()
                && plan.grow == 0);
            let reason = if plan.frozen {
                "Frozen"
            } else if moved {
                "Rebalance"
            } else {
                "Balanced"
            };
            let message = plan.steps.join("; ");
            let same = entry
                .reported
                .as_ref()
                .is_some_and(|(r, _, msg, _)| *r == plan.replicas && *msg == message);
            if !same {
                entry.reported = Some((
                    plan.replicas,
                    crate::policy::Reason::Steady,
                    message.clone(),
                    Time(Timestamp::now()),
                ));
            }
            let time = entry
                .reported
                .as_ref()
                .map(|r| r.3.clone())
                .unwrap_or(Time(Timestamp::now()));
            let frozen_msg = if plan.frozen {
                message.as_str()
            } else {
                "ledger and Slurm data are fresh"
            };
            let reclaiming = if draining.is_empty() {
                "no Slurm node is being drained for Kubernetes".to_string()
            } else {
                format!(
                    "drained for Kubernetes, waiting for their jobs to end: {}",
                    draining.join(", ")
                )
            };
            let mut status = json!({
                "currentReplicas": if acting { plan.replicas } else { target.replicas },
                "desiredReplicas": plan.replicas,
                "lastDecision": {"replicas": plan.replicas, "reason": reason, "message": message, "time": time},
                "observedGeneration": nsa.metadata.generation,
                "conditions": [
                    condition(nsa, "Ready", true, "TargetFound", "the target is found and scalable"),
                    condition(nsa, "Frozen", plan.frozen, if plan.frozen { "DataUntrusted" } else { "DataFresh" }, frozen_msg),
                    condition(nsa, "Limited", false, "WithinBounds", "within bounds"),
                    condition(nsa, "Reclaiming", !draining.is_empty(),
                        if draining.is_empty() { "NoDrains" } else { "WaitingForJobs" },
                        &reclaiming),
                ],
                "colocation": {
                    "poolNodes": pool.len(),
                    "slurmNodes": held,
                    "kubernetesNeedNodes": plan.kubernetes_need,
                    "slurmNeedNodes": plan.slurm_need,
                    "draining": draining,
                    "lastPlan": plan.steps,
                },
            });
            if let Some(t) = &entry.last_scale {
                status["lastScaleTime"] = json!(t);
            }
            self.write_status(nsa, entry, status).await?;
        }
        Ok(())
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
        row.record(d, current, signals);
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
