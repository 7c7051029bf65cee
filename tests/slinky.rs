//! Slinky's own node model, on both real Slurms. The harness's `slinky` partition is built as
//! slurm-operator builds a NodeSet's: no node lines, `NodeSet=slinky Feature=slinky`, and
//! nodes that exist only once a pod's `slurmd -Z` registers one (`slurm.sh pod-up`, each pod
//! under its own name and loopback address, as pods have their own IPs); a pod that goes
//! leaves its record DOWN (operator 1.2 on) or deletes it (1.1 and before) (`pod-down`).
//!
//! What is checked: the exporter's partition size and CPUs follow pods joining and leaving
//! (a registration moves no partition `update_time`); what each Slurm does
//! with a job submitted at zero pods; that node records kept by the autoscaler
//! (`spec.nodeRecords: Future`) make scaling from zero work on both, with the shape taken
//! from the NodeSet's pod template while no node exists; that a job larger than the
//! NodeSet's `maxReplicas` is never scaled for; and that `slurm_nodeset_desired_nodes`, which
//! KEDA follows, asks for the nodes a job needs from zero.
//!
//! Tests of one Slurm take turns on its `slinky` partition; the two Slurms run side by side.

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use slurmscale_autoscaler::crd::NodeSetAutoscaler;
use slurmscale_exporter::k8s::nodeset::v1beta1;
use support::{Metrics, Process, SlurmCluster, kube_client, kubeconfig_path, namespace};

const PARTITION: &str = "slinky";
/// The pod names the harness can run (`slinky-0` … `slinky-15`).
const PODS: usize = 16;

/// How long the exporter's partition has to follow a pod joining or leaving. Generous on
/// purpose: the test checks that it follows; how soon ("within one poll") is the exporter's
/// `pods` bench's to measure.
const PARTITION_FOLLOWS: Duration = Duration::from_secs(30);

/// How long a job has to run on the pods started for it from zero (scale, pods, slurmd
/// registered, job started), as in tests/operator.rs. Generous on purpose: the reaction is
/// `cargo bench -p slurmscale-autoscaler --bench reaction`'s to measure.
const JOB_RUNS: Duration = Duration::from_secs(90);

/// The partition as a fresh Slinky install has it: no job, no pod, no record, and no
/// NodeSetAutoscaler of this Slurm left by an earlier test to make records.
async fn reset(cluster: &SlurmCluster) {
    support::elastic::delete_autoscalers(cluster, "slinky-", "slinky").await;
    let c = cluster.clone();
    tokio::task::spawn_blocking(move || support::elastic::reset_slinky(&c))
        .await
        .unwrap();
}

fn pod(cluster: &SlurmCluster, args: &[&str]) {
    cluster.harness(args);
}

/// Nodes and CPUs slurmctld has in the partition (`scontrol show partition`), FUTURE
/// records included.
fn partition_size(cluster: &SlurmCluster) -> (u64, u64) {
    let out = cluster.run("scontrol", &["-o", "show", "partition", PARTITION]);
    let field = |k: &str| {
        out.split_whitespace()
            .find_map(|w| w.strip_prefix(k))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("TotalNodes="), field("TotalCPUs="))
}

fn registered(cluster: &SlurmCluster, node: &str) -> bool {
    let state = cluster.run("sinfo", &["-h", "-N", "-n", node, "-o", "%T"]);
    matches!(
        state.trim(),
        "idle" | "mixed" | "allocated" | "idle*" | "completing"
    )
}

fn exporter(cluster: &SlurmCluster, kube: bool) -> Process {
    let key = cluster.key_file.to_string_lossy().into_owned();
    let kubeconfig = kubeconfig_path().to_string_lossy().into_owned();
    let mut args = vec!["exporter", "--interval", "1s", "--jwt-key-file", &key];
    if kube {
        args.extend(["--kubeconfig", &kubeconfig]);
    } else {
        args.push("--no-kubernetes");
    }
    Process::start(
        &args,
        &[
            ("SLURM_REST_URL", &cluster.url),
            ("SLURM_USER", &cluster.user),
            ("SLURM_CLUSTER", &cluster.name),
        ],
    )
}

fn partition_metric(m: &Metrics, name: &str) -> f64 {
    m.get(name, &[("partition", PARTITION)]).unwrap_or(-1.0)
}

/// Waits for `check` on the process's metrics; how long it took.
async fn metrics_until(
    p: &Process,
    what: &str,
    within: Duration,
    check: impl Fn(&Metrics) -> bool,
) -> Duration {
    let start = Instant::now();
    let ok = support::wait_until(within, || async { check(&p.metrics().await) }).await;
    if !ok {
        let m = p.metrics().await;
        let view: Vec<String> =
            m.0.iter()
                .filter(|(_, l, _)| l.iter().any(|(_, v)| v == PARTITION))
                .map(|(n, l, v)| format!("{n}{l:?} {v}"))
                .collect();
        panic!(
            "{what}: not within {within:?}\n{}\nlogs:\n{}",
            view.join("\n"),
            p.logs()
        );
    }
    start.elapsed()
}

/// A pod's node joining or leaving moves no partition `update_time`: the exporter must still
/// show the partition's size and CPUs as pods register, are deleted (the record goes,
/// operator 1.1) or leave their record DOWN (operator 1.2) and come back.
async fn partition_follows_pods(flavor: &str) {
    let _turn = support::turn(flavor).await;
    let cluster = SlurmCluster::get(flavor);
    reset(&cluster).await;
    let e = exporter(&cluster, false);
    e.wait_ready(Duration::from_secs(30)).await;
    metrics_until(&e, "an empty partition", PARTITION_FOLLOWS, |m| {
        partition_metric(m, "slurm_partition_nodes") == 0.0
    })
    .await;
    let mut joins = Vec::new();
    for (i, pods) in [(0, 1.0), (1, 2.0)] {
        let name = format!("slinky-{i}");
        pod(&cluster, &["pod-up", &name]);
        let c = cluster.clone();
        assert!(
            support::wait_until(Duration::from_secs(30), || {
                let c = c.clone();
                let name = name.clone();
                async move { registered(&c, &name) }
            })
            .await,
            "{name} did not register on {flavor}"
        );
        joins.push(
            metrics_until(
                &e,
                &format!("{name} counted in its partition"),
                PARTITION_FOLLOWS,
                |m| {
                    partition_metric(m, "slurm_partition_nodes") == pods
                        && partition_metric(m, "slurm_partition_cpus") == pods * 4.0
                },
            )
            .await,
        );
    }
    // Deleted with its record (operator 1.1 and before).
    pod(&cluster, &["pod-down", "slinky-1", "delete"]);
    metrics_until(&e, "a deleted record leaves", PARTITION_FOLLOWS, |m| {
        partition_metric(m, "slurm_partition_nodes") == 1.0
            && partition_metric(m, "slurm_partition_cpus") == 4.0
    })
    .await;
    // Its record left DOWN (operator 1.2 on): still in the partition, not usable.
    pod(&cluster, &["pod-down", "slinky-0"]);
    metrics_until(&e, "a lingering DOWN record", PARTITION_FOLLOWS, |m| {
        partition_metric(m, "slurm_partition_nodes") == 1.0
            && partition_metric(m, "slurm_partition_nodes_down") == 1.0
            && partition_metric(m, "slurm_partition_nodes_usable_idle") == 0.0
    })
    .await;
    // The next pod of that name takes its record back.
    pod(&cluster, &["pod-up", "slinky-0"]);
    metrics_until(
        &e,
        "the lingering record back",
        Duration::from_secs(30),
        |m| {
            partition_metric(m, "slurm_partition_nodes") == 1.0
                && partition_metric(m, "slurm_partition_nodes_down") == 0.0
                && partition_metric(m, "slurm_partition_nodes_usable_idle") == 1.0
        },
    )
    .await;
    eprintln!(
        "Slurm {flavor}: a pod's node counted in its partition after {joins:?} (polls every 1 s)"
    );
    drop(e);
    reset(&cluster).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_follows_pods_on_22_05() {
    partition_follows_pods("22.05").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_follows_pods_on_24_11() {
    partition_follows_pods("24.11").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_follows_pods_on_26_05() {
    partition_follows_pods("26.05").await;
}

/// At zero pods the partition has no node: Slurm 22.05 and 26.05 accept a job and leave it
/// pending, 24.11 refuses it at submit (slurm-operator#18). The exporter reads a NodeSet without a
/// bound as asking for the job's nodes (KEDA's metric is not capped at the zero nodes there
/// are), and a NodeSetAutoscaler's `maxReplicas` becomes its bound.
async fn submit_at_zero(flavor: &str) {
    let _turn = support::turn(flavor).await;
    let cluster = SlurmCluster::get(flavor);
    reset(&cluster).await;
    let out = cluster
        .cmd("sbatch")
        .args(["--parsable", "-o", "/dev/null", "-p", PARTITION, "-N", "2"])
        .args(["--wrap", "sleep 60"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    match flavor {
        "22.05" | "26.05" => assert!(out.status.success(), "{flavor} accepts it: {stderr}"),
        _ => {
            assert!(
                !out.status.success(),
                "{flavor} refuses a job at zero nodes"
            );
            assert!(
                stderr.contains("Requested node configuration is not available"),
                "{stderr}"
            );
            reset(&cluster).await;
            return;
        }
    }
    let client = kube_client().await;
    let ns = namespace(&client, "slinky-zero").await;
    support::elastic::nodeset_at_zero(&client, &ns, "slinky", Some("CPUs=4 RealMemory=8000")).await;
    let e = exporter(&cluster, true);
    e.wait_ready(Duration::from_secs(30)).await;
    let series = |m: &Metrics, name: &str| {
        m.get(
            name,
            &[
                ("namespace", &ns),
                ("nodeset", "slinky"),
                ("partition", PARTITION),
            ],
        )
    };
    metrics_until(&e, "desired 2 from zero", Duration::from_secs(30), |m| {
        series(m, "slurm_nodeset_desired_nodes") == Some(2.0)
            && series(m, "slurm_nodeset_desired_nodes_stale") == Some(0.0)
            && series(m, "slurm_nodeset_max_nodes").is_none()
    })
    .await;
    // A NodeSetAutoscaler of at most 1 replica: the 2-node job can never run there.
    let nsa: NodeSetAutoscaler = serde_json::from_value(json!({
        "apiVersion": "slurmscale.io/v1alpha1", "kind": "NodeSetAutoscaler",
        "metadata": {"name": "slinky"},
        "spec": {"scaleTargetRef": {"name": "slinky"}, "maxReplicas": 1}
    }))
    .unwrap();
    Api::<NodeSetAutoscaler>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &nsa)
        .await
        .unwrap();
    metrics_until(&e, "bounded by maxReplicas", Duration::from_secs(30), |m| {
        series(m, "slurm_nodeset_max_nodes") == Some(1.0)
            && series(m, "slurm_nodeset_desired_nodes") == Some(0.0)
    })
    .await;
    drop(e);
    // Nothing left for a later autoscaler, which reconciles every NodeSetAutoscaler, or the
    // real slurm-operator, which runs pods for every NodeSet, to act on (the test server has
    // no namespace controller to empty a deleted namespace).
    let _ = Api::<NodeSetAutoscaler>::namespaced(client.clone(), &ns)
        .delete("slinky", &DeleteParams::default())
        .await;
    let _ = Api::<v1beta1::NodeSet>::namespaced(client.clone(), &ns)
        .delete("slinky", &DeleteParams::default())
        .await;
    reset(&cluster).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_at_zero_pods_on_22_05() {
    submit_at_zero("22.05").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_at_zero_pods_on_24_11() {
    submit_at_zero("24.11").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_at_zero_pods_on_26_05() {
    submit_at_zero("26.05").await;
}

/// The test's slurm-operator: follows the NodeSet's replicas with pods, the lowest free
/// ordinal first on the way up and the highest on the way down (a pod whose node still runs
/// a job stays, as the operator drains before deleting), leaving the record DOWN (1.2).
fn operate(
    client: kube::Client,
    ns: String,
    cluster: SlurmCluster,
    name: &'static str,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let api: Api<v1beta1::NodeSet> = Api::namespaced(client, &ns);
        let mut up: BTreeSet<usize> = BTreeSet::new();
        loop {
            let Ok(nodeset) = api.get(name).await else {
                tokio::time::sleep(Duration::from_millis(300)).await;
                continue;
            };
            let want = nodeset.spec.replicas.unwrap_or(0).clamp(0, PODS as i32) as usize;
            while up.len() < want {
                let i = (0..PODS).find(|i| !up.contains(i)).unwrap();
                let c = cluster.clone();
                tokio::task::spawn_blocking(move || c.harness(&["pod-up", &format!("slinky-{i}")]))
                    .await
                    .unwrap();
                up.insert(i);
            }
            while up.len() > want {
                let i = *up.iter().next_back().unwrap();
                let c = cluster.clone();
                let ok = tokio::task::spawn_blocking(move || {
                    std::process::Command::new("bash")
                        .arg(support::repo_root().join("tests/harness/slurm.sh"))
                        .args([&c.flavor, "pod-down", &format!("slinky-{i}")])
                        .status()
                        .is_ok_and(|s| s.success())
                })
                .await
                .unwrap();
                if !ok {
                    break;
                }
                up.remove(&i);
            }
            let status = json!({"status": {"replicas": up.len(), "readyReplicas": up.len(), "selector": "app=slinky", "nodeSetHash": "test"}});
            let _ = api
                .patch_status(name, &PatchParams::default(), &Patch::Merge(status))
                .await;
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    })
}

/// Scaling a Slinky NodeSet from zero with records kept by the autoscaler: the records give
/// the partition its size at zero pods (24.11 then accepts the job), the shape comes from the
/// NodeSet's pod template until a node registers, the NodeSet grows for the job and its pods
/// join their records; once idle it goes back to zero, the records stay (DOWN, as the pods
/// left them), and the next job scales it up again from them. A job larger than
/// `maxReplicas` is never scaled for. `chart`: the NodeSet as Slinky's own Helm chart makes
/// it (`slurm-worker-slinky`, pod host name `slinky-`: `slinky` in Slurm), with neither an
/// annotation nor `spec.slurm.partitions` to say which partition it serves.
async fn scale_from_zero_with_records(flavor: &str, chart: bool) {
    let _turn = support::turn(flavor).await;
    let cluster = SlurmCluster::get(flavor);
    reset(&cluster).await;
    let client = kube_client().await;
    let ns = namespace(&client, "slinky-records").await;
    let nodesets: Api<v1beta1::NodeSet> = Api::namespaced(client.clone(), &ns);
    let name = if chart {
        let made = support::elastic::chart_nodesets(&client, &ns, None, &["slinky"]).await;
        assert!(made.iter().any(|n| n == "slurm-worker-slinky"), "{made:?}");
        "slurm-worker-slinky"
    } else {
        support::elastic::nodeset_at_zero(&client, &ns, "slinky", Some("CPUs=4 RealMemory=8000"))
            .await;
        "slinky"
    };
    let (autoscalers, a) =
        support::elastic::slinky_autoscaler_of(&client, &ns, &cluster, name).await;
    let operator = operate(client.clone(), ns.clone(), cluster.clone(), name);
    let status = async || autoscalers.get("slinky").await.ok().and_then(|n| n.status);
    let replicas = async || support::elastic::spec_replicas(&nodesets, name).await;
    support::elastic::eventually(
        "three FUTURE records in the partition, shaped by the pod template",
        Duration::from_secs(30),
        &a,
        async || {
            let c = cluster.clone();
            let size = tokio::task::spawn_blocking(move || partition_size(&c))
                .await
                .unwrap();
            let s = status().await.unwrap_or_default();
            size == (3, 12)
                && s.node_records.as_ref().is_some_and(|r| (r.wanted, r.existing) == (3, 3))
                // Once the records exist, the partition has their shape.
                && s.node_shape.as_deref() == Some("4 CPUs, 7.8 GiB (partition)")
        },
    )
    .await;
    // Before they existed the partition had no node: the shape came from the pod template.
    let made = support::event_notes(&client, &ns, "NodeRecords").await;
    assert!(
        made.iter().any(|n| n.contains("slinky-0,slinky-1,slinky-2")
            && n.contains("Feature=slinky CPUs=4 RealMemory=8000 State=FUTURE")),
        "{made:?}"
    );

    // Now 24.11 accepts a job at zero pods too. It asks for the NodeSet's feature, which its
    // nodes have: its demand (a job whose --constraint they did not meet would not be).
    let sent = Instant::now();
    let job = cluster.submit(&[
        "-p",
        PARTITION,
        "-N",
        "2",
        "--exclusive",
        "--constraint=slinky",
        "--wrap",
        "sleep 4",
    ]);
    support::elastic::eventually(
        "the NodeSet scaled to 2 for the job",
        Duration::from_secs(20),
        &a,
        async || replicas().await == 2,
    )
    .await;
    let scaled = sent.elapsed();
    support::elastic::runs_on(&cluster, &job, "slinky-[0-1]", JOB_RUNS, &a).await;
    let ran = sent.elapsed();
    // A job larger than maxReplicas: refused at submit where the partition is only the 3
    // records, or pending and never scaled for.
    let out = cluster
        .cmd("sbatch")
        .args([
            "--parsable",
            "-o",
            "/dev/null",
            "-p",
            PARTITION,
            "-N",
            "4",
            "--exclusive",
        ])
        .args(["--wrap", "sleep 1"])
        .output()
        .unwrap();
    let big_accepted = out.status.success();
    eprintln!(
        "Slurm {flavor}: a 4-node job on 3 records {}",
        if big_accepted {
            "is accepted and pends".to_string()
        } else {
            format!(
                "is refused: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )
        }
    );
    // Idle (the big job, if any, counts as unsatisfiable): back to zero; the pods' records
    // stay DOWN, the autoscaler keeps them.
    support::elastic::eventually(
        "back to zero when idle",
        Duration::from_secs(60),
        &a,
        async || replicas().await == 0,
    )
    .await;
    if big_accepted {
        // Reported as never able to start, and not scaled for.
        let m = a.metrics().await;
        assert_eq!(
            m.get(
                "slurmscale_autoscaler_unsatisfiable_jobs",
                &[("namespace", &ns), ("autoscaler", "slinky")]
            ),
            Some(1.0),
            "the 4-node job is reported as unsatisfiable"
        );
        assert_eq!(
            replicas().await,
            0,
            "never scaled for a job beyond maxReplicas"
        );
        let _ = cluster
            .cmd("scancel")
            .args(["--user=root", "--partition", PARTITION])
            .status();
    }
    // The operator's pods go after the scale-in, not with it: until their slurmds are gone,
    // slurmctld would start the next job on a node about to go DOWN (and requeue it).
    support::elastic::eventually(
        "the pods' nodes gone from Slurm",
        Duration::from_secs(30),
        &a,
        async || (0..3).all(|i| !registered(&cluster, &format!("slinky-{i}"))),
    )
    .await;
    let c = cluster.clone();
    let size = tokio::task::spawn_blocking(move || partition_size(&c))
        .await
        .unwrap();
    assert_eq!(size, (3, 12), "the records outlive the pods");
    // The next job scales up again from the lingering records.
    let job = cluster.submit(&[
        "-p",
        PARTITION,
        "-N",
        "1",
        "--exclusive",
        "--wrap",
        "sleep 2",
    ]);
    support::elastic::eventually("a job again runs from zero", JOB_RUNS, &a, async || {
        let state = cluster.run("squeue", &["-h", "-j", &job, "-o", "%T"]);
        state.trim() == "RUNNING" || state.trim().is_empty()
    })
    .await;
    eprintln!(
        "Slurm {flavor}: sbatch -> /scale 2 in {scaled:?}, job running in {ran:?} (pods register in the harness in about a second)"
    );
    let _ = autoscalers.delete("slinky", &Default::default()).await;
    operator.abort();
    drop(a);
    if chart {
        // Nothing left for the real slurm-operator, which reconciles every NodeSet, to act on
        // (the test server has no namespace controller to empty a deleted namespace).
        let _ = nodesets
            .delete_collection(&DeleteParams::default(), &Default::default())
            .await;
    }
    reset(&cluster).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_from_zero_with_node_records_on_22_05() {
    scale_from_zero_with_records("22.05", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_from_zero_with_node_records_on_24_11() {
    scale_from_zero_with_records("24.11", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodeset_from_slinkys_chart_scales_from_zero_on_24_11() {
    scale_from_zero_with_records("24.11", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodeset_from_slinkys_chart_scales_from_zero_on_26_05() {
    scale_from_zero_with_records("26.05", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_from_zero_with_node_records_on_26_05() {
    scale_from_zero_with_records("26.05", false).await;
}
