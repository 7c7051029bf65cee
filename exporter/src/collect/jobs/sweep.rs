//! Reading a job list too long to ask for in one answer, id by id.
//!
//! Above `--request-max-jobs` live jobs (as `/diag` counts them) a full `/jobs` is an
//! answer slurmrestd cannot build comfortably: at 100,000 jobs 24.11's slurmrestd grows past
//! 6 GiB building it and 22.05's gives none within 10 minutes. Slurm has no paged job list,
//! but it gives job ids out in order, so the list can be read id by id:
//!
//! 1. [`span`]: where the ids are. slurmdbd keeps a record of every job it was told of, so
//!    "accounting has a record of id n" holds on one unbroken range of ids, from the oldest
//!    record not purged to the newest job. A grid of ids no wider apart than there are live
//!    jobs must hit that range; finer grids at each end find its two ends — a handful of
//!    requests of at most [`GRID`] ids. slurmdbd may be behind slurmctld (a burst it is still
//!    recording): then [`newest_known`] asks slurmctld where its own ids end, and the ids
//!    above accounting's are read from slurmctld alone. Without accounting (slurmrestd
//!    without its slurmdbd plugin), v0.0.40 on, one `/jobs/state/` names every live id
//!    instead ([`Sweep::listed`]: a few MB at 100,000 jobs, where a full `/jobs` is
//!    gigabytes); before v0.0.40 nothing says where the ids are, and the list is read whole.
//! 2. [`Sweep`]: from the newest id down, each job is read with `/job/{id}` (milliseconds of
//!    slurmrestd's time, a few KB); from v0.0.42 on, `/jobs/state/?job_id=…` first says which
//!    ids of the next window exist, before it accounting says which ended, so ended ids cost
//!    a fraction of a read (most ids of a busy site's range). Newest first, so what a step
//!    publishes is a lower bound of the queue from the start (scale up on it, never down).
//! 3. The tracker calls the list complete when it holds as many live jobs as slurmctld
//!    counted after the sweep began, or when the sweep passes the oldest id accounting knows
//!    (short of the count, it goes on above its top for a while, and says it is short).
//!    Jobs that ended since the sweep began raise the count to meet: one read in an earlier
//!    step and gone since still sits in the table, and would otherwise stand in for an older
//!    job never read.
//!
//! Reads go one at a time, back to back, for most of each interval: one slurmrestd thread,
//! never an answer larger than one job or one window of states.

use std::collections::BTreeSet;
use std::time::Instant;

use tracing::debug;

use crate::collect::source::JobSource;
use crate::error::Result;
use crate::model::JobState;
use crate::model::job_table::{JobTable, StateEntry};
use crate::snapshot::JobsEffort;

/// Slurm's largest job id (`MAX_JOB_ID`, 0x03FFFFFF): ids wrap to `FirstJobId` after it.
pub const MAX_JOB_ID: u64 = 0x03FF_FFFF;
/// Ids asked of accounting at once (1,000 existing records: 0.2–0.3 s of slurmrestd CPU and
/// 3–5 MB, measured on 22.05 and 24.11 with 100,000 jobs).
pub const GRID: usize = 1000;

/// Requests of the first, coarsest grid, at most.
const GRID_REQUESTS: u64 = 8;

/// The ids accounting has records of: `oldest..=newest`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub oldest: u64,
    pub newest: u64,
}

/// Finds the ids accounting knows, for a queue of `live` jobs (each has an id in the span,
/// so the span is at least `live` ids wide); `None` when accounting has none of the grid.
pub async fn span(
    src: &impl JobSource,
    live: u64,
    effort: &mut JobsEffort,
) -> Result<Option<Span>> {
    // No more than GRID_REQUESTS requests: a span narrower than the stride that follows
    // may be missed, unless it holds id 1 (a young cluster's, or a test's).
    let stride = live.clamp(MAX_JOB_ID / (GRID_REQUESTS * GRID as u64), MAX_JOB_ID);
    // Highest points first: the first request that hits holds the newest grid point hit;
    // the span ends where a point below a hit misses.
    let points: Vec<u64> = (0..=(MAX_JOB_ID - 1) / stride)
        .map(|k| MAX_JOB_ID - k * stride)
        .chain(std::iter::once(1))
        .collect();
    let (mut newest, mut oldest) = (None, None);
    for chunk in points.chunks(GRID) {
        effort.accounting_reads += 1;
        let hits: BTreeSet<u64> = ids_of(src.accounted(chunk).await?)
            .filter(|id| chunk.contains(id))
            .collect();
        if let Some(&h) = hits.last() {
            newest.get_or_insert(h);
        }
        if let Some(&l) = hits.first() {
            oldest = Some(l);
        }
        // A point below the lowest hit missed: the span's bottom is above it.
        if oldest.is_some_and(|l| chunk.iter().any(|p| *p < l)) {
            break;
        }
    }
    let (Some(newest), Some(oldest)) = (newest, oldest) else {
        return Ok(None);
    };
    // Each end lies within one stride of its grid hit.
    let newest = narrow(src, newest, stride, true, effort).await?;
    let oldest = narrow(src, oldest, stride, false, effort).await?;
    debug!(oldest, newest, "accounting's job ids");
    Ok(Some(Span { oldest, newest }))
}

/// The newest id accounting knows, at or above `known` (which it knows): ids above a known
/// one are known up to the newest, so a gallop (`known` + 1, 2, 4, … in one request) and
/// finer grids between the last hit and the first miss find it.
pub async fn newest_above(
    src: &impl JobSource,
    known: u64,
    effort: &mut JobsEffort,
) -> Result<u64> {
    let gallop = gallop(known);
    if gallop.is_empty() {
        return Ok(known);
    }
    effort.accounting_reads += 1;
    let hits: BTreeSet<u64> = ids_of(src.accounted(&gallop).await?).collect();
    let newest = gallop
        .iter()
        .copied()
        .filter(|p| hits.contains(p))
        .max()
        .unwrap_or(known);
    // The newest lies below the first gallop point above the last hit, or, where every point
    // was a hit, at most at Slurm's largest id.
    let step = gallop
        .iter()
        .find(|p| **p > newest)
        .map_or(MAX_JOB_ID + 1 - newest, |miss| miss - newest);
    narrow(src, newest, step, true, effort).await
}

/// The newest id slurmctld knows, at or above `known` (an id it gave out). While slurmdbd is
/// behind (a burst of submissions it is still recording, a restart of it), the ids above
/// accounting's newest are slurmctld's alone. A gallop (`known` + 1, 2, 4, … in one look), then
/// another from each highest hit until one finds nothing above it: jobs that ended and were
/// forgotten leave holes, so a miss alone says nothing. A look is one `/jobs/state/?job_id=…`
/// from v0.0.42 on, one `/job/{id}` a point before (v0.0.40 and v0.0.41 list every id in one
/// `/jobs/state/`): a few hundred reads of milliseconds each where slurmdbd is 60,000 ids
/// behind, one look (all misses) where it keeps up.
pub async fn newest_known(
    src: &impl JobSource,
    known: u64,
    effort: &mut JobsEffort,
) -> Result<u64> {
    if src.has_job_states() && !src.filters_job_states() {
        effort.state_fetches += 1;
        let listed = src.job_states(&[]).await?.unwrap_or_default();
        let newest = listed
            .iter()
            .map(|e| e.id)
            .filter(|id| *id <= MAX_JOB_ID)
            .max();
        return Ok(newest.map_or(known, |n| n.max(known)));
    }
    let mut newest = known;
    loop {
        let points = gallop(newest);
        if points.is_empty() {
            return Ok(newest);
        }
        match exists(src, &points, effort).await?.last() {
            Some(&hit) if hit > newest => newest = hit,
            _ => return Ok(newest),
        }
    }
}

/// `from` + 1, 2, 4, … up to [`MAX_JOB_ID`].
pub(super) fn gallop(from: u64) -> Vec<u64> {
    (0..64)
        .map_while(|k| 1u64.checked_shl(k))
        .map_while(|d| from.checked_add(d))
        .take_while(|p| *p <= MAX_JOB_ID)
        .collect()
}

/// Which of `ids` slurmctld knows: one `/jobs/state/?job_id=…` (v0.0.42 on), else one
/// `/job/{id}` each.
async fn exists(
    src: &impl JobSource,
    ids: &[u64],
    effort: &mut JobsEffort,
) -> Result<BTreeSet<u64>> {
    if src.filters_job_states() {
        effort.state_fetches += 1;
        let states = src.job_states(ids).await?.unwrap_or_default();
        return Ok(states
            .iter()
            .map(|e| e.id)
            .filter(|id| ids.contains(id))
            .collect());
    }
    let mut known = BTreeSet::new();
    for &id in ids {
        effort.single_reads += 1;
        if src.job_reading_through(id).await?.is_some() {
            known.insert(id);
        }
    }
    Ok(known)
}

/// Narrows one end of accounting's range to one id: the end lies within `step` ids of `end`
/// (which accounting knows), above it for the newest, below for the oldest. Finer grids of at
/// most [`GRID`] ids, one request each, until one id.
async fn narrow(
    src: &impl JobSource,
    mut end: u64,
    mut step: u64,
    upward: bool,
    effort: &mut JobsEffort,
) -> Result<u64> {
    while step > 1 {
        let finer = step.div_ceil(GRID as u64);
        let ids: Vec<u64> = (1..=GRID as u64)
            .map_while(|k| {
                if upward {
                    end.checked_add(k * finer)
                } else {
                    end.checked_sub(k * finer)
                }
            })
            .take_while(|p| p.abs_diff(end) < step && (1..=MAX_JOB_ID).contains(p))
            .collect();
        if !ids.is_empty() {
            effort.accounting_reads += 1;
            let hits = ids_of(src.accounted(&ids).await?).filter(|id| ids.contains(id));
            end = if upward {
                hits.max().map_or(end, |h| h.max(end))
            } else {
                hits.min().map_or(end, |h| h.min(end))
            };
        }
        step = finer;
    }
    Ok(end)
}

/// The ids of accounting's records.
fn ids_of(records: Vec<StateEntry>) -> impl Iterator<Item = u64> {
    records.into_iter().map(|r| r.id)
}

/// A read of every id from the newest down to the oldest, a window at a time.
#[derive(Debug)]
pub struct Sweep {
    /// The highest id not read yet (all above it, to `top`, are read).
    next: u64,
    /// The newest id when the sweep began (or was last extended).
    top: u64,
    /// The oldest id accounting knows (or, extended, the old top + 1): no job is older.
    floor: u64,
    /// Extended once at least, to ids given out while it read.
    topping_up: bool,
    /// The read ends once the table holds as many live jobs as slurmctld counted: not while
    /// it reads ids given out after that count (all of them are read, whatever the count),
    /// and again when it goes on above its top because the count was not met.
    count_stops: bool,
    /// The newest id accounting knew when the read began: windows above it are read without
    /// asking accounting which of their ids ended (it knows none of them).
    accounted_to: u64,
    /// When the sweep began (unix seconds): a count of live jobs taken after it covers
    /// every job the sweep must find.
    pub began: i64,
    /// Ids of the current window that `/jobs/state/` said exist, to read, highest last.
    queue: Vec<u64>,
    /// Every live id, as one `/jobs/state/` named them when the sweep began (without
    /// accounting): windows are cut from it, with no request of their own.
    listed: Option<BTreeSet<u64>>,
    /// The list held as many live jobs as slurmctld counted at the end of a window.
    counted: bool,
    /// Time spent reading (its caller's count): what the sweep cost slurmrestd.
    pub work: std::time::Duration,
}

impl Sweep {
    pub fn new(span: Span, began: i64) -> Self {
        Self {
            next: span.newest,
            top: span.newest,
            floor: span.oldest.max(1),
            topping_up: false,
            count_stops: true,
            accounted_to: span.newest,
            began,
            queue: Vec::new(),
            listed: None,
            counted: false,
            work: std::time::Duration::ZERO,
        }
    }

    /// A sweep of the live ids one `/jobs/state/` named (`None` when it named none).
    pub fn listed(ids: BTreeSet<u64>, began: i64) -> Option<Self> {
        let span = Span {
            oldest: *ids.first()?,
            newest: *ids.last()?,
        };
        let mut sweep = Self::new(span, began);
        sweep.listed = Some(ids);
        Some(sweep)
    }

    /// Its ids come from a list of live ids, not from accounting.
    pub fn is_listed(&self) -> bool {
        self.listed.is_some()
    }

    /// Every live job slurmctld counted is read, or every id down to the oldest.
    pub fn done(&self) -> bool {
        self.queue.is_empty() && (self.counted || self.next < self.floor)
    }

    pub fn top(&self) -> u64 {
        self.top
    }

    /// Extended once already.
    pub fn topped_up(&self) -> bool {
        self.topping_up
    }

    /// Accounting knew ids up to `newest` only when the read began (slurmdbd behind).
    pub fn accounted_to(mut self, newest: u64) -> Self {
        self.accounted_to = newest;
        self
    }

    /// Goes on to the ids given out while it read, `newest` down to its old top: short jobs
    /// among them may be gone already, and the search for new jobs, which stops at two
    /// unknown ids in a row, would stop short of the live ones above them. `short`: the
    /// count was not met, so the read ends as soon as it is.
    pub fn extend(&mut self, newest: u64, short: bool) {
        self.floor = self.top + 1;
        self.next = newest;
        self.top = newest;
        self.topping_up = true;
        self.count_stops = short;
        self.counted = false;
    }

    /// [`Self::extend`] for a listed sweep: to the live ids `ids` above its top.
    pub fn extend_listed(&mut self, ids: BTreeSet<u64>, short: bool) {
        let above: BTreeSet<u64> = ids.range(self.top + 1..).copied().collect();
        if let Some(&newest) = above.last() {
            self.listed.get_or_insert_default().extend(above);
            self.extend(newest, short);
        }
    }

    /// Ids left to look at.
    pub fn left(&self) -> u64 {
        self.queue.len() as u64 + (self.next + 1).saturating_sub(self.floor)
    }

    /// Reads on until `deadline` (one request at least: a job, or the next window's states)
    /// or the end, `window` ids at a time, into `table` (jobs gone from slurmctld leave it).
    /// `counted`: live jobs slurmctld counted after the sweep began, and when — the read ends
    /// at a window's end once the table holds as many jobs submitted before then (new jobs
    /// read ahead of the sweep are not in that count). A step ends on time even where thousands of
    /// ended ids lie above the live ones, so what is known is published and the other
    /// endpoints are polled meanwhile.
    pub async fn run(
        &mut self,
        src: &impl JobSource,
        table: &mut JobTable,
        (window, counted): (usize, Option<(u64, i64)>),
        deadline: Instant,
        effort: &mut JobsEffort,
    ) -> Result<()> {
        let mut asked = false;
        while !(self.done() || asked && Instant::now() >= deadline) {
            let Some(id) = self.queue.pop() else {
                // Only jobs submitted before the count's second: one submitted in that
                // second may have come after the count (and been read ahead), and would
                // stand in for an older job the count holds.
                if self.count_stops
                    && counted.is_some_and(|(c, at)| table.live_tasks_submitted_by(at - 1) >= c)
                {
                    self.counted = true;
                    break;
                }
                self.next_window(src, table, window, effort).await?;
                asked = true;
                continue;
            };
            asked = true;
            effort.single_reads += 1;
            match src.job_reading_through(id).await {
                Ok(Some(found)) => table.merge(&found),
                Ok(None) => {
                    table.remove(id);
                }
                Err(e) => {
                    // Read again next time.
                    self.queue.push(id);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// The next window of ids to read: those `/jobs/state/` names (v0.0.42 on); before that,
    /// those accounting does not say ended.
    async fn next_window(
        &mut self,
        src: &impl JobSource,
        table: &mut JobTable,
        window: usize,
        effort: &mut JobsEffort,
    ) -> Result<()> {
        let low = self.next.saturating_sub(window as u64 - 1).max(self.floor);
        let ids: Vec<u64> = (low..=self.next).collect();
        let present = if let Some(listed) = &self.listed {
            Some(listed.range(low..=self.next).copied().collect())
        } else if src.filters_job_states() {
            effort.state_fetches += 1;
            src.job_states(&ids)
                .await?
                .map(|states| states.iter().map(|e| e.id).collect())
        } else if low > self.accounted_to {
            None
        } else {
            not_ended(src, &ids, effort).await
        };
        self.queue = match present {
            Some(present) => {
                for id in &ids {
                    if !present.contains(id) {
                        table.remove(*id);
                    }
                }
                present
                    .into_iter()
                    .filter(|id| (low..=self.next).contains(id))
                    .collect()
            }
            None => ids,
        };
        self.next = low - 1;
        Ok(())
    }
}

/// Which of `ids` accounting does not say ended for good: without filtered `/jobs/state/`
/// (before v0.0.42) every id would cost a `/job/{id}` — about 1.2 ms of slurmrestd and 0.4 ms
/// of slurmctld for one that ended, and most ids of a busy site's range did (accounting: about
/// 0.5 ms of slurmrestd an id; measured on 22.05, exporter/benches/README.md).
/// Ends a job may come back from (node failure, preemption, boot failure: requeued) are read.
/// `None` when accounting did not answer: every id is read, the sweep goes on.
async fn not_ended(
    src: &impl JobSource,
    ids: &[u64],
    effort: &mut JobsEffort,
) -> Option<BTreeSet<u64>> {
    let mut ended: BTreeSet<u64> = BTreeSet::new();
    let mut live: BTreeSet<u64> = BTreeSet::new();
    for chunk in ids.chunks(GRID) {
        effort.accounting_reads += 1;
        match src.accounted(chunk).await {
            Ok(records) => {
                for r in records {
                    if !chunk.contains(&r.id) {
                        continue; // a task of an array named in the chunk
                    }
                    if ended_for_good(r.state) {
                        ended.insert(r.id);
                    } else {
                        live.insert(r.id);
                    }
                }
            }
            Err(e) => {
                debug!(error = %e, "accounting did not say which ids ended: reading each");
                return None;
            }
        }
    }
    // An id with any record not ended (a requeued job's older record beside its new one) is read.
    Some(
        ids.iter()
            .copied()
            .filter(|id| !ended.contains(id) || live.contains(id))
            .collect(),
    )
}

/// States no job leaves: its id will never be live again.
fn ended_for_good(state: JobState) -> bool {
    matches!(
        state,
        JobState::Completed
            | JobState::Cancelled
            | JobState::Failed
            | JobState::Timeout
            | JobState::Deadline
            | JobState::OutOfMemory
    )
}
