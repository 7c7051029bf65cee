//! The Kubernetes side of a shared pool: nodes of one shape, pods with requests and a
//! priority, and a scheduler that binds pending pods — highest priority first, in creation
//! order within a priority, none holding up the others (kube-scheduler retries an
//! unschedulable pod later and goes on) — each to the usable node where it fits with the most
//! room left, as kube-scheduler's default NodeResourcesFit scoring (LeastAllocated) spreads
//! them, or with the least, as its MostAllocated strategy packs them ([`Scoring`]). Room is
//! counted in CPUs alone: kube-scheduler weighs every resource its profile names.
//!
//! Which nodes pods may use is set from outside ([`Kube::set_usable`]): those Kubernetes
//! holds, or — under Slurm-first sharing — those Slurm runs nothing on. A pod on a node taken
//! back is evicted: pending again from scratch, the time it ran lost.
//!
//! Requests are kept in whole units (CPUs and GPUs in thousandths, memory in MiB), so fits
//! are exact and the same every run.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};
use std::sync::Arc;

use super::pods::PodRequest;
use super::touched::Touched;
use super::trace::NodeShape;

/// Where kube-scheduler's NodeResourcesFit scoring puts a pod among the nodes it fits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scoring {
    /// The node with the most room left (kube-scheduler's default): pods spread.
    #[default]
    LeastAllocated,
    /// The node with the least room left: pods pack, and nodes empty out.
    MostAllocated,
}

impl Scoring {
    pub fn name(self) -> &'static str {
        match self {
            Self::LeastAllocated => "least-allocated",
            Self::MostAllocated => "most-allocated",
        }
    }
}

/// CPU and GPU thousandths, memory MiB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Res {
    pub cpu_m: u64,
    pub mem_mib: u64,
    pub gpu_m: u64,
}

impl Res {
    pub fn of_pod(p: &PodRequest) -> Self {
        Self {
            cpu_m: (p.cpus * 1000.0).ceil() as u64,
            mem_mib: p.memory_mib,
            gpu_m: (p.gpus * 1000.0).ceil() as u64,
        }
    }

    pub fn of_node(shape: &NodeShape) -> Self {
        Self {
            cpu_m: u64::from(shape.cpus) * 1000,
            // 0 = memory not simulated: as good as unlimited.
            mem_mib: if shape.memory_mib == 0 {
                u64::MAX / 4
            } else {
                shape.memory_mib
            },
            gpu_m: u64::from(shape.gpus) * 1000,
        }
    }

    fn fits_in(&self, free: &Res) -> bool {
        self.cpu_m <= free.cpu_m && self.mem_mib <= free.mem_mib && self.gpu_m <= free.gpu_m
    }
}

#[derive(Clone, Debug)]
struct KNode {
    free: Res,
    pods: Vec<usize>,
    usable: bool,
}

pub struct Kube {
    node: Res,
    nodes: Vec<KNode>,
    pods: Arc<[PodRequest]>,
    asks: Vec<Res>,
    next: usize,
    /// Waiting pods in scheduling order.
    pending: BTreeSet<(Reverse<i32>, i64, usize)>,
    /// Usable nodes by free CPU, for the search in [`Scoring`] order.
    room: BTreeSet<(u64, u32)>,
    pub scoring: Scoring,
    /// Running pods: (node, since).
    running: Vec<Option<(u32, i64)>>,
    ends: BinaryHeap<Reverse<(i64, usize)>>,
    /// When each pod was last bound (its wait ends there; an evicted pod waits again).
    pub started: Vec<Option<i64>>,
    /// Pods evicted, and the pod-seconds of work they lost.
    pub evictions: u64,
    pub lost_seconds: f64,
    finished: usize,
    /// Something changed that the scheduler has not looked at.
    dirty: bool,
    /// Bumped by every change of what a reader could see (arrivals, bindings, ends).
    changes: u64,
    /// Nodes whose pods changed (see [`Kube::touched_since`]).
    touched: Touched,
    /// Usable nodes running no pod, lowest first.
    empty: BTreeSet<u32>,
    /// Bumped whenever the set of waiting pods changes.
    pending_version: u64,
}

impl Kube {
    pub fn new(shape: &NodeShape, nodes: u32, pods: Arc<[PodRequest]>) -> Self {
        let node = Res::of_node(shape);
        let asks = pods.iter().map(Res::of_pod).collect();
        Self {
            node,
            nodes: vec![
                KNode {
                    free: node,
                    pods: Vec::new(),
                    usable: false,
                };
                nodes as usize
            ],
            running: vec![None; pods.len()],
            started: vec![None; pods.len()],
            pods,
            asks,
            next: 0,
            pending: BTreeSet::new(),
            room: BTreeSet::new(),
            scoring: Scoring::default(),
            ends: BinaryHeap::new(),
            evictions: 0,
            lost_seconds: 0.0,
            finished: 0,
            dirty: false,
            changes: 0,
            touched: Touched::default(),
            empty: BTreeSet::new(),
            pending_version: 0,
        }
    }

    /// Changes whenever the set of waiting pods does.
    pub fn pending_version(&self) -> u64 {
        self.pending_version
    }

    /// Nodes whose pods changed since a reader's `cursor`, and its new cursor; `None` when
    /// the record no longer reaches back that far (every node must be looked at).
    pub fn touched_since(&self, cursor: u64) -> (Option<&[u32]>, u64) {
        self.touched.since(cursor)
    }

    fn touch(&mut self, node: u32) {
        self.touched.record(&[node], self.nodes.len());
        self.changes += 1;
        let n = &self.nodes[node as usize];
        if n.usable && n.pods.is_empty() {
            self.empty.insert(node);
        } else {
            self.empty.remove(&node);
        }
    }

    /// The lowest usable node running no pod.
    pub fn first_empty(&self) -> Option<u32> {
        self.empty.first().copied()
    }

    pub fn pods(&self) -> &[PodRequest] {
        &self.pods
    }

    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// The next arrival or pod end.
    pub fn next_event(&self) -> Option<i64> {
        let arrival = self.pods.get(self.next).map(|p| p.submit);
        let end = self.ends.peek().map(|Reverse((t, _))| *t);
        [arrival, end].into_iter().flatten().min()
    }

    pub fn done(&self) -> bool {
        self.finished == self.pods.len()
    }

    /// Pods that ran to their end so far.
    pub fn finished(&self) -> usize {
        self.finished
    }

    /// Pods that arrived so far.
    pub fn submitted(&self) -> usize {
        self.next
    }

    /// Pods that end by `now` go, pods created by `now` wait; then the scheduler runs.
    pub fn advance(&mut self, now: i64) {
        while let Some(&Reverse((t, p))) = self.ends.peek() {
            if t > now {
                break;
            }
            self.ends.pop();
            // An evicted pod's old end is stale.
            if let Some((node, since)) = self.running[p]
                && since + self.pods[p].run as i64 == t
            {
                self.unbind(p, node);
                self.running[p] = None;
                self.finished += 1;
            }
        }
        while let Some(pod) = self.pods.get(self.next) {
            if pod.submit > now {
                break;
            }
            self.pending
                .insert((Reverse(pod.priority), pod.submit, self.next));
            self.next += 1;
            self.dirty = true;
            self.changes += 1;
            self.pending_version += 1;
        }
        self.schedule(now);
    }

    fn unbind(&mut self, p: usize, node: u32) {
        let ask = self.asks[p];
        let n = &mut self.nodes[node as usize];
        if n.usable {
            self.room.remove(&(n.free.cpu_m, node));
        }
        n.free.cpu_m += ask.cpu_m;
        n.free.mem_mib += ask.mem_mib;
        n.free.gpu_m += ask.gpu_m;
        n.pods.retain(|&x| x != p);
        if n.usable {
            self.room.insert((n.free.cpu_m, node));
        }
        self.dirty = true;
        self.touch(node);
    }

    /// Binds what fits, in scheduling order.
    pub fn schedule(&mut self, now: i64) {
        if !self.dirty {
            return;
        }
        self.dirty = false;
        // Asks that found no node this pass find none later in it either.
        let mut failed: Vec<Res> = Vec::new();
        let waiting: Vec<usize> = self.pending.iter().map(|&(_, _, p)| p).collect();
        for p in waiting {
            if self.room.is_empty() {
                break;
            }
            let ask = self.asks[p];
            if failed
                .iter()
                .any(|f| f.cpu_m <= ask.cpu_m && f.mem_mib <= ask.mem_mib && f.gpu_m <= ask.gpu_m)
            {
                continue;
            }
            let mut fitting = self
                .room
                .range((ask.cpu_m, 0)..)
                .map(|&(_, i)| i)
                .filter(|&i| ask.fits_in(&self.nodes[i as usize].free));
            let found = match self.scoring {
                Scoring::LeastAllocated => fitting.next_back(),
                Scoring::MostAllocated => fitting.next(),
            };
            let Some(node) = found else {
                failed.push(ask);
                continue;
            };
            let pod = &self.pods[p];
            self.pending.remove(&(Reverse(pod.priority), pod.submit, p));
            self.pending_version += 1;
            let n = &mut self.nodes[node as usize];
            self.room.remove(&(n.free.cpu_m, node));
            n.free.cpu_m -= ask.cpu_m;
            n.free.mem_mib -= ask.mem_mib;
            n.free.gpu_m -= ask.gpu_m;
            n.pods.push(p);
            self.room.insert((n.free.cpu_m, node));
            self.running[p] = Some((node, now));
            self.started[p] = Some(now);
            self.ends.push(Reverse((now + pod.run as i64, p)));
            self.touch(node);
        }
    }

    /// Whether pods may be placed on `node` from now on. Making a node unusable does not move
    /// the pods already there (see [`Kube::evict`]).
    pub fn set_usable(&mut self, node: u32, usable: bool) {
        let n = &mut self.nodes[node as usize];
        if n.usable == usable {
            return;
        }
        n.usable = usable;
        if usable {
            self.room.insert((n.free.cpu_m, node));
            self.dirty = true;
        } else {
            self.room.remove(&(n.free.cpu_m, node));
        }
        self.touch(node);
    }

    pub fn usable(&self, node: u32) -> bool {
        self.nodes[node as usize].usable
    }

    /// Evicts every pod on `node`: each waits again (and its wait starts over), its work
    /// so far lost.
    pub fn evict(&mut self, node: u32, now: i64) {
        let victims = self.nodes[node as usize].pods.clone();
        for p in victims {
            if let Some((_, since)) = self.running[p].take() {
                self.lost_seconds += (now - since) as f64;
            }
            self.unbind(p, node);
            self.evictions += 1;
            let pod = &self.pods[p];
            self.pending.insert((Reverse(pod.priority), pod.submit, p));
            self.pending_version += 1;
        }
    }

    /// No pod runs on `node`.
    pub fn empty(&self, node: u32) -> bool {
        self.nodes[node as usize].pods.is_empty()
    }

    /// Requests of the pods on `node`.
    pub fn held(&self, node: u32) -> Res {
        let f = self.nodes[node as usize].free;
        Res {
            cpu_m: self.node.cpu_m - f.cpu_m,
            mem_mib: self.node.mem_mib.saturating_sub(f.mem_mib),
            gpu_m: self.node.gpu_m - f.gpu_m,
        }
    }

    /// Waiting pods, in scheduling order.
    pub fn pending(&self) -> impl Iterator<Item = &PodRequest> {
        self.pending.iter().map(|&(_, _, p)| &self.pods[p])
    }

    pub fn pending_count(&self) -> usize {
        self.pending.len()
    }

    /// The creation time of the oldest waiting pod.
    pub fn oldest_pending(&self) -> Option<i64> {
        self.pending.iter().map(|&(_, t, _)| t).min()
    }

    /// Nodes the waiting pods would fill, packed first-fit-decreasing by CPU onto empty
    /// nodes (a bound on what they are waiting for).
    pub fn pending_nodes(&self) -> u64 {
        let mut asks: Vec<Res> = self.pending.iter().map(|&(_, _, p)| self.asks[p]).collect();
        asks.sort_by_key(|a| Reverse(a.cpu_m));
        let mut bins: Vec<Res> = Vec::new();
        for a in asks {
            match bins.iter_mut().find(|b| a.fits_in(b)) {
                Some(b) => {
                    b.cpu_m -= a.cpu_m;
                    b.mem_mib -= a.mem_mib;
                    b.gpu_m -= a.gpu_m;
                }
                None => {
                    let mut b = self.node;
                    b.cpu_m -= a.cpu_m;
                    b.mem_mib -= a.mem_mib;
                    b.gpu_m -= a.gpu_m;
                    bins.push(b);
                }
            }
            if bins.len() >= self.nodes.len() {
                break;
            }
        }
        bins.len() as u64
    }

    /// Whether some waiting pod would fit on an empty node (so an idle node is wanted).
    pub fn wants_a_node(&self) -> bool {
        !self.pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, submit: i64, run: u64, cpus: f64, priority: i32) -> PodRequest {
        PodRequest {
            name: name.into(),
            submit,
            run,
            cpus,
            memory_mib: 1,
            gpus: 0.0,
            priority,
        }
    }

    const SHAPE: NodeShape = NodeShape {
        cpus: 4,
        memory_mib: 0,
        gpus: 0,
    };

    #[test]
    fn pods_spread_to_the_node_with_most_room_in_priority_then_creation_order() {
        let pods = vec![
            pod("a", 0, 100, 2.0, 0),
            pod("b", 0, 100, 2.0, 0),
            pod("big", 1, 100, 4.0, 0),
            pod("vip", 2, 100, 1.0, 5),
        ];
        let mut k = Kube::new(&SHAPE, 2, pods.into());
        k.advance(2);
        // No node usable yet: everything waits.
        assert_eq!(k.pending_count(), 4);
        k.set_usable(0, true);
        k.set_usable(1, true);
        k.schedule(2);
        // vip first (priority), then a and b spread over the two nodes; big fits nowhere.
        assert_eq!(k.started.iter().filter(|s| s.is_some()).count(), 3);
        assert!(k.started[2].is_none());
        let names: Vec<&str> = k.pending().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["big"]);
        assert!(!k.empty(0) && !k.empty(1));
        // Ends free room; the big pod lands once a node is empty.
        k.advance(102);
        assert_eq!(k.started[2], Some(102));
    }

    /// The same pods under each scoring: spread, both nodes keep a pod until the last ends;
    /// packed, the second node is never used and stays empty for Slurm.
    #[test]
    fn most_allocated_scoring_packs_pods_and_leaves_nodes_empty() {
        let pods: Arc<[PodRequest]> = vec![
            pod("a", 0, 100, 1.0, 0),
            pod("b", 1, 200, 1.0, 0),
            pod("c", 2, 300, 2.0, 0),
        ]
        .into();
        let nodes_used = |scoring| {
            let mut k = Kube::new(&SHAPE, 2, pods.clone());
            k.scoring = scoring;
            k.set_usable(0, true);
            k.set_usable(1, true);
            k.advance(2);
            (k.empty(0), k.empty(1))
        };
        assert_eq!(nodes_used(Scoring::LeastAllocated), (false, false));
        assert_eq!(nodes_used(Scoring::MostAllocated), (false, true));
    }

    #[test]
    fn evicted_pods_wait_again_and_their_work_is_lost() {
        let mut k = Kube::new(&SHAPE, 1, vec![pod("a", 0, 100, 1.0, 0)].into());
        k.set_usable(0, true);
        k.advance(0);
        assert_eq!(k.started[0], Some(0));
        k.set_usable(0, false);
        k.evict(0, 30);
        assert_eq!(
            (k.evictions, k.lost_seconds, k.pending_count()),
            (1, 30.0, 1)
        );
        // Its old end passes without effect; back on the node it runs its whole length.
        k.advance(100);
        assert_eq!(k.pending_count(), 1);
        k.set_usable(0, true);
        k.advance(110);
        assert_eq!(k.started[0], Some(110));
        k.advance(210);
        assert!(k.done());
    }
}
