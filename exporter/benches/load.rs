//! What polling costs a busy slurmctld: slurmrestd and slurmctld CPU seconds per minute, full
//! `/jobs` requests per minute and the age of the job data, for the deployment shapes a site
//! runs, against a real Slurm holding 20,000 (or 100,000) jobs while one new job a second is
//! submitted (each runs 5 s on the cpu partition).
//!
//! Shapes (each poller is a `slurmscale exporter --no-kubernetes` process behind its own
//! counting proxy; the autoscaler's poller is the same code):
//! * `idle`: nothing polls (the submitter alone: the floor);
//! * `before`: what the chart deployed before only the leader polled and the job list was
//!   read incrementally — the exporter (30 s) and two autoscaler replicas that both polled
//!   in full every 2 s — run with an earlier build
//!   given as SLURMSCALE_BEFORE_BIN (skipped without it);
//! * `after`: the exporter (30 s) and the leading autoscaler (2 s); the standby only pings
//!   every 30 s (its zero `/jobs` is checked by tests/autoscaler_e2e.rs);
//! * `shared`: one poller (2 s) for both, as `slurmscale autoscaler --exporter-metrics` runs;
//! * `plain`: `after`'s two pollers through a slurmrestd without its slurmdbd plugins (no
//!   `/slurmdb/` endpoint), as many sites run it: above `--request-max-jobs` one
//!   `/jobs/state/` names the live ids (v0.0.40 on) and the list is read id by id from it;
//!   22.05 has no such list and reads it whole.
//! * `exporter`: the exporter alone (30 s), beside which
//! * `native`: slurmctld's own metrics (26.05 on), the four endpoints Slinky's ServiceMonitor
//!   scrapes (`/metrics/{jobs,nodes,partitions,scheduler}`), every 30 s as Prometheus would;
//! * `native-2s`: the same every 2 s, beside `shared` (what an autoscaler reading them through
//!   Prometheus at our poll's pace would cost).
//!
//! It starts its own Slurm copy (SLURMSCALE_RUN=/tmp/slurmscale-load, REST on 26820 for
//! 22.05, 27820 for 24.11 and 24820 for 26.05), so the test harness is left alone:
//!
//!     cargo build --release
//!     SLURMSCALE_BEFORE_BIN=/path/to/old/slurmscale cargo bench -p slurmscale-exporter --bench load
//!
//! SLURMSCALE_LOAD_FLAVORS (default `24.11,22.05`), SLURMSCALE_LOAD_JOBS (20000),
//! SLURMSCALE_LOAD_WINDOW (seconds per shape, 60), SLURMSCALE_LOAD_SHAPES (default
//! `idle,before,after,shared`; `plain`, `exporter`, `native` and `native-2s` on demand:
//! `SLURMSCALE_LOAD_FLAVORS=26.05 SLURMSCALE_LOAD_SHAPES=idle,exporter,native,shared,native-2s
//! SLURMSCALE_LOAD_WINDOW=180` compares slurmctld's own metrics with our poll), SLURMSCALE_LOAD_WARMUP (seconds to wait for the first job
//! list, 300). Loading 20,000 jobs takes a minute or two
//! of sbatch; the copy is stopped at the end. Figures: exporter/benches/README.md.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};

const RUN: &str = "/tmp/slurmscale-load";
/// The harness's slurmrestd, and its second one without accounting (env file keys).
const REST: &str = "SLURM_REST_URL";
const PLAIN: &str = "SLURM_REST_URL_NO_ACCOUNTING";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn harness(flavor: &str, cmd: &str) {
    let ok = Command::new("bash")
        .arg(repo().join("tests/harness/slurm.sh"))
        .args([flavor, cmd])
        .env("SLURMSCALE_RUN", RUN)
        .env("SLURMSCALE_PORT_BASE_2205", "26800")
        .env("SLURMSCALE_PORT_BASE_2411", "27800")
        .env("SLURMSCALE_PORT_BASE_2605", "24800")
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "slurm.sh {flavor} {cmd} failed");
}

fn env_file(flavor: &str) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(format!("{RUN}/slurm-{flavor}/env")).unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("export ")?.split_once('='))
        .map(|(k, v)| (k.to_string(), v.trim_matches('"').to_string()))
        .collect()
}

struct Slurm {
    env: BTreeMap<String, String>,
    flavor: String,
}

impl Slurm {
    fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new(format!("{}/{program}", self.env["SLURM_BIN"]));
        c.env("SLURM_CONF", &self.env["SLURM_CONF"])
            .env_remove("SLURM_JWT")
            .current_dir(std::env::temp_dir());
        c
    }

    fn queued(&self) -> usize {
        let out = self
            .cmd("squeue")
            .args(["-h", "-o", "%A"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).lines().count()
    }

    /// Held jobs up to `n`, four sbatch streams at a time.
    fn fill(&self, n: usize) {
        let have = self.queued();
        if have >= n {
            return;
        }
        let started = Instant::now();
        let per = (n - have).div_ceil(4);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..per {
                        let _ = self
                            .cmd("sbatch")
                            .args(["-Q", "--hold", "-o", "/dev/null", "--wrap", "true"])
                            .status();
                    }
                });
            }
        });
        eprintln!(
            "[load] {} jobs queued on Slurm {} in {:.0?}",
            self.queued(),
            self.flavor,
            started.elapsed()
        );
    }

    /// CPU seconds slurmrestd (both: with and without accounting; the one not polled idles)
    /// and slurmctld have used so far.
    fn cpu(&self) -> (f64, f64) {
        let of = |name: &str| {
            let pid = std::fs::read_to_string(format!("{RUN}/slurm-{}/pids/{name}", self.flavor))
                .unwrap_or_default();
            let stat =
                std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
            // Fields after the ")" of the command name: utime is the 12th, stime the 13th.
            let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
            let f: Vec<&str> = rest.split_whitespace().collect();
            let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
            (ticks(11) + ticks(12)) / 100.0
        };
        (of("slurmrestd") + of("slurmrestd-plain"), of("slurmctld"))
    }
}

/// Counts requests by kind on their way to slurmrestd.
async fn counting_proxy(upstream: String) -> (String, Arc<Mutex<BTreeMap<&'static str, u64>>>) {
    let counts = Arc::new(Mutex::new(BTreeMap::new()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    #[derive(Clone)]
    struct S {
        upstream: String,
        http: reqwest::Client,
        counts: Arc<Mutex<BTreeMap<&'static str, u64>>>,
    }
    async fn forward(State(s): State<S>, req: Request) -> Response {
        let path = req.uri().path().trim_end_matches('/').to_string();
        // A /jobs is "full" by what came back (`update_time` may still bring everything).
        let kind = if path.contains("/slurmdb/") {
            "accounting"
        } else if path.ends_with("/jobs") {
            "jobs?"
        } else if path.ends_with("/jobs/state") {
            "jobs/state"
        } else if path.contains("/job/") {
            "job/{id}"
        } else {
            "other"
        };
        let mut up = s
            .http
            .get(format!("{}{}", s.upstream, req.uri()))
            .timeout(Duration::from_secs(600));
        for h in ["x-slurm-user-name", "x-slurm-user-token"] {
            if let Some(v) = req.headers().get(h) {
                up = up.header(h, v);
            }
        }
        let (status, body) = match up.send().await {
            Ok(resp) => (resp.status(), resp.bytes().await.unwrap_or_default()),
            Err(_) => (axum::http::StatusCode::BAD_GATEWAY, Default::default()),
        };
        let kind = match kind {
            // An unchanged answer is a few hundred bytes; 20,000 jobs are tens of MB.
            "jobs?" if body.len() > 100_000 => "jobs",
            "jobs?" => "jobs unchanged",
            k => k,
        };
        *s.counts.lock().unwrap().entry(kind).or_default() += 1;
        (status, body).into_response()
    }
    let state = S {
        upstream,
        http: reqwest::Client::new(),
        counts: counts.clone(),
    };
    tokio::spawn(async move {
        let _ = axum::serve(listener, Router::new().fallback(forward).with_state(state)).await;
    });
    (url, counts)
}

struct Poller {
    child: Child,
    listen: String,
    counts: Arc<Mutex<BTreeMap<&'static str, u64>>>,
}

impl Drop for Poller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A poller of the slurmrestd at `rest` (an env file key: `SLURM_REST_URL`, or
/// `SLURM_REST_URL_NO_ACCOUNTING` for the one without accounting).
async fn poller(bin: &Path, slurm: &Slurm, rest: &str, interval: &str, port: u16) -> Poller {
    let (url, counts) = counting_proxy(slurm.env[rest].clone()).await;
    let listen = format!("127.0.0.1:{port}");
    let child = Command::new(bin)
        .args([
            "exporter",
            "--no-kubernetes",
            "--interval",
            interval,
            "--timeout",
            "300s",
            "--listen",
            &listen,
            "--jwt-key-file",
            &slurm.env["HARNESS_JWT_KEY_FILE"],
        ])
        .env("SLURM_REST_URL", url)
        .env("SLURM_USER", &slurm.env["SLURM_USER"])
        .env("SLURM_CLUSTER", &slurm.env["SLURM_CLUSTER"])
        .env_remove("SLURM_JWT")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start slurmscale");
    Poller {
        child,
        listen,
        counts,
    }
}

/// The age of the poller's job data, as it exports it.
async fn jobs_age(p: &Poller) -> Option<f64> {
    let text = metrics(p).await?;
    text.lines()
        .find(|l| {
            l.starts_with("slurm_exporter_endpoint_data_age_seconds{")
                && l.contains("endpoint=\"jobs\"")
        })
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// Whether the poller's job list is read to the end: a list too long for one answer is
/// published while it is read id by id (`slurm_exporter_jobs_unread` above 0; builds before
/// that publish nothing until their one full read).
async fn jobs_complete(p: &Poller) -> bool {
    let Some(text) = metrics(p).await else {
        return false;
    };
    let unread = text
        .lines()
        .find(|l| l.starts_with("slurm_exporter_jobs_unread{"))
        .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok());
    unread.is_none_or(|n| n == 0.0)
}

async fn metrics(p: &Poller) -> Option<String> {
    reqwest::get(format!("http://{}/metrics", p.listen))
        .await
        .ok()?
        .text()
        .await
        .ok()
}

/// Scrapes slurmctld's own metrics endpoints every `interval`, as Prometheus would (one
/// endpoint after the other, each a whole page), and keeps when the last full round ended and
/// how long each round took.
/// When the last full round ended, and every round's (seconds, bytes).
type Rounds = (Option<Instant>, Vec<(f64, usize)>);

struct Scraper {
    task: tokio::task::JoinHandle<()>,
    /// When the last full round ended, and every round's duration and size (bytes).
    done: Arc<Mutex<Rounds>>,
}

impl Drop for Scraper {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn native_scraper(slurm: &Slurm, interval: Duration) -> Scraper {
    let base = slurm.env["SLURMCTLD_URL"].clone();
    let done = Arc::new(Mutex::new((None, Vec::new())));
    let said = done.clone();
    let task = tokio::spawn(async move {
        let http = reqwest::Client::new();
        let mut tick = tokio::time::interval(interval);
        loop {
            tick.tick().await;
            let t = Instant::now();
            let mut bytes = 0;
            let mut ok = true;
            for endpoint in ["jobs", "nodes", "partitions", "scheduler"] {
                match http
                    .get(format!("{base}/metrics/{endpoint}"))
                    .timeout(Duration::from_secs(60))
                    .send()
                    .await
                {
                    Ok(r) if r.status().is_success() => {
                        bytes += r.bytes().await.map_or(0, |b| b.len());
                    }
                    _ => ok = false,
                }
            }
            if ok {
                let mut d = said.lock().unwrap();
                d.0 = Some(Instant::now());
                d.1.push((t.elapsed().as_secs_f64(), bytes));
            }
        }
    });
    Scraper { task, done }
}

struct Row {
    shape: &'static str,
    restd: f64,
    ctld: f64,
    full_jobs: f64,
    other_jobs: f64,
    age_p50: f64,
    age_max: f64,
}

async fn measure(
    slurm: &Slurm,
    shape: &'static str,
    pollers: Vec<Poller>,
    scraper: Option<Scraper>,
    window: Duration,
) -> Row {
    // Warm up: every poller's first complete job list, then steady state.
    let warm = Instant::now();
    let warm_limit = Duration::from_secs(
        std::env::var("SLURMSCALE_LOAD_WARMUP")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(300),
    );
    while warm.elapsed() < warm_limit {
        let mut ready = scraper
            .as_ref()
            .is_none_or(|s| s.done.lock().unwrap().0.is_some());
        for p in &pollers {
            ready &= jobs_age(p).await.is_some() && jobs_complete(p).await;
        }
        if ready {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    if !pollers.is_empty() || scraper.is_some() {
        eprintln!(
            "[load] {shape}: first complete job list after {:.0?}",
            warm.elapsed()
        );
    }
    tokio::time::sleep(Duration::from_secs(10)).await;
    let (r0, c0) = slurm.cpu();
    let counts0: Vec<BTreeMap<&str, u64>> = pollers
        .iter()
        .map(|p| p.counts.lock().unwrap().clone())
        .collect();
    let start = Instant::now();
    let mut ages = Vec::new();
    while start.elapsed() < window {
        // The pollers deciding (the 2 s ones) are what the autoscaler reads.
        for p in pollers.iter().rev().take(1) {
            if let Some(a) = jobs_age(p).await {
                ages.push(a);
            }
        }
        // What a reader of slurmctld's own metrics holds is as old as its last round.
        if let Some(at) = scraper.as_ref().and_then(|s| s.done.lock().unwrap().0) {
            ages.push(at.elapsed().as_secs_f64());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let minutes = start.elapsed().as_secs_f64() / 60.0;
    let (r1, c1) = slurm.cpu();
    let mut full = 0;
    let mut other = 0;
    for (p, before) in pollers.iter().zip(&counts0) {
        for (kind, n) in p.counts.lock().unwrap().iter() {
            let d = n - before.get(kind).copied().unwrap_or(0);
            match *kind {
                "jobs" => full += d,
                "jobs unchanged" | "jobs/state" | "job/{id}" => other += d,
                _ => {}
            }
        }
    }
    if let Some(s) = &scraper {
        let rounds = s.done.lock().unwrap().1.clone();
        let max = rounds.iter().map(|r| r.0).fold(0.0, f64::max);
        let bytes = rounds.iter().map(|r| r.1).max().unwrap_or(0);
        eprintln!(
            "[load] {shape}: {} rounds of slurmctld's four endpoints, the longest {max:.2} s, up to {bytes} bytes",
            rounds.len()
        );
    }
    ages.sort_by(f64::total_cmp);
    let pick = |q: f64| {
        ages.get(((ages.len() as f64 - 1.0) * q).round() as usize)
            .copied()
            .unwrap_or(f64::NAN)
    };
    Row {
        shape,
        restd: (r1 - r0) / minutes,
        ctld: (c1 - c0) / minutes,
        full_jobs: full as f64 / minutes,
        other_jobs: other as f64 / minutes,
        age_p50: pick(0.5),
        age_max: pick(1.0),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let flavors = std::env::var("SLURMSCALE_LOAD_FLAVORS").unwrap_or_else(|_| "24.11,22.05".into());
    let jobs: usize = std::env::var("SLURMSCALE_LOAD_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let window = Duration::from_secs(
        std::env::var("SLURMSCALE_LOAD_WINDOW")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(60),
    );
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| repo().join("target"));
    let after = std::env::var_os("SLURMSCALE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| target.join("release/slurmscale"));
    assert!(
        after.exists(),
        "{} missing: run `cargo build --release` first",
        after.display()
    );
    let before = std::env::var_os("SLURMSCALE_BEFORE_BIN").map(PathBuf::from);

    for flavor in flavors.split(',') {
        harness(flavor, "start");
        let slurm = Slurm {
            env: env_file(flavor),
            flavor: flavor.to_string(),
        };
        let _ = slurm.cmd("scancel").args(["--user=root"]).status();
        slurm.fill(jobs);

        // One new job a second, each running 5 s: a quiet day at a real site.
        let stop = Arc::new(AtomicBool::new(false));
        let submitter = {
            let (stop, env) = (stop.clone(), slurm.env.clone());
            std::thread::spawn(move || {
                let s = Slurm {
                    env,
                    flavor: String::new(),
                };
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    let _ = s
                        .cmd("sbatch")
                        .args(["-Q", "-p", "cpu", "-o", "/dev/null", "--wrap", "sleep 5"])
                        .status();
                    std::thread::sleep(Duration::from_secs(1).saturating_sub(t.elapsed()));
                }
            })
        };

        let shapes = std::env::var("SLURMSCALE_LOAD_SHAPES")
            .unwrap_or_else(|_| "idle,before,after,shared".into());
        let want = |s: &str| shapes.split(',').any(|x| x == s);
        let mut rows = Vec::new();
        if want("idle") {
            rows.push(measure(&slurm, "idle", Vec::new(), None, window).await);
        }
        if let Some(before) = before.as_ref().filter(|_| want("before")) {
            let pollers = vec![
                poller(before, &slurm, REST, "30s", 29001).await,
                poller(before, &slurm, REST, "2s", 29002).await,
                poller(before, &slurm, REST, "2s", 29003).await,
            ];
            rows.push(measure(&slurm, "before", pollers, None, window).await);
        }
        if want("after") {
            let pollers = vec![
                poller(&after, &slurm, REST, "30s", 29011).await,
                poller(&after, &slurm, REST, "2s", 29012).await,
            ];
            rows.push(measure(&slurm, "after", pollers, None, window).await);
        }
        if want("plain") {
            let pollers = vec![
                poller(&after, &slurm, PLAIN, "30s", 29031).await,
                poller(&after, &slurm, PLAIN, "2s", 29032).await,
            ];
            rows.push(measure(&slurm, "plain", pollers, None, window).await);
        }
        if want("exporter") {
            let pollers = vec![poller(&after, &slurm, REST, "30s", 29041).await];
            rows.push(measure(&slurm, "exporter", pollers, None, window).await);
        }
        if want("native") {
            let s = native_scraper(&slurm, Duration::from_secs(30));
            rows.push(measure(&slurm, "native", Vec::new(), Some(s), window).await);
        }
        if want("shared") {
            let pollers = vec![poller(&after, &slurm, REST, "2s", 29021).await];
            rows.push(measure(&slurm, "shared", pollers, None, window).await);
        }
        if want("native-2s") {
            let s = native_scraper(&slurm, Duration::from_secs(2));
            rows.push(measure(&slurm, "native-2s", Vec::new(), Some(s), window).await);
        }

        stop.store(true, Ordering::Relaxed);
        let _ = submitter.join();
        println!(
            "\nSlurm {flavor}, {} jobs queued, one new job a second, {}s windows",
            slurm.queued(),
            window.as_secs()
        );
        println!(
            "| shape | slurmrestd CPU s/min | slurmctld CPU s/min | full /jobs per min | other job-list requests per min | jobs data age p50 / max |"
        );
        println!("|---|---|---|---|---|---|");
        for r in &rows {
            println!(
                "| {} | {:.1} | {:.2} | {:.1} | {:.0} | {:.1} s / {:.1} s |",
                r.shape, r.restd, r.ctld, r.full_jobs, r.other_jobs, r.age_p50, r.age_max
            );
        }
        let _ = slurm.cmd("scancel").args(["--user=root"]).status();
        harness(flavor, "stop");
    }
}
