//! The long list, above the tracker's bound: read id by id, newest first, as a lower bound
//! that only grows; complete at slurmctld's count or the oldest id; jobs that come, end or
//! hide meanwhile; accounting behind, absent, failing or back.

use super::*;
use crate::collect::jobs::long::SPAN_TRIES;
use crate::collect::jobs::{ACCOUNTING_RECHECK, sweep, unix_now};
use crate::model::Diag;
use crate::snapshot::{Accounting, JobListRead};

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
        let topped = t.long.sweep.as_ref().is_some_and(|(s, _)| s.topped_up());
        if topped && passed.is_none() {
            let id = slurm.submit("cpu");
            slurm.submit("cpu");
            slurm.with(|w| w.late.insert(id));
            passed = Some(id);
        }
        tiny(&mut t).await;
        if passed.is_some() && t.long.sweep.is_none() {
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
    t.long.accounting_checked = Instant::now().checked_sub(ACCOUNTING_RECHECK);
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

/// Jobs keep coming while a long list is read id by id without accounting (one a step, as
/// a site's users submit), and one more comes just before some request of the read — each
/// request in turn, every interleaving the read can meet: once exact, the list holds every
/// live job, none lost between two looks.
#[tokio::test]
async fn a_job_coming_before_any_request_of_a_read_id_by_id_is_never_lost() {
    async fn run(before: &[usize], held_count: bool) -> usize {
        let slurm = long_queue(true, 40);
        slurm.with(|w| {
            w.accounted_from = None;
            w.submit_before.extend(before.iter().copied());
        });
        if held_count {
            slurm.count_now();
        }
        let mut t = bounded(10);
        for i in 0..40 {
            if i < 15 {
                slurm.submit("cpu");
            }
            if held_count && i % 10 == 9 {
                slurm.count_now();
            }
            // Steps of a read or two while the list is read, then ordinary ones.
            let interval = if t.has_table { STEP } else { Duration::ZERO };
            t.step(&slurm, Some(&slurm.diag()), interval).await.unwrap();
        }
        if held_count {
            slurm.count_now();
        }
        // A step is exact as of its `/diag`: a job that came during it shows in the next.
        let mut jobs = t.build();
        for _ in 0..50 {
            jobs = step(&mut t, &slurm).await.0;
            if t.has_table && jobs.uncertain.exact() && pending(&jobs) == slurm.live().0 {
                return slurm.with(|w| w.requests);
            }
        }
        panic!(
            "a job coming before request {before:?} (slurmctld's count held: {held_count}) was \
             lost: {} of {} pending jobs listed, {:?}",
            pending(&jobs),
            slurm.live().0,
            jobs.uncertain
        );
    }
    for held_count in [false, true] {
        let requests = run(&[], held_count).await;
        for k in 0..requests + 10 {
            for d in 1..6 {
                run(&[k, k + d], held_count).await;
            }
        }
    }
}
