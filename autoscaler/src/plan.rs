//! The vocabulary between planners and the controller. A planner ([`crate::policy::decide`]
//! for a NodeSet that follows Slurm demand, [`crate::colocation::plan`] for a pool shared
//! with Kubernetes, [`crate::slurm_planned`] for slurmctld's own plan) is a pure function
//! that returns one [`Plan`]: the replicas and node records every policy sets, why, and the
//! effects only that policy has, in a type of its own ([`Effects`]). The controller's
//! executor carries a plan out and its reporter explains it, so a new policy is a new planner
//! behind a [`crate::controller::Policy`], and an [`Effects`] variant if it does more than
//! set replicas.

use std::fmt;
use std::time::SystemTime;

/// What a planner intends for one NodeSetAutoscaler now, and why.
#[derive(Clone, Debug, PartialEq)]
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
    /// There is work (busy nodes or schedulable demand).
    pub active: bool,
    /// With the same inputs, the plan may differ from this time on (a stabilization window
    /// or the idle timeout ends); `None` when only new inputs can change it.
    pub revisit: Option<SystemTime>,
    /// Node records to create for the target's pods ([`crate::records`]), or why the
    /// missing ones cannot be made now.
    pub records: Result<Vec<crate::records::Record>, String>,
    /// What this plan's policy does besides replicas and records.
    pub effects: Effects,
}

/// The effects only one policy has, each in its own type.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Effects {
    /// A NodeSet following demand sets replicas and nothing else.
    #[default]
    None,
    /// A colocated pool moves nodes between Slurm and Kubernetes.
    Pool(PoolMoves),
    /// slurmctld's plan: the pods of the nodes it powers down go, records are refreshed.
    SlurmPlanned(PlannedMoves),
}

/// A colocated pool's moves ([`crate::colocation`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PoolMoves {
    /// Slurm nodes to drain for Kubernetes (with our reason prefix).
    pub drain: Vec<String>,
    /// Slurm nodes we drained earlier, to resume: Slurm has demand again.
    pub resume: Vec<String>,
    /// Kubernetes nodes whose NodeSet pod is to go first on the next scale-in (drained and
    /// empty: slurm-operator then removes exactly those).
    pub release: Vec<String>,
    /// What each side needs, for the pool's status and metrics.
    pub needs: Needs,
}

/// What following slurmctld's plan does besides replicas ([`crate::slurm_planned`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PlannedMoves {
    /// NodeSet pods, by name, to go first on this plan's scale-in: the pods of the nodes
    /// slurmctld powers down.
    pub retire: Vec<String>,
    /// Slurm nodes to resume: their pod is gone, so slurmctld may plan on them again.
    pub resume: Vec<String>,
    /// Slurm nodes to drain while their pod waits to be retired.
    pub drain: Vec<String>,
    /// Slurm nodes to refresh, DRAIN then RESUME (records slurmctld stopped planning on when
    /// it loaded its configuration again), and the configuration generation
    /// ([`slurmscale_exporter::model::Diag::config_generation`]) they are refreshed for:
    /// `None` when nothing is to be refreshed now.
    pub refresh: Option<(Vec<String>, (i64, u64))>,
    /// Pods this plan adds that Slurm did not ask for (free ordinals below a wanted one,
    /// which the NodeSet creates first).
    pub unrequested: u64,
}

impl Effects {
    /// Whether carrying them out changes anything.
    fn changes(&self) -> bool {
        match self {
            Self::None => false,
            Self::Pool(m) => !(m.drain.is_empty() && m.resume.is_empty() && m.release.is_empty()),
            Self::SlurmPlanned(m) => !(m.retire.is_empty() && m.resume.is_empty()),
        }
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
            active: false,
            revisit: None,
            records: Ok(Vec::new()),
            effects: Effects::None,
        }
    }
}

/// Nodes each side of a colocated pool needs now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    /// Nodes for Kubernetes' unschedulable pods that the pool could take.
    pub kubernetes: u64,
    /// Slurm's busy nodes plus its pending demand.
    pub slurm: u64,
}

impl Plan {
    /// The steps as one line.
    pub fn message(&self) -> String {
        self.steps.join("; ")
    }

    /// Whether carrying the plan out changes anything, starting from `current` replicas.
    pub fn changes(&self, current: u64) -> bool {
        self.replicas != current || self.effects.changes()
    }

    /// A colocated pool's moves (none for another policy's plan).
    pub fn pool(&self) -> &PoolMoves {
        static NONE: PoolMoves = PoolMoves {
            drain: Vec::new(),
            resume: Vec::new(),
            release: Vec::new(),
            needs: Needs {
                kubernetes: 0,
                slurm: 0,
            },
        };
        match &self.effects {
            Effects::Pool(m) => m,
            _ => &NONE,
        }
    }

    /// What following slurmctld's plan does besides replicas (nothing for another policy).
    pub fn slurm_planned(&self) -> &PlannedMoves {
        static NONE: PlannedMoves = PlannedMoves {
            retire: Vec::new(),
            resume: Vec::new(),
            drain: Vec::new(),
            refresh: None,
            unrequested: 0,
        };
        match &self.effects {
            Effects::SlurmPlanned(m) => m,
            _ => &NONE,
        }
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
