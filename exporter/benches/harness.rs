//! The exporter against the harness's real Slurm 22.05 holding 20,000 jobs:
//!
//! * refresh: one collection cycle (all endpoints, decode and aggregate included) against a
//!   plain concurrent HTTP GET of the same endpoints (target ≤ 1.10);
//! * `/metrics` latency with 100 concurrent scrapers (target p99 ≤ 5 ms) while a poller runs,
//!   counting what slurmrestd sees through a counting proxy (target: at most one request per
//!   endpoint per interval).
//!
//! Needs the harness (`tests/harness/up.sh`). Run with:
//!
//!     cargo bench -p slurmscale-exporter --bench harness
//!
//! It submits 20,000 held jobs (a minute or two of sbatch) unless they are already queued,
//! and cancels them at the end (keep them with SLURMSCALE_BENCH_KEEP_JOBS=1). Figures are written down in exporter/benches/README.md.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use slurmscale_exporter::collect::{CollectorOptions, Poller};
use slurmscale_exporter::config::{AuthConfig, ClusterConfig};
use slurmscale_exporter::metrics::MetricsOptions;
use slurmscale_exporter::server::{self, AppState};
use slurmscale_exporter::slurm::{ApiVersion, SigningAlgorithm};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

const JOBS: usize = 20_000;

struct Harness {
    url: String,
    user: String,
    key: PathBuf,
    conf: String,
    bin: PathBuf,
}

fn harness() -> Harness {
    let run = std::env::var("SLURMSCALE_RUN").unwrap_or_else(|_| "/tmp/slurmscale-harness".into());
    let path = format!("{run}/slurm-22.05/env");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("no {path}: start the harness with tests/harness/up.sh"));
    let vars: BTreeMap<&str, &str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("export ")?.split_once('='))
        .map(|(k, v)| (k, v.trim_matches('"')))
        .collect();
    Harness {
        url: vars["SLURM_REST_URL"].into(),
        user: vars["SLURM_USER"].into(),
        key: vars["HARNESS_JWT_KEY_FILE"].into(),
        conf: vars["SLURM_CONF"].into(),
        bin: vars["SLURM_BIN"].into(),
    }
}

impl Harness {
    fn slurm(&self, program: &str) -> Command {
        let mut c = Command::new(self.bin.join(program));
        c.env("SLURM_CONF", &self.conf)
            .env_remove("SLURM_JWT")
            .current_dir(std::env::temp_dir());
        c
    }

    fn queued(&self) -> usize {
        let out = self
            .slurm("squeue")
            .args(["-h", "-o", "%i"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).lines().count()
    }

    /// Held jobs: 20,000 job records that stay pending and cost no node.
    fn fill(&self) {
        let have = self.queued();
        if have >= JOBS {
            return;
        }
        let missing = JOBS - have;
        eprintln!("submitting {missing} held jobs...");
        let threads = 4;
        std::thread::scope(|s| {
            for t in 0..threads {
                s.spawn(move || {
                    for _ in (t..missing).step_by(threads) {
                        let ok = self
                            .slurm("sbatch")
                            .args(["-Q", "--hold", "-o", "/dev/null", "--wrap", "true"])
                            .status();
                        assert!(ok.is_ok_and(|s| s.success()), "sbatch failed");
                    }
                });
            }
        });
    }

    fn cluster(&self, url: &str) -> ClusterConfig {
        ClusterConfig {
            name: "bench".into(),
            url: url.into(),
            user: self.user.clone(),
            auth: AuthConfig::Key {
                path: self.key.clone(),
                algorithm: SigningAlgorithm::Hs256,
                lifetime: Duration::from_secs(600),
            },
            api_version: Some(ApiVersion::V0038),
            ca_file: None,
            timeout: Duration::from_secs(120),
            max_requests_per_second: None,
            kubernetes_jobs: Default::default(),
        }
    }
}

fn token(h: &Harness) -> String {
    #[derive(serde::Serialize)]
    struct Claims<'a> {
        sun: &'a str,
        iat: i64,
        exp: i64,
    }
    let now = chrono::Utc::now().timestamp();
    let key = std::fs::read(&h.key).unwrap();
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &Claims {
            sun: &h.user,
            iat: now,
            exp: now + 600,
        },
        &jsonwebtoken::EncodingKey::from_secret(&key),
    )
    .unwrap()
}

async fn plain_get(h: &Harness) -> Duration {
    let http = reqwest::Client::new();
    let token = token(h);
    let start = Instant::now();
    let gets = ["ping", "diag", "jobs", "nodes", "partitions"].map(|e| {
        let req = http
            .get(format!("{}/slurm/v0.0.38/{e}", h.url))
            .header("X-SLURM-USER-NAME", &h.user)
            .header("X-SLURM-USER-TOKEN", &token);
        async move { req.send().await.unwrap().bytes().await.unwrap().len() }
    });
    let sizes = futures::future::join_all(gets).await;

    assert!(
        sizes[2] > 10 << 20,
        "/jobs is only {} bytes: are the 20,000 jobs there?",
        sizes[2]
    );
    start.elapsed()
}

async fn refresh(h: &Harness) -> Duration {
    // A fresh poller each time: no update_time, so every endpoint is fetched and decoded.
    let (mut poller, _) = Poller::new(
        &h.cluster(&h.url),
        CollectorOptions::default(),
        Arc::new(Notify::new()),
    )
    .unwrap();
    let start = Instant::now();
    poller.collect_once().await;
    let took = start.elapsed();
    let snap = poller.snapshot();
    assert!(snap.up(), "collection failed: {:?}", snap.jobs.last_error);

    assert!(snap.jobs.data.as_ref().unwrap().cluster.total() >= JOBS as u64);
    took
}

/// Forwards to slurmrestd and counts requests per endpoint.
async fn counting_proxy(upstream: String) -> (String, Arc<Mutex<BTreeMap<String, usize>>>) {
    let counts = Arc::new(Mutex::new(BTreeMap::new()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    #[derive(Clone)]
    struct S {
        upstream: String,
        http: reqwest::Client,
        counts: Arc<Mutex<BTreeMap<String, usize>>>,
    }
    async fn forward(State(s): State<S>, req: Request) -> Response {
        let path = req.uri().path().to_string();
        let endpoint = path
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or("")
            .to_string();
        *s.counts.lock().unwrap().entry(endpoint).or_default() += 1;
        let mut up = s.http.get(format!("{}{}", s.upstream, req.uri()));
        for h in ["x-slurm-user-name", "x-slurm-user-token"] {
            if let Some(v) = req.headers().get(h) {
                up = up.header(h, v);
            }
        }
        let resp = up.send().await.unwrap();
        let status = resp.status();
        (status, resp.bytes().await.unwrap()).into_response()
    }
    let state = S {
        upstream,
        http: reqwest::Client::new(),
        counts: counts.clone(),
    };
    tokio::spawn(async move {
        axum::serve(listener, Router::new().fallback(forward).with_state(state))
            .await
            .unwrap();
    });
    (url, counts)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let h = harness();
    h.fill();

    // slurmrestd's own time for a 60 MB /jobs varies by ±30% from one call to the next, so
    // the two are measured in pairs, alternating which goes first, and compared by medians.
    let (mut plain, mut ours, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..7 {
        let (p, o) = if i % 2 == 0 {
            let p = plain_get(&h).await;
            (p, refresh(&h).await)
        } else {
            let o = refresh(&h).await;
            (plain_get(&h).await, o)
        };
        plain.push(p);
        ours.push(o);
        ratios.push(Duration::from_secs_f64(o.as_secs_f64() / p.as_secs_f64()));
    }
    let (plain, ours, ratio) = (median(plain), median(ours), median(ratios));
    println!(
        "| 20,000 jobs, Slurm 22.05 v0.0.38 | plain GET of ping+diag+jobs+nodes+partitions | exporter refresh | ratio of medians (≤ 1.10) | median of pair ratios |"
    );
    println!("|---|---|---|---|---|");
    println!(
        "| 7 pairs, order alternating | {:.2} s | {:.2} s | {:.3} | {:.3} |",
        plain.as_secs_f64(),
        ours.as_secs_f64(),
        ours.as_secs_f64() / plain.as_secs_f64(),
        ratio.as_secs_f64()
    );

    // 100 scrapers against the real server code while a poller runs every 5 s.
    let (proxy, counts) = counting_proxy(h.url.clone()).await;
    let interval = Duration::from_secs(5);
    let changed = Arc::new(Notify::new());
    let opts = CollectorOptions {
        interval,
        ..Default::default()
    };
    let (poller, rx) = Poller::new(&h.cluster(&proxy), opts, changed.clone()).unwrap();
    let stop = CancellationToken::new();
    let storm_start = Instant::now();
    tokio::spawn(poller.run(stop.clone()));
    let page = server::spawn_renderer(
        vec![rx],
        None,
        changed,
        MetricsOptions::default(),
        stop.clone(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = server::router(AppState::new(page.clone()));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let mut ready = page.clone();
    while ready
        .borrow()
        .snapshots
        .first()
        .is_none_or(|s| s.jobs.data.is_none())
    {
        ready.changed().await.unwrap();
    }
    let body_len = page.borrow().text.len();

    // One scraper alone first: the server's own cost per scrape.
    let mut alone = Vec::new();
    let http = reqwest::Client::new();
    for _ in 0..2000 {
        let t = Instant::now();
        http.get(format!("http://{addr}/metrics"))
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        alone.push(t.elapsed());
    }
    alone.sort();
    println!();
    println!("| one scraper, 2,000 scrapes in a row | p50 | p99 |");
    println!("|---|---|---|");
    println!(
        "| | {:.3} ms | {:.3} ms |",
        alone[1000].as_secs_f64() * 1e3,
        alone[1980].as_secs_f64() * 1e3
    );

    // 100 scrapers, each on its own period (open loop: a slow answer does not slow the
    // senders down, so queueing shows up in the latency): first at a Prometheus-like pace,
    // then 2,000 scrapes/s on this 2-core machine, where the scrapers, slurmrestd (busy about
    // 4 s of every 5 building the 60 MB /jobs) and the exporter share the CPUs.
    println!();
    println!(
        "| 100 concurrent scrapers, 20 s each, page {} KiB, poller every {} s | scrapes | p50 | p99 (≤ 5 ms) | max |",
        body_len / 1024,
        interval.as_secs()
    );
    println!("|---|---|---|---|---|");
    for every in [Duration::from_millis(1000), Duration::from_millis(50)] {
        let storm = Duration::from_secs(20);
        let clients: Vec<_> = (0..100u32)
            .map(|i| {
                let url = format!("http://{addr}/metrics");
                tokio::spawn(async move {
                    let http = reqwest::Client::new();
                    let mut lat = Vec::new();
                    let end = Instant::now() + storm;
                    tokio::time::sleep(every * i / 100).await;
                    let mut tick = tokio::time::interval(every);
                    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
                    while Instant::now() < end {
                        tick.tick().await;
                        let t = Instant::now();
                        let body = http.get(&url).send().await.unwrap().bytes().await.unwrap();
                        lat.push(t.elapsed());
                        assert!(body.len() >= body_len);
                    }
                    lat
                })
            })
            .collect();
        let mut lat: Vec<Duration> = Vec::new();
        for c in clients {
            lat.extend(c.await.unwrap());
        }
        lat.sort();
        let pct =
            |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)].as_secs_f64() * 1e3;
        println!(
            "| each every {} ms ({} scrapes/s) | {} | {:.2} ms | {:.2} ms | {:.2} ms |",
            every.as_millis(),
            100_000 / every.as_millis(),
            lat.len(),
            pct(0.5),
            pct(0.99),
            lat.last().unwrap().as_secs_f64() * 1e3
        );
    }
    let elapsed = storm_start.elapsed();
    stop.cancel();
    let counts = counts.lock().unwrap().clone();
    let allowed = (elapsed.as_secs_f64() / interval.as_secs_f64()).ceil() as usize + 1;
    println!();
    println!(
        "| slurmrestd requests per endpoint during those {:.0} s (one per interval: ≤ {allowed}) |",
        elapsed.as_secs_f64()
    );
    println!("|---|");
    println!("| {counts:?} |");
    assert!(
        counts.values().all(|n| *n <= allowed),
        "slurmrestd saw more than one request per endpoint per interval"
    );

    if std::env::var_os("SLURMSCALE_BENCH_KEEP_JOBS").is_none() {
        let _ = h.slurm("scancel").arg("--user=root").status();
    }
}
