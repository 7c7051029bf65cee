//! The Kubernetes side at scale: 10,000 GenericNodes (with 10,000 Nodes for their capacity)
//! and 500 NodeSets in the harness's real kube-apiserver. A child process runs only the
//! exporter's Kubernetes source and renderer; the parent reports its memory once the watches
//! are synced and how long a `/metrics` render takes. Run with:
//!
//!     tests/harness/up.sh
//!     cargo bench -p slurmscale-exporter --bench kube
//!
//! The objects are labelled `slurmscale-bench=1` and deleted at the end. Figures are written
//! down in exporter/benches/README.md.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;
use slurmscale_exporter::k8s::ledger::LedgerConfig;
use slurmscale_exporter::k8s::nodeset::v1beta1;
use slurmscale_exporter::k8s::watch::KubeSource;
use slurmscale_exporter::metrics::{self, MetricsOptions, PageInput};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

const GENERICNODES: usize = 10_000;
const NODESETS: usize = 500;
const LABEL: &str = "slurmscale-bench";
const NAMESPACE: &str = "slurmscale-bench";

async fn client() -> Client {
    let run = std::env::var("SLURMSCALE_RUN").unwrap_or_else(|_| "/tmp/slurmscale-harness".into());
    let path = format!("{run}/kube/kubeconfig");
    let kc = kube::config::Kubeconfig::read_from(&path)
        .unwrap_or_else(|_| panic!("no {path}: start the harness with tests/harness/up.sh"));
    Client::try_from(
        kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap(),
    )
    .unwrap()
}

fn genericnodes(c: &Client) -> Api<DynamicObject> {
    let cfg = LedgerConfig::default();
    let gvk = GroupVersionKind::gvk(&cfg.group, &cfg.version, &cfg.kind);
    Api::all_with(
        c.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, &cfg.plural),
    )
}

async fn populate(c: &Client) {
    let have = genericnodes(c)
        .list(&ListParams::default().labels(LABEL).limit(1))
        .await
        .unwrap();
    if have.metadata.remaining_item_count.unwrap_or(0) + have.items.len() as i64
        >= GENERICNODES as i64
    {
        return;
    }
    eprintln!("creating {GENERICNODES} Nodes and GenericNodes and {NODESETS} NodeSets...");
    let t = Instant::now();
    stream::iter(0..GENERICNODES)
        .for_each_concurrent(32, |i| {
            let c = c.clone();
            async move {
                let name = format!("bench-{i:05}");
                let nodes: Api<Node> = Api::all(c.clone());
                let node: Node = serde_json::from_value(json!({"metadata": {"name": name, "labels": {LABEL: "1"}}})).unwrap();
                let _ = nodes.create(&PostParams::default(), &node).await;
                let _ = nodes
                    .patch_status(&name, &PatchParams::default(), &Patch::Merge(json!({"status": {"allocatable": {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": "8"}}})))
                    .await;
                let gn: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "kai.alibabacloud.com/v1alpha1", "kind": "GenericNode",
                    "metadata": {"name": name, "labels": {LABEL: "1", "kai.alibabacloud.com/cluster-name": format!("pool{}", i % 4)}},
                    "spec": {"alias": format!("n{i:05}"), "type": "Slurm"},
                }))
                .unwrap();
                let api = genericnodes(&c);
                let _ = api.create(&PostParams::default(), &gn).await;
                let status = json!({"status": {"allocatedResources": [
                    {"type": "Slurm", "allocated": {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": 4}},
                    {"type": "Kubernetes", "allocated": {"cpu": "1735m", "memory": "2393Mi"}},
                ]}});
                let _ = api.patch_status(&name, &PatchParams::default(), &Patch::Merge(status)).await;
            }
        })
        .await;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).unwrap();
    let _ = Api::<Namespace>::all(c.clone())
        .create(&PostParams::default(), &ns)
        .await;
    let sets: Api<v1beta1::NodeSet> = Api::namespaced(c.clone(), NAMESPACE);
    stream::iter(0..NODESETS)
        .for_each_concurrent(32, |i| {
            let sets = sets.clone();
            async move {
                let mut n = v1beta1::NodeSet::new(
                    &format!("set-{i:03}"),
                    v1beta1::NodeSetSpec {
                        replicas: Some(4),
                        ..Default::default()
                    },
                );
                n.metadata.labels = Some([(LABEL.to_string(), "1".to_string())].into());
                let _ = sets.create(&PostParams::default(), &n).await;
            }
        })
        .await;
    eprintln!("created in {:.0} s", t.elapsed().as_secs_f64());
}

async fn cleanup(c: &Client) {
    let lp = ListParams::default().labels(LABEL);
    let _ = genericnodes(c)
        .delete_collection(&DeleteParams::default(), &lp)
        .await;
    let _ = Api::<Node>::all(c.clone())
        .delete_collection(&DeleteParams::default(), &lp)
        .await;
    let _ = Api::<Namespace>::all(c.clone())
        .delete(NAMESPACE, &DeleteParams::default())
        .await;
}

fn rss_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix(field)
                    .map(|v| v.trim().trim_end_matches(" kB").trim().parse().unwrap_or(0))
            })
        })
        .unwrap_or(0)
}

/// Child: watch, wait for sync, render; report on stdout and stay alive until killed.
async fn child() {
    let c = client().await;
    let changed = Arc::new(Notify::new());
    let source = KubeSource::start(
        c,
        LedgerConfig::default(),
        changed.clone(),
        CancellationToken::new(),
    );
    let t = Instant::now();
    loop {
        let s = source.snapshot();
        if s.ledger.len() >= GENERICNODES
            && s.nodesets.len() >= NODESETS
            && s.capacity.len() >= GENERICNODES
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let synced = t.elapsed();
    let opts = MetricsOptions::default();
    let mut best = Duration::MAX;
    let mut len = 0;
    for _ in 0..5 {
        let t = Instant::now();
        let snap = source.snapshot();
        let input = PageInput {
            kube: Some(&snap),
            ..PageInput::new(&[], &opts, SystemTime::now())
        };
        let text = metrics::render(&input, |_| {});
        best = best.min(t.elapsed());
        len = text.len();
    }
    println!(
        "{} {} {}",
        synced.as_secs_f64(),
        best.as_secs_f64() * 1e3,
        len
    );
    tokio::time::sleep(Duration::from_secs(3600)).await;
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if std::env::args().any(|a| a == "--child") {
        return child().await;
    }
    let c = client().await;
    populate(&c).await;
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .arg("--child")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();
    let mut out = tokio::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    tokio::io::AsyncBufReadExt::read_line(&mut out, &mut line)
        .await
        .unwrap();
    let f: Vec<f64> = line
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    let (rss, hwm) = (
        rss_kib(pid, "VmRSS:") as f64 / 1024.0,
        rss_kib(pid, "VmHWM:") as f64 / 1024.0,
    );
    let _ = child.kill().await;
    println!(
        "| {GENERICNODES} GenericNodes + {GENERICNODES} Nodes + {NODESETS} NodeSets | initial list + watch sync | RSS after sync | peak RSS | /metrics render (best of 5) | page |"
    );
    println!("|---|---|---|---|---|---|");
    println!(
        "| real kube-apiserver v1.20.2 | {:.1} s | {rss:.0} MiB | {hwm:.0} MiB | {:.0} ms | {:.1} MiB |",
        f[0],
        f[1],
        f[2] / 1048576.0
    );
    if std::env::var_os("SLURMSCALE_BENCH_KEEP_OBJECTS").is_none() {
        cleanup(&c).await;
    }
}
