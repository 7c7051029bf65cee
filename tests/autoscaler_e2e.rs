//! The autoscaler binary against the real Slurm 24.11 (and 22.05 where a test says so) and
//! the real kube-apiserver, on the elastic partition with the test as the operator
//! (`support::elastic`). All tests here use that partition, so they take turns.

mod support;

use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use slurmscale_autoscaler::crd::NodeSetAutoscaler;
use slurmscale_exporter::k8s::nodeset::v1beta1;
use support::elastic::*;
use support::fault::FaultProxy;
use support::{Process, SlurmCluster, autoscaler, autoscaler_via, kube_client, namespace};

/// How long a NodeSet has to follow new work. Generous on purpose: these tests ask that the
/// autoscaler scales, not how fast; that is `cargo bench -p slurmscale-autoscaler --bench
/// reaction`'s to measure, with its targets.
const REACTION: Duration = Duration::from_secs(30);

/// How long a standby has to take the lease once the leader died: ten times the 6-s lease
/// every test autoscaler runs with (support::autoscaler). Generous on purpose; how fast a
/// takeover is, is not this test's to measure.
const TAKEOVER: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scales_up_for_a_3_node_job_holds_busy_nodes_and_goes_back_to_zero() {
    let _turn = ELASTIC.lock().await;
    let cluster = SlurmCluster::get("24.11");
    let s = setup(&cluster, false).await;
    let a = autoscaler(&cluster, &s.ns, &[]);
    a.wait_ready(Duration::from_secs(30)).await;

    let job = sbatch(&cluster, &["-N", "3", "--wrap", "sleep 12"]);
    eventually(
        "a 3-node job scales the NodeSet to 3",
        REACTION,
        &a,
        async || replicas(&s).await == 3,
    )
    .await;
    eventually(
        "the job runs on the new nodes",
        Duration::from_secs(30),
        &a,
        async || job_state(&cluster, &job) == "RUNNING",
    )
    .await;
    assert!(
        !events(&s, "ScaledUp").await.is_empty(),
        "no ScaledUp event"
    );
    eventually(
        "back to 0 after the job and the idle timeout",
        Duration::from_secs(60),
        &a,
        async || replicas(&s).await == 0,
    )
    .await;
    assert!(
        !events(&s, "ScaledDown").await.is_empty(),
        "no ScaledDown event"
    );
    // The status is written in the same reconcile, just after the scale.
    let status = async || s.autoscalers.get("elastic").await.unwrap().status.unwrap();
    eventually(
        "the status says 0 replicas",
        Duration::from_secs(30),
        &a,
        async || status().await.current_replicas == Some(0),
    )
    .await;
    assert!(status().await.last_scale_time.is_some());

    // A running job holds its node through the idle timeout and the down window.
    let job = sbatch(&cluster, &["-N", "1", "--wrap", "sleep 300"]);
    eventually("a 1-node job scales to 1", REACTION, &a, async || {
        replicas(&s).await == 1
    })
    .await;
    eventually("it runs", Duration::from_secs(30), &a, async || {
        job_state(&cluster, &job) == "RUNNING"
    })
    .await;
    let until = Instant::now() + Duration::from_secs(15);
    while Instant::now() < until {
        assert!(
            replicas(&s).await >= 1,
            "scaled below a busy node:\n{}",
            a.logs()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    cluster.run("scancel", &[&job]);
    let cancelled = Instant::now();
    eventually(
        "back to 0 once the job is gone",
        Duration::from_secs(60),
        &a,
        async || replicas(&s).await == 0,
    )
    .await;
    // The idle timeout (6 s) counts from the first poll that saw nothing, never from the
    // last that saw work: zero comes no sooner than 6 s after the cancel.
    assert!(
        cancelled.elapsed() >= Duration::from_secs(6),
        "scaled to zero {:?} after scancel, within the 6 s idle timeout",
        cancelled.elapsed()
    );
    // The page is re-rendered every second: it may lag the scale by that much.
    let l = [("namespace", s.ns.as_str()), ("autoscaler", "elastic")];
    eventually(
        "both scale-ups and scale-downs counted",
        Duration::from_secs(30),
        &a,
        async || {
            let m = a.metrics().await;
            m.get("slurmscale_autoscaler_scale_ups_total", &l)
                .unwrap_or(0.0)
                >= 2.0
                && m.get("slurmscale_autoscaler_scale_downs_total", &l)
                    .unwrap_or(0.0)
                    >= 2.0
                && m.get("slurmscale_autoscaler_leader", &[]) == Some(1.0)
        },
    )
    .await;
    s.teardown(&cluster).await;
}

/// Pending work is packed onto the nodes a NodeSet adds: `jobs` copies of a job with `ask`
/// scale the NodeSet to `want` nodes, never more, the decision says how they were packed
/// and all of them run on those nodes.
async fn packs_pending_jobs(
    flavor: &str,
    ask: &[&str],
    jobs: usize,
    want: i32,
    shape: serde_json::Value,
    explained: &str,
) {
    let _turn = ELASTIC.lock().await;
    let cluster = SlurmCluster::get(flavor);
    let s = setup_with(&cluster, false, shape).await;
    let a = autoscaler(&cluster, &s.ns, &[]);
    a.wait_ready(Duration::from_secs(30)).await;

    // One submission (an array of `jobs` tasks, each a job to demand), so the first
    // decision already sees them all.
    let array = format!("--array=1-{jobs}");
    let args = [&["-p", "elastic", &array], ask, &["--wrap", "sleep 20"]].concat();
    let id = cluster.submit(&args);
    let running = || {
        cluster
            .run("squeue", &["-h", "-r", "-j", &id, "-t", "R", "-o", "%i"])
            .lines()
            .count()
    };
    // The most replicas seen while the jobs wait and start.
    let most = std::sync::atomic::AtomicI32::new(0);
    eventually(
        &format!("{jobs} jobs ({ask:?}) scale the NodeSet to {want}"),
        REACTION,
        &a,
        async || {
            let r = replicas(&s).await;
            most.fetch_max(r, std::sync::atomic::Ordering::Relaxed);
            r == want
        },
    )
    .await;
    // The scale-up's Event says how the jobs were packed (later decisions, once nodes are
    // up, pack onto those).
    let explains = async || {
        events(&s, "ScaledUp")
            .await
            .into_iter()
            .filter_map(|e| e.note)
            .any(|n| n.contains(explained))
    };
    eventually(
        &format!("a ScaledUp event explains the packing ({explained:?})"),
        Duration::from_secs(30),
        &a,
        explains,
    )
    .await;
    eventually(
        &format!("all {jobs} run on the {want} nodes"),
        // The test's operator starts the nodes one after another (support::elastic).
        Duration::from_secs(60),
        &a,
        async || {
            most.fetch_max(replicas(&s).await, std::sync::atomic::Ordering::Relaxed);
            running() == jobs
        },
    )
    .await;
    assert_eq!(most.into_inner(), want, "scaled past what the jobs need");
    s.teardown(&cluster).await;
}

/// Nine one-CPU jobs on FUTURE nodes of 4 CPUs need 3 nodes, not 9: the shape comes from
/// the partition's configured TRES, FUTURE nodes included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn packs_one_cpu_jobs_onto_as_few_nodes_as_they_need() {
    for flavor in ["24.11", "22.05"] {
        packs_pending_jobs(
            flavor,
            &["-n", "1"],
            9,
            3,
            json!({}),
            "9 pending jobs (9 CPUs) fit 3 new nodes of 4 CPUs",
        )
        .await;
    }
}

/// Six one-GPU jobs on FUTURE nodes of 2 GPUs need 3 nodes, not 6. No node is up: the GPUs
/// per node come from the partition's configured TRES, which lists `gres/gpu` because
/// accounting tracks it (`AccountingStorageTRES=gres/gpu`, as at every site with slurmdbd).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn packs_one_gpu_jobs_by_the_gpus_the_partition_lists() {
    for flavor in ["24.11", "22.05"] {
        packs_pending_jobs(
            flavor,
            &["-n", "1", "--gres=gpu:1"],
            6,
            3,
            json!({}),
            "6 pending jobs (6 CPUs, 6 GPUs) fit 3 new nodes of 4 CPUs",
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_scales_down_while_slurmrestd_is_gone() {
    let _turn = ELASTIC.lock().await;
    let cluster = SlurmCluster::get("24.11");
    let s = setup(&cluster, false).await;
    let a = autoscaler(&cluster, &s.ns, &[]);
    a.wait_ready(Duration::from_secs(30)).await;
    let job = sbatch(&cluster, &["-N", "2", "--wrap", "sleep 300"]);
    eventually("scaled to 2", REACTION, &a, async || {
        replicas(&s).await == 2
    })
    .await;
    eventually(
        "Frozen=False while data is fresh",
        Duration::from_secs(30),
        &a,
        async || condition(&s, "Frozen").await.as_deref() == Some("False"),
    )
    .await;

    // slurmrestd goes away; behind its back the work disappears. The autoscaler cannot know,
    // and must not guess: no scale-down for longer than idle timeout + window.
    cluster.harness(&["restd-stop"]);
    cluster.run("scancel", &[&job]);
    eventually("Frozen=True", Duration::from_secs(20), &a, async || {
        condition(&s, "Frozen").await.as_deref() == Some("True")
    })
    .await;
    let until = Instant::now() + Duration::from_secs(15);
    while Instant::now() < until {
        assert_eq!(replicas(&s).await, 2, "scaled on stale data:\n{}", a.logs());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let m = a.metrics().await;
    assert_eq!(
        m.get(
            "slurmscale_autoscaler_frozen",
            &[("autoscaler", "elastic"), ("namespace", s.ns.as_str())]
        ),
        Some(1.0)
    );
    assert!(!events(&s, "Frozen").await.is_empty(), "no Frozen event");

    cluster.harness(&["restd-start"]);
    eventually(
        "unfrozen once slurmrestd is back",
        Duration::from_secs(30),
        &a,
        async || condition(&s, "Frozen").await.as_deref() == Some("False"),
    )
    .await;
    eventually("then down to 0", Duration::from_secs(60), &a, async || {
        replicas(&s).await == 0
    })
    .await;
    s.teardown(&cluster).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_acts_and_a_standby_takes_over() {
    let _turn = ELASTIC.lock().await;
    let cluster = SlurmCluster::get("24.11");
    let s = setup(&cluster, false).await;
    // Each replica reaches slurmrestd through its own proxy, which counts what it asks.
    let proxy_a = FaultProxy::start(&cluster.url).await;
    let proxy_b = FaultProxy::start(&cluster.url).await;
    let first = autoscaler_via(&cluster, &proxy_a.url, &s.ns, &["--identity", "replica-a"]);
    let second = autoscaler_via(&cluster, &proxy_b.url, &s.ns, &["--identity", "replica-b"]);
    first.wait_ready(Duration::from_secs(30)).await;
    second.wait_ready(Duration::from_secs(30)).await;
    let holder = async || support::lease_holder(&s.client, &s.ns).await;
    eventually(
        "a leader is elected",
        Duration::from_secs(20),
        &first,
        async || !holder().await.is_empty(),
    )
    .await;
    let leader = holder().await;
    // What the chart's `helm test` asks: the Lease is held, by the leader; one nobody made
    // is said to be so. (KUBECONFIG as a list, a missing file first, as kubectl takes it.)
    let kubeconfig = format!(
        "/nonexistent/kubeconfig:{}",
        support::kubeconfig_path().display()
    );
    let check = |lease: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_slurmscale"))
            .args(["check", "--lease", &format!("{}/{lease}", s.ns)])
            .env("KUBECONFIG", &kubeconfig)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (ok, said) = check("slurmscale-autoscaler");
    assert!(
        ok && said.contains(&format!(": held by {leader}, renewed ")),
        "{said}"
    );
    let (ok, said) = check("nobody");
    assert!(!ok && said.contains("no Lease"), "{said}");
    let (mut leading, standing_by, standby_proxy) = if leader == "replica-a" {
        (first, second, &proxy_b)
    } else {
        (second, first, &proxy_a)
    };
    let standby_name = if leader == "replica-a" {
        "replica-b"
    } else {
        "replica-a"
    };

    sbatch(&cluster, &["-N", "2", "--wrap", "sleep 300"]);
    eventually("the leader scales to 2", REACTION, &leading, async || {
        replicas(&s).await == 2
    })
    .await;
    for (p, is_leader) in [(&leading, 1.0), (&standing_by, 0.0)] {
        let m = p.metrics().await;
        assert_eq!(m.get("slurmscale_autoscaler_leader", &[]), Some(is_leader));
    }
    // Only the leader polls Slurm: the standby asked for no job, node or partition, only
    // pinged (its first look may come before the election settles: count from now).
    let asked = |p: &FaultProxy| {
        ["jobs", "nodes", "partitions", "diag"]
            .iter()
            .map(|e| p.requests(e))
            .sum::<usize>()
    };
    let standby_before = asked(standby_proxy);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        asked(standby_proxy),
        standby_before,
        "the standby polled Slurm"
    );
    assert!(
        standby_proxy.requests("ping") >= 1,
        "the standby never pinged"
    );
    let scaled = events(&s, "ScaledUp").await;
    assert!(!scaled.is_empty());
    assert!(
        scaled
            .iter()
            .all(|e| e.reporting_instance.as_deref() == Some(leader.as_str())),
        "a standby acted: {:?}",
        scaled
            .iter()
            .map(|e| &e.reporting_instance)
            .collect::<Vec<_>>()
    );

    // The leader dies without releasing the lease: the standby takes over once it expires.
    let _ = leading.child.kill();
    let _ = leading.child.wait();
    let died = Instant::now();
    eventually(
        "the standby takes the lease",
        TAKEOVER,
        &standing_by,
        async || holder().await == standby_name,
    )
    .await;
    // Informative only: the takeover's speed is not asserted here.
    eprintln!(
        "the standby took the lease {:?} after the leader died (6 s lease)",
        died.elapsed()
    );
    sbatch(&cluster, &["-N", "1", "--wrap", "sleep 300"]);
    eventually(
        "the new leader scales to 3",
        // It takes one full look first (docs/autoscaler.md), then decides.
        REACTION,
        &standing_by,
        async || replicas(&s).await == 3,
    )
    .await;
    assert!(
        events(&s, "ScaledUp")
            .await
            .iter()
            .any(|e| e.reporting_instance.as_deref() == Some(standby_name))
    );
    s.teardown(&cluster).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_reports_and_changes_nothing() {
    let _turn = ELASTIC.lock().await;
    let cluster = SlurmCluster::get("24.11");
    let s = setup(&cluster, true).await;
    let a = autoscaler(&cluster, &s.ns, &[]);
    a.wait_ready(Duration::from_secs(30)).await;
    sbatch(&cluster, &["-N", "3", "--wrap", "sleep 300"]);
    eventually(
        "the decision is reported",
        Duration::from_secs(20),
        &a,
        async || {
            s.autoscalers
                .get("elastic")
                .await
                .ok()
                .and_then(|n| n.status)
                .and_then(|st| st.desired_replicas)
                == Some(3)
        },
    )
    .await;
    assert!(!events(&s, "DryRun").await.is_empty(), "no DryRun event");
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        assert_eq!(replicas(&s).await, 0, "dry run changed the target");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    s.teardown(&cluster).await;
}

/// DaemonSet NodeSets place one pod per node: the autoscaler refuses them, clearly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemonset_nodesets_are_refused() {
    let cluster = SlurmCluster::get("24.11");
    let client = kube_client().await;
    let ns = namespace(&client, "daemonset").await;
    let nodesets: Api<v1beta1::NodeSet> = Api::namespaced(client.clone(), &ns);
    let spec = v1beta1::NodeSetSpec {
        replicas: Some(1),
        scaling_mode: Some(slurmscale_exporter::k8s::nodeset::ScalingMode::DaemonSet),
        ..Default::default()
    };
    nodesets
        .create(&PostParams::default(), &v1beta1::NodeSet::new("ds", spec))
        .await
        .unwrap();
    let autoscalers: Api<NodeSetAutoscaler> = Api::namespaced(client.clone(), &ns);
    let nsa: NodeSetAutoscaler = serde_json::from_value(json!({
        "apiVersion": "slurmscale.io/v1alpha1", "kind": "NodeSetAutoscaler", "metadata": {"name": "ds"},
        "spec": {"scaleTargetRef": {"name": "ds"}, "slurm": {"partitions": ["cpu"]}, "maxReplicas": 4}
    }))
    .unwrap();
    autoscalers
        .create(&PostParams::default(), &nsa)
        .await
        .unwrap();
    let a = autoscaler(&cluster, &ns, &[]);
    a.wait_ready(Duration::from_secs(30)).await;
    let api = Arc::new(autoscalers);
    eventually(
        "Ready=False DaemonSetScalingMode",
        Duration::from_secs(20),
        &a,
        async || {
            api.get("ds")
                .await
                .ok()
                .and_then(|n| n.status)
                .is_some_and(|s| {
                    s.conditions.iter().any(|c| {
                        c.type_ == "Ready"
                            && c.status == "False"
                            && c.reason == "DaemonSetScalingMode"
                    })
                })
        },
    )
    .await;
    assert_eq!(nodesets.get("ds").await.unwrap().spec.replicas, Some(1));
    let _ = api.delete("ds", &Default::default()).await;
}

/// With `--exporter-metrics` the autoscaler's leader serves what the exporter serves, from
/// its own polling (one poller for both roles), and its standby does not (its data would be
/// stale): the same Slurm numbers as an exporter beside them, the NodeSet's desired nodes,
/// and on the standby only its own health.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_serves_the_exporters_metrics_when_asked() {
    let _turn = ELASTIC.lock().await;
    let cluster = SlurmCluster::get("24.11");
    let s = setup(&cluster, false).await;
    let a = autoscaler(
        &cluster,
        &s.ns,
        &["--exporter-metrics", "--identity", "shared-a"],
    );
    let b = autoscaler(
        &cluster,
        &s.ns,
        &["--exporter-metrics", "--identity", "shared-b"],
    );
    a.wait_ready(Duration::from_secs(30)).await;
    b.wait_ready(Duration::from_secs(30)).await;
    // Each page is judged by what it says of itself: on a loaded machine a renewal can run
    // late past the 6-s lease and leadership move between two looks, which is no fault.
    let role = async |p: &Process| {
        let m = p.metrics().await;
        (m.get("slurmscale_autoscaler_leader", &[]), m)
    };
    eventually(
        "a leader is elected",
        Duration::from_secs(20),
        &a,
        async || role(&a).await.0 == Some(1.0) || role(&b).await.0 == Some(1.0),
    )
    .await;
    let exporter = support::exporter(&cluster, &support::kubeconfig_path());
    exporter.wait_ready(Duration::from_secs(30)).await;
    let same = [
        ("slurm_nodes", vec![]),
        ("slurm_partitions", vec![]),
        ("slurm_partition_nodes", vec![("partition", "elastic")]),
        ("slurm_nodes_idle", vec![]),
        (
            "slurm_nodeset_desired_nodes",
            vec![("namespace", s.ns.as_str()), ("nodeset", "elastic")],
        ),
    ];
    let (leader_matched, standby_seen) = (Cell::new(false), Cell::new(false));
    eventually(
        "the leader's page carries the exporter's numbers and the standby's no Slurm data",
        Duration::from_secs(20),
        &a,
        async || {
            let theirs = exporter.metrics().await;
            for p in [&a, &b] {
                let (leading, mine) = role(p).await;
                if leading == Some(1.0) {
                    let matched = same.iter().all(|(name, labels)| {
                        let got = mine.get(name, labels);
                        got.is_some() && got == theirs.get(name, labels)
                    });
                    leader_matched.set(leader_matched.get() || matched);
                } else {
                    assert_eq!(leading, Some(0.0), "each page says whether it leads");
                    assert_eq!(
                        mine.get("slurm_nodes", &[]),
                        None,
                        "a standby serves Slurm data"
                    );
                    standby_seen.set(true);
                }
            }
            leader_matched.get() && standby_seen.get()
        },
    )
    .await;
    s.teardown(&cluster).await;
}

/// A slow but healthy slurmrestd does not freeze the autoscaler: every answer takes 4 s
/// (longer than the fixed limit of the poll interval's "three polls plus 5 s" could absorb
/// once the poll budget spaces requests out), yet the data is never taken for stale and a
/// new job still scales the NodeSet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_slurmrestd_is_not_a_frozen_one() {
    let _turn = ELASTIC.lock().await;
    let cluster = SlurmCluster::get("24.11");
    let s = setup(&cluster, false).await;
    let proxy = FaultProxy::start(&cluster.url).await;
    proxy.set(support::fault::Fault::Slow(Duration::from_secs(4)), None);
    // A budget of 40 %: a 4 s answer is asked for again 6 s later, 10 s apart in all.
    let a = autoscaler_via(
        &cluster,
        &proxy.url,
        &s.ns,
        &["--poll-budget", "40%", "--timeout", "20s"],
    );
    a.wait_ready(Duration::from_secs(60)).await;
    eventually("Frozen=False", Duration::from_secs(60), &a, async || {
        condition(&s, "Frozen").await.as_deref() == Some("False")
    })
    .await;
    let job = sbatch(&cluster, &["-N", "1", "--wrap", "sleep 300"]);
    // Never Frozen for 40 s (four answers, 10 s apart), and on until the NodeSet scaled: the
    // scale-up has a deadline of its own, generous on purpose (two minutes of 4-s answers).
    let (window, scale_up) = (Duration::from_secs(40), Duration::from_secs(120));
    let watched = Instant::now();
    let mut scaled = false;
    while watched.elapsed() < window || (!scaled && watched.elapsed() < scale_up) {
        assert_ne!(
            condition(&s, "Frozen").await.as_deref(),
            Some("True"),
            "frozen on slow but good data:\n{}",
            a.logs()
        );
        scaled |= replicas(&s).await == 1;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(
        scaled,
        "a new job did not scale the NodeSet within {scale_up:?}:\n{}",
        a.logs()
    );
    cluster.run("scancel", &[&job]);
    s.teardown(&cluster).await;
}

/// Submits a job through slurmrestd exactly as Slinky's slurm-bridge submits the placeholder
/// for a group of pods: an admin comment listing them, exclusive nodes, one task a node (on
/// 24.11's v0.0.42, which has no EXTERNAL_JOB flag yet, it is an ordinary batch job).
async fn submit_like_slurm_bridge(cluster: &SlurmCluster, pods: &[&str]) -> u64 {
    let token = std::fs::read_to_string(&cluster.jwt_file).unwrap();
    let comment = serde_json::to_string(&json!({ "pods": pods })).unwrap();
    let body = json!({"job": {
        "name": "pod-group",
        "partition": "elastic",
        "admin_comment": comment,
        "shared": ["none"],
        "nodes": pods.len().to_string(),
        "tasks_per_node": 1,
        "current_working_directory": "/tmp",
        "environment": ["PATH=/bin:/usr/bin"],
        "script": "#!/bin/sh\nsleep 600",
        "user_id": "0",
        "group_id": "0",
    }});
    let answer: serde_json::Value = reqwest::Client::new()
        .post(format!("{}/slurm/v0.0.42/job/submit", cluster.url))
        .header("X-SLURM-USER-NAME", &cluster.user)
        .header("X-SLURM-USER-TOKEN", token.trim())
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["errors"], json!([]), "submit: {answer}");
    answer["job_id"].as_u64().expect("a job id")
}

/// Pods scheduled through Slurm: a slurm-bridge placeholder is Kubernetes demand
/// (`origin="kubernetes"`, with its pods), a site rule recognises a SUNK-style job by its
/// comment, a garbage admin comment is counted and not fatal; an autoscaler told to follow
/// batch work only leaves the NodeSet alone, and one following both scales for them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_scheduled_through_slurm_are_kubernetes_demand() {
    let _turn = ELASTIC.lock().await;
    let cluster = SlurmCluster::get("24.11");
    let s = setup_with(&cluster, false, json!({"slurm": {"origins": ["batch"]}})).await;
    let a = autoscaler(
        &cluster,
        &s.ns,
        &[
            "--exporter-metrics",
            "--kubernetes-job",
            "comment:sunk-pod*",
        ],
    );
    a.wait_ready(Duration::from_secs(30)).await;
    let pg = submit_like_slurm_bridge(&cluster, &["web/pg-0", "web/pg-1"]).await;
    let sunk = cluster.submit(&[
        "-p",
        "elastic",
        "--exclusive",
        "--comment",
        "sunk-pod-web/api-0",
        "--wrap",
        "sleep 600",
    ]);
    let origin = |o: &'static str| [("partition", "elastic"), ("origin", o)];
    eventually(
        "both placeholders are Kubernetes demand, with the bridge's pods",
        Duration::from_secs(20),
        &a,
        async || {
            let m = a.metrics().await;
            m.get("slurm_partition_origin_demand_jobs", &origin("kubernetes")) == Some(2.0)
                && m.get("slurm_partition_origin_demand_jobs", &origin("batch")) == Some(0.0)
                && m.get("slurm_partition_origin_demand_nodes", &origin("kubernetes")) == Some(3.0)
                && m.get(
                    "slurm_partition_kubernetes_pods",
                    &[("partition", "elastic"), ("state", "pending")],
                ) == Some(2.0)
        },
    )
    .await;
    // Following batch work only, the autoscaler leaves the NodeSet at 0.
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        assert_eq!(
            replicas(&s).await,
            0,
            "scaled for Kubernetes work:\n{}",
            a.logs()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Both origins (the default): it scales for them as for batch jobs.
    s.autoscalers
        .patch(
            "elastic",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"slurm": {"origins": null}}})),
        )
        .await
        .unwrap();
    eventually(
        "the NodeSet grows for the pods' placeholders",
        REACTION,
        &a,
        async || replicas(&s).await == 3,
    )
    .await;
    // An admin comment that looks like JSON but is no pod list: a batch job, counted (an
    // update moves no counter: the periodic full read, every 30 s, brings it; the poll budget
    // can push that read later on a slow machine, hence three of them).
    cluster.run(
        "scontrol",
        &["update", &format!("jobid={sunk}"), "admincomment={broken"],
    );
    eventually(
        "the garbage admin comment is counted",
        Duration::from_secs(90),
        &a,
        async || {
            let m = a.metrics().await;
            m.get("slurm_exporter_malformed_admin_comments", &[]) == Some(1.0)
        },
    )
    .await;
    assert!(!a.logs().contains("panicked"));
    cluster.run("scancel", &[&pg.to_string(), &sunk]);
    s.teardown(&cluster).await;
}
