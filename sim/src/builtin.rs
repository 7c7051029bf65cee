//! The `builtin` policy: slurmscale's own [`Controller`], reconciling a real
//! NodeSetAutoscaler against Slurm snapshots of the simulated partition, on the simulation's
//! clock, through the in-memory [`Fake`] whose one scale target is the simulated NodeSet.
//! Nothing of the decision is re-implemented here.
//!
//! The real autoscaler polls slurmrestd every 2 s and reconciles each poll. Replaying months
//! tick by tick would be slow, so this one reconciles only on the 2 s polls where something
//! the policy reads changed (busy nodes, demand, replicas) and at the controller's own
//! [`Controller::next_revisit`] (a window or idle timeout ending); before such a poll it
//! also reconciles the poll just before, which saw the old inputs, so the decision history
//! holds the same records as a tick-by-tick run. A test checks both give the same schedule.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use slurmscale_exporter::snapshot::ClusterSnapshot;

use super::Scaler;
use super::cluster::{Cluster, Counts};
use super::view::{CLUSTER, PARTITION, POLL, SlurmView, replay_controller};
use slurmscale_autoscaler::crd::NodeSetAutoscalerSpec;
use slurmscale_autoscaler::fakes::{Fake, OnFake, Write};

/// The NodeSetAutoscaler the builtin policy runs when none is given: the CRD's defaults,
/// scale to zero, up to the partition's size.
pub fn default_spec(max_nodes: u32) -> NodeSetAutoscalerSpec {
    serde_json::from_value(serde_json::json!({
        "scaleTargetRef": {"name": PARTITION},
        "maxReplicas": max_nodes,
    }))
    .expect("the default spec is valid")
}

pub struct Builtin {
    rt: tokio::runtime::Runtime,
    on: OnFake,
    /// What slurmrestd shows, as of the last reconcile.
    view: SlurmView,
    /// What the policy read at the last reconcile, and when that was.
    seen: Option<(Counts, u32)>,
    last: Option<i64>,
    /// A poll is due at this time (something changed), or the controller asked to look.
    wake: Option<i64>,
    /// Reconcile at every poll instead of fast-forwarding (tests compare both).
    every_poll: bool,
    desired: u32,
}

/// The simulated NodeSet's replicas as its scale subresource shows them.
fn set_replicas(target: &Fake, replicas: u64) {
    target.with(|w| {
        if let Some(t) = w.targets.get_mut(PARTITION) {
            t.replicas = replicas;
        }
    });
}

impl Builtin {
    pub fn new(spec: &NodeSetAutoscalerSpec, cluster: &Cluster, every_poll: bool) -> Self {
        let mut spec = spec.clone();
        spec.colocation = None;
        let on = replay_controller(&spec, None);
        set_replicas(&on.fake, cluster.replicas().into());
        Self {
            rt: tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("a current-thread runtime builds"),
            on,
            view: SlurmView::new(cluster),
            seen: None,
            last: None,
            wake: Some(0),
            every_poll,
            desired: cluster.replicas(),
        }
    }

    /// One reconcile at `t` on what the view shows; returns the replicas asked.
    fn reconcile(&mut self, t: i64) -> Option<u64> {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(t.max(0) as u64);
        self.on.set_now(at);
        self.on.publish(Arc::new(self.view.snapshot(at)));
        self.rt.block_on(self.on.controller.reconcile_all());
        // Let go of the node list so the next change is made in place.
        self.on.publish(Arc::new(ClusterSnapshot::new(CLUSTER, "")));
        self.last = Some(t);
        let asked = self
            .on
            .fake
            .take_writes()
            .into_iter()
            .filter_map(|w| match w {
                Write::Scale { replicas, .. } => Some(replicas),
                _ => None,
            })
            .next_back();
        if let Some(r) = asked {
            self.desired = r as u32;
        }
        asked
    }
}

impl Scaler for Builtin {
    fn wake(&self) -> Option<i64> {
        let revisit = self.on.controller.next_revisit().map(|t| {
            let s = t
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs_f64().ceil() as i64);
            // The first poll at or after it.
            s.div_euclid(POLL) * POLL + if s.rem_euclid(POLL) == 0 { 0 } else { POLL }
        });
        [self.wake, revisit].into_iter().flatten().min()
    }

    fn look(&mut self, now: i64, cluster: &mut Cluster) -> Option<u32> {
        let inputs = (cluster.counts, cluster.replicas());
        let poll = now.rem_euclid(POLL) == 0;
        if !poll {
            // Seen at the next poll.
            if self.seen != Some(inputs) {
                self.wake = Some(now - now.rem_euclid(POLL) + POLL);
            }
            return None;
        }
        // `wake()` covers both a poll asked for and the controller's revisit time.
        let due = self.wake().is_some_and(|w| w <= now) || self.seen != Some(inputs);
        self.wake = self.every_poll.then_some(now + POLL);
        if !due && !self.every_poll {
            return None;
        }
        // The poll before this one read what the last reconcile read (the view is synced
        // only here): replay it.
        if let Some(last) = self.last
            && last < now - POLL
            && !self.every_poll
        {
            self.reconcile(now - POLL);
        }
        set_replicas(&self.on.fake, cluster.replicas().into());
        self.view.sync(cluster);
        self.seen = Some(inputs);
        let asked = self.reconcile(now)?;
        // The next poll reads the new replicas.
        self.wake = Some(now + POLL);
        Some(asked as u32)
    }

    fn desired(&self) -> u32 {
        self.desired
    }
}
