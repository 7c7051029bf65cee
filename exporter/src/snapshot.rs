//! The immutable, timestamped picture of one Slurm cluster that pollers publish and everything
//! downstream reads: metric families, `/readyz`, the autoscaler's policy.
//!
//! Each endpoint keeps its last good data with the time it was last confirmed, so a failing
//! `/jobs` does not blank out nodes, and a reader can tell exactly how stale each part is.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::error::Error;
use crate::histogram::Histogram;
use crate::model::{Diag, Jobs, Node, Partition, Ping};
use crate::slurm::{ApiVersion, Endpoint};

/// One endpoint's last good data and its health.
#[derive(Clone, Debug)]
pub struct EndpointState<T> {
    pub data: Option<Arc<T>>,
    /// When slurmrestd last confirmed `data` (a fresh answer or a 304).
    pub last_success: Option<SystemTime>,
    pub last_attempt: Option<SystemTime>,
    /// Whether the last attempt succeeded.
    pub up: bool,
    /// The last failure, for logs and `/readyz`; its kind is counted in `errors`.
    pub last_error: Option<String>,
    /// Failures since start, by [`Error::kind`].
    pub errors: BTreeMap<&'static str, u64>,
    /// Time the last attempt took (request + decode).
    pub duration: Option<Duration>,
    /// The gap the poller now leaves between two requests for this data: the interval, or
    /// more when slurmrestd is slow to answer (its budget). Staleness limits follow it.
    pub cadence: Option<Duration>,
}

impl<T> Default for EndpointState<T> {
    fn default() -> Self {
        Self {
            data: None,
            last_success: None,
            last_attempt: None,
            up: false,
            last_error: None,
            errors: BTreeMap::new(),
            duration: None,
            cadence: None,
        }
    }
}

impl<T> EndpointState<T> {
    /// Records a good answer: new data, or `None` for "unchanged, keep what we have".
    pub fn succeed(&mut self, at: SystemTime, took: Duration, data: Option<T>) {
        if let Some(d) = data {
            self.data = Some(Arc::new(d));
        }
        self.last_success = Some(at);
        self.last_attempt = Some(at);
        self.up = true;
        self.last_error = None;
        self.duration = Some(took);
    }

    /// Records a failure; the last good data stays.
    pub fn fail(&mut self, at: SystemTime, took: Duration, error: &Error) {
        self.last_attempt = Some(at);
        self.up = false;
        self.last_error = Some(error.to_string());
        *self.errors.entry(error.kind()).or_default() += 1;
        self.duration = Some(took);
    }

    /// Age of the data at `now`; `None` if there never was any.
    pub fn age(&self, now: SystemTime) -> Option<Duration> {
        self.last_success
            .map(|t| now.duration_since(t).unwrap_or_default())
    }

    /// The data, only if confirmed within `max_age` of `now`.
    pub fn fresh(&self, now: SystemTime, max_age: Duration) -> Option<&Arc<T>> {
        match self.age(now) {
            Some(age) if age <= max_age => self.data.as_ref(),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct ClusterSnapshot {
    pub cluster: Arc<str>,
    pub url: String,
    pub api_version: Option<ApiVersion>,
    pub release: Option<String>,
    pub ping: EndpointState<Ping>,
    pub diag: EndpointState<Diag>,
    pub jobs: EndpointState<Jobs>,
    pub nodes: EndpointState<Vec<Node>>,
    pub partitions: EndpointState<Vec<Partition>>,
    /// Finished collection cycles.
    pub cycles: u64,
    /// When the last cycle finished and how long it took.
    pub collected_at: Option<SystemTime>,
    pub collection_duration: Option<Duration>,
    /// Polling only for health: an autoscaler replica that does not lead.
    pub standby: bool,
    /// Time slurmrestd took for our requests, by endpoint (`job` = one job, `jobs_state`).
    pub requests: BTreeMap<&'static str, Histogram>,
    /// How the job list was kept current.
    pub jobs_effort: JobsEffort,
    /// How the job list is read now, and whether accounting can help.
    pub job_list: JobListRead,
}

/// How the job list is read: `slurm_exporter_job_list_info`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobListRead {
    /// Id by id (a list longer than `--request-max-jobs`, accounting saying where the ids
    /// are), or whole.
    pub by_id: bool,
    pub accounting: Accounting,
    /// Ids slurmctld had given out above the newest accounting knew, when the list was last
    /// read id by id (slurmdbd behind slurmctld).
    pub unaccounted: u64,
}

/// What slurmrestd's accounting endpoints (`/slurmdb/…`) showed, the last time a list too long
/// for one answer needed them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Accounting {
    /// Not asked: the list was never longer than the bound.
    #[default]
    Unknown,
    /// They answer.
    Served,
    /// slurmrestd runs without its slurmdbd plugin (every `/slurmdb/` path is a 404): a
    /// configuration, found once and checked again now and then.
    NotServed,
    /// Served but failing (slurmdbd down or unreachable), or with no record of any job id.
    Failing,
}

impl Accounting {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unknown => "unknown",
            Self::Served => "served",
            Self::NotServed => "not_served",
            Self::Failing => "failing",
        }
    }
}

/// Requests made to keep the job list current: by one poll, or since start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobsEffort {
    /// Full `/jobs` lists.
    pub full_fetches: u64,
    /// `/jobs/state` lists.
    pub state_fetches: u64,
    /// Single-job reads.
    pub single_reads: u64,
    /// slurmdbd's job records, asked for by id to find where the job ids are.
    pub accounting_reads: u64,
}

impl std::ops::AddAssign for JobsEffort {
    fn add_assign(&mut self, e: Self) {
        self.full_fetches += e.full_fetches;
        self.state_fetches += e.state_fetches;
        self.single_reads += e.single_reads;
        self.accounting_reads += e.accounting_reads;
    }
}

/// What `/readyz` needs: which endpoint has never answered.
pub const REQUIRED: [Endpoint; 3] = [Endpoint::Jobs, Endpoint::Nodes, Endpoint::Partitions];

impl ClusterSnapshot {
    pub fn new(cluster: &str, url: &str) -> Self {
        Self {
            cluster: Arc::from(cluster),
            url: url.to_string(),
            ..Default::default()
        }
    }

    /// (up, last_success, last_attempt, errors, duration, last_error) of one endpoint.
    pub fn health(&self, e: Endpoint) -> EndpointHealth<'_> {
        macro_rules! h {
            ($s:expr) => {
                EndpointHealth {
                    up: $s.up,
                    has_data: $s.data.is_some(),
                    last_success: $s.last_success,
                    last_attempt: $s.last_attempt,
                    errors: &$s.errors,
                    duration: $s.duration,
                    cadence: $s.cadence,
                    last_error: $s.last_error.as_deref(),
                }
            };
        }
        match e {
            Endpoint::Ping => h!(self.ping),
            Endpoint::Diag => h!(self.diag),
            Endpoint::Jobs => h!(self.jobs),
            Endpoint::Nodes => h!(self.nodes),
            Endpoint::Partitions => h!(self.partitions),
        }
    }

    /// Ready once jobs, nodes and partitions have each answered well at least once; it stays
    /// ready afterwards (stale data is served and flagged by age metrics, not hidden).
    pub fn ready(&self) -> bool {
        REQUIRED.iter().all(|e| self.health(*e).has_data)
    }

    /// Every endpoint answered well on its last attempt and slurmctld responds to ping.
    pub fn up(&self) -> bool {
        Endpoint::ALL.iter().all(|e| self.health(*e).up)
            && self.ping.data.as_ref().is_some_and(|p| p.any_responding())
    }
}

/// A uniform view of one endpoint's health, whatever its data type.
#[derive(Clone, Copy, Debug)]
pub struct EndpointHealth<'a> {
    pub up: bool,
    pub has_data: bool,
    pub last_success: Option<SystemTime>,
    pub last_attempt: Option<SystemTime>,
    pub errors: &'a BTreeMap<&'static str, u64>,
    pub duration: Option<Duration>,
    pub cadence: Option<Duration>,
    pub last_error: Option<&'a str>,
}
