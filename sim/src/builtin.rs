//! The `builtin` policy: slurmscale's own controller
//! ([`Controller`](slurmscale_autoscaler::controller::Controller)), reconciling a real
//! NodeSetAutoscaler against Slurm snapshots of the simulated partition, on the simulation's
//! clock, through the in-memory [`Fake`] whose one scale target is the simulated NodeSet.
//! Nothing of the decision is re-implemented here. On a [`Mode::Planned`] partition it runs
//! `mode: SlurmPlanned` (the `slurm-planned` row): the controller reads slurmctld's power
//! requests from `/nodes` and the NodeSet's pods by name, and its writes — replicas, the
//! pods marked to go, RESUMEs, power-ups ahead of a planned start — are carried out here,
//! with slurm-operator's pod order.
//!
//! It runs on the replay's [`Driver`]: the NodeSet and its slurmctld are the [`World`] it is
//! shown and whose writes land in, and [`Polls`] (every event watched) skips the 2 s polls
//! where nothing it reads moved — busy nodes, demand, replicas; for slurm-planned,
//! slurmctld's power requests and the pods — and the controller asked to look at no later
//! time; before such a poll it replays the poll just before, which saw the old inputs, so
//! the decision history holds the same records as a tick-by-tick run. A test checks both
//! give the same schedule.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::SystemTime;

use slurmscale_exporter::snapshot::ClusterSnapshot;

use super::Scaler;
use super::cluster::{Cluster, Counts, Mode};
use super::driver::{Driver, Polls, Sense, World, clock};
use super::operator;
use super::view::{CLUSTER, PARTITION, SlurmView, replay_controller};
use slurmscale_autoscaler::crd::{NodeSetAutoscalerSpec, PlannedBoot, ScalingMode};
use slurmscale_autoscaler::fakes::{Fake, Recorded};

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
    driver: Driver,
    polls: Polls<(Counts, u32)>,
    /// What the controller is shown of the NodeSet and slurmctld.
    nodeset: NodeSet,
    desired: u32,
    /// Booting just in time for Slurm's plan: it looks again when the plans move.
    just_in_time: bool,
}

/// The NodeSet's pod selector in a slurm-planned replay.
const SELECTOR: &str = "app.kubernetes.io/instance=sim";

/// The simulated NodeSet as the controller reads it and as slurm-operator keeps it.
struct NodeSet {
    /// What slurmrestd shows, as of the last reconcile.
    view: SlurmView,
    /// Following slurmctld's requests (`Mode::Planned`): the slots whose pods were marked
    /// to go first.
    planned: Option<BTreeSet<u32>>,
    /// The pods as last shown to the controller: only what changed is written again.
    pods_shown: PodsShown,
}

/// The NodeSet's pods as last shown to the controller.
struct PodsShown {
    /// By slot: `Some(ready)`, or no pod.
    by_slot: Vec<Option<bool>>,
    /// The cluster's count of power changes when they were shown.
    at: Option<u64>,
}

/// The NodeSet and its cluster at one reconcile: the world the controller runs in.
struct OnCluster<'a> {
    nodeset: &'a mut NodeSet,
    cluster: &'a mut Cluster,
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
        let planned = matches!(cluster.mode, Mode::Planned(_));
        let mut spec = spec.clone();
        spec.colocation = None;
        spec.mode = match planned {
            true => ScalingMode::SlurmPlanned,
            false => ScalingMode::Replicas,
        };
        // Booting just in time for Slurm's plan reads every waiting job's planned start.
        let reads_plans = !planned && spec.planned_jobs.boot == PlannedBoot::JustInTime;
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
        // The single partition's decisions are held to a tick-by-tick run; following
        // slurmctld, what was written between polls (marks, resumes) would make a replay of
        // a skipped poll read what that poll did not.
        let sense = Sense::EveryEvent {
            replays_skipped: !planned,
        };
        Self {
            driver: Driver::new(on, CLUSTER),
            polls: Polls::new(sense, 0, every_poll),
            nodeset: NodeSet {
                view: SlurmView::new(cluster).reading_plans(reads_plans),
                planned: planned.then(BTreeSet::new),
                pods_shown: PodsShown {
                    by_slot: vec![None; cluster.max_nodes() as usize],
                    at: None,
                },
            },
            desired: cluster.replicas(),
            just_in_time: spec.planned_jobs.boot == PlannedBoot::JustInTime,
        }
    }

    /// How long the controller has found the NodeSet's nodes take to boot.
    pub fn boot_time(&self) -> slurmscale_autoscaler::controller::BootTime {
        let metrics = self.driver.on.controller.metrics.lock();
        let metrics = metrics.unwrap_or_else(|e| e.into_inner());
        metrics
            .rows
            .values()
            .next()
            .map(|r| r.boot)
            .unwrap_or_default()
    }

    /// Notes the replicas a reconcile's writes asked for; whether they did.
    fn note(&mut self, writes: &[Recorded]) -> bool {
        let asked = asked(writes);
        if let Some(r) = asked {
            self.desired = r as u32;
        }
        asked.is_some()
    }
}

impl NodeSet {
    /// The NodeSet's pods as the controller reads them by name, and its status.
    fn show_pods(&mut self, fake: &Fake, cluster: &Cluster) {
        let changes = Some(cluster.counts.power_changes);
        if self.pods_shown.at == changes {
            return;
        }
        let mut now = vec![None; self.pods_shown.by_slot.len()];
        for (i, ready) in cluster.pods() {
            now[i as usize] = Some(ready);
        }
        let before = std::mem::replace(&mut self.pods_shown.by_slot, now);
        self.pods_shown.at = changes;
        let now = &self.pods_shown.by_slot;
        fake.with(|w| {
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
}

/// The NodeSet's pod of a slot, by its name.
fn slot(name: &str) -> Option<u32> {
    name.strip_prefix(PARTITION)
        .and_then(|n| n.strip_prefix('-'))
        .and_then(|n| n.parse::<u32>().ok())
}

impl World for OnCluster<'_> {
    fn show(&mut self, fake: &Fake, at: SystemTime) -> Arc<ClusterSnapshot> {
        set_replicas(fake, self.cluster.replicas().into());
        if self.nodeset.planned.is_some() {
            self.nodeset.show_pods(fake, self.cluster);
        }
        self.nodeset.view.sync(self.cluster);
        Arc::new(self.nodeset.view.snapshot(at))
    }

    /// The replicas as slurm-operator applies them; following slurmctld's requests, also
    /// RESUMEs and the marks (made before the scale in a reconcile), and the replicas on
    /// the NodeSet's own pods ([`scale_pods`]). The DRAIN the
    /// controller sets on a record whose pod waits to be retired is not carried out: the
    /// simulated slurmctld already plans nothing on a powering-down node until its pod is
    /// gone, which is what that drain achieves on a real one.
    fn apply(&mut self, write: &Recorded, now: i64) {
        let cluster = &mut *self.cluster;
        let Some(marked) = self.nodeset.planned.as_mut() else {
            if let Recorded::Scale { replicas, .. } = write {
                cluster.scale(*replicas as u32, now);
            }
            return;
        };
        match write {
            Recorded::Resume { node } => {
                if let Some(i) = slot(node) {
                    cluster.resume_record(i, now);
                }
            }
            Recorded::PowerUp { node } => {
                if let Some(i) = slot(node) {
                    cluster.power_up_record(i, now);
                }
            }
            Recorded::MarkPods { pods } => marked.extend(pods.iter().filter_map(|p| slot(p))),
            Recorded::UnmarkPods { pods } => {
                for i in pods.iter().filter_map(|p| slot(p)) {
                    marked.remove(&i);
                }
            }
            Recorded::Scale { replicas, .. } => scale_pods(cluster, marked, *replicas as u32, now),
            _ => {}
        }
    }
}

/// slurm-operator following the replicas of a NodeSet whose nodes are its pods: new pods on
/// the lowest free ordinals; going down, the pods it ranks first ([`operator::condemn`]).
fn scale_pods(cluster: &mut Cluster, marked: &mut BTreeSet<u32>, replicas: u32, now: i64) {
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
        let pods = pods
            .iter()
            .map(|&(i, _)| cluster.nodeset_pod(i, marked.contains(&i)))
            .collect();
        for pod in operator::condemn(pods, (have - replicas) as usize) {
            cluster.remove_pod(pod.ordinal);
            marked.remove(&pod.ordinal);
        }
    }
}

/// The replicas a reconcile's writes set, if they did.
fn asked(writes: &[Recorded]) -> Option<u64> {
    writes.iter().rev().find_map(|w| match w {
        Recorded::Scale { replicas, .. } => Some(*replicas),
        _ => None,
    })
}

impl Scaler for Builtin {
    fn wake(&self) -> Option<i64> {
        self.polls.wake(self.driver.revisit())
    }

    fn look(&mut self, now: i64, cluster: &mut Cluster) -> Option<u32> {
        let inputs = match self.nodeset.planned {
            // slurmctld decides: only its requests and the pods move the controller, and
            // booting just in time, its plans.
            Some(_) => Counts {
                power_changes: cluster.counts.power_changes,
                plan_changes: cluster.counts.plan_changes * u64::from(self.just_in_time),
                ..Counts::default()
            },
            // A policy that reads the plans looks again after each backfill pass.
            None if self.nodeset.view.reads_plans() => cluster.counts,
            None => Counts {
                plan_changes: 0,
                ..cluster.counts
            },
        };
        let inputs = (inputs, cluster.replicas());
        let due = self.polls.look(now, inputs, self.driver.revisit())?;
        // The poll before this one read what the last reconcile read (the view is synced
        // only when shown): replay it.
        if let Some(before) = due.replay_first {
            let snapshot = Arc::new(self.nodeset.view.snapshot(clock(before)));
            let writes = self.driver.rerun_blocking(snapshot, before);
            self.note(&writes);
        }
        let mut world = OnCluster {
            nodeset: &mut self.nodeset,
            cluster,
        };
        let writes = self.driver.reconcile_blocking(&mut world, now);
        if self.note(&writes) {
            // The next poll reads the new replicas.
            self.polls.again(now);
        }
        None
    }

    fn desired(&self) -> u32 {
        self.desired
    }
}
