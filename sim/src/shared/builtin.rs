//! `builtin` on a shared pool: slurmscale's real controller with a colocated
//! NodeSetAutoscaler, shown the pool as the API server and slurmrestd would show it, its
//! writes carried out by the pool's world.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use slurmscale_autoscaler::crd::NodeSetAutoscalerSpec;
use slurmscale_autoscaler::fakes::{OnFake, Write};
use slurmscale_exporter::k8s::ledger::{Capacity, LedgerNode};
use slurmscale_exporter::k8s::watch::{KubeSnapshot, WatchHealth};

use super::SELECTOR;
use super::pool::Pool;
use crate::view::{CLUSTER, PARTITION, POLL, SlurmView, replay_controller};

/// What a poll of `builtin` looks at to decide whether to plan at all.
pub(super) type Inputs = ([u64; 4], u64, [u32; 2], (u32, u32));

/// The real controller on the pool, as `builtin` runs it.
pub(super) struct Autoscaler {
    rt: tokio::runtime::Runtime,
    on: OnFake,
    view: SlurmView,
    /// What it last looked at.
    seen: Option<Inputs>,
    /// The ledger and capacity it shows, kept between looks: only what changed is written.
    ledger: Arc<Vec<LedgerNode>>,
    capacity: Arc<BTreeMap<String, Capacity>>,
    ledger_cursor: Option<u64>,
    shown_pending: Option<u64>,
    next_poll: i64,
}

impl Autoscaler {
    pub(super) fn new(spec: &NodeSetAutoscalerSpec, pool: &Pool, start: i64) -> Self {
        let on = replay_controller(spec, Some(SELECTOR));
        let (ledger, capacity) = pool.world.empty_ledger(&pool.cluster.shape, CLUSTER);
        Self {
            rt: tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("a current-thread runtime builds"),
            on,
            view: SlurmView::new(&pool.cluster),
            seen: None,
            ledger: Arc::new(ledger),
            capacity: Arc::new(capacity),
            ledger_cursor: None,
            shown_pending: None,
            // The first poll at or after the start, as a controller started then polls.
            next_poll: start + (POLL - start.rem_euclid(POLL)) % POLL,
        }
    }

    /// What the planner acts on, coarsely: a poll where none of it moved is skipped (the
    /// real controller would plan the same).
    pub(super) fn inputs(pool: &Pool) -> Inputs {
        let c = pool.cluster.counts;
        (
            [
                u64::from(c.busy),
                u64::from(c.pending),
                c.pending_job_nodes,
                u64::from(c.provisioned),
            ],
            pool.world.kube.pending_version(),
            // Nodes Slurm holds and of those idle; pods coming and going while none waits
            // move nothing the planner reads.
            [pool.totals[0], pool.totals[3]],
            (pool.world.nodeset.replicas, pool.world.nodeset.unplaced),
        )
    }

    /// The next poll that has something to look at, if any.
    pub(super) fn wake(&self, pool: &Pool, now: i64) -> Option<i64> {
        let next = |t: i64| t - t.rem_euclid(POLL) + POLL;
        if self.seen != Some(Self::inputs(pool)) {
            return Some(next(now).max(self.next_poll));
        }
        let revisit = self.on.controller.next_revisit()?;
        let secs = revisit
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs_f64().ceil() as i64);
        Some(next(secs - 1).max(self.next_poll))
    }

    /// A poll at `now`: when something it reads changed (or its controller asked to look
    /// again), the world as the API server and slurmrestd would show it, one reconcile, and
    /// what it wrote carried out.
    pub(super) fn look(&mut self, now: i64, pool: &mut Pool) {
        if now < self.next_poll || now.rem_euclid(POLL) != 0 {
            return;
        }
        self.next_poll = now + POLL;
        let inputs = Self::inputs(pool);
        let revisit =
            self.on.controller.next_revisit().is_some_and(|t| {
                t <= SystemTime::UNIX_EPOCH + Duration::from_secs(now.max(0) as u64)
            });
        if self.seen == Some(inputs) && !revisit {
            return;
        }
        self.seen = Some(inputs);
        self.show(pool);
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(now.max(0) as u64);
        self.on.set_now(at);
        self.view.sync(&pool.cluster);
        let mut snap = self.view.snapshot(at);
        // Colocation ranks drain candidates by their jobs' ends.
        snap.jobs.data = Some(Arc::new(self.view.jobs_with_running(&pool.cluster)));
        self.on.publish(Arc::new(snap));
        self.rt.block_on(self.on.controller.reconcile_all());
        let writes = self.on.fake.take_writes();
        // What it wrote changes what it reads (a drained node is a node to release): the next
        // poll looks again, as the real autoscaler's would.
        if writes.iter().any(|w| !matches!(w, Write::Event { .. })) {
            self.seen = None;
        }
        for w in writes {
            pool.world.apply(&mut pool.cluster, &w, now);
        }
    }

    /// What the controller reads of Kubernetes: replicas, the NodeSet's pods by node, the
    /// pods that wait, the ledger and the nodes' capacity.
    pub(super) fn show(&mut self, pool: &Pool) {
        let ledger_stale = self.ledger_cursor.is_none();
        // The ledger: only the nodes whose pods changed are written again.
        let (touched, cursor) = pool
            .world
            .kube
            .touched_since(self.ledger_cursor.unwrap_or(0));
        let slots: Vec<u32> = match touched.filter(|_| !ledger_stale) {
            Some(t) => t.to_vec(),
            None => (0..pool.world.nodes()).collect(),
        };
        self.ledger_cursor = Some(cursor);
        // The last snapshot shown lets go of the ledger, so it is changed in place.
        self.on.fake.with(|w| w.ledger = None);
        {
            let ledger = Arc::make_mut(&mut self.ledger);
            for i in slots {
                pool.world.set_kube_held(&mut ledger[i as usize], i);
            }
        }
        if self.shown_pending != Some(pool.world.kube.pending_version()) {
            self.shown_pending = Some(pool.world.kube.pending_version());
            let unschedulable = pool.world.unschedulable();
            self.on.fake.with(|w| w.unschedulable = unschedulable);
        }
        let pods = pool.world.pods_by_node();
        let kube = KubeSnapshot {
            ledger: self.ledger.clone(),
            capacity: self.capacity.clone(),
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
        self.on.fake.with(|w| {
            if let Some(t) = w.targets.get_mut(PARTITION) {
                t.replicas = u64::from(pool.world.nodeset.replicas);
                t.version += 1;
            }
            w.pods.insert(SELECTOR.into(), pods);
            let waiting = u64::from(pool.world.nodeset.unplaced);
            w.unscheduled.insert(SELECTOR.into(), waiting);
            w.ledger = Some(kube);
        });
    }
}
