//! Decode + aggregate speed and memory on synthetic clusters, against the cost of merely
//! parsing the same bytes (`serde_json::from_slice::<IgnoredAny>`), and `/metrics` render
//! time. Run with:
//!
//!     cargo bench -p slurmscale-exporter --bench decode
//!
//! Shapes: v0.0.38 (Slurm 22.05) and v0.0.44 (Slurm 25.11), built from answers recorded from
//! the harness's real Slurms (exporter/tests/golden). Each body is written to a file and
//! decoded in a child process, so peak RSS (VmHWM) is the decoder's own: body + what the
//! decoder holds on to. Targets: time ratio ≤ 2.0, peak RSS ≤ 1.5 × body + 30 MiB.
//! Figures are written down in exporter/benches/README.md.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde::de::IgnoredAny;
use serde_json::{Value, json};
use slurmscale_exporter::metrics::{self, MetricsOptions, PageInput};
use slurmscale_exporter::slurm::ApiVersion;
use slurmscale_exporter::snapshot::ClusterSnapshot;

fn golden(version: &str, endpoint: &str) -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("tests/golden/{version}/{endpoint}.json"));
    serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap()
}

/// Job and node templates of a shape: a running job, a pending job, a node.
fn templates(shape: ApiVersion) -> (Value, Value, Value, Value) {
    let recorded = if shape == ApiVersion::V0038 {
        "v0.0.38"
    } else {
        "v0.0.42"
    };
    let jobs = golden(recorded, "jobs");
    let jobs = jobs["jobs"].as_array().unwrap();
    let running = jobs.iter().find(|j| j["job_id"] == 2).unwrap().clone();
    let pending = jobs.iter().find(|j| j["job_id"] == 6).unwrap().clone();
    let node = golden(recorded, "nodes")["nodes"][0].clone();
    let mut envelope = golden(recorded, "jobs");
    envelope.as_object_mut().unwrap().remove("jobs");
    let (mut running, mut pending) = (running, pending);
    if shape == ApiVersion::V0044 {
        // Fields v0.0.43 and v0.0.44 added to job_info.
        for j in [&mut running, &mut pending] {
            j["licenses_allocated"] = json!("");
            j["segment_size"] = json!(0);
            j["stderr_expanded"] = json!("/home/alice/slurm-%j.out");
            j["stdin_expanded"] = json!("/dev/null");
            j["stdout_expanded"] = json!("/home/alice/slurm-%j.out");
            j["step_id"] = json!({"job_id": 0, "step_id": "batch", "step_het_component": {"set": false, "infinite": false, "number": 0}});
            j["submit_line"] =
                json!("sbatch -p batch -N 2 --wrap 'srun ./simulate --steps 1000000'");
        }
    }
    (running, pending, node, envelope)
}

/// A synthetic cluster: `nodes` nodes in 4 partitions, `jobs` jobs (a quarter running).
fn bodies(shape: ApiVersion, nodes: usize, jobs: usize) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let (running, pending, node, envelope) = templates(shape);
    let partitions = ["batch", "gpu", "debug", "elastic"];
    let mut js = Vec::with_capacity(jobs);
    for i in 0..jobs {
        let mut j = if i % 4 == 0 {
            running.clone()
        } else {
            pending.clone()
        };
        j["job_id"] = json!(1_000_000 + i);
        j["partition"] = json!(partitions[i % 4]);
        j["user_name"] = json!(format!("user{}", i % 500));
        j["name"] = json!(format!("job-{i}"));
        js.push(j);
    }
    let mut jobs_body = envelope.clone();
    jobs_body["jobs"] = Value::Array(js);
    let mut ns = Vec::with_capacity(nodes);
    for i in 0..nodes {
        let mut n = node.clone();
        n["name"] = json!(format!("n{i:05}"));
        n["hostname"] = json!(format!("n{i:05}"));
        n["partitions"] = json!([partitions[i % 4]]);
        ns.push(n);
    }
    let mut nodes_body = envelope.clone();
    nodes_body["nodes"] = Value::Array(ns);
    let parts = golden(
        if shape == ApiVersion::V0038 {
            "v0.0.38"
        } else {
            "v0.0.42"
        },
        "partitions",
    );
    (
        serde_json::to_vec(&jobs_body).unwrap(),
        serde_json::to_vec(&nodes_body).unwrap(),
        serde_json::to_vec(&parts).unwrap(),
    )
}

fn vm_hwm_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("VmHWM:")
                    .map(|v| v.trim().trim_end_matches(" kB").trim().parse().unwrap_or(0))
            })
        })
        .unwrap_or(0)
}

fn best_of<T>(runs: usize, mut f: impl FnMut() -> T) -> Duration {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(f());
            t.elapsed()
        })
        .min()
        .unwrap()
}

/// Child: decode one file; print "<decode ms> <ignored ms> <render ms> <series> <vmhwm kib>".
fn child(shape: ApiVersion, jobs: &Path, nodes: &Path, parts: &Path) {
    let jobs = std::fs::read(jobs).unwrap();
    let nodes_b = std::fs::read(nodes).unwrap();
    let parts_b = std::fs::read(parts).unwrap();
    // Peak memory of one decode: measured before any timing loop keeps extra copies around.
    let decoded = shape.decode_jobs(&jobs, false).unwrap().data;
    let hwm = vm_hwm_kib();
    let runs = if jobs.len() > 100 << 20 { 3 } else { 7 };
    let ignored = best_of(runs, || {
        serde_json::from_slice::<IgnoredAny>(&jobs).unwrap()
    });
    let decode = best_of(runs, || shape.decode_jobs(&jobs, false).unwrap().data);
    let at = SystemTime::now();
    let mut s = ClusterSnapshot::new("bench", "http://bench");
    s.jobs.succeed(at, Duration::ZERO, Some(decoded));
    s.nodes.succeed(
        at,
        Duration::ZERO,
        Some(shape.decode_nodes(&nodes_b).unwrap().data),
    );
    s.partitions.succeed(
        at,
        Duration::ZERO,
        Some(shape.decode_partitions(&parts_b).unwrap().data),
    );
    s.collected_at = Some(at);
    let snaps = [Arc::new(s)];
    let opts = MetricsOptions::default();
    let page = || metrics::render(&PageInput::new(&snaps, &opts, SystemTime::now()), |_| {});
    let text = page();
    let render = best_of(5, page);
    let series = text.lines().filter(|l| !l.starts_with('#')).count();
    println!(
        "{} {} {} {series} {hwm}",
        decode.as_secs_f64() * 1e3,
        ignored.as_secs_f64() * 1e3,
        render.as_secs_f64() * 1e3
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // `--write SHAPE NODES JOBS DIR`: only write the bodies (for profiling with perf).
    if let Some(i) = args.iter().position(|a| a == "--write") {
        let shape: ApiVersion = args[i + 1].parse().unwrap();
        let (j, n, p) = bodies(
            shape,
            args[i + 2].parse().unwrap(),
            args[i + 3].parse().unwrap(),
        );
        let dir = Path::new(&args[i + 4]);
        std::fs::write(dir.join("jobs.json"), j).unwrap();
        std::fs::write(dir.join("nodes.json"), n).unwrap();
        std::fs::write(dir.join("parts.json"), p).unwrap();
        return;
    }
    // `--loop ignored|SHAPE FILE N`: one kind of work only, for `perf stat`.
    if let Some(i) = args.iter().position(|a| a == "--loop") {
        let bytes = std::fs::read(&args[i + 2]).unwrap();
        let n: usize = args[i + 3].parse().unwrap();
        for _ in 0..n {
            if args[i + 1] == "ignored" {
                std::hint::black_box(serde_json::from_slice::<IgnoredAny>(&bytes).unwrap());
            } else {
                let shape: ApiVersion = args[i + 1].parse().unwrap();
                std::hint::black_box(shape.decode_jobs(&bytes, false).unwrap());
            }
        }
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--child") {
        let shape: ApiVersion = args[i + 1].parse().unwrap();
        child(
            shape,
            Path::new(&args[i + 2]),
            Path::new(&args[i + 3]),
            Path::new(&args[i + 4]),
        );
        return;
    }
    let dir: PathBuf =
        std::env::temp_dir().join(format!("slurmscale-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    println!(
        "| shape | nodes | jobs | /jobs body | decode+aggregate | parse only (IgnoredAny) | ratio (≤ 2.0) | peak RSS | 1.5×body+30MiB | /metrics render | series |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for shape in [ApiVersion::V0038, ApiVersion::V0044] {
        for (nodes, jobs) in [(1_000, 20_000), (10_000, 100_000)] {
            let (j, n, p) = bodies(shape, nodes, jobs);
            let (jp, np, pp) = (
                dir.join("jobs.json"),
                dir.join("nodes.json"),
                dir.join("parts.json"),
            );
            std::fs::write(&jp, &j).unwrap();
            std::fs::write(&np, &n).unwrap();
            std::fs::write(&pp, &p).unwrap();
            let body_mib = j.len() as f64 / (1 << 20) as f64;
            drop((j, n, p));
            let out = Command::new(std::env::current_exe().unwrap())
                .args(["--child", shape.as_str()])
                .args([&jp, &np, &pp])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let f: Vec<f64> = String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .map(|x| x.parse().unwrap())
                .collect();
            let (decode, ignored, render, series, hwm) = (f[0], f[1], f[2], f[3], f[4] / 1024.0);
            println!(
                "| {shape} | {nodes} | {jobs} | {body_mib:.1} MiB | {decode:.0} ms | {ignored:.0} ms | {:.2} | {hwm:.0} MiB | {:.0} MiB | {render:.1} ms | {series} |",
                decode / ignored,
                1.5 * body_mib + 30.0,
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
