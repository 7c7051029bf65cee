//! The `builtin` policy: slurmscale's own [`Controller`], reconciling a real
//! NodeSetAutoscaler against Slurm snapshots of the simulated partition, on the simulation's
//! clock, through the in-memory [`Fake`] whose one scale target is the simulated NodeSet.
//! Nothing of the decision is re-implemented here. On a [`Mode::Planned`] partition it runs
//! `mode: SlurmPlanned` (the `slurm-planned` row): the controller reads slurmctld's power
//! requests from `/nodes` and the NodeSet's pods by name, and its writes — replicas, the
//! pods marked to go, RESUMEs — are carried out here, with slurm-operator's pod order.
//!
//! The real autoscaler polls slurmrestd every 2 s and reconciles each poll. Replaying months
//! tick by tick would be slow, so this one reconciles only on the 2 s polls where something
//! the policy reads changed (busy nodes, demand, replicas; for slurm-planned, slurmctld's
//! power requests and the pods) and at the controller's own
//! [`Controller::next_revisit`] (a window or idle timeout ending); before such a poll it
//! also reconciles the poll just before, which saw the old inputs, so the decision history
//! holds the same records as a tick-by-tick run. A test checks both give the same schedule.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use slurmscale_exporter::snapshot::ClusterSnapshot;

use super::Scaler;
use super::cluster::{Cluster, Counts, Mode};
use super::view::{CLUSTER, PARTITION, POLL, SlurmView, replay_controller};
use slurmscale_autoscaler::crd::{NodeSetAutoscalerSpec, ScalingMode};
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
    /// Following slurmctld's requests (`Mode::Planned`): the slots whose pods were marked
    /// to go first.
    planned: Option<BTreeSet<u32>>,
    /// The pods as last shown to the controller, by slot (`Some(ready)`), and when (the
    /// cluster's power changes then): only what changed is written again.
    pods_shown: (Vec<Option<bool>>, Option<u64>),
}

/// The NodeSet's pod selector in a slurm-planned replay.
const SELECTOR: &str = "app.kubernetes.io/instance=sim";

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
        let planned = matches!(cluster.mode, Mode::Planned(_));
        let mut spec = spec.clone();
        spec.colocation = None;
        spec.mode = match planned {
            true => ScalingMode::SlurmPlanned,
            false => ScalingMode::Replicas,
        };
        let on = replay_controller(&spec, planned.then_some(SELECTOR));
        if planned {
            // As docs/slurm-planned.md sets the NodeSet up: slurmd -b, so a powered-up pod's
            // registration counts at once.
            on.fake.with(|w| {
                if let Some(t) = w.targets.get_mut(PARTITION) {
                    t.nodes.slurmd_args = vec!["-b".into()];
                }
            });
        }
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
            planned: planned.then(BTreeSet::new),
            pods_shown: (vec![None; cluster.max_nodes() as usize], None),
        }
    }

    /// One reconcile at `t` on what the view shows; returns the controller's writes.
    fn reconcile(&mut self, t: i64) -> Vec<Write> {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(t.max(0) as u64);
        self.on.set_now(at);
        self.on.publish(Arc::new(self.view.snapshot(at)));
        self.rt.block_on(self.on.controller.reconcile_all());
        // Let go of the node list so the next change is made in place.
        self.on.publish(Arc::new(ClusterSnapshot::new(CLUSTER, "")));
        self.last = Some(t);
        let writes = self.on.fake.take_writes();
        if let Some(r) = asked(&writes) {
            self.desired = r as u32;
        }
        writes
    }

    /// The NodeSet's pods as the controller reads them by name, and its status.
    fn show_pods(&mut self, cluster: &Cluster) {
        let changes = Some(cluster.counts.power_changes);
        if self.pods_shown.1 == changes {
            return;
        }
        let mut now = vec![None; self.pods_shown.0.len()];
        for (i, ready) in cluster.pods() {
            now[i as usize] = Some(ready);
        }
        let before = std::mem::replace(&mut self.pods_shown, (now, changes)).0;
        let now = &self.pods_shown.0;
        self.on.fake.with(|w| {
            if let Some(t) = w.targets.get_mut(PARTITION) {
                t.status_replicas = Some(cluster.replicas().into());
            }
            let pods = std::sync::Arc::make_mut(w.named_pods.entry(SELECTOR.into()).or_default());
            for (i, (was, is)) in before.iter().zip(now).enumerate() {
                if was == is {
                    continue;
                }
                let name = format!("{PARTITION}-{i}");
                match is {
                    None => pods.remove(&name),
                    Some(true) => pods.insert(name, slurmscale_autoscaler::pool::PodState::Ready),
                    Some(false) => {
                        pods.insert(name, slurmscale_autoscaler::pool::PodState::Starting)
                    }
                };
            }
        });
    }

    /// Carries out a slurm-planned reconcile's writes: RESUMEs and the marks first, then
    /// the replicas as slurm-operator applies them (new pods on the lowest free ordinals;
    /// going down, pods not yet ready first, then the marked, then the highest ordinals).
    /// The DRAIN the controller sets on a record whose pod waits to be retired is not
    /// carried out: the simulated slurmctld already plans nothing on a powering-down node
    /// until its pod is gone, which is what that drain achieves on a real one.
    fn carry_out(&mut self, writes: &[Write], now: i64, cluster: &mut Cluster) {
        let slot = |name: &str| {
            name.strip_prefix(PARTITION)
                .and_then(|n| n.strip_prefix('-'))
                .and_then(|n| n.parse::<u32>().ok())
        };
        let marked = self.planned.as_mut().expect("a slurm-planned replay");
        for w in writes {
            match w {
                Write::Resume { node } => {
                    if let Some(i) = slot(node) {
                        cluster.resume_record(i, now);
                    }
                }
                Write::Retire { pods } => marked.extend(pods.iter().filter_map(|p| slot(p))),
                Write::Unretire { pods } => {
                    for i in pods.iter().filter_map(|p| slot(p)) {
                        marked.remove(&i);
                    }
                }
                _ => {}
            }
        }
        let Some(replicas) = asked(writes).map(|r| r as u32) else {
            return;
        };
        let pods: Vec<(u32, bool)> = cluster.pods().collect();
        let have = pods.len() as u32;
        match replicas.cmp(&have) {
            std::cmp::Ordering::Greater => cluster.scale_ups += 1,
            std::cmp::Ordering::Less => cluster.scale_downs += 1,
            std::cmp::Ordering::Equal => return,
        }
        if replicas > have {
            let taken: BTreeSet<u32> = pods.iter().map(|p| p.0).collect();
            let free = (0..cluster.max_nodes()).filter(|i| !taken.contains(i));
            for i in free.take((replicas - have) as usize) {
                cluster.add_pod(i, now);
            }
        } else {
            let mut order = pods;
            order.sort_by_key(|&(i, ready)| (ready, !marked.contains(&i), std::cmp::Reverse(i)));
            for &(i, _) in order.iter().take((have - replicas) as usize) {
                cluster.remove_pod(i);
                marked.remove(&i);
            }
        }
    }
}

/// The replicas a reconcile's writes set, if they did.
fn asked(writes: &[Write]) -> Option<u64> {
    writes.iter().rev().find_map(|w| match w {
        Write::Scale { replicas, .. } => Some(*replicas),
        _ => None,
    })
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
        let inputs = match self.planned {
            // slurmctld decides: only its requests and the pods move the controller.
            Some(_) => Counts {
                power_changes: cluster.counts.power_changes,
                ..Counts::default()
            },
            None => cluster.counts,
        };
        let inputs = (inputs, cluster.replicas());
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
            && self.planned.is_none()
        {
            self.reconcile(now - POLL);
        }
        set_replicas(&self.on.fake, cluster.replicas().into());
        if self.planned.is_some() {
            self.show_pods(cluster);
        }
        self.view.sync(cluster);
        self.seen = Some(inputs);
        let writes = self.reconcile(now);
        if self.planned.is_some() {
            self.carry_out(&writes, now, cluster);
            if asked(&writes).is_some() {
                self.wake = Some(now + POLL);
            }
            return None;
        }
        let asked = asked(&writes)?;
        // The next poll reads the new replicas.
        self.wake = Some(now + POLL);
        Some(asked as u32)
    }

    fn desired(&self) -> u32 {
        self.desired
    }
}
