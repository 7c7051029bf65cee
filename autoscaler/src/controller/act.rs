//! Stage three: the executor, the one place a [`Plan`] becomes writes — drains and resumes
//! of Slurm nodes, pods marked to go, the scale patch — and the Events that say so. It is
//! the only code that looks at leadership and dry run: a standby writes nothing, a dry run
//! says what it would do. A scale patch that meets a concurrent change (409) fails here and
//! the loop observes and plans again; the node moves already made are not made twice.
//!
//! Pods are marked to go first, and the replicas that remove them dropped, in two reconciles
//! at least [`MARKS_SETTLE`] apart: slurm-operator picks the pods a scale-in removes from its
//! own pod cache, which its NodeSet watch does not wait for, so a drop sent just after the
//! marks may be carried out on pods it still sees unmarked — another pod goes, perhaps one
//! running jobs, and the node meant for Kubernetes stays Slurm's. A plan may change its mind
//! in between; a mark it lets go before its scale-in is taken back, or that pod would go
//! first at some later, unrelated scale-in.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use slurmscale_exporter::slurm::ApiVersion;
use tracing::{debug, info, warn};

use super::{Observation, Seam};
use crate::actuator::{Kubernetes, PodsBy};
use crate::crd::NodeSetAutoscaler;
use crate::error::{Error, Result};
use crate::plan::{Move, Plan, Write};
use crate::pool::PoolReader;
use crate::records;
use crate::slurm_nodes::SlurmNodes;

/// How far a plan is carried out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The leader: every effect.
    Act,
    /// The leader in dry run: Events say what would happen, nothing changes.
    DryRun,
    /// Not the leader: nothing is written.
    Standby,
}

impl Mode {
    pub fn of(leader: bool, dry_run: bool) -> Self {
        match (leader, dry_run) {
            (false, _) => Self::Standby,
            (true, true) => Self::DryRun,
            (true, false) => Self::Act,
        }
    }
}

/// What carrying a plan out did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Replicas the target had when last read.
    pub before: u64,
    /// Replicas it has now.
    pub replicas: u64,
    /// The plan was carried out (not a standby, not a dry run).
    pub acted: bool,
    /// The scale-in waits for pods marked to go to settle: look again then.
    pub again_at: Option<SystemTime>,
    /// The node and pod writes made now, each with its target (a move made before and not
    /// yet seen in an observation is not made again, and is not here).
    pub written: Vec<(Write, String)>,
}

impl Outcome {
    /// `Some(true)` after a scale-up, `Some(false)` after a scale-down.
    pub fn scaled(&self) -> Option<bool> {
        (self.replicas != self.before).then_some(self.replicas > self.before)
    }
}

/// What the executor last announced (a freeze, a dry run's intention) and asked for (node
/// records), so each is said once.
#[derive(Debug, Default)]
pub struct Announced {
    frozen: bool,
    /// Its effects, so a dry run reports each intention once.
    intent: Option<Intent>,
    /// When node records were last asked for, and the last failure about them (or the reload
    /// they need) said in an Event.
    records_asked: Option<std::time::SystemTime>,
    records_failure: Option<String>,
    /// Records were made that slurmctld allocates only once it reloads
    /// ([`records::reload_after_creating`]); when a reload was last asked for.
    reload_due: bool,
    reload_asked: Option<std::time::SystemTime>,
    /// `reload_due` has been taken from the status a previous leader wrote.
    reload_read: bool,
    /// The jobs that fit no NodeSet, as last said in an Event.
    no_nodeset_jobs: u64,
}

impl Announced {
    /// Records were made that wait for slurmctld to reload (the status says so).
    pub fn reload_pending(&self) -> bool {
        self.reload_due
    }
}

/// How long a mark has before the scale-in that relies on it: slurm-operator's pod cache
/// follows the API server within milliseconds when idle, but a second was once too little on
/// a loaded machine (the real operator removed an unmarked pod). Two seconds is the
/// autoscaler's poll, so the scale-in still comes at the next reconcile.
pub const MARKS_SETTLE: Duration = Duration::from_secs(2);

/// Evictions on a node are asked for again at most this often while the plan wants the node
/// emptied: a pod a PodDisruptionBudget keeps is retried, and the node is not listed again on
/// every reconcile before the ledger shows it empty.
const EVICT_AGAIN: Duration = Duration::from_secs(10);

/// Missing node records are asked for again no sooner than this: slurmctld 22.05 answers
/// `scontrol create` with success even when it refuses, so only later polls tell, and
/// asking at every poll would only repeat the same refusal.
const RECORDS_RETRY: std::time::Duration = std::time::Duration::from_secs(30);

#[derive(Debug, PartialEq)]
struct Intent {
    replicas: u64,
    moves: Vec<Move>,
}

impl Intent {
    fn of(plan: &Plan) -> Self {
        Self {
            replicas: plan.replicas,
            moves: plan.moves(),
        }
    }
}

/// The node moves carried out, and when. A move is not made (nor announced) again in the same
/// reconcile, when a 409 sends it round again; nor, for a Slurm node write, until slurmrestd
/// has confirmed the nodes after it was sent: a plan made on nodes read before the write
/// cannot show it, and would repeat every DRAIN or RESUME at each reconcile until the next
/// poll does (each an `scontrol` run on 22.05, each an Event); nor, for a pod mark, while
/// the plan still asks for it: the scale-in that follows it waits for the mark's age.
#[derive(Debug, Default)]
pub struct Moved(BTreeMap<(Write, String), SystemTime>);

impl Moved {
    /// Keeps only the moves the plan made on `obs` cannot know of yet: those of this
    /// reconcile, Slurm node writes sent no earlier than the nodes were confirmed, and the
    /// marks `moves` still makes. Returns the marks it no longer makes, which no scale-in
    /// has spent: to be taken back (and sent again if asked for later).
    fn forget_seen(
        &mut self,
        obs: &Observation,
        moves: &[Move],
    ) -> Vec<((Write, String), SystemTime)> {
        let asked = |write: Write, target: &String| {
            (moves.iter()).any(|m| m.write == write && m.targets.contains(target))
        };
        let mut let_go = Vec::new();
        self.0.retain(|(write, target), at| {
            let keep = *at == obs.now
                || (write.is_slurm() && obs.slurm_nodes_at.is_none_or(|seen| seen <= *at))
                || (*write == Write::EvictPodsOn
                    && obs.now.duration_since(*at).unwrap_or_default() < EVICT_AGAIN)
                || (write.is_mark() && asked(*write, target));
            if !keep && write.is_mark() {
                let_go.push(((*write, target.clone()), *at));
            }
            keep
        });
        let_go
    }

    /// The marks `moves` relied on have been spent by the scale-in that followed them.
    fn spend_marks(&mut self, moves: &[Move]) {
        for m in moves.iter().filter(|m| m.write.is_mark()) {
            for t in &m.targets {
                self.0.remove(&(m.write, t.clone()));
            }
        }
    }

    /// When the newest of the marks `moves` relies on is old enough for a scale-in
    /// ([`MARKS_SETTLE`]); `None` when none is that young.
    fn marks_settle_at(&self, moves: &[Move], now: SystemTime) -> Option<SystemTime> {
        let marks = moves.iter().filter(|m| m.write.is_mark());
        let written = marks.flat_map(|m| m.targets.iter().map(move |t| (m.write, t.clone())));
        written
            .filter_map(|key| self.0.get(&key))
            .map(|at| *at + MARKS_SETTLE)
            .filter(|settled| *settled > now)
            .max()
    }

    /// Whether `write` to `target` is one of them (after [`Moved::forget_seen`]).
    fn made(&self, write: Write, target: &str) -> bool {
        self.0.contains_key(&(write, target.to_string()))
    }
}

/// Carries `plan` out as far as `mode` allows; returns what was done.
pub async fn act<K: Kubernetes, S: SlurmNodes, P: PoolReader>(
    seam: &Seam<K, S, P>,
    nsa: &NodeSetAutoscaler,
    obs: &Observation,
    plan: &Plan,
    mode: Mode,
    memory: &mut Announced,
    moved: &mut Moved,
) -> Result<Outcome> {
    let executor = Executor {
        seam,
        nsa,
        obs,
        plan,
    };
    let before = obs.target.replicas;
    let unchanged = Outcome {
        before,
        replicas: before,
        acted: false,
        again_at: None,
        written: Vec::new(),
    };
    if mode == Mode::Act {
        if !memory.reload_read {
            // A leader that made records may have gone before the reload they need.
            memory.reload_read = true;
            memory.reload_due |= nsa
                .status
                .as_ref()
                .and_then(|s| s.node_records.as_ref())
                .is_some_and(|r| r.reload_pending);
        }
        executor.keep_records(memory).await;
        executor.reload_for_records(memory).await;
    }
    let outcome = match mode {
        Mode::Act => executor.apply(moved).await?,
        Mode::DryRun => {
            announce(&seam.kubernetes, nsa, before, plan, memory).await;
            unchanged
        }
        Mode::Standby => unchanged,
    };
    if outcome.scaled().is_none() {
        debug!(autoscaler = %super::key(nsa), replicas = plan.replicas, reason = %plan.reason, "{}", plan.message());
    }
    if mode != Mode::Standby && plan.frozen != memory.frozen {
        let (warning, reason) = if plan.frozen {
            (true, "Frozen")
        } else {
            (false, "Unfrozen")
        };
        seam.kubernetes
            .event(nsa, warning, reason, plan.message())
            .await;
    }
    // Jobs that fit no NodeSet of the partitions wait for ever: said once, and again only
    // when their number changes (not while the data cannot be trusted).
    if mode != Mode::Standby && !plan.frozen && plan.no_nodeset_jobs != memory.no_nodeset_jobs {
        if plan.no_nodeset_jobs > 0 {
            let note = format!(
                "{} pending job(s) of its partitions fit no NodeSet of them (node shape, GPUs or \
                 features): not demand; Slurm keeps them pending",
                plan.no_nodeset_jobs
            );
            seam.kubernetes
                .event(nsa, true, "NoNodeSetFits", note)
                .await;
        }
        memory.no_nodeset_jobs = plan.no_nodeset_jobs;
    }
    memory.frozen = plan.frozen;
    memory.intent = Some(Intent::of(plan));
    Ok(outcome)
}

/// One autoscaler's plan being carried out through the seam: its node records, its node
/// moves and its scale, each write said in an Event.
struct Executor<'a, K, S, P> {
    seam: &'a Seam<K, S, P>,
    nsa: &'a NodeSetAutoscaler,
    obs: &'a Observation,
    plan: &'a Plan,
}

impl<K: Kubernetes, S: SlurmNodes, P: PoolReader> Executor<'_, K, S, P> {
    /// Every effect, in the order that keeps the pool consistent: drains and resumes, then the
    /// pods to go first, then — once those marks have settled — the scale that removes them (or
    /// adds nodes). The scale carries the resource version read: a concurrent change fails it
    /// with a 409.
    async fn apply(&self, moved: &mut Moved) -> Result<Outcome> {
        let moves = self.plan.moves();
        let written = self.move_nodes(&moves, moved).await?;
        let namespace = self.nsa.metadata.namespace.clone().unwrap_or_default();
        let kube = &self.seam.kubernetes;
        if self.plan.replicas < self.obs.target.replicas
            && let Some(at) = moved.marks_settle_at(&moves, self.obs.now)
        {
            debug!(autoscaler = %super::key(self.nsa), to = self.plan.replicas, "the scale-in waits for its pods' marks to reach slurm-operator");
            return Ok(Outcome {
                before: self.obs.target.replicas,
                replicas: self.obs.target.replicas,
                acted: true,
                again_at: Some(at),
                written,
            });
        }
        if self.plan.replicas != self.obs.target.replicas {
            let version = self.obs.target.resource_version.as_deref();
            kube.scale(
                &namespace,
                &self.nsa.spec.scale_target_ref,
                self.plan.replicas,
                version,
            )
            .await?;
            if self.plan.replicas < self.obs.target.replicas {
                moved.spend_marks(&moves);
            }
        }
        let outcome = Outcome {
            before: self.obs.target.replicas,
            replicas: self.plan.replicas,
            acted: true,
            again_at: None,
            written,
        };
        if let Some(up) = outcome.scaled() {
            info!(autoscaler = %super::key(self.nsa), from = outcome.before, to = self.plan.replicas, reason = %self.plan.reason, "{}", self.plan.message());
            let reason = if up { "ScaledUp" } else { "ScaledDown" };
            kube.event(self.nsa, false, reason, self.plan.message())
                .await;
        }
        Ok(outcome)
    }

    /// The plan's node moves (whichever policy made them), each said in an Event and logged.
    async fn move_nodes(&self, moves: &[Move], moved: &mut Moved) -> Result<Vec<(Write, String)>> {
        let let_go = moved.forget_seen(self.obs, moves);
        if let Err(e) = self.unmark(&let_go).await {
            moved.0.extend(let_go);
            return Err(e);
        }
        let mut written = Vec::new();
        for m in moves {
            let todo: Vec<String> = (m.targets.iter())
                .filter(|t| !moved.made(m.write, t))
                .cloned()
                .collect();
            if todo.is_empty() {
                continue;
            }
            let mut marked = 0;
            match m.write {
                Write::Drain(why) => {
                    for node in &todo {
                        self.drain(node, why).await?;
                    }
                }
                Write::Resume => {
                    for node in &todo {
                        self.resume(node).await?;
                    }
                }
                Write::Requeue(why) => {
                    let (cluster, version) = self.slurm()?;
                    for node in &todo {
                        self.seam.slurm.down(&cluster, version, node, why).await?;
                    }
                }
                Write::Refresh(why) => {
                    for node in &todo {
                        self.drain(node, why).await?;
                        self.resume(node).await?;
                    }
                }
                Write::PowerUp => {
                    let (cluster, version) = self.slurm()?;
                    for node in &todo {
                        self.seam.slurm.power_up(&cluster, version, node).await?;
                    }
                }
                Write::MarkPodsOn => marked = self.mark_to_go(PodsBy::Node(&todo)).await?,
                Write::MarkPods => marked = self.mark_to_go(PodsBy::Name(&todo)).await?,
                Write::Reserve | Write::Unreserve => {
                    for node in &todo {
                        let on = m.write == Write::Reserve;
                        self.seam.kubernetes.reserve_node(node, on).await?;
                    }
                }
                Write::EvictPodsOn => {
                    for node in &todo {
                        let e = self.evict(node).await?;
                        marked += e.evicted;
                        if !e.blocked.is_empty() {
                            let note = format!(
                                "cannot evict {} from {node} yet: a PodDisruptionBudget allows no disruption now; asked again at the next look",
                                e.blocked.join(", ")
                            );
                            warn!(autoscaler = %super::key(self.nsa), "{note}");
                            self.say("EvictionBlocked", note).await;
                        }
                    }
                }
            }
            if m.write == Write::EvictPodsOn && marked == 0 {
                // Nothing left to evict (the ledger has yet to show the node empty), or only
                // pods a budget keeps, said above: no Event for it.
                moved
                    .0
                    .extend(todo.into_iter().map(|t| ((m.write, t), self.obs.now)));
                continue;
            }
            let note = (m.note)
                .replace("{targets}", &todo.join(", "))
                .replace("{marked}", &marked.to_string())
                .replace("{pods}", &marked.to_string());
            info!(autoscaler = %super::key(self.nsa), "{note}");
            self.say(m.event, note).await;
            written.extend(todo.iter().map(|t| (m.write, t.clone())));
            moved
                .0
                .extend(todo.into_iter().map(|t| ((m.write, t), self.obs.now)));
        }
        Ok(written)
    }

    /// Creates the node records the plan lists. A failure is said in an Event (once until it
    /// changes) and never holds up the scaling that follows: the records are asked for again
    /// after [`RECORDS_RETRY`].
    async fn keep_records(&self, memory: &mut Announced) {
        let Ok(records) = &self.plan.records else {
            return;
        };
        let (Some(version), false) = (self.obs.slurm_api, records.is_empty()) else {
            return;
        };
        if !retry_due(memory.records_asked, self.obs.now) {
            return;
        }
        memory.records_asked = Some(self.obs.now);
        let cluster = self.obs.cluster.clone().unwrap_or_default();
        let mut made = Vec::new();
        for r in records {
            if let Err(e) = self.seam.slurm.create(&cluster, version, r).await {
                let note = format!("cannot create the Slurm node record {}: {e}", r.name);
                self.records_failed(memory, "NodeRecordsFailed", note).await;
                break;
            }
            made.push(r.name.as_str());
        }
        if !made.is_empty() {
            memory.reload_due |= self
                .obs
                .records
                .as_ref()
                .is_some_and(|r| records::reload_after_creating(r.kind, version));
            let note = format!(
                "asked slurmctld for {} node record(s) ({}), e.g. {}",
                made.len(),
                made.join(","),
                records[0].conf
            );
            info!(autoscaler = %super::key(self.nsa), "{note}");
            self.seam
                .kubernetes
                .event(self.nsa, false, "NodeRecords", note)
                .await;
        }
    }

    /// Once the records made are there (read back in the partition) and none of the NodeSet's
    /// is powering up (a reload then has tripped Slurm before), has slurmctld reload its
    /// configuration, where the release needs it to allocate new records at all. Asked again
    /// after [`RECORDS_RETRY`] if it fails; the reload's own effect on resumed records is the
    /// refresh the next looks make.
    async fn reload_for_records(&self, memory: &mut Announced) {
        let (true, Some(version), Ok(missing)) =
            (memory.reload_due, self.obs.slurm_api, &self.plan.records)
        else {
            return;
        };
        if !missing.is_empty()
            || self.plan.reload_waits
            || !retry_due(memory.reload_asked, self.obs.now)
        {
            return;
        }
        memory.reload_asked = Some(self.obs.now);
        let cluster = self.obs.cluster.clone().unwrap_or_default();
        let release = self
            .obs
            .slurm_release
            .as_deref()
            .unwrap_or("of unknown release");
        match self.seam.slurm.reconfigure(&cluster, version).await {
            Ok(()) => {
                memory.reload_due = false;
                let note = format!(
                    "had slurmctld reload its configuration, so that Slurm {release} puts the new CLOUD records to use (24.11 allocates none of them, 26.05 powers none up, until it reloads)"
                );
                info!(autoscaler = %super::key(self.nsa), "{note}");
                self.seam
                    .kubernetes
                    .event(self.nsa, false, "Reconfigured", note)
                    .await;
            }
            Err(e) => {
                let note = format!(
                    "cannot have slurmctld reload its configuration ({e}): until it does, Slurm {release} may not use the new CLOUD records; run `scontrol reconfigure`"
                );
                self.records_failed(memory, "ReconfigureFailed", note).await;
            }
        }
    }

    /// A failure to make records (or the reload they need): logged each time, said in a Warning
    /// Event once until it changes.
    async fn records_failed(&self, memory: &mut Announced, reason: &str, note: String) {
        warn!(autoscaler = %super::key(self.nsa), "{note}");
        if memory.records_failure.as_deref() != Some(note.as_str()) {
            self.seam
                .kubernetes
                .event(self.nsa, true, reason, note.clone())
                .await;
            memory.records_failure = Some(note);
        }
    }

    /// The Slurm cluster and the API version its slurmrestd speaks.
    fn slurm(&self) -> Result<(String, ApiVersion)> {
        let cluster = self.obs.cluster.clone().unwrap_or_default();
        let version = self.obs.slurm_api.ok_or_else(|| {
            Error::NoSlurm(format!(
                "slurmrestd of cluster {cluster:?} has not said which API version it speaks"
            ))
        })?;
        Ok((cluster, version))
    }

    async fn drain(&self, node: &str, why: &str) -> Result<()> {
        let (cluster, version) = self.slurm()?;
        self.seam.slurm.drain(&cluster, version, node, why).await
    }

    async fn resume(&self, node: &str) -> Result<()> {
        let (cluster, version) = self.slurm()?;
        self.seam.slurm.resume(&cluster, version, node).await
    }

    /// Marks the target's pods (by node or by name) to go first; how many were marked.
    async fn mark_to_go(&self, pods: PodsBy<'_>) -> Result<usize> {
        let namespace = self.nsa.metadata.namespace.clone().unwrap_or_default();
        let selector = self.obs.target.selector.as_deref();
        self.seam
            .kubernetes
            .mark_pods_to_go(&namespace, selector, pods)
            .await
    }

    /// Evicts the pods `shares.evictablePods` selects on Kubernetes node `node`.
    async fn evict(&self, node: &str) -> Result<crate::actuator::Evicted> {
        let col = self.nsa.spec.colocation.as_ref();
        let evictable = col
            .and_then(|c| c.shares.as_ref())
            .map(|s| s.evictable_pods.clone())
            .unwrap_or_default();
        self.seam.kubernetes.evict_pods_on(node, &evictable).await
    }

    /// Takes back marks the plan let go before a scale-in spent them, saying so.
    async fn unmark(&self, let_go: &[((Write, String), SystemTime)]) -> Result<()> {
        let namespace = self.nsa.metadata.namespace.clone().unwrap_or_default();
        let selector = self.obs.target.selector.as_deref();
        for write in [Write::MarkPodsOn, Write::MarkPods] {
            let targets: Vec<String> = (let_go.iter())
                .filter(|((w, _), _)| *w == write)
                .map(|((_, t), _)| t.clone())
                .collect();
            if targets.is_empty() {
                continue;
            }
            let which = match write {
                Write::MarkPodsOn => PodsBy::Node(&targets),
                _ => PodsBy::Name(&targets),
            };
            let kube = &self.seam.kubernetes;
            let n = kube.unmark_pods(&namespace, selector, which).await?;
            let note = format!(
                "{}: no longer to go, the plan changed before replicas dropped; the mark to go first taken back from {n} pod(s)",
                targets.join(", ")
            );
            info!(autoscaler = %super::key(self.nsa), "{note}");
            self.say("Unmarked", note).await;
        }
        Ok(())
    }

    async fn say(&self, reason: &str, note: String) {
        self.seam
            .kubernetes
            .event(self.nsa, false, reason, note)
            .await;
    }
}

/// Whether something last asked for at `asked` (if ever) may be asked for again at `now`.
fn retry_due(asked: Option<std::time::SystemTime>, now: std::time::SystemTime) -> bool {
    asked
        .and_then(|t| now.duration_since(t).ok())
        .is_none_or(|since| since >= RECORDS_RETRY)
}

/// A dry run says once what it would do, each time the intention changes.
async fn announce<K: Kubernetes>(
    kube: &K,
    nsa: &NodeSetAutoscaler,
    current: u64,
    plan: &Plan,
    memory: &Announced,
) {
    if !plan.changes(current) || memory.intent.as_ref() == Some(&Intent::of(plan)) {
        return;
    }
    let note = if plan.replicas != current {
        format!(
            "would set {current} → {}: {}",
            plan.replicas,
            plan.message()
        )
    } else {
        format!("would: {}", plan.message())
    };
    kube.event(nsa, false, "DryRun", note).await;
}
