//! The pool's counts as a replay runs: which side holds each node, which run nothing, kept up
//! to date from what changed on either side (a replay has millions of events; none walks
//! every node), and the timeline they add up to.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::{SharedOptions, SharedPoint, SharedStats, Sharing, TAIL};
use crate::cluster::{Cluster, Mode, Slot};
use crate::colocated::PoolWorld;
use crate::pods::PodRequest;
use crate::trace::TraceJob;
use crate::view::PARTITION;

/// The pool's counts: how many slots each side holds, run nothing, and are Slurm's with room.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Totals {
    pub(super) slurm: u32,
    pub(super) kube: u32,
    pub(super) idle: u32,
    pub(super) slurm_free: u32,
}

impl Totals {
    /// A slot's share of the counts was `old` and is `new`.
    fn replace(&mut self, old: Part, new: Part) {
        let moved =
            |total: &mut u32, o: bool, n: bool| *total = *total + u32::from(n) - u32::from(o);
        moved(&mut self.slurm, old.slurm, new.slurm);
        moved(&mut self.kube, old.kube, new.kube);
        moved(&mut self.idle, old.idle, new.idle);
        moved(&mut self.slurm_free, old.slurm_free, new.slurm_free);
    }
}

/// What one node slot adds to the pool's counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Part {
    /// Slurm holds it (under `slurm-first`: runs a Slurm job there).
    slurm: bool,
    /// Kubernetes holds it (under `slurm-first`: pods run there and no Slurm job).
    kube: bool,
    /// Nothing runs there.
    idle: bool,
    /// Slurm holds it and its node is idle or booting (first-come's Slurm has room).
    slurm_free: bool,
}

/// The pool: Slurm's partition, Kubernetes' nodes, who holds each node, and counts kept up
/// to date from what changed (a replay has millions of events; none walks every node).
pub(super) struct Pool {
    pub(super) sharing: Sharing,
    pub(super) cluster: Cluster,
    /// Who holds each node, the NodeSet, Kubernetes' pods.
    pub(super) world: PoolWorld,
    pub(super) stats: SharedStats,
    pub(super) parts: Vec<Part>,
    /// Sums of `parts`.
    pub(super) totals: Totals,
    /// Slurm-held slots whose node is up and idle, lowest first.
    pub(super) slurm_idle: BTreeSet<u32>,
    /// Where the counts are in each side's record of changed slots.
    pub(super) cursors: (u64, u64),
    /// The waiting pods' packed node count, by the pending set it was worked out for.
    pub(super) pod_need: (u64, u64),
}

impl Pool {
    pub(super) fn new(
        sharing: Sharing,
        jobs: Arc<[TraceJob]>,
        pods: Arc<[PodRequest]>,
        opts: &SharedOptions,
        start: i64,
    ) -> Self {
        let mode = match sharing {
            Sharing::SlurmFirst => Mode::Static,
            _ => Mode::Pool,
        };
        let mut cluster = Cluster::new(opts.shape, opts.nodes, mode, opts.sched, jobs, start);
        let split = match sharing {
            Sharing::Static(n) => n,
            Sharing::SlurmFirst => opts.nodes,
            _ => opts.split,
        };
        let how = (split, mode == Mode::Pool, sharing == Sharing::SlurmFirst);
        let mut world = PoolWorld::new(&mut cluster, pods, how, PARTITION, start);
        world.kube.scoring = opts.scoring;
        let n = opts.nodes as usize;
        let mut p = Self {
            sharing,
            cluster,
            world,
            stats: SharedStats::default(),
            parts: vec![Part::default(); n],
            totals: Totals::default(),
            slurm_idle: BTreeSet::new(),
            cursors: (0, 0),
            pod_need: (u64::MAX, 0),
        };
        for i in 0..opts.nodes {
            p.refresh(i);
        }
        p.cursors = (
            p.cluster.touched_since(0).1,
            p.world.kube.touched_since(0).1,
        );
        p
    }

    pub(super) fn part(&self, i: u32) -> Part {
        let slot = self.cluster.slot(i);
        let pods = !self.world.kube.empty(i);
        let slurm_work = slot == Slot::Busy;
        let idle = !slurm_work && !pods;
        match self.sharing {
            Sharing::SlurmFirst => Part {
                slurm: slurm_work,
                kube: !slurm_work && pods,
                idle,
                slurm_free: false,
            },
            _ => {
                let slurm = self.world.slurms(i);
                Part {
                    slurm: slurm && slot != Slot::Off,
                    kube: !slurm,
                    idle,
                    slurm_free: slurm && matches!(slot, Slot::Idle | Slot::Booting),
                }
            }
        }
    }

    /// Brings slot `i`'s share of the counts up to date.
    pub(super) fn refresh(&mut self, i: u32) {
        let new = self.part(i);
        let old = std::mem::replace(&mut self.parts[i as usize], new);
        self.totals.replace(old, new);
        let idle_slurm = self.world.slurms(i) && self.cluster.slot(i) == Slot::Idle;
        if idle_slurm {
            self.slurm_idle.insert(i);
        } else {
            self.slurm_idle.remove(&i);
        }
    }

    /// Refreshes the slots either side changed since last time.
    pub(super) fn refresh_changed(&mut self) {
        let all = self.world.nodes();
        let (slots, c) = self.cluster.touched_since(self.cursors.0);
        let slots: Vec<u32> = slots.map_or_else(|| (0..all).collect(), <[u32]>::to_vec);
        let (kslots, k) = self.world.kube.touched_since(self.cursors.1);
        let kslots: Vec<u32> = kslots.map_or_else(|| (0..all).collect(), <[u32]>::to_vec);
        self.cursors = (c, k);
        for i in slots.into_iter().chain(kslots) {
            self.refresh(i);
        }
    }

    /// Brings the counts of the slots whose holder changed up to date.
    pub(super) fn refresh_handed(&mut self) {
        for i in self.world.take_changed() {
            self.refresh(i);
        }
    }

    pub(super) fn hand_to_kube(&mut self, i: u32) {
        self.world.hand_to_kube(i);
        self.refresh_handed();
    }

    pub(super) fn hand_to_slurm(&mut self, i: u32, now: i64) {
        self.world.hand_to_slurm(&mut self.cluster, i, now);
        self.refresh_handed();
    }

    /// slurm-operator and the Kubernetes scheduler (see [`PoolWorld::operate`]).
    pub(super) fn operate(&mut self, now: i64) {
        self.world.operate(&mut self.cluster, now);
        self.refresh_handed();
    }

    /// Accounts `dt` seconds of the pool as it stands.
    pub(super) fn account(&mut self, dt: f64) {
        if self.pod_need.0 != self.world.kube.pending_version() {
            self.pod_need = (
                self.world.kube.pending_version(),
                self.world.kube.pending_nodes(),
            );
        }
        let Totals {
            slurm, kube, idle, ..
        } = self.totals;
        let waiting = self
            .cluster
            .counts
            .pending_job_nodes
            .saturating_add(self.pod_need.1);
        self.stats.slurm_node_seconds += f64::from(slurm) * dt;
        self.stats.kube_node_seconds += f64::from(kube) * dt;
        self.stats.idle_node_seconds += f64::from(idle) * dt;
        self.stats.stranded_node_seconds += waiting.min(u64::from(idle)) as f64 * dt;
        if self.pod_need.1 > 0
            && let Some(plan) = self.cluster.plan()
        {
            let held = plan
                .nodes
                .iter()
                .filter(|i| self.slurm_idle.contains(i))
                .count() as u64;
            self.stats.lendable_node_seconds += held.min(self.pod_need.1) as f64 * dt;
        }
    }

    pub(super) fn point(&self, time: i64) -> SharedPoint {
        SharedPoint {
            time,
            jobs_waiting: self.cluster.counts.pending,
            pods_waiting: self.world.kube.pending_count() as u32,
            ..SharedPoint::default()
        }
    }
}

/// The timeline bucket: about 1,500 points, whole minutes.
pub(super) fn bucket_for(start: i64, end: i64) -> i64 {
    ((end - start + TAIL) / 1500 / 60 + 1) * 60
}

/// Node-seconds per timeline bucket, sampled at bucket starts.
pub(super) struct SharedTimeline {
    pub(super) start: i64,
    pub(super) width: i64,
    pub(super) points: Vec<SharedPoint>,
}

impl SharedTimeline {
    /// Accounts the pool over [`from`, `to`), bucket by bucket.
    pub(super) fn account(&mut self, pool: &mut Pool, from: i64, to: i64) {
        let mut a = from;
        while a < to {
            let b = ((a - self.start) / self.width) as usize;
            while self.points.len() <= b {
                let time = self.start + self.points.len() as i64 * self.width;
                self.points.push(pool.point(time));
            }
            let end = (self.start + (b as i64 + 1) * self.width).min(to);
            let before = (
                pool.stats.slurm_node_seconds,
                pool.stats.kube_node_seconds,
                pool.stats.idle_node_seconds,
            );
            pool.account((end - a) as f64);
            let p = &mut self.points[b];
            p.slurm_nodes += pool.stats.slurm_node_seconds - before.0;
            p.kube_nodes += pool.stats.kube_node_seconds - before.1;
            p.idle_nodes += pool.stats.idle_node_seconds - before.2;
            a = end;
        }
    }

    /// Node counts, averaged over each bucket.
    pub(super) fn finish(mut self) -> Vec<SharedPoint> {
        let width = self.width as f64;
        for p in &mut self.points {
            p.slurm_nodes /= width;
            p.kube_nodes /= width;
            p.idle_nodes /= width;
        }
        self.points
    }
}
