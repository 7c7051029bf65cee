//! The controller's loop against the in-memory [`Fake`]: a scripted target, pool and Slurm,
//! a clock the test moves, and every write the controller makes in order. Both paths — a
//! NodeSet following demand and a colocated pool — through freezes, refusals, dry runs,
//! concurrent changes, the drain → release → deletion-cost sequence and cooldowns.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use slurmscale_exporter::k8s::ledger::{Capacity, LedgerNode};
use slurmscale_exporter::k8s::watch::{KubeSnapshot, WatchHealth};
use slurmscale_exporter::model::{
    Jobs, Node, NodeBase, NodeFlags, NodeState, Partition, PendingClass, PendingJob,
};
use slurmscale_exporter::slurm::ApiVersion;
use slurmscale_exporter::snapshot::ClusterSnapshot;

use super::ControllerConfig;
use crate::colocation::{PendingPod, Placement};
use crate::crd::{NodeSetAutoscaler, NodeSetAutoscalerStatus};
use crate::fakes::{Fake, FakeTarget, OnFake, World, Write};
use crate::pool::NodeSetPod;

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
    fake: Arc<Fake>,
}

impl Rig {
    /// An autoscaler of `NODESET` with `spec` (merged over the minimum), its target at
    /// `replicas`, the time at `at(0)`.
    fn new(spec: Value, replicas: u64) -> Self {
        let mut full = json!({"scaleTargetRef": {"name": NODESET}, "maxReplicas": 8});
        if let (Some(f), Some(s)) = (full.as_object_mut(), spec.as_object()) {
            f.extend(s.clone());
        }
        let nsa: NodeSetAutoscaler = serde_json::from_value(json!({
            "apiVersion": "slurmscale.io/v1alpha1", "kind": "NodeSetAutoscaler",
            "metadata": {"name": NODESET, "namespace": "slurm", "generation": 1},
            "spec": full,
        }))
        .expect("a valid autoscaler");
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
    async fn reconcile(&self) -> Vec<Write> {
        self.on.controller.reconcile_all().await;
        self.fake.take_writes()
    }

    fn status(&self) -> NodeSetAutoscalerStatus {
        self.fake.status(NODESET).unwrap_or_default()
    }

    /// (status, reason) of a condition.
    fn condition(&self, type_: &str) -> Option<(String, String)> {
        self.status()
            .conditions
            .into_iter()
            .find(|c| c.type_ == type_)
            .map(|c| (c.status, c.reason))
    }

    fn replicas(&self) -> u64 {
        self.fake.with(|w| w.targets[NODESET].replicas)
    }
}

fn scales(writes: &[Write]) -> Vec<u64> {
    writes
        .iter()
        .filter_map(|w| match w {
            Write::Scale { replicas, .. } => Some(*replicas),
            _ => None,
        })
        .collect()
}

fn events(writes: &[Write]) -> Vec<(&str, &str)> {
    writes
        .iter()
        .filter_map(|w| match w {
            Write::Event { reason, note, .. } => Some((reason.as_str(), note.as_str())),
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
            submit_time: None,
            origin: slurmscale_exporter::model::origin::Origin::Batch,
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
        }]),
    );
    snap
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
        Write::Drain {
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
    // replicas lowered so slurm-operator removes exactly that pod.
    rig.at(2);
    rig.slurm(snapshot(
        at(2),
        "cpu",
        pool_nodes(drained(node("s2", "cpu", false))),
        &[],
    ));
    let writes = rig.reconcile().await;
    assert_eq!(
        writes[0],
        Write::MarkToGo {
            nodes: vec!["k2".into()]
        }
    );
    assert_eq!(scales(&writes), [3]);
    let order: Vec<&str> = events(&writes).iter().map(|e| e.0).collect();
    assert_eq!(order, ["Release", "ScaledDown"]);
    assert!(
        rig.fake.with(|w| w.pods[SELECTOR]["k2"]) == NodeSetPod::Marked,
        "k2's pod is marked to go"
    );
    let m = rig.on.controller.metrics.lock().unwrap().clone();
    let pool = m.rows["slurm/elastic"]
        .colocation
        .clone()
        .expect("pool metrics");
    assert_eq!((pool.pool, pool.slurm, pool.kubernetes_need), (4, 4, 1));
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
    assert!(matches!(rig.reconcile().await[0], Write::Drain { .. }));
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
        !writes.iter().any(|w| matches!(w, Write::Resume { .. })),
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
    assert_eq!(writes[0], Write::Resume { node: "s2".into() });
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

#[tokio::test]
async fn a_pool_whose_scale_changed_meanwhile_plans_its_release_again() {
    let rig = pool_rig(false);
    rig.slurm(snapshot(
        at(0),
        "cpu",
        pool_nodes(drained(node("s2", "cpu", false))),
        &[],
    ));
    // Someone scaled the NodeSet to 5 between our read and our patch.
    rig.fake.with(|w| w.races.push_back(5));
    let writes = rig.reconcile().await;
    assert_eq!(
        writes[0],
        Write::MarkToGo {
            nodes: vec!["k2".into()]
        }
    );
    // The fifth replica has no pod on a pool node: lowering to 4 would remove that pending
    // pod (the operator removes unbound pods first) and keep k2's. One fewer than the pods
    // that are bound is what frees k2.
    assert_eq!(scales(&writes), [3], "one pod fewer than the 4 bound");
    let marks = writes
        .iter()
        .filter(|w| matches!(w, Write::MarkToGo { .. }))
        .count();
    assert_eq!(
        marks, 1,
        "observed and planned again, not marked again: {writes:?}"
    );
    assert_eq!(rig.replicas(), 3);
    assert_eq!(rig.status().current_replicas, Some(3));
}
