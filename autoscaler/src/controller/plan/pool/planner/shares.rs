//! Nominal shares: what each side of the pool is owed, and how a side below its share gets
//! borrowed nodes back.
//!
//! Without shares the planner is Kubernetes-first: pods drain Slurm nodes down to
//! `minSlurmNodes`, and Slurm grows only where no pod waits. With shares, Slurm is owed
//! `min(its need, its share)` nodes and Kubernetes the rest. Nodes Slurm holds beyond its
//! share, or idle beyond its need, are Kubernetes' to drain (the drain path of the planner);
//! when Slurm is owed nodes it holds no longer, they come back here: our drains are
//! resumed, replicas rise, and pool nodes are *reserved* for the new NodeSet pods — tainted
//! so that no new pod lands there — emptiest first; the pods still on a reserved node after
//! the reclaim time are evicted, where the site allows it. Non-destructive steps at once,
//! destructive ones only after the wait: a pod that ends within it costs nothing.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use super::{ColocationHistory, PoolMoves, PoolNode, ShareState, Sides, SlurmNode};
use crate::crd::SharesSpec;
use crate::plan::Plan;
use crate::pool::RESERVED_TAINT;

/// Default `reclaimSeconds`.
const RECLAIM: Duration = Duration::from_secs(600);

/// Shares as the planner reads them.
#[derive(Clone, Debug, PartialEq)]
pub struct Shares {
    pub spec: SharesSpec,
    /// How long a new node takes to boot, as far as known: a node reclaimed for Slurm is
    /// emptied this much before the reclaim time ends, so that it serves by then.
    pub boot: Duration,
}

impl Shares {
    pub fn reclaim(&self) -> Duration {
        self.spec
            .reclaim_seconds
            .map_or(RECLAIM, |s| Duration::from_secs(s.into()))
    }

    /// Slurm's nominal share of a pool of `pool` nodes.
    pub fn slurm(&self, pool: u64) -> Result<u64, String> {
        self.spec.slurm_nodes(pool)
    }
}

/// Shares' part of a plan: each side's share and what it is owed, for the status, and
/// Slurm's guarantee carried out ([`guarantee`], [`lift`]). Returns the nodes Slurm is owed
/// and whether Kubernetes is below its share (Slurm holds more than its own).
pub fn apply(
    p: &mut Plan,
    m: &mut PoolMoves,
    (shares, nominal): (&Shares, u64),
    (sides, pool): (&Sides, &[PoolNode]),
    slurm_need: u64,
    (history, now): (&ColocationHistory, SystemTime),
) -> (u64, bool) {
    let serving = sides.serving.len() as u64;
    let owed = slurm_need.min(nominal).saturating_sub(serving);
    let held = pool.iter().filter(|n| n.slurm.is_some()).count() as u64;
    let kubernetes = (pool.len() as u64).saturating_sub(nominal);
    let kubernetes_holds = pool.len() as u64 - held;
    m.shares = Some(ShareState {
        slurm: nominal,
        kubernetes,
        slurm_holds: held,
        kubernetes_holds,
        slurm_owed: owed,
        kubernetes_owed: (m.needs.kubernetes).min(kubernetes.saturating_sub(kubernetes_holds)),
        reclaim_seconds: shares.reclaim().as_secs(),
    });
    let since = &history.reserved_since;
    let still_owed = owed > 0 && guarantee(p, m, shares, sides, pool, owed, since, now);
    lift(m, pool, still_owed);
    (owed, serving > nominal)
}

/// The node carries our reservation taint.
pub fn reserved(n: &PoolNode) -> bool {
    n.taints.iter().any(|t| t.key == RESERVED_TAINT)
}

/// What Kubernetes may take of Slurm's nodes under shares: `(all, busy)` — at most `all`
/// drains, of which at most `busy` of nodes running jobs. Busy nodes only beyond Slurm's
/// share; idle ones also beyond its need (lent); never leaving Kubernetes more than its
/// share and borrowing limit.
pub fn drain_budget(shares: &Shares, nominal: u64, sides: &Sides, slurm_need: u64) -> (u64, u64) {
    let serving = sides.serving.len() as u64;
    let beyond_share = serving.saturating_sub(nominal);
    let beyond_need = serving.saturating_sub(slurm_need);
    let floor = shares
        .spec
        .kubernetes_borrowing_limit
        .map_or(0, |b| nominal.saturating_sub(b.into()));
    let all = beyond_share
        .max(beyond_need)
        .min(serving.saturating_sub(floor));
    (all, beyond_share.min(all))
}

/// The most nodes Slurm may hold: its share and borrowing limit.
pub fn slurm_cap(shares: &Shares, nominal: u64) -> u64 {
    shares
        .spec
        .slurm_borrowing_limit
        .map_or(u64::MAX, |b| nominal + u64::from(b))
}

/// When each reserved node was first seen reserved, for the reclaim time.
pub type ReservedSince = BTreeMap<String, SystemTime>;

/// When each Slurm node we drained was first seen drained, for the requeue time.
pub type DrainedSince = BTreeMap<String, SystemTime>;

/// Kubernetes below its share, with pods waiting, takes back what Slurm borrowed sooner than
/// its jobs end where the site allows it (`requeueAfterSeconds`): the jobs on our drains past
/// that time are requeued — on as many nodes as Kubernetes is owed beyond the drains already
/// empty, never leaving Slurm below its share, only where every job may be requeued, those
/// that would hold their node longest first. A node already DOWN counts as on its way.
pub fn requeue(
    p: &mut Plan,
    m: &mut PoolMoves,
    shares: &Shares,
    sides: &Sides,
    since: &DrainedSince,
    now: SystemTime,
) {
    let (Some(after), Some(state)) = (shares.spec.requeue_after_seconds, m.shares) else {
        return;
    };
    let after = Duration::from_secs(after.into());
    let owed = (state.kubernetes_owed).saturating_sub(sides.ours_empty.len() as u64);
    let mut budget = owed.min(state.slurm_holds.saturating_sub(state.slurm));
    let mut busy: Vec<(&PoolNode, &SlurmNode)> = (sides.ours_busy.iter())
        .filter_map(|n| Some((*n, n.slurm.as_ref()?)))
        .collect();
    // On their way first; then the nodes whose jobs hold them longest (no limit: longest).
    busy.sort_by_key(|(n, s)| {
        let end = s.free_at.unwrap_or(i64::MAX);
        (!s.unavailable, std::cmp::Reverse(end), n.slurm_node.clone())
    });
    for (n, s) in busy {
        if budget == 0 {
            break;
        }
        if s.unavailable {
            budget -= 1;
            continue;
        }
        if !s.requeueable {
            continue;
        }
        let waited = since.get(&n.slurm_node).map_or(Duration::ZERO, |t| {
            now.duration_since(*t).unwrap_or_default()
        });
        if waited < after {
            let due = now + (after - waited);
            p.revisit = Some(p.revisit.map_or(due, |r| r.min(due)));
            continue;
        }
        budget -= 1;
        m.requeue.push(n.slurm_node.clone());
        p.steps.push(format!(
            "requeuing the {} job(s) on {}: drained for Kubernetes {}s ago, which is below its share with pods waiting (requeueAfterSeconds {})",
            s.running_jobs,
            n.slurm_node,
            waited.as_secs(),
            after.as_secs()
        ));
    }
}

/// Slurm's guarantee: with Slurm owed `owed` nodes beyond those it serves with (its need
/// within its share), our drains are resumed, replicas rise, and nodes are reserved and
/// after the reclaim time emptied for the new pods. Reservations no longer needed are lifted.
/// Returns whether Slurm is still owed nodes (then nothing goes to Kubernetes this plan).
#[allow(clippy::too_many_arguments)]
pub fn guarantee(
    p: &mut Plan,
    m: &mut PoolMoves,
    shares: &Shares,
    sides: &Sides,
    pool: &[PoolNode],
    owed: u64,
    since: &ReservedSince,
    now: SystemTime,
) -> bool {
    let mut owed = owed;
    for n in sides.ours_busy.iter().chain(&sides.ours_empty) {
        if owed == 0 {
            break;
        }
        owed -= 1;
        m.resume.push(n.slurm_node.clone());
        p.steps.push(format!(
            "resuming {}: Slurm is below its share and has work for it",
            n.slurm_node
        ));
    }
    let bound = (sides.serving.len() + sides.ours_empty.len() + sides.ours_busy.len()) as u64;
    if owed > 0 && p.replicas < bound + owed {
        p.steps.push(format!(
            "growing Slurm {} → {}: below its share with work for {owed} more node(s)",
            p.replicas,
            bound + owed
        ));
        p.replicas = bound + owed;
    }
    // Reservations: the free ones first, then those with the least Kubernetes work.
    let free: Vec<&PoolNode> = pool.iter().filter(|n| n.slurm.is_none()).collect();
    let mut held: Vec<&PoolNode> = free.iter().copied().filter(|n| reserved(n)).collect();
    held.sort_by(|a, b| a.k8s_cpu.total_cmp(&b.k8s_cpu));
    let mut more: Vec<&PoolNode> = free.iter().copied().filter(|n| !reserved(n)).collect();
    more.sort_by(|a, b| {
        a.k8s_cpu
            .total_cmp(&b.k8s_cpu)
            .then(a.k8s_node.cmp(&b.k8s_node))
    });
    let keep = owed as usize;
    for n in held.iter().skip(keep) {
        m.unreserve.push(n.k8s_node.clone());
    }
    for n in more.iter().take(keep.saturating_sub(held.len())) {
        m.reserve.push(n.k8s_node.clone());
        p.steps.push(format!(
            "reserving {} for Slurm ({} CPUs of Kubernetes pods there): below its share",
            n.k8s_node, n.k8s_cpu
        ));
    }
    let evict_after = shares.reclaim().saturating_sub(shares.boot);
    for n in held.iter().take(keep) {
        let waited = since.get(&n.k8s_node).map_or(Duration::ZERO, |t| {
            now.duration_since(*t).unwrap_or_default()
        });
        let evictable = !shares.spec.evictable_pods.is_empty();
        if evictable && n.k8s_cpu > 0.0 && waited < evict_after {
            // Look again when it is due, whatever else happens meanwhile.
            let due = now + (evict_after - waited);
            p.revisit = Some(p.revisit.map_or(due, |r| r.min(due)));
        }
        if evictable && n.k8s_cpu > 0.0 && waited >= evict_after {
            m.evict.push(n.k8s_node.clone());
            p.steps.push(format!(
                "evicting the pods on {}: reserved for Slurm {}s ago and still not empty (the reclaim time less a boot)",
                n.k8s_node,
                waited.as_secs()
            ));
        }
    }
    m.reserved = held
        .iter()
        .take(keep)
        .chain(more.iter().take(keep.saturating_sub(held.len())))
        .map(|n| n.k8s_node.clone())
        .collect();
    owed > 0
}

/// Reservations nobody waits for: on nodes Slurm now holds (its pod came), and all of them
/// when Slurm is owed nothing.
pub fn lift(m: &mut PoolMoves, pool: &[PoolNode], owed: bool) {
    for n in pool.iter().filter(|n| reserved(n)) {
        let wanted = owed && n.slurm.is_none();
        if !wanted && !m.unreserve.contains(&n.k8s_node) {
            m.unreserve.push(n.k8s_node.clone());
        }
    }
}
