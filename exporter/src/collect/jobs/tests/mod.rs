//! The tracker's decisions against the slurmctld in memory ([`Slurmctld`]): `follow.rs` tests
//! the short list, `long.rs` the long one read id by id, `sweep.rs` that read's helper on its
//! own. What they share is here: trackers, steps, and counts of what a step published.

mod follow;
mod long;
mod sweep;

use std::time::{Duration, Instant};

use super::{JobTracker, REQUEST_MAX_JOBS, Synced};
use crate::collect::pace::Budget;
use crate::collect::source::memory::Slurmctld;
use crate::model::origin::OriginRules;
use crate::model::{JobState, Jobs};
use crate::snapshot::JobsEffort;

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

/// Single reads so slow that a step's budget is at its floor, and the next read of the
/// whole list minutes away (it cost 10 s, twice).
fn starve(t: &mut JobTracker) {
    t.single_cost = Duration::from_secs(1);
    for _ in 0..2 {
        t.full
            .done(Instant::now(), Duration::from_secs(10), t.budget);
    }
}
