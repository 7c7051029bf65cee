//! The load scenarios, shared by the test (`tests/load.rs`, generous bounds) and
//! the bench (`benches/load.rs`, the figures in the benches READMEs):
//!
//! * one `slurmscale autoscaler` with many NodeSetAutoscalers spread over three clusters —
//!   the two real Slurms and a third whose slurmrestd (a fault proxy in front of the real
//!   24.11 one, under another cluster name) answers every request with a 502 — and a job
//!   submitted to the elastic partition of both real Slurms: how long each healthy
//!   NodeSet takes to follow it, how old each autoscaler's last decision gets, whether the
//!   failing cluster's autoscalers stay Frozen and their NodeSets untouched, and the
//!   process's memory;
//! * one `slurmscale exporter` with ten clusters (the real Slurms under nine names, and one
//!   whose URL black-holes connections: a listener whose accept queue is full, so a connect
//!   gets no answer at all) scraped over and over: how long each scrape takes and how fresh
//!   the nine healthy clusters stay.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;
use slurmscale_autoscaler::crd::NodeSetAutoscaler;
use slurmscale_exporter::k8s::nodeset::v1beta1;

use super::fault::{Fault, FaultProxy};
use super::{Metrics, Process, SlurmCluster, kube_client, kubeconfig_path, namespace};

/// The name the failing cluster goes by.
pub const FAILING: &str = "failing";

/// The name the black-holed cluster goes by.
pub const HOLE: &str = "hole";

/// How long, after one poll, every healthy NodeSet has to follow its job. Generous on
/// purpose: the test asks only that they all follow; how fast is what `cargo bench --bench
/// load` measures (it shares this code, and stops waiting as soon as all have followed).
const FOLLOW: Duration = Duration::from_secs(60);

/// How long the NodeSet watch has to list them all: generous on purpose, the listing's speed
/// is `cargo bench -p slurmscale-exporter --bench kube`'s to measure.
const WATCH_LISTS: Duration = Duration::from_secs(60);

/// Peak and current resident memory of a process, from /proc (KiB).
pub fn memory_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// The `q` quantile (0..=1) of `xs`, nearest rank.
pub fn quantile(xs: &[f64], q: f64) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

fn unix(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}

#[derive(Debug)]
pub struct AutoscalerReport {
    pub autoscalers: usize,
    pub healthy: usize,
    pub interval: Duration,
    /// From all objects created to every autoscaler's first status (healthy: decided,
    /// failing: Frozen).
    pub first_status: Duration,
    /// Per healthy NodeSet: sbatch returning → its `spec.replicas` following (seconds).
    pub reaction: Vec<f64>,
    /// Per healthy autoscaler, over a steady stretch: the longest gap between two of its
    /// decisions (seconds).
    pub decision_gap: Vec<f64>,
    /// Failing-cluster NodeSets whose replicas ever moved, and autoscalers not Frozen.
    pub failing_moved: Vec<String>,
    pub failing_not_frozen: Vec<String>,
    /// Peak and final resident memory of the autoscaler process (KiB).
    pub hwm_kib: u64,
    pub rss_kib: u64,
}

impl AutoscalerReport {
    pub fn print(&self) {
        let r = &self.reaction;
        let a = &self.decision_gap;
        eprintln!(
            "autoscaler load: {} NodeSetAutoscalers ({} on healthy clusters), poll every {:?}\n  \
             first status for all: {:.1} s\n  \
             sbatch -> NodeSet scaled, {} NodeSets: p50 {:.2} s, p99 {:.2} s, max {:.2} s\n  \
             longest gap between decisions, {} autoscalers: p50 {:.2} s, p99 {:.2} s, max {:.2} s\n  \
             failing cluster: {} NodeSets moved, {} autoscalers not Frozen\n  \
             memory: peak {:.0} MiB, now {:.0} MiB",
            self.autoscalers,
            self.healthy,
            self.interval,
            self.first_status.as_secs_f64(),
            r.len(),
            quantile(r, 0.5),
            quantile(r, 0.99),
            quantile(r, 1.0),
            a.len(),
            quantile(a, 0.5),
            quantile(a, 0.99),
            quantile(a, 1.0),
            self.failing_moved.len(),
            self.failing_not_frozen.len(),
            self.hwm_kib as f64 / 1024.0,
            self.rss_kib as f64 / 1024.0,
        );
    }
}

/// What the NodeSet watch saw: each NodeSet's replicas and when a healthy one reached 2
/// after its cluster's job was submitted; any move of a failing cluster's NodeSet.
struct Seen {
    n: usize,
    replicas: BTreeMap<String, (i32, Option<Instant>)>,
    failing_moved: Vec<String>,
    submitted: BTreeMap<String, Instant>,
}

impl Seen {
    fn record(&mut self, (name, r, at): (String, i32, Instant), clusters: &[String; 3]) {
        let i: usize = name.trim_start_matches("ns").parse().unwrap_or(usize::MAX);
        if i >= self.n {
            return;
        }
        if i % 3 == 2 && r != 1 {
            self.failing_moved.push(format!("{name}: {r}"));
        }
        let after_submit = self.submitted.contains_key(&clusters[i % 3]);
        let e = self.replicas.entry(name).or_insert((r, None));
        e.0 = r;
        if r >= 2 && e.1.is_none() && after_submit {
            e.1 = Some(at);
        }
    }
}

fn frozen(nsa: &NodeSetAutoscaler) -> Option<bool> {
    let c = nsa
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == "Frozen")?;
    Some(c.status == "True")
}

/// `n` NodeSetAutoscalers, one NodeSet each, round-robin over the 24.11 Slurm, the 22.05
/// Slurm and the failing cluster; a 2-node job to both real elastic partitions. The caller
/// holds the elastic lock. Decisions are watched for five intervals.
pub async fn autoscaler_load(n: usize, interval: Duration) -> AutoscalerReport {
    autoscaler_load_watching(n, interval, interval * 5).await
}

/// As [`autoscaler_load`], watching the decisions for `steady` (the test watches longer, so
/// that an autoscaler with fewer than two decisions is stuck, not just slow).
pub async fn autoscaler_load_watching(
    n: usize,
    interval: Duration,
    steady: Duration,
) -> AutoscalerReport {
    let real = [SlurmCluster::get("24.11"), SlurmCluster::get("22.05")];
    for c in &real {
        super::elastic::reset_elastic(c).await;
    }
    let proxy = FaultProxy::start(&real[0].url).await;
    proxy.set(Fault::Status(502, "slurmctld unreachable"), None);
    let dir = tempfile::tempdir().unwrap();
    let mut clusters = String::new();
    for (name, url, c) in [
        (real[0].name.as_str(), real[0].url.as_str(), &real[0]),
        (real[1].name.as_str(), real[1].url.as_str(), &real[1]),
        (FAILING, proxy.url.as_str(), &real[0]),
    ] {
        clusters.push_str(&format!(
            "- name: {name}\n  url: {url}\n  user: {}\n  jwtKeyFile: {}\n  timeout: 10s\n",
            c.user,
            c.key_file.display()
        ));
    }
    let config = dir.path().join("clusters.yaml");
    std::fs::write(
        &config,
        format!(
            "interval: {}ms\nclusters:\n{clusters}",
            interval.as_millis()
        ),
    )
    .unwrap();

    let client = kube_client().await;
    // The harness runs no namespace controller: a deleted namespace keeps its objects, and
    // an earlier run's autoscalers would load this run's autoscaler. They go explicitly.
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    for old in namespaces.list(&ListParams::default()).await.unwrap().items {
        if let Some(name) = old.metadata.name.filter(|n| n.starts_with("load-")) {
            delete_objects(&client, &name).await;
        }
    }
    let ns = namespace(&client, "load").await;
    let nodesets: Api<v1beta1::NodeSet> = Api::namespaced(client.clone(), &ns);
    let autoscalers: Api<NodeSetAutoscaler> = Api::namespaced(client.clone(), &ns);
    let cluster_names = [real[0].name.clone(), real[1].name.clone(), FAILING.into()];
    let cluster_of = |i: usize| cluster_names[i % 3].clone();
    // Healthy NodeSets start at 0 and should follow the job to 2; the failing cluster's start
    // at 1 and must stay there (no scale-down on no data, no scale-up either).
    let start_replicas = |i: usize| i32::from(i % 3 == 2);
    let created = Instant::now();
    futures::stream::iter(0..n)
        .map(|i| {
            let (nodesets, autoscalers) = (nodesets.clone(), autoscalers.clone());
            let cluster = cluster_of(i);
            async move {
                let name = format!("ns{i:03}");
                let spec = v1beta1::NodeSetSpec {
                    replicas: Some(start_replicas(i)),
                    ..Default::default()
                };
                nodesets
                    .create(&PostParams::default(), &v1beta1::NodeSet::new(&name, spec))
                    .await
                    .unwrap();
                let nsa: NodeSetAutoscaler = serde_json::from_value(json!({
                    "apiVersion": "slurmscale.io/v1alpha1", "kind": "NodeSetAutoscaler",
                    "metadata": {"name": name},
                    "spec": {
                        "scaleTargetRef": {"name": name},
                        "slurm": {"cluster": cluster, "partitions": ["elastic"]},
                        "minReplicas": 0, "maxReplicas": 8, "idleReplicas": 0,
                        "idleTimeoutSeconds": 600,
                        "scaleUp": {"maxStep": 8},
                        "scaleDown": {"stabilizationWindowSeconds": 300, "maxStep": 8},
                    }
                }))
                .unwrap();
                autoscalers
                    .create(&PostParams::default(), &nsa)
                    .await
                    .unwrap();
            }
        })
        .buffer_unordered(8)
        .collect::<Vec<()>>()
        .await;
    let created_in = created.elapsed();

    let cfg = config.to_string_lossy().into_owned();
    let kubeconfig = kubeconfig_path().to_string_lossy().into_owned();
    let p = Process::start(
        &[
            "autoscaler",
            "--config",
            &cfg,
            "--kubeconfig",
            &kubeconfig,
            "--leader-election-namespace",
            &ns,
            "--leader-election-duration",
            "6s",
        ],
        &[],
    );
    let pid = p.child.id();

    // Every autoscaler reports: healthy ones decided and not Frozen, failing ones Frozen.
    let t0 = Instant::now();
    let settled = super::wait_until(Duration::from_secs(60), || async {
        let Ok(list) = autoscalers.list(&ListParams::default()).await else {
            return false;
        };
        list.items.len() == n
            && list.items.iter().all(|a| {
                let failing = a.spec.slurm.cluster.as_deref() == Some(FAILING);
                frozen(a) == Some(failing)
            })
    })
    .await;
    let first_status = t0.elapsed();
    assert!(
        settled,
        "not every autoscaler reported within 60 s (objects created in {created_in:?})\nlogs:\n{}",
        p.logs()
    );

    // Steady state: every autoscaler decides at least once an interval. Each decision's time
    // is the autoscaler's own `last_activity_timestamp_seconds{activity="decision"}`; the
    // gaps between the distinct times seen are how often it decides (the page is rendered
    // every second, so a gap is never under-reported).
    let mut decisions: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let steady_from = Instant::now();
    while steady_from.elapsed() < steady {
        let Some((200, body)) = p.get("/metrics").await else {
            panic!(
                "the autoscaler's /metrics did not answer\nlogs:\n{}",
                p.logs()
            );
        };
        for (name, labels, v) in Metrics::parse(&body).0 {
            let label = |k: &str| {
                labels
                    .iter()
                    .find(|(a, _)| a == k)
                    .map(|(_, b)| b.as_str())
                    .unwrap_or("")
            };
            if name == "slurmscale_autoscaler_last_activity_timestamp_seconds"
                && label("activity") == "decision"
                && label("namespace") == ns
                && label("cluster") != FAILING
            {
                let seen = decisions.entry(label("autoscaler").into()).or_default();
                if seen.last() != Some(&v) {
                    seen.push(v);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let decision_gap: Vec<f64> = decisions
        .values()
        .map(|t| {
            t.windows(2)
                .map(|w| w[1] - w[0])
                .fold(if t.len() < 2 { f64::INFINITY } else { 0.0 }, f64::max)
        })
        .collect();

    // Watch the NodeSets, then submit.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let watch = {
        let nodesets = nodesets.clone();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(watcher(nodesets, watcher::Config::default()));
            while let Some(e) = stream.next().await {
                let seen = Instant::now();
                match e {
                    Ok(watcher::Event::InitDone) => {
                        let _ = tx.send((String::new(), 0, seen));
                    }
                    Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                        let name = o.metadata.name.clone().unwrap_or_default();
                        let _ = tx.send((name, o.spec.replicas.unwrap_or(0), seen));
                    }
                    _ => {}
                }
            }
        })
    };
    let mut seen = Seen {
        n,
        replicas: BTreeMap::new(),
        failing_moved: Vec::new(),
        submitted: BTreeMap::new(),
    };
    loop {
        let ev = tokio::time::timeout(WATCH_LISTS, rx.recv())
            .await
            .unwrap_or_else(|_| panic!("NodeSet watch lists within {WATCH_LISTS:?}"))
            .expect("NodeSet watch runs");
        if ev.0.is_empty() {
            break;
        }
        seen.record(ev, &cluster_names);
    }
    for c in &real {
        let c2 = c.clone();
        tokio::task::spawn_blocking(move || {
            super::elastic::sbatch(&c2, &["-N", "2", "--wrap", "sleep 300"])
        })
        .await
        .unwrap();
        seen.submitted.insert(c.name.clone(), Instant::now());
    }
    let healthy: Vec<usize> = (0..n).filter(|i| i % 3 != 2).collect();
    // The one poll is the product's timer, kept as it is; only the work gets the slack.
    let deadline = Instant::now() + interval + FOLLOW;
    while Instant::now() < deadline {
        let done = healthy
            .iter()
            .all(|i| matches!(seen.replicas.get(&format!("ns{i:03}")), Some((_, Some(_)))));
        if done {
            break;
        }
        if let Ok(Some(ev)) = tokio::time::timeout(Duration::from_millis(200), rx.recv()).await {
            seen.record(ev, &cluster_names);
        }
    }
    // A little longer: a failing NodeSet that moves late still counts.
    let tail = Instant::now() + interval * 5;
    while Instant::now() < tail {
        if let Ok(Some(ev)) = tokio::time::timeout(Duration::from_millis(200), rx.recv()).await {
            seen.record(ev, &cluster_names);
        }
    }
    watch.abort();
    let reaction: Vec<f64> = healthy
        .iter()
        .map(|i| {
            let name = format!("ns{i:03}");
            match seen.replicas.get(&name) {
                Some((_, Some(t))) => t
                    .duration_since(seen.submitted[&cluster_of(*i)])
                    .as_secs_f64(),
                _ => f64::INFINITY,
            }
        })
        .collect();

    let list = autoscalers.list(&ListParams::default()).await.unwrap();
    let failing_not_frozen = list
        .items
        .iter()
        .filter(|a| a.spec.slurm.cluster.as_deref() == Some(FAILING) && frozen(a) != Some(true))
        .map(|a| a.metadata.name.clone().unwrap_or_default())
        .collect();
    let (hwm_kib, rss_kib) = memory_kib(pid);

    // Leave nothing behind: the jobs, the objects (no later autoscaler acts on them).
    for c in &real {
        super::elastic::reset_elastic(c).await;
    }
    let report = AutoscalerReport {
        autoscalers: n,
        healthy: healthy.len(),
        interval,
        first_status,
        reaction,
        decision_gap,
        failing_moved: seen.failing_moved,
        failing_not_frozen,
        hwm_kib,
        rss_kib,
    };
    if let Some((_, body)) = p.get("/metrics").await {
        let m = Metrics::parse(&body);
        let errors: Vec<_> =
            m.0.iter()
                .filter(|(n, _, _)| n == "slurmscale_autoscaler_errors_total")
                .collect();
        let took = m.all("slurmscale_autoscaler_decision_duration_seconds", &[]);
        eprintln!(
            "autoscaler: errors {errors:?}; last reconcile p50 {:.3} s, max {:.3} s, sum {:.2} s",
            quantile(&took, 0.5),
            quantile(&took, 1.0),
            took.iter().sum::<f64>()
        );
    }
    let logs = p.logs();
    eprintln!(
        "autoscaler log: {} lines, warnings: {:?}",
        logs.lines().count(),
        logs.lines()
            .filter(|l| l.contains("WARN"))
            .take(5)
            .collect::<Vec<_>>()
    );
    drop(p);
    delete_objects(&client, &ns).await;
    let _ = namespaces.delete(&ns, &Default::default()).await;
    report
}

/// The NodeSetAutoscalers and NodeSets of `ns`.
async fn delete_objects(client: &kube::Client, ns: &str) {
    let (dp, lp) = (kube::api::DeleteParams::default(), ListParams::default());
    let autoscalers: Api<NodeSetAutoscaler> = Api::namespaced(client.clone(), ns);
    let _ = autoscalers.delete_collection(&dp, &lp).await;
    let nodesets: Api<v1beta1::NodeSet> = Api::namespaced(client.clone(), ns);
    let _ = nodesets.delete_collection(&dp, &lp).await;
}

#[derive(Debug)]
pub struct ExporterReport {
    pub clusters: usize,
    pub interval: Duration,
    /// Each scrape of /metrics (seconds).
    pub scrape: Vec<f64>,
    /// Per scrape, the oldest data of any healthy cluster's endpoint (seconds).
    pub healthy_age: Vec<f64>,
    /// Healthy clusters not up at some scrape, and the black hole's `up` values seen.
    pub healthy_down: Vec<String>,
    pub hole_up: Vec<f64>,
    /// Per cluster ([`HOLE`] among them): collections it finished between the first scrape
    /// and the last (`slurm_exporter_collections_total`).
    pub collections: BTreeMap<String, f64>,
    pub page_bytes: usize,
    pub hwm_kib: u64,
}

impl ExporterReport {
    pub fn print(&self) {
        let s = &self.scrape;
        let a = &self.healthy_age;
        let healthy_collections = self
            .collections
            .iter()
            .filter(|(c, _)| c.as_str() != HOLE)
            .map(|(_, n)| *n)
            .fold(f64::NAN, f64::min);
        eprintln!(
            "exporter load: {} clusters (one black-holed), poll every {:?}, {} scrapes of {} KiB\n  \
             scrape: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms\n  \
             oldest healthy endpoint data per scrape: p50 {:.2} s, p99 {:.2} s, max {:.2} s\n  \
             healthy clusters down at a scrape: {}; black hole's slurm_exporter_up at most {}\n  \
             collections meanwhile: the fewest of a healthy cluster {}, the black hole {}\n  \
             memory: peak {:.0} MiB",
            self.clusters,
            self.interval,
            s.len(),
            self.page_bytes / 1024,
            quantile(s, 0.5) * 1e3,
            quantile(s, 0.99) * 1e3,
            quantile(s, 1.0) * 1e3,
            quantile(a, 0.5),
            quantile(a, 0.99),
            quantile(a, 1.0),
            self.healthy_down.len(),
            self.hole_up.iter().copied().fold(f64::NAN, f64::max),
            healthy_collections,
            self.collections.get(HOLE).copied().unwrap_or(f64::NAN),
            self.hwm_kib as f64 / 1024.0,
        );
    }
}

/// A TCP listener on 127.0.0.1 that never accepts, with its accept queue filled: a connect
/// to it gets no SYN-ACK, as to a host that is down behind a firewall dropping packets.
pub struct BlackHole {
    pub url: String,
    _listener: std::net::TcpListener,
    _fill: Vec<std::net::TcpStream>,
}

impl BlackHole {
    pub fn new() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind black hole");
        let addr = listener.local_addr().unwrap();
        let mut fill = Vec::new();
        // std listens with a backlog of 128: once that many wait, SYNs are dropped. The first
        // connect that gets no answer within 2 s ends the fill: a shorter wait could stop
        // early on a starved machine, leaving a hole that still answers.
        while fill.len() < 4096 {
            match std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
                Ok(s) => fill.push(s),
                Err(_) => break,
            }
        }
        assert!(
            fill.len() < 4096,
            "the black hole's accept queue never filled"
        );
        Self {
            url: format!("http://{addr}"),
            _listener: listener,
            _fill: fill,
        }
    }
}

/// `slurmscale exporter --no-kubernetes` over `clusters` clusters, the last black-holed,
/// scraped `scrapes` times `gap` apart once the healthy ones are up.
pub async fn exporter_load(
    clusters: usize,
    interval: Duration,
    scrapes: usize,
    gap: Duration,
) -> ExporterReport {
    let real = [SlurmCluster::get("24.11"), SlurmCluster::get("22.05")];
    let hole = BlackHole::new();
    let dir = tempfile::tempdir().unwrap();
    let mut list = String::new();
    let mut healthy = Vec::new();
    for i in 0..clusters {
        let (name, url, c) = if i + 1 == clusters {
            (HOLE.to_string(), hole.url.clone(), &real[0])
        } else {
            let c = &real[i % 2];
            let name = format!("c{i}-{}", c.flavor.replace('.', ""));
            healthy.push(name.clone());
            (name, c.url.clone(), c)
        };
        list.push_str(&format!(
            "- name: {name}\n  url: {url}\n  user: {}\n  jwtKeyFile: {}\n",
            c.user,
            c.key_file.display()
        ));
    }
    let config = dir.path().join("clusters.yaml");
    std::fs::write(
        &config,
        format!("interval: {}ms\nclusters:\n{list}", interval.as_millis()),
    )
    .unwrap();
    let cfg = config.to_string_lossy().into_owned();
    let p = Process::start(&["exporter", "--no-kubernetes", "--config", &cfg], &[]);
    let up = super::wait_until(Duration::from_secs(60), || async {
        let Some((200, body)) = p.get("/metrics").await else {
            return false;
        };
        let m = Metrics::parse(&body);
        healthy
            .iter()
            .all(|c| m.get("slurm_exporter_up", &[("cluster", c)]) == Some(1.0))
    })
    .await;
    assert!(
        up,
        "the healthy clusters were not all up within 60 s\nlogs:\n{}",
        p.logs()
    );
    let http = reqwest::Client::new();
    let mut report = ExporterReport {
        clusters,
        interval,
        scrape: Vec::new(),
        healthy_age: Vec::new(),
        healthy_down: Vec::new(),
        hole_up: Vec::new(),
        collections: BTreeMap::new(),
        page_bytes: 0,
        hwm_kib: 0,
    };
    let counted = |m: &Metrics| -> BTreeMap<String, f64> {
        healthy
            .iter()
            .map(String::as_str)
            .chain([HOLE])
            .map(|c| {
                let n = m.get("slurm_exporter_collections_total", &[("cluster", c)]);
                (c.to_string(), n.unwrap_or(f64::NAN))
            })
            .collect()
    };
    let mut first_count: Option<BTreeMap<String, f64>> = None;
    let mut last_count = BTreeMap::new();
    for _ in 0..scrapes {
        let started = Instant::now();
        let body = http
            .get(p.url("/metrics"))
            .send()
            .await
            .expect("/metrics answers")
            .text()
            .await
            .expect("/metrics body");
        report.scrape.push(started.elapsed().as_secs_f64());
        report.page_bytes = body.len();
        let m = Metrics::parse(&body);
        let mut oldest: f64 = 0.0;
        for c in &healthy {
            if m.get("slurm_exporter_up", &[("cluster", c)]) != Some(1.0) {
                report.healthy_down.push(c.clone());
            }
            for age in m.all(
                "slurm_exporter_endpoint_data_age_seconds",
                &[("cluster", c)],
            ) {
                oldest = oldest.max(age);
            }
        }
        report.healthy_age.push(oldest);
        report
            .hole_up
            .extend(m.get("slurm_exporter_up", &[("cluster", HOLE)]));
        last_count = counted(&m);
        first_count.get_or_insert_with(|| last_count.clone());
        tokio::time::sleep(gap).await;
    }
    let first_count = first_count.unwrap_or_default();
    report.collections = last_count
        .into_iter()
        .map(|(c, n)| {
            let before = first_count.get(&c).copied().unwrap_or(f64::NAN);
            (c, n - before)
        })
        .collect();
    report.hwm_kib = memory_kib(p.child.id()).0;
    report
}
