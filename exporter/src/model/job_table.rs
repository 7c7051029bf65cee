//! The jobs a poller knows, kept between polls so that a change costs what changed rather
//! than the whole queue: one full `/jobs` of 20,000 jobs costs slurmrestd 15–22 s of CPU,
//! one `/job/{id}` a few milliseconds. [`crate::collect`] fills the table from a full
//! answer, updates single jobs from `/job/{id}`, and rebuilds [`Jobs`] from it with the
//! same [`JobsBuilder`] a full decode uses, so both paths count alike.
//!
//! Strings that repeat across jobs (partitions, users, reasons, TRES) are shared.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use super::jobs::{JobRecord, JobsBuilder};
use super::origin::OriginRules;
use super::record::{Job, Text};
use super::{JobState, Jobs};

/// A job as [`JobRecord`] reads it, its text shared between the jobs that repeat it.
pub type OwnedJob = Job<Arc<str>>;

impl OwnedJob {
    pub fn record(&self) -> JobRecord<'_> {
        self.map_text(|s, _| &**s)
    }

    /// Pending and not held: what demand is made of, and what may start any moment.
    pub fn waiting_to_run(&self) -> bool {
        self.state == Some(JobState::Pending) && !self.record().held()
    }

    pub fn running(&self) -> bool {
        matches!(self.state, Some(JobState::Running | JobState::Suspended))
    }

    /// How many submissions `/diag` counted for this record: an unsplit array's pending
    /// tasks, or one.
    pub fn submissions(&self) -> u64 {
        if self.array_task_string.is_empty() {
            1
        } else {
            super::text::array_tasks(&self.array_task_string).0.max(1)
        }
    }

    /// The array this record belongs to, when it is a task split off from it.
    pub fn array_parent(&self) -> Option<u64> {
        self.array_job_id.filter(|a| *a > 0 && *a != self.id)
    }
}

/// One line of `/jobs/state/`: `id` or `id_task`, and the state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateEntry {
    pub id: u64,
    pub task: Option<u64>,
    pub state: JobState,
}

impl StateEntry {
    /// Whether this line speaks of `job` (a split-off array task is named after its array
    /// by some versions, after itself by others).
    pub fn names(&self, job: &OwnedJob) -> bool {
        self.id == job.id
            || (Some(self.id) == job.array_job_id
                && self.task.is_some()
                && self.task == job.array_task_id)
    }
}

/// Job records by id.
#[derive(Clone, Debug, Default)]
pub struct JobTable {
    jobs: BTreeMap<u64, OwnedJob>,
    strings: HashSet<Arc<str>>,
}

impl JobTable {
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    pub fn get(&self, id: u64) -> Option<&OwnedJob> {
        self.jobs.get(&id)
    }

    pub fn jobs(&self) -> impl Iterator<Item = &OwnedJob> {
        self.jobs.values()
    }

    /// The highest job id known: new jobs get the ids after it.
    pub fn max_id(&self) -> Option<u64> {
        self.jobs.keys().next_back().copied()
    }

    /// Adds or replaces the record of `r.id`.
    pub fn upsert(&mut self, r: &JobRecord<'_>) {
        // A text most jobs share is looked up; one that is the job's own is not worth it.
        let job = r.map_text(|v, text| match text {
            Text::Shared => self.intern(v),
            Text::Own => Arc::from(*v),
        });
        self.jobs.insert(r.id, job);
    }

    /// Adds every record of `other` (the jobs of one `/job/{id}` answer).
    pub fn merge(&mut self, other: &JobTable) {
        for j in other.jobs() {
            self.upsert(&j.record());
        }
    }

    /// Records that job `id` is now in `state`, all else as it was.
    pub fn set_state(&mut self, id: u64, state: JobState) {
        if let Some(j) = self.jobs.get_mut(&id) {
            j.state = Some(state);
        }
    }

    /// Up to `n` held jobs, in id order from the first after `after`, then round from the
    /// start: where a review of holds goes on.
    pub fn held_after(&self, after: u64, n: usize) -> Vec<u64> {
        let held = |j: &&OwnedJob| j.state == Some(JobState::Pending) && j.record().held();
        let later = self.jobs.range(after.saturating_add(1)..).map(|(_, j)| j);
        let earlier = self.jobs.range(..=after).map(|(_, j)| j);
        later
            .chain(earlier)
            .filter(held)
            .map(|j| j.id)
            .take(n)
            .collect()
    }

    /// Up to `n` job ids after `after`, round the table (the next to read again).
    pub fn ids_after(&self, after: u64, n: usize) -> Vec<u64> {
        let later = self
            .jobs
            .range(after.saturating_add(1)..)
            .map(|(id, _)| *id);
        let earlier = self.jobs.range(..=after).map(|(id, _)| *id);
        later.chain(earlier).take(n).collect()
    }

    /// Jobs waiting to run or running, array tasks one by one, as `/diag` counts them
    /// (suspended jobs left out: a count that errs low never ends a read of the list early).
    pub fn live_tasks(&self) -> u64 {
        self.live_tasks_submitted_by(i64::MAX)
    }

    /// [`Self::live_tasks`] of the jobs submitted at or before `at` (unix seconds; a job whose
    /// submit time is unknown counts): what a count slurmctld took at `at` can hold.
    pub fn live_tasks_submitted_by(&self, at: i64) -> u64 {
        self.jobs
            .values()
            .filter(|j| j.submit_time.is_none_or(|t| t <= at))
            .map(|j| match j.state {
                Some(JobState::Pending) => j.submissions(),
                Some(JobState::Running) => 1,
                _ => 0,
            })
            .sum()
    }

    pub fn remove(&mut self, id: u64) -> Option<OwnedJob> {
        self.jobs.remove(&id)
    }

    /// Counts and pending demand, exactly as decoding the same jobs from `/jobs` gives;
    /// `origins` recognises a site's Kubernetes placeholders.
    pub fn build(&self, per_owner: bool, origins: &OriginRules) -> Jobs {
        let mut b = JobsBuilder::new(per_owner).with_rules(origins);
        for j in self.jobs.values() {
            b.add(j.record());
        }
        b.finish()
    }

    fn intern(&mut self, v: &str) -> Arc<str> {
        if let Some(s) = self.strings.get(v) {
            return s.clone();
        }
        let s: Arc<str> = Arc::from(v);
        self.strings.insert(s.clone());
        s
    }

    /// Drops shared strings no job uses any more (after many jobs came and went).
    pub fn compact(&mut self) {
        self.strings.retain(|s| Arc::strong_count(s) > 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::PendingClass;

    fn pending<'a>(id: u64, partition: &'a str, reason: &'a str) -> JobRecord<'a> {
        JobRecord {
            id,
            state: Some(JobState::Pending),
            partition,
            reason,
            cpus: Some(2),
            nodes: Some(1),
            ..Default::default()
        }
    }

    #[test]
    fn a_table_builds_what_the_builder_builds_from_the_same_records() {
        let records = [
            pending(1, "cpu", "Resources"),
            pending(2, "cpu,gpu", "Priority"),
            JobRecord {
                hold: true,
                ..pending(3, "gpu", "JobHeldUser")
            },
            JobRecord {
                state: Some(JobState::Running),
                node_list: "c[1-2]",
                nodes: Some(2),
                end_time: Some(1_800_000_000),
                ..pending(4, "cpu", "None")
            },
            JobRecord {
                array_job_id: Some(5),
                array_task_string: "3-20%5",
                array_max_tasks: Some(5),
                ..pending(5, "cpu", "JobArrayTaskLimit")
            },
        ];
        let mut direct = JobsBuilder::new(true);
        let mut table = JobTable::default();
        for r in &records {
            direct.add(r.clone());
            table.upsert(r);
        }
        assert_eq!(table.build(true, &OriginRules::default()), direct.finish());
        assert_eq!(table.max_id(), Some(5));
        assert!(table.get(1).unwrap().waiting_to_run());
        assert!(!table.get(3).unwrap().waiting_to_run(), "held");
        assert!(table.get(4).unwrap().running());
    }

    #[test]
    fn updating_a_job_replaces_it_and_strings_are_shared() {
        let mut table = JobTable::default();
        table.upsert(&pending(1, "cpu", "Resources"));
        table.upsert(&pending(2, "cpu", "Resources"));
        assert!(Arc::ptr_eq(
            &table.get(1).unwrap().partition,
            &table.get(2).unwrap().partition
        ));
        table.upsert(&JobRecord {
            state: Some(JobState::Running),
            ..pending(1, "cpu", "None")
        });
        let jobs = table.build(false, &OriginRules::default());
        assert_eq!(jobs.cluster.state(JobState::Running), 1);
        assert_eq!(jobs.cluster.state(JobState::Pending), 1);
        assert_eq!(jobs.pending[0].class, PendingClass::Schedulable);
        table.remove(2);
        table.compact();
        assert_eq!(table.build(false, &OriginRules::default()).pending.len(), 0);
    }

    /// A job seen to start by its state alone holds nodes the table does not know: said, so
    /// that nothing takes a node's listed jobs for all it runs until its record is read.
    #[test]
    fn a_job_started_by_its_state_alone_is_running_somewhere_unknown() {
        let mut table = JobTable::default();
        table.upsert(&pending(1, "cpu", "Resources"));
        table.set_state(1, JobState::Running);
        let jobs = table.build(false, &OriginRules::default());
        assert_eq!(jobs.cluster.state(JobState::Running), 1);
        assert_eq!((jobs.running_unplaced, jobs.running_on.len()), (1, 0));
        table.upsert(&JobRecord {
            state: Some(JobState::Running),
            node_list: "c1",
            requeue: true,
            ..pending(1, "cpu", "None")
        });
        let jobs = table.build(false, &OriginRules::default());
        assert_eq!(jobs.running_unplaced, 0);
        assert!(jobs.running_on["c1"].requeueable);
    }
}
