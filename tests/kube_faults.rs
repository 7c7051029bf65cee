//! The autoscaler binary against the real kube-apiserver through a fault-injecting proxy
//! (`support::kube_fault`), with the real Slurms giving it demand: 409 on the scale
//! subresource, 429 with `Retry-After`, 500 and 503 bursts, watches cut and expired, answers
//! slower than the timeout, and a leader partitioned from the API server while a standby
//! takes over. Every assertion is on what the proxy saw reach the API server, or on the
//! NodeSet itself.
//!
//! Nobody plays the operator here: the jobs stay pending (no elastic node comes up), so the
//! demand — and the size the NodeSet must reach — stays put while the faults play out. Tests
//! of one Slurm take turns on its elastic partition; the two Slurms run side by side.

mod support;

use std::time::{Duration, Instant};

use axum::http::Method;
use kube::api::Api;
use serde_json::json;
use slurmscale_autoscaler::crd::NodeSetAutoscaler;
use slurmscale_exporter::k8s::nodeset::v1beta1;
use support::elastic::{self, reset_elastic};
use support::kube_fault::{Fault, KubeProxy, Match, Record};
use support::{Process, SlurmCluster, autoscaler_with, kube_client};

static ELASTIC_2411: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
static ELASTIC_2205: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
static ELASTIC_2605: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn turn(flavor: &str) -> tokio::sync::MutexGuard<'static, ()> {
    match flavor {
        "24.11" => ELASTIC_2411.lock().await,
        "26.05" => ELASTIC_2605.lock().await,
        _ => ELASTIC_2205.lock().await,
    }
}

/// A namespace with a NodeSet `elastic` at 0 replicas and its NodeSetAutoscaler.
struct Setup {
    ns: String,
    nodesets: Api<v1beta1::NodeSet>,
    autoscalers: Api<NodeSetAutoscaler>,
}

async fn setup(cluster: &SlurmCluster) -> Setup {
    let (_, ns, nodesets, autoscalers) =
        elastic::nodeset_and_autoscaler(cluster, "kfault", json!({})).await;
    Setup {
        ns,
        nodesets,
        autoscalers,
    }
}

impl Setup {
    /// The autoscaler goes first, so no later test's process acts on it.
    async fn teardown(self, cluster: &SlurmCluster) {
        let _ = self
            .autoscalers
            .delete("elastic", &Default::default())
            .await;
        reset_elastic(cluster).await;
    }

    async fn replicas(&self) -> i32 {
        self.nodesets
            .get("elastic")
            .await
            .ok()
            .and_then(|n| n.spec.replicas)
            .unwrap_or(-1)
    }

    /// The NodeSet's paths (object and scale) as the proxy sees them.
    fn nodeset_path(&self) -> String {
        format!("/namespaces/{}/nodesets/elastic", self.ns)
    }

    fn scale_path(&self) -> String {
        format!("/namespaces/{}/nodesets/elastic/scale", self.ns)
    }
}

/// `slurmscale autoscaler` reaching Kubernetes through `proxy`.
fn autoscaler(
    cluster: &SlurmCluster,
    proxy: &KubeProxy,
    lease_ns: &str,
    extra: &[&str],
) -> Process {
    autoscaler_with(cluster, &cluster.url, &proxy.kubeconfig, lease_ns, extra)
}

/// A job of `nodes` whole nodes that stays pending (no elastic node comes up): demand.
fn pending_job(cluster: &SlurmCluster, nodes: u32) -> String {
    let n = nodes.to_string();
    cluster.submit(&[
        "-p",
        "elastic",
        "--exclusive",
        "-N",
        &n,
        "--wrap",
        "sleep 300",
    ])
}

/// Two replicas, each reaching Kubernetes through its own proxy: `replica-a`, started first
/// and waited for until it holds the Lease, then `replica-b`, its standby.
async fn leader_and_standby(
    cluster: &SlurmCluster,
    s: &Setup,
    since: Instant,
) -> (KubeProxy, Process, KubeProxy, Process) {
    let (proxy_a, proxy_b) = (KubeProxy::start().await, KubeProxy::start().await);
    let a = autoscaler(cluster, &proxy_a, &s.ns, &["--identity", "replica-a"]);
    a.wait_ready(Duration::from_secs(30)).await;
    let client = kube_client().await;
    eventually(
        "replica-a leads",
        Duration::from_secs(20),
        &a,
        &proxy_a,
        since,
        async || support::lease_holder(&client, &s.ns).await == "replica-a",
    )
    .await;
    let b = autoscaler(cluster, &proxy_b, &s.ns, &["--identity", "replica-b"]);
    b.wait_ready(Duration::from_secs(30)).await;
    (proxy_a, a, proxy_b, b)
}

/// One line per request, for failure messages.
fn show(records: &[Record], since: Instant) -> String {
    records
        .iter()
        .map(|r| {
            format!(
                "{:>7.2}s {} {}{}{} -> {:?}{}{}{}",
                r.received
                    .saturating_duration_since(since.into())
                    .as_secs_f64(),
                r.method,
                r.path,
                if r.query.is_empty() { "" } else { "?" },
                r.query,
                r.status,
                if r.injected { " (injected)" } else { "" },
                if r.abandoned { " (abandoned)" } else { "" },
                if r.cut { " (cut)" } else { "" },
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Waits for `check`; on failure shows the autoscaler's log and what reached the proxy.
async fn eventually(
    what: &str,
    within: Duration,
    a: &Process,
    proxy: &KubeProxy,
    since: Instant,
    check: impl AsyncFn() -> bool,
) {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!(
        "{what}: not within {within:?}\nrequests:\n{}\nautoscaler logs:\n{}",
        show(&proxy.records(), since),
        a.logs()
    );
}

fn error_count(m: &support::Metrics, kind: &str) -> f64 {
    m.get("slurmscale_autoscaler_errors_total", &[("kind", kind)])
        .unwrap_or(0.0)
}

/// Waits until every request to `path` so far has its answer noted: the answer that made the
/// change a test waited for may reach it before the proxy has noted its status. Generous on
/// purpose: only that they are answered matters.
async fn settle(proxy: &KubeProxy, path: &str) {
    let settled = support::wait_until(Duration::from_secs(30), || async {
        proxy
            .requests_to(path)
            .iter()
            .all(|r| r.status.is_some() || r.abandoned)
    })
    .await;
    assert!(settled, "a request to {path} still unanswered");
}

fn rv_of(v: &serde_json::Value) -> Option<String> {
    v.pointer("/metadata/resourceVersion")
        .and_then(|r| r.as_str())
        .map(String::from)
}

/// 409 on the scale patch (after a real concurrent write, as the API server would answer):
/// every patch carries the resourceVersion of a read made after the last conflict — the
/// scale is read again and the decision made again, never the same body sent blindly — and
/// the NodeSet ends at the size the demand asks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflict_on_scale_reads_again_and_decides_again() {
    let _turn = turn("24.11").await;
    let cluster = SlurmCluster::get("24.11");
    reset_elastic(&cluster).await;
    let since = Instant::now();
    let proxy = KubeProxy::start().await;
    let s = setup(&cluster).await;
    proxy.times(
        2,
        Match::path(&s.scale_path()).method(Method::PATCH),
        Fault::Conflict,
    );
    let a = autoscaler(&cluster, &proxy, &s.ns, &[]);
    a.wait_ready(Duration::from_secs(30)).await;
    pending_job(&cluster, 3);
    eventually(
        "the NodeSet reaches 3 despite two conflicts",
        Duration::from_secs(30),
        &a,
        &proxy,
        since,
        async || s.replicas().await == 3,
    )
    .await;

    settle(&proxy, &s.scale_path()).await;
    let scale = proxy.requests_to(&s.scale_path());
    let patches: Vec<&Record> = scale.iter().filter(|r| r.method == Method::PATCH).collect();
    let all = show(&scale, since);
    assert_eq!(
        patches.iter().filter(|p| p.injected).count(),
        2,
        "both conflicts injected:\n{all}"
    );
    let mut sent = Vec::new();
    for p in &patches {
        let body = p.json().expect("a JSON merge patch");
        let rv =
            rv_of(&body).unwrap_or_else(|| panic!("a scale patch without resourceVersion:\n{all}"));
        // The latest scale read answered before this patch was sent.
        let read = scale
            .iter()
            .rfind(|r| r.method == Method::GET && r.answered.is_some_and(|t| t <= p.received))
            .and_then(|r| r.answer_json())
            .and_then(|v| rv_of(&v));
        assert_eq!(
            read.as_deref(),
            Some(rv.as_str()),
            "a patch not sent with the resourceVersion just read:\n{all}"
        );
        assert!(
            !sent.contains(&rv),
            "the same patch sent again after a conflict (resourceVersion {rv}):\n{all}"
        );
        sent.push(rv);
    }
    // After each conflict the scale was read again before the next patch.
    for w in patches.windows(2) {
        let reread = scale.iter().any(|r| {
            r.method == Method::GET && r.received > w[0].received && r.received < w[1].received
        });
        assert!(reread, "patched again without reading the scale:\n{all}");
    }
    let last = patches.last().unwrap();
    assert_eq!(last.status, Some(200), "{all}");
    assert_eq!(
        last.json().unwrap().pointer("/spec/replicas"),
        Some(&json!(3))
    );
    // The second conflict came after a re-plan: counted.
    let ok = support::wait_until(Duration::from_secs(30), || async {
        error_count(&a.metrics().await, "conflict") >= 1.0
    })
    .await;
    assert!(
        ok,
        "no conflict counted in slurmscale_autoscaler_errors_total"
    );
    s.teardown(&cluster).await;
}

/// 429 with `Retry-After: 3` on the scale patch: the next request to the NodeSet comes no
/// sooner than 3 s later, and succeeds. The client retried it, so no reconcile failed — but
/// the pushback is counted, for a dashboard to see pressure before it becomes an outage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttled_scale_waits_as_long_as_the_server_asks() {
    let _turn = turn("22.05").await;
    let cluster = SlurmCluster::get("22.05");
    reset_elastic(&cluster).await;
    let since = Instant::now();
    let proxy = KubeProxy::start().await;
    let s = setup(&cluster).await;
    proxy.times(
        1,
        Match::path(&s.scale_path()).method(Method::PATCH),
        Fault::Status {
            code: 429,
            retry_after: Some(3),
        },
    );
    let a = autoscaler(&cluster, &proxy, &s.ns, &[]);
    a.wait_ready(Duration::from_secs(30)).await;
    pending_job(&cluster, 2);
    eventually(
        "the NodeSet reaches 2 after the 429",
        Duration::from_secs(30),
        &a,
        &proxy,
        since,
        async || s.replicas().await == 2,
    )
    .await;

    settle(&proxy, &s.nodeset_path()).await;
    let to_nodeset = proxy.requests_to(&s.nodeset_path());
    let all = show(&to_nodeset, since);
    let i = to_nodeset
        .iter()
        .position(|r| r.injected)
        .unwrap_or_else(|| panic!("no 429 injected:\n{all}"));
    let throttled_at = to_nodeset[i].answered.unwrap();
    let next = to_nodeset
        .get(i + 1)
        .unwrap_or_else(|| panic!("nothing after the 429:\n{all}"));
    let waited = next.received.duration_since(throttled_at);
    assert!(
        waited >= Duration::from_millis(2900),
        "next request to the NodeSet {waited:?} after a 429 asking for 3 s:\n{all}"
    );
    assert_eq!(next.method, Method::PATCH, "{all}");
    assert_eq!(next.status, Some(200), "the retry did not succeed:\n{all}");
    let m = a.metrics().await;
    assert_eq!(
        m.get(
            "slurmscale_kubernetes_pushback_responses_total",
            &[("code", "429")]
        ),
        Some(1.0),
        "the 429 is counted though the client retried it"
    );
    assert_eq!(
        m.get(
            "slurmscale_kubernetes_pushback_responses_total",
            &[("code", "503")]
        ),
        Some(0.0),
        "every pushback code is exported from the start"
    );
    assert_eq!(error_count(&m, "throttled"), 0.0, "no reconcile failed");
    s.teardown(&cluster).await;
}

/// Bursts of 500 and then 503 on every request to the NodeSet while a scale-up is due: the
/// autoscaler backs off (a handful of requests in the burst, not one per poll), counts the
/// failures by kind, and the decision is carried out once the server answers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_error_bursts_back_off_and_lose_no_decision() {
    let _turn = turn("24.11").await;
    let cluster = SlurmCluster::get("24.11");
    reset_elastic(&cluster).await;
    let since = Instant::now();
    let proxy = KubeProxy::start().await;
    let s = setup(&cluster).await;
    let a = autoscaler(&cluster, &proxy, &s.ns, &[]);
    a.wait_ready(Duration::from_secs(30)).await;

    for (code, jobs, want) in [(500, 2, 2), (503, 1, 3)] {
        // Reconciled at least once before the burst (the target known, discovery cached).
        eventually(
            "the NodeSet read through the proxy",
            Duration::from_secs(20),
            &a,
            &proxy,
            since,
            async || !proxy.requests_to(&s.scale_path()).is_empty(),
        )
        .await;
        let before = error_count(&a.metrics().await, "server");
        let burst = proxy.add(
            Match::path(&s.nodeset_path()).watch(false),
            Fault::Status {
                code,
                retry_after: None,
            },
        );
        let started = Instant::now();
        pending_job(&cluster, jobs);
        tokio::time::sleep(Duration::from_secs(10)).await;
        // Said in the status while the target cannot be read.
        if code == 500 {
            let ready = s
                .autoscalers
                .get("elastic")
                .await
                .ok()
                .and_then(|n| n.status)
                .and_then(|st| st.conditions.into_iter().find(|c| c.type_ == "Ready"))
                .map(|c| (c.status, c.reason));
            assert_eq!(
                ready,
                Some(("False".to_string(), "TargetUnavailable".to_string())),
                "Ready during a 500 burst"
            );
        }
        let during: Vec<Record> = proxy
            .requests_to(&s.nodeset_path())
            .into_iter()
            .filter(|r| r.received >= started.into())
            .collect();
        proxy.remove(burst);
        let healed = Instant::now();
        let all = show(&during, since);
        // Polling every second with no back-off would be 10+ reconciles (one per poll and per
        // snapshot). A 500 is one request a reconcile; a 503 is retried by the client, from
        // 5 ms doubling, some ten times over a few seconds (the scale patch: the target
        // itself is read from a watch), so a reconcile is a batch of them, and backing off
        // between reconciles leaves room for three or four batches in 10 s, not ten.
        let most = if code == 500 { 16 } else { 45 };
        assert!(
            during.len() >= 2 && during.len() <= most,
            "{} requests to the NodeSet in a 10 s burst of {code}:\n{all}",
            during.len()
        );
        assert!(
            during.iter().all(|r| r.injected),
            "a request got through the burst:\n{all}"
        );
        if code == 500 {
            // Not retried by the client: each failed reconcile is counted.
            let after = error_count(&a.metrics().await, "server");
            assert!(
                after > before,
                "500s not counted as kind=server ({before} -> {after})"
            );
        }
        eventually(
            &format!("the NodeSet reaches {want} after the {code} burst"),
            // The back-off may have reached its 32-s cap: that, then a reconcile.
            Duration::from_secs(60),
            &a,
            &proxy,
            since,
            async || s.replicas().await == want,
        )
        .await;
        eprintln!(
            "{code} burst: {} requests in 10 s; NodeSet at {want} {:?} after the burst",
            during.len(),
            healed.elapsed()
        );
    }
    s.teardown(&cluster).await;
}

/// Watches of NodeSetAutoscalers cut mid-stream, then answered "too old resource version"
/// (410) while a new NodeSetAutoscaler is created: the autoscaler lists again and reconciles
/// the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cut_and_expired_watches_list_again_and_miss_no_autoscaler() {
    let _turn = turn("24.11").await;
    let cluster = SlurmCluster::get("24.11");
    reset_elastic(&cluster).await;
    let since = Instant::now();
    let proxy = KubeProxy::start().await;
    let first = setup(&cluster).await;
    let a = autoscaler(&cluster, &proxy, &first.ns, &[]);
    a.wait_ready(Duration::from_secs(30)).await;
    pending_job(&cluster, 2);
    eventually(
        "the first NodeSet reaches 2",
        Duration::from_secs(30),
        &a,
        &proxy,
        since,
        async || first.replicas().await == 2,
    )
    .await;

    let nsa_watch = Match::path("/nodesetautoscalers").watch(true);
    let nsa_watches = |f: &dyn Fn(&Record) -> bool| {
        proxy
            .records()
            .iter()
            .filter(|r| r.watch && r.path.contains("/nodesetautoscalers") && f(r))
            .count()
    };
    // Every watch cut a second after it starts, until two were; then new watches are told
    // their resourceVersion is too old (the cut keeps cutting the one still open), and a new
    // NodeSetAutoscaler is created while no watch stands, the faults kept until a watch
    // after it met the 410. Each step waits for the proxy to have seen the last, not for a
    // fixed time: generous deadlines, as the watcher's back-off between failures grows to 30 s.
    let step = Duration::from_secs(60);
    let cut = proxy.add(nsa_watch.clone(), Fault::CutWatch(Duration::from_secs(1)));
    eventually("two watches cut", step, &a, &proxy, since, async || {
        nsa_watches(&|r| r.cut) >= 2
    })
    .await;
    let expired_at = Instant::now();
    let expired = proxy.add(nsa_watch, Fault::Gone);
    eventually("a watch met the 410", step, &a, &proxy, since, async || {
        nsa_watches(&|r| r.injected && r.received >= expired_at.into()) >= 1
    })
    .await;
    let second = setup(&cluster).await;
    let created = Instant::now();
    eventually(
        "a watch after the new NodeSetAutoscaler met the 410",
        step,
        &a,
        &proxy,
        since,
        async || nsa_watches(&|r| r.injected && r.received >= created.into()) >= 1,
    )
    .await;
    proxy.remove(expired);
    proxy.remove(cut);

    // A 410 sends the watcher back to a list, after its back-off: the NodeSetAutoscaler may
    // already be reconciled from a stream that saw it before being cut, so wait for the list
    // itself rather than taking its absence at that moment for a miss.
    let relisted = || {
        proxy.records().iter().any(|r| {
            !r.watch
                && r.method == Method::GET
                && r.path.ends_with("/nodesetautoscalers")
                && r.received >= expired_at.into()
        })
    };
    eventually(
        "a list after the 410",
        step,
        &a,
        &proxy,
        since,
        async || relisted(),
    )
    .await;
    eventually(
        "the NodeSetAutoscaler created while watches failed is reconciled",
        Duration::from_secs(30),
        &a,
        &proxy,
        since,
        async || second.replicas().await == 2,
    )
    .await;
    let records = proxy.records();
    let all = show(
        &records
            .iter()
            .filter(|r| r.path.contains("/nodesetautoscalers"))
            .cloned()
            .collect::<Vec<_>>(),
        since,
    );
    let watches = |f: &dyn Fn(&Record) -> bool| {
        records
            .iter()
            .filter(|r| r.watch && r.path.contains("/nodesetautoscalers") && f(r))
            .count()
    };
    assert!(
        watches(&|r| r.cut) >= 2,
        "watches were not cut and re-established:\n{all}"
    );
    assert!(
        watches(&|r| r.injected) >= 1,
        "no watch met the 410:\n{all}"
    );
    assert_eq!(
        first.replicas().await,
        2,
        "the first autoscaler went astray"
    );
    second.teardown(&cluster).await;
    first.teardown(&cluster).await;
}

/// Answers slower than `--kube-timeout` (3 s; each held 600 s): the autoscaler does not hang
/// on them — it serves, counts timeouts and gives up on each — and scales once the server is
/// fast again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_answers_time_out_and_recover_when_speed_returns() {
    let _turn = turn("22.05").await;
    let cluster = SlurmCluster::get("22.05");
    reset_elastic(&cluster).await;
    let since = Instant::now();
    let proxy = KubeProxy::start().await;
    let s = setup(&cluster).await;
    let a = autoscaler(&cluster, &proxy, &s.ns, &["--kube-timeout", "3s"]);
    a.wait_ready(Duration::from_secs(30)).await;
    eventually(
        "the NodeSet read through the proxy",
        Duration::from_secs(20),
        &a,
        &proxy,
        since,
        async || !proxy.requests_to(&s.scale_path()).is_empty(),
    )
    .await;

    // Held ten minutes: far longer than any deadline below, so nothing here can be the held
    // answers arriving at last.
    let slow = proxy.add(
        Match::path(&s.nodeset_path()).watch(false),
        Fault::Delay(Duration::from_secs(600)),
    );
    let started = Instant::now();
    pending_job(&cluster, 2);
    // Two timeouts: the second after a back-off, not a hang on the first.
    let timed_out = support::wait_until(Duration::from_secs(30), || async {
        error_count(&a.metrics().await, "timeout") >= 2.0
    })
    .await;
    assert!(
        timed_out,
        "not two timeouts counted in 30 s of held answers:\n{}",
        a.logs()
    );
    // The process answers meanwhile: well before any held request is let go, which is what a
    // process hung on them would wait for. How fast it answers is not the point.
    let t = Instant::now();
    let healthz = tokio::time::timeout(Duration::from_secs(60), a.get("/healthz")).await;
    assert!(
        matches!(healthz, Ok(Some((200, _)))),
        "/healthz while answers are held: {healthz:?} after {:?}",
        t.elapsed()
    );
    proxy.remove(slow);
    let fast_again = Instant::now();
    eventually(
        "the NodeSet reaches 2 once the server is fast again",
        // The back-off may be 16-32 s by then: that, then a reconcile.
        Duration::from_secs(60),
        &a,
        &proxy,
        since,
        async || s.replicas().await == 2,
    )
    .await;
    let records = proxy.requests_to(&s.nodeset_path());
    let slowed: Vec<&Record> = records
        .iter()
        .filter(|r| r.received >= started.into() && r.received < fast_again.into())
        .collect();
    assert!(
        !slowed.is_empty() && slowed.iter().all(|r| r.abandoned),
        "the autoscaler waited for slow answers:\n{}",
        show(&records, since)
    );
    eprintln!(
        "{} slow requests abandoned; NodeSet at 2 {:?} after speed returned",
        slowed.len(),
        fast_again.elapsed()
    );
    s.teardown(&cluster).await;
}

/// An API server slow to answer the leader's Lease requests (each 0.8 s late, so a renewal
/// takes longer than a 6-s lease's 1.2-s renewal period, yet far less than the lease) does
/// not make leadership flap: the leader keeps leading on every look and keeps scaling, the
/// standby stays a standby, and the Lease keeps its holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_api_server_keeps_its_leader() {
    let _turn = turn("26.05").await;
    let cluster = SlurmCluster::get("26.05");
    reset_elastic(&cluster).await;
    let since = Instant::now();
    let s = setup(&cluster).await;
    let client = kube_client().await;
    let holder = async || support::lease_holder(&client, &s.ns).await;
    let (proxy_a, a, _proxy_b, b) = leader_and_standby(&cluster, &s, since).await;

    let lease = "/leases/slurmscale-autoscaler";
    let slow = proxy_a.add(Match::path(lease), Fault::Delay(Duration::from_millis(800)));
    pending_job(&cluster, 1);
    let leading = async |p: &Process| p.metrics().await.get("slurmscale_autoscaler_leader", &[]);
    // Three lease durations, looked at four times a second.
    let slow_since = Instant::now();
    while slow_since.elapsed() < Duration::from_secs(18) {
        let (la, lb) = (leading(&a).await, leading(&b).await);
        if la != Some(1.0) || lb != Some(0.0) {
            let renewals: Vec<Record> = proxy_a
                .records()
                .into_iter()
                .filter(|r| r.path.contains(lease))
                .collect();
            panic!(
                "{:.1} s into the slow answers the leader says {la:?}, the standby {lb:?}\n\
                 the leader's Lease requests:\n{}\nthe leader's log:\n{}",
                slow_since.elapsed().as_secs_f64(),
                show(&renewals, since),
                a.logs()
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(holder().await, "replica-a", "the Lease changed hands");
    eventually(
        "the leader scales to 1 through the slow answers",
        Duration::from_secs(30),
        &a,
        &proxy_a,
        since,
        async || s.replicas().await == 1,
    )
    .await;
    proxy_a.remove(slow);
    drop(a);
    drop(b);
    s.teardown(&cluster).await;
}

/// Two replicas, each behind its own proxy. The leader is partitioned from the API server
/// (its requests held, and delivered once the partition heals if it still waits for them)
/// for longer than its lease while new demand arrives: the standby takes over and scales.
/// From what reached the API server: the standby wrote nothing while it stood by, and no
/// write of the old leader reached the API server after the standby's first write — not even
/// one held through the partition.
///
/// Writes are every non-GET request except the Lease's own (the election itself, fenced by
/// its resourceVersion: checked apart): scale patches, status, Events — an old leader's
/// status or Event after a takeover is as wrong as a scale patch, only less costly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_leader_never_writes_after_the_standby_took_over() {
    let _turn = turn("22.05").await;
    let cluster = SlurmCluster::get("22.05");
    reset_elastic(&cluster).await;
    let since = Instant::now();
    let s = setup(&cluster).await;
    let client = kube_client().await;
    let holder = async || support::lease_holder(&client, &s.ns).await;
    let (proxy_a, a, proxy_b, b) = leader_and_standby(&cluster, &s, since).await;
    pending_job(&cluster, 1);
    eventually(
        "the leader scales to 1",
        Duration::from_secs(30),
        &a,
        &proxy_a,
        since,
        async || s.replicas().await == 1,
    )
    .await;
    // Let the leader settle before the partition: its status and ScaledUp Event written,
    // and every request it made answered.
    eventually(
        "the leader's status and ScaledUp Event written",
        Duration::from_secs(30),
        &a,
        &proxy_a,
        since,
        async || {
            let current = s
                .autoscalers
                .get("elastic")
                .await
                .ok()
                .and_then(|n| n.status)
                .and_then(|st| st.current_replicas);
            current == Some(1)
                && !support::event_notes(&client, &s.ns, "ScaledUp")
                    .await
                    .is_empty()
        },
    )
    .await;
    settle(&proxy_a, "").await;

    let partition = proxy_a.add(Match::all(), Fault::Hold);
    let partitioned = Instant::now();
    pending_job(&cluster, 3);
    eventually(
        "the standby takes over and scales to 4",
        // Ten times the 6-s lease every test autoscaler runs with.
        Duration::from_secs(60),
        &b,
        &proxy_b,
        since,
        async || s.replicas().await == 4,
    )
    .await;
    assert_eq!(holder().await, "replica-b");
    // Longer than the lease (6 s) in all, then heal: whatever the old leader still waits
    // for is delivered now.
    let held_for = Duration::from_secs(12).saturating_sub(partitioned.elapsed());
    tokio::time::sleep(held_for).await;
    proxy_a.remove(partition);
    // Then, instead of a fixed pause: the old leader knows it no longer leads, and every
    // request it made (those held through the partition too) is answered or abandoned.
    let stepped_down = support::wait_until(Duration::from_secs(30), || async {
        a.metrics().await.get("slurmscale_autoscaler_leader", &[]) == Some(0.0)
    })
    .await;
    assert!(
        stepped_down,
        "the old leader still says it leads after the partition healed:\n{}",
        a.logs()
    );
    settle(&proxy_a, "").await;

    let is_write = |r: &Record| r.is_write() && !r.path.contains("/coordination.k8s.io/");
    let (ra, rb) = (proxy_a.records(), proxy_b.records());
    let writes = |rs: &[Record]| -> Vec<Record> {
        rs.iter()
            .filter(|r| is_write(r) && r.forwarded.is_some())
            .cloned()
            .collect()
    };
    let (wa, wb) = (writes(&ra), writes(&rb));
    let report = format!(
        "replica-a (old leader) writes:\n{}\nreplica-b writes:\n{}\nreplica-a requests:\n{}",
        show(&wa, since),
        show(&wb, since),
        show(&ra, since)
    );
    assert!(!wa.is_empty(), "the leader never wrote:\n{report}");
    let first_b = wb
        .iter()
        .filter_map(|r| r.forwarded)
        .min()
        .unwrap_or_else(|| panic!("the standby never wrote:\n{report}"));
    assert!(
        first_b >= partitioned.into(),
        "the standby wrote while the leader led:\n{report}"
    );
    assert!(
        wb.iter().any(|r| r.path.ends_with("/scale")
            && r.method == Method::PATCH
            && r.status == Some(200)),
        "the standby did not scale:\n{report}"
    );
    // Both wrote at no moment: every old-leader write was answered before the standby's
    // first was sent.
    let late: Vec<&Record> = wa
        .iter()
        .filter(|r| r.answered.is_none_or(|t| t > first_b))
        .collect();
    assert!(
        late.is_empty(),
        "{} write(s) of the old leader reached the API server after the standby's first:\n{report}",
        late.len()
    );
    // The old leader's Lease writes after the takeover (if any) were refused.
    let lease_after: Vec<&Record> = ra
        .iter()
        .filter(|r| {
            r.is_write()
                && r.path.contains("/coordination.k8s.io/")
                && r.forwarded.is_some_and(|t| t > first_b)
        })
        .collect();
    assert!(
        lease_after.iter().all(|r| r.status == Some(409)),
        "the old leader renewed a Lease it had lost:\n{report}"
    );
    assert_eq!(s.replicas().await, 4);
    assert_eq!(
        holder().await,
        "replica-b",
        "leadership flapped back:\n{report}"
    );
    let held = ra
        .iter()
        .filter(|r| r.received >= partitioned.into() && r.abandoned)
        .count();
    eprintln!(
        "partition: {held} held request(s) of the old leader abandoned by it; standby's first write {:?} after the partition",
        first_b.duration_since(partitioned.into())
    );
    drop(a);
    drop(b);
    s.teardown(&cluster).await;
}
