//! slurmctld's scheduling of one partition: the main scheduler, which starts jobs in
//! priority order until the first that does not fit, and EASY backfill, which reserves
//! nodes for that job and starts later ones that do not delay it; both place jobs best fit,
//! over several NodeSets the lowest `Weight` first. The reservation looks at nodes as they
//! free up, whatever their Weight.

use std::collections::HashSet;

use super::{Cluster, Mode, Reservation};

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
