//! Keeping one cluster's job list current without asking slurmctld for all of it.
//!
//! A full `/jobs` is what slurmrestd finds most expensive to answer: 15 s of its CPU for
//! 20,000 jobs on 22.05, 22 s on 24.11 (`exporter/benches/README.md`). So the list is
//! fetched in full once, then kept in a [`JobTable`] and updated from cheap requests:
//!
//! 1. `/diag` (2 ms) says how many jobs were submitted, started, completed, cancelled or
//!    failed since the last look. Nothing moved: the list is confirmed as it is.
//! 2. New jobs take the ids after the highest one known: each `/job/{id}` (3 ms) until an id
//!    slurmctld does not know.
//! 3. Jobs that started or ended are among those listed as waiting to run (and running):
//!    while there are few, each is read again with `/job/{id}`; when there are too many,
//!    the list is *uncertain* ([`Uncertainty`]) until `/jobs/state/` (v0.0.40 on: ids and
//!    states only, 0.6 s of slurmrestd CPU at 20,000 jobs) or a full `/jobs` says which.
//! 4. Holds, releases and updates move no counter: a full `/jobs` at least every
//!    [`RESYNC`] (a 304 when nothing changed) catches them, and on a large queue the budget
//!    stretches that to minutes. A release is new demand, as a submission is, so held jobs
//!    are also read again [`REVIEWS_PER_STEP`] a step, round the list: where few are held,
//!    a release is seen within seconds.
//!
//! Every request that is not cheap waits its turn in a [`Pace`]: a request that took `d`
//! is not repeated for `d × (1/budget − 1)`, so slurmrestd spends at most `budget` of its
//! time on each kind of request we make.

use std::collections::BTreeSet;
use std::time::{Duration, Instant, SystemTime};

use tracing::debug;

use super::pace::{Budget, Pace};
use crate::error::Result;
use crate::model::job_table::{JobTable, StateEntry};
use crate::model::origin::OriginRules;
use crate::model::{Diag, Jobs, Uncertainty};
use crate::slurm::fetch::{self, Outcome};
use crate::slurm::{ApiVersion, SlurmClient};
use crate::snapshot::JobsEffort;

/// However quiet the counters, read the whole list this often when the budget allows
/// (a 304 when nothing changed): holds, releases and updates of pending jobs move no
/// counter. At 20,000 jobs the budget stretches it to minutes.
pub const RESYNC: Duration = Duration::from_secs(30);
/// `update_time` is sent this far before the previous full fetch started: slurmctld's change
/// times have one-second granularity and the two clocks may disagree a little.
const UPDATE_TIME_MARGIN: i64 = 5;
/// A failed full `/jobs` counts as this costly, at most, when pacing the next try.
const FAILED_FULL_COST: Duration = Duration::from_secs(5);
/// A backlog of jobs to read again longer than this many steps' worth is left to
/// `/jobs/state/` or a full `/jobs`.
const BACKLOG_STEPS: usize = 4;
const BACKLOG: &str = "more changes than single reads can follow";
/// Job ids in one `/jobs/state/?job_id=…` (2,000 took slurmrestd 30 ms).
const STATES_PER_REQUEST: usize = 500;
/// An id slurmctld does not know ends the search for new jobs after this many in a row.
const MISSES: u32 = 2;
/// Held jobs read again each step (a few milliseconds of slurmrestd's time each): ten held
/// jobs are all looked at every five steps.
pub const REVIEWS_PER_STEP: usize = 2;

/// The job counters of `/diag`, which only ever grow (until slurmctld resets them at
/// midnight or on `sdiag --reset`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counters {
    submitted: u64,
    started: u64,
    completed: u64,
    canceled: u64,
    failed: u64,
}

impl Counters {
    fn of(d: &Diag) -> Option<Self> {
        Some(Self {
            submitted: d.jobs_submitted?,
            started: d.jobs_started?,
            completed: d.jobs_completed?,
            canceled: d.jobs_canceled?,
            failed: d.jobs_failed?,
        })
    }

    /// What happened since `before`; `None` when a counter went back (a reset: anything may
    /// have happened).
    fn since(&self, before: &Self) -> Option<Self> {
        Some(Self {
            submitted: self.submitted.checked_sub(before.submitted)?,
            started: self.started.checked_sub(before.started)?,
            completed: self.completed.checked_sub(before.completed)?,
            canceled: self.canceled.checked_sub(before.canceled)?,
            failed: self.failed.checked_sub(before.failed)?,
        })
    }

    fn left_pending(&self) -> u64 {
        self.started + self.canceled + self.failed
    }

    fn ended(&self) -> u64 {
        self.completed + self.canceled + self.failed
    }

    fn quiet(&self) -> bool {
        *self == Self::default()
    }
}

/// What one step did to the list.
#[derive(Debug)]
pub enum Synced {
    /// Confirmed as it was.
    Unchanged,
    /// Changed: the list rebuilt (with its uncertainty, if any).
    Changed(Box<Jobs>),
    /// Nothing could be confirmed this time (no counters, and a full `/jobs` must wait its
    /// turn): the data ages.
    Waiting,
}

pub struct JobTracker {
    table: JobTable,
    has_table: bool,
    per_owner: bool,
    /// A site's rules for Kubernetes placeholder jobs.
    origins: OriginRules,
    budget: Budget,
    /// Counters as of the list's last exact state.
    counters: Option<Counters>,
    uncertain: Uncertainty,
    /// Where the search for new jobs goes on, when it stopped short.
    next_id: Option<u64>,
    /// Records to read again (they may have started or ended), oldest first.
    checks: BTreeSet<u64>,
    /// Jobs that left the pending state since the list was last exact (from the counters).
    maybe_left: u64,
    /// Submissions the counters reported less those the search by id found (a job may be
    /// found before the counters that count it are read: then this runs below zero).
    unfound: i64,
    full: Pace,
    states: Pace,
    last_full: Option<Instant>,
    since: Option<i64>,
    /// What one `/job/{id}` takes, smoothed: how many fit a step's budget.
    single_cost: Duration,
    /// Why a full `/jobs` is wanted before its resync time, if it is.
    full_wanted: Option<&'static str>,
    /// The held job read again last: the review of holds goes on after it.
    reviewed: u64,
}

impl JobTracker {
    pub fn new(per_owner: bool, budget: Budget, origins: OriginRules) -> Self {
        Self {
            table: JobTable::default(),
            has_table: false,
            per_owner,
            origins,
            budget,
            counters: None,
            uncertain: Uncertainty::default(),
            next_id: None,
            checks: BTreeSet::new(),
            maybe_left: 0,
            unfound: 0,
            full: Pace::default(),
            states: Pace::default(),
            last_full: None,
            since: None,
            single_cost: Duration::from_millis(5),
            full_wanted: Some("first look"),
            reviewed: 0,
        }
    }

    /// The gap a full `/jobs` must leave after the last one, now.
    pub fn full_gap(&self) -> Option<Duration> {
        self.full.gap()
    }

    /// Forget everything (slurmrestd changed API version).
    pub fn reset(&mut self) {
        *self = Self::new(self.per_owner, self.budget, self.origins.clone());
    }

    /// One step, with `/diag` already read (`None` when it failed or lacks the counters).
    pub async fn step(
        &mut self,
        client: &SlurmClient,
        version: ApiVersion,
        diag: Option<&Diag>,
        interval: Duration,
    ) -> Result<(Synced, JobsEffort)> {
        let mut effort = JobsEffort::default();
        let now_counters = diag.and_then(Counters::of);
        let resync_due = self.last_full.is_none_or(|t| t.elapsed() >= RESYNC);
        let Some(now_counters) = now_counters.filter(|_| self.has_table) else {
            // No list yet, or no counters to follow changes with: full fetches only.
            if !self.full.ready() {
                return Ok((Synced::Waiting, effort));
            }
            effort.full_fetches += 1;
            let synced = self.fetch_full(client, version, now_counters).await?;
            return Ok((synced, effort));
        };
        // Counters first seen now (after a full list read without them): the baseline.
        let before = *self.counters.get_or_insert(now_counters);
        let mut changed = false;
        let d = now_counters.since(&before).unwrap_or_else(|| {
            // The counters were reset (midnight, `sdiag --reset`): what happened since the
            // last look is unknown. New jobs are searched for; every waiting and running
            // job may have moved.
            self.uncertain.unseen_new = true;
            Counters {
                started: self.table.jobs().filter(|j| j.waiting_to_run()).count() as u64,
                completed: self.table.jobs().filter(|j| j.running()).count() as u64,
                ..Counters::default()
            }
        });
        // Work left over from earlier steps goes on even when nothing new happened.
        let outstanding = self.uncertain.unseen_new || !self.checks.is_empty();
        debug!(?d, outstanding, "job counters moved");
        if !d.quiet() || outstanding {
            changed = true;
            let budget = self.singles_per_step(interval);
            let used = self
                .follow(client, version, &d, budget, &mut effort)
                .await?;
            self.single_cost_update(used);
            self.counters = Some(now_counters);
        }
        // Which of the possibly-started jobs did start: `/jobs/state/` (v0.0.40 on), when
        // its turn comes, is far cheaper than the whole list.
        let unsure = self.uncertain.maybe_left > 0 || self.full_wanted == Some(BACKLOG);
        if unsure && version.has_job_states() && self.states.ready() {
            effort.state_fetches += 1;
            self.resolve_with_states(client, version, &mut effort)
                .await?;
            changed = true;
        }
        // Releases move no counter: a few held jobs are read again.
        if self.review_held(client, version, &mut effort).await {
            changed = true;
        }
        // A full list, when wanted (or due) and its turn has come, settles everything.
        if (self.full_wanted.is_some() || resync_due) && self.full.ready() {
            debug!(
                why = self.full_wanted.unwrap_or("resync"),
                "reading the whole job list"
            );
            effort.full_fetches += 1;
            let synced = self.fetch_full(client, version, Some(now_counters)).await?;
            return Ok((synced, effort));
        }
        if changed {
            Ok((Synced::Changed(Box::new(self.build())), effort))
        } else {
            Ok((Synced::Unchanged, effort))
        }
    }

    /// Reads again the next [`REVIEWS_PER_STEP`] held jobs; whether any changed (released,
    /// started, gone). Never an error: a failed read ends the review until the next step.
    async fn review_held(
        &mut self,
        client: &SlurmClient,
        version: ApiVersion,
        effort: &mut JobsEffort,
    ) -> bool {
        let ids = self.table.held_after(self.reviewed, REVIEWS_PER_STEP);
        let started = Instant::now();
        let (mut changed, mut n) = (false, 0);
        for &id in &ids {
            n += 1;
            match self.read_again(client, version, id).await {
                Ok(moved) => changed |= moved,
                // Only a shortcut: the full read still comes, so a failure here costs the
                // list nothing (the requests that keep it say so when slurmrestd fails).
                Err(e) => {
                    debug!(id, error = %e, "reading a held job again failed");
                    break;
                }
            }
            self.reviewed = id;
        }
        effort.single_reads += u64::from(n);
        self.single_cost_update((n, started.elapsed()));
        if changed {
            debug!(?ids, "a held job changed");
        }
        changed
    }

    /// How many `/job/{id}` requests fit this step's share of slurmrestd's time.
    fn singles_per_step(&self, interval: Duration) -> u32 {
        let allowed = interval.as_secs_f64() * self.budget.share();
        let n = allowed / self.single_cost.as_secs_f64().max(0.0005);
        n.clamp(4.0, 200.0) as u32
    }

    fn single_cost_update(&mut self, (n, took): (u32, Duration)) {
        if n > 0 {
            let each = took / n;
            self.single_cost = (self.single_cost * 3 + each) / 4;
        }
    }

    /// Follows what the counters say happened with at most `budget` single-job reads. What
    /// does not fit waits for the next step; a backlog too long to read one by one is left
    /// to `/jobs/state/` or a full `/jobs`. Returns (requests, time they took).
    async fn follow(
        &mut self,
        client: &SlurmClient,
        version: ApiVersion,
        d: &Counters,
        budget: u32,
        effort: &mut JobsEffort,
    ) -> Result<(u32, Duration)> {
        let started = Instant::now();
        let mut used = 0u32;
        // 1. New jobs: the ids after the highest known (array tasks split off when they
        // start take new ids too, so starts may bring new records as well).
        if d.submitted > 0 || d.started > 0 {
            self.unfound += i64::try_from(d.submitted).unwrap_or(i64::MAX);
            self.uncertain.unseen_new = true;
        }
        if self.uncertain.unseen_new {
            let mut id = self
                .next_id
                .take()
                .unwrap_or_else(|| self.table.max_id().map_or(1, |m| m + 1));
            let mut misses = 0;
            // Half the reads at most: the other half re-reads what the new ids change
            // (an array whose tasks split off still lists them as pending).
            let probe_budget = (budget / 2).max(2);
            while misses < MISSES {
                if used >= probe_budget {
                    // More may follow: go on from here next time.
                    self.next_id = Some(id);
                    break;
                }
                used += 1;
                match fetch::job(client, version, id).await? {
                    Some(found) => {
                        // `/diag` counts an array's tasks as submissions: so do we.
                        let mut submissions = 0;
                        for j in found.jobs() {
                            if let Some(parent) = j.array_parent().filter(|p| *p != id) {
                                // Until the array is read again it still counts this task
                                // as pending: one that may have left.
                                self.checks.insert(parent);
                                if self.table.get(parent).is_some_and(|a| a.waiting_to_run()) {
                                    self.maybe_left += 1;
                                }
                            } else {
                                submissions += j.submissions();
                            }
                        }
                        self.unfound = self
                            .unfound
                            .saturating_sub(i64::try_from(submissions).unwrap_or(i64::MAX));
                        self.table.merge(&found);
                        misses = 0;
                    }
                    None => misses += 1,
                }
                id += 1;
            }
            if misses >= MISSES {
                debug!(unfound = self.unfound, next = id, "searched new job ids");
                self.uncertain.unseen_new = false;
                if self.unfound > 0 {
                    // Submissions not found by id (ids skipped, federation...): only the
                    // whole list can tell.
                    self.full_wanted = Some("new jobs not found by id");
                    self.uncertain.unseen_new = true;
                }
            }
        }
        // 2. Jobs that may have started or ended: those listed as waiting to run (and, when
        // jobs ended, those running) are read again.
        if d.left_pending() > 0 {
            self.maybe_left += d.left_pending();
            self.checks.extend(
                self.table
                    .jobs()
                    .filter(|j| j.waiting_to_run())
                    .map(|j| j.id),
            );
        }
        if d.ended() > 0 {
            self.checks
                .extend(self.table.jobs().filter(|j| j.running()).map(|j| j.id));
        }
        let per_request = if version.has_job_states() {
            STATES_PER_REQUEST
        } else {
            1
        };
        if self.checks.len() > BACKLOG_STEPS * budget as usize * per_request {
            // Too many to read one by one: which of them changed is for `/jobs/state/` or a
            // full `/jobs` to say (counts of running jobs lag until then).
            self.full_wanted = Some(BACKLOG);
        } else {
            while used < budget && !self.checks.is_empty() {
                used += 1;
                self.check_some(client, version).await?;
            }
        }
        // Waiting jobs not read again yet may be among those that left.
        let unread_waiting = self
            .checks
            .iter()
            .filter(|id| self.table.get(**id).is_some_and(|j| j.waiting_to_run()))
            .count() as u64;
        if unread_waiting == 0 {
            self.maybe_left = 0;
        }
        self.uncertain.maybe_left = self.maybe_left.min(unread_waiting);
        effort.single_reads += u64::from(used);
        Ok((used, started.elapsed()))
    }

    /// Reads again what one request can: on v0.0.40 on, the states of up to
    /// [`STATES_PER_REQUEST`] plain jobs at once (`/jobs/state/?job_id=…`); otherwise, and
    /// for arrays (whose pending tasks only the whole record tells), one `/job/{id}`.
    async fn check_some(&mut self, client: &SlurmClient, version: ApiVersion) -> Result<()> {
        let is_array =
            |t: &JobTable, id: u64| t.get(id).is_some_and(|j| !j.array_task_string.is_empty());
        if version.has_job_states() {
            let plain: Vec<u64> = self
                .checks
                .iter()
                .copied()
                .filter(|id| !is_array(&self.table, *id))
                .take(STATES_PER_REQUEST)
                .collect();
            if !plain.is_empty() {
                if let Some(states) = fetch::job_states(client, version, &plain).await? {
                    self.apply_states(&plain, &states);
                }
                for id in plain {
                    self.checks.remove(&id);
                }
                return Ok(());
            }
        }
        let Some(id) = self.checks.pop_first() else {
            return Ok(());
        };
        self.read_again(client, version, id).await?;
        Ok(())
    }

    /// Reads job `id` again with `/job/{id}` and puts what it says in the table (gone when
    /// slurmctld no longer knows it); whether the table changed.
    async fn read_again(
        &mut self,
        client: &SlurmClient,
        version: ApiVersion,
        id: u64,
    ) -> Result<bool> {
        let before = self.table.get(id).cloned();
        let more = match fetch::job(client, version, id).await? {
            Some(found) => {
                self.table.merge(&found);
                found.len() > 1
            }
            None => {
                self.table.remove(id);
                false
            }
        };
        Ok(more || self.table.get(id) != before.as_ref())
    }

    /// `/jobs/state/` says which listed jobs changed state; new ids among them are read.
    async fn resolve_with_states(
        &mut self,
        client: &SlurmClient,
        version: ApiVersion,
        effort: &mut JobsEffort,
    ) -> Result<()> {
        let started = Instant::now();
        let Some(states) = fetch::job_states(client, version, &[]).await? else {
            return Ok(());
        };
        self.states.done(started, started.elapsed(), self.budget);
        let known: BTreeSet<u64> = states.iter().map(|e| e.id).collect();
        let unknown: Vec<u64> = known
            .iter()
            .copied()
            .filter(|id| self.table.get(*id).is_none())
            .collect();
        let ids: Vec<u64> = self.table.jobs().map(|j| j.id).collect();
        self.apply_states(&ids, &states);
        // Ids the search missed: read a few, leave the rest to the next full list. (A
        // split task named after its array on v0.0.40 is not unknown: its record is.)
        let unknown: Vec<u64> = unknown
            .into_iter()
            .filter(|id| self.table.get(*id).is_none())
            .filter(|id| !self.table.jobs().any(|j| j.array_job_id == Some(*id)))
            .collect();
        if unknown.len() > 16 {
            self.uncertain.unseen_new = true;
            self.full_wanted = Some("many jobs unknown to the list");
        }
        for id in unknown.into_iter().take(16) {
            effort.single_reads += 1;
            if let Some(found) = fetch::job(client, version, id).await? {
                self.table.merge(&found);
            }
        }
        self.checks.clear();
        self.maybe_left = 0;
        self.uncertain.maybe_left = 0;
        if self.full_wanted == Some(BACKLOG) {
            self.full_wanted = None;
        }
        Ok(())
    }

    /// What `/jobs/state/` said of the jobs `ids`: a new state, or gone when no line names
    /// them. A pending job that started keeps what it asked for (the next full list brings
    /// its allocation: nodes, end time).
    fn apply_states(&mut self, ids: &[u64], states: &[StateEntry]) {
        for id in ids {
            let Some(job) = self.table.get(*id) else {
                continue;
            };
            match states.iter().find(|e| e.names(job)).map(|e| e.state) {
                None => {
                    self.table.remove(*id);
                }
                Some(state) if job.state != Some(state) => self.table.set_state(*id, state),
                Some(_) => {}
            }
        }
    }

    async fn fetch_full(
        &mut self,
        client: &SlurmClient,
        version: ApiVersion,
        counters: Option<Counters>,
    ) -> Result<Synced> {
        let started = Instant::now();
        let request_start = unix_now() - UPDATE_TIME_MARGIN;
        let since = self.since.filter(|_| self.has_table);
        let result = fetch::job_table(client, version, since).await;
        let took = started.elapsed();
        let outcome = match result {
            Ok(o) => {
                self.full.done(started, took, self.budget);
                o
            }
            Err(e) => {
                // Try again within minutes, not the hour a failed 100,000-job request would
                // earn (at the interval if slurmrestd turned it away unserved); the next
                // answer must be complete, not "unchanged since".
                let cost = super::pace::error_cost(took.min(FAILED_FULL_COST), &e);
                self.full.done(started, cost, self.budget);
                self.since = None;
                return Err(e);
            }
        };
        self.last_full = Some(Instant::now());
        self.counters = counters;
        self.full_wanted = None;
        self.next_id = None;
        self.checks.clear();
        self.maybe_left = 0;
        self.unfound = 0;
        self.since = Some(request_start);
        let was_exact = self.uncertain.exact();
        self.uncertain = Uncertainty::default();
        match outcome {
            Outcome::Unchanged if was_exact => Ok(Synced::Unchanged),
            Outcome::Unchanged => Ok(Synced::Changed(Box::new(self.build()))),
            Outcome::Fresh { data, .. } => {
                self.table = data;
                self.has_table = true;
                self.table.compact();
                Ok(Synced::Changed(Box::new(self.build())))
            }
        }
    }

    fn build(&self) -> Jobs {
        let mut jobs = self.table.build(self.per_owner, &self.origins);
        jobs.uncertain = self.uncertain;
        jobs
    }
}

pub(super) fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}
