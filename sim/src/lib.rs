//! The simulated world slurmscale's replays and its demo run in: a simulated slurmctld
//! ([`cluster`]) and what slurmrestd shows of it ([`view`]), a simulated Kubernetes side
//! ([`kube`]), workloads ([`trace`] with [`swf`] and [`sacct`], pod logs in [`pods`], the demo's
//! generator in [`workload`]), and the real controller of `slurmscale-autoscaler` run on its
//! in-memory seam inside them. Only the binary, benches and tests use it; the production
//! autoscaler never does.
//!
//! `slurmscale simulate` replays a job trace through a simulated Slurm partition under each
//! scaling policy a site could run, so a site sees what each would have cost it (node-hours)
//! and its users (queue wait) on its own history; [`shared`] replays a pool shared with
//! Kubernetes pods; [`demo`] is the cluster `slurmscale demo` shows.
//!
//! Data flows one way: a trace ([`trace`]: [`swf`], [`sacct`]) becomes jobs fitted to a node
//! shape; for each policy [`replay`] has a [`cluster::Cluster`] schedule them while a
//! [`Scaler`] sets its size — slurmscale's real controller ([`builtin`]) or a rival
//! ([`rivals`]); the run's [`Stats`] and timeline become the report ([`report`]). This file is
//! the crate's face: its modules and the types a replay's callers hold.

pub mod builtin;
pub mod cluster;
pub mod colocated;
pub mod demo;
pub mod driver;
pub mod error;
pub mod formats;
pub mod kube;
pub mod nodesets;
pub mod operator;
pub mod pods;
pub mod replay;
pub mod report;
pub mod rivals;
pub mod sacct;
pub mod shared;
pub mod shared_report;
pub mod svg;
pub mod swf;
pub mod touched;
pub mod trace;
pub mod view;
pub mod workload;

use std::str::FromStr;

use cluster::{Cluster, SchedConfig};
use slurmscale_autoscaler::crd::NodeSetAutoscalerSpec;
use trace::NodeShape;

pub use replay::{bucket_for, run, run_policy};

/// Decides the partition's size from what it sees, at times of its choosing.
pub trait Scaler {
    /// When it next wants to look, with or without news.
    fn wake(&self) -> Option<i64>;
    /// Looks at the partition after everything due at `now` happened; the replicas to
    /// scale to, if they change.
    fn look(&mut self, now: i64, cluster: &mut Cluster) -> Option<u32>;
    /// The replicas it last asked for (for the timeline).
    fn desired(&self) -> u32;
}

/// The policies, by the names the CLI and reports use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Policy {
    Builtin,
    /// The built-in controller booting for the jobs Slurm has planned just in time
    /// (`spec.plannedJobs.boot: JustInTime`). Not among the policies replayed by default.
    BuiltinJustInTime,
    Keda,
    KedaDesired,
    PowerSave,
    SlurmPlanned,
    /// `slurm-planned` booting just in time for slurmctld's plan (records powered up one
    /// boot ahead of a planned start). Not among the policies replayed by default.
    SlurmPlannedJustInTime,
    Static,
}

impl Policy {
    /// Every policy: the default replays all but the two just-in-time ones.
    pub const ALL: [Policy; 8] = [
        Self::Builtin,
        Self::BuiltinJustInTime,
        Self::Keda,
        Self::KedaDesired,
        Self::PowerSave,
        Self::SlurmPlanned,
        Self::SlurmPlannedJustInTime,
        Self::Static,
    ];

    /// The policies a replay runs unless told which.
    pub fn defaults() -> impl Iterator<Item = Policy> {
        Self::ALL
            .into_iter()
            .filter(|p| !matches!(p, Self::BuiltinJustInTime | Self::SlurmPlannedJustInTime))
    }

    /// A NodeSet that follows slurmctld's power requests (`mode: SlurmPlanned`).
    pub fn follows_slurmctld(self) -> bool {
        matches!(self, Self::SlurmPlanned | Self::SlurmPlannedJustInTime)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Builtin => "builtin",
            Self::BuiltinJustInTime => "builtin-just-in-time",
            Self::Keda => "keda",
            Self::KedaDesired => "keda-desired",
            Self::PowerSave => "power-save",
            Self::SlurmPlanned => "slurm-planned",
            Self::SlurmPlannedJustInTime => "slurm-planned-just-in-time",
            Self::Static => "static",
        }
    }
}

impl FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Self::ALL.iter().map(|p| p.as_str()).collect();
                format!("unknown policy {s:?} (one of {})", names.join(", "))
            })
    }
}

/// Everything a replay needs besides the jobs.
#[derive(Clone, Debug)]
pub struct Options {
    pub shape: NodeShape,
    pub max_nodes: u32,
    pub sched: SchedConfig,
    /// The NodeSetAutoscaler spec `builtin` runs.
    pub autoscaler: NodeSetAutoscalerSpec,
    /// `keda`'s threshold (pending jobs per replica).
    pub keda_threshold: f64,
    /// Both KEDA pipelines' HPA `behavior.scaleUp.tolerance`.
    pub keda_up_tolerance: f64,
    /// Slurm's `SuspendTime` for `power-save`.
    pub suspend_time: i64,
    /// Timeline resolution (seconds); 0 picks one for about 1,500 points.
    pub bucket: i64,
    /// `builtin` reconciles at every 2 s poll instead of only when something changed
    /// (slower; the same result, which a test checks).
    pub every_poll: bool,
    /// The partition spans several NodeSets, and how `builtin` chooses which grows; `None`:
    /// it is one NodeSet of `shape` and `max_nodes`.
    pub nodesets: Option<nodesets::Layout>,
}

impl Options {
    pub fn new(shape: NodeShape, max_nodes: u32) -> Self {
        Self {
            shape,
            max_nodes,
            sched: SchedConfig::default(),
            autoscaler: builtin::default_spec(max_nodes),
            keda_threshold: 5.0,
            keda_up_tolerance: rivals::TOLERANCE,
            suspend_time: 600,
            bucket: 0,
            every_poll: false,
            nodesets: None,
        }
    }
}

/// What one policy did over the replay.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    pub jobs: usize,
    /// Node-seconds provisioned (booting, up or draining) and busy (running a job).
    pub node_seconds: f64,
    pub busy_node_seconds: f64,
    /// Of the idle node-seconds, those spent while jobs waited: nodes held for a job that
    /// cannot start yet (a reservation, or booting for it), where a policy that scales only
    /// after the queue empties loses to power saving.
    pub idle_waiting_node_seconds: f64,
    /// CPU-seconds jobs used, for utilization.
    pub cpu_seconds: f64,
    /// Queue waits, sorted (seconds).
    pub waits: Vec<i64>,
    pub bounded_slowdown_mean: f64,
    pub scale_ups: u64,
    pub scale_downs: u64,
    /// Following slurmctld's power requests: records powered up ahead of a planned start,
    /// and the waits of the jobs that waited for a node to boot after their start (sorted).
    pub early_power_ups: u64,
    pub boot_waits: Vec<i64>,
    /// Start times, by job (the order of the jobs given); `None` for a job the policy
    /// never gave nodes to.
    pub starts: Vec<Option<i64>>,
    /// Jobs still waiting when the replay gave up on them: the policy never provided the
    /// nodes they need (their waits count until the replay stopped).
    pub starved: usize,
    /// Over several NodeSets, each one's share (empty over one).
    pub nodesets: Vec<SetStats>,
}

/// One NodeSet's share of a run over several.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SetStats {
    pub node_seconds: f64,
    pub busy_node_seconds: f64,
    /// The waits of the jobs that started on its nodes (a job over several NodeSets counts
    /// where its first node is), sorted.
    pub waits: Vec<i64>,
}

/// One point of the timeline: what was waiting and wanted at `time`, and the average nodes
/// provisioned and busy over the bucket that starts there.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Point {
    pub time: i64,
    pub pending_jobs: u32,
    pub demand_nodes: u64,
    pub desired: u32,
    pub provisioned: f64,
    pub busy: f64,
}

#[derive(Clone, Debug)]
pub struct Run {
    pub policy: Policy,
    pub stats: Stats,
    pub timeline: Vec<Point>,
    /// When its last job ended.
    pub last_end: i64,
    /// Nodes it held when the replay stopped (kept until the common horizon), in all and
    /// by NodeSet over several.
    pub final_provisioned: u32,
    pub final_by_set: Vec<u32>,
}

#[cfg(test)]
mod tests;
