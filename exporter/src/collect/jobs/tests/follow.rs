//! The short list: what the counters say moved is followed with single reads, holds and
//! backfill plans are caught, and new jobs the search by id passed are found among the ids
//! slurmctld lists, without the whole list read again.

use super::*;
use crate::collect::jobs::follow::UNFOUND_STEPS;
use crate::collect::jobs::{REVIEWS_PER_STEP, unix_now};
use crate::model::PendingClass;

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
            .find_map(|j| j.planned_start.as_ref()?.start.into())
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
    slurm.with(|w| w.counters = Default::default());
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
