//! Rebalancing a colocated pool between Slurm and Kubernetes, as a pure planner.
//!
//! The pool is a set of Kubernetes nodes, each with a GenericNode ledger entry; Slurm holds a
//! node while a pod of the NodeSet runs there. Kubernetes gets capacity when it has
//! unschedulable pods that would fit the pool and Slurm is above its guarantee: chosen Slurm
//! nodes are drained (reason prefix `slurmscale:`; idle ones first, then those running the
//! fewest jobs, then those whose jobs end soonest), and once empty their NodeSet pods are marked to go first and replicas are lowered.
//! Slurm gets capacity back when it has schedulable demand and Kubernetes has no unmet need:
//! our drains are resumed first, then replicas raised. After moving capacity one way nothing
//! moves the other way for `cooldown`. Untrusted data — the ledger watch failing, Slurm data
//! stale — plans nothing. A node that cannot be accounted for in both the ledger and Slurm is
//! never drained, and a drain someone else set is never undone.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

mod placement;
mod shares;

use crate::pool::PendingPod;
use placement::{PodPlacement, place_pods};
pub use shares::{ReservedSince, Shares};

use crate::crd::ColocationSpec;
use crate::plan::{Effects, Move, Plan, Reason, Signals, Write};
pub use slurmscale_exporter::k8s::ledger::Taint;
use slurmscale_exporter::signals::PartitionSignals;

/// One node of the pool.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolNode {
    pub k8s_node: String,
    pub slurm_node: String,
    /// Allocatable CPU cores, memory bytes and GPUs (`nvidia.com/gpu`) of the Kubernetes node.
    pub cpu: f64,
    pub memory: f64,
    pub gpu: f64,
    /// The Kubernetes node's labels, for pods' node selectors.
    pub labels: BTreeMap<String, String>,
    /// Its taints that keep pods off unless tolerated.
    pub taints: Vec<Taint>,
    /// What Kubernetes holds there now (from the ledger).
    pub k8s_cpu: f64,
    pub k8s_memory: f64,
    pub k8s_gpu: f64,
    /// The node as Slurm sees it; `None` when Slurm does not have it (no NodeSet pod there).
    pub slurm: Option<SlurmNode>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct SlurmNode {
    /// In the NodeSet's partition.
    pub in_partition: bool,
    /// Running work (allocated CPUs, or allocated/mixed/completing).
    pub busy: bool,
    pub alloc_cpus: u64,
    /// Jobs running there, and when the last of them reaches its time limit (unix seconds;
    /// `None`: not known, e.g. no limit).
    pub running_jobs: u64,
    pub free_at: Option<i64>,
    /// Slurm may requeue every job running there.
    pub requeueable: bool,
    /// DRAIN with our reason prefix.
    pub drained_by_us: bool,
    /// DRAIN (or DOWN) set by someone else: not ours to touch.
    pub unavailable: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ColocationBounds {
    pub min_slurm: u64,
    pub min_kubernetes: u64,
    /// The most nodes Slurm may hold.
    pub max_slurm: u64,
    pub cooldown: Duration,
    /// Give idle Slurm nodes back (down to `min_slurm`) even without Kubernetes demand.
    pub release_idle: bool,
    /// Each side's nominal share (`None`: Kubernetes first).
    pub shares: Option<Shares>,
}

impl ColocationBounds {
    /// The most of a pool of `pool` nodes Slurm may hold: `maxSlurmNodes`, and all but
    /// `minKubernetesNodes`.
    fn most_slurm(&self, pool: usize) -> u64 {
        self.max_slurm
            .min((pool as u64).saturating_sub(self.min_kubernetes))
    }
}

/// A colocated pool's moves: the effects of its plans.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PoolMoves {
    /// Slurm nodes to drain for Kubernetes (with our reason prefix).
    pub drain: Vec<String>,
    /// Slurm nodes we drained earlier, to resume: Slurm has demand again.
    pub resume: Vec<String>,
    /// Slurm nodes we drained whose jobs are to be requeued (`requeueAfterSeconds`).
    pub requeue: Vec<String>,
    /// Every Slurm node drained by us once this plan is carried out, for the requeue time.
    pub drained: Vec<String>,
    /// Kubernetes nodes whose NodeSet pod is to go first on the next scale-in (drained and
    /// empty: slurm-operator then removes exactly those).
    pub release: Vec<String>,
    /// Kubernetes nodes to reserve for Slurm (tainted: no new pod lands there), and whose
    /// reservation is lifted.
    pub reserve: Vec<String>,
    pub unreserve: Vec<String>,
    /// Reserved nodes whose evictable pods are evicted: the reclaim time has passed.
    pub evict: Vec<String>,
    /// Every node reserved for Slurm once this plan is carried out.
    pub reserved: Vec<String>,
    /// What each side needs, for the pool's status and metrics.
    pub needs: Needs,
    /// Under shares: each side's share and what it is owed.
    pub shares: Option<ShareState>,
}

/// Each side's nominal share of the pool (nodes), what it holds, and the nodes it is owed:
/// it has work for them and holds fewer than its share.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShareState {
    pub slurm: u64,
    pub kubernetes: u64,
    pub slurm_holds: u64,
    pub kubernetes_holds: u64,
    pub slurm_owed: u64,
    pub kubernetes_owed: u64,
    pub reclaim_seconds: u64,
}

/// Nodes each side of a colocated pool needs now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    /// Nodes for Kubernetes' unschedulable pods that the pool could take.
    pub kubernetes: u64,
    /// Slurm's busy nodes plus its pending demand.
    pub slurm: u64,
}

impl PoolMoves {
    /// A plan's pool moves (none for a plan without them, e.g. a frozen one).
    pub fn of(plan: &Plan) -> &Self {
        static NONE: PoolMoves = PoolMoves {
            drain: Vec::new(),
            resume: Vec::new(),
            requeue: Vec::new(),
            drained: Vec::new(),
            release: Vec::new(),
            reserve: Vec::new(),
            unreserve: Vec::new(),
            evict: Vec::new(),
            reserved: Vec::new(),
            shares: None,
            needs: Needs {
                kubernetes: 0,
                slurm: 0,
            },
        };
        plan.effects().unwrap_or(&NONE)
    }
}

/// Drains and resumes, reservations for Slurm and the evictions they come to, then the pods
/// of released nodes marked to go.
impl Effects for PoolMoves {
    fn moves(&self) -> Vec<Move> {
        let drain = Write::Drain("capacity for Kubernetes");
        let drained = "drained {targets} for Kubernetes (reason prefix slurmscale:)";
        let mut moves = Move::each(drain, &self.drain, "Drain", drained);
        let requeue = Write::Requeue("jobs requeued for Kubernetes");
        let requeued = "set {targets} DOWN to requeue its jobs: drained for Kubernetes, below its share, longer than requeueAfterSeconds";
        moves.extend(Move::each(requeue, &self.requeue, "Requeue", requeued));
        let resumed = "resumed {targets}: Slurm has demand again";
        moves.extend(Move::each(Write::Resume, &self.resume, "Resume", resumed));
        let reserved = "reserved {targets} for Slurm, below its share: no new pod lands there";
        moves.extend(Move::each(
            Write::Reserve,
            &self.reserve,
            "Reserve",
            reserved,
        ));
        let evicted =
            "evicted {pods} pod(s) from {targets}, reserved for Slurm past the reclaim time";
        moves.extend(Move::each(
            Write::EvictPodsOn,
            &self.evict,
            "Evict",
            evicted,
        ));
        let lifted = "lifted the reservation of {targets}";
        moves.extend(Move::each(
            Write::Unreserve,
            &self.unreserve,
            "Unreserve",
            lifted,
        ));
        if !self.release.is_empty() {
            let note = "handing {targets} to Kubernetes ({marked} pod(s) marked to go first)";
            let release = self.release.clone();
            moves.push(Move::new(Write::MarkPodsOn, release, "Release", note));
        }
        moves
    }
}

/// When capacity last moved each way.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ColocationHistory {
    pub last_reclaim: Option<SystemTime>,
    pub last_giveback: Option<SystemTime>,
    /// When each node reserved for Slurm was first reserved, for the reclaim time (a
    /// restart starts the clocks again: later evictions, never earlier).
    pub reserved_since: ReservedSince,
    /// Since when Slurm, and Kubernetes, has had work and held less than its share.
    pub below_share_since: [Option<SystemTime>; 2],
    /// When each Slurm node we drained was first seen drained, for the requeue time (a
    /// restart starts the clocks again: later requeues, never earlier).
    pub drained_since: shares::DrainedSince,
}

impl ColocationHistory {
    /// Remembers which way a plan carried out from `current` replicas moved capacity.
    pub fn record(&mut self, plan: &Plan, current: u64, now: SystemTime) {
        let moves = PoolMoves::of(plan);
        if !moves.drain.is_empty() {
            self.last_reclaim = Some(now);
        }
        if !moves.resume.is_empty() || plan.replicas > current {
            self.last_giveback = Some(now);
        }
        if !plan.frozen {
            let owed = moves
                .shares
                .map_or([0, 0], |s| [s.slurm_owed, s.kubernetes_owed]);
            for (since, owed) in self.below_share_since.iter_mut().zip(owed) {
                *since = (owed > 0).then(|| since.unwrap_or(now));
            }
            let reserved = &moves.reserved;
            self.reserved_since.retain(|n, _| reserved.contains(n));
            for n in reserved {
                self.reserved_since.entry(n.clone()).or_insert(now);
            }
            let drained = &moves.drained;
            self.drained_since.retain(|n, _| drained.contains(n));
            for n in drained {
                self.drained_since.entry(n.clone()).or_insert(now);
            }
        }
    }
}

impl From<&ColocationSpec> for ColocationBounds {
    fn from(c: &ColocationSpec) -> Self {
        Self {
            min_slurm: c.min_slurm_nodes.into(),
            min_kubernetes: c.min_kubernetes_nodes.into(),
            max_slurm: c.max_slurm_nodes.map_or(u64::MAX, u64::from),
            cooldown: Duration::from_secs(c.cooldown_seconds.unwrap_or(300).into()),
            release_idle: c.release_idle_slurm_nodes,
            shares: c.shares.clone().map(|spec| Shares {
                spec,
                boot: Duration::ZERO,
            }),
        }
    }
}

/// The pool as the planner sorts it.
struct Sides<'a> {
    /// Our drains that are empty (ready to hand over) and that still run jobs.
    ours_empty: Vec<&'a PoolNode>,
    ours_busy: Vec<&'a PoolNode>,
    /// Slurm nodes serving Slurm: held, not drained by us.
    serving: Vec<&'a PoolNode>,
    /// Nodes Slurm could give: in the partition and usable. Idle nodes first, then those
    /// running the fewest jobs, then those whose jobs end soonest (unknown ends last), then
    /// the least allocated.
    candidates: Vec<&'a PoolNode>,
}

impl<'a> Sides<'a> {
    fn of(pool: &'a [PoolNode]) -> Self {
        let held = |f: fn(&SlurmNode) -> bool| -> Vec<&'a PoolNode> {
            pool.iter()
                .filter(|n| n.slurm.as_ref().is_some_and(f))
                .collect()
        };
        let serving = held(|s| !s.drained_by_us);
        let mut candidates: Vec<&PoolNode> = serving
            .iter()
            .copied()
            .filter(|n| {
                n.slurm
                    .as_ref()
                    .is_some_and(|s| s.in_partition && !s.unavailable)
            })
            .collect();
        // A busy node whose jobs the job list has yet to show (a job that just started)
        // ranks as one running a job of unknown end, not as one running none.
        candidates.sort_by_key(|n| {
            n.slurm.as_ref().map(|s| {
                (
                    s.busy,
                    s.running_jobs.max(u64::from(s.busy)),
                    s.free_at.unwrap_or(i64::MAX),
                    s.alloc_cpus,
                )
            })
        });
        Self {
            ours_empty: held(|s| s.drained_by_us && !s.busy),
            ours_busy: held(|s| s.drained_by_us && s.busy),
            serving,
            candidates,
        }
    }

    /// Idle serving nodes beyond what Slurm may need and keeps, when idle nodes go back;
    /// none while Slurm's need is open-ended (`None`: new jobs may be missing from the list).
    fn idle_surplus(&self, bounds: &ColocationBounds, slurm_need: Option<u64>) -> u64 {
        let Some(slurm_need) = slurm_need.filter(|_| bounds.release_idle) else {
            return 0;
        };
        let idle = self
            .serving
            .iter()
            .filter(|n| n.slurm.as_ref().is_some_and(|s| !s.busy && !s.unavailable))
            .count() as u64;
        (self.serving.len() as u64)
            .saturating_sub(slurm_need.max(bounds.min_slurm))
            .min(idle)
    }
}

/// Plans. Pure: the same inputs always give the same plan. Its reason is `Frozen`,
/// `Rebalance` (capacity moves) or `Balanced`.
#[allow(clippy::too_many_arguments)]
pub fn plan(
    bounds: &ColocationBounds,
    pool: &[PoolNode],
    pods: &[PendingPod],
    slurm: &Signals,
    ledger: Result<(), &str>,
    replicas: u64,
    history: &ColocationHistory,
    now: SystemTime,
) -> Plan {
    let mut p = Plan {
        replicas,
        recommendation: replicas,
        ..Plan::default()
    };
    let (s, nominal) = match trusted(bounds, pool, slurm, ledger) {
        Ok(t) => t,
        Err(why) => return frozen(p, format!("no rebalancing: {why}")),
    };
    let sides = Sides::of(pool);
    // The rule every scaler follows while the job list catches up with Slurm: grow Slurm to
    // what it certainly needs, give up nothing it may need.
    let slurm_need = s.certain_need();
    // Where the pods would land decides which nodes to take, not only how many.
    let placed = place_pods(pool, pods, &sides.candidates);
    let needs = Needs {
        kubernetes: placed.need(),
        slurm: slurm_need,
    };
    let mut moves = PoolMoves {
        needs,
        ..PoolMoves::default()
    };
    let wanted = needs.kubernetes + sides.idle_surplus(bounds, s.possible_need());
    let cooled = |t: Option<SystemTime>| {
        t.is_none_or(|t| now.duration_since(t).unwrap_or_default() >= bounds.cooldown)
    };
    // Under shares: what Slurm is owed (its need within its share, beyond what serves it)
    // comes first, and a side below its share does not wait out the cooldown.
    let (owed, kubernetes_owed) = nominal.map_or((0, false), |(sh, n)| {
        let at = (history, now);
        shares::apply(&mut p, &mut moves, (sh, n), (&sides, pool), slurm_need, at)
    });
    let budget = nominal.map_or((u64::MAX, u64::MAX), |(sh, n)| {
        shares::drain_budget(sh, n, &sides, slurm_need)
    });
    if owed > 0 {
        // Slurm's guarantee is being met: nothing goes the other way in the same plan.
    } else if wanted > 0 {
        if cooled(history.last_giveback) || kubernetes_owed {
            reclaim(
                &mut p,
                &mut moves,
                bounds,
                &sides,
                (&placed, wanted),
                budget,
            );
            if let Some((sh, _)) = nominal {
                shares::requeue(&mut p, &mut moves, sh, &sides, &history.drained_since, now);
            }
        } else {
            p.steps.push(format!(
                "Kubernetes could use {wanted} node(s), but capacity went to Slurm less than {}s ago",
                bounds.cooldown.as_secs()
            ));
        }
    } else if !sides.ours_empty.is_empty()
        || !sides.ours_busy.is_empty()
        || slurm_need > sides.serving.len() as u64
    {
        // Nobody in Kubernetes needs the pool: our drains go back to Slurm, then Slurm grows.
        if cooled(history.last_reclaim) {
            let max_slurm = bounds
                .most_slurm(pool.len())
                .min(nominal.map_or(u64::MAX, |(sh, n)| shares::slurm_cap(sh, n)));
            give_back(&mut p, &mut moves, &sides, max_slurm);
        } else {
            p.steps.push(format!(
                "capacity went to Kubernetes less than {}s ago; not giving it back yet",
                bounds.cooldown.as_secs()
            ));
        }
    }
    if p.steps.is_empty() {
        p.steps.push(format!(
            "balanced: Slurm holds {} of {} node(s) and needs {}; Kubernetes needs {}",
            sides.serving.len(),
            pool.len(),
            needs.slurm,
            needs.kubernetes
        ));
    }
    let ours = sides.ours_empty.iter().chain(&sides.ours_busy);
    moves.drained = (ours.map(|n| n.slurm_node.clone()))
        .filter(|n| !moves.resume.contains(n))
        .chain(moves.drain.iter().cloned())
        .collect();
    finish(p, moves, replicas)
}

/// The shares and Slurm's nominal share of this pool, in nodes.
type Nominal<'a> = (&'a Shares, u64);

/// What the planner may act on — the ledger and Slurm's data trusted, the shares readable —
/// or why not.
fn trusted<'a>(
    bounds: &'a ColocationBounds,
    pool: &[PoolNode],
    slurm: &'a Signals,
    ledger: Result<(), &str>,
) -> Result<(&'a PartitionSignals, Option<Nominal<'a>>), String> {
    let s = match (ledger, slurm) {
        (Ok(()), Ok(s)) => s,
        (Err(why), _) => return Err(format!("the GenericNode ledger cannot be trusted ({why})")),
        (_, Err(why)) => return Err(why.to_string()),
    };
    // `maxSlurmNodes` and `minKubernetesNodes` still bound the split: Slurm is never owed
    // more than they let it hold.
    let nominal = match &bounds.shares {
        Some(sh) => Some((
            sh,
            sh.slurm(pool.len() as u64)?
                .min(bounds.most_slurm(pool.len())),
        )),
        None => None,
    };
    Ok((s, nominal))
}

/// The plan with its moves, its reason `Rebalance` when anything moves.
fn finish(mut p: Plan, moves: PoolMoves, replicas: u64) -> Plan {
    p.effects = Some(std::sync::Arc::new(moves));
    p.reason = if p.changes(replicas) {
        Reason::Rebalance
    } else {
        Reason::Balanced
    };
    p.recommendation = p.replicas;
    p
}

/// Untrusted data moves nothing.
fn frozen(mut p: Plan, why: String) -> Plan {
    p.frozen = true;
    p.reason = Reason::Frozen;
    p.steps.push(why);
    p
}

/// Capacity to Kubernetes: first our drained nodes that are empty (their pods go first and
/// replicas drop), then, still short counting drains under way, more drains — the nodes the
/// pods would land on, then (for the idle surplus, which never drains busy nodes) other idle
/// ones — never below Slurm's guarantee.
fn reclaim(
    p: &mut Plan,
    m: &mut PoolMoves,
    bounds: &ColocationBounds,
    sides: &Sides,
    (placed, wanted): (&PodPlacement, u64),
    (budget, busy_budget): (u64, u64),
) {
    let replicas = p.replicas;
    // Never below Slurm's guarantee, even if it was raised after these drains began.
    let releasable = wanted.min(replicas.saturating_sub(bounds.min_slurm));
    // Those the pods would use first.
    let mut ours_empty = sides.ours_empty.clone();
    ours_empty.sort_by_key(|n| !placed.taken.iter().any(|t| std::ptr::eq(*t, *n)));
    for n in ours_empty.iter().take(releasable as usize) {
        m.release.push(n.k8s_node.clone());
        p.steps.push(format!(
            "releasing {} ({}) to Kubernetes: drained and empty",
            n.k8s_node, n.slurm_node
        ));
    }
    // From the pods bound, not `spec.replicas`: pods still waiting for a node would
    // otherwise absorb the drop (the operator removes unbound pods first) and leave the
    // marked ones in place; and Slurm's growth they stand for yields to Kubernetes' need.
    let bound = (sides.serving.len() + sides.ours_empty.len() + sides.ours_busy.len()) as u64;
    p.replicas = replicas.min(bound).saturating_sub(m.release.len() as u64);
    let short = wanted.saturating_sub(m.release.len() as u64 + sides.ours_busy.len() as u64);
    let allowed = (sides.serving.len() as u64)
        .saturating_sub(bounds.min_slurm)
        .min(budget);
    let for_pods = placed
        .taken
        .iter()
        .copied()
        .filter(|n| n.slurm.as_ref().is_some_and(|s| !s.drained_by_us));
    let idle = sides
        .candidates
        .iter()
        .copied()
        .filter(|n| n.slurm.as_ref().is_some_and(|s| !s.busy));
    let mut picked: Vec<&PoolNode> = Vec::new();
    let mut busy = 0;
    for n in for_pods.chain(idle) {
        if picked.len() as u64 >= short.min(allowed) {
            break;
        }
        let runs_jobs = n.slurm.as_ref().is_some_and(|s| s.busy);
        // Under shares, nodes running jobs only beyond Slurm's share.
        if runs_jobs && busy >= busy_budget {
            continue;
        }
        if !picked.iter().any(|m| std::ptr::eq(*m, n)) {
            busy += u64::from(runs_jobs);
            picked.push(n);
        }
    }
    let why = if m.needs.kubernetes > 0 {
        "Kubernetes has unschedulable pods that fit"
    } else {
        "idle"
    };
    for n in &picked {
        let (jobs, load) = n
            .slurm
            .as_ref()
            .map_or((0, 0), |s| (s.running_jobs, s.alloc_cpus));
        p.steps.push(format!(
            "draining {} ({}, {jobs} job(s), {load} CPUs allocated): {why}",
            n.slurm_node, n.k8s_node
        ));
        m.drain.push(n.slurm_node.clone());
    }
    if (picked.len() as u64) < short {
        let keeps = if bounds.shares.is_some() {
            "its share, and the idle nodes its work needs".to_string()
        } else {
            format!("its guaranteed {}", bounds.min_slurm)
        };
        p.steps.push(format!(
            "Kubernetes needs {short} more node(s); Slurm keeps {keeps}"
        ));
    }
}

/// Capacity to Slurm: our drains are resumed, then replicas rise to what Slurm needs, within
/// `max_slurm`.
fn give_back(p: &mut Plan, m: &mut PoolMoves, sides: &Sides, max_slurm: u64) {
    let replicas = p.replicas;
    for n in sides.ours_empty.iter().chain(sides.ours_busy.iter()) {
        m.resume.push(n.slurm_node.clone());
        p.steps.push(format!(
            "resuming {}: Kubernetes no longer needs it",
            n.slurm_node
        ));
    }
    let need = m.needs.slurm;
    let have = sides.serving.len() as u64 + m.resume.len() as u64;
    if need > have {
        let target = (replicas + (need - have)).min(max_slurm.max(replicas));
        if target > replicas {
            p.steps.push(format!(
                "growing Slurm {replicas} → {target}: it needs {need} node(s)"
            ));
            p.replicas = target;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::placement::kubernetes_need;
    use super::*;
    use crate::crd::{IntOrString, SharesSpec};
    use crate::pool::{Placement, Requirement, Toleration};
    use proptest::prelude::*;
    use slurmscale_exporter::model::demand::Demand;
    use slurmscale_exporter::signals::PartitionSignals;

    fn node(i: usize, slurm: Option<SlurmNode>) -> PoolNode {
        PoolNode {
            k8s_node: format!("k{i}"),
            slurm_node: format!("s{i}"),
            cpu: 8.0,
            memory: 32.0,
            gpu: 0.0,
            labels: BTreeMap::from([("pool".to_string(), "a".to_string())]),
            taints: Vec::new(),
            k8s_cpu: if slurm.is_some() { 0.0 } else { 6.0 },
            k8s_memory: 0.0,
            k8s_gpu: 0.0,
            slurm,
        }
    }

    fn slurm_node(busy: bool) -> Option<SlurmNode> {
        Some(SlurmNode {
            in_partition: true,
            busy,
            alloc_cpus: if busy { 4 } else { 0 },
            ..Default::default()
        })
    }

    fn signals(busy: u64, demand: u64) -> Signals {
        Ok(PartitionSignals {
            busy_nodes: busy,
            total_nodes: 10,
            demand: Demand {
                nodes: demand,
                ..Default::default()
            },
            shape: Default::default(),
            shape_source: "unknown",
            as_of: SystemTime::UNIX_EPOCH,
        })
    }

    fn bounds() -> ColocationBounds {
        ColocationBounds {
            min_slurm: 1,
            min_kubernetes: 1,
            max_slurm: 10,
            cooldown: Duration::from_secs(60),
            release_idle: false,
            shares: None,
        }
    }

    fn pods(n: usize) -> Vec<PendingPod> {
        (0..n)
            .map(|i| PendingPod {
                name: format!("p{i}"),
                cpu: 6.0,
                memory: 1.0,
                gpu: 0.0,
                placement: Placement::default(),
            })
            .collect()
    }

    #[test]
    fn only_pods_that_may_run_on_the_pool_count() {
        let pool = vec![node(0, slurm_node(false)), node(1, slurm_node(false))];
        let with = |placement: Placement| {
            let mut p = pods(1);
            p[0].placement = placement;
            kubernetes_need(&pool, &p)
        };
        let req = |key: &str, operator: &str, values: &[&str], field: bool| Requirement {
            key: key.into(),
            operator: operator.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
            field,
        };
        let selector = |k: &str, v: &str| Placement {
            node_selector: BTreeMap::from([(k.to_string(), v.to_string())]),
            ..Default::default()
        };
        let affinity = |terms: Vec<Vec<Requirement>>| Placement {
            terms,
            ..Default::default()
        };
        assert_eq!(with(Placement::default()), 1);
        assert_eq!(with(selector("pool", "a")), 1);
        assert_eq!(with(selector("pool", "b")), 0, "selects other nodes");
        assert_eq!(
            with(affinity(vec![vec![req("pool", "In", &["a", "x"], false)]])),
            1
        );
        assert_eq!(
            with(affinity(vec![vec![req("pool", "NotIn", &["a"], false)]])),
            0
        );
        assert_eq!(
            with(affinity(vec![vec![req("gpu", "Exists", &[], false)]])),
            0
        );
        assert_eq!(
            with(affinity(vec![
                vec![req("gpu", "Exists", &[], false)],
                vec![req("metadata.name", "In", &["k1"], true)],
            ])),
            1,
            "any one term is enough"
        );
        assert_eq!(
            with(affinity(vec![vec![req(
                "metadata.name",
                "In",
                &["elsewhere"],
                true
            )]])),
            0,
            "a DaemonSet pod for another node"
        );
        assert_eq!(
            with(affinity(vec![vec![]])),
            0,
            "an empty term matches nothing"
        );
        let mut big = pods(1);
        big[0].cpu = 9.0;
        assert_eq!(kubernetes_need(&pool, &big), 0, "larger than any pool node");
    }

    #[test]
    fn the_node_drained_is_one_the_pod_may_use() {
        // k0 idle in rack r1, k1 busy in rack r2: a pod for rack r2 takes k1, though idle
        // nodes go first otherwise.
        let mut pool = vec![node(0, slurm_node(false)), node(1, slurm_node(true))];
        pool[0].labels.insert("rack".into(), "r1".into());
        pool[1].labels.insert("rack".into(), "r2".into());
        let mut pods = pods(1);
        pods[0].placement.node_selector = BTreeMap::from([("rack".into(), "r2".into())]);
        let bounds = ColocationBounds {
            min_slurm: 0,
            min_kubernetes: 0,
            max_slurm: 2,
            cooldown: Duration::ZERO,
            release_idle: false,
            shares: None,
        };
        let p = plan(
            &bounds,
            &pool,
            &pods,
            &signals(1, 0),
            Ok(()),
            2,
            &ColocationHistory::default(),
            t(0),
        );
        assert_eq!(
            PoolMoves::of(&p).drain,
            vec!["s1".to_string()],
            "{:?}",
            p.steps
        );
        pods[0].placement.node_selector = BTreeMap::from([("rack".into(), "r9".into())]);
        let p = plan(
            &bounds,
            &pool,
            &pods,
            &signals(1, 0),
            Ok(()),
            2,
            &ColocationHistory::default(),
            t(0),
        );
        assert!(
            PoolMoves::of(&p).drain.is_empty(),
            "no pool node suits the pod: {:?}",
            p.steps
        );
    }

    #[test]
    fn tainted_pool_nodes_take_only_pods_that_tolerate_them() {
        let taint = |key: &str, value: &str, effect: &str| Taint {
            key: key.into(),
            value: value.into(),
            effect: effect.into(),
        };
        let mut tainted = node(0, slurm_node(false));
        tainted.taints = vec![taint("dedicated", "slurm", "NoSchedule")];
        let pool = vec![tainted];
        let tolerating = |t: &[(&str, &str, &str, &str)]| {
            let mut p = pods(1);
            p[0].placement.tolerations = t
                .iter()
                .map(|(key, operator, value, effect)| Toleration {
                    key: key.to_string(),
                    operator: operator.to_string(),
                    value: value.to_string(),
                    effect: effect.to_string(),
                })
                .collect();
            kubernetes_need(&pool, &p)
        };
        assert_eq!(tolerating(&[]), 0, "no toleration: the taint keeps it off");
        assert_eq!(
            tolerating(&[("dedicated", "Equal", "slurm", "NoSchedule")]),
            1
        );
        assert_eq!(
            tolerating(&[("dedicated", "", "slurm", "")]),
            1,
            "any effect"
        );
        assert_eq!(tolerating(&[("dedicated", "Exists", "", "")]), 1);
        assert_eq!(
            tolerating(&[("", "Exists", "", "")]),
            1,
            "tolerates everything"
        );
        assert_eq!(
            tolerating(&[("dedicated", "Equal", "web", "NoSchedule")]),
            0
        );
        assert_eq!(tolerating(&[("dedicated", "Exists", "", "NoExecute")]), 0);
    }

    fn t(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + s)
    }

    #[test]
    fn unschedulable_pods_drain_idle_slurm_nodes_first() {
        let pool = vec![
            node(0, slurm_node(true)),
            node(1, slurm_node(false)),
            node(2, slurm_node(false)),
            node(3, None),
        ];
        let p = plan(
            &bounds(),
            &pool,
            &pods(1),
            &signals(1, 0),
            Ok(()),
            3,
            &ColocationHistory::default(),
            t(0),
        );
        assert_eq!(Some(PoolMoves::of(&p).needs.kubernetes), Some(1));
        assert_eq!(PoolMoves::of(&p).drain.len(), 1);
        assert!(
            PoolMoves::of(&p).drain[0] == "s1" || PoolMoves::of(&p).drain[0] == "s2",
            "an idle node: {p:?}"
        );
        assert_eq!(p.replicas, 3, "replicas drop only once the node is empty");
    }

    /// With only busy nodes to choose from: the one running the fewest jobs, and among
    /// those the one whose jobs end soonest (an unknown end counts as never).
    #[test]
    fn busy_nodes_are_drained_fewest_jobs_then_soonest_end_first() {
        let busy = |jobs, free_at, alloc_cpus| {
            Some(SlurmNode {
                in_partition: true,
                busy: true,
                running_jobs: jobs,
                free_at,
                alloc_cpus,
                ..Default::default()
            })
        };
        let pool = vec![
            node(0, busy(2, Some(100), 1)),
            node(1, busy(1, None, 1)),
            node(2, busy(1, Some(900), 8)),
            node(3, busy(1, Some(500), 8)),
            node(4, None),
        ];
        let drained = |pods_n| {
            let p = plan(
                &bounds(),
                &pool,
                &pods(pods_n),
                &signals(4, 0),
                Ok(()),
                4,
                &ColocationHistory::default(),
                t(0),
            );
            PoolMoves::of(&p).drain.clone()
        };
        assert_eq!(drained(1), ["s3"]);
        assert_eq!(drained(2), ["s3", "s2"]);
        assert_eq!(drained(3), ["s3", "s2", "s1"]);
        // Allocated, its job not listed yet (it just started): last, not first.
        let mut pool = pool;
        pool[4] = node(4, busy(0, None, 1));
        let p = plan(
            &bounds(),
            &pool,
            &pods(1),
            &signals(5, 0),
            Ok(()),
            5,
            &ColocationHistory::default(),
            t(0),
        );
        assert_eq!(PoolMoves::of(&p).drain, ["s3"], "{:?}", p.steps);
    }

    #[test]
    fn drained_empty_nodes_are_released_and_replicas_drop() {
        let mut drained = slurm_node(false);
        drained.as_mut().unwrap().drained_by_us = true;
        let pool = vec![node(0, slurm_node(true)), node(1, drained), node(2, None)];
        let p = plan(
            &bounds(),
            &pool,
            &pods(1),
            &signals(1, 0),
            Ok(()),
            2,
            &ColocationHistory::default(),
            t(0),
        );
        assert_eq!(
            (PoolMoves::of(&p).release.as_slice(), p.replicas),
            (&["k1".to_string()][..], 1)
        );
        assert!(
            PoolMoves::of(&p).drain.is_empty(),
            "the need is met by the released node: {p:?}"
        );
    }

    #[test]
    fn slurm_demand_resumes_our_drains_then_grows() {
        let mut draining = slurm_node(true);
        draining.as_mut().unwrap().drained_by_us = true;
        let pool = vec![
            node(0, slurm_node(true)),
            node(1, draining),
            node(2, None),
            node(3, None),
            node(4, None),
        ];
        let p = plan(
            &bounds(),
            &pool,
            &[],
            &signals(2, 2),
            Ok(()),
            2,
            &ColocationHistory::default(),
            t(0),
        );
        assert_eq!(PoolMoves::of(&p).resume, ["s1"]);
        assert_eq!(p.replicas, 4);
    }

    /// While the job list catches up with Slurm, pending jobs may already run on the nodes
    /// Slurm has: the pool grows Slurm only for what it certainly needs, and hands none of
    /// its idle nodes to Kubernetes while jobs may be missing from the list.
    #[test]
    fn a_job_list_catching_up_grows_slurm_only_for_certain_work() {
        let pool = vec![
            node(0, slurm_node(true)),
            node(1, slurm_node(false)),
            node(2, None),
            node(3, None),
        ];
        let catching_up = |maybe_started_nodes: u64, open_ended: bool| -> Signals {
            Ok(PartitionSignals {
                busy_nodes: 1,
                total_nodes: 10,
                demand: Demand {
                    nodes: 3,
                    maybe_started_nodes,
                    open_ended,
                    ..Default::default()
                },
                shape: Default::default(),
                shape_source: "unknown",
                as_of: SystemTime::UNIX_EPOCH,
            })
        };
        let plan_for = |signals: &Signals, bounds: &ColocationBounds| {
            plan(
                bounds,
                &pool,
                &[],
                signals,
                Ok(()),
                2,
                &ColocationHistory::default(),
                t(0),
            )
        };
        // All three pending nodes' worth of jobs may have started: nothing to grow for.
        let p = plan_for(&catching_up(3, false), &bounds());
        assert_eq!(p.replicas, 2, "{:?}", p.steps);
        assert_eq!(PoolMoves::of(&p).needs.slurm, 1);
        // One node's worth may have started: two are certainly needed beyond the busy one.
        let p = plan_for(&catching_up(1, false), &bounds());
        assert_eq!(p.replicas, 3, "{:?}", p.steps);
        // Idle nodes go back to Kubernetes only when the list is complete.
        let releasing = ColocationBounds {
            release_idle: true,
            ..bounds()
        };
        let p = plan_for(&catching_up(3, true), &releasing);
        assert!(PoolMoves::of(&p).drain.is_empty(), "{:?}", p.steps);
        let idle = |nodes| {
            catching_up(0, false).map(|mut s| {
                s.demand.nodes = nodes;
                s
            })
        };
        assert!(PoolMoves::of(&plan_for(&idle(0), &releasing)).drain == ["s1"]);
    }

    /// Slurm's share of 2 of the pool, pods evictable, a 600-s reclaim time and 60-s boots.
    fn shared(slurm: i32, evictable: bool) -> ColocationBounds {
        let spec = SharesSpec {
            slurm: IntOrString::Int(slurm),
            slurm_borrowing_limit: None,
            kubernetes_borrowing_limit: None,
            reclaim_seconds: None,
            requeue_after_seconds: None,
            evictable_pods: if evictable {
                BTreeMap::from([("borrow".to_string(), "yes".to_string())])
            } else {
                BTreeMap::new()
            },
        };
        ColocationBounds {
            min_slurm: 0,
            min_kubernetes: 0,
            shares: Some(Shares {
                spec,
                boot: Duration::from_secs(60),
            }),
            ..bounds()
        }
    }

    fn reserved(mut n: PoolNode, k8s_cpu: f64) -> PoolNode {
        n.taints.push(Taint {
            key: crate::pool::RESERVED_TAINT.into(),
            value: String::new(),
            effect: "NoSchedule".into(),
        });
        n.k8s_cpu = k8s_cpu;
        n
    }

    #[test]
    fn under_shares_slurm_below_its_share_with_work_gets_nodes_back_though_pods_wait() {
        // Slurm serves on k0 and has work for two more; its share is 2. Kubernetes holds
        // k1–k3 (k3 empty) and has pods waiting: without shares Slurm would get nothing.
        let mut pool = vec![
            node(0, slurm_node(true)),
            node(1, None),
            node(2, None),
            node(3, None),
        ];
        pool[3].k8s_cpu = 0.0;
        let history = ColocationHistory::default();
        let go = |b: &ColocationBounds, pool: &[PoolNode], h: &ColocationHistory, at| {
            plan(b, pool, &pods(2), &signals(1, 2), Ok(()), 1, h, at)
        };
        let p = go(&shared(2, true), &pool, &history, t(0));
        assert_eq!(p.replicas, 2, "{:?}", p.steps);
        let m = PoolMoves::of(&p);
        assert_eq!(
            (&m.reserve, &m.reserved, &m.drain, &m.evict),
            (
                &vec!["k3".to_string()],
                &vec!["k3".to_string()],
                &vec![],
                &vec![]
            ),
            "the empty node is reserved for the new pod"
        );
        let without = go(&bounds(), &pool, &history, t(0));
        assert_eq!(without.replicas, 1, "Kubernetes first: {:?}", without.steps);

        // k3 is reserved but a pod still runs there: evicted one reclaim time less a boot
        // after the reservation, not before, and only where the site allows evictions.
        pool[3] = reserved(pool[3].clone(), 2.0);
        let mut history = ColocationHistory::default();
        history.record(&p, 1, t(0));
        assert_eq!(history.reserved_since.get("k3"), Some(&t(0)));
        let evicts =
            |b: &ColocationBounds, at| PoolMoves::of(&go(b, &pool, &history, at)).evict.clone();
        assert_eq!(evicts(&shared(2, true), t(539)), Vec::<String>::new());
        assert_eq!(evicts(&shared(2, true), t(540)), ["k3"]);
        assert_eq!(
            evicts(&shared(2, false), t(5_000)),
            Vec::<String>::new(),
            "no pod is evictable"
        );
    }

    #[test]
    fn under_shares_jobs_on_a_borrowed_drain_are_requeued_only_past_the_requeue_time() {
        // Slurm's share is 2; it serves on k0–k1 and still runs jobs on s2, which it borrowed
        // and we drained for Kubernetes (which holds k3, one below its share, pods waiting).
        let drained = SlurmNode {
            drained_by_us: true,
            requeueable: true,
            ..slurm_node(true).unwrap()
        };
        let mut pool = vec![
            node(0, slurm_node(true)),
            node(1, slurm_node(true)),
            node(2, Some(drained)),
            node(3, None),
        ];
        let requeue_after = |secs: Option<u32>, slurm: i32| {
            let mut b = shared(slurm, true);
            b.shares.as_mut().unwrap().spec.requeue_after_seconds = secs;
            b
        };
        let history = ColocationHistory {
            drained_since: BTreeMap::from([("s2".to_string(), t(0))]),
            ..Default::default()
        };
        let go = |b: &ColocationBounds, pool: &[PoolNode], at| {
            plan(b, pool, &pods(2), &signals(3, 0), Ok(()), 3, &history, at)
        };
        let on = requeue_after(Some(300), 2);
        let early = go(&on, &pool, t(299));
        assert!(
            PoolMoves::of(&early).requeue.is_empty(),
            "{:?}",
            early.steps
        );
        assert_eq!(
            early.revisit,
            Some(t(300)),
            "looked at again when it is due"
        );
        let due = go(&on, &pool, t(300));
        assert_eq!(PoolMoves::of(&due).requeue, ["s2"], "{:?}", due.steps);
        assert!(
            due.steps.iter().any(|s| s.contains("requeuing")),
            "{:?}",
            due.steps
        );
        let off = go(&requeue_after(None, 2), &pool, t(5_000));
        assert!(PoolMoves::of(&off).requeue.is_empty(), "off by default");
        let within = go(&requeue_after(Some(300), 3), &pool, t(5_000));
        assert!(
            PoolMoves::of(&within).requeue.is_empty(),
            "s2 is within Slurm's share of 3: {:?}",
            within.steps
        );
        pool[2].slurm.as_mut().unwrap().requeueable = false;
        let kept = go(&on, &pool, t(5_000));
        assert!(
            PoolMoves::of(&kept).requeue.is_empty(),
            "a job that may not be requeued is waited for"
        );
        // The clock starts when the drain is first planned.
        let mut h = ColocationHistory::default();
        let drain = Plan {
            effects: Some(std::sync::Arc::new(PoolMoves {
                drained: vec!["s2".into()],
                ..Default::default()
            })),
            ..Plan::default()
        };
        h.record(&drain, 3, t(7));
        h.record(&drain, 3, t(9));
        assert_eq!(h.drained_since.get("s2"), Some(&t(7)));
    }

    #[test]
    fn under_shares_kubernetes_drains_only_what_slurm_holds_beyond_its_share_or_leaves_idle() {
        // Slurm runs jobs on k0–k2 with a share of 2; pods need two nodes.
        let pool = vec![
            node(0, slurm_node(true)),
            node(1, slurm_node(true)),
            node(2, slurm_node(true)),
            node(3, None),
        ];
        let p = plan(
            &shared(2, true),
            &pool,
            &pods(2),
            &signals(3, 0),
            Ok(()),
            3,
            &ColocationHistory::default(),
            t(0),
        );
        assert_eq!(
            PoolMoves::of(&p).drain.len(),
            1,
            "only the one it borrowed: {:?}",
            p.steps
        );
        let p = plan(
            &bounds(),
            &pool,
            &pods(2),
            &signals(3, 0),
            Ok(()),
            3,
            &ColocationHistory::default(),
            t(0),
        );
        assert_eq!(
            PoolMoves::of(&p).drain.len(),
            2,
            "Kubernetes first: {:?}",
            p.steps
        );
        // Idle nodes within its share that its work does not need are lent.
        let idle = vec![
            node(0, slurm_node(true)),
            node(1, slurm_node(false)),
            node(2, None),
        ];
        let p = plan(
            &shared(2, true),
            &idle,
            &pods(1),
            &signals(1, 0),
            Ok(()),
            2,
            &ColocationHistory::default(),
            t(0),
        );
        assert_eq!(PoolMoves::of(&p).drain, ["s1"], "{:?}", p.steps);
        // Within the cooldown after a give-back, Kubernetes below its share still drains.
        let gave = ColocationHistory {
            last_giveback: Some(t(0)),
            ..Default::default()
        };
        let p = plan(
            &shared(2, true),
            &pool,
            &pods(2),
            &signals(3, 0),
            Ok(()),
            3,
            &gave,
            t(1),
        );
        assert_eq!(PoolMoves::of(&p).drain.len(), 1, "{:?}", p.steps);
    }

    #[test]
    fn under_shares_reservations_nobody_waits_for_are_lifted() {
        // k1 got its NodeSet pod (Slurm holds it, still tainted); k2 is reserved, but
        // Slurm's work now fits what it holds.
        let pool = vec![
            node(0, slurm_node(true)),
            reserved(node(1, slurm_node(true)), 0.0),
            reserved(node(2, None), 0.0),
        ];
        let p = plan(
            &shared(2, true),
            &pool,
            &[],
            &signals(2, 0),
            Ok(()),
            2,
            &ColocationHistory::default(),
            t(0),
        );
        let mut lifted = PoolMoves::of(&p).unreserve.clone();
        lifted.sort();
        assert_eq!(lifted, ["k1", "k2"], "{:?}", p.steps);
        assert!(PoolMoves::of(&p).reserved.is_empty());
    }

    #[test]
    fn under_shares_the_old_bounds_still_hold() {
        // Slurm's share is 3 of 4, but maxSlurmNodes is 2: it is owed no more than 2.
        let pool = vec![
            node(0, slurm_node(true)),
            node(1, None),
            node(2, None),
            node(3, None),
        ];
        let mut b = shared(3, true);
        b.max_slurm = 2;
        let p = plan(
            &b,
            &pool,
            &[],
            &signals(1, 3),
            Ok(()),
            1,
            &ColocationHistory::default(),
            t(0),
        );
        assert_eq!(p.replicas, 2, "{:?}", p.steps);
        assert_eq!(PoolMoves::of(&p).shares.map(|s| s.slurm), Some(2));
        // minSlurmNodes: pods never drain Slurm below it, even beyond Slurm's share.
        let held = vec![
            node(0, slurm_node(false)),
            node(1, slurm_node(false)),
            node(2, None),
        ];
        let mut b = shared(0, true);
        b.min_slurm = 2;
        let p = plan(
            &b,
            &held,
            &pods(2),
            &signals(0, 0),
            Ok(()),
            2,
            &ColocationHistory::default(),
            t(0),
        );
        assert!(PoolMoves::of(&p).drain.is_empty(), "{:?}", p.steps);
    }

    #[test]
    fn a_share_that_is_not_a_count_or_percentage_freezes_the_pool() {
        let mut b = shared(2, true);
        b.shares.as_mut().unwrap().spec.slurm = IntOrString::String("half".into());
        let pool = vec![node(0, slurm_node(true)), node(1, None)];
        let p = plan(
            &b,
            &pool,
            &pods(1),
            &signals(1, 0),
            Ok(()),
            1,
            &ColocationHistory::default(),
            t(0),
        );
        assert!(p.frozen && p.message().contains("half"), "{:?}", p.steps);
        b.shares.as_mut().unwrap().spec.slurm = IntOrString::String("50%".into());
        let p = plan(
            &b,
            &pool,
            &pods(1),
            &signals(1, 0),
            Ok(()),
            1,
            &ColocationHistory::default(),
            t(0),
        );
        assert!(!p.frozen);
    }

    #[test]
    fn someone_elses_drain_is_never_touched_and_untrusted_data_plans_nothing() {
        let mut theirs = slurm_node(false);
        theirs.as_mut().unwrap().unavailable = true;
        let pool = vec![node(0, slurm_node(true)), node(1, theirs), node(2, None)];
        let p = plan(
            &bounds(),
            &pool,
            &pods(1),
            &signals(1, 0),
            Ok(()),
            2,
            &ColocationHistory::default(),
            t(0),
        );
        assert!(
            !PoolMoves::of(&p).drain.contains(&"s1".to_string())
                && !PoolMoves::of(&p).resume.contains(&"s1".to_string())
        );
        let p = plan(
            &bounds(),
            &pool,
            &pods(3),
            &signals(0, 0),
            Err("watch failing"),
            2,
            &ColocationHistory::default(),
            t(0),
        );
        assert!(p.frozen && PoolMoves::of(&p).drain.is_empty() && p.replicas == 2);
    }

    fn any_pool() -> impl Strategy<Value = Vec<PoolNode>> {
        prop::collection::vec(
            prop::option::of((any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>())),
            1..12,
        )
        .prop_map(|v| {
            v.into_iter()
                .enumerate()
                .map(|(i, s)| {
                    node(
                        i,
                        s.map(|(in_partition, busy, ours, theirs)| SlurmNode {
                            in_partition,
                            busy,
                            alloc_cpus: u64::from(busy) * 4,
                            running_jobs: u64::from(busy) * (i as u64 % 3 + 1),
                            free_at: busy.then_some(1_800_000_000 + i as i64 * 60),
                            drained_by_us: ours && !theirs,
                            unavailable: theirs,
                            requeueable: i % 2 == 0,
                        }),
                    )
                })
                .collect()
        })
    }

    proptest! {
        #[test]
        fn guarantees_hold_and_only_accountable_nodes_are_drained(
            pool in any_pool(),
            n_pods in 0usize..8,
            busy in 0u64..6,
            demand in 0u64..6,
            min_slurm in 0u64..3,
            min_k8s in 0u64..3,
            release_idle in any::<bool>(),
        ) {
            let held = pool.iter().filter(|n| n.slurm.is_some()).count() as u64;
            let b = ColocationBounds { min_slurm, min_kubernetes: min_k8s, max_slurm: 10, cooldown: Duration::from_secs(60), release_idle, shares: None };
            let p = plan(&b, &pool, &pods(n_pods), &signals(busy, demand), Ok(()), held, &ColocationHistory::default(), t(0));
            // Never below Slurm's guarantee by our doing, never above what Kubernetes must keep.
            if held >= min_slurm {
                prop_assert!(p.replicas >= min_slurm, "{p:?}");
            }
            if p.replicas > held {
                prop_assert!(p.replicas + min_k8s <= pool.len() as u64, "{p:?}");
            }
            // Slurm nodes not drained by us: new drains never take them below the guarantee.
            let ours = pool.iter().filter(|n| n.slurm.as_ref().is_some_and(|s| s.drained_by_us)).count() as u64;
            let serving = held - ours;
            prop_assert!(PoolMoves::of(&p).drain.is_empty() || serving - PoolMoves::of(&p).drain.len() as u64 >= min_slurm, "{p:?}");
            for d in &PoolMoves::of(&p).drain {
                let n = pool.iter().find(|n| &n.slurm_node == d);
                prop_assert!(n.is_some_and(|n| n.slurm.as_ref().is_some_and(|s| s.in_partition && !s.unavailable && !s.drained_by_us)), "drained {d}, which is not ours to drain: {p:?}");
            }
            for r in &PoolMoves::of(&p).resume {
                let n = pool.iter().find(|n| &n.slurm_node == r);
                prop_assert!(n.is_some_and(|n| n.slurm.as_ref().is_some_and(|s| s.drained_by_us)), "resumed {r}, a drain that is not ours");
            }
        }

        #[test]
        fn requeues_only_our_borrowed_drains_whose_jobs_may_be_requeued_past_the_time(
            pool in any_pool(),
            n_pods in 0usize..8,
            busy in 0u64..6,
            share in 0i32..6,
            after in proptest::option::of(0u32..120),
            since in 0u64..240,
        ) {
            let held = pool.iter().filter(|n| n.slurm.is_some()).count() as u64;
            let mut b = shared(share, true);
            b.shares.as_mut().unwrap().spec.requeue_after_seconds = after;
            let history = ColocationHistory {
                drained_since: pool.iter().map(|n| (n.slurm_node.clone(), t(0))).collect(),
                ..Default::default()
            };
            let p = plan(&b, &pool, &pods(n_pods), &signals(busy, 0), Ok(()), held, &history, t(since));
            let requeued = &PoolMoves::of(&p).requeue;
            prop_assert!(requeued.is_empty() || after.is_some_and(|a| since >= u64::from(a)), "{p:?}");
            prop_assert!(held.saturating_sub(requeued.len() as u64) >= (share as u64).min(held), "below its share: {p:?}");
            for r in requeued {
                let n = pool.iter().find(|n| &n.slurm_node == r);
                prop_assert!(n.is_some_and(|n| n.slurm.as_ref().is_some_and(|s| s.drained_by_us && s.busy && s.requeueable && !s.unavailable)), "requeued {r}: {p:?}");
            }
        }

        #[test]
        fn nothing_moves_back_within_the_cooldown(pool in any_pool(), n_pods in 0usize..8, busy in 0u64..6, demand in 0u64..6, since in 0u64..59) {
            let held = pool.iter().filter(|n| n.slurm.is_some()).count() as u64;
            let b = bounds();
            let after_reclaim = ColocationHistory { last_reclaim: Some(t(0)), ..Default::default() };
            let p = plan(&b, &pool, &pods(n_pods), &signals(busy, demand), Ok(()), held, &after_reclaim, t(since));
            prop_assert!(PoolMoves::of(&p).resume.is_empty() && p.replicas <= held, "gave back {since}s after a reclaim: {p:?}");
            let after_giveback = ColocationHistory { last_giveback: Some(t(0)), ..Default::default() };
            let p = plan(&b, &pool, &pods(n_pods), &signals(busy, demand), Ok(()), held, &after_giveback, t(since));
            prop_assert!(PoolMoves::of(&p).drain.is_empty(), "reclaimed {since}s after a give-back: {p:?}");
        }
    }
}
