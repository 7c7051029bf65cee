//! The controller's loop against the in-memory [`Fake`]: a scripted target, pool and Slurm,
//! a clock the test moves, and every write the controller makes in order. Both paths — a
//! NodeSet following demand and a colocated pool — through freezes, refusals, dry runs,
//! concurrent changes, the drain → release → deletion-cost sequence and cooldowns.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use slurmscale_exporter::k8s::ledger::{Capacity, LedgerNode};
use slurmscale_exporter::k8s::nodeset::NodeSetView;
use slurmscale_exporter::k8s::watch::{KubeSnapshot, WatchHealth};
use slurmscale_exporter::model::{
    Jobs, Node, NodeBase, NodeFlags, NodeSets, NodeState, Partition, PendingClass, PendingJob,
};
use slurmscale_exporter::slurm::ApiVersion;
use slurmscale_exporter::snapshot::ClusterSnapshot;

use super::ControllerConfig;
use crate::crd::{NodeSetAutoscaler, NodeSetAutoscalerStatus};
use crate::fakes::{Fake, FakeTarget, OnFake, Recorded, World};
use crate::pool::NodeSetPod;
use crate::pool::{PendingPod, Placement};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

const CLUSTER: &str = "c1";
const NODESET: &str = "elastic";
const SELECTOR: &str = "app=slurmd";
/// Slurm data older than this is stale here.
const STALE: Duration = Duration::from_secs(11);

fn at(s: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + s)
}

/// One autoscaler, its world and its clock.
struct Rig {
    on: OnFake,
    fake: Fake,
}

/// The autoscaler of `NODESET` with `spec` merged over the minimum, and `status`.
fn autoscaler(spec: Value, status: Value) -> NodeSetAutoscaler {
    let mut full = json!({"scaleTargetRef": {"name": NODESET}, "maxReplicas": 8});
    if let (Some(f), Some(s)) = (full.as_object_mut(), spec.as_object()) {
        f.extend(s.clone());
    }
    serde_json::from_value(json!({
        "apiVersion": "slurmscale.io/v1alpha1", "kind": "NodeSetAutoscaler",
        "metadata": {"name": NODESET, "namespace": "slurm", "generation": 1},
        "spec": full,
        "status": status,
    }))
    .expect("a valid autoscaler")
}

impl Rig {
    /// An autoscaler of `NODESET` with `spec` (merged over the minimum), its target at
    /// `replicas`, the time at `at(0)`.
    fn new(spec: Value, replicas: u64) -> Self {
        Self::with_status(spec, replicas, Value::Null)
    }

    /// As [`Rig::new`], the autoscaler's status as a previous leader wrote it.
    fn with_status(spec: Value, replicas: u64, status: Value) -> Self {
        let nsa = autoscaler(spec, status);
        let world = World {
            targets: BTreeMap::from([(
                NODESET.to_string(),
                FakeTarget {
                    replicas,
                    selector: Some(SELECTOR.into()),
                    ..Default::default()
                },
            )]),
            ..Default::default()
        };
        let cfg = ControllerConfig {
            resync: Duration::from_secs(2),
            stale_after: STALE,
            dry_run: false,
            concurrency: 8,
        };
        let on = OnFake::new(world, CLUSTER, [nsa], cfg, at(0));
        let fake = on.fake.clone();
        Self { on, fake }
    }

    fn at(&self, s: u64) {
        self.on.set_now(at(s));
    }

    fn slurm(&self, snap: ClusterSnapshot) {
        self.on.publish(Arc::new(snap));
    }

    /// One pass of the loop; the writes it made.
    async fn reconcile(&self) -> Vec<Recorded> {
        self.on.controller.reconcile_all().await;
        self.fake.take_writes()
    }

    fn status(&self) -> NodeSetAutoscalerStatus {
        self.fake.status(NODESET).unwrap_or_default()
    }

    /// (status, reason) of a condition.
    fn condition(&self, type_: &str) -> Option<(String, String)> {
        self.condition_of(type_).map(|c| (c.status, c.reason))
    }

    /// A condition, whole.
    fn condition_of(&self, type_: &str) -> Option<Condition> {
        self.status()
            .conditions
            .into_iter()
            .find(|c| c.type_ == type_)
    }

    fn replicas(&self) -> u64 {
        self.fake.with(|w| w.targets[NODESET].replicas)
    }
}

fn scales(writes: &[Recorded]) -> Vec<u64> {
    writes
        .iter()
        .filter_map(|w| match w {
            Recorded::Scale { replicas, .. } => Some(*replicas),
            _ => None,
        })
        .collect()
}

fn events(writes: &[Recorded]) -> Vec<(&str, &str)> {
    writes
        .iter()
        .filter_map(|w| match w {
            Recorded::Event { reason, note, .. } => Some((reason.as_str(), note.as_str())),
            _ => None,
        })
        .collect()
}

fn node(name: &str, partition: &str, busy: bool) -> Node {
    Node {
        name: name.into(),
        state: NodeState {
            base: if busy {
                NodeBase::Allocated
            } else {
                NodeBase::Idle
            },
            flags: NodeFlags::default(),
        },
        partitions: vec![Arc::from(partition)],
        cpus: 4,
        alloc_cpus: if busy { 4 } else { 0 },
        memory_bytes: 8 << 30,
        alloc_memory_bytes: 0,
        free_memory_bytes: None,
        gres: Vec::new(),
        gres_used: Vec::new(),
        reason: String::new(),
        reason_set_by: String::new(),
    }
}

/// Drained by us, as our drain leaves a node.
fn drained(mut n: Node) -> Node {
    n.state.flags = NodeFlags::DRAIN;
    n.reason = "slurmscale: capacity for Kubernetes".into();
    n
}

/// What a poller would publish at `taken`: `nodes` of `partition` (8 nodes of 4 CPUs,
/// those not listed not started), and pending whole-node jobs of these sizes.
fn snapshot(taken: SystemTime, partition: &str, nodes: Vec<Node>, jobs: &[u64]) -> ClusterSnapshot {
    let took = Duration::from_millis(5);
    let mut snap = ClusterSnapshot::new(CLUSTER, "fake://");
    snap.api_version = Some(ApiVersion::V0042);
    let partitions: Arc<[Arc<str>]> = Arc::from([Arc::from(partition)]);
    let pending = jobs
        .iter()
        .enumerate()
        .map(|(i, n)| PendingJob {
            id: i as u64 + 1,
            partitions: partitions.clone(),
            class: PendingClass::Schedulable,
            reason: Arc::from("Resources"),
            tasks: 1,
            throttled: 0,
            nodes: *n,
            cpus: 4 * n,
            gpus: 0,
            memory_bytes: 0,
            whole_node: true,
            constraint: Arc::from(""),
            excluded: Arc::from(""),
            submit_time: None,
            origin: slurmscale_exporter::model::origin::Origin::Batch,
            planned_start: None,
        })
        .collect();
    snap.jobs.succeed(
        taken,
        took,
        Some(Jobs {
            pending,
            ..Jobs::default()
        }),
    );
    snap.nodes.succeed(taken, took, Some(nodes));
    snap.partitions.succeed(
        taken,
        took,
        Some(vec![Partition {
            name: Arc::from(partition),
            state: "UP".into(),
            total_nodes: 8,
            total_cpus: 32,
            total_memory_bytes: Some(64 << 30),
            total_gpus: Some(0),
            max_nodes_per_job: None,
            node_list: format!("{partition}[1-8]"),
            never_suspends: false,
            node_sets: Default::default(),
        }]),
    );
    snap
}

/// `snap` with its partition's NodeSets as slurmrestd would say them.
fn with_node_sets(mut snap: ClusterSnapshot, sets: NodeSets) -> ClusterSnapshot {
    let mut partitions = snap.partitions.data.as_deref().cloned().unwrap_or_default();
    partitions[0].node_sets = sets;
    let at = snap
        .partitions
        .last_success
        .unwrap_or(SystemTime::UNIX_EPOCH);
    snap.partitions
        .succeed(at, Duration::ZERO, Some(partitions));
    snap
}

/// `snap` with these pending jobs (by index) asking `--constraint`s.
fn with_constraints(mut snap: ClusterSnapshot, constraints: &[(usize, &str)]) -> ClusterSnapshot {
    let mut jobs = snap.jobs.data.as_deref().cloned().unwrap_or_default();
    for (i, c) in constraints {
        jobs.pending[*i].constraint = Arc::from(*c);
    }
    let at = snap.jobs.last_success.unwrap_or(SystemTime::UNIX_EPOCH);
    snap.jobs.succeed(at, Duration::ZERO, Some(jobs));
    snap
}

/// slurm-operator 1.1's layout: the NodeSet has no partition of its own, its nodes join a
/// site's partition (here `Nodes=ALL`), and neither the NodeSet nor the autoscaler names it.
#[tokio::test]
async fn a_nodeset_without_its_own_partition_scales_for_the_partition_slurm_puts_it_in() {
    let rig = Rig::new(json!({}), 0);
    rig.at(5);
    rig.slurm(with_node_sets(
        snapshot(at(5), "all", vec![], &[2]),
        NodeSets::All,
    ));
    assert_eq!(scales(&rig.reconcile().await), [2]);
    // Where slurmrestd cannot say (v0.0.38), the NodeSet's own name is all there is to go by.
    rig.at(6);
    let old = snapshot(at(6), "all", vec![], &[3]);
    rig.slurm(with_node_sets(old, NodeSets::Unknown));
    let writes = rig.reconcile().await;
    assert!(
        scales(&writes).is_empty(),
        "no partition elastic: {writes:?}"
    );
}

/// Its nodes' features (the NodeSet's name in Slurm and its `--conf` Features=) decide which
/// jobs a NodeSet takes: one asking for another NodeSet's feature is not its demand.
#[tokio::test]
async fn a_nodeset_grows_only_for_jobs_whose_constraint_its_nodes_meet() {
    let rig = Rig::new(json!({}), 0);
    rig.fake.with(|w| {
        let features = vec![NODESET.to_string(), "fastscratch".to_string()];
        w.targets.get_mut(NODESET).unwrap().nodes.features = features;
    });
    rig.at(5);
    let snap = snapshot(at(5), NODESET, vec![], &[2, 3, 1]);
    rig.slurm(with_constraints(snap, &[(0, "fastscratch"), (1, "a100")]));
    // 2 nodes for the fastscratch job, 1 for the unconstrained one; the a100 job is another's.
    assert_eq!(scales(&rig.reconcile().await), [3]);
}

/// A NodeSet "accel" beside the target: its nodes have an a100 feature and this `weight`;
/// `named`: a site names the target's partition for it (else it competes nowhere).
fn sibling(weight: u64, named: bool) -> NodeSetView {
    NodeSetView {
        namespace: "slurm".into(),
        name: "slurm-worker-accel".into(),
        api_version: "slinky.slurm.net/v1beta1",
        replicas: Some(0),
        status: Default::default(),
        scaling_mode: None,
        named_partition: named.then(|| NODESET.into()),
        slurm_name: "accel".into(),
        features: vec!["accel".into(), "a100".into()],
        weight,
        cluster: None,
        controller: None,
        max_nodes: None,
        shape: Default::default(),
        template_shape: Default::default(),
    }
}

/// The target as a NodeSet of Weight 10 whose nodes register its name as their feature,
/// with `accel` beside it: the two compete for the jobs of the target's partition.
fn with_sibling(rig: &Rig, accel: NodeSetView) {
    rig.fake.with(|w| {
        let target = w.targets.get_mut(NODESET).unwrap();
        target.nodes.features = vec![NODESET.to_string()];
        target.nodes.weight = 10;
        w.nodesets = vec![accel];
    });
}

/// Two NodeSets share the partition: a job grows the one Slurm would place it on, so the
/// a100 job is the sibling's demand, not this autoscaler's.
#[tokio::test]
async fn a_job_another_nodeset_of_the_partition_grows_for_is_not_demand() {
    // The sibling's Weight: above this NodeSet's 10, then below it; and below it, but in no
    // partition Slurm lists it in or a site names for it: then it competes for nothing.
    for (weight, named, grows) in [(20, true, vec![2]), (5, true, vec![]), (5, false, vec![2])] {
        let rig = Rig::new(json!({}), 0);
        with_sibling(&rig, sibling(weight, named));
        rig.at(5);
        let snap = snapshot(at(5), NODESET, vec![], &[2, 3]);
        rig.slurm(with_constraints(snap, &[(1, "a100")]));
        // The a100 job is never this NodeSet's (the sibling's, or nobody's when the sibling
        // competes nowhere); the plain one goes to the lower Weight.
        assert_eq!(
            scales(&rig.reconcile().await),
            grows,
            "sibling {weight} {named}"
        );
        // The decision says what it left to the sibling.
        let decision = rig.status().last_decision.expect("a decision").message;
        let left = if !named {
            0
        } else if weight > 10 {
            1
        } else {
            2
        };
        assert_eq!(
            decision.contains(&format!("; {left} more grow other NodeSets")),
            left > 0,
            "{decision}"
        );
    }
}

/// Between NodeSets of one Weight, the site's priority decides: a sibling without an
/// autoscaler ranks 0, so this one takes the plain job once its priority is above that
/// (at 0 the sibling's name comes first).
#[tokio::test]
async fn at_equal_weight_the_autoscaler_of_higher_priority_grows() {
    for (priority, grows) in [(0, vec![]), (1, vec![2])] {
        let rig = Rig::new(json!({ "priority": priority }), 0);
        with_sibling(&rig, sibling(10, true));
        rig.at(5);
        rig.slurm(snapshot(at(5), NODESET, vec![], &[2]));
        assert_eq!(scales(&rig.reconcile().await), grows, "priority {priority}");
    }
}

/// The sibling Slurm prefers (lower Weight) is at its bound with its one node full: a plain
/// job grows this NodeSet, where it can start now; while the sibling's node is idle, the job
/// is the sibling's.
#[tokio::test]
async fn a_job_the_preferred_nodeset_has_no_room_for_now_grows_the_next() {
    for (sibling_busy, grows) in [(true, vec![1]), (false, vec![])] {
        let rig = Rig::new(json!({}), 0);
        let mut accel = sibling(5, true);
        accel.max_nodes = Some(1);
        with_sibling(&rig, accel);
        rig.at(5);
        let nodes = vec![node("accel-0", NODESET, sibling_busy)];
        rig.slurm(snapshot(at(5), NODESET, nodes, &[1]));
        assert_eq!(
            scales(&rig.reconcile().await),
            grows,
            "sibling busy: {sibling_busy}"
        );
    }
}

/// A job needing more nodes than the NodeSet Slurm prefers may have is split as Slurm
/// places it: the sibling (lower Weight) takes its bound, this NodeSet the rest; with no
/// bound known for the sibling, the whole job is the sibling's.
#[tokio::test]
async fn a_job_larger_than_the_preferred_nodeset_grows_the_next_for_the_rest() {
    for (bound, grows) in [(Some(2), vec![3]), (None, vec![])] {
        let rig = Rig::new(json!({}), 0);
        let mut accel = sibling(5, true);
        accel.max_nodes = bound;
        with_sibling(&rig, accel);
        rig.at(5);
        rig.slurm(snapshot(at(5), NODESET, vec![], &[5]));
        assert_eq!(scales(&rig.reconcile().await), grows, "{bound:?}");
        let decision = rig.status().last_decision.expect("a decision").message;
        assert_eq!(
            decision.contains("1 of them span other NodeSets too"),
            bound.is_some(),
            "{decision}"
        );
    }
}

/// Until the NodeSet watch has listed, which NodeSet a job of the partition grows is not
/// known: the autoscaler holds (no scale, no node records made on a guess), and goes on once
/// the list is there.
#[tokio::test]
async fn nothing_is_decided_on_a_partial_list_of_nodesets() {
    let rig = Rig::new(json!({}), 0);
    rig.fake.with(|w| {
        w.targets.get_mut(NODESET).unwrap().nodes.features = vec![NODESET.to_string()];
        w.nodesets_unlisted = true;
    });
    rig.at(5);
    rig.slurm(snapshot(at(5), NODESET, vec![], &[2]));
    let writes = rig.reconcile().await;
    assert!(scales(&writes).is_empty(), "{writes:?}");
    let frozen = rig.condition_of("Frozen").unwrap();
    assert_eq!(frozen.status, "True");
    assert!(
        frozen.message.contains("NodeSets are not listed yet"),
        "{}",
        frozen.message
    );
    rig.fake.with(|w| w.nodesets_unlisted = false);
    rig.at(6);
    rig.slurm(snapshot(at(6), NODESET, vec![], &[2]));
    assert_eq!(scales(&rig.reconcile().await), [2]);
}

/// A job no NodeSet of the partition can run (here: a feature none has) is no demand; it is
/// said once in a Warning Event, again only when their number changes, and the Limited
/// condition says what it is.
#[tokio::test]
async fn a_job_no_nodeset_can_run_is_said_once_and_not_chased() {
    let rig = Rig::new(json!({}), 0);
    rig.fake.with(|w| {
        w.targets.get_mut(NODESET).unwrap().nodes.features = vec![NODESET.to_string()];
    });
    let said = |writes: &[Recorded]| {
        events(writes)
            .iter()
            .filter(|(reason, _)| *reason == "NoNodeSetFits")
            .map(|(_, note)| note.to_string())
            .collect::<Vec<_>>()
    };
    rig.at(5);
    let snap = snapshot(at(5), NODESET, vec![], &[2, 1]);
    rig.slurm(with_constraints(snap, &[(0, "h100")]));
    let writes = rig.reconcile().await;
    assert_eq!(scales(&writes), [1], "the h100 job is nobody's demand");
    let notes = said(&writes);
    assert_eq!(notes.len(), 1, "{writes:?}");
    assert!(
        notes[0].starts_with("1 pending job(s) of its partitions fit no NodeSet"),
        "{notes:?}"
    );
    let limited = rig.condition_of("Limited").unwrap();
    assert_eq!(limited.status, "True");
    assert!(
        limited
            .message
            .contains("1 pending job(s) fit no NodeSet of its partitions"),
        "{}",
        limited.message
    );
    // The same job at the next poll: not said again; a second one: said.
    rig.at(6);
    let snap = snapshot(at(6), NODESET, vec![], &[2, 1]);
    rig.slurm(with_constraints(snap, &[(0, "h100")]));
    assert!(said(&rig.reconcile().await).is_empty());
    rig.at(7);
    let snap = snapshot(at(7), NODESET, vec![], &[2, 1, 1]);
    rig.slurm(with_constraints(snap, &[(0, "h100"), (2, "h100")]));
    assert_eq!(said(&rig.reconcile().await).len(), 1);
}

#[tokio::test]
async fn demand_scales_up_at_once_and_the_status_says_when_by_the_clock() {
    let rig = Rig::new(json!({}), 0);
    rig.at(5);
    rig.slurm(snapshot(at(5), NODESET, vec![], &[1, 2]));
    let writes = rig.reconcile().await;
    assert_eq!(scales(&writes), [3]);
    assert_eq!(events(&writes)[0].0, "ScaledUp");
    let status = rig.status();
    assert_eq!(
        (status.current_replicas, status.desired_replicas),
        (Some(3), Some(3))
    );
    let decision = status.last_decision.expect("a decision");
    assert_eq!(decision.reason, "ScaleUp");
    // Every timestamp is the injected clock's, none the wall clock's.
    let t = super::report::time(at(5));
    assert_eq!(decision.time, t);
    assert_eq!(status.last_scale_time, Some(t.clone()));
    assert!(
        status
            .conditions
            .iter()
            .all(|c| c.last_transition_time == t)
    );
    let m = rig.on.controller.metrics.lock().unwrap().clone();
    let row = &m.rows["slurm/elastic"];
    assert_eq!(
        (row.cluster.as_str(), row.scale_ups, row.current),
        (CLUSTER, 1, 3)
    );
    assert_eq!(row.last_scale_up, Some(at(5)));
}

#[tokio::test]
async fn stale_slurm_data_freezes_everything_until_it_is_fresh() {
    let rig = Rig::new(
        json!({"idleTimeoutSeconds": 0, "scaleDown": {"stabilizationWindowSeconds": 0}}),
        3,
    );
    rig.at(100);
    // Nothing to do, but the data is 60 s old: nothing may go down.
    rig.slurm(snapshot(at(40), NODESET, vec![], &[]));
    let first = rig.reconcile().await;
    rig.at(102);
    let second = rig.reconcile().await;
    assert!(scales(&first).is_empty() && scales(&second).is_empty());
    assert_eq!(
        events(&first).iter().map(|e| e.0).collect::<Vec<_>>(),
        ["Frozen"]
    );
    assert!(events(&second).is_empty(), "the freeze is said once");
    assert_eq!(
        rig.condition("Frozen"),
        Some(("True".into(), "SlurmDataUntrusted".into()))
    );
    assert!(rig.on.controller.metrics.lock().unwrap().rows["slurm/elastic"].frozen);
    // Fresh data: thawed, and the idle NodeSet goes down.
    rig.at(104);
    rig.slurm(snapshot(at(104), NODESET, vec![], &[]));
    let writes = rig.reconcile().await;
    assert_eq!(scales(&writes), [0]);
    let said: Vec<&str> = events(&writes).iter().map(|e| e.0).collect();
    assert_eq!(said, ["ScaledDown", "Unfrozen"]);
    assert_eq!(
        rig.condition("Frozen"),
        Some(("False".into(), "SlurmDataFresh".into()))
    );
}

#[tokio::test]
async fn a_daemonset_nodeset_is_refused_once_and_never_scaled() {
    let rig = Rig::new(json!({}), 2);
    rig.fake.with(|w| {
        w.targets.get_mut(NODESET).unwrap().scaling_mode = Some("DaemonSet".into());
    });
    rig.slurm(snapshot(at(0), NODESET, vec![], &[4]));
    let first = rig.reconcile().await;
    let second = rig.reconcile().await;
    assert!(scales(&first).is_empty() && scales(&second).is_empty());
    assert_eq!(
        events(&first).iter().map(|e| e.0).collect::<Vec<_>>(),
        ["DaemonSetScalingMode"]
    );
    assert!(events(&second).is_empty());
    assert_eq!(
        rig.condition("Ready"),
        Some(("False".into(), "DaemonSetScalingMode".into()))
    );
    assert_eq!(rig.status().current_replicas, Some(2));
}

#[tokio::test]
async fn a_dry_run_says_once_what_it_would_do_and_changes_nothing() {
    let rig = Rig::new(json!({"dryRun": true}), 0);
    rig.slurm(snapshot(at(0), NODESET, vec![], &[2]));
    let first = rig.reconcile().await;
    rig.at(2);
    rig.slurm(snapshot(at(2), NODESET, vec![], &[2]));
    let second = rig.reconcile().await;
    assert!(scales(&first).is_empty() && scales(&second).is_empty());
    assert_eq!(rig.replicas(), 0);
    let said = events(&first);
    assert_eq!(said.len(), 1);
    assert_eq!(said[0].0, "DryRun");
    assert!(said[0].1.starts_with("would set 0 → 2"), "{}", said[0].1);
    assert!(
        events(&second).is_empty(),
        "the same intention is said once"
    );
    let status = rig.status();
    assert_eq!(
        (status.current_replicas, status.desired_replicas),
        (Some(0), Some(2))
    );
}

#[tokio::test]
async fn a_concurrent_change_is_read_again_and_planned_again() {
    let rig = Rig::new(json!({}), 0);
    // Between our read and our patch someone sets the NodeSet to 1: our patch meets a 409.
    rig.fake.with(|w| w.races.push_back(1));
    rig.slurm(snapshot(at(0), NODESET, vec![], &[3]));
    let writes = rig.reconcile().await;
    assert_eq!(scales(&writes), [3], "planned again from 1, still 3");
    assert!(
        events(&writes)[0].1.starts_with("scaling up 1 → 3"),
        "{:?}",
        events(&writes)
    );
    assert_eq!(rig.replicas(), 3);
    assert!(rig.on.controller.metrics.lock().unwrap().errors.is_empty());
}

#[tokio::test]
async fn a_missing_target_is_reported_once_and_retried() {
    let rig = Rig::new(json!({}), 0);
    rig.fake.with(|w| w.targets.clear());
    rig.slurm(snapshot(at(0), NODESET, vec![], &[]));
    let first = rig.reconcile().await;
    let second = rig.reconcile().await;
    assert_eq!(
        events(&first).iter().map(|e| e.0).collect::<Vec<_>>(),
        ["ReconcileFailed"]
    );
    assert!(events(&second).is_empty());
    assert_eq!(
        rig.condition("Ready"),
        Some(("False".into(), "TargetNotFound".into()))
    );
    assert_eq!(
        rig.on.controller.metrics.lock().unwrap().errors["not_found"],
        2
    );
}

// The colocated pool: k1–k4 hold slurmd pods of NODESET for s1–s4 of partition "cpu".

fn colocated() -> Value {
    json!({
        "slurm": {"partitions": ["cpu"]},
        "colocation": {"pool": "pool", "minSlurmNodes": 1, "cooldownSeconds": 60},
    })
}

fn ledger() -> KubeSnapshot {
    let mut k = KubeSnapshot::default();
    let (mut ledger, mut capacity) = (Vec::new(), BTreeMap::new());
    for i in 1..=4 {
        let name = format!("k{i}");
        ledger.push(LedgerNode {
            name: name.clone(),
            alias: format!("s{i}"),
            cluster: "pool".into(),
            allocated: BTreeMap::new(),
            pending_checks: 0,
        });
        capacity.insert(
            name,
            Capacity {
                resources: BTreeMap::from([
                    ("cpu".to_string(), 4.0),
                    ("memory".to_string(), 8.0 * (1u64 << 30) as f64),
                ]),
                ..Default::default()
            },
        );
    }
    k.ledger = Arc::new(ledger);
    k.capacity = Arc::new(capacity);
    for r in ["genericnodes", "nodes"] {
        let healthy = WatchHealth {
            probed: true,
            served: true,
            synced: true,
            version: None,
            last_error: None,
        };
        k.watches.insert(r, healthy);
    }
    k
}

fn pool_rig(dry_run: bool) -> Rig {
    let mut spec = colocated();
    spec["dryRun"] = json!(dry_run);
    let rig = Rig::new(spec, 4);
    rig.fake.with(|w| {
        w.ledger = Some(ledger());
        w.pods.insert(
            SELECTOR.into(),
            (1..=4)
                .map(|i| (format!("k{i}"), NodeSetPod::Serving))
                .collect(),
        );
        w.unschedulable.push(PendingPod {
            name: "web/api-0".into(),
            cpu: 3.0,
            memory: 1.0,
            gpu: 0.0,
            placement: Placement::default(),
        });
    });
    rig
}

/// s1 busy, the others idle; `s2` as given.
fn pool_nodes(s2: Node) -> Vec<Node> {
    vec![
        node("s1", "cpu", true),
        s2,
        node("s3", "cpu", false),
        node("s4", "cpu", false),
    ]
}

#[tokio::test]
async fn a_pod_wanting_room_drains_a_node_then_its_pod_goes_first_and_replicas_drop() {
    let rig = pool_rig(false);
    rig.slurm(snapshot(
        at(0),
        "cpu",
        pool_nodes(node("s2", "cpu", false)),
        &[],
    ));
    let writes = rig.reconcile().await;
    assert_eq!(
        writes[0],
        Recorded::Drain {
            node: "s2".into(),
            reason: "slurmscale: capacity for Kubernetes".into()
        }
    );
    assert_eq!(
        events(&writes).iter().map(|e| e.0).collect::<Vec<_>>(),
        ["Drain"]
    );
    assert!(
        scales(&writes).is_empty(),
        "replicas drop once the node is empty"
    );
    let status = rig.status();
    assert_eq!(
        status.last_decision.map(|d| d.reason).as_deref(),
        Some("Rebalance")
    );
    assert_eq!(
        status.colocation.map(|c| c.draining),
        Some(vec!["s2".to_string()])
    );
    assert_eq!(
        rig.condition("Reclaiming"),
        Some(("True".into(), "WaitingForJobs".into()))
    );

    // Slurm shows the drain; the empty node is handed over: its pod marked first, then
    // replicas lowered so slurm-operator removes exactly that pod — a reconcile later, once
    // the mark has had time to reach the operator's pod cache.
    rig.at(2);
    let drained_s2 = || {
        snapshot(
            at(2),
            "cpu",
            pool_nodes(drained(node("s2", "cpu", false))),
            &[],
        )
    };
    rig.slurm(drained_s2());
    let writes = rig.reconcile().await;
    assert_eq!(
        writes[0],
        Recorded::MarkPodsOn {
            nodes: vec!["k2".into()]
        }
    );
    assert!(scales(&writes).is_empty(), "not with the mark: {writes:?}");
    let order: Vec<&str> = events(&writes).iter().map(|e| e.0).collect();
    assert_eq!(order, ["Release"]);
    assert!(
        rig.fake.with(|w| w.pods[SELECTOR]["k2"]) == NodeSetPod::Marked,
        "k2's pod is marked to go"
    );
    assert_eq!(
        rig.on.controller.next_revisit(),
        Some(at(4)),
        "the controller asks to look again once the mark has settled"
    );
    // At once again (our own status write wakes the loop): still too soon, nothing new.
    assert!(
        rig.reconcile().await.is_empty(),
        "nothing before the mark settles"
    );
    rig.at(4);
    rig.slurm(drained_s2());
    let writes = rig.reconcile().await;
    assert_eq!(scales(&writes), [3]);
    let order: Vec<&str> = events(&writes).iter().map(|e| e.0).collect();
    assert_eq!(order, ["ScaledDown"], "the mark is not made nor said again");
    let pool = |family, owner| policy_sample(&rig, family, owner);
    assert_eq!(
        (
            pool("slurmscale_colocation_pool_nodes", None),
            pool("slurmscale_colocation_nodes", Some(("owner", "slurm"))),
            pool(
                "slurmscale_colocation_need_nodes",
                Some(("owner", "kubernetes"))
            )
        ),
        (4.0, 4.0, 1.0)
    );
}

/// A sample of the `elastic` autoscaler's policy families, as its room renders them: the one
/// with label `with` (or the only one).
fn policy_sample(rig: &Rig, family: &str, with: Option<(&str, &str)>) -> f64 {
    let m = rig.on.controller.metrics.lock().unwrap().clone();
    let row = &m.rows["slurm/elastic"];
    let mut out = slurmscale_exporter::metrics::Out::new();
    row.policy
        .as_ref()
        .expect("a policy row")
        .collect(&mut out, row.labels());
    let samples = out.samples(family);
    samples
        .iter()
        .find(|(labels, _)| {
            with.is_none_or(|(k, v)| labels.iter().any(|(lk, lv)| lk == k && lv == v))
        })
        .unwrap_or_else(|| panic!("{family} {with:?} in {samples:?}"))
        .1
}

#[tokio::test]
async fn an_autoscaler_that_stops_sharing_its_pool_drops_the_pool_s_status_and_metrics() {
    let mut rig = pool_rig(false);
    let slurm = |s| snapshot(at(s), "cpu", pool_nodes(node("s2", "cpu", false)), &[]);
    rig.slurm(slurm(0));
    rig.reconcile().await;
    let pool_row = |rig: &Rig| {
        let m = rig.on.controller.metrics.lock().unwrap();
        m.rows["slurm/elastic"].policy.clone()
    };
    assert!(rig.status().colocation.is_some() && pool_row(&rig).is_some());
    assert!(rig.condition("Reclaiming").is_some());

    rig.on.apply(autoscaler(json!({}), Value::Null));
    rig.at(2);
    rig.slurm(slurm(2));
    rig.reconcile().await;
    let status = rig.status();
    assert_eq!(status.colocation, None, "{status:?}");
    assert!(pool_row(&rig).is_none(), "the pool's metrics row is gone");
    assert_eq!(rig.condition("Reclaiming"), None);
}

#[tokio::test]
async fn capacity_stays_where_it_went_for_the_cooldown() {
    let rig = pool_rig(false);
    rig.slurm(snapshot(
        at(0),
        "cpu",
        pool_nodes(node("s2", "cpu", false)),
        &[],
    ));
    assert!(matches!(rig.reconcile().await[0], Recorded::Drain { .. }));
    // Kubernetes no longer needs it, but the drain is 30 s old: it stays drained.
    rig.fake.with(|w| w.unschedulable.clear());
    rig.at(30);
    rig.slurm(snapshot(
        at(30),
        "cpu",
        pool_nodes(drained(node("s2", "cpu", true))),
        &[],
    ));
    let writes = rig.reconcile().await;
    assert!(
        !writes.iter().any(|w| matches!(w, Recorded::Resume { .. })),
        "{writes:?}"
    );
    let plan = rig
        .status()
        .colocation
        .map(|c| c.last_plan)
        .unwrap_or_default();
    assert!(plan[0].contains("less than 60s ago"), "{plan:?}");
    // Once the cooldown is over, our drain is lifted.
    rig.at(61);
    rig.slurm(snapshot(
        at(61),
        "cpu",
        pool_nodes(drained(node("s2", "cpu", true))),
        &[],
    ));
    let writes = rig.reconcile().await;
    assert_eq!(writes[0], Recorded::Resume { node: "s2".into() });
    assert_eq!(events(&writes)[0].0, "Resume");
}

#[tokio::test]
async fn a_pool_on_stale_data_moves_nothing() {
    let rig = pool_rig(false);
    rig.at(60);
    rig.slurm(snapshot(
        at(0),
        "cpu",
        pool_nodes(node("s2", "cpu", false)),
        &[],
    ));
    let writes = rig.reconcile().await;
    assert_eq!(
        events(&writes).iter().map(|e| e.0).collect::<Vec<_>>(),
        ["Frozen"]
    );
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert_eq!(
        rig.condition("Frozen"),
        Some(("True".into(), "DataUntrusted".into()))
    );
    // And a ledger nobody can read freezes it too, with fresh Slurm data.
    rig.fake
        .with(|w| w.ledger.as_mut().map(|l| l.watches.clear()));
    rig.slurm(snapshot(
        at(60),
        "cpu",
        pool_nodes(node("s2", "cpu", false)),
        &[],
    ));
    let writes = rig.reconcile().await;
    assert!(writes.is_empty(), "{writes:?}");
    let plan = rig
        .status()
        .colocation
        .map(|c| c.last_plan)
        .unwrap_or_default();
    assert!(plan[0].contains("ledger cannot be trusted"), "{plan:?}");
}

#[tokio::test]
async fn a_pool_in_dry_run_says_what_it_would_drain() {
    let rig = pool_rig(true);
    rig.slurm(snapshot(
        at(0),
        "cpu",
        pool_nodes(node("s2", "cpu", false)),
        &[],
    ));
    let writes = rig.reconcile().await;
    let said = events(&writes);
    assert_eq!(writes.len(), 1, "only an Event: {writes:?}");
    assert_eq!(said[0].0, "DryRun");
    assert!(said[0].1.starts_with("would: draining s2"), "{}", said[0].1);
    assert!(rig.reconcile().await.is_empty(), "said once");
}

/// A mark the plan stops asking for (the pod that wanted the room went away before the
/// scale-in) is taken back, or that pod would go first at a later scale-in whatever its node
/// runs by then; when the room is wanted again, the pod is marked again and the scale-in
/// waits for that mark, not the old one. A mark a scale-in spent is not taken back.
#[tokio::test]
async fn a_release_given_up_before_its_scale_in_takes_its_mark_back() {
    let rig = pool_rig(false);
    let drained_s2 = |t| {
        let nodes = pool_nodes(drained(node("s2", "cpu", false)));
        snapshot(at(t), "cpu", nodes, &[])
    };
    let marks = |writes: &[Recorded]| {
        (writes.iter())
            .filter(|w| matches!(w, Recorded::MarkPodsOn { .. }))
            .count()
    };
    rig.slurm(drained_s2(0));
    let writes = rig.reconcile().await;
    assert_eq!(
        (marks(&writes), scales(&writes).len()),
        (1, 0),
        "{writes:?}"
    );
    let pending = rig.fake.with(|w| std::mem::take(&mut w.unschedulable));
    rig.at(1);
    rig.slurm(drained_s2(1));
    let writes = rig.reconcile().await;
    assert_eq!(
        (marks(&writes), scales(&writes).len()),
        (0, 0),
        "{writes:?}"
    );
    assert!(
        writes.contains(&Recorded::UnmarkPodsOn {
            nodes: vec!["k2".into()]
        }),
        "{writes:?}"
    );
    assert!(rig.fake.with(|w| w.pods[SELECTOR]["k2"]) == NodeSetPod::Serving);
    assert!(events(&writes).iter().any(|e| e.0 == "Unmarked"));
    // Slurm took s2 back meanwhile; the pod returns after the cooldown.
    assert!(
        writes.contains(&Recorded::Resume { node: "s2".into() }),
        "{writes:?}"
    );
    rig.fake.with(|w| w.unschedulable = pending);
    rig.at(70);
    rig.slurm(snapshot(
        at(70),
        "cpu",
        pool_nodes(node("s2", "cpu", false)),
        &[],
    ));
    assert_eq!(marks(&rig.reconcile().await), 0, "drained first");
    rig.at(72);
    rig.slurm(drained_s2(72));
    let writes = rig.reconcile().await;
    assert_eq!(
        (marks(&writes), scales(&writes).len()),
        (1, 0),
        "{writes:?}"
    );
    rig.at(74);
    rig.slurm(drained_s2(74));
    assert_eq!(scales(&rig.reconcile().await), [3]);
    // The pod goes; the plan no longer asks for its mark, which the scale-in spent.
    rig.fake
        .with(|w| w.pods.get_mut(SELECTOR).unwrap().remove("k2"));
    rig.at(75);
    rig.slurm(drained_s2(75));
    let writes = rig.reconcile().await;
    assert!(
        !writes
            .iter()
            .any(|w| matches!(w, Recorded::UnmarkPodsOn { .. })),
        "{writes:?}"
    );
}

/// NodeSet pods kube-scheduler found no node for are said in the plan and counted: Slurm's
/// growth has not reached slurmd, and the operator cannot tell why from Slurm alone.
#[tokio::test]
async fn nodeset_pods_no_node_has_room_for_are_said_and_counted() {
    let rig = pool_rig(false);
    rig.fake.with(|w| {
        w.unscheduled.insert(SELECTOR.into(), 2);
    });
    rig.slurm(snapshot(
        at(0),
        "cpu",
        pool_nodes(node("s2", "cpu", false)),
        &[],
    ));
    rig.reconcile().await;
    let plan = rig.status().colocation.expect("pool status").last_plan;
    assert!(
        plan.iter()
            .any(|s| s.starts_with("2 NodeSet pod(s) found no node with room")),
        "{plan:?}"
    );
    let unschedulable = policy_sample(&rig, "slurmscale_colocation_unschedulable_pods", None);
    assert_eq!(unschedulable, 2.0);
}

#[tokio::test]
async fn a_pool_whose_scale_changed_meanwhile_plans_its_release_again() {
    let rig = pool_rig(false);
    rig.slurm(snapshot(
        at(0),
        "cpu",
        pool_nodes(drained(node("s2", "cpu", false))),
        &[],
    ));
    let writes = rig.reconcile().await;
    assert_eq!(
        writes[0],
        Recorded::MarkPodsOn {
            nodes: vec!["k2".into()]
        }
    );
    // Someone scaled the NodeSet to 5 between our read and our patch, a reconcile later.
    rig.fake.with(|w| w.races.push_back(5));
    rig.at(2);
    let writes = [writes, rig.reconcile().await].concat();
    // The fifth replica has no pod on a pool node: lowering to 4 would remove that pending
    // pod (the operator removes unbound pods first) and keep k2's. One fewer than the pods
    // that are bound is what frees k2.
    assert_eq!(scales(&writes), [3], "one pod fewer than the 4 bound");
    let marks = writes
        .iter()
        .filter(|w| matches!(w, Recorded::MarkPodsOn { .. }))
        .count();
    assert_eq!(
        marks, 1,
        "observed and planned again, not marked again: {writes:?}"
    );
    assert_eq!(rig.replicas(), 3);
    assert_eq!(rig.status().current_replicas, Some(3));
}

// --- Slurm-planned mode: the NodeSet follows slurmctld's power requests.

/// A slurm-planned autoscaler of `NODESET` (4 ordinals) whose pods run slurmd `-b`.
fn planned_rig(extra: Value, replicas: u64) -> Rig {
    let mut spec = json!({"mode": "SlurmPlanned", "maxReplicas": 4});
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    planned(Rig::new(spec, replicas))
}

/// `rig`'s target as a slurm-planned NodeSet's: its pods run slurmd `-b`, 4 CPUs.
fn planned(rig: Rig) -> Rig {
    rig.fake.with(|w| {
        let t = w.targets.get_mut(NODESET).unwrap();
        t.nodes.slurmd_args = vec!["-b".into()];
        t.nodes.template_shape.cpus = Some(4);
    });
    rig
}

/// A record `elastic-<i>` as `/nodes` shows it: its state words and reason.
fn record(i: usize, words: &str, reason: &str) -> Node {
    let mut n = node(&format!("{NODESET}-{i}"), NODESET, false);
    n.state = NodeState::from_words(words.split('+'));
    n.alloc_cpus = if n.busy() { 4 } else { 0 };
    n.reason = reason.into();
    n
}

const OFF: &str = "IDLE+CLOUD+POWERED_DOWN";

/// The four records with these states (index = ordinal), listed in the partition.
fn planned_snapshot(taken: SystemTime, states: [&str; 4]) -> ClusterSnapshot {
    let nodes = states
        .iter()
        .enumerate()
        .map(|(i, s)| match s.split_once(':') {
            Some((words, reason)) => record(i, words, reason),
            None => record(i, s, ""),
        })
        .collect();
    let mut snap = snapshot(taken, NODESET, nodes, &[]);
    let mut partitions = snap.partitions.data.as_deref().unwrap().to_vec();
    partitions[0].node_list = format!("{NODESET}-[0-3]");
    snap.partitions
        .succeed(taken, Duration::from_millis(5), Some(partitions));
    snap
}

fn set_pods(rig: &Rig, pods: &[(usize, crate::pool::PodState)]) {
    rig.fake.with(|w| {
        w.named_pods.insert(
            SELECTOR.into(),
            std::sync::Arc::new(
                pods.iter()
                    .map(|(i, p)| (format!("{NODESET}-{i}"), *p))
                    .collect(),
            ),
        );
    });
}

#[tokio::test]
async fn slurm_planned_keeps_cloud_records_and_follows_exactly_the_nodes_slurmctld_powers() {
    use crate::pool::PodState::Ready;
    let rig = planned_rig(json!({}), 0);
    // No records yet: all four are asked for, CLOUD, weighted by ordinal; nothing scales.
    rig.slurm(snapshot(at(0), NODESET, vec![], &[2]));
    let writes = rig.reconcile().await;
    let made: Vec<&str> = writes
        .iter()
        .filter_map(|w| match w {
            Recorded::Create { conf } => Some(conf.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(made.len(), 4, "{writes:?}");
    assert_eq!(
        made[3],
        "NodeName=elastic-3 Feature=elastic CPUs=4 RealMemory=8192 Weight=4 State=CLOUD"
    );
    assert!(scales(&writes).is_empty(), "demand alone scales nothing");
    // slurmctld allocates ordinals 0 and 1 to a job and powers them up.
    rig.at(2);
    let up = "MIXED+CLOUD+NOT_RESPONDING+POWERING_UP";
    rig.slurm(planned_snapshot(at(2), [up, up, OFF, OFF]));
    let writes = rig.reconcile().await;
    assert_eq!(scales(&writes), [2]);
    assert_eq!(rig.status().last_decision.unwrap().reason, "ScaleUp");
    // Their pods run the job; the NodeSet holds.
    set_pods(&rig, &[(0, Ready), (1, Ready)]);
    rig.at(4);
    rig.slurm(planned_snapshot(
        at(4),
        ["MIXED+CLOUD", "MIXED+CLOUD", OFF, OFF],
    ));
    assert!(scales(&rig.reconcile().await).is_empty());
    // Ordinal 1 idles past SuspendTime: exactly its pod goes first, replicas drop by one.
    // Ordinal 0 is busy and stays.
    rig.at(6);
    let going = "IDLE+CLOUD+POWERING_DOWN";
    rig.slurm(planned_snapshot(at(6), ["MIXED+CLOUD", going, OFF, OFF]));
    let mut writes = rig.reconcile().await;
    rig.at(8);
    writes.extend(rig.reconcile().await);
    let retired: Vec<&Recorded> = writes
        .iter()
        .filter(|w| matches!(w, Recorded::MarkPods { .. }))
        .collect();
    assert_eq!(
        retired,
        [&Recorded::MarkPods {
            pods: vec!["elastic-1".into()]
        }]
    );
    let order: Vec<usize> = writes
        .iter()
        .enumerate()
        .filter(|(_, w)| matches!(w, Recorded::MarkPods { .. } | Recorded::Scale { .. }))
        .map(|(i, _)| i)
        .collect();
    assert!(
        matches!(writes[order[1]], Recorded::Scale { replicas: 1, .. }),
        "the pod is marked before replicas drop: {writes:?}"
    );
    // The operator drained it and its preStop set it DOWN; once the pod is gone the record
    // is resumed, so slurmctld plans on it again. A record an administrator took down is
    // left alone.
    set_pods(&rig, &[(0, Ready)]);
    rig.at(9);
    let left = "DOWN+CLOUD+DRAIN+POWERED_DOWN:Pod is terminating";
    let theirs = "DOWN+CLOUD+POWERED_DOWN:bad DIMM";
    rig.slurm(planned_snapshot(at(9), ["MIXED+CLOUD", left, theirs, OFF]));
    let writes = rig.reconcile().await;
    assert!(scales(&writes).is_empty());
    assert!(
        writes.contains(&Recorded::Resume {
            node: "elastic-1".into()
        }) && !writes.iter().any(|w| *w
            == Recorded::Resume {
                node: "elastic-2".into()
            }),
        "{writes:?}"
    );
    let said = events(&writes);
    assert!(
        said.iter()
            .any(|(r, n)| *r == "Resume" && n.contains("its pod is gone")),
        "{said:?}"
    );
    // A look before slurmrestd confirmed the nodes again cannot show the RESUME: it is not
    // sent (nor said) twice. Nodes read after it that still show the record left drained
    // (the RESUME did not take): it is resumed again.
    let resumes = |writes: &[Recorded]| {
        writes
            .iter()
            .filter(|w| matches!(w, Recorded::Resume { .. }))
            .count()
    };
    rig.at(10);
    let writes = rig.reconcile().await;
    assert_eq!(resumes(&writes), 0, "{writes:?}");
    assert!(events(&writes).is_empty(), "{writes:?}");
    rig.at(11);
    rig.slurm(planned_snapshot(at(11), ["MIXED+CLOUD", left, theirs, OFF]));
    assert_eq!(resumes(&rig.reconcile().await), 1);
}

/// The four records with these states at `t`, and one pending job slurmctld plans to start
/// at `start` on the records of `ordinals`.
fn planned_job_snapshot(
    t: u64,
    states: [&str; 4],
    start: u64,
    ordinals: std::ops::Range<usize>,
) -> ClusterSnapshot {
    let mut snap = planned_snapshot(at(t), states);
    let pending = snapshot(at(t), NODESET, vec![], &[ordinals.len() as u64]);
    let mut jobs = (*pending.jobs.data.unwrap()).clone();
    jobs.pending[0].planned_start = Some(slurmscale_exporter::model::PlannedStart {
        start: at(start)
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64,
        nodes: ordinals
            .map(|i| Arc::from(format!("{NODESET}-{i}")))
            .collect(),
    });
    snap.jobs
        .succeed(at(t), Duration::from_millis(5), Some(jobs));
    snap
}

/// Booting just in time for slurmctld's plan: a 4-node job planned to start at 600 s on two
/// busy records and two powered-down ones. With a boot time of 60 s and a margin of 30 s the
/// two powered-down records are powered up at 510 s, not at submit; slurmctld's own power-up
/// request then scales the NodeSet as for any allocation. The power-up is said, counted,
/// sent once, and the controller asks to look again when the next one is due.
#[tokio::test]
async fn slurm_planned_powers_up_planned_records_one_boot_ahead_of_their_start() {
    use crate::pool::PodState::Ready;
    let spec =
        json!({"bootTimeSeconds": 60, "plannedJobs": {"boot": "JustInTime", "marginSeconds": 30}});
    let rig = planned_rig(spec, 2);
    set_pods(&rig, &[(0, Ready), (1, Ready)]);
    let look = |t: u64, states: [&str; 4]| rig.slurm(planned_job_snapshot(t, states, 600, 0..4));
    let busy = "MIXED+CLOUD";
    let power_ups = |writes: &[Recorded]| -> Vec<String> {
        writes
            .iter()
            .filter_map(|w| match w {
                Recorded::PowerUp { node } => Some(node.clone()),
                _ => None,
            })
            .collect()
    };
    // At submit, and until one lead (90 s) before the start: nothing is powered up.
    rig.at(100);
    look(100, [busy, busy, OFF, OFF]);
    let writes = rig.reconcile().await;
    assert!(power_ups(&writes).is_empty(), "{writes:?}");
    assert!(scales(&writes).is_empty(), "{writes:?}");
    assert_eq!(
        rig.on.controller.next_revisit(),
        Some(at(510)),
        "looks again when due"
    );
    rig.at(509);
    look(509, [busy, busy, OFF, OFF]);
    assert!(power_ups(&rig.reconcile().await).is_empty());
    // Due: the two powered-down records, not the busy ones; said in an Event.
    rig.at(510);
    look(510, [busy, busy, OFF, OFF]);
    let writes = rig.reconcile().await;
    assert_eq!(power_ups(&writes), ["elastic-2", "elastic-3"], "{writes:?}");
    assert!(
        scales(&writes).is_empty(),
        "slurmctld asks for the pods: {writes:?}"
    );
    let said = events(&writes);
    assert!(
        said.iter().any(|(r, n)| *r == "PowerUp"
            && n.contains("elastic-2, elastic-3")
            && n.contains("job 1 (slurmctld plans its start in 90 s)")),
        "{said:?}"
    );
    // Nodes not read again yet: not sent twice.
    rig.at(511);
    assert!(power_ups(&rig.reconcile().await).is_empty());
    // slurmctld asks for them: the NodeSet grows as for any power-up.
    rig.at(512);
    let up = "IDLE+CLOUD+NOT_RESPONDING+POWERING_UP";
    look(512, [busy, busy, up, up]);
    let writes = rig.reconcile().await;
    assert!(power_ups(&writes).is_empty(), "{writes:?}");
    assert_eq!(scales(&writes), [4]);
    let text = {
        let m = rig.on.controller.metrics.lock().unwrap();
        let (_, family) = (crate::metrics::FAMILIES.iter())
            .find(|(n, _)| *n == "policy")
            .unwrap();
        crate::metrics::fixtures::render_of(*family, &m)
    };
    assert!(
        text.lines().any(
            |l| l.starts_with("slurmscale_slurm_planned_early_power_ups_total{")
                && l.ends_with("} 2")
        ),
        "{text}"
    );
}

/// Without `plannedJobs.boot: JustInTime`, a planned record is left for slurmctld to power
/// up when it starts the job (the default), and no plan is read.
#[tokio::test]
async fn slurm_planned_powers_up_nothing_ahead_by_default() {
    let rig = planned_rig(json!({"bootTimeSeconds": 60}), 0);
    rig.at(590);
    rig.slurm(planned_job_snapshot(590, [OFF; 4], 600, 0..1));
    let writes = rig.reconcile().await;
    assert!(
        !writes.iter().any(|w| matches!(w, Recorded::PowerUp { .. })),
        "{writes:?}"
    );
}

/// Slurm 24.11.5 allocates no CLOUD record created after a dynamic node was deleted, and
/// 26.05.5 powers none up when it started without a node to save power on, until slurmctld
/// reloads: once the records it made are there and none is powering up, the autoscaler has
/// slurmctld reconfigure, once. Not on 22.05 (no REST reconfigure, and not needed).
#[tokio::test]
async fn slurm_planned_has_slurmctld_reload_once_after_making_records() {
    let up = "MIXED+CLOUD+NOT_RESPONDING+POWERING_UP";
    let busy = "MIXED+CLOUD";
    // No record, then two powering up, then both busy (twice).
    let looks = [
        [OFF; 4],
        [up, up, OFF, OFF],
        [busy, busy, OFF, OFF],
        [busy, busy, OFF, OFF],
    ];
    for (version, release, reloads) in [
        (ApiVersion::V0042, Some("24.11.5"), vec![2]),
        (ApiVersion::V0042, None, vec![2]),
        (ApiVersion::V0045, Some("26.05.5"), vec![2]),
        (ApiVersion::V0038, Some("22.05.8"), vec![]),
    ] {
        let rig = planned_rig(json!({}), 0);
        let mut reloaded = Vec::new();
        for (look, states) in looks.iter().enumerate() {
            rig.at(2 * look as u64);
            let mut snap = if look == 0 {
                snapshot(at(0), NODESET, vec![], &[2])
            } else {
                planned_snapshot(at(2 * look as u64), *states)
            };
            snap.api_version = Some(version);
            snap.release = release.map(String::from);
            rig.slurm(snap);
            let writes = rig.reconcile().await;
            if look == 0 {
                let made = writes
                    .iter()
                    .filter(|w| matches!(w, Recorded::Create { .. }))
                    .count();
                assert_eq!(made, 4, "{release:?}: {writes:?}");
            }
            // The status says a reload is due from the records' making to the reload.
            let pending = rig.status().node_records.is_some_and(|r| r.reload_pending);
            let due = reloads.first().is_some_and(|r| look < *r);
            assert_eq!(pending, due, "{release:?} look {look}");
            if writes.contains(&Recorded::Reconfigure) {
                reloaded.push(look);
                assert!(
                    events(&writes).iter().any(|(r, n)| *r == "Reconfigured"
                        && n.contains(release.unwrap_or("of unknown release"))),
                    "{writes:?}"
                );
            }
        }
        assert_eq!(reloaded, reloads, "{version:?} {release:?}");
    }
}

/// A leader that made records may go before the reload they need: its status says the
/// reload is pending, and the replica that takes the lead has slurmctld reload.
#[tokio::test]
async fn a_new_leader_makes_the_reload_its_predecessor_left_pending() {
    let spec = json!({"mode": "SlurmPlanned", "maxReplicas": 4});
    for (pending, reloads) in [(true, true), (false, false)] {
        let before = json!({"nodeRecords": {"wanted": 4, "existing": 4, "reloadPending": pending}});
        let rig = planned(Rig::with_status(spec.clone(), 0, before));
        let mut snap = planned_snapshot(at(0), [OFF; 4]);
        snap.release = Some("24.11.5".into());
        rig.slurm(snap);
        let writes = rig.reconcile().await;
        assert_eq!(
            writes.contains(&Recorded::Reconfigure),
            reloads,
            "{writes:?}"
        );
        assert!(!rig.status().node_records.unwrap().reload_pending);
    }
}

/// slurmctld's `/diag` since its statistics began at `since`, after `reconfigures`
/// `REQUEST_RECONFIGURE` calls: what says which configuration it runs.
fn diag_after(since: i64, reconfigures: u64) -> slurmscale_exporter::model::Diag {
    use slurmscale_exporter::model::{Diag, RpcStat};
    Diag {
        stats_since: Some(since),
        rpcs: vec![RpcStat {
            name: "REQUEST_RECONFIGURE".into(),
            count: reconfigures,
            total_seconds: 0.0,
        }],
        ..Diag::default()
    }
}

/// Resumed records are refreshed (DRAIN, RESUME) once each time slurmctld reloads, at once
/// when the reload happened while this replica led. One that took the lead after an unknown
/// past refreshes them only once a schedulable job has waited a minute: a refresh of records
/// slurmctld still plans on requeues a job allocated to them in between (seen on 22.05).
#[tokio::test]
async fn slurm_planned_refreshes_resumed_records_once_each_time_slurmctld_reloads() {
    let rig = planned_rig(json!({}), 0);
    // Ordinals 0 and 2 were resumed after their pods went (not heard from since).
    let resumed = "IDLE+CLOUD+POWERED_DOWN+NOT_RESPONDING";
    // `waiting`: a schedulable one-node job submitted at that second, if any.
    let look = |t: u64, since: i64, reconfigures: u64, waiting: Option<u64>| {
        let mut snap = planned_snapshot(at(t), [resumed, OFF, resumed, OFF]);
        if let Some(submitted) = waiting {
            let mut jobs = snapshot(at(t), NODESET, vec![], &[1]).jobs;
            let mut data = jobs.data.as_deref().cloned().unwrap();
            data.pending[0].submit_time = Some(
                at(submitted)
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap()
                    .as_secs() as i64,
            );
            jobs.succeed(at(t), Duration::from_millis(5), Some(data));
            snap.jobs = jobs;
        }
        let diag = diag_after(since, reconfigures);
        snap.diag
            .succeed(at(t), Duration::from_millis(5), Some(diag));
        rig.at(t);
        rig.slurm(snap);
    };
    // Each refreshed record: DRAIN, then RESUME, nothing else in Slurm.
    let refreshed = |writes: &[Recorded]| -> Vec<String> {
        let slurm: Vec<&Recorded> = writes
            .iter()
            .filter(|w| matches!(w, Recorded::Drain { .. } | Recorded::Resume { .. }))
            .collect();
        slurm
            .chunks(2)
            .map(|pair| match pair {
                [
                    Recorded::Drain { node, reason },
                    Recorded::Resume { node: resumed },
                ] if node == resumed && reason.starts_with("slurmscale:") => node.clone(),
                other => panic!("not DRAIN then RESUME: {other:?}"),
            })
            .collect()
    };
    let both = ["elastic-0", "elastic-2"];
    // A first look: what happened before this replica led is unknown, and slurmctld may
    // be placing a job on the records right now.
    look(0, 1_000, 0, None);
    assert!(refreshed(&rig.reconcile().await).is_empty());
    look(2, 1_000, 0, Some(0));
    assert!(
        refreshed(&rig.reconcile().await).is_empty(),
        "a job waiting 2 s is one slurmctld has yet to place"
    );
    look(62, 1_000, 0, Some(0));
    assert_eq!(
        refreshed(&rig.reconcile().await),
        both,
        "a job left waiting a minute"
    );
    look(64, 1_000, 0, Some(0));
    assert!(
        refreshed(&rig.reconcile().await).is_empty(),
        "no reload since"
    );
    // A reconfigure (22.05 counts the call) and a restart (24.11 re-executes on one too),
    // seen happen: at once, job or none.
    look(66, 1_000, 1, None);
    let writes = rig.reconcile().await;
    assert_eq!(refreshed(&writes), both);
    assert!(
        events(&writes)
            .iter()
            .any(|(r, n)| *r == "Refresh" && n.contains("elastic-0, elastic-2")),
        "{writes:?}"
    );
    look(68, 2_000, 0, None);
    let writes = rig.reconcile().await;
    assert_eq!(refreshed(&writes), both);
    assert!(scales(&writes).is_empty(), "{writes:?}");
}

/// A replica that took the lead refreshes nothing on its first looks, but a reload it sees
/// happen afterwards is refreshed for at once.
#[tokio::test]
async fn slurm_planned_refreshes_at_once_for_a_reload_seen_after_taking_the_lead() {
    use slurmscale_exporter::model::Diag;
    let rig = planned_rig(json!({}), 0);
    let resumed = "IDLE+CLOUD+POWERED_DOWN+NOT_RESPONDING";
    let look = |t: u64, since: i64| {
        let mut snap = planned_snapshot(at(t), [resumed, OFF, OFF, OFF]);
        let diag = Diag {
            stats_since: Some(since),
            ..Diag::default()
        };
        snap.diag
            .succeed(at(t), Duration::from_millis(5), Some(diag));
        rig.at(t);
        rig.slurm(snap);
    };
    let drains = |writes: &[Recorded]| {
        writes
            .iter()
            .filter(|w| matches!(w, Recorded::Drain { .. }))
            .count()
    };
    look(0, 1_000);
    assert_eq!(drains(&rig.reconcile().await), 0);
    look(2, 1_000);
    assert_eq!(drains(&rig.reconcile().await), 0);
    look(4, 3_000);
    assert_eq!(drains(&rig.reconcile().await), 1, "slurmctld restarted");
}

/// A resume and a reload can cross: the look that first sees the reload may read `/nodes`
/// from before the resume, showing the record still drained. It is refreshed once it shows
/// resumed and unheard, a look later; a record resumed after the reload is not.
#[tokio::test]
async fn slurm_planned_refreshes_a_record_resumed_just_before_a_reload_seen_a_look_later() {
    let rig = planned_rig(json!({}), 0);
    let left = "DOWN+CLOUD+DRAIN+POWERED_DOWN:Pod is terminating";
    let resumed = "IDLE+CLOUD+POWERED_DOWN+NOT_RESPONDING";
    // `/nodes` as read at `nodes_at`, `/diag` at `t` after `reconfigures` reconfigures.
    let look = |nodes_at: u64, t: u64, states: [&str; 4], reconfigures: u64| {
        let mut snap = planned_snapshot(at(nodes_at), states);
        let diag = diag_after(1_000, reconfigures);
        snap.diag
            .succeed(at(t), Duration::from_millis(5), Some(diag));
        rig.at(t);
        rig.slurm(snap);
    };
    let slurm_writes = |writes: &[Recorded]| -> Vec<Recorded> {
        (writes.iter())
            .filter(|w| matches!(w, Recorded::Drain { .. } | Recorded::Resume { .. }))
            .cloned()
            .collect()
    };
    let resume = |i: usize| Recorded::Resume {
        node: format!("elastic-{i}"),
    };
    look(0, 0, [left, OFF, OFF, OFF], 0);
    assert_eq!(slurm_writes(&rig.reconcile().await), [resume(0)]);
    // slurmctld reconfigured; `/nodes` answered before the RESUME took.
    look(0, 2, [left, OFF, OFF, OFF], 1);
    assert!(slurm_writes(&rig.reconcile().await).is_empty());
    look(4, 4, [resumed, OFF, OFF, OFF], 1);
    let writes = slurm_writes(&rig.reconcile().await);
    assert!(
        matches!(&writes[..], [Recorded::Drain { node, .. }, r] if node == "elastic-0" && *r == resume(0)),
        "refreshed: {writes:?}"
    );
    look(6, 6, [resumed, OFF, OFF, OFF], 1);
    assert!(slurm_writes(&rig.reconcile().await).is_empty(), "once");
    // Resumed after the reload: plannable until the next one.
    look(8, 8, [resumed, left, OFF, OFF], 1);
    assert_eq!(slurm_writes(&rig.reconcile().await), [resume(1)]);
    look(10, 10, [resumed, resumed, OFF, OFF], 1);
    assert!(slurm_writes(&rig.reconcile().await).is_empty());
    look(12, 12, [resumed, resumed, OFF, OFF], 2);
    assert_eq!(
        slurm_writes(&rig.reconcile().await).len(),
        4,
        "both, at the next reload"
    );
}

#[tokio::test]
async fn slurm_planned_covers_a_wanted_ordinal_above_a_free_one_and_counts_the_extra_pod() {
    use crate::pool::PodState::Ready;
    let rig = planned_rig(json!({}), 1);
    set_pods(&rig, &[(0, Ready)]);
    // slurmctld wants ordinal 2; the NodeSet will create 1 first.
    let up = "MIXED+CLOUD+NOT_RESPONDING+POWERING_UP";
    rig.slurm(planned_snapshot(at(0), ["MIXED+CLOUD", OFF, up, OFF]));
    let writes = rig.reconcile().await;
    assert_eq!(scales(&writes), [3]);
    let message = rig.status().last_decision.unwrap().message;
    assert!(message.contains("did not ask for"), "{message}");
    let unrequested = "slurmscale_slurm_planned_unrequested_pods_total";
    assert_eq!(policy_sample(&rig, unrequested, None), 1.0);
    let records = |power| {
        policy_sample(
            &rig,
            "slurmscale_slurm_planned_records",
            Some(("power", power)),
        )
    };
    assert_eq!(
        (records("busy"), records("up"), records("off")),
        (1.0, 1.0, 2.0)
    );
    // On the page too, through the policy family.
    let m = rig.on.controller.metrics.lock().unwrap().clone();
    let page = super::super::metrics::page(Vec::new(), &m, None);
    let text = String::from_utf8_lossy(&page.text);
    assert!(
        text.contains("slurmscale_slurm_planned_unrequested_pods_total{cluster=\"c1\",namespace=\"slurm\",autoscaler=\"elastic\",target=\"elastic\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn slurm_planned_moves_nothing_on_stale_data_or_while_the_nodeset_changes() {
    use crate::pool::PodState::Ready;
    let rig = planned_rig(json!({}), 2);
    set_pods(&rig, &[(0, Ready), (1, Ready)]);
    let going = "IDLE+CLOUD+POWERING_DOWN";
    // 60 s old: nothing goes.
    rig.at(100);
    rig.slurm(planned_snapshot(at(40), ["MIXED+CLOUD", going, OFF, OFF]));
    let writes = rig.reconcile().await;
    assert!(scales(&writes).is_empty(), "{writes:?}");
    assert!(
        !writes
            .iter()
            .any(|w| matches!(w, Recorded::MarkPods { .. }))
    );
    assert_eq!(events(&writes)[0].0, "Frozen");
    // Fresh, but the NodeSet still has 3 pods for 2 replicas: hold.
    rig.fake
        .with(|w| w.targets.get_mut(NODESET).unwrap().status_replicas = Some(3));
    rig.slurm(planned_snapshot(at(100), ["MIXED+CLOUD", going, OFF, OFF]));
    let writes = rig.reconcile().await;
    assert!(scales(&writes).is_empty(), "{writes:?}");
    assert_eq!(rig.status().last_decision.unwrap().reason, "Stabilizing");
    // Settled: the power-down is followed, its pod marked first.
    rig.fake
        .with(|w| w.targets.get_mut(NODESET).unwrap().status_replicas = None);
    let writes = rig.reconcile().await;
    assert!(
        writes
            .iter()
            .any(|w| matches!(w, Recorded::MarkPods { .. }))
    );
    assert!(scales(&writes).is_empty());
    rig.at(102);
    rig.slurm(planned_snapshot(at(102), ["MIXED+CLOUD", going, OFF, OFF]));
    assert_eq!(scales(&rig.reconcile().await), [1]);
}

#[tokio::test]
async fn slurm_planned_refuses_a_nodeset_or_slurm_not_set_up_for_it() {
    let rig = planned_rig(json!({}), 0);
    rig.fake.with(|w| {
        w.targets
            .get_mut(NODESET)
            .unwrap()
            .nodes
            .slurmd_args
            .clear();
    });
    let up = "MIXED+CLOUD+NOT_RESPONDING+POWERING_UP";
    rig.slurm(planned_snapshot(at(0), [up, OFF, OFF, OFF]));
    let writes = rig.reconcile().await;
    assert!(scales(&writes).is_empty());
    let said = events(&writes);
    assert_eq!(said.len(), 1, "{said:?}");
    assert_eq!(said[0].0, "SlurmPlannedNotSetUp");
    assert!(said[0].1.contains("-b"), "{}", said[0].1);
    assert_eq!(
        rig.condition("Ready"),
        Some(("False".into(), "SlurmPlannedNotSetUp".into()))
    );
    // With -b, but 22.05 without PrivateData=cloud: the partition lists records /nodes
    // does not show. Frozen, saying what to set.
    rig.fake.with(|w| {
        w.targets.get_mut(NODESET).unwrap().nodes.slurmd_args = vec!["-b".into()];
    });
    let mut snap = planned_snapshot(at(0), [up, OFF, OFF, OFF]);
    let only_first = vec![snap.nodes.data.as_deref().unwrap()[0].clone()];
    snap.nodes
        .succeed(at(0), Duration::from_millis(5), Some(only_first));
    rig.slurm(snap);
    let writes = rig.reconcile().await;
    assert!(scales(&writes).is_empty(), "{writes:?}");
    let message = rig.status().last_decision.unwrap().message;
    assert!(message.contains("PrivateData=cloud"), "{message}");
    // Every record shown, but the partition has SuspendTime=INFINITE: nothing would ever
    // power down. Frozen, saying so.
    let mut snap = planned_snapshot(at(0), [up, OFF, OFF, OFF]);
    let mut partitions = snap.partitions.data.as_deref().unwrap().to_vec();
    partitions[0].never_suspends = true;
    snap.partitions
        .succeed(at(0), Duration::from_millis(5), Some(partitions));
    rig.slurm(snap);
    let writes = rig.reconcile().await;
    assert!(scales(&writes).is_empty(), "{writes:?}");
    let message = rig.status().last_decision.unwrap().message;
    assert!(message.contains("SuspendTime=INFINITE"), "{message}");
    // Set up: the powered-up record is followed.
    rig.slurm(planned_snapshot(at(0), [up, OFF, OFF, OFF]));
    assert_eq!(scales(&rig.reconcile().await), [1]);
}

#[tokio::test]
async fn slurm_planned_in_dry_run_says_what_it_would_retire() {
    use crate::pool::PodState::Ready;
    let rig = planned_rig(json!({"dryRun": true}), 2);
    set_pods(&rig, &[(0, Ready), (1, Ready)]);
    let going = "IDLE+CLOUD+POWERING_DOWN";
    rig.slurm(planned_snapshot(at(0), ["MIXED+CLOUD", going, OFF, OFF]));
    let writes = rig.reconcile().await;
    assert!(scales(&writes).is_empty());
    assert!(
        !writes
            .iter()
            .any(|w| matches!(w, Recorded::MarkPods { .. }))
    );
    let said = events(&writes);
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].1.starts_with("would set 2 → 1"), "{}", said[0].1);
}

/// A NodeSet's pod is `<name>-<ordinal>`, whatever its name holds.
#[test]
fn a_pod_name_gives_its_ordinal_after_its_last_dash() {
    use crate::pool::pod_ordinal;
    assert_eq!(pod_ordinal("slurm-worker-gpu-12"), Some(12));
    assert_eq!(pod_ordinal("a-0"), Some(0));
    for other in ["a-", "a12", "a-1a", "12", "-"] {
        assert_eq!(pod_ordinal(other), None, "{other}");
    }
}

/// The NodeSet's boot time is learned from its scale-ups (the ask seen to the node
/// registered in Slurm), said in the status and metrics, and a spec's setting wins.
#[tokio::test]
async fn the_boot_time_is_learned_from_scale_ups_and_a_spec_setting_wins() {
    let rig = Rig::new(json!({}), 0);
    let booting = |s: u64| {
        rig.at(s);
        rig.slurm(snapshot(at(s), NODESET, Vec::new(), &[2]));
    };
    booting(5);
    assert_eq!(scales(&rig.reconcile().await), [2]);
    assert_eq!(rig.status().boot_time, None, "no boot seen yet");
    // The next reconcile sees the 2 replicas asked for at 5; the nodes register 90 s after
    // the ask (a node of another NodeSet, whose name only starts alike, does not count).
    booting(7);
    rig.reconcile().await;
    let mut nodes: Vec<Node> = (0..2)
        .map(|i| node(&format!("{NODESET}-{i}"), NODESET, false))
        .collect();
    nodes.push(node("elastic-gpu-0", NODESET, false));
    rig.at(95);
    rig.slurm(snapshot(at(95), NODESET, nodes, &[2]));
    rig.reconcile().await;
    assert_eq!(
        rig.status().boot_time.as_deref(),
        Some("90s, learned from 2 boots")
    );
    let row = rig.on.controller.metrics.lock().unwrap().rows["slurm/elastic"].clone();
    assert_eq!((row.boot.seconds, row.boot.observed), (Some(90.0), 2));

    // Set in the spec: said as such before any boot is seen.
    let rig = Rig::new(json!({"bootTimeSeconds": 300}), 0);
    rig.at(5);
    rig.slurm(snapshot(at(5), NODESET, Vec::new(), &[]));
    rig.reconcile().await;
    assert_eq!(
        rig.status().boot_time.as_deref(),
        Some("300s, spec.bootTimeSeconds")
    );
}
