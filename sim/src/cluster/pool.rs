//! A NodeSet on a pool shared with Kubernetes ([`Mode::Pool`](super::Mode::Pool)): which
//! node slots it holds is decided outside, as its pods land on and leave the pool's nodes,
//! and the autoscaler drains and resumes its Slurm nodes by name.

use super::{Cluster, JobTimes, Power};

impl Cluster {
    /// Pools: slot `i` holds a NodeSet pod from the start, its node up at once.
    pub fn provide_now(&mut self, i: u32, now: i64) {
        if self.nodes[i as usize].power != Power::Off {
            return;
        }
        self.off.remove(&i);
        self.groups[self.nodes[i as usize].group as usize].replicas += 1;
        self.power_on(i, now, true);
    }
    /// Pools: slot `i` gets a NodeSet pod; its slurmd registers `boot` seconds later.
    pub fn provide(&mut self, i: u32, now: i64) {
        if self.nodes[i as usize].power != Power::Off {
            return;
        }
        self.off.remove(&i);
        self.groups[self.nodes[i as usize].group as usize].replicas += 1;
        self.scale_ups += 1;
        self.power_on(i, now, false);
    }

    /// Pools: the NodeSet pod on slot `i` goes, as slurm-operator removes one: at once when
    /// its node runs nothing, else once its last job ends (the node drains meanwhile).
    pub fn retire(&mut self, i: u32) {
        let n = &mut self.nodes[i as usize];
        if n.power == Power::Off || n.draining {
            return;
        }
        self.groups[n.group as usize].replicas -= 1;
        self.scale_downs += 1;
        if n.jobs.is_empty() {
            self.power_off(i);
            return;
        }
        n.draining = true;
        if n.free_cpus > 0 && !n.drained {
            self.free.remove(&(n.free_cpus, i));
        }
        self.touch(&[i]);
    }

    /// Pools: DRAIN (`true`) or RESUME (`false`) slot `i`'s Slurm node, as the autoscaler
    /// asks; a drained node runs its jobs out and stays.
    pub fn drain(&mut self, i: u32, on: bool, now: i64) {
        let n = &mut self.nodes[i as usize];
        if n.drained == on || n.power == Power::Off {
            return;
        }
        let indexed = n.power == Power::Up && !n.draining && n.free_cpus > 0;
        n.drained = on;
        if indexed && on {
            self.free.remove(&(n.free_cpus, i));
        } else if indexed {
            self.free.insert((n.free_cpus, i));
            self.dirty.get_or_insert(now);
        }
        self.touch(&[i]);
        if !on {
            self.schedule(now);
        }
    }

    /// Slot `i`'s Slurm node set DOWN (the autoscaler's requeue): slurmctld requeues every
    /// job running there; each waits again from the queue, its run so far lost on all its
    /// nodes. The node stays drained, now empty.
    pub fn requeue_on(&mut self, i: u32, now: i64) {
        for j in self.nodes[i as usize].jobs.clone() {
            let started = self.outcomes[j].end > 0;
            let ran = if started {
                (now - self.outcomes[j].start).max(0)
            } else {
                0
            };
            if !self.release(j, now) {
                continue;
            }
            let job = &self.jobs[j];
            self.lost_node_seconds += ran as f64 * f64::from(job.nodes);
            self.requeued += 1;
            self.counts.pending += 1;
            self.counts.pending_job_nodes += u64::from(job.nodes);
            self.outcomes[j] = JobTimes::default();
            self.queue.insert(j);
            self.dirty.get_or_insert(now);
        }
        self.schedule(now);
    }
}
