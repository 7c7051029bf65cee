//! How many nodes pending work really needs: first on the free room of nodes that are up,
//! then first-fit-decreasing onto new nodes of the partition's shape, in every dimension a
//! job asks for (CPUs, memory, GPUs). Sixty-four one-CPU jobs on 32-CPU nodes need two nodes,
//! not sixty-four — the estimate cluster-autoscaler and Karpenter make for pods, made here for
//! Slurm jobs.
//!
//! Pure and deterministic. Identical asks are grouped (arrays, job bursts), and each group is
//! placed with a first-fit cursor over the nodes that can still hold it, so 100,000 pending
//! jobs onto 10,000 nodes stays within milliseconds. FFD may use a node or two more than the
//! optimum; it never uses fewer than the work needs and never more than one node per job
//! node (the old count), which the property tests check.

use std::collections::{HashMap, VecDeque};

/// What a node has free, or what a job asks of each node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Resources {
    pub cpus: u64,
    pub memory_bytes: u64,
    pub gpus: u64,
}

impl Resources {
    pub fn holds(&self, need: &Resources) -> bool {
        need.cpus <= self.cpus && need.memory_bytes <= self.memory_bytes && need.gpus <= self.gpus
    }

    /// How many of `need` fit (`need` has at least one CPU).
    fn copies(&self, need: &Resources) -> u64 {
        let per = |have: u64, want: u64| have.checked_div(want).unwrap_or(u64::MAX);
        per(self.cpus, need.cpus.max(1))
            .min(per(self.memory_bytes, need.memory_bytes))
            .min(per(self.gpus, need.gpus))
    }

    fn take(&mut self, need: &Resources, times: u64) {
        self.cpus -= need.cpus * times;
        self.memory_bytes -= need.memory_bytes * times;
        self.gpus -= need.gpus * times;
    }

    /// The largest share of `shape` this takes in any dimension; what "decreasing" sorts by.
    fn share_of(&self, shape: &Resources) -> f64 {
        let f = |n: u64, d: u64| if d == 0 { 0.0 } else { n as f64 / d as f64 };
        f(self.cpus, shape.cpus)
            .max(f(self.memory_bytes, shape.memory_bytes))
            .max(f(self.gpus, shape.gpus))
    }
}

/// A node that is up and may take work: what it has, what of it is free, and whether
/// nothing runs on it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FreeNode {
    pub total: Resources,
    pub free: Resources,
    /// Nothing allocated: it can take a whole-node job, and work placed on it makes it busy.
    pub idle: bool,
}

/// Pending work of one kind: `count` jobs (or array tasks), each on `nodes` nodes with
/// `per_node` on each, or whole nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ask {
    pub count: u64,
    pub nodes: u64,
    pub per_node: Resources,
    pub whole_node: bool,
}

/// The estimate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Packed {
    /// New nodes of the shape the work needs.
    pub new_nodes: u64,
    /// Idle nodes that are up and would take some of it (they become busy).
    pub idle_nodes_used: u64,
    /// Jobs that fit neither a free node nor a node of the shape: never chased.
    pub unsatisfiable: u64,
    /// Jobs that would go entirely onto nodes already up.
    pub on_free_nodes: u64,
}

impl Packed {
    /// Nodes beyond the busy ones the work needs: the idle ones it lands on and new ones.
    pub fn nodes(&self) -> u64 {
        self.idle_nodes_used.saturating_add(self.new_nodes)
    }
}

struct Bin {
    free: Resources,
    /// Nothing on it yet (a whole-node job may take it).
    empty: bool,
    /// Up and idle before packing.
    idle: bool,
    new: bool,
    used: bool,
}

/// Packs `asks` onto `free` nodes, then onto new nodes of `shape`. `max_new` caps the new
/// nodes opened (the NodeSet's room): work beyond it is counted one node per job node, as
/// without packing, so the figure still says how far demand exceeds the cap.
pub fn pack(free: &[FreeNode], shape: Resources, asks: &[Ask], max_new: u64) -> Packed {
    pack_bins(free, shape, asks, max_new).0
}

/// Asks of one kind: (nodes per job, per node, whole nodes), how many.
type Group = ((u64, Resources, bool), u64);

/// `asks` grouped by kind, largest first (first-fit decreasing): whole-node jobs, then the
/// largest share of a node, then the most nodes; the rest only makes the order total.
fn groups(shape: Resources, asks: &[Ask]) -> Vec<Group> {
    // Memory asks are rounded up to 1/1024 of a node's (0.5 GiB on 512 GiB nodes), so jobs
    // that differ by a few MiB group together: at most that much over per job, never under.
    let grain = (shape.memory_bytes / 1024).max(1);
    let mut groups: HashMap<(u64, Resources, bool), u64> = HashMap::new();
    for a in asks.iter().filter(|a| a.count > 0) {
        let per_node = Resources {
            cpus: a.per_node.cpus.max(1),
            memory_bytes: match a.per_node.memory_bytes {
                m if m <= shape.memory_bytes => m
                    .div_ceil(grain)
                    .saturating_mul(grain)
                    .min(shape.memory_bytes),
                m => m,
            },
            gpus: a.per_node.gpus,
        };
        *groups
            .entry((a.nodes.max(1), per_node, a.whole_node))
            .or_default() += a.count;
    }
    let mut groups: Vec<(f64, Group)> = groups
        .into_iter()
        .map(|(key, count)| (key.1.share_of(&shape), (key, count)))
        .collect();
    groups.sort_by(|(sa, ((na, ra, wa), _)), (sb, ((nb, rb, wb), _))| {
        wb.cmp(wa)
            .then(sb.total_cmp(sa))
            .then(nb.cmp(na))
            .then(rb.cmp(ra))
    });
    groups.into_iter().map(|(_, g)| g).collect()
}

fn pack_bins(
    free: &[FreeNode],
    shape: Resources,
    asks: &[Ask],
    max_new: u64,
) -> (Packed, Vec<Bin>) {
    let mut p = Packing::new(free, shape, max_new);
    for ((nodes, per_node, whole), count) in groups(shape, asks) {
        let piece = Piece {
            nodes,
            per_node,
            whole,
        };
        let left = p.place(piece, count);
        p.leave(free, piece, left);
        p.sweep_filled();
    }
    p.finish()
}

/// What one job of a group asks: `nodes` distinct nodes with `per_node` free each, or
/// `whole` empty ones.
#[derive(Clone, Copy)]
struct Piece {
    nodes: u64,
    per_node: Resources,
    whole: bool,
}

impl Piece {
    fn fits(&self, b: &Bin) -> bool {
        (!self.whole || b.empty) && b.free.holds(&self.per_node)
    }
}

/// First-fit decreasing over bins: the free room of nodes that are up, then new nodes of the
/// shape, opened as needed.
struct Packing {
    bins: Vec<Bin>,
    /// Bins with room left, in first-fit order; full ones drop out after each group, so a
    /// group scans the few bins that can still take something, not every bin opened so far.
    active: Vec<usize>,
    /// Bins filled up since `active` was last swept; swept once they are a good share of it.
    filled: usize,
    /// The bins of the current round (reused).
    taken: Vec<usize>,
    out: Packed,
    /// Job nodes beyond the cap on new nodes, counted one node each.
    overflow: u64,
    shape: Resources,
    max_new: u64,
}

impl Packing {
    fn new(free: &[FreeNode], shape: Resources, max_new: u64) -> Self {
        let bins: Vec<Bin> = free
            .iter()
            .filter(|n| n.free.cpus > 0)
            .map(|n| Bin {
                free: n.free,
                empty: n.idle,
                idle: n.idle,
                new: false,
                used: false,
            })
            .collect();
        Self {
            active: (0..bins.len()).collect(),
            bins,
            filled: 0,
            taken: Vec::new(),
            out: Packed::default(),
            overflow: 0,
            shape,
            max_new,
        }
    }

    /// Places `count` pieces; how many are left (nothing takes them).
    ///
    /// First-fit order: `open` holds bins known to take a piece, ahead of the bins of
    /// `active` not looked at yet (from `next`); a bin that cannot take one now never will
    /// in this group (room only shrinks), so each is looked at once. New bins join at the
    /// back once every older one has been looked at.
    fn place(&mut self, piece: Piece, count: u64) -> u64 {
        let fits_shape = self.shape.holds(&piece.per_node);
        let mut open: VecDeque<usize> = VecDeque::new();
        let (mut next, scan_end) = (0, self.active.len());
        let mut left = count;
        while left > 0 {
            while (open.len() as u64) < piece.nodes && next < scan_end {
                let i = self.active[next];
                next += 1;
                if piece.fits(&self.bins[i]) {
                    open.push_back(i);
                }
            }
            if open.is_empty() && next >= scan_end && fits_shape {
                left -= self.count_full_sets(piece, left);
                if left == 0 {
                    break;
                }
            }
            if fits_shape {
                self.open_new(&mut open, piece.nodes);
            }
            if (open.len() as u64) < piece.nodes {
                break;
            }
            left -= self.take_round(&mut open, piece, left);
        }
        left
    }

    /// Nothing open can take a piece: new nodes are filled `nodes` at a time. Where that
    /// leaves a node with no CPU free (whole-node jobs, jobs of a node's CPUs), they are
    /// counted instead of opened one by one; only a last, partly used set is opened. The
    /// pieces placed so.
    fn count_full_sets(&mut self, piece: Piece, left: u64) -> u64 {
        let per_bin = if piece.whole {
            1
        } else {
            self.shape.copies(&piece.per_node).max(1)
        };
        let mut rest = self.shape;
        if !piece.whole {
            rest.take(&piece.per_node, per_bin);
        }
        if !piece.whole && rest.cpus > 0 {
            return 0;
        }
        let sets = (left / per_bin).min((self.max_new - self.out.new_nodes) / piece.nodes);
        self.out.new_nodes += sets * piece.nodes;
        sets * per_bin
    }

    /// Opens new bins until `nodes` distinct ones can take a piece (or the cap is reached).
    fn open_new(&mut self, open: &mut VecDeque<usize>, nodes: u64) {
        while (open.len() as u64) < nodes && self.out.new_nodes < self.max_new {
            self.bins.push(Bin {
                free: self.shape,
                empty: true,
                idle: false,
                new: true,
                used: false,
            });
            self.out.new_nodes += 1;
            open.push_back(self.bins.len() - 1);
            self.active.push(self.bins.len() - 1);
        }
    }

    /// One round on the first `nodes` open bins: as many copies as every one of them holds
    /// (a single-node group fills its first bin in one step; a whole-node job takes one).
    /// The pieces placed.
    fn take_round(&mut self, open: &mut VecDeque<usize>, piece: Piece, left: u64) -> u64 {
        self.taken.clear();
        self.taken.extend(open.drain(..piece.nodes as usize));
        let times = if piece.whole {
            1
        } else {
            self.taken
                .iter()
                .map(|&i| self.bins[i].free.copies(&piece.per_node))
                .min()
                .unwrap_or(1)
                .clamp(1, left)
        };
        let all_up = self.taken.iter().all(|&i| !self.bins[i].new);
        for &i in self.taken.iter().rev() {
            let b = &mut self.bins[i];
            if piece.whole {
                b.free = Resources::default();
            } else {
                b.free.take(&piece.per_node, times);
            }
            b.empty = false;
            b.used = true;
            if piece.fits(b) {
                open.push_front(i);
            } else if b.free.cpus == 0 {
                self.filled += 1;
            }
        }
        if all_up {
            self.out.on_free_nodes += times;
        }
        times
    }

    /// What `left` pieces that found no room become.
    fn leave(&mut self, free: &[FreeNode], piece: Piece, left: u64) {
        if left == 0 {
            return;
        }
        if self.shape.holds(&piece.per_node) {
            // Beyond the cap: one node per job node, unpacked.
            self.overflow = self
                .overflow
                .saturating_add(left.saturating_mul(piece.nodes));
        } else if !free.iter().any(|n| n.total.holds(&piece.per_node)) {
            self.out.unsatisfiable += left;
        }
        // Otherwise they wait for room on the larger nodes that are up: new nodes of the
        // shape would not help them.
    }

    /// Every job has a CPU: a bin without one is done. Sweeping costs a pass over `active`,
    /// so it waits until a quarter of it is done.
    fn sweep_filled(&mut self) {
        if self.filled * 4 > self.active.len() {
            let bins = &self.bins;
            self.active.retain(|&i| bins[i].free.cpus > 0);
            self.filled = 0;
        }
    }

    fn finish(mut self) -> (Packed, Vec<Bin>) {
        self.out.idle_nodes_used = self.bins.iter().filter(|b| b.used && b.idle).count() as u64;
        self.out.new_nodes = self.out.new_nodes.saturating_add(self.overflow);
        (self.out, self.bins)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const GIB: u64 = 1 << 30;

    fn res(cpus: u64, gib: u64, gpus: u64) -> Resources {
        Resources {
            cpus,
            memory_bytes: gib * GIB,
            gpus,
        }
    }

    fn ask(count: u64, nodes: u64, per_node: Resources) -> Ask {
        Ask {
            count,
            nodes,
            per_node,
            whole_node: false,
        }
    }

    fn idle(r: Resources) -> FreeNode {
        FreeNode {
            total: r,
            free: r,
            idle: true,
        }
    }

    fn busy(total: Resources, free: Resources) -> FreeNode {
        FreeNode {
            total,
            free,
            idle: false,
        }
    }

    #[test]
    fn one_cpu_jobs_share_nodes() {
        let p = pack(&[], res(32, 128, 0), &[ask(64, 1, res(1, 1, 0))], 100);
        assert_eq!(p.new_nodes, 2);
        assert_eq!(p.nodes(), 2);
    }

    #[test]
    fn single_gpu_jobs_share_gpu_nodes() {
        let p = pack(&[], res(64, 512, 8), &[ask(8, 1, res(4, 16, 1))], 100);
        assert_eq!(p.new_nodes, 1);
        // Nine do not fit eight GPUs.
        let p = pack(&[], res(64, 512, 8), &[ask(9, 1, res(4, 16, 1))], 100);
        assert_eq!(p.new_nodes, 2);
    }

    #[test]
    fn memory_binds_when_it_is_the_scarce_dimension() {
        // 10 jobs of 1 CPU and 40 GiB on 32-CPU, 128 GiB nodes: three per node.
        let p = pack(&[], res(32, 128, 0), &[ask(10, 1, res(1, 40, 0))], 100);
        assert_eq!(p.new_nodes, 4);
    }

    #[test]
    fn free_room_on_up_nodes_is_used_first() {
        let busy = busy(res(16, 64, 0), res(8, 32, 0));
        // Eight jobs fit the busy node's free room; the next sixteen fill one idle node;
        // the last needs a new one.
        let p = pack(
            &[busy, idle(res(16, 64, 0))],
            res(16, 64, 0),
            &[ask(25, 1, res(1, 1, 0))],
            100,
        );
        assert_eq!(p.new_nodes, 1);
        assert_eq!(p.idle_nodes_used, 1);
        assert_eq!(p.nodes(), 2, "busy nodes are counted elsewhere");
        assert_eq!(p.on_free_nodes, 24);
    }

    #[test]
    fn multi_node_jobs_take_distinct_nodes() {
        // Two 4-node jobs of 2 CPUs per node on 4-CPU nodes: both fit the same 4 nodes.
        let p = pack(&[], res(4, 16, 0), &[ask(2, 4, res(2, 1, 0))], 100);
        assert_eq!(p.new_nodes, 4);
        // Three do not: the third needs 4 more.
        let p = pack(&[], res(4, 16, 0), &[ask(3, 4, res(2, 1, 0))], 100);
        assert_eq!(p.new_nodes, 8);
    }

    #[test]
    fn whole_node_jobs_take_whole_nodes() {
        let mut a = ask(3, 1, res(1, 1, 0));
        a.whole_node = true;
        let p = pack(
            &[
                idle(res(32, 128, 0)),
                busy(res(32, 128, 0), res(30, 100, 0)),
            ],
            res(32, 128, 0),
            &[a, ask(4, 1, res(1, 1, 0))],
            100,
        );
        // One exclusive job on the idle node, two on new nodes; the small jobs fit the busy
        // node's room.
        assert_eq!((p.idle_nodes_used, p.new_nodes), (1, 2));
    }

    #[test]
    fn decreasing_order_beats_arrival_order() {
        // Arrival order would open a node per 20-CPU job after the small ones filled
        // them; FFD places the big ones first and fills around them: 3 nodes.
        let asks = [ask(6, 1, res(4, 1, 0)), ask(3, 1, res(20, 1, 0))];
        let p = pack(&[], res(32, 128, 0), &asks, 100);
        assert_eq!(p.new_nodes, 3);
    }

    #[test]
    fn jobs_no_node_can_hold_are_unsatisfiable() {
        let p = pack(
            &[idle(res(8, 32, 0))],
            res(8, 32, 0),
            &[ask(2, 1, res(16, 1, 0)), ask(1, 1, res(1, 1, 1))],
            100,
        );
        assert_eq!(p.unsatisfiable, 3);
        assert_eq!(p.nodes(), 0);
        // A job larger than the shape still fits a larger node that is up.
        let p = pack(
            &[idle(res(64, 256, 0))],
            res(8, 32, 0),
            &[ask(1, 1, res(16, 1, 0))],
            100,
        );
        assert_eq!((p.unsatisfiable, p.idle_nodes_used), (0, 1));
    }

    #[test]
    fn work_beyond_the_cap_counts_one_node_per_job_node() {
        let p = pack(&[], res(4, 16, 0), &[ask(20, 1, res(4, 1, 0))], 5);
        assert_eq!(p.new_nodes, 20);
        let p = pack(&[], res(4, 16, 0), &[ask(40, 1, res(1, 1, 0))], 5);
        assert_eq!(
            p.new_nodes,
            5 + 20,
            "5 nodes hold 20, the other 20 count unpacked"
        );
    }

    fn resources(max: u64) -> impl Strategy<Value = Resources> {
        (1..=max, 0..=max, 0..=2u64).prop_map(|(c, m, g)| Resources {
            cpus: c,
            memory_bytes: m * GIB,
            gpus: g,
        })
    }

    proptest! {
        /// The packing is a real placement (no node over its room, a job's nodes distinct);
        /// it never needs fewer new nodes than the work's size beyond the free room in any
        /// dimension; never more nodes than one per job node; and a job that fits nowhere
        /// is never counted as fitting.
        #[test]
        fn packing_is_sound_and_bounded(
            shape in resources(16),
            free in prop::collection::vec((resources(16), 0..=100u64, any::<bool>()), 0..6),
            asks in prop::collection::vec(
                (1..5u64, 1..4u64, resources(12), prop::bool::weighted(0.2)), 0..12),
        ) {
            // Some room free on each node, all of it on idle ones.
            let free: Vec<FreeNode> = free
                .into_iter()
                .map(|(total, pct, idle)| {
                    let part = |v: u64| if idle { v } else { v * pct / 100 };
                    let free = Resources {
                        cpus: part(total.cpus),
                        memory_bytes: part(total.memory_bytes),
                        gpus: part(total.gpus),
                    };
                    FreeNode { total, free, idle }
                })
                .collect();
            let asks: Vec<Ask> = asks
                .into_iter()
                .map(|(count, nodes, per_node, whole_node)| Ask { count, nodes, per_node, whole_node })
                .collect();
            let (p, bins) = pack_bins(&free, shape, &asks, u64::MAX);

            // A real placement: no bin gave more than it had (`take` on unsigned room would
            // have panicked); new nodes filled whole are counted, not opened.
            prop_assert!(bins.iter().filter(|b| b.new).count() as u64 <= p.new_nodes);
            for b in bins.iter().filter(|b| b.new) {
                prop_assert!(shape.holds(&b.free));
            }

            // Never below the need: what fits (not unsatisfiable) minus the free room, per
            // dimension, over the shape.
            let cpu1 = |r: &Resources| Resources { cpus: r.cpus.max(1), ..*r };
            let fits_somewhere = |a: &Ask| {
                let r = cpu1(&a.per_node);
                shape.holds(&r) || free.iter().any(|n| n.total.holds(&r))
            };
            let fitting: Vec<&Ask> = asks.iter().filter(|a| a.count > 0 && fits_somewhere(a)).collect();
            let unfit: u64 = asks.iter().filter(|a| !fits_somewhere(a)).map(|a| a.count).sum();
            prop_assert!(p.unsatisfiable >= unfit, "a job that fits nowhere counted as fitting");
            if p.unsatisfiable == unfit && shape.cpus > 0 {
                let need = |f: fn(&Resources) -> u64| -> u64 {
                    fitting
                        .iter()
                        .filter(|a| shape.holds(&cpu1(&a.per_node)))
                        .map(|a| a.count * a.nodes * f(&cpu1(&a.per_node)))
                        .sum()
                };
                let room = |f: fn(&Resources) -> u64| -> u64 { free.iter().map(|n| f(&n.free)).sum() };
                for (f, name) in [
                    ((|r: &Resources| r.cpus) as fn(&Resources) -> u64, "cpus"),
                    (|r: &Resources| r.memory_bytes, "memory"),
                    (|r: &Resources| r.gpus, "gpus"),
                ] {
                    let per = f(&shape);
                    let beyond = need(f).saturating_sub(room(f));
                    if beyond > 0 && per > 0 {
                        prop_assert!(p.new_nodes >= beyond.div_ceil(per), "{name}: {} new nodes for {beyond} beyond the free room", p.new_nodes);
                    }
                }
            }

            // Never more than the old count: one node per job node.
            let job_nodes: u64 = fitting.iter().map(|a| a.count * a.nodes).sum();
            prop_assert!(p.nodes() <= job_nodes, "{} > {job_nodes}", p.nodes());
        }
    }
}
