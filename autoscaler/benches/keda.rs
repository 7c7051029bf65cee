//! KEDA beside the built-in autoscaler, on the same jobs in the same run: how long from
//! `sbatch` to a NodeSet's `spec.replicas` for each, against the harness's real Slurm 24.11,
//! Kubernetes 1.37 (the HPA in kube-controller-manager) and KEDA 2.21 (operator and metrics
//! adapter behind the aggregation layer). Run with:
//!
//!     tests/harness/up.sh && tests/harness/kube.sh keda-start
//!     cargo bench -p slurmscale-autoscaler --bench keda
//!
//! Two NodeSets serve the `elastic` partition (`slurmscale.io/partition`): `builtin`, scaled by
//! a NodeSetAutoscaler with the CRD's defaults, and `keda`, scaled by
//! `examples/keda/scaledobject-metrics-api.yaml` as shipped — only its exporter URL, namespace
//! and target name point at this run. The autoscaler runs in this process and, with
//! `--exporter-metrics`, serves the exporter's page KEDA reads (one poller for both, every
//! 2 s). A stand-in for slurm-operator copies each NodeSet's `spec.replicas` to its status
//! (no pods: no slurmd starts, so the jobs stay pending and keep asking). Whole-node jobs are
//! submitted one at a time, each once both NodeSets have caught up with the last: the first
//! is a scale from zero, the rest scale-ups of one node. Then every job is cancelled and the
//! time each takes back to zero is measured. Figures: autoscaler/benches/README.md.
//!
//! A third NodeSet, `keda-prometheus`, is scaled the way Slinky's guide sets KEDA up: by
//! `examples/keda/scaledobject-prometheus.yaml`, through a real Prometheus (Debian's) scraping
//! the same page every 30 s (SLURMSCALE_KEDA_SCRAPE_INTERVAL), kube-prometheus-stack's and the
//! chart's default.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use slurmscale_autoscaler::crd::NodeSetAutoscaler;
use slurmscale_autoscaler::{AutoscalerConfig, run};
use slurmscale_exporter::config::{AuthConfig, ClusterConfig};
use slurmscale_exporter::k8s::nodeset::v1beta1;
use slurmscale_exporter::metrics::MetricsOptions;
use slurmscale_exporter::slurm::SigningAlgorithm;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Jobs per round: the partition's size.
const NODES: i32 = 8;
const ROUNDS: usize = 2;
const SCALERS: [&str; 3] = ["builtin", "keda", "keda-prometheus"];

fn env(path: &str) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|_| panic!("no {path}: start the harness with tests/harness/up.sh"));
    text.lines()
        .filter_map(|l| l.strip_prefix("export ")?.split_once('='))
        .map(|(k, v)| (k.to_string(), v.trim_matches('"').to_string()))
        .collect()
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() as f64 * q).ceil() as usize)
        .saturating_sub(1)
        .min(sorted.len() - 1)]
}

/// The example as a site applies it, pointed at this run.
fn scaled_object(ns: &str, cluster: &str, url: &str) -> DynamicObject {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/keda/scaledobject-metrics-api.yaml"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let mut so: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    so["metadata"]["namespace"] = json!(ns);
    so["spec"]["scaleTargetRef"]["name"] = json!("keda");
    let meta = &mut so["spec"]["triggers"][0]["metadata"];
    meta["url"] = json!(url);
    meta["valueLocation"] = json!(format!(
        "slurm_nodeset_desired_nodes{{cluster=\"{cluster}\",namespace=\"{ns}\",nodeset=\"keda\"}}"
    ));
    serde_json::from_value(so).unwrap()
}

/// The Prometheus example as a site applies it, pointed at this run's Prometheus and NodeSet.
fn scaled_object_prometheus(ns: &str, prometheus: &str) -> DynamicObject {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/keda/scaledobject-prometheus.yaml"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let mut so: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    so["metadata"]["namespace"] = json!(ns);
    so["metadata"]["name"] = json!("keda-prometheus");
    so["spec"]["scaleTargetRef"]["name"] = json!("keda-prometheus");
    let meta = &mut so["spec"]["triggers"][0]["metadata"];
    meta["serverAddress"] = json!(prometheus);
    meta["query"] = json!(format!(
        "max(slurm_nodeset_desired_nodes{{namespace=\"{ns}\",nodeset=\"keda-prometheus\"}})"
    ));
    serde_json::from_value(so).unwrap()
}

/// Debian's Prometheus scraping `port` every `interval`; killed (by its pid) when dropped,
/// its files with it.
struct Prometheus {
    child: std::process::Child,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn prometheus(target: u16, listen: u16, interval: &str) -> Prometheus {
    let dir = tempfile::tempdir().unwrap();
    let config = json!({
        "global": {"scrape_interval": interval},
        "scrape_configs": [{"job_name": "slurmscale-autoscaler", "honor_labels": true,
            "static_configs": [{"targets": [format!("127.0.0.1:{target}")]}]}],
    });
    let file = dir.path().join("prometheus.yml");
    std::fs::write(&file, config.to_string()).unwrap();
    let child = std::process::Command::new("prometheus")
        .arg(format!("--config.file={}", file.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{listen}"))
        .arg("--log.level=warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("prometheus (Debian's prometheus package; tests/harness/deps.sh installs it)");
    Prometheus { child, _dir: dir }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
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
    let slurm_cmd = |cmd: &str, args: &[&str]| -> String {
        let out = std::process::Command::new(format!("{}/{cmd}", slurm["SLURM_BIN"]))
            .env("SLURM_CONF", &slurm["SLURM_CONF"])
            .env_remove("SLURM_JWT")
            .current_dir(std::env::temp_dir())
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{cmd}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    slurm_cmd("scancel", &["--user=root", "--partition=elastic"]);

    let ns = format!("keda-bench-{}", std::process::id());
    let n: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &n)
        .await
        .unwrap();
    let nodesets: Api<v1beta1::NodeSet> = Api::namespaced(client.clone(), &ns);
    for name in SCALERS {
        let mut set = v1beta1::NodeSet::new(
            name,
            v1beta1::NodeSetSpec {
                replicas: Some(0),
                ..Default::default()
            },
        );
        set.metadata.annotations = Some(BTreeMap::from([(
            "slurmscale.io/partition".to_string(),
            "elastic".to_string(),
        )]));
        nodesets.create(&PostParams::default(), &set).await.unwrap();
    }
    let nsa: NodeSetAutoscaler = serde_json::from_value(json!({
        "apiVersion": "slurmscale.io/v1alpha1", "kind": "NodeSetAutoscaler",
        "metadata": {"name": "builtin"},
        "spec": {"scaleTargetRef": {"name": "builtin"}, "maxReplicas": NODES},
    }))
    .unwrap();
    Api::<NodeSetAutoscaler>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &nsa)
        .await
        .unwrap();

    let free_port = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    };
    let port = free_port();
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
    let interval = Duration::from_secs(2);
    let cfg = AutoscalerConfig {
        budget: Default::default(),
        request_max_jobs: slurmscale_exporter::collect::jobs::REQUEST_MAX_JOBS,
        exporter_metrics: Some(MetricsOptions {
            interval,
            ..MetricsOptions::default()
        }),
        web: None,
        telemetry_path: "/metrics".into(),
        clusters: vec![cluster],
        interval,
        listen: ([127, 0, 0, 1], port).into(),
        lease: None,
        identity: "keda-bench".into(),
        kube_timeout: slurmscale_autoscaler::actuator::DEFAULT_TIMEOUT,
        dry_run: false,
        scontrol: Default::default(),
        ledger: Default::default(),
    };
    tokio::spawn(run(client.clone(), cfg, stop.clone()));

    let gvk = GroupVersionKind::gvk("keda.sh", "v1alpha1", "ScaledObject");
    let scaled: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &ApiResource::from_gvk_with_plural(&gvk, "scaledobjects"),
    );
    let so = scaled_object(
        &ns,
        &slurm["SLURM_CLUSTER"],
        &format!("http://127.0.0.1:{port}/metrics"),
    );
    scaled
        .create(&PostParams::default(), &so)
        .await
        .unwrap_or_else(|e| {
            panic!("no ScaledObject ({e}): start KEDA with tests/harness/kube.sh keda-start")
        });
    let scrape = std::env::var("SLURMSCALE_KEDA_SCRAPE_INTERVAL").unwrap_or_else(|_| "30s".into());
    let prom_port = free_port();
    let _prometheus = prometheus(port, prom_port, &scrape);
    // Only once Prometheus has the series: before, the example's fallback (an empty answer is
    // an error, three of them hold 8 nodes) would scale it up before any job.
    let query = format!(
        "http://127.0.0.1:{prom_port}/api/v1/query?query=slurm_nodeset_desired_nodes%7Bnodeset%3D%22keda-prometheus%22%7D"
    );
    let started = Instant::now();
    loop {
        let has = match reqwest::get(&query).await {
            Ok(r) => r
                .text()
                .await
                .unwrap_or_default()
                .contains("keda-prometheus"),
            Err(_) => false,
        };
        if has {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "Prometheus has no slurm_nodeset_desired_nodes for keda-prometheus after 2 min"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    scaled
        .create(
            &PostParams::default(),
            &scaled_object_prometheus(&ns, &format!("http://127.0.0.1:{prom_port}")),
        )
        .await
        .unwrap();

    // Each NodeSet's spec.replicas with the moment the watch saw it change.
    let mut seen: BTreeMap<&str, watch::Receiver<(i32, Instant)>> = BTreeMap::new();
    let mut senders = BTreeMap::new();
    for name in SCALERS {
        let (tx, rx) = watch::channel((0i32, Instant::now()));
        seen.insert(name, rx);
        senders.insert(name.to_string(), tx);
    }
    let watched = nodesets.clone();
    tokio::spawn(async move {
        let mut s = std::pin::pin!(watcher(watched, watcher::Config::default()).applied_objects());
        while let Some(Ok(set)) = s.next().await {
            let name = set.metadata.name.clone().unwrap_or_default();
            let r = set.spec.replicas.unwrap_or(0);
            let Some(tx) = senders.get(&name) else {
                continue;
            };
            if r != tx.borrow().0 {
                tx.send_replace((r, Instant::now()));
            }
        }
    });
    // slurm-operator's part, without pods: the status follows spec.replicas (the HPA reads
    // the current replicas and the selector from it).
    let status_api = nodesets.clone();
    let mut status_rx = seen.clone();
    tokio::spawn(async move {
        loop {
            for (name, rx) in status_rx.iter_mut() {
                let r = rx.borrow_and_update().0;
                let status = json!({"status": {"replicas": r, "readyReplicas": r,
                    "selector": format!("app.kubernetes.io/instance={name}")}});
                let _ = status_api
                    .patch_status(name, &PatchParams::default(), &Patch::Merge(status))
                    .await;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });

    // Waits until `name` holds `want` replicas; how long after `from`.
    let reach = |rx: &watch::Receiver<(i32, Instant)>, want: i32, from: Instant, limit: u64| {
        let mut rx = rx.clone();
        async move {
            tokio::time::timeout(Duration::from_secs(limit), async {
                loop {
                    let (r, at) = *rx.borrow_and_update();
                    if r == want {
                        return at.saturating_duration_since(from).as_secs_f64();
                    }
                    rx.changed().await.unwrap();
                }
            })
            .await
            .ok()
        }
    };

    // KEDA's first poll, the exporter's first fresh page and Prometheus's first scrapes.
    tokio::time::sleep(Duration::from_secs(45)).await;
    let mut up: BTreeMap<&str, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    let mut down: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for _ in 0..ROUNDS {
        let mut jobs = Vec::new();
        for k in 1..=NODES {
            // Submit at a spread of points in both pollers' cycles.
            tokio::time::sleep(Duration::from_millis(1_700 * k as u64 % 15_000)).await;
            jobs.push(slurm_cmd(
                "sbatch",
                &[
                    "--parsable",
                    "-o",
                    "/dev/null",
                    "-p",
                    "elastic",
                    "-N",
                    "1",
                    // A node each: one-CPU jobs would pack four to a node.
                    "--exclusive",
                    "--wrap",
                    "sleep 600",
                ],
            ));
            let at = Instant::now();
            for name in SCALERS {
                let took = reach(&seen[name], k, at, 300)
                    .await
                    .unwrap_or_else(|| panic!("{name}: not at {k} replicas 300 s after sbatch"));
                let (from_zero, step) = up.entry(name).or_default();
                if k == 1 { from_zero } else { step }.push(took);
            }
        }
        for j in &jobs {
            slurm_cmd("scancel", &[j]);
        }
        let at = Instant::now();
        for name in SCALERS {
            let took = reach(&seen[name], 0, at, 1200)
                .await
                .unwrap_or_else(|| panic!("{name}: not back to 0 within 20 min"));
            down.entry(name).or_default().push(took);
        }
    }
    stop.cancel();
    let _ = Api::<Namespace>::all(client)
        .delete(&ns, &Default::default())
        .await;

    println!("Prometheus scrapes every {scrape}");
    println!(
        "| {ROUNDS} rounds of {NODES} whole-node jobs | from 0 (each) | +1 node p50 | p95 | max | back to 0 after the last scancel (each) |"
    );
    println!("|---|---|---|---|---|---|");
    for name in SCALERS {
        let (mut zero, mut step) = up[name].clone();
        zero.sort_by(f64::total_cmp);
        step.sort_by(f64::total_cmp);
        let list = |v: &[f64]| {
            v.iter()
                .map(|s| format!("{s:.1} s"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!(
            "| {name} | {} | {:.1} s | {:.1} s | {:.1} s | {} |",
            list(&zero),
            quantile(&step, 0.5),
            quantile(&step, 0.95),
            step[step.len() - 1],
            list(&down[name])
        );
    }
}
