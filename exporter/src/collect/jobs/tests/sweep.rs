//! The read id by id on its own ([`Sweep`], and the searches of where the ids are) against
//! the slurmctld in memory: which ids it reads and in what order, where it stops, what
//! becomes of jobs gone when it passes them or of a read that failed, and how few requests
//! say where the ids end.

use std::collections::BTreeSet;
use std::sync::Mutex;

use super::*;
use crate::collect::jobs::sweep::{self, Span, Sweep};
use crate::collect::jobs::unix_now;
use crate::collect::source::JobSource;
use crate::error::{Error, Result};
use crate::model::Diag;
use crate::model::job_table::{JobTable, StateEntry};
use crate::slurm::fetch::Outcome;

/// A deadline no run here reaches: it ends at the sweep's end (or its count).
fn later() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

/// The ids of the jobs `table` holds.
fn ids(table: &JobTable) -> BTreeSet<u64> {
    table.jobs().map(|j| j.id).collect()
}

/// The ids slurmctld holds (every one live: the forgotten ones are gone).
fn live(slurm: &Slurmctld) -> BTreeSet<u64> {
    slurm.with(|w| w.jobs.keys().copied().collect())
}

/// The slurmctld in memory, but `/job/{id}` of one id fails once while the list is read id
/// by id (slurmrestd restarting, a timeout).
struct Flaky<'a> {
    slurm: &'a Slurmctld,
    fail: Mutex<Option<u64>>,
}

impl JobSource for Flaky<'_> {
    fn has_job_states(&self) -> bool {
        self.slurm.has_job_states()
    }

    fn job(&self, id: u64) -> impl Future<Output = Result<Option<JobTable>>> + Send {
        self.slurm.job(id)
    }

    fn filters_job_states(&self) -> bool {
        self.slurm.filters_job_states()
    }

    async fn job_reading_through(&self, id: u64) -> Result<Option<JobTable>> {
        if self.fail.lock().unwrap().take_if(|f| *f == id).is_some() {
            return Err(Error::Http {
                endpoint: "job".into(),
                status: 502,
                detail: "Bad Gateway".into(),
            });
        }
        self.slurm.job_reading_through(id).await
    }

    fn accounted(&self, ids: &[u64]) -> impl Future<Output = Result<Vec<StateEntry>>> + Send {
        self.slurm.accounted(ids)
    }

    fn job_states(
        &self,
        only: &[u64],
    ) -> impl Future<Output = Result<Option<Vec<StateEntry>>>> + Send {
        self.slurm.job_states(only)
    }

    fn job_table(
        &self,
        since: Option<i64>,
    ) -> impl Future<Output = Result<Outcome<JobTable>>> + Send {
        self.slurm.job_table(since)
    }

    fn diag(&self) -> impl Future<Output = Result<Option<Diag>>> + Send {
        JobSource::diag(self.slurm)
    }
}

/// One request a run (its deadline passed at once): the jobs it reads come one a run, every
/// live id from the newest down, and the list only grows; ids slurmctld forgot cost no read
/// (`/jobs/state/` says they are gone, or before v0.0.42 accounting says they ended).
#[tokio::test]
async fn a_sweep_reads_every_live_id_newest_first_and_the_list_only_grows() {
    for states in [false, true] {
        let slurm = long_queue(states, 40);
        let mut sweep = Sweep::new(
            Span {
                oldest: 1,
                newest: 40,
            },
            unix_now(),
        );
        let (mut table, mut effort) = (JobTable::default(), JobsEffort::default());
        let mut order = Vec::new();
        for _ in 0..100 {
            if sweep.done() {
                break;
            }
            let before = ids(&table);
            let run = sweep.run(&slurm, &mut table, (10, None), Instant::now(), &mut effort);
            run.await.unwrap();
            let after = ids(&table);
            assert!(after.is_superset(&before), "states {states}: a job left");
            let new: Vec<u64> = after.difference(&before).copied().collect();
            assert!(new.len() <= 1, "states {states}: {new:?} in one request");
            order.extend(new);
        }
        assert!(sweep.done(), "states {states}: never done");
        assert_eq!(sweep.left(), 0);
        let newest_first: Vec<u64> = live(&slurm).into_iter().rev().collect();
        assert_eq!(order, newest_first, "states {states}");
        assert_eq!(times(&slurm.asked(), "job"), 30, "states {states}");
    }
}

/// Once the list holds as many live jobs as slurmctld counted after the sweep began, the
/// sweep ends at that window: the ids below (jobs long gone) are never looked at. Without a
/// count it goes down to the oldest id accounting knows, to find the same jobs.
#[tokio::test]
async fn a_sweep_ends_once_it_holds_the_live_jobs_slurmctld_counted() {
    // 30 old ids ended and forgotten below 20 live ones; accounting knows them all.
    let slurm = Slurmctld::new(false);
    slurm.with(|w| w.accounted_from = Some(1));
    for _ in 0..30 {
        let id = slurm.submit("cpu");
        slurm.ended_long_ago(id);
    }
    for _ in 0..20 {
        slurm.submit("cpu");
    }
    let span = Span {
        oldest: 1,
        newest: 50,
    };
    let at = unix_now();
    let mut effort = JobsEffort::default();
    let mut counted = JobTable::default();
    let mut sweep = Sweep::new(span, at);
    let count = Some((20, at));
    let run = sweep.run(&slurm, &mut counted, (5, count), later(), &mut effort);
    run.await.unwrap();
    assert!(sweep.done());
    assert_eq!(counted.live_tasks(), 20);
    assert_eq!(
        sweep.left(),
        30,
        "the ids below the live ones were looked at"
    );
    let asked = slurm.asked();
    assert_eq!(times(&asked, "job"), 20);
    assert_eq!(
        times(&asked, "accounting"),
        4,
        "one a window of the live ids"
    );
    // No count: every window down to id 1, for the same jobs.
    let mut whole = JobTable::default();
    let mut sweep = Sweep::new(span, at);
    let run = sweep.run(&slurm, &mut whole, (5, None), later(), &mut effort);
    run.await.unwrap();
    assert!(sweep.done());
    assert_eq!(sweep.left(), 0);
    assert_eq!(ids(&whole), ids(&counted));
    assert_eq!(times(&slurm.asked(), "accounting"), 10);
}

/// Jobs the list holds from an earlier read that are gone when the sweep passes them leave
/// it — one that ended between its window's look and its read (`/job/{id}` knows it no
/// more), one slurmctld forgot before its window — so neither stands in for a live job.
#[tokio::test]
async fn jobs_gone_when_the_sweep_passes_them_leave_the_list() {
    for states in [false, true] {
        let slurm = long_queue(states, 20);
        let Outcome::Fresh {
            data: mut table, ..
        } = slurm.job_table(None).await.unwrap()
        else {
            panic!("no list");
        };
        assert!(table.get(20).is_some() && table.get(5).is_some());
        let mut effort = JobsEffort::default();
        let mut sweep = Sweep::new(
            Span {
                oldest: 1,
                newest: 20,
            },
            unix_now(),
        );
        // The first window (20 down to 11) is looked at, nothing read yet.
        let run = sweep.run(&slurm, &mut table, (10, None), Instant::now(), &mut effort);
        run.await.unwrap();
        slurm.ended_long_ago(20);
        slurm.ended_long_ago(5);
        let run = sweep.run(&slurm, &mut table, (10, None), later(), &mut effort);
        run.await.unwrap();
        assert!(sweep.done());
        assert!(table.get(20).is_none(), "states {states}: 20 kept");
        assert!(table.get(5).is_none(), "states {states}: 5 kept");
        assert_eq!(ids(&table), live(&slurm), "states {states}");
    }
}

/// A read that fails ends the run with its error, and the next run reads that id again
/// before going on: no job is skipped.
#[tokio::test]
async fn an_id_whose_read_failed_is_read_again_by_the_next_run() {
    let slurm = long_queue(true, 20);
    let flaky = Flaky {
        slurm: &slurm,
        fail: Mutex::new(Some(17)),
    };
    let mut sweep = Sweep::new(
        Span {
            oldest: 1,
            newest: 20,
        },
        unix_now(),
    );
    let (mut table, mut effort) = (JobTable::default(), JobsEffort::default());
    let run = sweep.run(&flaky, &mut table, (10, None), later(), &mut effort);
    assert!(run.await.is_err());
    assert!(!sweep.done());
    assert!(table.get(19).is_some(), "read before the failure");
    assert!(
        table.get(17).is_none() && table.get(16).is_none(),
        "read past it"
    );
    let run = sweep.run(&flaky, &mut table, (10, None), later(), &mut effort);
    run.await.unwrap();
    assert!(sweep.done());
    assert_eq!(ids(&table), live(&slurm));
}

/// Extended to the ids given out while it read, a done sweep reads those above its old top,
/// and them only; what it read before stays.
#[tokio::test]
async fn an_extended_sweep_reads_only_the_ids_above_its_old_top() {
    for states in [false, true] {
        let slurm = long_queue(states, 20);
        let mut sweep = Sweep::new(
            Span {
                oldest: 1,
                newest: 20,
            },
            unix_now(),
        );
        let (mut table, mut effort) = (JobTable::default(), JobsEffort::default());
        let run = sweep.run(&slurm, &mut table, (10, None), later(), &mut effort);
        run.await.unwrap();
        assert!(sweep.done() && !sweep.topped_up());
        slurm.asked();
        let new: Vec<u64> = (0..3).map(|_| slurm.submit("new")).collect();
        sweep.extend(23, false);
        assert!(!sweep.done() && sweep.topped_up());
        assert_eq!((sweep.top(), sweep.left()), (23, 3));
        let run = sweep.run(&slurm, &mut table, (10, None), later(), &mut effort);
        run.await.unwrap();
        assert!(sweep.done());
        assert_eq!(times(&slurm.asked(), "job"), 3, "states {states}");
        assert!(new.iter().all(|id| table.get(*id).is_some()));
        assert_eq!(ids(&table), live(&slurm), "states {states}");
    }
}

/// Without accounting, one listing of the live ids is the sweep: its windows are cut from it
/// with no request of their own, and each listed job is read once; extended, it reads the
/// listed ids above its old top. A listing that names none is no sweep.
#[tokio::test]
async fn a_listed_sweep_reads_the_listed_ids_and_asks_nothing_else() {
    assert!(Sweep::listed(BTreeSet::new(), 0).is_none());
    let slurm = long_queue(true, 40);
    slurm.with(|w| w.accounted_from = None);
    let listed = live(&slurm);
    let mut sweep = Sweep::listed(listed.clone(), unix_now()).unwrap();
    assert!(sweep.is_listed());
    assert_eq!(sweep.top(), 40);
    let (mut table, mut effort) = (JobTable::default(), JobsEffort::default());
    let run = sweep.run(&slurm, &mut table, (10, None), later(), &mut effort);
    run.await.unwrap();
    assert!(sweep.done());
    assert_eq!(ids(&table), listed);
    assert_eq!(slurm.asked(), vec!["job"; 30]);
    let new = slurm.submit("new");
    sweep.extend_listed(live(&slurm), false);
    assert_eq!((sweep.top(), sweep.left()), (new, 1));
    let run = sweep.run(&slurm, &mut table, (10, None), later(), &mut effort);
    run.await.unwrap();
    assert!(sweep.done() && table.get(new).is_some());
    assert_eq!(slurm.asked(), vec!["job"]);
}

/// Where accounting's ids end, above one it knows: a gallop and finer grids, a handful of
/// requests however far; and no further than slurmdbd recorded (slurmctld's newer ids are
/// not accounting's).
#[tokio::test]
async fn accountings_newest_id_is_found_above_a_known_one_in_a_few_requests() {
    let slurm = Slurmctld::new(true);
    slurm.with(|w| w.accounted_from = Some(1));
    for newest in [1, 2, 3, 1000, 1_234_567] {
        slurm.with(|w| w.last_id = newest);
        let mut effort = JobsEffort::default();
        let found = sweep::newest_above(&slurm, 1, &mut effort).await.unwrap();
        assert_eq!(found, newest);
        assert!(effort.accounting_reads <= 5, "{newest}: {effort:?}");
    }
    slurm.with(|w| w.accounted_to = Some(700));
    let mut effort = JobsEffort::default();
    let found = sweep::newest_above(&slurm, 1, &mut effort).await.unwrap();
    assert_eq!(found, 700);
}

/// Near Slurm's largest id every gallop point above a known id may be known: the newest then
/// lies between the last point and the largest id, not at the last point.
#[tokio::test]
async fn accountings_newest_id_is_found_when_every_gallop_point_is_known() {
    let slurm = Slurmctld::new(true);
    let known = sweep::MAX_JOB_ID - 1000;
    for newest in [sweep::MAX_JOB_ID - 10, sweep::MAX_JOB_ID] {
        slurm.with(|w| {
            w.accounted_from = Some(1);
            w.last_id = newest;
        });
        let mut effort = JobsEffort::default();
        let found = sweep::newest_above(&slurm, known, &mut effort)
            .await
            .unwrap();
        assert_eq!(found, newest);
    }
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
