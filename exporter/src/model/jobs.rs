//! Aggregating `/jobs` while it is decoded. Each API version's wire module turns one job
//! object into a borrowed [`JobRecord`]; the [`JobsBuilder`] folds records into counts and
//! keeps only pending jobs, whose demand the metrics and the autoscaler need.
//!
//! Counting rules (see ARCHITECTURE.md, "Native-compatible names"):
//! * job counts are job *records*: an unsplit pending array (`1-5000`) counts once, while its
//!   demand counts every task that may start now (its `%N` throttle minus running tasks);
//! * native per-partition job counts use the job's first partition (the one slurmctld points
//!   at); demand counts a job in every partition it was submitted to;
//! * held jobs are pending; `_nohold` figures leave them out.

use std::collections::HashMap;
use std::sync::Arc;

use super::origin::{Origin, OriginRules};
use super::{JobCounts, JobState, Jobs, NodeWork, PendingClass, PendingJob, PlannedStart};
use crate::model::text::{array_tasks, expand_hostlist};

pub use super::record::JobRecord;

/// A job's partitions as written (`a,b`), parsed once: the first and all of them.
type PartitionList = (Arc<str>, Arc<[Arc<str>]>);

/// Folds job records into [`Jobs`].
#[derive(Default)]
pub struct JobsBuilder {
    per_owner: bool,
    origins: OriginRules,
    partition_lists: HashMap<Box<str>, PartitionList>,
    names: HashMap<Box<str>, Arc<str>>,
    jobs: Jobs,
    running_array_tasks: HashMap<u64, u64>,
    /// (index into `jobs.pending`, array job id, throttle)
    throttled: Vec<(usize, u64, u64)>,
}

impl JobsBuilder {
    /// `per_owner`: also count jobs per (user, account) — a cardinality cost, so opt-in.
    pub fn new(per_owner: bool) -> Self {
        Self {
            per_owner,
            ..Default::default()
        }
    }

    /// Recognising Kubernetes placeholders by a site's `rules` besides slurm-bridge's mark.
    pub fn with_rules(mut self, rules: &OriginRules) -> Self {
        self.origins = rules.clone();
        self
    }

    fn intern(names: &mut HashMap<Box<str>, Arc<str>>, s: &str) -> Arc<str> {
        if let Some(a) = names.get(s) {
            return a.clone();
        }
        let a: Arc<str> = Arc::from(s);
        names.insert(Box::from(s), a.clone());
        a
    }

    /// The job's first partition and all its partitions, shared between jobs.
    fn partitions(&mut self, list: &str) -> Option<PartitionList> {
        if let Some(p) = self.partition_lists.get(list) {
            return Some(p.clone());
        }
        let all: Vec<Arc<str>> = list
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| Self::intern(&mut self.names, p))
            .collect();
        let entry = (all.first()?.clone(), Arc::from(all));
        self.partition_lists.insert(Box::from(list), entry.clone());
        Some(entry)
    }

    /// Counts one job record.
    pub fn add(&mut self, r: JobRecord<'_>) {
        let state = r.state.unwrap_or(JobState::Other);
        let origin = self.origins.classify(&r);
        self.jobs.malformed_admin_comments += u64::from(origin.malformed);
        let parts = self.partitions(r.partition);
        let primary = parts.as_ref().map(|(p, _)| p);
        let o = origin.origin().index();
        for c in Self::counts(&mut self.jobs, primary) {
            c.by_state[state as usize] += 1;
            let counts = &mut c.by_origin[o];
            match state {
                JobState::Pending => {
                    counts.pending += 1;
                    counts.pods_pending += origin.pods;
                }
                JobState::Running | JobState::Suspended => {
                    counts.running += 1;
                    counts.pods_running += origin.pods;
                }
                _ => {}
            }
        }
        match state {
            JobState::Running | JobState::Suspended => self.add_running(&r, primary),
            JobState::Pending => self.add_pending(&r, parts, origin.origin()),
            _ => {}
        }
        if self.per_owner {
            let user = Self::intern(&mut self.names, r.user);
            let account = Self::intern(&mut self.names, r.account);
            *self
                .jobs
                .by_owner
                .entry((user, account))
                .or_default()
                .entry(state)
                .or_default() += 1;
        }
    }

    /// The cluster's counts and those of the job's partition (the first it names), made on
    /// first use.
    fn counts<'a>(
        jobs: &'a mut Jobs,
        primary: Option<&Arc<str>>,
    ) -> impl Iterator<Item = &'a mut JobCounts> {
        let Jobs {
            cluster,
            partitions,
            ..
        } = jobs;
        let partition = match primary {
            Some(p) => {
                // Looked up first: a clone of the name only for a partition seen first.
                if !partitions.contains_key(p) {
                    partitions.insert(p.clone(), JobCounts::default());
                }
                partitions.get_mut(p)
            }
            None => None,
        };
        std::iter::once(cluster).chain(partition)
    }

    /// A running (or suspended) job: what it holds, its array's running tasks, and when each
    /// of its nodes is free of it.
    fn add_running(&mut self, r: &JobRecord<'_>, primary: Option<&Arc<str>>) {
        let (cpus, gpus, nodes) = (r.cpus.unwrap_or(0), r.gpus_alloc(), r.node_count());
        for c in Self::counts(&mut self.jobs, primary) {
            c.count_allocation(cpus, gpus, nodes);
        }
        if let (Some(array), Some(_)) = (r.array_job_id.filter(|a| *a > 0), r.array_task_id) {
            *self.running_array_tasks.entry(array).or_default() += 1;
        }
        let end = r.end_time.filter(|t| *t > 0);
        if r.node_list.is_empty() {
            self.jobs.running_unplaced += 1;
        }
        for node in expand_hostlist(r.node_list, nodes.max(1) as usize) {
            let name = Self::intern(&mut self.names, &node);
            let work = self.jobs.running_on.entry(name).or_insert(NodeWork {
                jobs: 0,
                free_at: end,
                requeueable: true,
            });
            work.jobs += 1;
            work.free_at = work.free_at.zip(end).map(|(a, b)| a.max(b));
            work.requeueable &= r.requeue;
        }
    }

    /// A pending job: its reason and size counted, and the job kept for demand.
    fn add_pending(&mut self, r: &JobRecord<'_>, parts: Option<PartitionList>, origin: Origin) {
        let held = r.held();
        let reason_text = if r.reason.is_empty() {
            "None"
        } else {
            r.reason
        };
        let min_nodes = r.node_count();
        let max_nodes = r.max_nodes.unwrap_or(0).max(min_nodes);
        let mut reason = None;
        for c in Self::counts(&mut self.jobs, parts.as_ref().map(|(p, _)| p)) {
            c.count_pending(held, reason_text, &mut reason, (min_nodes, max_nodes));
        }
        let (tasks, throttle_in_string) = array_tasks(r.array_task_string);
        let throttle = r.array_max_tasks.filter(|m| *m > 0).or(throttle_in_string);
        if let (Some(limit), Some(array)) = (throttle, r.array_job_id.filter(|a| *a > 0)) {
            self.throttled.push((self.jobs.pending.len(), array, limit));
        }
        let class = PendingClass::of(r.reason, held);
        // A start time on a job that could run now is the backfill scheduler's plan (on a
        // held or waiting one it is its begin time, or stale).
        let plan = r
            .start_time
            .filter(|_| class == PendingClass::Schedulable)
            .map(|start| PlannedStart {
                start,
                nodes: expand_hostlist(r.scheduled_nodes, max_nodes.max(1) as usize)
                    .iter()
                    .filter(|n| !n.is_empty())
                    .map(|n| Self::intern(&mut self.names, n))
                    .collect(),
            });
        self.jobs.pending.push(PendingJob {
            id: r.id,
            partitions: parts.map(|(_, all)| all).unwrap_or_else(|| Arc::from([])),
            class,
            reason: reason.unwrap_or_else(|| Arc::from(reason_text)),
            tasks,
            throttled: 0,
            nodes: min_nodes,
            cpus: r.cpus.unwrap_or(0).max(1),
            gpus: r.requested_gpus().unwrap_or(0),
            memory_bytes: r.memory_bytes(),
            whole_node: r.whole_node || r.all_of_a_nodes_memory(),
            constraint: Self::intern(&mut self.names, r.features),
            excluded: Self::intern(&mut self.names, r.excluded_nodes),
            submit_time: r.submit_time.filter(|t| *t > 0),
            origin,
            planned_start: plan,
        });
    }

    pub fn finish(mut self) -> Jobs {
        // A throttled array may only start `limit - running` more tasks right now; the rest
        // wait on the throttle (a held array's tasks are all held).
        for (index, array, limit) in self.throttled {
            let running = self.running_array_tasks.get(&array).copied().unwrap_or(0);
            if let Some(p) = self.jobs.pending.get_mut(index)
                && p.class != PendingClass::Held
            {
                let may_start = p.tasks.min(limit.saturating_sub(running));
                p.throttled = p.tasks - may_start;
                p.tasks = may_start;
            }
        }
        self.jobs
    }
}

fn raise(slot: &mut Option<u64>, v: u64) {
    *slot = Some(slot.map_or(v, |s| s.max(v)));
}

impl JobCounts {
    /// A running job's allocation.
    fn count_allocation(&mut self, cpus: u64, gpus: u64, nodes: u64) {
        self.cpus_alloc = self.cpus_alloc.saturating_add(cpus);
        self.gpus_alloc = self.gpus_alloc.saturating_add(gpus);
        self.nodes_alloc = self.nodes_alloc.saturating_add(nodes);
        self.running_nodes_max = self.running_nodes_max.max(nodes);
    }

    /// A pending job: held or not, its reason (one `Arc` shared by every count it lands
    /// in: `reason` keeps the first made or found), and the nodes it asks (min, max).
    fn count_pending(
        &mut self,
        held: bool,
        reason_text: &str,
        reason: &mut Option<Arc<str>>,
        (min_nodes, max_nodes): (u64, u64),
    ) {
        self.held += u64::from(held);
        match self.pending_by_reason.get_key_value(reason_text) {
            Some((k, _)) => {
                let k = k.clone();
                *self.pending_by_reason.entry(k.clone()).or_default() += 1;
                reason.get_or_insert(k);
            }
            None => {
                let k = reason.get_or_insert_with(|| Arc::from(reason_text)).clone();
                self.pending_by_reason.insert(k, 1);
            }
        }
        raise(&mut self.pending_nodes_min, min_nodes);
        raise(&mut self.pending_nodes_max, max_nodes);
        if !held {
            raise(&mut self.pending_nodes_min_nohold, min_nodes);
            raise(&mut self.pending_nodes_max_nohold, max_nodes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::text::tres_mem_mib;

    fn pending<'a>(id: u64, partition: &'a str, reason: &'a str) -> JobRecord<'a> {
        JobRecord {
            id,
            state: Some(JobState::Pending),
            partition,
            reason,
            ..Default::default()
        }
    }

    /// Running jobs are remembered per node: how many, and when the last one ends.
    #[test]
    fn running_work_per_node() {
        let mut b = JobsBuilder::new(false);
        let running = |id, node_list, nodes, end_time| JobRecord {
            id,
            state: Some(JobState::Running),
            partition: "cpu",
            node_list,
            nodes: Some(nodes),
            end_time,
            ..Default::default()
        };
        b.add(running(1, "c[1-2]", 2, Some(100)));
        b.add(running(2, "c2", 1, Some(200)));
        b.add(running(3, "c3", 1, Some(50)));
        b.add(running(4, "c3", 1, None));
        b.add(pending(5, "cpu", "Resources"));
        let on = b.finish().running_on;
        let work = |n: &str| on.get(n).map(|w| (w.jobs, w.free_at));
        assert_eq!(work("c1"), Some((1, Some(100))));
        assert_eq!(work("c2"), Some((2, Some(200))));
        assert_eq!(work("c3"), Some((2, None)), "a job without an end time");
        assert_eq!(on.len(), 3);
    }

    #[test]
    fn a_multi_node_job_is_demand_for_all_its_nodes() {
        let mut b = JobsBuilder::new(false);
        b.add(JobRecord {
            nodes: Some(3),
            cpus: Some(6),
            ..pending(1, "elastic", "Resources")
        });
        let jobs = b.finish();
        assert_eq!(jobs.pending[0].nodes, 3);
        assert_eq!(jobs.pending[0].class, PendingClass::Schedulable);
        assert_eq!(jobs.partitions["elastic"].pending_nodes_max_nohold, Some(3));
    }

    #[test]
    fn held_and_waiting_jobs_are_pending_but_not_demand() {
        let mut b = JobsBuilder::new(false);
        b.add(JobRecord {
            hold: true,
            nodes: Some(4),
            ..pending(1, "cpu", "JobHeldUser")
        });
        b.add(pending(2, "cpu", "Dependency"));
        b.add(pending(3, "cpu", "BeginTime"));
        let jobs = b.finish();
        let cpu = &jobs.partitions["cpu"];
        assert_eq!(cpu.state(JobState::Pending), 3);
        assert_eq!(cpu.held, 1);
        assert_eq!(cpu.pending_nodes_max, Some(4));
        assert_eq!(cpu.pending_nodes_max_nohold, Some(1));
        let classes: Vec<_> = jobs.pending.iter().map(|p| p.class).collect();
        assert_eq!(
            classes,
            [
                PendingClass::Held,
                PendingClass::Waiting,
                PendingClass::Waiting
            ]
        );
    }

    #[test]
    fn a_throttled_array_counts_once_but_demands_what_may_start() {
        let mut b = JobsBuilder::new(false);
        for task in 1..=2 {
            b.add(JobRecord {
                id: 100 + task,
                state: Some(JobState::Running),
                partition: "elastic",
                array_job_id: Some(100),
                array_task_id: Some(task),
                cpus: Some(1),
                ..Default::default()
            });
        }
        b.add(JobRecord {
            array_job_id: Some(100),
            array_task_string: "3-20%5",
            array_max_tasks: Some(5),
            ..pending(100, "elastic", "JobArrayTaskLimit")
        });
        let jobs = b.finish();
        assert_eq!(jobs.partitions["elastic"].state(JobState::Pending), 1);
        assert_eq!(
            (jobs.pending[0].tasks, jobs.pending[0].throttled),
            (3, 15),
            "18 tasks left, throttle 5, 2 running: 3 may start, 15 wait on the throttle"
        );

        // Held, every task is held: none is counted as waiting on the throttle.
        let mut b = JobsBuilder::new(false);
        b.add(JobRecord {
            array_job_id: Some(200),
            array_task_string: "1-50%5",
            array_max_tasks: Some(5),
            hold: true,
            ..pending(200, "elastic", "JobHeldUser")
        });
        let jobs = b.finish();
        assert_eq!((jobs.pending[0].tasks, jobs.pending[0].throttled), (50, 0));
    }

    #[test]
    fn a_job_pending_in_two_partitions_is_counted_in_its_first_and_demanded_in_both() {
        let mut b = JobsBuilder::new(false);
        b.add(pending(1, "cpu,gpu", "Priority"));
        let jobs = b.finish();
        assert_eq!(jobs.partitions["cpu"].state(JobState::Pending), 1);
        assert!(!jobs.partitions.contains_key("gpu"));
        let parts: Vec<&str> = jobs.pending[0].partitions.iter().map(|p| &**p).collect();
        assert_eq!(parts, ["cpu", "gpu"]);
    }

    #[test]
    fn gpus_and_memory_come_from_whichever_field_the_version_fills() {
        let mut b = JobsBuilder::new(false);
        b.add(JobRecord {
            nodes: Some(2),
            tres_per_node: "gres:gpu:4",
            memory_per_cpu_mib: Some(500),
            cpus: Some(2),
            ..pending(1, "gpu", "Resources")
        });
        b.add(JobRecord {
            state: Some(JobState::Running),
            partition: "gpu",
            cpus: Some(3),
            gres_detail_gpus: Some(2),
            tres_alloc: "cpu=3,mem=2000M,node=1",
            ..Default::default()
        });
        let jobs = b.finish();
        assert_eq!(jobs.pending[0].gpus, 8);
        assert_eq!(jobs.pending[0].memory_bytes, 1000 * 1024 * 1024);
        assert_eq!(jobs.partitions["gpu"].gpus_alloc, 2);
        assert_eq!(jobs.partitions["gpu"].cpus_alloc, 3);
        assert_eq!(tres_mem_mib("cpu=16,mem=62.50G,billing=16"), Some(64000));
    }

    /// No memory asked where the site sets no default (Slinky's chart): memory per node is
    /// 0, all of the node's, and the TRES names the partition's largest node. The job fits
    /// any node and takes it whole; it does not need the largest node's memory.
    #[test]
    fn memory_per_node_zero_is_a_whole_node_not_the_largest_ones_memory() {
        let mut b = JobsBuilder::new(false);
        b.add(JobRecord {
            memory_per_node_mib: Some(0),
            cpus: Some(2),
            tres_req: "cpu=2,mem=62.50G,node=1,billing=2",
            ..pending(1, "all", "Resources")
        });
        b.add(JobRecord {
            memory_per_node_mib: Some(0),
            memory_per_cpu_mib: Some(500),
            cpus: Some(2),
            tres_req: "cpu=2,mem=1000M,node=1,billing=2",
            ..pending(2, "all", "Resources")
        });
        let jobs = b.finish();
        assert_eq!(jobs.pending[0].memory_bytes, 0);
        assert!(jobs.pending[0].whole_node);
        assert_eq!(jobs.pending[1].memory_bytes, 1000 * 1024 * 1024);
        assert!(!jobs.pending[1].whole_node);
    }
}
