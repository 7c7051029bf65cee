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
//! Above `--request-max-jobs` live jobs (`/diag`'s count) no request asks for every job:
//! the list is read id by id from the newest down ([`sweep`]), published as a lower
//! bound while it fills; `/jobs/state/` goes by id lists of the listed jobs; and instead of
//! the periodic full `/jobs` the listed jobs are read again, a few each step, round the list.
//!
//! Every request that is not cheap waits its turn in a [`Pace`]: a request that took `d`
//! is not repeated for `d × (1/budget − 1)`, so slurmrestd spends at most `budget` of its
//! time on each kind of request we make.
//!
//! The requests go through [`JobSource`] ([`Rest`](super::source::Rest) in production), so
//! the decisions are unit-tested against a slurmctld in memory (`collect/source/memory.rs`,
//! from `tests/`).
//!
//! This file holds the tracker, its step and what both ways of keeping the list share; the
//! short list's ways are in `follow.rs` (the counters followed, the whole list read at its
//! turn), the long list's in `long.rs` (read id by id with `sweep.rs`, its own state in one
//! `LongRead`).

mod follow;
mod long;
mod sweep;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::time::{Duration, Instant, SystemTime};

use tracing::debug;

use self::long::LongRead;
use super::pace::{Budget, Pace};
use super::source::JobSource;
use crate::error::Result;
use crate::model::job_table::JobTable;
use crate::model::origin::OriginRules;
use crate::model::{Diag, Jobs, Uncertainty};
use crate::snapshot::{JobListRead, JobsEffort};

pub use self::follow::REVIEWS_PER_STEP;
pub use self::long::ACCOUNTING_RECHECK;

/// However quiet the counters, read the whole list this often when the budget allows
/// (a 304 when nothing changed): holds, releases and updates of pending jobs move no
/// counter. At 20,000 jobs the budget stretches it to minutes.
pub const RESYNC: Duration = Duration::from_secs(30);
/// Live jobs above which the list is never asked for in one answer, unless set otherwise:
/// Slurm's own default `MaxJobCount`, so a site that never raised it never needs the sweep.
/// (24.11's slurmrestd takes some 60 KB per job to build a full `/jobs`.)
pub const REQUEST_MAX_JOBS: u64 = 10_000;
/// Why a backlog of jobs to read again is left to `/jobs/state/` or a full `/jobs`.
const BACKLOG: &str = "more changes than single reads can follow";
/// Why the whole list is read after a backfill cycle. Such a read asks for every record, not
/// those "changed since": slurmctld moves its last-change time when a job is submitted,
/// starts or ends, not when the backfill scheduler plans a start, so an answer "unchanged
/// since" would keep the plans of the cycle before.
const REPLANNED: &str = "a backfill cycle planned";
/// Ids in one `/jobs/state/?job_id=…` of a list too long for one answer (2,000 took 24.11's
/// slurmrestd 30 ms of CPU and 180 KB at 100,000 jobs).
const IDS_PER_REQUEST: usize = 2_000;
/// How long a start waits for slurmctld's first count of its jobs (taken within seconds of
/// its own start, then every 30 s).
const COUNT_WAIT: Duration = Duration::from_secs(60);

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
    /// Steps in a row that ended with `unfound` above zero.
    unfound_steps: u32,
    /// Look once among the ids slurmctld lists for jobs the table lacks, even with nothing
    /// unfound: a read id by id that just completed cannot tell a job given out in its last
    /// step below a newer one it read.
    verify_listed: bool,
    /// `/jobs/state/` listings made this step to find such jobs, and their time (kept out of
    /// the single reads' cost: one listing is not a single read).
    listings: (u32, Duration),
    full: Pace,
    states: Pace,
    last_full: Option<Instant>,
    since: Option<i64>,
    /// What one `/job/{id}` takes, smoothed: how many fit a step's budget.
    single_cost: Duration,
    /// Why a full `/jobs` is wanted before its resync time, if it is.
    full_wanted: Option<&'static str>,
    /// Backfill cycles `/diag` counted at the last look: each plans the starts of waiting
    /// jobs anew (and the nodes held for them), which moves no job counter.
    bf_cycles: Option<u64>,
    /// The held job read again last: the review of holds goes on after it.
    reviewed: u64,
    /// `/diag` last counted more live jobs than the long list's bound: no full `/jobs`.
    large: bool,
    /// What only the long list (read id by id) keeps.
    long: LongRead,
    created: Instant,
}

impl JobTracker {
    pub fn new(per_owner: bool, budget: Budget, origins: OriginRules, max_jobs: u64) -> Self {
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
            unfound_steps: 0,
            verify_listed: false,
            listings: (0, Duration::ZERO),
            full: Pace::default(),
            states: Pace::default(),
            last_full: None,
            since: None,
            single_cost: Duration::from_millis(5),
            full_wanted: Some("first look"),
            bf_cycles: None,
            reviewed: 0,
            large: false,
            long: LongRead::new(max_jobs),
            created: Instant::now(),
        }
    }

    /// The gap a full `/jobs` must leave after the last one, now.
    pub fn full_gap(&self) -> Option<Duration> {
        self.full.gap()
    }

    /// How the list is read now.
    pub fn read(&self) -> JobListRead {
        JobListRead {
            by_id: !self.whole(),
            accounting: self.long.accounting,
            unaccounted: self.long.unaccounted,
        }
    }

    /// The list is asked for in one answer: it is short, or nothing says where its ids are
    /// (no accounting, and no `/jobs/state/` before v0.0.40).
    fn whole(&self) -> bool {
        !self.large || !(self.long.accounting_helps() || self.long.lists_states)
    }

    /// Forget everything (slurmrestd changed API version).
    pub fn reset(&mut self) {
        *self = Self::new(
            self.per_owner,
            self.budget,
            self.origins.clone(),
            self.long.max_jobs,
        );
    }

    /// One step, with `/diag` already read (`None` when it failed or lacks the counters).
    pub async fn step(
        &mut self,
        src: &impl JobSource,
        diag: Option<&Diag>,
        interval: Duration,
    ) -> Result<(Synced, JobsEffort)> {
        match diag.map(|d| (d.live_jobs(), d.jobs_counted_at)) {
            Some((Some(live), Some(_))) => self.large = live > self.long.max_jobs,
            // slurmctld has not counted its jobs since it started (it does within seconds):
            // how long the list is is not known yet, so it is not asked for whole.
            Some((Some(_), None)) if !self.has_table && self.created.elapsed() < COUNT_WAIT => {
                return Ok((Synced::Waiting, JobsEffort::default()));
            }
            _ => {}
        }
        self.long.lists_states = src.has_job_states();
        if self.long.sweep.is_none() {
            self.recount_short(diag);
        }
        if self.large && !self.long.accounting_helps() {
            self.recheck_accounting(src).await;
        }
        let whole = self.whole();
        if let Some(cycles) = diag.and_then(|d| d.bf_cycles) {
            // A list read whole is read again after a backfill cycle, as the budget allows, so
            // the plans are current; a list read id by id gets them as its review comes round.
            if whole
                && self.bf_cycles.is_some_and(|c| c != cycles)
                && self.table.jobs().any(|j| j.waiting_to_run())
            {
                self.full_wanted.get_or_insert(REPLANNED);
            }
            self.bf_cycles = Some(cycles);
        }
        if self.long.sweep.is_some() || (!whole && (!self.has_table || self.long.resweep)) {
            return self.sweep_step(src, diag, interval).await;
        }
        let mut effort = JobsEffort::default();
        let now_counters = diag.and_then(Counters::of);
        let resync_due = self.last_full.is_none_or(|t| t.elapsed() >= RESYNC);
        let Some(now_counters) = now_counters.filter(|_| self.has_table) else {
            // No list yet, or no counters to follow changes with: full fetches only (never
            // of a list too long for one answer).
            if !self.full.ready() || !whole {
                return Ok((Synced::Waiting, effort));
            }
            effort.full_fetches += 1;
            let synced = self.fetch_full(src, now_counters).await?;
            return Ok((synced, effort));
        };
        let mut changed = self
            .follow_counters(src, now_counters, interval, &mut effort)
            .await?;
        // Which of the possibly-started jobs did start: `/jobs/state/` (v0.0.40 on), when
        // its turn comes, is far cheaper than the whole list.
        let unsure = self.uncertain.maybe_left > 0 || self.full_wanted == Some(BACKLOG);
        let by_ids = whole || src.filters_job_states();
        if unsure && src.has_job_states() && by_ids && self.states.ready() {
            effort.state_fetches += 1;
            self.resolve_with_states(src, &mut effort).await?;
            changed = true;
        }
        // Releases move no counter: a few held jobs are read again.
        if self.review_held(src, &mut effort).await {
            changed = true;
        }
        if !whole {
            // No whole read: what only one could settle is read id by id again, and the
            // listed jobs are read again round the list instead of the periodic full list.
            // At the full read's pace: a read of the whole list is as costly either way.
            if let Some(why) = self.full_wanted.filter(|w| *w != BACKLOG)
                && self.full.ready()
            {
                debug!(why, "reading the job list id by id again");
                self.long.resweep = true;
            }
            if self.review_listed(src, interval, &mut effort).await {
                changed = true;
            }
        } else if (self.full_wanted.is_some() || resync_due) && self.full.ready() {
            // A full list, when wanted (or due) and its turn has come, settles everything.
            debug!(
                why = self.full_wanted.unwrap_or("resync"),
                "reading the whole job list"
            );
            effort.full_fetches += 1;
            let synced = self.fetch_full(src, Some(now_counters)).await?;
            return Ok((synced, effort));
        }
        if changed {
            Ok((Synced::Changed(Box::new(self.build())), effort))
        } else {
            Ok((Synced::Unchanged, effort))
        }
    }

    /// Follows what `/diag`'s job counters say moved since the last look (new jobs found,
    /// jobs that may have started or ended read again), within the step's budget of single
    /// reads; whether anything was looked at.
    async fn follow_counters(
        &mut self,
        src: &impl JobSource,
        now_counters: Counters,
        interval: Duration,
        effort: &mut JobsEffort,
    ) -> Result<bool> {
        // Counters first seen now (after a full list read without them): the baseline.
        let before = *self.counters.get_or_insert(now_counters);
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
            let budget = self.singles_per_step(interval);
            let used = self.follow(src, &d, budget, effort).await?;
            self.single_cost_update(used);
            self.counters = Some(now_counters);
        }
        Ok(!d.quiet() || outstanding)
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

    fn build(&self) -> Jobs {
        let mut jobs = self.table.build(self.per_owner, &self.origins);
        jobs.uncertain = self.uncertain;
        jobs.uncertain.unread = self.long.unread;
        jobs
    }
}

pub(super) fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}
