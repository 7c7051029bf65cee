//! Reaction latency: from `sbatch` returning to the autoscaler's patch of the NodeSet's
//! scale subresource, against the harness's real Slurm 24.11 and kube-apiserver, 20 trials.
//! Targets: p50 ≤ 2 s, p99 ≤ 5 s (Prometheus → KEDA → HPA: ≈ 75 s worst case). Run with:
//!
//!     tests/harness/up.sh
//!     cargo bench -p slurmscale-autoscaler --bench reaction
//!     cargo bench -p slurmscale-autoscaler --bench reaction -- slurm-planned
//!
//! The autoscaler runs in this process with its defaults (poll every 2 s); the NodeSet is
//! watched and the moment its `spec.replicas` changes is taken as the patch time. No nodes
//! are started: each job stays pending, is cancelled, and the NodeSet returns to 0 before
//! the next trial. Trials start once the autoscaler's data is fresh. Other jobs in the
//! cluster (e.g. 20,000 held ones on the cpu partition) are the load it works under.
//!
//! `slurm-planned`: the same on the harness's power-saving `planned` partition with
//! `mode: SlurmPlanned` (target: ≤ power_save_interval + 2 s, the interval being 1 s there):
//! the patch follows slurmctld's power-up of the node it allocated. Between trials the bench
//! forces the node down again (`scontrol update … state=power_down_force`) and sets the
//! NodeSet back to 0 once slurmctld no longer asks for it. slurmctld's ResumeProgram (the
//! harness's runs the documented `examples/autoscaler/resume-program.sh`) POSTs `/wake` to
//! the autoscaler, which reads nodes at once; `-- slurm-planned no-wake` leaves it out (the
//! poll alone), the baseline the same minute.
//! Figures are written down in autoscaler/benches/README.md.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use slurmscale_autoscaler::crd::NodeSetAutoscaler;
use slurmscale_autoscaler::{AutoscalerConfig, run};
use slurmscale_exporter::config::{AuthConfig, ClusterConfig};
use slurmscale_exporter::k8s::nodeset::v1beta1;
use slurmscale_exporter::slurm::SigningAlgorithm;
use tokio_util::sync::CancellationToken;

const TRIALS: usize = 20;

fn env(path: &str) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|_| panic!("no {path}: start the harness with tests/harness/up.sh"));
    text.lines()
        .filter_map(|l| l.strip_prefix("export ")?.split_once('='))
        .map(|(k, v)| (k.to_string(), v.trim_matches('"').to_string()))
        .collect()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let planned = std::env::args().any(|a| a == "slurm-planned");
    let wake = planned && !std::env::args().any(|a| a == "no-wake");
    // The NodeSet is named after its partition.
    let (part, nodes_per_job) = if planned {
        ("planned", 1)
    } else {
        ("elastic", 2)
    };
    let run_dir =
        std::env::var("SLURMSCALE_RUN").unwrap_or_else(|_| "/tmp/slurmscale-harness".into());
    let slurm = env(&format!("{run_dir}/slurm-24.11/env"));
    let kc = kube::config::Kubeconfig::read_from(format!("{run_dir}/kube/kubeconfig")).unwrap();
    let client = kube::Client::try_from(
        kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap(),
    )
    .unwrap();
    let sbatch = |args: &[&str]| -> String {
        let out = std::process::Command::new(format!("{}/sbatch", slurm["SLURM_BIN"]))
            .env("SLURM_CONF", &slurm["SLURM_CONF"])
            .env_remove("SLURM_JWT")
            .current_dir(std::env::temp_dir())
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let scancel = |id: &str| {
        let _ = std::process::Command::new(format!("{}/scancel", slurm["SLURM_BIN"]))
            .env("SLURM_CONF", &slurm["SLURM_CONF"])
            .arg(id)
            .status();
    };
    let scontrol = |args: &[&str]| -> String {
        let out = std::process::Command::new(format!("{}/scontrol", slurm["SLURM_BIN"]))
            .env("SLURM_CONF", &slurm["SLURM_CONF"])
            .env_remove("SLURM_JWT")
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // The planned records' states, once each exists.
    let records = || -> Vec<String> {
        scontrol(&["-o", "show", "node", "planned-[0-3]"])
            .lines()
            .filter_map(|l| {
                l.split_whitespace()
                    .find_map(|w| w.strip_prefix("State="))
                    .map(String::from)
            })
            .collect()
    };
    let _ = std::process::Command::new(format!("{}/scancel", slurm["SLURM_BIN"]))
        .env("SLURM_CONF", &slurm["SLURM_CONF"])
        .args(["--user=root", &format!("--partition={part}")])
        .status();

    // A run that failed left its namespace, whose autoscaler would act on the same
    // partition beside ours (every autoscaler process reconciles every namespace): gone first.
    let namespaces = Api::<Namespace>::all(client.clone());
    let autoscalers_of = |ns: &str| Api::<NodeSetAutoscaler>::namespaced(client.clone(), ns);
    for old in namespaces.list(&Default::default()).await.unwrap() {
        let name = old.metadata.name.unwrap_or_default();
        if name.starts_with("reaction-") {
            let _ = autoscalers_of(&name)
                .delete_collection(&Default::default(), &Default::default())
                .await;
            let _ = namespaces.delete(&name, &Default::default()).await;
        }
    }
    let ns = format!("reaction-{}", std::process::id());
    let n: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &n)
        .await
        .unwrap();
    let nodesets: Api<v1beta1::NodeSet> = Api::namespaced(client.clone(), &ns);
    // slurm-planned: slurmd with -b (or the autoscaler refuses), its shape for the records.
    let nodeset: v1beta1::NodeSet = serde_json::from_value(json!({
        "apiVersion": "slinky.slurm.net/v1beta1", "kind": "NodeSet", "metadata": {"name": part},
        "spec": {"replicas": 0, "extraConf": "CPUs=4 RealMemory=8000", "slurmd": {"args": ["-b"]}},
    }))
    .unwrap();
    nodesets
        .create(&PostParams::default(), &nodeset)
        .await
        .unwrap();
    // As slurm-operator reports it (slurm-planned holds while status and spec differ).
    let nodeset_at = async |replicas: i32| {
        let status = json!({"status": {"replicas": replicas, "selector": format!("app={part}"), "nodeSetHash": "bench"}});
        nodesets
            .patch_status(part, &PatchParams::default(), &Patch::Merge(status))
            .await
            .unwrap();
    };
    nodeset_at(0).await;
    let spec = if planned {
        json!({"scaleTargetRef": {"name": part}, "maxReplicas": 4, "mode": "SlurmPlanned"})
    } else {
        json!({"scaleTargetRef": {"name": part}, "maxReplicas": 8, "idleTimeoutSeconds": 1,
               "scaleDown": {"stabilizationWindowSeconds": 1, "maxStep": 8}})
    };
    let nsa: NodeSetAutoscaler = serde_json::from_value(json!({
        "apiVersion": "slurmscale.io/v1alpha1", "kind": "NodeSetAutoscaler", "metadata": {"name": part},
        "spec": spec,
    }))
    .unwrap();
    let autoscalers: Api<NodeSetAutoscaler> = Api::namespaced(client.clone(), &ns);
    autoscalers
        .create(&PostParams::default(), &nsa)
        .await
        .unwrap();

    let stop = CancellationToken::new();
    let cluster = ClusterConfig {
        name: slurm["SLURM_CLUSTER"].clone(),
        url: slurm["SLURM_REST_URL"].clone(),
        user: slurm["SLURM_USER"].clone(),
        auth: AuthConfig::Key {
            path: slurm["HARNESS_JWT_KEY_FILE"].clone().into(),
            algorithm: SigningAlgorithm::Hs256,
            lifetime: Duration::from_secs(600),
        },
        api_version: None,
        ca_file: None,
        timeout: Duration::from_secs(30),
        max_requests_per_second: None,
        kubernetes_jobs: Default::default(),
    };
    // A port of its own, named to the harness's ResumeProgram when it is to wake us.
    let listen = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap();
    let wake_file = &slurm["SLURM_WAKE_FILE"];
    if wake {
        std::fs::write(wake_file, listen.to_string()).unwrap();
    } else {
        let _ = std::fs::remove_file(wake_file);
    }
    let cfg = AutoscalerConfig {
        budget: Default::default(),
        request_max_jobs: slurmscale_exporter::collect::jobs::REQUEST_MAX_JOBS,
        exporter_metrics: None,
        web: None,
        telemetry_path: "/metrics".into(),
        clusters: vec![cluster],
        interval: Duration::from_secs(2),
        listen,
        lease: None,
        identity: "reaction-bench".into(),
        kube_timeout: slurmscale_autoscaler::actuator::DEFAULT_TIMEOUT,
        dry_run: false,
        // slurm-planned makes its records with scontrol (REST creates nodes from v0.0.44).
        scontrol: slurmscale_autoscaler::slurm_nodes::Scontrol {
            bin: Some(format!("{}/scontrol", slurm["SLURM_BIN"]).into()),
            conf: Some(slurm["SLURM_CONF"].clone().into()),
        },
        ledger: Default::default(),
    };
    tokio::spawn(run(client.clone(), cfg, stop.clone()));

    // Replicas as the watch sees them, with the time seen.
    let (tx, mut rx) = tokio::sync::watch::channel((0i32, Instant::now()));
    let watched = nodesets.clone();
    tokio::spawn(async move {
        let mut s = std::pin::pin!(watcher(watched, watcher::Config::default()).applied_objects());
        while let Some(Ok(n)) = s.next().await {
            let r = n.spec.replicas.unwrap_or(0);
            if r != tx.borrow().0 {
                tx.send_replace((r, Instant::now()));
            }
        }
    });
    // The first decision needs the whole job list once (seconds at 20,000 jobs): trials
    // start when the autoscaler says its data is fresh.
    let warm = Instant::now();
    // slurm-planned: and once its four records exist, powered down.
    let powered_down = || {
        let r = records();
        r.len() == 4
            && r.iter().all(|s| {
                s.split('+').any(|w| w == "POWERED_DOWN")
                    && !s.split('+').any(|w| w == "POWERING_DOWN" || w == "DOWN")
            })
    };
    loop {
        let frozen = autoscalers.get(part).await.ok().and_then(|a| {
            a.status?
                .conditions
                .into_iter()
                .find(|c| c.type_ == "Frozen")
                .map(|c| c.status)
        });
        if frozen.as_deref() == Some("False") && (!planned || powered_down()) {
            break;
        }
        assert!(
            warm.elapsed() < Duration::from_secs(600),
            "no fresh data within 10 min"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    if planned {
        // Slurm 24.11.5 does not allocate CLOUD records made after a dynamic node was deleted
        // (the tests delete theirs) until a reconfigure: once, as the README tells a site.
        scontrol(&["reconfigure"]);
        tokio::time::sleep(Duration::from_secs(2)).await;
        // A reconfigure leaves records resumed after earlier pods unschedulable until they
        // are set DOWN and resumed again (README).
        scontrol(&[
            "update",
            "nodename=planned-[0-3]",
            "state=down",
            "reason=bench",
        ]);
        scontrol(&["update", "nodename=planned-[0-3]", "state=resume"]);
    }
    let background = {
        let out = std::process::Command::new(format!("{}/squeue", slurm["SLURM_BIN"]))
            .env("SLURM_CONF", &slurm["SLURM_CONF"])
            .env_remove("SLURM_JWT")
            .args(["-h", "-o", "%A"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).lines().count()
    };
    println!(
        "{background} jobs in slurmctld; first fresh data {:.1} s after start",
        warm.elapsed().as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(5)).await;

    let mut lat = Vec::new();
    for trial in 0..TRIALS {
        // Submit at a random point of the poll cycle, as users do.
        tokio::time::sleep(Duration::from_millis(137 * trial as u64 % 2000)).await;
        let job = sbatch(&[
            "--parsable",
            "-o",
            "/dev/null",
            "-p",
            part,
            "-N",
            &nodes_per_job.to_string(),
            "--wrap",
            "sleep 60",
        ]);
        let submitted = Instant::now();
        let seen = tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                rx.changed().await.unwrap();
                let (r, at) = *rx.borrow();
                if r == nodes_per_job {
                    return at;
                }
            }
        })
        .await
        .expect("no scale-up within 30 s");
        lat.push(seen.saturating_duration_since(submitted));
        scancel(&job);
        if planned {
            // No pod comes: force the node down, and once slurmctld no longer asks for it,
            // the NodeSet back to 0 (what the pod's retirement would have done).
            let deadline = Instant::now() + Duration::from_secs(60);
            while !powered_down() {
                assert!(
                    Instant::now() < deadline,
                    "records not down: {:?}",
                    records()
                );
                for (i, state) in records().iter().enumerate() {
                    if state.contains("POWERING_UP") || !state.contains("POWER") {
                        let node = format!("nodename=planned-{i}");
                        scontrol(&["update", &node, "state=power_down_force"]);
                    }
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            // Until the autoscaler has seen them down too (a poll later), it would follow
            // the power-up it last saw: set 0 until 0 stays.
            loop {
                tokio::time::sleep(Duration::from_secs(3)).await;
                if rx.borrow().0 == 0 {
                    break;
                }
                let zero = json!({"spec": {"replicas": 0}});
                nodesets
                    .patch(part, &PatchParams::default(), &Patch::Merge(zero))
                    .await
                    .unwrap();
            }
        }
        tokio::time::timeout(Duration::from_secs(30), async {
            while rx.borrow().0 != 0 {
                rx.changed().await.unwrap();
            }
        })
        .await
        .expect("no return to 0 within 30 s");
    }
    stop.cancel();
    let _ = Api::<Namespace>::all(client)
        .delete(&ns, &Default::default())
        .await;
    let mut sorted = lat.clone();
    sorted.sort();
    let pct = |p: f64| {
        sorted[((sorted.len() as f64 * p).ceil() as usize)
            .saturating_sub(1)
            .min(sorted.len() - 1)]
    };
    let _ = std::fs::remove_file(wake_file);
    let mode = match (planned, wake) {
        (true, true) => "slurm-planned, woken by ResumeProgram, ",
        (true, false) => "slurm-planned, no wake, ",
        _ => "",
    };
    println!("| {TRIALS} trials, {mode}poll every 2 s | p50 (≤ 2 s) | p99 (≤ 5 s) | min | max |");
    println!("|---|---|---|---|---|");
    println!(
        "| sbatch → NodeSet scale patch | {:.2} s | {:.2} s | {:.2} s | {:.2} s |",
        pct(0.5).as_secs_f64(),
        pct(0.99).as_secs_f64(),
        sorted[0].as_secs_f64(),
        sorted[sorted.len() - 1].as_secs_f64()
    );
    println!(
        "all trials (s): {:?}",
        lat.iter()
            .map(|d| (d.as_secs_f64() * 100.0).round() / 100.0)
            .collect::<Vec<_>>()
    );
}
