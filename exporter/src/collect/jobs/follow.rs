//! The short list: `/diag`'s counters followed with single reads (new ids searched for,
//! jobs that may have started or ended read again, held ones reviewed), `/jobs/state/` when
//! too much moved, and the whole `/jobs` at its turn. A long list, once read id by id, is
//! kept the same way, except that it is never read whole.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use tracing::debug;

use super::{BACKLOG, Counters, IDS_PER_REQUEST, JobTracker, REPLANNED, Synced, unix_now};
use crate::collect::pace;
use crate::collect::source::JobSource;
use crate::error::Result;
use crate::model::Uncertainty;
use crate::model::job_table::{JobTable, StateEntry};
use crate::slurm::fetch::Outcome;
use crate::snapshot::JobsEffort;

/// Held jobs read again each step (a few milliseconds of slurmrestd's time each): ten held
/// jobs are all looked at every five steps.
pub const REVIEWS_PER_STEP: usize = 2;
/// `update_time` is sent this far before the previous full fetch started: slurmctld's change
/// times have one-second granularity and the two clocks may disagree a little.
const UPDATE_TIME_MARGIN: i64 = 5;
/// A failed full `/jobs` counts as this costly, at most, when pacing the next try.
const FAILED_FULL_COST: Duration = Duration::from_secs(5);
/// A backlog of jobs to read again longer than this many steps' worth is left to
/// `/jobs/state/` or a full `/jobs`.
const BACKLOG_STEPS: usize = 4;
/// Job ids in one `/jobs/state/?job_id=…` (2,000 took slurmrestd 30 ms).
const STATES_PER_REQUEST: usize = 500;
/// An id slurmctld does not know ends the search for new jobs after this many in a row.
const MISSES: u32 = 2;
/// Jobs slurmctld lists that the table lacks, read in one step whatever the step's budget:
/// each is demand nobody has seen, and a few milliseconds of slurmrestd's time. (When
/// slurmrestd is slow the budget sits at its floor, and the two misses that end a search for
/// new ids would spend it all: such a job would wait minutes for the next read of the list.)
const UNLISTED_READS: u32 = 16;
/// Steps in a row with submissions counted and not found, while new ids keep the search busy
/// (it never ends on misses), before they are looked for among the ids slurmctld lists.
pub(super) const UNFOUND_STEPS: u32 = 3;

impl JobTracker {
    /// Follows what the counters say happened with at most `budget` single-job reads. What
    /// does not fit waits for the next step; a backlog too long to read one by one is left
    /// to `/jobs/state/` or a full `/jobs`. Returns (requests, time they took).
    pub(super) async fn follow(
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
    pub(super) async fn search_new(&mut self, src: &impl JobSource, budget: u32) -> Result<u32> {
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

    /// Reads `ids` again, stopping at the first failure; whether any changed, and the last
    /// read. Never an error: these are shortcuts the list can do without for a step.
    pub(super) async fn read_all_again(
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
    pub(super) async fn review_held(
        &mut self,
        src: &impl JobSource,
        effort: &mut JobsEffort,
    ) -> bool {
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

    /// `/jobs/state/` says which listed jobs changed state; new ids among them are read.
    pub(super) async fn resolve_with_states(
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

    pub(super) async fn fetch_full(
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
                let cost = pace::error_cost(took.min(FAILED_FULL_COST), &e);
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
}
