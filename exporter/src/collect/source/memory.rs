//! A slurmctld in memory behind the [`JobSource`] seam, for the job tracker's unit tests (and
//! those of its read id by id). It keeps jobs and `/diag`'s counters as the real one does
//! (measured on 22.05 and 24.11: `scontrol requeue` counts a completion and leaves the job
//! pending; holds, releases and updates move no counter), and answers `/job/{id}`,
//! `/jobs/state/`, `/jobs` and accounting from them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use super::JobSource;
use crate::collect::jobs::unix_now;
use crate::error::Result;
use crate::model::job_table::{JobTable, StateEntry};
use crate::model::jobs::JobRecord;
use crate::model::{Diag, JobState};
use crate::slurm::fetch::Outcome;

/// `/diag`'s job counters, as slurmctld counts them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counters {
    pub submitted: u64,
    pub started: u64,
    pub completed: u64,
    pub canceled: u64,
    pub failed: u64,
}

/// One job as slurmctld holds it.
#[derive(Clone, Debug)]
pub struct Job {
    pub state: JobState,
    pub reason: &'static str,
    pub partition: &'static str,
    pub hold: bool,
    /// Unix seconds.
    pub submitted: i64,
    /// The backfill scheduler's planned start (unix seconds).
    pub start_time: Option<i64>,
}

/// What slurmctld (and slurmdbd behind it) holds, and how the next requests will find it.
#[derive(Default)]
pub struct World {
    pub jobs: BTreeMap<u64, Job>,
    /// The last id given out (slurmctld never gives one twice).
    pub last_id: u64,
    pub counters: Counters,
    /// Accounting knows every id given out from this one on (`None`: slurmrestd serves
    /// no accounting).
    pub accounted_from: Option<u64>,
    /// Accounting is served but slurmdbd does not answer.
    pub accounting_fails: bool,
    /// slurmdbd has stored no record of ids above this one yet (slurmctld holds them in
    /// its DBD agent queue); `None`: it keeps up.
    pub accounted_to: Option<u64>,
    /// The requests answered, in order: `job`, `states`, `jobs`, `accounting`.
    pub asked: Vec<&'static str>,
    /// slurmctld's last job change (unix seconds), as `update_time` is compared with:
    /// moved by submissions, starts and ends, not by the backfill scheduler's plans.
    pub last_update: i64,
    /// Backfill cycles run.
    pub bf_cycles: u64,
    /// slurmctld's periodic count of its jobs, when one is held still: (pending,
    /// running, when); `None`: counted at every look.
    pub count: Option<(u64, u64, i64)>,
    /// Jobs submitted just before the next listing of every id (`/jobs/state/`) answers.
    pub submit_on_listing: usize,
    /// Jobs submitted just before a search for new ids asks for the next one.
    pub submit_on_search: usize,
    /// Ids whose record the next `/job/{id}` does not show (listed all the same), as if
    /// the search for new ids passed them before they were given out.
    pub late: BTreeSet<u64>,
    /// Requests answered so far (`/diag` through the source included).
    pub requests: usize,
    /// A job is submitted just before each of these requests (by their index in
    /// [`World::requests`]) is answered: any point of an interleaving, chosen by a test.
    pub submit_before: BTreeSet<usize>,
}

/// A slurmctld behind slurmrestd, with `/jobs/state/` (v0.0.40 on) or without (v0.0.38).
pub struct Slurmctld {
    world: Mutex<World>,
    states: bool,
}

impl Slurmctld {
    pub fn new(states: bool) -> Self {
        Self {
            world: Mutex::default(),
            states,
        }
    }

    pub fn with<R>(&self, f: impl FnOnce(&mut World) -> R) -> R {
        f(&mut self.world.lock().unwrap())
    }

    pub fn submit(&self, partition: &'static str) -> u64 {
        self.with(|w| {
            w.last_id += 1;
            let id = w.last_id;
            let job = Job {
                state: JobState::Pending,
                reason: "Priority",
                partition,
                hold: false,
                submitted: unix_now() - 1,
                start_time: None,
            };
            w.jobs.insert(id, job);
            w.last_update = unix_now();
            w.counters.submitted += 1;
            id
        })
    }

    pub fn set(&self, id: u64, f: impl FnOnce(&mut Job)) {
        self.with(|w| {
            f(w.jobs.get_mut(&id).unwrap());
            w.last_update = unix_now();
        });
    }

    /// A backfill cycle plans job `id` to start at `start`.
    pub fn plan(&self, id: u64, start: i64) {
        self.with(|w| {
            w.jobs.get_mut(&id).unwrap().start_time = Some(start);
            w.bf_cycles += 1;
        });
    }

    /// No job changed for `secs` seconds.
    pub fn quiet_for(&self, secs: i64) {
        self.with(|w| w.last_update -= secs);
    }

    pub fn start(&self, id: u64) {
        self.set(id, |j| (j.state, j.reason) = (JobState::Running, "None"));
        self.with(|w| w.counters.started += 1);
    }

    pub fn complete(&self, id: u64) {
        self.set(id, |j| (j.state, j.reason) = (JobState::Completed, "None"));
        self.with(|w| w.counters.completed += 1);
    }

    pub fn requeue(&self, id: u64) {
        self.set(id, |j| {
            (j.state, j.reason) = (JobState::Pending, "BeginTime")
        });
        self.with(|w| w.counters.completed += 1);
    }

    /// The job ran and ended long ago: slurmctld forgot it (accounting has not).
    pub fn ended_long_ago(&self, id: u64) {
        self.start(id);
        self.complete(id);
        self.with(|w| w.jobs.remove(&id));
    }

    /// slurmctld counts its live jobs now, and shows that count until the next.
    pub fn count_now(&self) -> i64 {
        let at = unix_now();
        let (pending, running) = self.live();
        self.with(|w| w.count = Some((pending, running, at)));
        at
    }

    /// (pending, running) jobs.
    pub fn live(&self) -> (u64, u64) {
        let count = |states: &[JobState]| {
            self.with(|w| {
                w.jobs
                    .values()
                    .filter(|j| states.contains(&j.state))
                    .count()
            }) as u64
        };
        (count(&[JobState::Pending]), count(&[JobState::Running]))
    }

    pub fn diag(&self) -> Diag {
        let c = self.with(|w| w.counters);
        let (pending, running, at) = self.with(|w| w.count).unwrap_or_else(|| {
            let (pending, running) = self.live();
            (pending, running, unix_now())
        });
        Diag {
            jobs_pending: Some(pending),
            jobs_running: Some(running),
            jobs_counted_at: Some(at),
            jobs_submitted: Some(c.submitted),
            jobs_started: Some(c.started),
            jobs_completed: Some(c.completed),
            jobs_canceled: Some(c.canceled),
            jobs_failed: Some(c.failed),
            bf_cycles: Some(self.with(|w| w.bf_cycles)),
            dbd_agent_queue_size: Some(
                self.with(|w| w.last_id - w.accounted_to.map_or(w.last_id, |t| t.min(w.last_id))),
            ),
            ..Diag::default()
        }
    }

    pub fn asked(&self) -> Vec<&'static str> {
        self.with(|w| std::mem::take(&mut w.asked))
    }

    /// Counts a request about to be answered; submits a job first where the test asked.
    fn request(&self) {
        let submit = self.with(|w| {
            w.requests += 1;
            w.submit_before.remove(&(w.requests - 1))
        });
        if submit {
            self.submit("cpu");
        }
    }

    fn table<'a>(jobs: impl Iterator<Item = (&'a u64, &'a Job)>) -> JobTable {
        let mut t = JobTable::default();
        for (id, j) in jobs {
            t.upsert(&JobRecord {
                id: *id,
                state: Some(j.state),
                reason: j.reason,
                partition: j.partition,
                hold: j.hold,
                nodes: Some(1),
                cpus: Some(1),
                submit_time: Some(j.submitted),
                start_time: j.start_time,
                ..JobRecord::default()
            });
        }
        t
    }
}

impl JobSource for Slurmctld {
    fn has_job_states(&self) -> bool {
        self.states
    }

    fn filters_job_states(&self) -> bool {
        self.states
    }

    fn job_reading_through(
        &self,
        id: u64,
    ) -> impl Future<Output = Result<Option<JobTable>>> + Send {
        self.job(id)
    }

    /// Accounting knows every id from `accounted_from` on: a job slurmctld still has in
    /// its state, one it has forgotten as completed.
    fn accounted(&self, ids: &[u64]) -> impl Future<Output = Result<Vec<StateEntry>>> + Send {
        self.request();
        let known = self.with(|w| {
            w.asked.push("accounting");
            let from = w.accounted_from.ok_or_else(|| crate::Error::Http {
                endpoint: "slurmdb_jobs".into(),
                status: 404,
                detail: "not found".into(),
            })?;
            if w.accounting_fails {
                return Err(crate::Error::SlurmErrors {
                    endpoint: "slurmdb_jobs".into(),
                    status: 500,
                    detail: "Unable to connect to database".into(),
                });
            }
            let to = w.accounted_to.map_or(w.last_id, |t| t.min(w.last_id));
            Ok(ids
                .iter()
                .filter(|id| (from..=to).contains(id))
                .map(|&id| StateEntry {
                    id,
                    task: None,
                    state: w.jobs.get(&id).map_or(JobState::Completed, |j| j.state),
                })
                .collect())
        });
        std::future::ready(known)
    }

    fn job(&self, id: u64) -> impl Future<Output = Result<Option<JobTable>>> + Send {
        self.request();
        let arrives = self.with(|w| {
            let now = w.submit_on_search > 0 && id == w.last_id + 1;
            w.submit_on_search -= usize::from(now);
            now
        });
        if arrives {
            self.submit("cpu");
        }
        let found = self.with(|w| {
            w.asked.push("job");
            if w.late.remove(&id) {
                return None;
            }
            w.jobs
                .get_key_value(&id)
                .map(|j| Self::table([j].into_iter()))
        });
        std::future::ready(Ok(found))
    }

    fn job_states(
        &self,
        only: &[u64],
    ) -> impl Future<Output = Result<Option<Vec<StateEntry>>>> + Send {
        self.request();
        if only.is_empty() {
            for _ in 0..self.with(|w| std::mem::take(&mut w.submit_on_listing)) {
                self.submit("cpu");
            }
        }
        let states = self.states.then(|| {
            self.with(|w| {
                w.asked.push("states");
                w.jobs
                    .iter()
                    .filter(|(id, _)| only.is_empty() || only.contains(id))
                    .map(|(id, j)| StateEntry {
                        id: *id,
                        task: None,
                        state: j.state,
                    })
                    .collect()
            })
        });
        std::future::ready(Ok(states))
    }

    fn diag(&self) -> impl Future<Output = Result<Option<Diag>>> + Send {
        self.request();
        std::future::ready(Ok(Some(Slurmctld::diag(self))))
    }

    /// As slurmctld answers: nothing when no job changed since `since`.
    fn job_table(
        &self,
        since: Option<i64>,
    ) -> impl Future<Output = Result<Outcome<JobTable>>> + Send {
        self.request();
        let outcome = self.with(|w| {
            w.asked.push("jobs");
            if since.is_some_and(|s| s >= w.last_update) {
                return Outcome::Unchanged;
            }
            Outcome::Fresh {
                data: Self::table(w.jobs.iter()),
                release: None,
                last_update: None,
            }
        });
        std::future::ready(Ok(outcome))
    }
}
