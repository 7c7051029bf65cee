//! A NodeSet that follows slurmctld's power requests ([`Mode::Planned`]): slurmctld asks for
//! nodes to power up and down, and a node exists while its pod does — added and removed by
//! whoever plays slurm-operator, registered once the pod is ready.

use std::cmp::Reverse;

use super::{Cluster, Mode, Pod, Power, grid};

impl Cluster {
    /// `Planned`: slurmctld's power-save pass asks for idle node `i` to power down
    /// (POWERING_DOWN); it takes no jobs until its pod is gone.
    pub(super) fn ask_down(&mut self, i: u32) {
        let n = &mut self.nodes[i as usize];
        n.powering_down = true;
        if n.free_cpus > 0 && !n.draining && !n.drained {
            self.free.remove(&(n.free_cpus, i));
        }
        self.power_touch(i);
    }

    /// `Planned`: slot `i` gets a NodeSet pod; its slurmd registers `boot` seconds later.
    pub fn add_pod(&mut self, i: u32, now: i64) {
        let n = &mut self.nodes[i as usize];
        if n.pod != Pod::None {
            return;
        }
        let ready_at = now + self.cfg.boot;
        n.pod = Pod::Starting { ready_at };
        self.readies.push(Reverse((ready_at, i)));
        self.counts.provisioned += 1;
        let group = &mut self.groups[self.nodes[i as usize].group as usize];
        group.provisioned += 1;
        group.replicas += 1;
        self.power_touch(i);
    }

    /// `Planned`: the pod on slot `i` is deleted, as slurm-operator removes one: a pod
    /// still starting at once (its record stays as slurmctld has it); a registered node's
    /// once it runs nothing (it drains meanwhile).
    pub fn remove_pod(&mut self, i: u32) {
        let n = &mut self.nodes[i as usize];
        match n.pod {
            Pod::None => return,
            Pod::Starting { .. } => {
                n.pod = Pod::None;
                self.counts.provisioned -= 1;
                self.groups[n.group as usize].provisioned -= 1;
                self.power_touch(i);
            }
            Pod::Ready if n.jobs.is_empty() => self.power_off(i),
            Pod::Ready => {
                if n.draining {
                    return;
                }
                n.draining = true;
                if n.free_cpus > 0 && !n.drained && !n.powering_down {
                    self.free.remove(&(n.free_cpus, i));
                }
                self.power_touch(i);
            }
        }
        self.groups[self.nodes[i as usize].group as usize].replicas -= 1;
    }

    /// `Planned`: RESUME on slot `i`'s record clears the DRAIN a scale-in left; powered
    /// down, slurmctld plans on it again.
    pub fn resume_record(&mut self, i: u32, now: i64) {
        let n = &mut self.nodes[i as usize];
        if !n.left_drained {
            return;
        }
        n.left_drained = false;
        if n.power == Power::Off {
            self.off.insert(i);
            self.dirty.get_or_insert(now);
        }
        self.power_touch(i);
        self.schedule(now);
    }

    /// `Planned`: POWER_UP on slot `i`'s powered-down record (the autoscaler booting for a
    /// start slurmctld planned there): slurmctld asks for it at its next power-save pass, as
    /// for a node it allocated, and it takes jobs meanwhile (they wait for it in
    /// CONFIGURING). A record drained, not powered down, or already asked for is left as it is.
    pub fn power_up_record(&mut self, i: u32, now: i64) {
        let Mode::Planned(r) = self.mode else {
            return;
        };
        if !self.off.remove(&i) {
            return;
        }
        let n = &mut self.nodes[i as usize];
        n.power = Power::Asked { posted: false };
        if n.free_cpus > 0 {
            self.free.insert((n.free_cpus, i));
        }
        // The write comes after this instant's pass (if one was due): the next one posts it.
        self.requests.push(Reverse((grid(now + 1, r.interval), i)));
        self.early_power_ups += 1;
        self.power_touch(i);
    }

    /// `Planned`: slot `i`'s pod is ready and its slurmd registers: the node is up
    /// (slurm-operator lifts its own scale-in DRAIN from a pod it keeps), and jobs
    /// allocated to it run once all their nodes are up, at slurmctld's next check.
    pub(super) fn pod_ready(&mut self, i: u32, now: i64) {
        let Mode::Planned(r) = self.mode else {
            return;
        };
        let n = &mut self.nodes[i as usize];
        n.pod = Pod::Ready;
        n.left_drained = false;
        let was = n.power;
        n.power = Power::Up;
        if was == Power::Off {
            self.off.remove(&i);
            if n.free_cpus > 0 {
                self.free.insert((n.free_cpus, i));
            }
        }
        self.power_touch(i);
        let jobs = self.nodes[i as usize].jobs.clone();
        if jobs.is_empty() {
            let suspend = self.suspend_at(now);
            self.nodes[i as usize].idle_since = now;
            self.suspends.push(Reverse((suspend, i)));
            return;
        }
        self.counts.busy += 1;
        self.groups[self.nodes[i as usize].group as usize].busy += 1;
        let start = grid(now, r.check_every);
        for j in jobs {
            let up = |k: &u32| self.nodes[*k as usize].power == Power::Up;
            let waiting = self.outcomes[j].end == 0;
            if waiting
                && let Some(r) = self.running[j].as_ref()
                && r.nodes.iter().all(up)
            {
                let allocated = r.expected_end - self.jobs[j].limit as i64;
                self.boot_waits.push(start - allocated);
                self.run(j, start);
            }
        }
    }

    /// `Planned`: the NodeSet's pods by slot, ready or not.
    pub fn pods(&self) -> impl Iterator<Item = (u32, bool)> + '_ {
        self.nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| match n.pod {
                Pod::None => None,
                Pod::Starting { .. } => Some((i as u32, false)),
                Pod::Ready => Some((i as u32, true)),
            })
    }
}
