//! How soon the exporter's partition figures follow a Slinky pod's node: a pod's `slurmd -Z`
//! registers a dynamic node (`slurm.sh FLAVOR pod-up slinky-N`), and when the pod goes its
//! record is deleted (slurm-operator 1.1) or left DOWN (1.2). None of these moves a
//! partition's `update_time`, so the exporter must notice them from the nodes it reads.
//!
//! A poller runs in this process at 1 s, as the tests run it; for each event the clock starts
//! when slurmctld shows the change (`scontrol show partition` asked every 50 ms) and stops at
//! the first snapshot that shows it. Target: p95 within one poll plus 0.5 s (1.5 s).
//!
//! Needs the harness (`tests/harness/up.sh`); uses the `slinky` partition of each Slurm, as
//! `tests/slinky.rs` does (run it when those tests are not running). Run with:
//!
//!     cargo bench -p slurmscale-exporter --bench pods            # 22.05, 24.11 and 26.05
//!     cargo bench -p slurmscale-exporter --bench pods -- 26.05   # one of them
//!
//! Figures are written down in exporter/benches/README.md.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use slurmscale_exporter::collect::{CollectorOptions, Poller};
use slurmscale_exporter::config::{AuthConfig, ClusterConfig};
use slurmscale_exporter::model::NodeBase;
use slurmscale_exporter::slurm::SigningAlgorithm;
use slurmscale_exporter::snapshot::ClusterSnapshot;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

const PARTITION: &str = "slinky";
const TRIALS: usize = 10;
const POLL: Duration = Duration::from_secs(1);

struct Slurm {
    flavor: String,
    vars: BTreeMap<String, String>,
}

impl Slurm {
    fn get(flavor: &str) -> Self {
        let run =
            std::env::var("SLURMSCALE_RUN").unwrap_or_else(|_| "/tmp/slurmscale-harness".into());
        let path = format!("{run}/slurm-{flavor}/env");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|_| panic!("no {path}: start the harness with tests/harness/up.sh"));
        let vars = text
            .lines()
            .filter_map(|l| l.strip_prefix("export ")?.split_once('='))
            .map(|(k, v)| (k.to_string(), v.trim_matches('"').to_string()))
            .collect();
        Self {
            flavor: flavor.into(),
            vars,
        }
    }

    fn var(&self, k: &str) -> &str {
        &self.vars[k]
    }

    /// `slurm.sh FLAVOR args…`.
    fn harness(&self, args: &[&str]) {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/harness/slurm.sh");
        let out = Command::new("bash")
            .arg(script)
            .arg(&self.flavor)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "slurm.sh {} {args:?}: {}",
            self.flavor,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// (nodes in the partition, DOWN among them) as slurmctld has them now.
    fn partition(&self) -> (u64, u64) {
        let bin = PathBuf::from(self.var("SLURM_BIN"));
        let run = |program: &str, args: &[&str]| {
            let out = Command::new(bin.join(program))
                .args(args)
                .env("SLURM_CONF", self.var("SLURM_CONF"))
                .env_remove("SLURM_JWT")
                .current_dir(std::env::temp_dir())
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let part = run("scontrol", &["-o", "show", "partition", PARTITION]);
        let nodes = part
            .split_whitespace()
            .find_map(|w| w.strip_prefix("TotalNodes="))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let states = run("sinfo", &["-h", "-N", "-p", PARTITION, "-o", "%T"]);
        let down = states.lines().filter(|l| l.starts_with("down")).count() as u64;
        (nodes, down)
    }

    fn cluster(&self) -> ClusterConfig {
        ClusterConfig {
            name: self.var("SLURM_CLUSTER").into(),
            url: self.var("SLURM_REST_URL").into(),
            user: self.var("SLURM_USER").into(),
            auth: AuthConfig::Key {
                path: self.var("HARNESS_JWT_KEY_FILE").into(),
                algorithm: SigningAlgorithm::Hs256,
                lifetime: Duration::from_secs(600),
            },
            api_version: None,
            ca_file: None,
            timeout: Duration::from_secs(30),
            max_requests_per_second: None,
            kubernetes_jobs: Default::default(),
        }
    }

    /// The partition as slurmctld shows it, waited for.
    fn until(&self, want: (u64, u64)) -> Instant {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.partition() != want {
            assert!(Instant::now() < deadline, "slurmctld never showed {want:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
        Instant::now()
    }
}

/// (nodes in the partition, DOWN among them) as a snapshot has them.
fn seen(s: &ClusterSnapshot) -> Option<(u64, u64)> {
    let p = s
        .partitions
        .data
        .as_ref()?
        .iter()
        .find(|p| &*p.name == PARTITION)?;
    let down = (s.nodes.data.iter().flat_map(|n| n.iter()))
        .filter(|n| n.partitions.iter().any(|q| &**q == PARTITION))
        .filter(|n| n.state.base == NodeBase::Down)
        .count() as u64;
    Some((p.total_nodes, down))
}

/// Waits for the first snapshot showing `want`; when it came.
async fn shown(rx: &mut watch::Receiver<Arc<ClusterSnapshot>>, want: (u64, u64)) -> Instant {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if seen(&rx.borrow_and_update()) == Some(want) {
            return Instant::now();
        }
        let changed = tokio::time::timeout_at(deadline, rx.changed()).await;
        assert!(
            matches!(changed, Ok(Ok(()))),
            "the exporter never showed {want:?}"
        );
    }
}

fn quantile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

async fn trials(slurm: &Slurm) -> BTreeMap<&'static str, Vec<f64>> {
    // From an empty partition, as the tests start.
    for i in 0..4 {
        let _ = Command::new("bash")
            .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/harness/slurm.sh"))
            .args([&slurm.flavor, "pod-down", &format!("slinky-{i}"), "delete"])
            .output();
    }
    slurm.until((0, 0));
    let opts = CollectorOptions {
        interval: POLL,
        ..Default::default()
    };
    let (poller, mut rx) = Poller::new(&slurm.cluster(), opts, Arc::new(Notify::new())).unwrap();
    let stop = CancellationToken::new();
    tokio::spawn(poller.run(stop.clone()));
    shown(&mut rx, (0, 0)).await;
    let mut took: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
    for trial in 0..TRIALS {
        // Each event at another point of the poll cycle.
        tokio::time::sleep(POLL.mul_f64((trial % 5) as f64 / 5.0)).await;
        let mut event = async |name: &'static str, args: &[&str], want: (u64, u64)| {
            slurm.harness(args);
            let at = slurm.until(want);
            let shown = shown(&mut rx, want).await;
            let secs = shown.saturating_duration_since(at).as_secs_f64();
            took.entry(name).or_default().push(secs);
        };
        event("a pod's node joins", &["pod-up", "slinky-0"], (1, 0)).await;
        event(
            "its record left DOWN (1.2)",
            &["pod-down", "slinky-0"],
            (1, 1),
        )
        .await;
        event(
            "taken back by the next pod",
            &["pod-up", "slinky-0"],
            (1, 0),
        )
        .await;
        event(
            "deleted with its record (1.1)",
            &["pod-down", "slinky-0", "delete"],
            (0, 0),
        )
        .await;
    }
    stop.cancel();
    took
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let asked: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let flavors: Vec<&str> = if asked.is_empty() {
        vec!["22.05", "24.11", "26.05"]
    } else {
        asked.iter().map(String::as_str).collect()
    };
    println!(
        "| Slurm, poll every 1 s, {TRIALS} trials | event | p50 | p95 (target ≤ 1.5 s) | max |"
    );
    println!("|---|---|---|---|---|");
    for flavor in flavors {
        let slurm = Slurm::get(flavor);
        for (event, mut v) in trials(&slurm).await {
            let (p50, p95, max) = (
                quantile(&mut v, 0.5),
                quantile(&mut v, 0.95),
                quantile(&mut v, 1.0),
            );
            println!("| {flavor} | {event} | {p50:.2} s | {p95:.2} s | {max:.2} s |");
        }
    }
}
