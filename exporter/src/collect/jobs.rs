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
//! the list is read id by id from the newest down ([`super::sweep`]), published as a lower
//! bound while it fills; `/jobs/state/` goes by id lists of the listed jobs; and instead of
//! the periodic full `/jobs` the listed jobs are read again, a few each step, round the list.
//!
//! Every request that is not cheap waits its turn in a [`Pace`]: a request that took `d`
//! is not repeated for `d × (1/budget − 1)`, so slurmrestd spends at most `budget` of its
//! time on each kind of request we make.
//!
//! The requests go through [`JobSource`] ([`Rest`](super::source::Rest) in production), so the decisions are
//! unit-tested against a slurmctld in memory (`tests` below).

use std::collections::BTreeSet;
use std::time::{Duration, Instant, SystemTime};

use tracing::{debug, info, warn};

use super::pace::{Budget, Pace};
use super::source::JobSource;
use super::sweep::{self, Sweep};
use crate::error::Result;
use crate::model::job_table::{JobTable, StateEntry};
use crate::model::origin::OriginRules;
use crate::model::{Diag, Jobs, Uncertainty};
use crate::slurm::fetch::Outcome;
use crate::snapshot::{Accounting, JobListRead, JobsEffort};

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
/// Why the whole list is read after a backfill cycle. Such a read asks for every record, not
/// those "changed since": slurmctld moves its last-change time when a job is submitted,
/// starts or ends, not when the backfill scheduler plans a start, so an answer "unchanged
/// since" would keep the plans of the cycle before.
const REPLANNED: &str = "a backfill cycle planned";
/// Job ids in one `/jobs/state/?job_id=…` (2,000 took slurmrestd 30 ms).
const STATES_PER_REQUEST: usize = 500;
/// An id slurmctld does not know ends the search for new jobs after this many in a row.
const MISSES: u32 = 2;
/// Live jobs above which the list is never asked for in one answer, unless set otherwise:
/// Slurm's own default `MaxJobCount`, so a site that never raised it never needs the sweep.
/// (24.11's slurmrestd takes some 60 KB per job to build a full `/jobs`.)
pub const REQUEST_MAX_JOBS: u64 = 10_000;
/// Ids in one `/jobs/state/?job_id=…` of a list too long for one answer (2,000 took 24.11's
/// slurmrestd 30 ms of CPU and 180 KB at 100,000 jobs).
const IDS_PER_REQUEST: usize = 2_000;
/// The share of each interval a list too long for one answer is read in, one request at a
/// time, until it is first exact.
const START_SHARE: f64 = 0.8;
/// Accounting that fails (slurmdbd down) is asked this many steps in a row where the ids are
/// before the list is read whole instead. One that is not served (slurmrestd without its
/// slurmdbd plugin: 404) is a configuration, not a blip: the list is read whole at once.
const SPAN_TRIES: u32 = 3;
/// Accounting found absent is asked again this long after (one cheap request): slurmrestd may
/// have been restarted with its slurmdbd plugin, or slurmdbd may be back.
pub const ACCOUNTING_RECHECK: Duration = Duration::from_secs(600);
/// How long a start waits for slurmctld's first count of its jobs (taken within seconds of
/// its own start, then every 30 s).
const COUNT_WAIT: Duration = Duration::from_secs(60);
/// Held jobs read again each step (a few milliseconds of slurmrestd's time each): ten held
/// jobs are all looked at every five steps.
pub const REVIEWS_PER_STEP: usize = 2;
/// Jobs slurmctld lists that the table lacks, read in one step whatever the step's budget:
/// each is demand nobody has seen, and a few milliseconds of slurmrestd's time. (When
/// slurmrestd is slow the budget sits at its floor, and the two misses that end a search for
/// new ids would spend it all: such a job would wait minutes for the next read of the list.)
const UNLISTED_READS: u32 = 16;
/// How long a read id by id short of slurmctld's count goes on above its top, as slurmctld
/// gives out ids, before it ends and says it is short.
const SHORT_READ: Duration = Duration::from_secs(600);
/// Steps in a row with submissions counted and not found, while new ids keep the search busy
/// (it never ends on misses), before they are looked for among the ids slurmctld lists.
const UNFOUND_STEPS: u32 = 3;

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
    /// Live jobs above which the list is never asked for in one answer.
    max_jobs: u64,
    /// `/diag` last counted more live jobs than `max_jobs`: no full `/jobs`.
    large: bool,
    /// The read id by id under way, and the counters when it began.
    sweep: Option<(Sweep, Option<Counters>)>,
    /// The list is read id by id again (something only a whole read could settle).
    resweep: bool,
    /// What accounting showed when a long list last needed it; the list is read whole, however
    /// long, while it cannot say where the ids are.
    accounting: Accounting,
    /// When accounting was last found absent (asked again [`ACCOUNTING_RECHECK`] after).
    accounting_checked: Option<Instant>,
    /// slurmrestd lists every job's id and state (`/jobs/state/`, v0.0.40 on): without
    /// accounting, that says where a long list's ids are.
    lists_states: bool,
    /// While the list is read id by id: `/diag`'s submissions when the jobs given out since it
    /// began were last all read.
    new_read_at: Option<u64>,
    /// Live jobs slurmctld counts that the sweep has not read yet.
    unread: u64,
    /// Ids slurmctld had given out above the newest accounting knew, when the list was last
    /// read id by id (slurmdbd behind).
    unaccounted: u64,
    /// The listed job read again last, round the list (a large list's resync).
    reviewed_all: u64,
    /// Steps in a row accounting could not say where the ids are.
    span_failures: u32,
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
            max_jobs,
            large: false,
            sweep: None,
            resweep: false,
            accounting: Accounting::Unknown,
            accounting_checked: None,
            lists_states: false,
            new_read_at: None,
            unread: 0,
            unaccounted: 0,
            reviewed_all: 0,
            span_failures: 0,
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
            accounting: self.accounting,
            unaccounted: self.unaccounted,
        }
    }

    /// Accounting can say where a long list's ids are (or has not been asked yet).
    fn accounting_helps(&self) -> bool {
        matches!(self.accounting, Accounting::Unknown | Accounting::Served)
    }

    /// The list is asked for in one answer: it is short, or nothing says where its ids are
    /// (no accounting, and no `/jobs/state/` before v0.0.40).
    fn whole(&self) -> bool {
        !self.large || !(self.accounting_helps() || self.lists_states)
    }

    /// Forget everything (slurmrestd changed API version).
    pub fn reset(&mut self) {
        *self = Self::new(
            self.per_owner,
            self.budget,
            self.origins.clone(),
            self.max_jobs,
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
            Some((Some(live), Some(_))) => self.large = live > self.max_jobs,
            // slurmctld has not counted its jobs since it started (it does within seconds):
            // how long the list is is not known yet, so it is not asked for whole.
            Some((Some(_), None)) if !self.has_table && self.created.elapsed() < COUNT_WAIT => {
                return Ok((Synced::Waiting, JobsEffort::default()));
            }
            _ => {}
        }
        self.lists_states = src.has_job_states();
        if self.sweep.is_none() {
            self.recount_short(diag);
        }
        if self.large && !self.accounting_helps() {
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
        if self.sweep.is_some() || (!whole && (!self.has_table || self.resweep)) {
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
                self.resweep = true;
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

    /// One step of reading the list id by id, begun here when none is under way: reads for
    /// most of the interval, then publishes what it has (a lower bound until complete).
    async fn sweep_step(
        &mut self,
        src: &impl JobSource,
        diag: Option<&Diag>,
        interval: Duration,
    ) -> Result<(Synced, JobsEffort)> {
        let mut effort = JobsEffort::default();
        let (mut sweep, counters) = match self.sweep.take() {
            Some(s) => s,
            None => match self.begin_sweep(src, diag, &mut effort).await? {
                Some(s) => (s, diag.and_then(Counters::of)),
                None => return Ok((Synced::Waiting, effort)),
            },
        };
        // Read until the list holds as many live jobs as slurmctld counted — a count taken
        // after the sweep began, so every job it counts has an id the sweep reads — or every
        // id down to the oldest is read.
        let counted = diag.and_then(Diag::live_jobs);
        // Each job that ended since the sweep began may still be in the table, read live in
        // an earlier step: it must not stand in for a live job not read yet. (No counters
        // then or now, or a reset between: no count to stop at.)
        let counted_since = diag.and_then(|d| {
            let at = d.jobs_counted_at.filter(|t| *t >= sweep.began)?;
            Some((d.live_jobs()?, at))
        });
        let stop_at = counted_since.and_then(|(c, at)| {
            let ended = Counters::of(diag?)?.since(counters.as_ref()?)?.ended();
            Some((c + ended, at))
        });
        let deadline = Instant::now() + interval.mul_f64(START_SHARE);
        let window = IDS_PER_REQUEST.min(self.max_jobs as usize).max(1);
        let reading = Instant::now();
        let mut ran = self
            .read_new_first(src, &sweep, diag, interval, &mut effort)
            .await;
        if ran.is_ok() {
            ran = sweep
                .run(
                    src,
                    &mut self.table,
                    (window, stop_at),
                    deadline,
                    &mut effort,
                )
                .await;
        }
        let mut complete = sweep.done();
        // Live jobs slurmctld counted that the read has not found: their ids lie above its top
        // (slurmdbd behind slurmctld), so it goes on above it as slurmctld gives ids out, for
        // a while; once, in any case, for the ids given out while it read.
        let short = stop_at.map_or(0, |(c, at)| {
            c.saturating_sub(self.table.live_tasks_submitted_by(at - 1))
        });
        let read_for = unix_now() - sweep.began;
        let again = short > 0 && read_for < SHORT_READ.as_secs() as i64;
        if ran.is_ok() && complete && (!sweep.topped_up() || again) {
            ran = self
                .top_up(src, &mut sweep, short, &mut effort)
                .await
                .map(|extended| {
                    complete = !extended;
                });
        }
        sweep.work += reading.elapsed();
        if let Err(e) = ran {
            self.sweep = Some((sweep, counters));
            return Err(e);
        }
        let found = self.table.live_tasks();
        if !complete {
            self.unread = counted.map_or(1, |c| c.saturating_sub(found).max(1));
            self.uncertain.unseen_new = true;
            debug!(
                found,
                counted,
                ids_left = sweep.left(),
                "job list read id by id so far"
            );
            self.sweep = Some((sweep, counters));
            return Ok((Synced::Changed(Box::new(self.build())), effort));
        }
        // New jobs are followed from counters read after the read's last look, so that every
        // job it read is among their submissions: one given out between this step's `/diag`
        // and that look would otherwise be counted again, as a job not found. (If `/diag`
        // fails now, this step's: at worst the list is read again.)
        let after = src.diag().await.ok().flatten();
        self.sweep_complete(sweep, counters, after.as_ref().or(diag), counted_since);
        Ok((Synced::Changed(Box::new(self.build())), effort))
    }

    /// Where a long list's ids are: accounting's range of them, or without accounting
    /// (v0.0.40 on) every live id one `/jobs/state/` names; `None` when nothing says (the list
    /// is then read whole).
    async fn begin_sweep(
        &mut self,
        src: &impl JobSource,
        diag: Option<&Diag>,
        effort: &mut JobsEffort,
    ) -> Result<Option<Sweep>> {
        let live = diag.and_then(Diag::live_jobs).unwrap_or(0);
        let began = unix_now();
        // Jobs given out from now on are read ahead of the sweep (those before are in it).
        self.new_read_at = diag.and_then(Counters::of).map(|c| c.submitted);
        if self.accounting_helps() {
            match sweep::span(src, live, effort).await {
                Ok(Some(span)) => {
                    self.span_failures = 0;
                    self.accounting = Accounting::Served;
                    let newest = self.slurmctlds_newest(src, span, live, effort).await?;
                    self.unaccounted = newest - span.newest;
                    info!(
                        live,
                        max = self.max_jobs,
                        oldest = span.oldest,
                        newest,
                        accounting_newest = span.newest,
                        dbd_queue = diag.and_then(|d| d.dbd_agent_queue_size),
                        "more live jobs than --request-max-jobs: reading the job list id by id, newest first"
                    );
                    let read = sweep::Span { newest, ..span };
                    return Ok(Some(Sweep::new(read, began).accounted_to(span.newest)));
                }
                Err(e) if !e.not_served() && self.span_failures + 1 < SPAN_TRIES => {
                    // Perhaps a blip: asked again next step.
                    self.span_failures += 1;
                    return Err(e);
                }
                found => {
                    let (state, why) = match found {
                        Err(e) if e.not_served() => (Accounting::NotServed, e.to_string()),
                        Err(e) => (Accounting::Failing, e.to_string()),
                        _ => (Accounting::Failing, "it has no record of any job id".into()),
                    };
                    self.accounting_absent(state, live, &why);
                }
            }
        }
        if !self.lists_states {
            return Ok(None);
        }
        effort.state_fetches += 1;
        let Some(states) = src.job_states(&[]).await? else {
            return Ok(None);
        };
        let sweep = Sweep::listed(states.iter().map(|e| e.id).collect(), began);
        if let Some(s) = &sweep {
            info!(
                live,
                max = self.max_jobs,
                newest = s.top(),
                "more live jobs than --request-max-jobs: reading the job list id by id, newest first, as /jobs/state/ lists them"
            );
        }
        Ok(sweep)
    }

    /// The newest id to read from: slurmctld's, which is accounting's when slurmdbd keeps up.
    /// While it is behind, slurmctld has given out ids accounting has no record of yet: its
    /// newest (found by [`sweep::newest_known`]; asked every time, since `/diag`'s DBD agent
    /// queue does not say it: 22.05 keeps job records it could not send out of that queue),
    /// and at least as many ids above accounting's oldest as slurmctld counts live jobs (each
    /// has an id of its own).
    async fn slurmctlds_newest(
        &mut self,
        src: &impl JobSource,
        span: sweep::Span,
        live: u64,
        effort: &mut JobsEffort,
    ) -> Result<u64> {
        let known = sweep::newest_known(src, span.newest, effort).await?;
        let by_count = span.oldest.saturating_add(live.saturating_sub(1));
        Ok(known.max(by_count.min(sweep::MAX_JOB_ID)).max(span.newest))
    }

    /// Jobs given out since the read began are read ahead of it, within a step of the counters
    /// saying so, whatever is left below: their demand counts at once (a lower bound, as all
    /// of a list being read is).
    async fn read_new_first(
        &mut self,
        src: &impl JobSource,
        sweep: &Sweep,
        diag: Option<&Diag>,
        interval: Duration,
        effort: &mut JobsEffort,
    ) -> Result<()> {
        let Some(submitted) = diag.and_then(Counters::of).map(|c| c.submitted) else {
            return Ok(());
        };
        if self.new_read_at == Some(submitted) && self.next_id.is_none() {
            return Ok(());
        }
        let above = self.table.max_id().unwrap_or(0).max(sweep.top()) + 1;
        self.next_id = Some(self.next_id.map_or(above, |n| n.max(above)));
        let used = self
            .search_new(src, (self.singles_per_step(interval) / 2).max(2))
            .await?;
        effort.single_reads += u64::from(used);
        if self.next_id.is_none() {
            self.new_read_at = Some(submitted);
        }
        Ok(())
    }

    /// At the sweep's end, once: the ids given out while it read, down to its old top (short
    /// jobs among them may be gone already, which would stop the search for new jobs short
    /// of live ones above them). Ids given out during that short read are recent, still known
    /// to slurmctld, and the search for new jobs finds them (a busy queue gets new ids every
    /// step, so reading on until none came would never end). Whether it goes on.
    async fn top_up(
        &mut self,
        src: &impl JobSource,
        sweep: &mut Sweep,
        short: u64,
        effort: &mut JobsEffort,
    ) -> Result<bool> {
        let top = sweep.top();
        if sweep.is_listed() {
            effort.state_fetches += 1;
            if let Some(states) = src.job_states(&[]).await? {
                sweep.extend_listed(states.iter().map(|e| e.id).collect(), short > 0);
            }
        } else {
            let mut newest = top;
            match sweep::newest_above(src, top, effort).await {
                Ok(n) => newest = n,
                // Gone meanwhile: what came while it read is left to slurmctld and the search
                // for new jobs; the next long read goes by `/jobs/state/` or whole.
                Err(e) if e.not_served() => {
                    let live = self.table.live_tasks();
                    self.accounting_absent(Accounting::NotServed, live, &e.to_string());
                }
                Err(e) => return Err(e),
            }
            // Accounting may still be behind: slurmctld says where its ids end.
            newest = sweep::newest_known(src, newest, effort).await?;
            if newest > top {
                sweep.extend(newest, short > 0);
            }
        }
        let extended = sweep.top() > top;
        if extended {
            debug!(
                from = top,
                to = sweep.top(),
                "reading the ids given out meanwhile"
            );
        }
        Ok(extended)
    }

    /// The sweep read every id: the list is complete, and from now on kept as a short one
    /// is, with nothing asking for every job.
    fn sweep_complete(
        &mut self,
        sweep: Sweep,
        counters: Option<Counters>,
        diag: Option<&Diag>,
        counted_since: Option<(u64, i64)>,
    ) {
        let found = self.table.live_tasks();
        let short = counted_since.map_or(0, |(c, at)| {
            c.saturating_sub(self.table.live_tasks_submitted_by(at))
        });
        if let Some((counted, at)) = counted_since.filter(|_| short > 0) {
            warn!(
                found,
                counted,
                counted_at = at,
                newest = sweep.top(),
                accounting_newest = sweep.top().saturating_sub(self.unaccounted),
                "read every job id up to slurmctld's newest with {short} fewer live jobs than it counts \
                 (jobs this user cannot see, or ids it gave out and shows no more): they stay counted \
                 as unread (slurm_exporter_jobs_unread) and the demand a lower bound until its next \
                 count matches the list, or the list is read again"
            );
        } else {
            info!(
                found,
                jobs = self.table.len(),
                "job list read id by id: complete"
            );
        }
        // What moved while the sweep read is followed from the counters of its start: the
        // starts and ends (jobs read early may have started since). Submissions are counted
        // from this step's: those since are searched for after the newest id read.
        let mut counters = counters;
        if let (Some(c), Some(now)) = (counters.as_mut(), diag.and_then(Counters::of)) {
            c.submitted = now.submitted;
        }
        self.has_table = true;
        self.resweep = false;
        self.full_wanted = None;
        self.counters = counters;
        // Another read of the whole list waits its turn as a full `/jobs` would.
        let began = Instant::now().checked_sub(sweep.work);
        self.full
            .done(began.unwrap_or_else(Instant::now), sweep.work, self.budget);
        // Short of the count: the jobs not found are looked for as unfound submissions are
        // (the search for new ids, the ids slurmctld lists, the next read of the list), and
        // each new count of slurmctld's says whether they are still missing.
        self.unread = short;
        self.next_id = None;
        self.new_read_at = None;
        self.checks.clear();
        self.maybe_left = 0;
        self.unfound = i64::try_from(short).unwrap_or(i64::MAX);
        self.verify_listed = self.lists_states;
        self.last_full = Some(Instant::now());
        self.uncertain = Uncertainty {
            unseen_new: true,
            ..Uncertainty::default()
        };
        self.table.compact();
    }

    /// A list read id by id short of slurmctld's count: each later count says whether jobs
    /// are still missing (live jobs then, against those the list holds submitted by then).
    fn recount_short(&mut self, diag: Option<&Diag>) {
        if self.unread == 0 || !self.has_table {
            return;
        }
        let Some((counted, at)) = diag.and_then(|d| Some((d.live_jobs()?, d.jobs_counted_at?)))
        else {
            return;
        };
        let short = counted.saturating_sub(self.table.live_tasks_submitted_by(at));
        if short == 0 {
            info!(
                counted,
                "slurmctld's count of live jobs matches the job list: none is missing"
            );
            self.unfound = self.unfound.min(0);
        }
        self.unread = short;
    }

    /// Accounting cannot say where a long list's ids are: from now on `/jobs/state/` does
    /// (v0.0.40 on), or the list is read whole. Said once as a warning (and by
    /// `slurm_exporter_job_list_info`); asked again after [`ACCOUNTING_RECHECK`].
    fn accounting_absent(&mut self, state: Accounting, live: u64, why: &str) {
        if self.accounting != state {
            let instead = if self.lists_states {
                "reading the ids /jobs/state/ lists instead"
            } else {
                "reading the whole /jobs instead"
            };
            warn!(
                live,
                max = self.max_jobs,
                accounting = state.as_str(),
                "more live jobs than --request-max-jobs, but slurmdbd's accounting cannot say where their ids are ({why}): {instead}"
            );
        }
        self.accounting = state;
        self.accounting_checked = Some(Instant::now());
        self.span_failures = 0;
        self.resweep = false;
    }

    /// Asks accounting again, [`ACCOUNTING_RECHECK`] after it was found absent: one request
    /// for the newest listed id. Back, a long list is read id by id again from the next step.
    async fn recheck_accounting(&mut self, src: &impl JobSource) {
        if self
            .accounting_checked
            .is_some_and(|t| t.elapsed() < ACCOUNTING_RECHECK)
        {
            return;
        }
        self.accounting_checked = Some(Instant::now());
        let id = self.table.max_id().unwrap_or(1);
        match src.accounted(&[id]).await {
            Ok(_) => {
                info!("slurmdbd's accounting answers again: a long job list is read id by id");
                self.accounting = Accounting::Served;
            }
            Err(e) => debug!(error = %e, "accounting still cannot say where job ids are"),
        }
    }

    /// A large list's resync: the next listed jobs are read again, round the list, as many
    /// as a step's budget allows (at 100,000 jobs and the default 3 %, a round takes about
    /// two hours); whether any changed.
    async fn review_listed(
        &mut self,
        src: &impl JobSource,
        interval: Duration,
        effort: &mut JobsEffort,
    ) -> bool {
        let n = (self.singles_per_step(interval) / 2).max(1) as usize;
        let ids = self.table.ids_after(self.reviewed_all, n);
        let (changed, last) = self.read_all_again(src, &ids, effort).await;
        if let Some(id) = last {
            self.reviewed_all = id;
        }
        changed
    }

    /// Reads `ids` again, stopping at the first failure; whether any changed, and the last
    /// read. Never an error: these are shortcuts the list can do without for a step.
    async fn read_all_again(
        &mut self,
        src: &impl JobSource,
        ids: &[u64],
        effort: &mut JobsEffort,
    ) -> (bool, Option<u64>) {
        let started = Instant::now();
        let (mut changed, mut n, mut last) = (false, 0, None);
        for &id in ids {
            n += 1;
            match self.read_again(src, id).await {
                Ok(moved) => changed |= moved,
                Err(e) => {
                    debug!(id, error = %e, "reading a job again failed");
                    break;
                }
            }
            last = Some(id);
        }
        effort.single_reads += u64::from(n);
        self.single_cost_update((n, started.elapsed()));
        (changed, last)
    }

    /// Reads again the next [`REVIEWS_PER_STEP`] held jobs; whether any changed (released,
    /// started, gone). Never an error: a failed read ends the review until the next step.
    async fn review_held(&mut self, src: &impl JobSource, effort: &mut JobsEffort) -> bool {
        let ids = self.table.held_after(self.reviewed, REVIEWS_PER_STEP);
        // Only a shortcut: the full read (or the round of a large list) still comes, so a
        // failure here costs the list nothing.
        let (changed, last) = self.read_all_again(src, &ids, effort).await;
        if let Some(id) = last {
            self.reviewed = id;
        }
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
        src: &impl JobSource,
        d: &Counters,
        budget: u32,
        effort: &mut JobsEffort,
    ) -> Result<(u32, Duration)> {
        let started = Instant::now();
        let mut used = 0u32;
        self.listings = (0, Duration::ZERO);
        // 1. New jobs: the ids after the highest known (array tasks split off when they
        // start take new ids too, so starts may bring new records as well).
        if d.submitted > 0 || d.started > 0 {
            self.unfound += i64::try_from(d.submitted).unwrap_or(i64::MAX);
            self.uncertain.unseen_new = true;
        }
        if self.uncertain.unseen_new {
            // Half the reads at most: the other half re-reads what the new ids change
            // (an array whose tasks split off still lists them as pending).
            used += self.search_new(src, (budget / 2).max(2)).await?;
        }
        self.unfound_steps = if self.unfound > 0 {
            self.unfound_steps.saturating_add(1)
        } else {
            0
        };
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
        let per_request = if src.filters_job_states() {
            STATES_PER_REQUEST
        } else {
            1
        };
        let whole = self.whole();
        if whole && self.checks.len() > BACKLOG_STEPS * budget as usize * per_request {
            // Too many to read one by one: which of them changed is for `/jobs/state/` or a
            // full `/jobs` to say (counts of running jobs lag until then).
            self.full_wanted = Some(BACKLOG);
        } else {
            while used < budget && !self.checks.is_empty() {
                used += 1;
                self.check_some(src).await?;
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
        let (listings, listing) = self.listings;
        effort.state_fetches += u64::from(listings);
        Ok((used, started.elapsed().saturating_sub(listing)))
    }

    /// Searches the ids after the highest known for new jobs with at most `budget` reads;
    /// returns the reads made. Two ids in a row slurmctld does not know end the search;
    /// submissions the counters reported and the search did not find ask for the whole list.
    async fn search_new(&mut self, src: &impl JobSource, budget: u32) -> Result<u32> {
        let mut used = 0u32;
        let mut id = self
            .next_id
            .take()
            .unwrap_or_else(|| self.table.max_id().map_or(1, |m| m + 1));
        let mut misses = 0;
        while misses < MISSES {
            if used >= budget {
                // More may follow: go on from here next time.
                self.next_id = Some(id);
                break;
            }
            used += 1;
            match src.job(id).await? {
                Some(found) => {
                    self.take_new(id, &found);
                    misses = 0;
                }
                None => misses += 1,
            }
            id += 1;
        }
        let ended = misses >= MISSES;
        if ended {
            debug!(unfound = self.unfound, next = id, "searched new job ids");
            self.uncertain.unseen_new = false;
        }
        // Submissions counted and not found: once the search ended on ids slurmctld does not
        // know, or after a few steps of new ids keeping it busy, their ids lie below the
        // highest read (given out before a newer one the search read first). And once after a
        // read id by id, which cannot tell.
        let owed = self.unfound > 0 && (ended || self.unfound_steps >= UNFOUND_STEPS);
        let verify = ended && std::mem::take(&mut self.verify_listed);
        if (owed || verify) && src.has_job_states() {
            used += self.read_unlisted(src, budget.saturating_sub(used)).await?;
        }
        if ended && self.unfound > 0 {
            // Submissions not found by id (ids skipped, federation...): only the whole list
            // can tell.
            self.full_wanted = Some("new jobs not found by id");
            self.uncertain.unseen_new = true;
        }
        Ok(used)
    }

    /// Takes in a job read by `id` as new: its submissions are found ones, counted as
    /// `/diag` counts them (an array's tasks each), and a task split off another array
    /// marks that array to read again.
    fn take_new(&mut self, id: u64, found: &JobTable) {
        let mut submissions = 0;
        for j in found.jobs() {
            if let Some(parent) = j.array_parent().filter(|p| *p != id) {
                // Until the array is read again it still counts this task as pending: one
                // that may have left.
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
        self.table.merge(found);
    }

    /// Submissions the search by id did not find, looked for in the list of every id
    /// slurmctld holds (`/jobs/state/`, v0.0.40 on) instead of the whole list: the search
    /// looks only above the highest id known, and a job given out before a newer id the
    /// tracker learnt of first lies below it. Those the table lacks are read: `spare` reads,
    /// and never fewer than [`UNLISTED_READS`] (what is left over asks for the whole list). A
    /// listing that names none settles the count: the submissions not found ended and were
    /// forgotten. The listing waits its turn as other `/jobs/state/` requests do. Returns
    /// the single reads made.
    async fn read_unlisted(&mut self, src: &impl JobSource, spare: u32) -> Result<u32> {
        if !self.states.ready() {
            return Ok(0);
        }
        let started = Instant::now();
        let Some(states) = src.job_states(&[]).await? else {
            return Ok(0);
        };
        let took = started.elapsed();
        self.states.done(started, took, self.budget);
        self.listings.0 += 1;
        self.listings.1 += took;
        // Ids from where a search for new jobs paused on are left to it (read twice, a job
        // would count as two submissions found).
        let below = self.next_id.unwrap_or(u64::MAX);
        let unknown: BTreeSet<u64> = (states.iter().map(|e| e.id))
            .filter(|id| *id < below && self.table.get(*id).is_none())
            .collect();
        if unknown.is_empty() && self.unfound > 0 && below == u64::MAX {
            debug!(
                unfound = self.unfound,
                "every job slurmctld lists is known: the submissions not found are gone"
            );
            self.unfound = 0;
        }
        let reads = spare.max(UNLISTED_READS.min(unknown.len() as u32));
        let mut used = 0;
        for id in unknown.into_iter().take(reads as usize) {
            used += 1;
            if let Some(found) = src.job(id).await? {
                self.take_new(id, &found);
            }
        }
        debug!(
            unfound = self.unfound,
            read = used,
            "looked for new jobs among the listed ids"
        );
        Ok(used)
    }

    /// Reads again what one request can: on v0.0.40 on, the states of up to
    /// [`STATES_PER_REQUEST`] plain jobs at once (`/jobs/state/?job_id=…`); otherwise, and
    /// for arrays (whose pending tasks only the whole record tells), one `/job/{id}`.
    async fn check_some(&mut self, src: &impl JobSource) -> Result<()> {
        let is_array =
            |t: &JobTable, id: u64| t.get(id).is_some_and(|j| !j.array_task_string.is_empty());
        if src.filters_job_states() {
            let plain: Vec<u64> = self
                .checks
                .iter()
                .copied()
                .filter(|id| !is_array(&self.table, *id))
                .take(STATES_PER_REQUEST)
                .collect();
            if !plain.is_empty() {
                if let Some(states) = src.job_states(&plain).await? {
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
        self.read_again(src, id).await?;
        Ok(())
    }

    /// Reads job `id` again with `/job/{id}` and puts what it says in the table (gone when
    /// slurmctld no longer knows it); whether the table changed.
    async fn read_again(&mut self, src: &impl JobSource, id: u64) -> Result<bool> {
        let before = self.table.get(id).cloned();
        let more = match src.job(id).await? {
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
        src: &impl JobSource,
        effort: &mut JobsEffort,
    ) -> Result<()> {
        let started = Instant::now();
        let states = if self.large {
            // Never every job's state in one answer: the listed ones, by id.
            let ids: Vec<u64> = self.table.jobs().map(|j| j.id).collect();
            let mut states = Vec::new();
            for (i, chunk) in ids.chunks(IDS_PER_REQUEST).enumerate() {
                effort.state_fetches += u64::from(i > 0);
                let Some(some) = src.job_states(chunk).await? else {
                    return Ok(());
                };
                states.extend(some);
            }
            states
        } else {
            let Some(states) = src.job_states(&[]).await? else {
                return Ok(());
            };
            states
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
            if let Some(found) = src.job(id).await? {
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
        // By id: a line names a job by its own id or by its array's.
        let mut by_id: std::collections::HashMap<u64, Vec<&StateEntry>> =
            std::collections::HashMap::with_capacity(states.len());
        for e in states {
            by_id.entry(e.id).or_default().push(e);
        }
        for id in ids {
            let Some(job) = self.table.get(*id) else {
                continue;
            };
            let named = [Some(job.id), job.array_job_id]
                .into_iter()
                .flatten()
                .filter_map(|k| by_id.get(&k))
                .flatten()
                .find(|e| e.names(job));
            match named.map(|e| e.state) {
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
        src: &impl JobSource,
        counters: Option<Counters>,
    ) -> Result<Synced> {
        let started = Instant::now();
        let request_start = unix_now() - UPDATE_TIME_MARGIN;
        let since = self
            .since
            .filter(|_| self.has_table && self.full_wanted != Some(REPLANNED));
        let result = src.job_table(since).await;
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
        jobs.uncertain.unread = self.unread;
        jobs
    }
}

pub(super) fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    //! The tracker's decisions against a slurmctld in memory: it keeps jobs and `/diag`'s
    //! counters as the real one does (measured on 22.05 and 24.11: `scontrol requeue` counts a
    //! completion and leaves the job pending; holds, releases and updates move no counter),
    //! and answers `/job/{id}`, `/jobs/state/` and `/jobs` from them.

    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use super::*;
    use crate::model::jobs::JobRecord;
    use crate::model::{JobState, PendingClass};

    #[derive(Clone, Debug)]
    struct Job {
        state: JobState,
        reason: &'static str,
        partition: &'static str,
        hold: bool,
        /// Unix seconds.
        submitted: i64,
        /// The backfill scheduler's planned start (unix seconds).
        start_time: Option<i64>,
    }

    #[derive(Default)]
    struct World {
        jobs: BTreeMap<u64, Job>,
        /// The last id given out (slurmctld never gives one twice).
        last_id: u64,
        counters: Counters,
        /// Accounting knows every id given out from this one on (`None`: slurmrestd serves
        /// no accounting).
        accounted_from: Option<u64>,
        /// Accounting is served but slurmdbd does not answer.
        accounting_fails: bool,
        /// slurmdbd has stored no record of ids above this one yet (slurmctld holds them in
        /// its DBD agent queue); `None`: it keeps up.
        accounted_to: Option<u64>,
        /// The requests answered, in order: `job`, `states`, `jobs`, `accounting`.
        asked: Vec<&'static str>,
        /// slurmctld's last job change (unix seconds), as `update_time` is compared with:
        /// moved by submissions, starts and ends, not by the backfill scheduler's plans.
        last_update: i64,
        /// Backfill cycles run.
        bf_cycles: u64,
        /// slurmctld's periodic count of its jobs, when one is held still: (pending,
        /// running, when); `None`: counted at every look.
        count: Option<(u64, u64, i64)>,
        /// Jobs submitted just before the next listing of every id (`/jobs/state/`) answers.
        submit_on_listing: usize,
        /// Jobs submitted just before a search for new ids asks for the next one.
        submit_on_search: usize,
        /// Ids whose record the next `/job/{id}` does not show (listed all the same), as if
        /// the search for new ids passed them before they were given out.
        late: BTreeSet<u64>,
    }

    /// A slurmctld behind slurmrestd, with `/jobs/state/` (v0.0.40 on) or without (v0.0.38).
    struct Slurmctld {
        world: Mutex<World>,
        states: bool,
    }

    impl Slurmctld {
        fn new(states: bool) -> Self {
            Self {
                world: Mutex::default(),
                states,
            }
        }

        fn with<R>(&self, f: impl FnOnce(&mut World) -> R) -> R {
            f(&mut self.world.lock().unwrap())
        }

        fn submit(&self, partition: &'static str) -> u64 {
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

        fn set(&self, id: u64, f: impl FnOnce(&mut Job)) {
            self.with(|w| {
                f(w.jobs.get_mut(&id).unwrap());
                w.last_update = unix_now();
            });
        }

        /// A backfill cycle plans job `id` to start at `start`.
        fn plan(&self, id: u64, start: i64) {
            self.with(|w| {
                w.jobs.get_mut(&id).unwrap().start_time = Some(start);
                w.bf_cycles += 1;
            });
        }

        /// No job changed for `secs` seconds.
        fn quiet_for(&self, secs: i64) {
            self.with(|w| w.last_update -= secs);
        }

        fn start(&self, id: u64) {
            self.set(id, |j| (j.state, j.reason) = (JobState::Running, "None"));
            self.with(|w| w.counters.started += 1);
        }

        fn complete(&self, id: u64) {
            self.set(id, |j| (j.state, j.reason) = (JobState::Completed, "None"));
            self.with(|w| w.counters.completed += 1);
        }

        fn requeue(&self, id: u64) {
            self.set(id, |j| {
                (j.state, j.reason) = (JobState::Pending, "BeginTime")
            });
            self.with(|w| w.counters.completed += 1);
        }

        /// The job ran and ended long ago: slurmctld forgot it (accounting has not).
        fn ended_long_ago(&self, id: u64) {
            self.start(id);
            self.complete(id);
            self.with(|w| w.jobs.remove(&id));
        }

        /// slurmctld counts its live jobs now, and shows that count until the next.
        fn count_now(&self) -> i64 {
            let at = unix_now();
            let (pending, running) = self.live();
            self.with(|w| w.count = Some((pending, running, at)));
            at
        }

        /// (pending, running) jobs.
        fn live(&self) -> (u64, u64) {
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

        fn diag(&self) -> Diag {
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
                    self.with(|w| {
                        w.last_id - w.accounted_to.map_or(w.last_id, |t| t.min(w.last_id))
                    }),
                ),
                ..Diag::default()
            }
        }

        fn asked(&self) -> Vec<&'static str> {
            self.with(|w| std::mem::take(&mut w.asked))
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
            std::future::ready(Ok(Some(Slurmctld::diag(self))))
        }

        /// As slurmctld answers: nothing when no job changed since `since`.
        fn job_table(
            &self,
            since: Option<i64>,
        ) -> impl Future<Output = Result<Outcome<JobTable>>> + Send {
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

    const STEP: Duration = Duration::from_secs(1);

    /// A tracker that has read the whole list once.
    async fn tracker(slurm: &Slurmctld) -> JobTracker {
        let mut t = JobTracker::new(
            false,
            Budget::default(),
            OriginRules::default(),
            REQUEST_MAX_JOBS,
        );
        let (synced, effort) = t.step(slurm, Some(&slurm.diag()), STEP).await.unwrap();
        assert!(matches!(synced, Synced::Changed(_)));
        assert_eq!(effort.full_fetches, 1);
        slurm.asked();
        t
    }

    /// Waits until a whole read may go (the pace after the last).
    async fn full_turn(t: &JobTracker) {
        if let Some(at) = t.full.next() {
            tokio::time::sleep_until(at.into()).await;
        }
    }

    /// One step; the list as it stands after it.
    async fn step(t: &mut JobTracker, slurm: &Slurmctld) -> (Jobs, JobsEffort) {
        let (_, effort) = t.step(slurm, Some(&slurm.diag()), STEP).await.unwrap();
        (t.build(), effort)
    }

    fn count(jobs: &Jobs, partition: &str, state: JobState) -> u64 {
        jobs.partitions
            .get(partition)
            .map_or(0, |c| c.by_state[state as usize])
    }

    #[tokio::test]
    async fn quiet_counters_confirm_the_list_without_reading_a_job() {
        let slurm = Slurmctld::new(true);
        slurm.submit("cpu");
        let mut t = tracker(&slurm).await;
        let (synced, effort) = t.step(&slurm, Some(&slurm.diag()), STEP).await.unwrap();
        assert!(matches!(synced, Synced::Unchanged), "{synced:?}");
        assert_eq!(effort, JobsEffort::default());
        assert!(slurm.asked().is_empty());
    }

    #[tokio::test]
    async fn each_backfill_cycle_s_plans_are_read_though_no_job_changed() {
        let planned = |jobs: &Jobs| {
            jobs.pending
                .iter()
                .find_map(|j| j.plan.as_ref()?.start.into())
        };
        for states in [true, false] {
            let slurm = Slurmctld::new(states);
            let wide = slurm.submit("cpu");
            let mut t = tracker(&slurm).await;
            slurm.quiet_for(600);
            let first = unix_now() + 300;
            slurm.plan(wide, first);
            full_turn(&t).await;
            let (jobs, _) = step(&mut t, &slurm).await;
            assert_eq!(planned(&jobs), Some(first), "states: {states}");
            // The next cycle moves the plan earlier.
            slurm.plan(wide, first - 200);
            full_turn(&t).await;
            let (jobs, _) = step(&mut t, &slurm).await;
            assert_eq!(planned(&jobs), Some(first - 200), "states: {states}");
        }
    }

    #[tokio::test]
    async fn a_start_and_an_end_are_followed_with_single_reads() {
        for states in [true, false] {
            let slurm = Slurmctld::new(states);
            let (a, b) = (slurm.submit("cpu"), slurm.submit("cpu"));
            slurm.start(a);
            let mut t = tracker(&slurm).await;
            slurm.complete(a);
            slurm.start(b);
            let (jobs, effort) = step(&mut t, &slurm).await;
            assert_eq!(
                count(&jobs, "cpu", JobState::Running),
                1,
                "states: {states}"
            );
            assert_eq!(
                count(&jobs, "cpu", JobState::Pending),
                0,
                "states: {states}"
            );
            assert!(jobs.uncertain.exact());
            assert_eq!(effort.full_fetches, 0, "no whole list for two changes");
            assert!(!slurm.asked().contains(&"jobs"));
        }
    }

    #[tokio::test]
    async fn a_submit_burst_beyond_the_single_read_budget_is_caught_up_over_steps() {
        let slurm = Slurmctld::new(true);
        slurm.submit("cpu");
        let mut t = tracker(&slurm).await;
        for _ in 0..400 {
            slurm.submit("cpu");
        }
        let (jobs, effort) = step(&mut t, &slurm).await;
        // The first step's reads are few (the budget assumes 5 ms a read until measured):
        // the list says new jobs may be missing, and demand is open-ended meanwhile.
        let listed = count(&jobs, "cpu", JobState::Pending);
        assert!(listed < 401, "{listed} listed after one step");
        assert!(jobs.uncertain.unseen_new);
        assert!(effort.single_reads > 0);
        let mut steps = 1;
        let mut jobs = jobs;
        while !jobs.uncertain.exact() {
            steps += 1;
            assert!(steps <= 40, "still catching up after {steps} steps");
            jobs = step(&mut t, &slurm).await.0;
        }
        assert_eq!(count(&jobs, "cpu", JobState::Pending), 401);
        assert!(
            !slurm.asked().contains(&"jobs"),
            "found by id, without the whole list"
        );
    }

    #[tokio::test]
    async fn counters_that_reset_make_every_waiting_and_running_job_uncertain_until_read() {
        let slurm = Slurmctld::new(false);
        let (a, b) = (slurm.submit("cpu"), slurm.submit("cpu"));
        slurm.start(a);
        let mut t = tracker(&slurm).await;
        // Midnight: the counters start again from zero, below what the tracker saw; b starts
        // meanwhile, counted in the new counters only.
        slurm.with(|w| w.counters = Counters::default());
        slurm.start(b);
        let (jobs, _) = step(&mut t, &slurm).await;
        assert_eq!(count(&jobs, "cpu", JobState::Running), 2, "b read again");
        assert_eq!(count(&jobs, "cpu", JobState::Pending), 0);
        assert!(jobs.uncertain.exact(), "{:?}", jobs.uncertain);
        // The new counters are the baseline: quiet again.
        let (synced, _) = t.step(&slurm, Some(&slurm.diag()), STEP).await.unwrap();
        assert!(matches!(synced, Synced::Unchanged), "{synced:?}");
    }

    #[tokio::test]
    async fn a_requeued_job_is_demand_again() {
        let slurm = Slurmctld::new(true);
        let a = slurm.submit("cpu");
        slurm.start(a);
        let mut t = tracker(&slurm).await;
        slurm.requeue(a);
        let (jobs, effort) = step(&mut t, &slurm).await;
        assert_eq!(count(&jobs, "cpu", JobState::Pending), 1);
        assert_eq!(count(&jobs, "cpu", JobState::Running), 0);
        assert_eq!(jobs.pending.len(), 1, "pending demand again");
        assert_eq!(effort.full_fetches, 0);
    }

    #[tokio::test]
    async fn a_released_job_is_seen_by_the_review_of_held_jobs() {
        let slurm = Slurmctld::new(true);
        let ids: Vec<u64> = (0..6).map(|_| slurm.submit("cpu")).collect();
        for id in &ids {
            slurm.set(*id, |j| (j.hold, j.reason) = (true, "JobHeldUser"));
        }
        let mut t = tracker(&slurm).await;
        assert!(
            t.build()
                .pending
                .iter()
                .all(|p| p.class == PendingClass::Held)
        );
        // A release moves no counter; the review reads REVIEWS_PER_STEP held jobs a step,
        // round the list.
        slurm.set(ids[4], |j| (j.hold, j.reason) = (false, "Priority"));
        let rounds = ids.len().div_ceil(REVIEWS_PER_STEP);
        let mut seen = None;
        for s in 1..=rounds {
            let (jobs, _) = step(&mut t, &slurm).await;
            let schedulable = jobs
                .pending
                .iter()
                .filter(|p| p.class == PendingClass::Schedulable)
                .count();
            if schedulable == 1 {
                seen = Some(s);
                break;
            }
        }
        assert!(seen.is_some(), "not seen within {rounds} steps");
        assert!(
            slurm.asked().iter().all(|r| *r == "job"),
            "single reads only"
        );
    }

    #[tokio::test]
    async fn an_update_moving_a_job_between_partitions_is_seen_when_the_job_is_read_again() {
        let slurm = Slurmctld::new(false);
        let (a, b) = (slurm.submit("cpu"), slurm.submit("cpu"));
        let mut t = tracker(&slurm).await;
        // `scontrol update partition=gpu` moves no counter; b's start does, and every job
        // listed as waiting to run is read again — a among them. (From v0.0.40 that re-read
        // is `/jobs/state/`, which tells states only: there a move waits for the next whole
        // list, at most RESYNC away when the budget allows.)
        slurm.set(a, |j| j.partition = "gpu");
        slurm.start(b);
        let (jobs, _) = step(&mut t, &slurm).await;
        assert_eq!(count(&jobs, "gpu", JobState::Pending), 1);
        assert_eq!(count(&jobs, "cpu", JobState::Pending), 0);
        assert_eq!(count(&jobs, "cpu", JobState::Running), 1);
    }

    /// A queue of `n` jobs, one in four ended and forgotten by slurmctld (accounting
    /// remembers them all), behind a slurmctld with or without `/jobs/state/`.
    fn long_queue(states: bool, n: usize) -> Slurmctld {
        let slurm = Slurmctld::new(states);
        slurm.with(|w| w.accounted_from = Some(1));
        for i in 0..n {
            let id = slurm.submit(if i % 2 == 0 { "cpu" } else { "gpu" });
            if i % 4 == 1 {
                slurm.ended_long_ago(id);
            }
        }
        slurm
    }

    /// A tracker that never asks for more than `max` jobs in one answer.
    fn bounded(max: u64) -> JobTracker {
        JobTracker::new(false, Budget::default(), OriginRules::default(), max)
    }

    /// A step of at most one read (the interval leaves no time for more).
    async fn short_step(t: &mut JobTracker, slurm: &Slurmctld) -> Jobs {
        let (synced, _) = t
            .step(slurm, Some(&slurm.diag()), Duration::ZERO)
            .await
            .unwrap();
        assert!(matches!(synced, Synced::Changed(_)), "{synced:?}");
        t.build()
    }

    /// Steps until nothing in the list is in doubt (at most 50 steps that leave doubt); the
    /// list then.
    async fn until_exact(t: &mut JobTracker, slurm: &Slurmctld) -> Jobs {
        for _ in 0..=50 {
            let (jobs, _) = step(t, slurm).await;
            if jobs.uncertain.exact() {
                return jobs;
            }
        }
        panic!("never exact: {:?}", t.build().uncertain);
    }

    /// How many of the requests `asked` were `what`.
    fn times(asked: &[&str], what: &str) -> usize {
        asked.iter().filter(|r| **r == what).count()
    }

    fn pending(jobs: &Jobs) -> u64 {
        ["cpu", "gpu"]
            .iter()
            .map(|p| count(jobs, p, JobState::Pending))
            .sum()
    }

    #[tokio::test]
    async fn a_queue_above_the_bound_is_read_id_by_id_newest_first_as_a_growing_lower_bound() {
        for states in [false, true] {
            let slurm = long_queue(states, 40);
            let mut t = bounded(10);
            // Each step publishes what it has read: the newest jobs first, never a whole
            // list, new jobs possibly missing (the autoscaler then scales up, never down).
            // A step here makes one request: first where the ids are and which of the
            // newest ten exist, then a job at a time.
            let first = short_step(&mut t, &slurm).await;
            assert_eq!(pending(&first), 0, "states {states}");
            assert!(first.uncertain.unseen_new);
            assert_eq!(first.uncertain.unread, 30);
            let second = short_step(&mut t, &slurm).await;
            assert_eq!(pending(&second), 1, "states {states}");
            assert_eq!(second.uncertain.unread, 29);
            assert!(
                second.partitions["gpu"].by_state[JobState::Pending as usize] == 1,
                "the newest job (40, gpu) comes first"
            );
            let mut last = second;
            let mut asked = Vec::new();
            while last.uncertain.unread > 0 {
                let jobs = short_step(&mut t, &slurm).await;
                assert!(
                    pending(&jobs) >= pending(&last),
                    "the lower bound never falls"
                );
                last = jobs;
                asked.extend(slurm.asked());
                assert!(asked.len() < 200, "never complete");
            }
            // Read: complete once the new ids above the newest are searched.
            assert_eq!(pending(&last), 30, "states {states}");
            let (jobs, _) = step(&mut t, &slurm).await;
            assert!(jobs.uncertain.exact(), "{:?}", jobs.uncertain);
            slurm.asked();
            assert!(!asked.contains(&"jobs"), "a whole /jobs was asked for");
            let accounting = times(&asked, "accounting");
            // The coarsest grid (8 requests at most), then two finer ones at each end; before
            // v0.0.42 one more a window of 10 ids (which ended?).
            let windows = if states { 0 } else { 4 };
            assert!(
                accounting <= 12 + windows,
                "{accounting} accounting requests"
            );
            // Ids slurmctld forgot cost no read: /jobs/state/ says they are gone, or (before
            // v0.0.42) accounting says they ended. Before v0.0.42, slurmctld is asked where
            // its ids end one `/job/{id}` a point: a gallop above id 40 at the start, and
            // again at the end.
            let reads = times(&asked, "job");
            let looks = if states {
                0
            } else {
                2 * sweep::gallop(40).len()
            };
            assert_eq!(reads, 30 + looks, "states {states}");
            // From then on no whole list either: the periodic full read gives way to a few
            // listed jobs read again each step, round the list.
            let (synced, effort) = t.step(&slurm, Some(&slurm.diag()), STEP).await.unwrap();
            assert!(matches!(synced, Synced::Unchanged), "{synced:?}");
            assert!(
                effort.single_reads > 0 && effort.full_fetches == 0,
                "{effort:?}"
            );
            // A start is followed as ever (every waiting job read again: which one started?),
            // without a whole list.
            let id = slurm.with(|w| *w.jobs.keys().next().unwrap());
            slurm.start(id);
            for _ in 0..5 {
                let (jobs, _) = step(&mut t, &slurm).await;
                assert_eq!(pending(&jobs), 29);
                if jobs.uncertain.exact() {
                    break;
                }
            }
            assert!(t.build().uncertain.exact(), "states {states}");
            assert!(!slurm.asked().contains(&"jobs"));
        }
    }

    #[tokio::test]
    async fn jobs_given_out_during_the_read_are_read_first_within_a_step() {
        for states in [false, true] {
            let slurm = long_queue(states, 40);
            let mut t = bounded(10);
            short_step(&mut t, &slurm).await;
            // Two new jobs, while most of the list is still to read: their demand is there
            // at the next step (a lower bound: more may come), not once the read is done.
            for _ in 0..2 {
                slurm.submit("new");
            }
            let jobs = short_step(&mut t, &slurm).await;
            assert_eq!(
                jobs.partitions["new"].by_state[JobState::Pending as usize],
                2,
                "states {states}"
            );
            assert!(jobs.uncertain.unread > 20 && jobs.uncertain.unseen_new);
            // The read goes on to its end, each job counted once.
            let mut steps = 0;
            while !t.build().uncertain.exact() {
                step(&mut t, &slurm).await;
                steps += 1;
                assert!(steps < 50, "never exact: {:?}", t.build().uncertain);
            }
            let jobs = t.build();
            assert_eq!(pending(&jobs), 30, "states {states}");
            assert_eq!(count(&jobs, "new", JobState::Pending), 2, "states {states}");
            assert!(!slurm.asked().contains(&"jobs"));
        }
    }

    #[tokio::test]
    async fn jobs_read_ahead_of_the_read_do_not_end_it_before_the_ones_slurmctld_counted() {
        let slurm = long_queue(true, 40);
        let mut t = bounded(10);
        short_step(&mut t, &slurm).await;
        // slurmctld counts its 30 live jobs; then 15 more come, read ahead of the rest. The
        // read ends at the count only once it holds 30 jobs submitted by the count's time.
        let counted = slurm.diag();
        for _ in 0..15 {
            let id = slurm.submit("new");
            slurm.set(id, |j| j.submitted = unix_now() + 3600);
        }
        let mut steps = 0;
        while !t.build().uncertain.exact() {
            let diag = Diag {
                jobs_pending: counted.jobs_pending,
                jobs_running: counted.jobs_running,
                jobs_counted_at: counted.jobs_counted_at,
                ..slurm.diag()
            };
            t.step(&slurm, Some(&diag), Duration::ZERO).await.unwrap();
            steps += 1;
            assert!(steps < 200, "never exact: {:?}", t.build().uncertain);
        }
        // Every job slurmctld counted, and the new ones.
        let jobs = t.build();
        assert_eq!(pending(&jobs), 30);
        assert_eq!(count(&jobs, "new", JobState::Pending), 15);
    }

    /// Jobs read while they ran and ended before the read was done stay in the table until
    /// the counters are followed: they must not stand in for older jobs not read yet when
    /// the read stops at slurmctld's count of live jobs.
    #[tokio::test]
    async fn jobs_that_end_mid_read_do_not_hide_older_ones() {
        for (states, accounting) in [(false, true), (true, true), (true, false)] {
            // 42 ids, 31 live: the last window (of ten) holds only the oldest job.
            let slurm = long_queue(states, 42);
            if !accounting {
                slurm.with(|w| w.accounted_from = None);
            }
            slurm.start(41);
            slurm.start(40);
            let mut t = bounded(10);
            // The newest first: both read while they run.
            while ![40, 41].iter().all(|id| t.table.get(*id).is_some()) {
                short_step(&mut t, &slurm).await;
            }
            slurm.complete(41);
            slurm.complete(40);
            let jobs = until_exact(&mut t, &slurm).await;
            assert_eq!(
                pending(&jobs),
                29,
                "states {states}, accounting {accounting}: every waiting job"
            );
        }
    }

    /// slurmctld's count has a time in whole seconds: a job submitted in that second may
    /// have come after it, and read ahead of the sweep it must not stand in for an older job
    /// the count holds.
    #[tokio::test]
    async fn a_job_submitted_in_the_second_of_the_count_does_not_hide_an_older_one() {
        for (states, accounting) in [(false, true), (true, true), (true, false)] {
            // 42 ids, 31 live: the last window (of ten) holds only the oldest job.
            let slurm = long_queue(states, 42);
            if !accounting {
                slurm.with(|w| w.accounted_from = None);
            }
            let mut t = bounded(10);
            short_step(&mut t, &slurm).await;
            let at = slurm.count_now();
            let new = slurm.submit("cpu");
            slurm.set(new, |j| j.submitted = at);
            let jobs = until_exact(&mut t, &slurm).await;
            assert_eq!(
                pending(&jobs),
                32,
                "states {states}, accounting {accounting}: every waiting job"
            );
        }
    }

    #[tokio::test]
    async fn without_accounting_job_states_say_where_a_long_lists_ids_are() {
        let slurm = long_queue(true, 40);
        slurm.with(|w| w.accounted_from = None);
        let mut t = bounded(10);
        let mut steps = 0;
        while !t.has_table {
            step(&mut t, &slurm).await;
            steps += 1;
            assert!(steps < 50, "never complete: {:?}", t.build().uncertain);
        }
        assert_eq!(pending(&t.build()), 30);
        assert_eq!(
            t.read(),
            JobListRead {
                by_id: true,
                accounting: Accounting::NotServed,
                unaccounted: 0,
            }
        );
        let asked = slurm.asked();
        assert!(!asked.contains(&"jobs"), "a whole /jobs was asked for");
        // Accounting once (not served); every id from one /jobs/state/ at the start, and once
        // more at the end for those given out meanwhile; each live job read once, and the ten
        // ids slurmctld forgot cost no read.
        assert_eq!(times(&asked, "accounting"), 1);
        assert_eq!(times(&asked, "states"), 2);
        assert_eq!(times(&asked, "job"), 30);
    }

    #[tokio::test]
    async fn a_job_read_in_the_step_that_completes_the_read_is_not_taken_for_a_missing_one() {
        let slurm = long_queue(true, 40);
        slurm.with(|w| w.accounted_from = None);
        let mut t = bounded(10);
        short_step(&mut t, &slurm).await;
        // A job comes as the read takes its last look at the ids, so the read goes on to it
        // in one more step; in that step the search for new ids finds another, given out
        // after the step's `/diag`.
        slurm.with(|w| w.submit_on_listing = 1);
        while slurm.with(|w| w.submit_on_listing) > 0 {
            short_step(&mut t, &slurm).await;
        }
        assert!(!t.has_table, "the read went on to the job that came");
        slurm.with(|w| w.submit_on_search = 1);
        step(&mut t, &slurm).await;
        assert!(t.has_table, "complete");
        assert_eq!(
            slurm.with(|w| w.submit_on_search),
            0,
            "no search for new ids"
        );
        // slurmctld's counters now say one more job was given out: the one read already.
        let (jobs, _) = step(&mut t, &slurm).await;
        assert!(jobs.uncertain.exact(), "{:?}", jobs.uncertain);
        assert_eq!(pending(&jobs), 32);
        // The read's listings (where the ids are, and those given out meanwhile), and one
        // after it completed, for a job its last step's search may have passed; no more.
        assert_eq!(
            times(&slurm.asked(), "states"),
            3,
            "the list was read again"
        );
    }

    #[tokio::test]
    async fn a_new_job_the_search_by_id_passes_is_found_among_the_listed_ids() {
        let slurm = Slurmctld::new(true);
        for _ in 0..5 {
            slurm.submit("cpu");
        }
        let mut t = tracker(&slurm).await;
        slurm.asked();
        let passed = slurm.submit("cpu");
        slurm.submit("cpu");
        slurm.with(|w| w.late.insert(passed));
        let jobs = until_exact(&mut t, &slurm).await;
        assert_eq!(count(&jobs, "cpu", JobState::Pending), 7);
        let asked = slurm.asked();
        assert_eq!(times(&asked, "states"), 1);
        assert_eq!(times(&asked, "jobs"), 0, "the whole list was read again");
    }

    /// slurmrestd slow (a starved machine): each single read costs so much that a step's
    /// budget sits at its floor, and the two misses that end the search for new ids spend
    /// it. A new job the search passed is still read at once, from the ids `/jobs/state/`
    /// lists, not when the whole list is read again (whose turn follows what the last cost).
    #[tokio::test]
    async fn a_passed_new_job_is_read_at_once_however_small_the_budget() {
        let slurm = Slurmctld::new(true);
        for _ in 0..5 {
            slurm.submit("cpu");
        }
        let mut t = tracker(&slurm).await;
        starve(&mut t);
        let passed = slurm.submit("cpu");
        slurm.submit("cpu");
        slurm.with(|w| w.late.insert(passed));
        let mut jobs = t.build();
        for _ in 0..3 {
            jobs = step(&mut t, &slurm).await.0;
            if jobs.uncertain.exact() {
                break;
            }
        }
        assert!(
            jobs.uncertain.exact(),
            "still unlisted: {:?}",
            jobs.uncertain
        );
        assert_eq!(count(&jobs, "cpu", JobState::Pending), 7);
        assert_eq!(
            times(&slurm.asked(), "jobs"),
            0,
            "the whole list was read again"
        );
    }

    /// A submission counted but never found (a short job slurmctld forgot before it was
    /// read) is settled by the listing of every id, not by reading the whole list again; and
    /// the listing is not asked for at every step while it is pending its turn.
    #[tokio::test]
    async fn a_counted_job_gone_before_it_was_read_leaves_no_doubt() {
        let slurm = Slurmctld::new(true);
        for _ in 0..5 {
            slurm.submit("cpu");
        }
        let mut t = tracker(&slurm).await;
        starve(&mut t);
        let gone = slurm.submit("cpu");
        slurm.ended_long_ago(gone);
        let mut jobs = t.build();
        for _ in 0..3 {
            jobs = step(&mut t, &slurm).await.0;
            if jobs.uncertain.exact() {
                break;
            }
        }
        assert!(
            jobs.uncertain.exact(),
            "still in doubt: {:?}",
            jobs.uncertain
        );
        assert_eq!(
            times(&slurm.asked(), "jobs"),
            0,
            "the whole list was read again"
        );
    }

    /// New jobs every step fill the search's budget, so it never ends on ids slurmctld does
    /// not know: a job it passed is looked for among the listed ids after a few steps all
    /// the same, while the stream goes on.
    #[tokio::test]
    async fn a_passed_job_is_found_while_new_ones_keep_coming() {
        let slurm = Slurmctld::new(true);
        for _ in 0..5 {
            slurm.submit("cpu");
        }
        let mut t = tracker(&slurm).await;
        starve(&mut t);
        let passed = slurm.submit("cpu");
        slurm.with(|w| w.late.insert(passed));
        for _ in 0..(UNFOUND_STEPS + 3) {
            slurm.submit("gpu");
            slurm.submit("gpu");
            step(&mut t, &slurm).await;
            if t.table.get(passed).is_some() {
                return;
            }
        }
        panic!("job {passed} never read: {:?}", t.build().uncertain);
    }

    /// A job given out in the last step of a read id by id, passed by the search for new ones
    /// (a newer id was read first), is not lost when the read completes: one listing of every
    /// id right after finds it.
    #[tokio::test]
    async fn a_job_passed_as_a_read_id_by_id_completes_is_not_lost() {
        let slurm = long_queue(true, 40);
        slurm.with(|w| w.accounted_from = None);
        let mut t = bounded(10);
        // Steps of one read or so; a job comes just before the read's last listing, so the
        // read goes on a step past it.
        let tiny = async |t: &mut JobTracker| {
            t.step(&slurm, Some(&slurm.diag()), Duration::ZERO)
                .await
                .unwrap();
        };
        tiny(&mut t).await;
        slurm.with(|w| w.submit_on_listing = 1);
        let mut passed = None;
        for _ in 0..200 {
            let topped = t.sweep.as_ref().is_some_and(|(s, _)| s.topped_up());
            if topped && passed.is_none() {
                let id = slurm.submit("cpu");
                slurm.submit("cpu");
                slurm.with(|w| w.late.insert(id));
                passed = Some(id);
            }
            tiny(&mut t).await;
            if passed.is_some() && t.sweep.is_none() {
                break;
            }
        }
        let passed = passed.expect("the read was never topped up");
        let jobs = until_exact(&mut t, &slurm).await;
        assert!(t.table.get(passed).is_some(), "job {passed} lost");
        assert_eq!(pending(&jobs), slurm.live().0);
    }

    /// slurmdbd behind slurmctld (a burst it is still recording): accounting's newest id is
    /// far below slurmctld's. The read starts at slurmctld's newest all the same.
    #[tokio::test]
    async fn with_accounting_behind_the_read_starts_at_slurmctlds_newest_id() {
        for states in [false, true] {
            let slurm = long_queue(states, 400);
            slurm.with(|w| w.accounted_to = Some(100));
            let mut t = bounded(10);
            while t.table.live_tasks() == 0 {
                short_step(&mut t, &slurm).await;
            }
            assert!(
                t.table.get(400).is_some(),
                "states {states}: not the newest first"
            );
            assert_eq!(t.read().unaccounted, 300, "states {states}");
        }
    }

    /// The read ends with every live job slurmctld counts, whatever accounting knows.
    #[tokio::test]
    async fn with_accounting_behind_the_read_ends_with_every_live_job() {
        for states in [false, true] {
            let slurm = long_queue(states, 400);
            slurm.with(|w| w.accounted_to = Some(100));
            let mut t = bounded(10);
            let mut jobs = t.build();
            for _ in 0..200 {
                jobs = step(&mut t, &slurm).await.0;
                if t.has_table {
                    break;
                }
            }
            assert!(t.has_table, "states {states}: never read");
            assert_eq!(pending(&jobs), slurm.live().0, "states {states}");
            assert_eq!(jobs.uncertain.unread, 0, "states {states}");
            assert!(
                !slurm.asked().contains(&"jobs"),
                "a whole /jobs was asked for"
            );
        }
    }

    /// Jobs submitted after the read began are read ahead of it, from slurmctld's newest id
    /// on, not from accounting's (whose next ids are held jobs the read-ahead would crawl
    /// through at a few reads a step).
    #[tokio::test]
    async fn jobs_submitted_above_what_accounting_knows_show_at_once() {
        for states in [false, true] {
            let slurm = long_queue(states, 400);
            slurm.with(|w| w.accounted_to = Some(100));
            let mut t = bounded(10);
            short_step(&mut t, &slurm).await;
            slurm.submit("new");
            slurm.submit("new");
            let mut seen = 0;
            for _ in 0..3 {
                let jobs = short_step(&mut t, &slurm).await;
                seen = count(&jobs, "new", JobState::Pending);
                if seen == 2 {
                    assert!(
                        jobs.uncertain.unread > 0,
                        "states {states}: read to the end first"
                    );
                    break;
                }
            }
            assert_eq!(seen, 2, "states {states}: the new jobs waited for the read");
        }
    }

    /// A read that finds fewer live jobs than slurmctld counts never calls the list exact
    /// (the autoscaler would scale down on it): the difference stays unread and the demand
    /// open-ended, until a count of slurmctld's matches the list.
    #[tokio::test]
    async fn a_read_short_of_slurmctlds_count_is_never_called_exact() {
        let slurm = long_queue(true, 40);
        let mut t = bounded(10);
        // slurmctld counts five jobs nobody can read (another user's, under PrivateData).
        let hidden = |slurm: &Slurmctld| {
            let mut d = slurm.diag();
            d.jobs_pending = d.jobs_pending.map(|p| p + 5);
            d
        };
        for _ in 0..100 {
            t.step(&slurm, Some(&hidden(&slurm)), STEP).await.unwrap();
            if t.has_table {
                break;
            }
        }
        assert!(t.has_table);
        for _ in 0..20 {
            t.step(&slurm, Some(&hidden(&slurm)), STEP).await.unwrap();
            let jobs = t.build();
            assert_eq!(jobs.uncertain.unread, 5);
            assert!(!jobs.uncertain.exact());
            assert_eq!(pending(&jobs), 30);
        }
        // Its count matches the list again (they ended): exact.
        let jobs = until_exact(&mut t, &slurm).await;
        assert_eq!(pending(&jobs), 30);
    }

    /// Where slurmctld's ids end, with holes of forgotten jobs in between: a handful of looks.
    #[tokio::test]
    async fn slurmctld_says_where_its_newest_id_is() {
        for states in [false, true] {
            let slurm = long_queue(states, 4000);
            slurm.with(|w| w.accounted_to = Some(10));
            slurm.asked();
            let mut effort = JobsEffort::default();
            let newest = sweep::newest_known(&slurm, 10, &mut effort).await.unwrap();
            assert_eq!(newest, 4000, "states {states}");
            let asked = slurm.asked();
            let looks = times(&asked, if states { "states" } else { "job" });
            assert!(looks < if states { 20 } else { 400 }, "{looks} looks");
        }
    }

    /// Single reads so slow that a step's budget is at its floor, and the next read of the
    /// whole list minutes away (it cost 10 s, twice).
    fn starve(t: &mut JobTracker) {
        t.single_cost = Duration::from_secs(1);
        for _ in 0..2 {
            t.full
                .done(Instant::now(), Duration::from_secs(10), t.budget);
        }
    }

    #[tokio::test]
    async fn jobs_that_come_while_the_list_is_read_are_read_too_even_behind_ended_ones() {
        for states in [false, true] {
            let slurm = long_queue(states, 40);
            let mut t = bounded(10);
            short_step(&mut t, &slurm).await;
            // Meanwhile: five short jobs come and go (slurmctld forgets them), then five
            // that wait. The search for new jobs would stop at the first two forgotten ids.
            for _ in 0..5 {
                let id = slurm.submit("cpu");
                slurm.ended_long_ago(id);
            }
            for _ in 0..5 {
                slurm.submit("gpu");
            }
            let jobs = until_exact(&mut t, &slurm).await;
            assert_eq!(pending(&jobs), 35, "states {states}");
            let asked = slurm.asked();
            assert!(!asked.contains(&"jobs"), "a whole /jobs was asked for");
            // One look for where the ids are and one for the newest after: no second read
            // of the whole list.
            let accounting = times(&asked, "accounting");
            let windows = if states { 0 } else { 6 };
            assert!(
                accounting <= 15 + windows,
                "{accounting} accounting requests: read twice?"
            );
        }
    }

    #[tokio::test]
    async fn a_read_without_accounting_halfway_goes_on_reading_every_id() {
        let slurm = long_queue(false, 40);
        let mut t = bounded(10);
        short_step(&mut t, &slurm).await;
        slurm.asked();
        // slurmdbd goes away: nothing says which ids ended, so each is read — the read is
        // slower, never stuck, and the lower bound still grows.
        slurm.with(|w| w.accounted_from = None);
        let mut last = 0;
        for _ in 0..15 {
            let jobs = short_step(&mut t, &slurm).await;
            assert!(pending(&jobs) >= last, "the lower bound never falls");
            last = pending(&jobs);
        }
        let asked = slurm.asked();
        let reads = times(&asked, "job") as u64;
        assert!(reads >= 10, "{reads} reads in 15 steps: {asked:?}");
        assert!(last < reads, "forgotten ids were read too: {last} pending");
        // Back: the rest is read as before, and the list completes.
        slurm.with(|w| w.accounted_from = Some(1));
        for _ in 0..50 {
            if step(&mut t, &slurm).await.0.uncertain.exact() {
                break;
            }
        }
        let jobs = t.build();
        assert!(jobs.uncertain.exact(), "{:?}", jobs.uncertain);
        assert_eq!(pending(&jobs), 30);
    }

    #[tokio::test]
    async fn a_steady_stream_of_new_jobs_does_not_keep_the_read_from_ending() {
        let slurm = long_queue(true, 40);
        let mut t = bounded(10);
        let mut steps = 0;
        loop {
            slurm.submit("cpu");
            let jobs = short_step(&mut t, &slurm).await;
            if jobs.uncertain.unread == 0 {
                break;
            }
            steps += 1;
            assert!(steps < 100, "the read never ends while jobs keep coming");
        }
        // The jobs that came meanwhile are found by the search for new jobs, at its pace.
        let mut jobs = t.build();
        for _ in 0..50 {
            if jobs.uncertain.exact() {
                break;
            }
            jobs = step(&mut t, &slurm).await.0;
        }
        assert!(jobs.uncertain.exact(), "{:?}", jobs.uncertain);
        let all = slurm.with(|w| {
            w.jobs
                .values()
                .filter(|j| j.state == JobState::Pending)
                .count() as u64
        });
        assert_eq!(pending(&jobs), all);
    }

    #[tokio::test]
    async fn the_read_ends_when_it_holds_every_live_job_slurmctld_counts() {
        // 30 old jobs ended and forgotten below 20 live ones: the read stops at the count,
        // not at the oldest id accounting knows.
        let slurm = Slurmctld::new(false);
        slurm.with(|w| w.accounted_from = Some(1));
        for _ in 0..30 {
            let id = slurm.submit("cpu");
            slurm.ended_long_ago(id);
        }
        for _ in 0..20 {
            slurm.submit("cpu");
        }
        let mut t = bounded(5);
        let (_, effort) = t.step(&slurm, Some(&slurm.diag()), STEP).await.unwrap();
        let jobs = t.build();
        assert_eq!(pending(&jobs), 20);
        assert_eq!(jobs.uncertain.unread, 0);
        // (and slurmctld asked where its ids end, a gallop above id 50 at the start and end)
        let looks = 2 * sweep::gallop(50).len() as u64;
        assert!(
            effort.single_reads <= 21 + looks,
            "{} reads: went on below the last live job",
            effort.single_reads
        );
    }

    #[tokio::test]
    async fn a_start_waits_for_slurmctlds_first_count_rather_than_read_the_whole_list() {
        let slurm = long_queue(true, 40);
        let mut t = bounded(10);
        // Just restarted: slurmctld has not counted its jobs yet (it answers 0, at time 0).
        let uncounted = Diag {
            jobs_pending: Some(0),
            jobs_running: Some(0),
            jobs_counted_at: None,
            ..slurm.diag()
        };
        let (synced, effort) = t.step(&slurm, Some(&uncounted), STEP).await.unwrap();
        assert!(matches!(synced, Synced::Waiting));
        assert_eq!(effort, JobsEffort::default());
        assert!(slurm.asked().is_empty());
        // Counted: too many for one answer.
        step(&mut t, &slurm).await;
        assert!(!slurm.asked().contains(&"jobs"));
    }

    #[tokio::test]
    async fn without_accounting_a_long_queue_is_read_whole_at_once_and_said_once() {
        // Before v0.0.40: no /jobs/state/ either, so nothing says where the ids are.
        let slurm = Slurmctld::new(false);
        for _ in 0..20 {
            slurm.submit("cpu");
        }
        let mut t = bounded(5);
        // slurmrestd without its slurmdbd plugin (404): a configuration, not a failure — no
        // error reaches the poller (which would take a 404 for a changed server), and the
        // whole list is read at its turn.
        let (synced, effort) = t.step(&slurm, Some(&slurm.diag()), STEP).await.unwrap();
        assert!(matches!(synced, Synced::Waiting));
        assert_eq!(effort.accounting_reads, 1);
        assert_eq!(
            t.read(),
            JobListRead {
                by_id: false,
                accounting: Accounting::NotServed,
                unaccounted: 0,
            }
        );
        let (jobs, effort) = step(&mut t, &slurm).await;
        assert_eq!(effort.full_fetches, 1);
        assert_eq!(pending(&jobs), 20);
        // Kept current as a short list is; accounting is not asked again until the recheck.
        slurm.asked();
        slurm.submit("cpu");
        let (jobs, effort) = step(&mut t, &slurm).await;
        assert_eq!((effort.full_fetches, effort.accounting_reads), (0, 0));
        assert_eq!(pending(&jobs), 21);
        assert!(!slurm.asked().contains(&"accounting"));
    }

    #[tokio::test]
    async fn failing_accounting_is_asked_a_few_steps_before_the_list_is_read_whole() {
        let slurm = Slurmctld::new(false);
        for _ in 0..20 {
            slurm.submit("cpu");
        }
        slurm.with(|w| (w.accounted_from, w.accounting_fails) = (Some(1), true));
        let mut t = bounded(5);
        // Asked three steps in a row (a blip would pass), then the whole list once.
        for _ in 1..SPAN_TRIES {
            let failed = t.step(&slurm, Some(&slurm.diag()), STEP).await;
            assert!(failed.is_err_and(|e| !e.version_gone()));
        }
        let (synced, _) = t.step(&slurm, Some(&slurm.diag()), STEP).await.unwrap();
        assert!(matches!(synced, Synced::Waiting));
        assert_eq!(t.read().accounting, Accounting::Failing);
        let (jobs, effort) = step(&mut t, &slurm).await;
        assert_eq!(effort.full_fetches, 1);
        assert_eq!(pending(&jobs), 20);
    }

    #[tokio::test]
    async fn accounting_back_after_the_recheck_makes_a_long_list_read_id_by_id_again() {
        let slurm = Slurmctld::new(false);
        for _ in 0..20 {
            slurm.submit("cpu");
        }
        let mut t = bounded(5);
        step(&mut t, &slurm).await;
        step(&mut t, &slurm).await;
        assert_eq!(t.read().accounting, Accounting::NotServed);
        // slurmrestd restarted with its slurmdbd plugin; the recheck is due.
        slurm.with(|w| w.accounted_from = Some(1));
        t.accounting_checked = Instant::now().checked_sub(ACCOUNTING_RECHECK);
        slurm.asked();
        step(&mut t, &slurm).await;
        assert_eq!(
            t.read(),
            JobListRead {
                by_id: true,
                accounting: Accounting::Served,
                unaccounted: 0,
            }
        );
        assert_eq!(times(&slurm.asked(), "accounting"), 1);
        // No whole read any more: the listed jobs are read again round the list.
        slurm.submit("cpu");
        let (jobs, effort) = step(&mut t, &slurm).await;
        assert_eq!(effort.full_fetches, 0);
        assert_eq!(pending(&jobs), 21);
    }

    #[tokio::test]
    async fn accounting_says_where_the_ids_are_in_a_handful_of_requests() {
        let slurm = Slurmctld::new(true);
        slurm.with(|w| {
            w.accounted_from = Some(123_457);
            w.last_id = 1_234_567;
        });
        let mut effort = JobsEffort::default();
        for live in [10_000, 100_000, 1_000_000] {
            let span = sweep::span(&slurm, live, &mut effort).await.unwrap();
            assert_eq!(
                span,
                Some(sweep::Span {
                    oldest: 123_457,
                    newest: 1_234_567
                }),
                "{live} live jobs"
            );
        }
        assert!(effort.accounting_reads <= 3 * 12, "{effort:?}");
        // None at all: nothing to go by.
        slurm.with(|w| w.accounted_from = Some(w.last_id + 1));
        let span = sweep::span(&slurm, 10_000, &mut effort).await.unwrap();
        assert_eq!(span, None);
    }
}
