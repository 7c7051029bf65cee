//! `builtin` on a shared pool: slurmscale's real controller with a colocated
//! NodeSetAutoscaler, shown the pool as the API server and slurmrestd would show it, its
//! writes carried out by the pool's world.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use slurmscale_autoscaler::crd::NodeSetAutoscalerSpec;
use slurmscale_autoscaler::fakes::{Fake, Recorded};
use slurmscale_exporter::k8s::ledger::{Capacity, LedgerNode};
use slurmscale_exporter::k8s::watch::{KubeSnapshot, WatchHealth};
use slurmscale_exporter::snapshot::ClusterSnapshot;

use super::SELECTOR;
use super::pool::Pool;
use crate::driver::{Driver, Polls, Sense, World};
use crate::view::{CLUSTER, PARTITION, SlurmView, replay_controller};

/// What a poll of `builtin` looks at to decide whether to plan at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Inputs {
    reserved: u64,
    busy: u64,
    pending: u64,
    pending_job_nodes: u64,
    provisioned: u64,
    /// The waiting pods, by the version of their set.
    pods_pending: u64,
    /// Nodes Slurm holds and of those idle; pods coming and going while none waits move
    /// nothing the planner reads.
    slurm_held: u32,
    slurm_free: u32,
    replicas: u32,
    unplaced: u32,
}

/// The real controller on the pool, as `builtin` runs it.
pub(super) struct Autoscaler {
    driver: Driver,
    polls: Polls<Inputs>,
    shown: Shown,
}

/// What the controller was shown, kept between reconciles: the ledger and capacity (only
/// what changed is written again), the pods that wait.
struct Shown {
    view: SlurmView,
    ledger: Arc<Vec<LedgerNode>>,
    capacity: Arc<BTreeMap<String, Capacity>>,
    ledger_cursor: Option<u64>,
    pending: Option<u64>,
    /// The reservations the capacity's taints show.
    reserved: u64,
}

/// The pool at one reconcile: the world the controller runs in.
struct OnPool<'a> {
    shown: &'a mut Shown,
    pool: &'a mut Pool,
}

impl Autoscaler {
    pub(super) fn new(spec: &NodeSetAutoscalerSpec, pool: &Pool, start: i64) -> Self {
        let on = replay_controller(spec, Some(SELECTOR));
        let (ledger, capacity) = pool.world.empty_ledger(&pool.cluster.shape, CLUSTER);
        Self {
            driver: Driver::new(on, CLUSTER),
            polls: Polls::new(Sense::AtPolls, start, false),
            shown: Shown {
                view: SlurmView::new(&pool.cluster),
                ledger: Arc::new(ledger),
                capacity: Arc::new(capacity),
                ledger_cursor: None,
                pending: None,
                reserved: 0,
            },
        }
    }

    /// What the planner acts on, coarsely: a poll where none of it moved is skipped (the
    /// real controller would plan the same).
    pub(super) fn inputs(pool: &Pool) -> Inputs {
        let c = pool.cluster.counts;
        Inputs {
            reserved: pool.world.reserved_version,
            busy: u64::from(c.busy),
            pending: u64::from(c.pending),
            pending_job_nodes: c.pending_job_nodes,
            provisioned: u64::from(c.provisioned),
            pods_pending: pool.world.kube.pending_version(),
            slurm_held: pool.totals.slurm,
            slurm_free: pool.totals.slurm_free,
            replicas: pool.world.nodeset.replicas,
            unplaced: pool.world.nodeset.unplaced,
        }
    }

    /// The next poll that has something to look at, once everything due at `now` happened.
    pub(super) fn wake(&mut self, pool: &Pool, now: i64) -> Option<i64> {
        self.polls.settle(now, &Self::inputs(pool));
        self.polls.wake(self.driver.revisit())
    }

    /// A poll at `now`: when something it reads changed (or its controller asked to look
    /// again), one reconcile on the pool.
    pub(super) fn look(&mut self, now: i64, pool: &mut Pool) {
        let inputs = Self::inputs(pool);
        if self
            .polls
            .look(now, inputs, self.driver.revisit())
            .is_none()
        {
            return;
        }
        let mut world = OnPool {
            shown: &mut self.shown,
            pool,
        };
        let writes = self.driver.reconcile_blocking(&mut world, now);
        // What it wrote changes what it reads (a drained node is a node to release): the next
        // poll looks again, as the real autoscaler's would.
        if writes.iter().any(|w| !matches!(w, Recorded::Event { .. })) {
            self.polls.again(now);
        }
    }
}

impl World for OnPool<'_> {
    /// What the controller reads of Kubernetes (replicas, the NodeSet's pods by node, the
    /// pods that wait, the ledger and the nodes' capacity) and of slurmrestd (the jobs with
    /// the work on each node, which colocation ranks drain candidates by).
    fn show(&mut self, fake: &Fake, at: SystemTime) -> Arc<ClusterSnapshot> {
        let (shown, pool) = (&mut *self.shown, &*self.pool);
        let ledger_stale = shown.ledger_cursor.is_none();
        // The ledger: only the nodes whose pods changed are written again.
        let (touched, cursor) = pool
            .world
            .kube
            .touched_since(shown.ledger_cursor.unwrap_or(0));
        let slots: Vec<u32> = match touched.filter(|_| !ledger_stale) {
            Some(t) => t.to_vec(),
            None => (0..pool.world.nodes()).collect(),
        };
        shown.ledger_cursor = Some(cursor);
        // The last snapshot shown lets go of the ledger, so it is changed in place.
        fake.with(|w| w.ledger = None);
        {
            let ledger = Arc::make_mut(&mut shown.ledger);
            for i in slots {
                pool.world.set_kube_held(&mut ledger[i as usize], i);
            }
        }
        if shown.reserved != pool.world.reserved_version {
            shown.reserved = pool.world.reserved_version;
            let capacity = Arc::make_mut(&mut shown.capacity);
            for (name, cap) in capacity.iter_mut() {
                pool.world.show_reservation(&mut cap.taints, name);
            }
        }
        let kube = KubeSnapshot {
            ledger: shown.ledger.clone(),
            capacity: shown.capacity.clone(),
            watches: ["nodes", "genericnodes"]
                .into_iter()
                .map(|r| {
                    (
                        r,
                        WatchHealth {
                            probed: true,
                            served: true,
                            synced: true,
                            version: None,
                            last_error: None,
                        },
                    )
                })
                .collect(),
            ..KubeSnapshot::default()
        };
        fake.with(|w| {
            pool.world
                .show(w, (PARTITION, SELECTOR), kube, &mut shown.pending)
        });
        shown.view.sync(&pool.cluster);
        let mut snap = shown.view.snapshot(at);
        snap.jobs.data = Some(Arc::new(shown.view.jobs_with_running(&pool.cluster)));
        Arc::new(snap)
    }

    fn apply(&mut self, write: &Recorded, now: i64) {
        self.pool.world.apply(&mut self.pool.cluster, write, now);
    }
}
