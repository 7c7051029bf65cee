//! The long list: above `--request-max-jobs` live jobs, no request asks for every job. The
//! list is read id by id, newest first ([`super::sweep`]), where accounting or `/jobs/state/`
//! says the ids are; then kept as a short list is, with the listed jobs read again round the
//! list instead of the periodic full `/jobs`. What only this read keeps is in [`LongRead`],
//! one field of the tracker.

use std::time::{Duration, Instant};

use tracing::{debug, info, warn};

use super::sweep::{self, Sweep};
use super::{Counters, IDS_PER_REQUEST, JobTracker, Synced, unix_now};
use crate::collect::source::JobSource;
use crate::error::Result;
use crate::model::{Diag, Uncertainty};
use crate::snapshot::{Accounting, JobsEffort};

/// Accounting found absent is asked again this long after (one cheap request): slurmrestd may
/// have been restarted with its slurmdbd plugin, or slurmdbd may be back.
pub const ACCOUNTING_RECHECK: Duration = Duration::from_secs(600);
/// The share of each interval a list too long for one answer is read in, one request at a
/// time, until it is first exact.
const START_SHARE: f64 = 0.8;
/// Accounting that fails (slurmdbd down) is asked this many steps in a row where the ids are
/// before the list is read whole instead. One that is not served (slurmrestd without its
/// slurmdbd plugin: 404) is a configuration, not a blip: the list is read whole at once.
pub(super) const SPAN_TRIES: u32 = 3;
/// How long a read id by id short of slurmctld's count goes on above its top, as slurmctld
/// gives out ids, before it ends and says it is short.
const SHORT_READ: Duration = Duration::from_secs(600);

/// What the tracker keeps for a list too long to ask for in one answer: the read id by id
/// under way, and what it learnt of where the ids are. The short list never touches it.
pub(super) struct LongRead {
    /// Live jobs above which the list is never asked for in one answer.
    pub(super) max_jobs: u64,
    /// The read id by id under way, and the counters when it began.
    pub(super) sweep: Option<(Sweep, Option<Counters>)>,
    /// The list is read id by id again (something only a whole read could settle).
    pub(super) resweep: bool,
    /// What accounting showed when a long list last needed it; the list is read whole, however
    /// long, while it cannot say where the ids are.
    pub(super) accounting: Accounting,
    /// When accounting was last found absent (asked again [`ACCOUNTING_RECHECK`] after).
    pub(super) accounting_checked: Option<Instant>,
    /// slurmrestd lists every job's id and state (`/jobs/state/`, v0.0.40 on): without
    /// accounting, that says where a long list's ids are.
    pub(super) lists_states: bool,
    /// While the list is read id by id: `/diag`'s submissions when the jobs given out since it
    /// began were last all read.
    pub(super) new_read_at: Option<u64>,
    /// Live jobs slurmctld counts that the sweep has not read yet.
    pub(super) unread: u64,
    /// Ids slurmctld had given out above the newest accounting knew, when the list was last
    /// read id by id (slurmdbd behind).
    pub(super) unaccounted: u64,
    /// The listed job read again last, round the list (a large list's resync).
    pub(super) reviewed_all: u64,
    /// Steps in a row accounting could not say where the ids are.
    pub(super) span_failures: u32,
}

impl LongRead {
    pub(super) fn new(max_jobs: u64) -> Self {
        Self {
            max_jobs,
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
        }
    }

    /// Accounting can say where a long list's ids are (or has not been asked yet).
    pub(super) fn accounting_helps(&self) -> bool {
        matches!(self.accounting, Accounting::Unknown | Accounting::Served)
    }
}

impl JobTracker {
    /// One step of reading the list id by id, begun here when none is under way: reads for
    /// most of the interval, then publishes what it has (a lower bound until complete).
    pub(super) async fn sweep_step(
        &mut self,
        src: &impl JobSource,
        diag: Option<&Diag>,
        interval: Duration,
    ) -> Result<(Synced, JobsEffort)> {
        let mut effort = JobsEffort::default();
        let (mut sweep, counters) = match self.long.sweep.take() {
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
        let window = IDS_PER_REQUEST.min(self.long.max_jobs as usize).max(1);
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
            self.long.sweep = Some((sweep, counters));
            return Err(e);
        }
        let found = self.table.live_tasks();
        if !complete {
            self.long.unread = counted.map_or(1, |c| c.saturating_sub(found).max(1));
            self.uncertain.unseen_new = true;
            debug!(
                found,
                counted,
                ids_left = sweep.left(),
                "job list read id by id so far"
            );
            self.long.sweep = Some((sweep, counters));
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
        self.long.new_read_at = diag.and_then(Counters::of).map(|c| c.submitted);
        if self.long.accounting_helps() {
            match sweep::span(src, live, effort).await {
                Ok(Some(span)) => {
                    self.long.span_failures = 0;
                    self.long.accounting = Accounting::Served;
                    let newest = self.slurmctlds_newest(src, span, live, effort).await?;
                    self.long.unaccounted = newest - span.newest;
                    info!(
                        live,
                        max = self.long.max_jobs,
                        oldest = span.oldest,
                        newest,
                        accounting_newest = span.newest,
                        dbd_queue = diag.and_then(|d| d.dbd_agent_queue_size),
                        "more live jobs than --request-max-jobs: reading the job list id by id, newest first"
                    );
                    let read = sweep::Span { newest, ..span };
                    return Ok(Some(Sweep::new(read, began).accounted_to(span.newest)));
                }
                Err(e) if !e.not_served() && self.long.span_failures + 1 < SPAN_TRIES => {
                    // Perhaps a blip: asked again next step.
                    self.long.span_failures += 1;
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
        if !self.long.lists_states {
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
                max = self.long.max_jobs,
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
        if self.long.new_read_at == Some(submitted) && self.next_id.is_none() {
            return Ok(());
        }
        let above = self.table.max_id().unwrap_or(0).max(sweep.top()) + 1;
        self.next_id = Some(self.next_id.map_or(above, |n| n.max(above)));
        let used = self
            .search_new(src, (self.singles_per_step(interval) / 2).max(2))
            .await?;
        effort.single_reads += u64::from(used);
        if self.next_id.is_none() {
            self.long.new_read_at = Some(submitted);
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
                accounting_newest = sweep.top().saturating_sub(self.long.unaccounted),
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
        self.long.resweep = false;
        self.full_wanted = None;
        self.counters = counters;
        // Another read of the whole list waits its turn as a full `/jobs` would.
        let began = Instant::now().checked_sub(sweep.work);
        self.full
            .done(began.unwrap_or_else(Instant::now), sweep.work, self.budget);
        // Short of the count: the jobs not found are looked for as unfound submissions are
        // (the search for new ids, the ids slurmctld lists, the next read of the list), and
        // each new count of slurmctld's says whether they are still missing.
        self.long.unread = short;
        self.next_id = None;
        self.long.new_read_at = None;
        self.checks.clear();
        self.maybe_left = 0;
        self.unfound = i64::try_from(short).unwrap_or(i64::MAX);
        self.verify_listed = self.long.lists_states;
        self.last_full = Some(Instant::now());
        self.uncertain = Uncertainty {
            unseen_new: true,
            ..Uncertainty::default()
        };
        self.table.compact();
    }

    /// A list read id by id short of slurmctld's count: each later count says whether jobs
    /// are still missing (live jobs then, against those the list holds submitted by then).
    pub(super) fn recount_short(&mut self, diag: Option<&Diag>) {
        if self.long.unread == 0 || !self.has_table {
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
        self.long.unread = short;
    }

    /// Accounting cannot say where a long list's ids are: from now on `/jobs/state/` does
    /// (v0.0.40 on), or the list is read whole. Said once as a warning (and by
    /// `slurm_exporter_job_list_info`); asked again after [`ACCOUNTING_RECHECK`].
    fn accounting_absent(&mut self, state: Accounting, live: u64, why: &str) {
        if self.long.accounting != state {
            let instead = if self.long.lists_states {
                "reading the ids /jobs/state/ lists instead"
            } else {
                "reading the whole /jobs instead"
            };
            warn!(
                live,
                max = self.long.max_jobs,
                accounting = state.as_str(),
                "more live jobs than --request-max-jobs, but slurmdbd's accounting cannot say where their ids are ({why}): {instead}"
            );
        }
        self.long.accounting = state;
        self.long.accounting_checked = Some(Instant::now());
        self.long.span_failures = 0;
        self.long.resweep = false;
    }

    /// Asks accounting again, [`ACCOUNTING_RECHECK`] after it was found absent: one request
    /// for the newest listed id. Back, a long list is read id by id again from the next step.
    pub(super) async fn recheck_accounting(&mut self, src: &impl JobSource) {
        if self
            .long
            .accounting_checked
            .is_some_and(|t| t.elapsed() < ACCOUNTING_RECHECK)
        {
            return;
        }
        self.long.accounting_checked = Some(Instant::now());
        let id = self.table.max_id().unwrap_or(1);
        match src.accounted(&[id]).await {
            Ok(_) => {
                info!("slurmdbd's accounting answers again: a long job list is read id by id");
                self.long.accounting = Accounting::Served;
            }
            Err(e) => debug!(error = %e, "accounting still cannot say where job ids are"),
        }
    }

    /// A large list's resync: the next listed jobs are read again, round the list, as many
    /// as a step's budget allows (at 100,000 jobs and the default 3 %, a round takes about
    /// two hours); whether any changed.
    pub(super) async fn review_listed(
        &mut self,
        src: &impl JobSource,
        interval: Duration,
        effort: &mut JobsEffort,
    ) -> bool {
        let n = (self.singles_per_step(interval) / 2).max(1) as usize;
        let ids = self.table.ids_after(self.long.reviewed_all, n);
        let (changed, last) = self.read_all_again(src, &ids, effort).await;
        if let Some(id) = last {
            self.long.reviewed_all = id;
        }
        changed
    }
}
