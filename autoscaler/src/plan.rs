//! The vocabulary between planners and the controller. A planner (each policy's, in its room
//! under `controller/plan/`: following Slurm demand, sharing a pool with Kubernetes,
//! following slurmctld's own plan) is a pure function
//! that returns one [`Plan`]: the replicas and node records every policy sets, why, and the
//! effects only that policy has, in a type of its own kept in its room. The executor sees
//! those effects only as [`Move`]s — a few kinds of write it knows how to make and say — so
//! it has no branch per policy, and a policy reads its own effects back by type.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use slurmscale_exporter::signals::{PartitionSignals, Untrusted};

use crate::crd::NodeSetAutoscalerSpec;

/// What a planner intends for one NodeSetAutoscaler now, and why.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Replicas the target should have once the plan is carried out.
    pub replicas: u64,
    /// Why, in one word (`status.lastDecision.reason`).
    pub reason: Reason,
    /// Why, in words: one line per step (Events and the status join them with "; ").
    pub steps: Vec<String>,
    /// The data cannot be trusted: nothing changes.
    pub frozen: bool,
    /// What busy nodes and demand ask for, before stabilization and step limits.
    pub recommendation: u64,
    /// Busy nodes plus demand exceed the most replicas allowed.
    pub limited: bool,
    /// Jobs too large to ever fit: reported, not chased.
    pub unsatisfiable_jobs: u64,
    /// Of those, the jobs no NodeSet of the partitions can run (said in an Event).
    pub no_nodeset_jobs: u64,
    /// There is work (busy nodes or schedulable demand).
    pub active: bool,
    /// With the same inputs, the plan may differ from this time on (a stabilization window
    /// or the idle timeout ends); `None` when only new inputs can change it.
    pub revisit: Option<SystemTime>,
    /// Node records to create for the target's pods ([`crate::records`]), or why the
    /// missing ones cannot be made now.
    pub records: Result<Vec<crate::records::Record>, String>,
    /// What this plan's policy does besides replicas and records (`None`: nothing).
    pub effects: Option<Arc<dyn Effects>>,
    /// slurmctld must not reload its configuration now, though records made wait for it (a
    /// node of the target is powering up: a reload then has tripped Slurm before).
    pub reload_waits: bool,
}

/// The effects only one policy has, in its own type.
pub trait Effects: Any + fmt::Debug + Send + Sync {
    /// The writes they are made of, in the order they are to be made.
    fn moves(&self) -> Vec<Move>;
}

/// Writes of one kind, said in one Event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Move {
    pub write: Write,
    /// What is written: Slurm node names, Kubernetes node names or pod names, as
    /// [`Write`] says.
    pub targets: Vec<String>,
    /// The Event's reason.
    pub event: &'static str,
    /// The Event's note: `{targets}` stands for the targets written (a target already
    /// written in the same reconcile is not written again), `{marked}` for the number of
    /// pods marked or evicted (`{pods}` too).
    pub note: String,
}

/// The kinds of write a plan's effects are made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Write {
    /// DRAIN Slurm nodes, with this reason (after our prefix).
    Drain(&'static str),
    /// RESUME Slurm nodes.
    Resume,
    /// DOWN Slurm nodes with this reason: slurmctld requeues their jobs (planned only where
    /// every job there may be requeued).
    Requeue(&'static str),
    /// DRAIN Slurm nodes with this reason, then RESUME them (only where slurmctld plans on
    /// none of them: the DRAIN requeues a job allocated there meanwhile).
    Refresh(&'static str),
    /// POWER_UP Slurm nodes (powered-down CLOUD records): slurmctld asks for them as it
    /// does for a job it starts on them, and powers them down again after `SuspendTime` idle.
    PowerUp,
    /// Mark the target's pods on these Kubernetes nodes to go first on the next scale-in.
    MarkPodsOn,
    /// Mark these pods of the target, by name, to go first on the next scale-in.
    MarkPods,
    /// Reserve these Kubernetes nodes for the NodeSet's pods: our taint, which they
    /// tolerate, keeps new pods off.
    Reserve,
    /// Lift that reservation.
    Unreserve,
    /// Evict the pods `shares.evictablePods` selects on these Kubernetes nodes (Eviction
    /// API: PodDisruptionBudgets kept, lowest priority first).
    EvictPodsOn,
}

impl Write {
    /// A write to Slurm's nodes (the others are to Kubernetes' pods).
    pub fn is_slurm(self) -> bool {
        matches!(
            self,
            Self::Drain(_) | Self::Resume | Self::Requeue(_) | Self::Refresh(_) | Self::PowerUp
        )
    }

    /// A deletion cost set on pods, for the next scale-in.
    pub fn is_mark(self) -> bool {
        matches!(self, Self::MarkPodsOn | Self::MarkPods)
    }
}

impl Move {
    pub fn new(write: Write, targets: Vec<String>, event: &'static str, note: &str) -> Self {
        Self {
            write,
            targets,
            event,
            note: note.to_string(),
        }
    }

    /// One move per target: one Event each.
    pub fn each(write: Write, targets: &[String], event: &'static str, note: &str) -> Vec<Self> {
        targets
            .iter()
            .map(|t| Self::new(write, vec![t.clone()], event, note))
            .collect()
    }
}

impl Default for Plan {
    fn default() -> Self {
        Self {
            replicas: 0,
            reason: Reason::default(),
            steps: Vec::new(),
            frozen: false,
            recommendation: 0,
            limited: false,
            unsatisfiable_jobs: 0,
            no_nodeset_jobs: 0,
            active: false,
            revisit: None,
            records: Ok(Vec::new()),
            effects: None,
            reload_waits: false,
        }
    }
}

impl Plan {
    /// The steps as one line.
    pub fn message(&self) -> String {
        self.steps.join("; ")
    }

    /// The writes this plan makes besides replicas and records.
    pub fn moves(&self) -> Vec<Move> {
        self.effects.as_ref().map_or_else(Vec::new, |e| e.moves())
    }

    /// Whether carrying the plan out changes anything, starting from `current` replicas.
    pub fn changes(&self, current: u64) -> bool {
        self.replicas != current || !self.moves().is_empty()
    }

    /// This plan's effects, if they are of type `E` (a policy reads its own back).
    pub fn effects<E: Effects>(&self) -> Option<&E> {
        let any: &dyn Any = self.effects.as_deref()?;
        any.downcast_ref()
    }
}

/// The spec's numbers, with defaults applied.
#[derive(Clone, Debug, PartialEq)]
pub struct Bounds {
    pub min: u64,
    pub max: u64,
    pub idle: u64,
    pub idle_timeout: Duration,
    pub up_step: Option<u64>,
    pub up_window: Duration,
    pub down_step: u64,
    pub down_window: Duration,
}

impl Default for Bounds {
    fn default() -> Self {
        Self {
            min: 0,
            max: 1,
            idle: 0,
            idle_timeout: Duration::from_secs(300),
            up_step: None,
            up_window: Duration::ZERO,
            down_step: 4,
            down_window: Duration::from_secs(300),
        }
    }
}

impl Bounds {
    /// How long the history must reach back for the windows.
    pub fn history_span(&self) -> Duration {
        self.down_window.max(self.up_window) + Duration::from_secs(60)
    }
}

impl From<&NodeSetAutoscalerSpec> for Bounds {
    fn from(s: &NodeSetAutoscalerSpec) -> Self {
        let secs = |v: Option<u32>, default: u64| Duration::from_secs(v.map_or(default, u64::from));
        Self {
            min: s.min_replicas.into(),
            max: u64::from(s.max_replicas).max(s.min_replicas.into()),
            idle: s.idle_replicas.into(),
            idle_timeout: s.idle_timeout(),
            up_step: s.scale_up.max_step.map(|m| u64::from(m).max(1)),
            up_window: secs(s.scale_up.stabilization_window_seconds, 0),
            down_step: s.scale_down.max_step.map_or(4, |m| u64::from(m).max(1)),
            down_window: secs(s.scale_down.stabilization_window_seconds, 300),
        }
    }
}

/// The Slurm side of a decision, or why there is none.
pub type Signals = Result<PartitionSignals, Untrusted>;

/// Unix seconds as a time to look again at ([`Plan::revisit`]).
pub fn unix_time(t: i64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(t.max(0) as u64)
}

/// No change at all: the data cannot be trusted.
pub fn frozen(current: u64, why: impl std::fmt::Display) -> Plan {
    Plan {
        replicas: current,
        recommendation: current,
        reason: Reason::Frozen,
        steps: vec![format!("holding {current}: {why}")],
        frozen: true,
        ..Plan::default()
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// Demand or busy nodes need more replicas.
    ScaleUp,
    /// Less is needed, and has been for the whole down window.
    ScaleDown,
    /// Nothing ran or waited for the idle timeout: down to `idleReplicas`.
    Idle,
    /// Replicas are what they should be.
    #[default]
    Steady,
    /// A change is wanted but the stabilization window or the idle timeout says wait.
    Stabilizing,
    /// The data cannot be trusted: nothing changes.
    Frozen,
    /// A colocated pool moves capacity (drains, releases, resumes or grows).
    Rebalance,
    /// A colocated pool stays as it is.
    Balanced,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ScaleUp => "ScaleUp",
            Self::ScaleDown => "ScaleDown",
            Self::Idle => "Idle",
            Self::Steady => "Steady",
            Self::Stabilizing => "Stabilizing",
            Self::Frozen => "Frozen",
            Self::Rebalance => "Rebalance",
            Self::Balanced => "Balanced",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
