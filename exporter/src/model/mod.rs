//! The version-free model of a Slurm cluster: what every slurmrestd API version decodes into
//! and what metric families and the scaling policy read. Nothing here knows which REST
//! version a value came from; quantities are in base units (bytes, seconds, counts).

use std::collections::BTreeMap;
use std::sync::Arc;

pub mod constraint;
pub mod demand;
pub mod grows;
pub mod job_table;
pub mod jobs;
pub mod origin;
pub mod packing;
pub mod record;
pub mod text;
pub mod timing;

/// Base state of a node. Base states are exclusive; DRAIN, MAINTENANCE etc. are [`NodeFlags`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NodeBase {
    Idle,
    Allocated,
    Mixed,
    Down,
    Future,
    Error,
    Unknown,
}

impl NodeBase {
    pub const ALL: [NodeBase; 7] = [
        Self::Idle,
        Self::Allocated,
        Self::Mixed,
        Self::Down,
        Self::Future,
        Self::Error,
        Self::Unknown,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Allocated => "alloc",
            Self::Mixed => "mixed",
            Self::Down => "down",
            Self::Future => "future",
            Self::Error => "error",
            Self::Unknown => "unknown",
        }
    }

    /// Parses a base state word as any API version spells it (`idle`, `IDLE`, `ALLOCATED`,
    /// `alloc`, ...). Unknown words are `None`: they may be flags.
    pub fn parse(word: &str) -> Option<Self> {
        let w = word
            .trim()
            .trim_end_matches(['*', '~', '#', '%', '$', '@', '^', '-', '!']);
        Some(match w.to_ascii_uppercase().as_str() {
            "IDLE" => Self::Idle,
            "ALLOCATED" | "ALLOC" | "ALLOCATED+" => Self::Allocated,
            "MIXED" | "MIX" => Self::Mixed,
            "DOWN" => Self::Down,
            "FUTURE" | "FUTR" => Self::Future,
            "ERROR" => Self::Error,
            "UNKNOWN" | "UNK" => Self::Unknown,
            _ => return None,
        })
    }
}

/// State flags of a node that combine with any base state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NodeFlags(u32);

impl NodeFlags {
    pub const DRAIN: Self = Self(1);
    pub const MAINTENANCE: Self = Self(1 << 1);
    pub const RESERVED: Self = Self(1 << 2);
    pub const NOT_RESPONDING: Self = Self(1 << 3);
    pub const COMPLETING: Self = Self(1 << 4);
    pub const FAIL: Self = Self(1 << 5);
    pub const POWERED_DOWN: Self = Self(1 << 6);
    pub const POWERING_UP: Self = Self(1 << 7);
    pub const POWERING_DOWN: Self = Self(1 << 8);
    pub const PLANNED: Self = Self(1 << 9);
    pub const CLOUD: Self = Self(1 << 10);
    pub const REBOOT: Self = Self(1 << 11);
    pub const DYNAMIC: Self = Self(1 << 12);

    /// Flags exported as `slurm_nodes_state_flag{flag}`; names as Slurm prints them.
    pub const NAMED: [(Self, &'static str); 13] = [
        (Self::DRAIN, "drain"),
        (Self::MAINTENANCE, "maint"),
        (Self::RESERVED, "reserved"),
        (Self::NOT_RESPONDING, "not_responding"),
        (Self::COMPLETING, "completing"),
        (Self::FAIL, "fail"),
        (Self::POWERED_DOWN, "powered_down"),
        (Self::POWERING_UP, "powering_up"),
        (Self::POWERING_DOWN, "powering_down"),
        (Self::PLANNED, "planned"),
        (Self::CLOUD, "cloud"),
        (Self::REBOOT, "reboot"),
        (Self::DYNAMIC, "dynamic"),
    ];

    pub fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    pub fn insert(&mut self, other: Self) {
        self.0 |= other.0;
    }

    /// Parses a flag word as any API version spells it; unknown words are ignored.
    pub fn parse(word: &str) -> Option<Self> {
        Some(match word.trim().to_ascii_uppercase().as_str() {
            "DRAIN" | "DRAINED" | "DRAINING" | "DRNG" | "DRAIN+" => Self::DRAIN,
            "MAINTENANCE" | "MAINT" => Self::MAINTENANCE,
            "RESERVED" | "RESV" => Self::RESERVED,
            "NOT_RESPONDING" => Self::NOT_RESPONDING,
            "COMPLETING" | "COMP" => Self::COMPLETING,
            "FAIL" | "FAILING" => Self::FAIL,
            "POWERED_DOWN" | "POWER_DOWN" => Self::POWERED_DOWN,
            "POWERING_UP" | "POWER_UP" => Self::POWERING_UP,
            "POWERING_DOWN" => Self::POWERING_DOWN,
            "PLANNED" => Self::PLANNED,
            "CLOUD" => Self::CLOUD,
            "REBOOT" | "REBOOT_REQUESTED" | "REBOOT_ISSUED" => Self::REBOOT,
            "DYNAMIC_FUTURE" | "DYNAMIC_NORM" | "DYNAMIC" => Self::DYNAMIC,
            _ => return None,
        })
    }
}

/// A node state as the union of a base state and flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NodeState {
    pub base: NodeBase,
    pub flags: NodeFlags,
}

impl NodeState {
    /// From state words in any spelling: `["IDLE","DRAIN"]`, `"idle"` + flags, `"MIXED+DRAIN"`.
    /// The first base word wins; unknown words are ignored (a newer Slurm may add flags).
    pub fn from_words<'a>(words: impl IntoIterator<Item = &'a str>) -> Self {
        let mut base = None;
        let mut flags = NodeFlags::default();
        for word in words.into_iter().flat_map(|w| w.split('+')) {
            if let Some(b) = NodeBase::parse(word) {
                base.get_or_insert(b);
            } else if let Some(f) = NodeFlags::parse(word) {
                flags.insert(f);
            }
        }
        // Some versions spell "drained" or "draining" as the base word itself.
        Self {
            base: base.unwrap_or(NodeBase::Unknown),
            flags,
        }
    }

    pub fn drain(&self) -> bool {
        self.flags.contains(NodeFlags::DRAIN)
    }
}

/// A countable generic resource (GRES), e.g. `gpu:a100:4`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Gres {
    pub name: Arc<str>,
    /// The type (`a100`), empty when untyped.
    pub kind: Arc<str>,
    pub count: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub name: String,
    pub state: NodeState,
    pub partitions: Vec<Arc<str>>,
    pub cpus: u64,
    pub alloc_cpus: u64,
    pub memory_bytes: u64,
    pub alloc_memory_bytes: u64,
    pub free_memory_bytes: Option<u64>,
    pub gres: Vec<Gres>,
    pub gres_used: Vec<Gres>,
    /// Why the node is down or drained, as the admin (or we) wrote it; empty otherwise.
    pub reason: String,
    pub reason_set_by: String,
}

impl Node {
    pub fn gpus(&self) -> u64 {
        gpus(&self.gres)
    }
    pub fn gpus_alloc(&self) -> u64 {
        gpus(&self.gres_used)
    }
    pub fn idle_cpus(&self) -> u64 {
        self.cpus.saturating_sub(self.alloc_cpus)
    }

    /// Running work: allocated CPUs, an ALLOCATED or MIXED base state, or jobs completing.
    /// The one meaning of "busy" for demand, scaling and colocation.
    pub fn busy(&self) -> bool {
        self.alloc_cpus > 0
            || matches!(self.state.base, NodeBase::Allocated | NodeBase::Mixed)
            || self.state.flags.contains(NodeFlags::COMPLETING)
    }

    /// A new job may start here now: up (IDLE, MIXED or ALLOCATED) and not drained or
    /// draining, in maintenance or a reservation, not responding, failing, powered (or
    /// powering) down or up, or rebooting. What sinfo counts as neither allocated nor idle
    /// ("other") is the rest.
    pub fn usable(&self) -> bool {
        const UNUSABLE: [NodeFlags; 9] = [
            NodeFlags::DRAIN,
            NodeFlags::MAINTENANCE,
            NodeFlags::RESERVED,
            NodeFlags::NOT_RESPONDING,
            NodeFlags::FAIL,
            NodeFlags::POWERED_DOWN,
            NodeFlags::POWERING_DOWN,
            NodeFlags::POWERING_UP,
            NodeFlags::REBOOT,
        ];
        matches!(
            self.state.base,
            NodeBase::Idle | NodeBase::Mixed | NodeBase::Allocated
        ) && !UNUSABLE.iter().any(|f| self.state.flags.contains(*f))
    }

    /// Idle CPUs a job could use now: those of a usable node, none elsewhere.
    pub fn usable_idle_cpus(&self) -> u64 {
        if self.usable() { self.idle_cpus() } else { 0 }
    }

    /// CPUs neither allocated nor usable (sinfo's "other").
    pub fn unavailable_cpus(&self) -> u64 {
        self.idle_cpus() - self.usable_idle_cpus()
    }
}

pub fn gpus(gres: &[Gres]) -> u64 {
    gres.iter()
        .filter(|g| &*g.name == "gpu")
        .fold(0, |n, g| n.saturating_add(g.count))
}

#[derive(Clone, Debug, PartialEq)]
pub struct Partition {
    pub name: Arc<str>,
    /// `UP`, `DOWN`, `DRAIN`, `INACTIVE` (upper case).
    pub state: String,
    /// Nodes configured in the partition, FUTURE ones included (they are hidden from /nodes).
    pub total_nodes: u64,
    pub total_cpus: u64,
    /// Memory and GPUs of all its nodes, FUTURE ones included, from its configured TRES
    /// (`cpu=32,mem=62.50G,node=8,gres/gpu=16`); GPUs are there only when slurm.conf's
    /// AccountingStorageTRES names them.
    pub total_memory_bytes: Option<u64>,
    pub total_gpus: Option<u64>,
    /// The most nodes one job may use here; `None` when unlimited.
    pub max_nodes_per_job: Option<u64>,
    /// The node list expression, e.g. `c[1-4]`.
    pub node_list: String,
    /// `SuspendTime=INFINITE` on the partition: slurmctld never powers its nodes down
    /// (v0.0.40 on says so; v0.0.38 does not, and a global setting never shows).
    pub never_suspends: bool,
    /// The NodeSets its `Nodes=` names: Slinky's NodeSets put their dynamic nodes in a
    /// partition this way, several to a partition from slurm-operator 1.1.
    pub node_sets: NodeSets,
}

/// The NodeSets (slurm.conf's `NodeSet=` lines) a partition takes nodes from, as slurmrestd
/// says them from v0.0.40 on (`node_sets`: `a,b`, or `ALL` for `Nodes=ALL`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum NodeSets {
    /// The API version does not say (v0.0.38).
    #[default]
    Unknown,
    /// `Nodes=ALL`: every node, so every NodeSet's too.
    All,
    /// The NodeSets named, in Slurm's order; none when `Nodes=` names only nodes.
    Named(Vec<String>),
}

impl NodeSets {
    pub fn parse(s: &str) -> Self {
        match s.trim() {
            "ALL" => Self::All,
            s => Self::Named(
                s.split(',')
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .map(String::from)
                    .collect(),
            ),
        }
    }

    /// Whether nodes of the NodeSet `name` (its name in Slurm) join the partition; `None`
    /// when the API version does not say.
    pub fn includes(&self, name: &str) -> Option<bool> {
        match self {
            Self::Unknown => None,
            Self::All => Some(true),
            Self::Named(names) => Some(names.iter().any(|n| n == name)),
        }
    }
}

/// Job states, as far as counting needs them. Unknown states are `Other`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum JobState {
    Pending,
    Running,
    Suspended,
    Completing,
    Completed,
    Cancelled,
    Failed,
    Timeout,
    NodeFail,
    Preempted,
    BootFail,
    Deadline,
    OutOfMemory,
    Other,
}

impl JobState {
    pub const COUNT: usize = Self::Other as usize + 1;

    /// Parses a job state word; unknown states are `Other`. Slurm writes them upper case,
    /// which is matched without allocating.
    pub fn parse(word: &str) -> Self {
        let word = word.trim();
        match Self::parse_upper(word) {
            Self::Other if word.bytes().any(|b| b.is_ascii_lowercase()) => {
                Self::parse_upper(&word.to_ascii_uppercase())
            }
            s => s,
        }
    }

    fn parse_upper(word: &str) -> Self {
        match word {
            "PENDING" => Self::Pending,
            "RUNNING" => Self::Running,
            "SUSPENDED" => Self::Suspended,
            "COMPLETING" => Self::Completing,
            "COMPLETED" => Self::Completed,
            "CANCELLED" => Self::Cancelled,
            "FAILED" => Self::Failed,
            "TIMEOUT" => Self::Timeout,
            "NODE_FAIL" => Self::NodeFail,
            "PREEMPTED" => Self::Preempted,
            "BOOT_FAIL" => Self::BootFail,
            "DEADLINE" => Self::Deadline,
            "OUT_OF_MEMORY" => Self::OutOfMemory,
            _ => Self::Other,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Suspended => "suspended",
            Self::Completing => "completing",
            Self::Completed => "completed",
            Self::Cancelled => "cancelled",
            Self::Failed => "failed",
            Self::Timeout => "timeout",
            Self::NodeFail => "node_fail",
            Self::Preempted => "preempted",
            Self::BootFail => "boot_fail",
            Self::Deadline => "deadline",
            Self::OutOfMemory => "out_of_memory",
            Self::Other => "other",
        }
    }
}

/// Whether a pending job is held by its user or an admin: the hold flag, or a `JobHeld*`
/// reason (Slurm 22.05 has no flag). The one meaning of "held" for job counts, the
/// `_nohold` maxima and demand.
pub fn held(hold: bool, reason: &str) -> bool {
    hold || reason.starts_with("JobHeld")
}

/// Why a pending job waits, as far as demand is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PendingClass {
    /// Would start if nodes were there (Resources, Priority, ReqNodeNotAvail, ...): demand.
    Schedulable,
    /// Held by its user or an admin.
    Held,
    /// Waits for something more nodes cannot give: a dependency, a begin time, a limit.
    Waiting,
    /// Array tasks beyond what the array's `%N` throttle lets start now: never a record's
    /// class ([`Self::of`]), only a count ([`PendingJob::throttled`]), so the backlog a
    /// throttle hides is visible.
    Throttled,
}

impl PendingClass {
    pub const ALL: [PendingClass; 4] = [
        Self::Schedulable,
        Self::Held,
        Self::Waiting,
        Self::Throttled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Schedulable => "schedulable",
            Self::Held => "held",
            Self::Waiting => "waiting",
            Self::Throttled => "throttled",
        }
    }

    /// Classifies a pending job from its reason (`state_reason`) and hold flag.
    pub fn of(reason: &str, hold: bool) -> Self {
        if held(hold, reason) {
            return Self::Held;
        }
        let waiting = matches!(
            reason,
            "Dependency"
                | "DependencyNeverSatisfied"
                | "BeginTime"
                | "JobArrayTaskLimit"
                | "PartitionDown"
                | "PartitionInactive"
                | "InvalidAccount"
                | "InvalidQOS"
                | "BadConstraints"
                | "FedJobLock"
                | "Reservation"
                | "ReservationDeleted"
                | "Licenses"
                | "AccountNotAllowed"
                | "QOSNotAllowed"
                | "SystemFailure"
                | "JobLaunchFailure"
                | "NonZeroExitCode"
                | "PartitionTimeLimit"
        ) || reason.starts_with("Assoc")
            || reason.starts_with("QOS")
            || reason.starts_with("MaxJobs")
            || reason.starts_with("MaxSubmit");
        if waiting {
            Self::Waiting
        } else {
            Self::Schedulable
        }
    }
}

/// One pending job (or, for an unsplit array, its pending tasks) as demand sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingJob {
    pub id: u64,
    /// Every partition the job may run in (a job submitted to `a,b` counts in both). Shared
    /// between jobs with the same partition list.
    pub partitions: Arc<[Arc<str>]>,
    pub class: PendingClass,
    pub reason: Arc<str>,
    /// Job records this stands for: 1, or the pending tasks of an array record that may start
    /// now (its `%N` throttle minus tasks already running; all of them when held).
    pub tasks: u64,
    /// Pending tasks of the array beyond those: waiting on the throttle.
    pub throttled: u64,
    /// Per task: nodes, CPUs, GPUs, memory.
    pub nodes: u64,
    pub cpus: u64,
    pub gpus: u64,
    pub memory_bytes: u64,
    /// `--exclusive` (or an exclusive partition): takes its nodes whole.
    pub whole_node: bool,
    /// `--constraint` (empty: none): which NodeSets' nodes may run it ([`constraint`]).
    pub constraint: Arc<str>,
    /// `--exclude` (a host list; empty: none): nodes it may not run on ([`grows`]).
    pub excluded: Arc<str>,
    pub submit_time: Option<i64>,
    pub origin: origin::Origin,
    /// When slurmctld plans to start it (a schedulable job the backfill scheduler planned;
    /// unix seconds), and the nodes it holds for that start (v0.0.40 on).
    pub planned_start: Option<PlannedStart>,
}

/// Slurm's plan for a pending job: when it starts, and on which nodes slurmctld keeps idle
/// for it meanwhile (none known before REST v0.0.40, or for a job planned without a
/// reservation: beyond `bf_window`, or not among the jobs that reserve).
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedStart {
    pub start: i64,
    pub nodes: Vec<Arc<str>>,
}

/// Counts kept per partition (and once more cluster-wide under the empty partition name).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JobCounts {
    /// Job records by state (indexed by `JobState as usize`); a pending array record counts
    /// once.
    pub by_state: [u64; JobState::COUNT],
    pub held: u64,
    pub pending_by_reason: BTreeMap<Arc<str>, u64>,
    pub cpus_alloc: u64,
    pub gpus_alloc: u64,
    pub nodes_alloc: u64,
    /// The widest running job's nodes: at least this many of the partition's nodes are busy,
    /// whatever the node list or the job's own node list says.
    pub running_nodes_max: u64,
    /// Node counts over pending job records: min/max, all and without held ones.
    pub pending_nodes_max: Option<u64>,
    pub pending_nodes_min: Option<u64>,
    pub pending_nodes_max_nohold: Option<u64>,
    pub pending_nodes_min_nohold: Option<u64>,
    /// Pending and running job records, and the pods they stand for, by [`origin::Origin`].
    pub by_origin: [OriginCounts; 2],
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OriginCounts {
    pub pending: u64,
    pub running: u64,
    /// Pods of Kubernetes placeholder jobs that say how many (slurm-bridge's pod list).
    pub pods_pending: u64,
    pub pods_running: u64,
}

impl JobCounts {
    pub fn state(&self, s: JobState) -> u64 {
        self.by_state[s as usize]
    }

    pub fn total(&self) -> u64 {
        self.by_state.iter().sum()
    }
}

/// Everything decoded from `/jobs`, aggregated while decoding (no per-job record is kept
/// except for pending jobs, which demand and the autoscaler need).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Jobs {
    pub cluster: JobCounts,
    pub partitions: BTreeMap<Arc<str>, JobCounts>,
    pub pending: Vec<PendingJob>,
    /// Per (user, account): job records by state. Filled only when asked for.
    pub by_owner: BTreeMap<(Arc<str>, Arc<str>), BTreeMap<JobState, u64>>,
    /// Per node: the running jobs there, for choosing which nodes to drain.
    pub running_on: BTreeMap<Arc<str>, NodeWork>,
    /// Running jobs whose nodes the list does not show yet: seen to start by their state
    /// alone (`/jobs/state/`), their allocation comes with the next full read. Until then
    /// `running_on` may miss a job on any busy node.
    pub running_unplaced: u64,
    /// How far `pending` may be behind slurmctld (none after a full `/jobs`).
    pub uncertain: Uncertainty,
    /// Admin comments that looked like a pod list but were not one (their jobs count as
    /// batch jobs).
    pub malformed_admin_comments: u64,
}

/// What a poller that keeps jobs current incrementally could not confirm yet. Demand built
/// on such a list is a range: at least what is left once the possibly-started jobs are taken
/// out, at most what is listed — unbounded while new jobs may be missing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Uncertainty {
    /// Jobs listed as pending and not held that may have started or left since.
    pub maybe_left: u64,
    /// New jobs may exist that are not listed yet.
    pub unseen_new: bool,
    /// While a list too long for one answer is read id by id: live jobs slurmctld counts
    /// that it has not read yet (with `unseen_new`).
    pub unread: u64,
}

impl Uncertainty {
    pub fn exact(&self) -> bool {
        self.maybe_left == 0 && !self.unseen_new && self.unread == 0
    }
}

/// The running work of one node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeWork {
    pub jobs: u64,
    /// When the last of them reaches its end time (unix seconds); `None` when one of them
    /// has none (no time limit) — the node frees at no known time.
    pub free_at: Option<i64>,
    /// Slurm may requeue every one of them.
    pub requeueable: bool,
}

/// Scheduler statistics from `/diag`. Durations in seconds, counters as Slurm counts them
/// (they reset at midnight and on `sdiag --reset`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Diag {
    pub server_threads: Option<u64>,
    pub agent_queue_size: Option<u64>,
    pub agent_count: Option<u64>,
    pub agent_threads: Option<u64>,
    pub dbd_agent_queue_size: Option<u64>,
    pub jobs_submitted: Option<u64>,
    pub jobs_started: Option<u64>,
    pub jobs_completed: Option<u64>,
    pub jobs_canceled: Option<u64>,
    pub jobs_failed: Option<u64>,
    /// Jobs (array tasks one by one) waiting to run and running, as slurmctld last counted
    /// them (it recounts every 30 s or so).
    pub jobs_pending: Option<u64>,
    pub jobs_running: Option<u64>,
    /// When slurmctld counted them (unix seconds).
    pub jobs_counted_at: Option<i64>,
    pub schedule_cycles: Option<u64>,
    pub schedule_cycle_last_seconds: Option<f64>,
    pub schedule_cycle_max_seconds: Option<f64>,
    pub schedule_cycle_mean_seconds: Option<f64>,
    pub schedule_cycle_mean_depth: Option<u64>,
    pub schedule_cycles_per_minute: Option<u64>,
    pub schedule_queue_length: Option<u64>,
    pub bf_backfilled_jobs: Option<u64>,
    pub bf_backfilled_het_jobs: Option<u64>,
    pub bf_cycles: Option<u64>,
    pub bf_cycle_last_seconds: Option<f64>,
    pub bf_cycle_max_seconds: Option<f64>,
    pub bf_cycle_mean_seconds: Option<f64>,
    pub bf_depth_mean: Option<u64>,
    pub bf_queue_length: Option<u64>,
    pub bf_last_backfilled_jobs: Option<u64>,
    pub bf_active: Option<bool>,
    pub bf_last_cycle_timestamp: Option<i64>,
    /// Per RPC type: calls and total time spent.
    pub rpcs: Vec<RpcStat>,
    /// Per user: calls and total time spent (exported only with per-user metrics on).
    pub rpcs_by_user: Vec<RpcStat>,
    /// When these statistics began (unix seconds): slurmctld's start, or its last
    /// `sdiag --reset`.
    pub stats_since: Option<i64>,
}

impl Diag {
    /// Jobs waiting to run and running (array tasks one by one), as last counted.
    pub fn live_jobs(&self) -> Option<u64> {
        Some(self.jobs_pending? + self.jobs_running?)
    }

    /// What moves whenever slurmctld loads its configuration again: a restart (and from
    /// 23.11 a reconfigure, which re-executes it) begins its statistics anew, and an older
    /// version's reconfigure counts a `REQUEST_RECONFIGURE` call. (`sdiag --reset` moves it
    /// too; a reconfigure by SIGHUP before 23.11 does not.) `None`: not said.
    pub fn config_generation(&self) -> Option<(i64, u64)> {
        let reconfigures = self
            .rpcs
            .iter()
            .filter(|r| r.name == "REQUEST_RECONFIGURE")
            .map(|r| r.count)
            .sum();
        Some((self.stats_since?, reconfigures))
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct RpcStat {
    pub name: String,
    pub count: u64,
    pub total_seconds: f64,
}

/// The controller's answer to `/ping`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ping {
    pub controllers: Vec<Slurmctld>,
    /// The Slurm release slurmrestd reports, e.g. `24.11.5`.
    pub release: Option<String>,
}

/// One slurmctld as `/ping` reports it (primary or backup).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Slurmctld {
    pub hostname: String,
    pub mode: String,
    pub responding: bool,
    pub latency_seconds: Option<f64>,
}

impl Ping {
    /// True when at least one slurmctld answered. A 2xx ping alone proves nothing: 24.11
    /// answers 200 with `responding: false` when slurmctld rejects our token.
    pub fn any_responding(&self) -> bool {
        self.controllers.iter().any(|c| c.responding)
    }
}
