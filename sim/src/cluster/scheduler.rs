//! slurmctld's scheduling of one partition: the main scheduler, which starts jobs in
//! priority order until the first that does not fit, and EASY backfill, which reserves
//! nodes for that job and starts later ones that do not delay it; both place jobs best fit,
//! over several NodeSets the lowest `Weight` first. The reservation looks at nodes as they
//! free up, whatever their Weight.

use std::collections::HashSet;

use super::{Cluster, Mode, Power, Reservation};

impl Cluster {
    /// The main scheduler: starts jobs in priority order until one does not fit.
    pub(super) fn schedule(&mut self, now: i64) {
        while let Some(&j) = self.queue.first() {
            match self.place(j, None) {
                Some(nodes) => self.start(j, nodes, now),
                None => break,
            }
        }
    }

    /// EASY backfill: a reservation for the first waiting job, then every later job that
    /// fits now without delaying it.
    pub(super) fn backfill(&mut self, now: i64) {
        let Some(&head) = self.queue.first() else {
            return;
        };
        let (shadow, reserved) = self.reservation(head);
        for &i in &reserved {
            self.reserved[i as usize] = true;
        }
        let plan = shadow.map(|start| Reservation {
            job: head,
            start,
            nodes: reserved.clone(),
        });
        if plan != self.plan {
            self.plan = plan;
            self.changes += 1;
        }
        // Jobs of a shape that did not fit will not fit later in the same pass.
        let mut failed: HashSet<(u32, u32, u64, u32, bool)> = HashSet::new();
        let candidates: Vec<usize> = self
            .queue
            .iter()
            .skip(1)
            .take(self.cfg.bf_max_job_test)
            .copied()
            .collect();
        for j in candidates {
            if self.free.is_empty() && self.off.is_empty() {
                break;
            }
            let job = &self.jobs[j];
            let before_shadow =
                shadow.is_none_or(|s| now + self.boot_slack() + job.limit as i64 <= s);
            let key = (
                job.nodes,
                job.cpus_per_node,
                job.memory_mib_per_node,
                job.gpus_per_node,
                before_shadow,
            );
            if failed.contains(&key) {
                continue;
            }
            let exclude = (!before_shadow).then_some(&*self.reserved);
            match self.place(j, exclude) {
                Some(nodes) => self.start(j, nodes, now),
                None => {
                    failed.insert(key);
                }
            }
        }
        for &i in &reserved {
            self.reserved[i as usize] = false;
        }
        // The other waiting jobs' starts are worked out when first read (only a policy that
        // reads them pays for it); each pass may move them.
        *self.plans.borrow_mut() = None;
        self.planned_at = now;
        self.counts.plan_changes += 1;
    }

    /// When the last backfill pass planned waiting job `j` (an index in [`Cluster::jobs`])
    /// to start, if it planned it: the first waiting job by its reservation, the others as
    /// [`Cluster::plan_queue`] plans them.
    pub fn planned_start(&self, j: usize) -> Option<i64> {
        if !self.queue.contains(&j) {
            return None;
        }
        match self.plan() {
            Some(r) if r.job == j => Some(r.start),
            _ => {
                let mut plans = self.plans.borrow_mut();
                let plans = plans.get_or_insert_with(|| {
                    let head = self.plan().map(|r| (r.job, r.start));
                    self.plan_queue(self.planned_at, head)
                });
                let k = plans.binary_search_by_key(&j, |p| p.0).ok()?;
                Some(plans[k].1)
            }
        }
    }

    /// The nodes running jobs, each with how many and the time the last reaches its time
    /// limit (as slurmrestd's `end_time` says).
    pub fn busy_until(&self) -> Vec<(u32, usize, i64)> {
        let mut seen = vec![false; self.nodes.len()];
        let mut out = Vec::new();
        for &(t, r) in self.by_expected_end.iter().rev() {
            let Some(run) = &self.running[r] else {
                continue;
            };
            for &i in &run.nodes {
                if !std::mem::replace(&mut seen[i as usize], true) {
                    out.push((i, self.nodes[i as usize].jobs.len(), t));
                }
            }
        }
        out
    }

    /// The starts the backfill pass plans for the jobs it tests after the first (up to
    /// `bf_max_job_test`, within `bf_window`), as slurmctld sets each job's `start_time`:
    /// in priority order, each job takes the nodes that free up first (by the time limits
    /// of what runs, and of the jobs planned before it) and holds them for its own limit.
    /// Nodes are counted whole and the first job's start is its reservation's; the
    /// scheduling itself stays EASY backfill, so only what a policy reads of the plans
    /// depends on this.
    pub(super) fn plan_queue(&self, now: i64, head: Option<(usize, i64)>) -> Vec<(usize, i64)> {
        let mut line = FreeLine::default();
        let mut seen = vec![false; self.nodes.len()];
        // A node frees up when the last of its jobs reaches its limit.
        for (i, _, t) in self.busy_until() {
            seen[i as usize] = true;
            let n = &self.nodes[i as usize];
            if !n.draining && !n.drained {
                line.add(t.max(now), 1);
            }
        }
        for &(_, i) in &self.free {
            let n = &self.nodes[i as usize];
            if n.jobs.is_empty() && !seen[i as usize] {
                match n.power {
                    Power::Up => line.add(now, 1),
                    Power::Booting { ready_at } => line.add(ready_at, 1),
                    _ => {}
                }
            }
        }
        if self.power_saving() {
            line.add(now, self.off.len() as u32);
        }
        line.sort();
        let mut plans = Vec::new();
        if let Some((j, start)) = head {
            let job = &self.jobs[j];
            if line.take(job.nodes).is_some() {
                line.give(start + job.limit as i64, job.nodes);
            }
        }
        let tested = self
            .queue
            .iter()
            .filter(|&&j| head.is_none_or(|(h, _)| h != j));
        for &j in tested.take(self.cfg.bf_max_job_test) {
            let job = &self.jobs[j];
            let Some(start) = line.take(job.nodes) else {
                continue;
            };
            let start = start.max(now);
            line.give(start + job.limit as i64, job.nodes);
            if start <= now + BF_WINDOW {
                plans.push((j, start));
            }
        }
        plans
    }

    /// Under power saving a backfilled job may wait for a boot before it runs.
    pub(super) fn boot_slack(&self) -> i64 {
        match self.mode {
            Mode::PowerSave { .. } => self.cfg.boot,
            Mode::Planned(r) => self.cfg.boot + r.interval + r.check_every,
            _ => 0,
        }
    }

    /// When and where `head` could start, from the time limits of what runs: `None` when
    /// the nodes that exist could never hold it (nothing to protect).
    pub(super) fn reservation(&self, head: usize) -> (Option<i64>, Vec<u32>) {
        let job = &self.jobs[head];
        let need = job.nodes as usize;
        let fits = |cpus: u32, mem: u64, gpus: u32| {
            cpus >= job.cpus_per_node && mem >= job.memory_mib_per_node && gpus >= job.gpus_per_node
        };
        let mut free_now: Vec<u32> = Vec::with_capacity(need);
        for &(cpus, i) in self.free.range((job.cpus_per_node, 0)..) {
            let n = &self.nodes[i as usize];
            if fits(cpus, n.free_mem, n.free_gpus) {
                free_now.push(i);
            }
        }
        if self.power_saving() {
            free_now.extend(self.off.iter().copied());
        }
        if free_now.len() >= need {
            free_now.truncate(need);
            return (None, free_now);
        }
        // Release running jobs in the order backfill expects them to end, a whole end time
        // at once: the reservation is the earliest time enough nodes are free.
        let mut freed: std::collections::HashMap<u32, (u32, u64, u32)> = Default::default();
        let mut later: Vec<u32> = Vec::new();
        let mut ends = self.by_expected_end.iter().peekable();
        while let Some(&(t, r)) = ends.next() {
            if let Some(run) = &self.running[r] {
                let rj = &self.jobs[r];
                for &i in &run.nodes {
                    let n = &self.nodes[i as usize];
                    if n.draining {
                        continue;
                    }
                    let f = freed
                        .entry(i)
                        .or_insert((n.free_cpus, n.free_mem, n.free_gpus));
                    let was = fits(f.0, f.1, f.2);
                    f.0 += rj.cpus_per_node;
                    f.1 += rj.memory_mib_per_node;
                    f.2 += rj.gpus_per_node;
                    if !was && fits(f.0, f.1, f.2) {
                        later.push(i);
                    }
                }
            }
            if ends.peek().is_some_and(|&&(next, _)| next == t) {
                continue;
            }
            if later.len() + free_now.len() >= need {
                // Reserve the nodes that free up then before those free now, which leaves
                // the most room for backfill.
                later.truncate(need);
                let rest = need - later.len();
                later.extend_from_slice(&free_now[..rest]);
                return (Some(t), later);
            }
        }
        (None, Vec::new())
    }

    /// Nodes for job `j` now, best fit by CPUs, avoiding `exclude`; under power saving,
    /// powered-down nodes only when the powered-up ones are not enough.
    pub(super) fn place(&self, j: usize, exclude: Option<&[bool]>) -> Option<Vec<u32>> {
        let job = &self.jobs[j];
        let need = job.nodes as usize;
        // Too few nodes to look through at all: a wide job at the head of the queue is
        // looked at after every change, and the scan would walk every free node to fail.
        let offered = self.free.len()
            + if self.power_saving() {
                self.off.len()
            } else {
                0
            };
        if offered < need {
            return None;
        }
        let skip = |i: u32| exclude.is_some_and(|e| e[i as usize]);
        let mut nodes = Vec::with_capacity(need);
        // Over several NodeSets, the lowest Weight's nodes first, best fit within a Weight.
        let mut weights = self.by_weight.iter().map(|&g| self.groups[g].weight);
        let mut tier = weights.next();
        while let Some(weight) = tier {
            for &(_, i) in self.free.range((job.cpus_per_node, 0)..) {
                let n = &self.nodes[i as usize];
                if n.free_mem >= job.memory_mib_per_node
                    && n.free_gpus >= job.gpus_per_node
                    && self.groups[n.group as usize].weight == weight
                    && !skip(i)
                {
                    nodes.push(i);
                    if nodes.len() == need {
                        return Some(nodes);
                    }
                }
            }
            tier = weights.find(|&w| w > weight);
        }
        if self.power_saving() {
            for &i in &self.off {
                if !skip(i) {
                    nodes.push(i);
                    if nodes.len() == need {
                        return Some(nodes);
                    }
                }
            }
        }
        None
    }
}

/// `bf_window`: how far ahead backfill plans (slurm.conf's default, one day).
const BF_WINDOW: i64 = 86_400_000;

/// Whole nodes by the time they free up, for [`Cluster::plan_queue`].
#[derive(Default)]
struct FreeLine {
    /// Nodes that exist, by the time they free up, earliest first once sorted.
    free: Vec<(i64, u32)>,
    next: usize,
    /// Nodes planned jobs free again, by time.
    back: std::collections::BinaryHeap<std::cmp::Reverse<(i64, u32)>>,
    total: u64,
}

impl FreeLine {
    fn add(&mut self, t: i64, nodes: u32) {
        if nodes > 0 {
            self.free.push((t, nodes));
            self.total += u64::from(nodes);
        }
    }

    fn sort(&mut self) {
        self.free.sort_unstable();
    }

    /// Takes the `nodes` that free up first: when the last of them does; `None` (taking
    /// nothing) when there are not that many.
    fn take(&mut self, nodes: u32) -> Option<i64> {
        if u64::from(nodes) > self.total {
            return None;
        }
        let (mut left, mut at) = (nodes, i64::MIN);
        while left > 0 {
            let front = self.free.get(self.next).copied();
            let top = self.back.peek().map(|r| r.0);
            let from_back = match (front, top) {
                (Some(f), Some(b)) => b.0 < f.0,
                (None, Some(_)) => true,
                (Some(_), None) => false,
                (None, None) => break,
            };
            let slot = match (from_back, front, top) {
                (true, _, Some(b)) => {
                    self.back.pop();
                    b
                }
                (_, Some(f), _) => {
                    self.next += 1;
                    f
                }
                _ => break,
            };
            let used = slot.1.min(left);
            left -= used;
            at = slot.0;
            if used < slot.1 {
                // What it does not need stays, at the front.
                self.back.push(std::cmp::Reverse((slot.0, slot.1 - used)));
            }
        }
        self.total -= u64::from(nodes - left);
        Some(at)
    }

    /// `nodes` taken free up again at `t`.
    fn give(&mut self, t: i64, nodes: u32) {
        self.back.push(std::cmp::Reverse((t, nodes)));
        self.total += u64::from(nodes);
    }
}
