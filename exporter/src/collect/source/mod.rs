//! What the job tracker asks slurmrestd, as a trait: the seam between the tracker's decisions
//! ([`super::jobs`], and its read of a long list id by id) and the requests, so both are
//! unit-tested on a slurmctld in memory. [`Rest`] is slurmrestd itself; `memory.rs`, beside
//! it, the slurmctld in memory (tests only).

#[cfg(test)]
pub(crate) mod memory;

use std::future::Future;

use crate::error::Result;
use crate::model::Diag;
use crate::model::job_table::{JobTable, StateEntry};
use crate::slurm::fetch::{self, Outcome};
use crate::slurm::{ApiVersion, SlurmClient};

/// What the tracker asks slurmrestd: the seam between its decisions and the requests, which
/// its unit tests fill with a slurmctld in memory.
pub trait JobSource: Sync {
    /// Whether `/jobs/state/` exists (v0.0.40 on).
    fn has_job_states(&self) -> bool;
    /// `/job/{id}`: the job (an array with its split tasks), `None` when slurmctld does not
    /// know the id.
    fn job(&self, id: u64) -> impl Future<Output = Result<Option<JobTable>>> + Send;
    /// Whether `/jobs/state/` answers for the jobs named by id only (v0.0.42 on).
    fn filters_job_states(&self) -> bool;
    /// [`Self::job`] while the list is read id by id (not held to the default rate limit).
    fn job_reading_through(&self, id: u64)
    -> impl Future<Output = Result<Option<JobTable>>> + Send;
    /// The records slurmdbd has of `ids`, with their states (`/slurmdb/…/jobs?step=…`).
    fn accounted(&self, ids: &[u64]) -> impl Future<Output = Result<Vec<StateEntry>>> + Send;
    /// `/jobs/state/` of `only` these jobs (all when empty); `None` without the endpoint.
    fn job_states(
        &self,
        only: &[u64],
    ) -> impl Future<Output = Result<Option<Vec<StateEntry>>>> + Send;
    /// The whole `/jobs`, or unchanged since `since` (unix seconds).
    fn job_table(
        &self,
        since: Option<i64>,
    ) -> impl Future<Output = Result<Outcome<JobTable>>> + Send;
    /// `/diag` now: its job counters (`None` if it answered nothing new).
    fn diag(&self) -> impl Future<Output = Result<Option<Diag>>> + Send;
}

/// slurmrestd at one API version.
pub struct Rest<'a> {
    pub client: &'a SlurmClient,
    pub version: ApiVersion,
}

impl JobSource for Rest<'_> {
    fn has_job_states(&self) -> bool {
        self.version.has_job_states()
    }

    fn job(&self, id: u64) -> impl Future<Output = Result<Option<JobTable>>> + Send {
        fetch::job(self.client, self.version, id)
    }

    fn filters_job_states(&self) -> bool {
        self.version.filters_job_states()
    }

    fn job_reading_through(
        &self,
        id: u64,
    ) -> impl Future<Output = Result<Option<JobTable>>> + Send {
        fetch::job_reading_through(self.client, self.version, id)
    }

    fn accounted(&self, ids: &[u64]) -> impl Future<Output = Result<Vec<StateEntry>>> + Send {
        fetch::accounted(self.client, self.version, ids)
    }

    fn job_states(
        &self,
        only: &[u64],
    ) -> impl Future<Output = Result<Option<Vec<StateEntry>>>> + Send {
        fetch::job_states(self.client, self.version, only)
    }

    fn job_table(
        &self,
        since: Option<i64>,
    ) -> impl Future<Output = Result<Outcome<JobTable>>> + Send {
        fetch::job_table(self.client, self.version, since)
    }

    async fn diag(&self) -> Result<Option<Diag>> {
        Ok(match fetch::diag(self.client, self.version).await? {
            Outcome::Fresh { data, .. } => Some(data),
            Outcome::Unchanged => None,
        })
    }
}
