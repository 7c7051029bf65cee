//! Is `slurmscale simulate`'s scheduler Slurm's? A slice of a real trace, time-compressed,
//! goes through the simulator (builtin policy, the real controller) and then, in real time,
//! through the harness's real slurmctld: the same jobs submitted at the same (compressed)
//! moments to the `elastic` partition, whose FUTURE nodes come up when the simulator's
//! NodeSet asked for them. The test compares what both did to each job: when it started
//! relative to the others, and how long it waited.
//!
//! Identical inputs on both sides: the compressed run times, the time limits rounded up to
//! whole minutes (Slurm's unit), the nodes and CPUs per node the simulator fitted. What is
//! *not* identical is what the comparison is about: Slurm's own scheduling passes and node
//! choice against the simulator's model of them, plus real latencies (sbatch, slurmd
//! registration, job launch) on a busy 2-core machine. The figures are in the README.
//!
//! Run alone (it takes about three minutes) with
//! `cargo test --test calibration -- --nocapture` once `tests/harness/up.sh` has run.

mod support;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use slurmscale_sim::formats::{self, Format};
use slurmscale_sim::trace::{NodeShape, Request, TraceJob};
use slurmscale_sim::{Options, Policy, run_policy};
use support::SlurmCluster;

/// The slice: 100 consecutive CEA Curie jobs that fit eight 4-CPU nodes (the harness's
/// elastic partition), with the archive's attribution in its header.
const SLICE: &str = "tests/traces/curie-calibration.swf";
/// Trace seconds per real second.
const COMPRESSION: f64 = 6.0;
/// The elastic partition: e1-e8, 4 CPUs each (memory never binds: 500 MB per CPU of 8000).
const NODES: u32 = 8;
const SHAPE: NodeShape = NodeShape {
    cpus: 4,
    memory_mib: 0,
    gpus: 0,
};
/// What the simulator assumes a node takes from being asked for to taking jobs: here, the
/// harness starting a slurmd and slurmctld registering it.
const BOOT: i64 = 2;

/// The slice as both sides see it: compressed, limits in whole minutes, fitted to the nodes.
fn jobs() -> Vec<TraceJob> {
    let path = support::repo_root().join(SLICE);
    let parsed = formats::read(&path, Format::Swf, false).expect("the calibration slice parses");
    let t0 = parsed.requests[0].submit;
    parsed
        .requests
        .iter()
        .map(|r| {
            compress(r, t0)
                .fit(&SHAPE, NODES)
                .unwrap_or_else(|e| panic!("job {} does not fit: {}", r.id, e.as_str()))
        })
        .collect()
}

fn compress(r: &Request, t0: i64) -> Request {
    let scale = |s: f64| s / COMPRESSION;
    let run = (scale(r.run as f64).round() as u64).max(1);
    let limit = scale(r.limit.unwrap_or(r.run) as f64);
    Request {
        submit: (scale((r.submit - t0) as f64)).round() as i64,
        run,
        limit: Some(((limit / 60.0).ceil() as u64).max(1) * 60),
        ..r.clone()
    }
}

/// What the simulator did: each job's wait, and when the NodeSet grew or shrank.
struct Simulated {
    waits: Vec<i64>,
    starts: Vec<i64>,
    /// (second, replicas) whenever the replica count changed.
    replicas: Vec<(i64, u32)>,
}

fn simulate(jobs: &[TraceJob]) -> Simulated {
    let mut opts = Options::new(SHAPE, NODES);
    opts.sched.boot = BOOT;
    opts.bucket = 1;
    let run = run_policy(Policy::Builtin, jobs.to_vec().into(), &opts, None).expect("replays");
    let starts: Vec<i64> = run
        .stats
        .starts
        .iter()
        .map(|s| s.expect("every job starts in the simulator"))
        .collect();
    let mut replicas = Vec::new();
    let mut last = 0;
    for p in &run.timeline {
        // A bucket of one second holds the count of that second exactly.
        let n = p.provisioned.round() as u32;
        if n != last {
            replicas.push((p.time, n));
            last = n;
        }
    }
    Simulated {
        waits: jobs
            .iter()
            .zip(&starts)
            .map(|(j, s)| s - j.submit)
            .collect(),
        starts,
        replicas,
    }
}

/// What real Slurm reports of a job: submit and start, unix seconds.
#[derive(Clone, Copy, Debug)]
struct Seen {
    submit: i64,
    start: i64,
}

/// Polls squeue once a second for the submit and start times of the jobs in `ids` (job id →
/// index in the slice); finished jobs stay listed for MinJobAge = 60 s, far longer than a
/// poll.
fn watch(
    c: SlurmCluster,
    stop: Arc<AtomicBool>,
    ids: Arc<Mutex<HashMap<String, usize>>>,
    seen: Arc<Mutex<BTreeMap<usize, Seen>>>,
) {
    while !stop.load(Ordering::Relaxed) {
        let out = c
            .cmd("squeue")
            .env("SLURM_TIME_FORMAT", "%s")
            .args(["-h", "-p", "elastic", "-t", "all", "-o", "%A|%V|%S|%T"])
            .output();
        if let Ok(out) = out {
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                let f: Vec<&str> = line.split('|').collect();
                let (Some(id), Some(state)) = (f.first(), f.get(3)) else {
                    continue;
                };
                let Some(j) = ids.lock().unwrap().get(*id).copied() else {
                    continue;
                };
                if !matches!(*state, "RUNNING" | "COMPLETING" | "COMPLETED") {
                    continue;
                }
                if let (Ok(submit), Ok(start)) = (f[1].parse(), f[2].parse()) {
                    seen.lock()
                        .unwrap()
                        .entry(j)
                        .or_insert(Seen { submit, start });
                }
            }
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

enum Step {
    Submit(usize),
    Scale(u32),
}

/// Plays the slice on the real cluster and returns what squeue saw of each job, with the
/// seconds each node took from `node-up` to registered.
fn replay(c: &SlurmCluster, jobs: &[TraceJob], sim: &Simulated) -> (Vec<Option<Seen>>, Vec<f64>) {
    // Scaling after the last job has started changes nothing being compared.
    let last_start = sim.starts.iter().max().copied().unwrap_or(0);
    let mut steps: Vec<(i64, Step)> = jobs
        .iter()
        .enumerate()
        .map(|(j, job)| (job.submit, Step::Submit(j)))
        .chain(
            sim.replicas
                .iter()
                .filter(|(t, _)| *t <= last_start)
                .map(|&(t, n)| (t, Step::Scale(n))),
        )
        .collect();
    // At the same second, nodes before jobs: the simulator scales after its scheduler ran.
    steps.sort_by_key(|(t, s)| (*t, matches!(s, Step::Submit(_))));

    let stop = Arc::new(AtomicBool::new(false));
    let ids = Arc::new(Mutex::new(HashMap::new()));
    let seen = Arc::new(Mutex::new(BTreeMap::new()));
    let watcher = {
        let (c, stop, ids, seen) = (c.clone(), stop.clone(), ids.clone(), seen.clone());
        std::thread::spawn(move || watch(c, stop, ids, seen))
    };
    let origin = Instant::now() + Duration::from_secs(1);
    let mut up = 0u32;
    let mut boots = Vec::new();
    for (t, step) in steps {
        let at = origin + Duration::from_secs(t as u64);
        std::thread::sleep(at.saturating_duration_since(Instant::now()));
        match step {
            Step::Submit(j) => {
                let job = &jobs[j];
                let id = c.submit(&[
                    "-p",
                    "elastic",
                    &format!("--job-name=cal{j}"),
                    &format!("--nodes={}", job.nodes),
                    &format!("--ntasks-per-node={}", job.cpus_per_node),
                    &format!("--time={}", job.limit / 60),
                    "--wrap",
                    &format!("sleep {}", job.run),
                ]);
                ids.lock().unwrap().insert(id, j);
            }
            Step::Scale(n) => {
                while up < n {
                    up += 1;
                    let (c, node) = (c.clone(), format!("e{up}"));
                    boots.push(std::thread::spawn(move || {
                        let t = Instant::now();
                        c.harness(&["node-up", &node]);
                        t.elapsed().as_secs_f64()
                    }));
                }
                // Scale-in: the simulator drains idle nodes; the harness refuses a busy one,
                // so a node still running a (slower) real job stays.
                while up > n {
                    let _ = Command::new("bash")
                        .arg(support::repo_root().join("tests/harness/slurm.sh"))
                        .args([&c.flavor, "node-down", &format!("e{up}")])
                        .output();
                    up -= 1;
                }
            }
        }
    }
    let boots: Vec<f64> = boots.into_iter().map(|h| h.join().unwrap()).collect();
    // Wait for the stragglers: real Slurm gets five minutes more than the simulator needed,
    // generous on purpose (the wait ends as soon as every job is seen; how late they start
    // is what the wait differences below compare).
    let deadline = origin + Duration::from_secs(last_start as u64 + 300);
    while Instant::now() < deadline && seen.lock().unwrap().len() < jobs.len() {
        std::thread::sleep(Duration::from_secs(1));
    }
    stop.store(true, Ordering::Relaxed);
    watcher.join().unwrap();
    let seen = seen.lock().unwrap();
    (
        (0..jobs.len()).map(|j| seen.get(&j).copied()).collect(),
        boots,
    )
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Of the job pairs the simulator started at clearly different times, the share real Slurm
/// started in the same order.
fn order_agreement(sim: &[i64], real: &[i64], margin: i64) -> (f64, usize) {
    let (mut same, mut pairs) = (0, 0);
    for a in 0..sim.len() {
        for b in a + 1..sim.len() {
            if (sim[a] - sim[b]).abs() <= margin || (real[a] - real[b]).abs() <= margin {
                continue;
            }
            pairs += 1;
            same += usize::from((sim[a] < sim[b]) == (real[a] < real[b]));
        }
    }
    (same as f64 / pairs.max(1) as f64, pairs)
}

#[test]
fn the_simulated_scheduler_starts_jobs_when_real_slurmctld_does() {
    let cluster = SlurmCluster::get("24.11");
    let jobs = jobs();
    let sim = simulate(&jobs);

    // The slice has to exercise what is being calibrated, or the comparison proves nothing.
    let multi = jobs.iter().filter(|j| j.nodes > 1).count();
    let queued = sim.waits.iter().filter(|&&w| w > BOOT + 2).count();
    assert!(multi >= 3, "the slice has {multi} multi-node jobs");
    assert!(queued >= 20, "only {queued} jobs queue in the simulator");
    assert!(!sim.replicas.is_empty(), "the simulator never scaled");

    cluster.reset_elastic();
    let (seen, boots) = replay(&cluster, &jobs, &sim);
    cluster.reset_elastic();

    let missing: Vec<&str> = jobs
        .iter()
        .zip(&seen)
        .filter(|(_, s)| s.is_none())
        .map(|(j, _)| j.id.as_str())
        .collect();
    assert!(
        missing.is_empty(),
        "real Slurm never started jobs {missing:?} (slurmctld log: {})",
        Path::new(&cluster.conf)
            .parent()
            .and_then(Path::parent)
            .unwrap()
            .join("log/slurmctld.log")
            .display()
    );
    let seen: Vec<Seen> = seen.into_iter().flatten().collect();
    let real_waits: Vec<i64> = seen.iter().map(|s| s.start - s.submit).collect();
    let first_submit = seen.iter().map(|s| s.submit).min().unwrap();
    let real_starts: Vec<i64> = seen.iter().map(|s| s.start - first_submit).collect();

    println!("job  nodes×cpus  submit  run  limit  sim wait  real wait");
    for (j, job) in jobs.iter().enumerate() {
        println!(
            "{:>3}  {:>5}×{:<4}  {:>6}  {:>3}  {:>5}  {:>8}  {:>9}",
            j,
            job.nodes,
            job.cpus_per_node,
            job.submit,
            job.run,
            job.limit,
            sim.waits[j],
            real_waits[j]
        );
    }
    let mut diffs: Vec<f64> = sim
        .waits
        .iter()
        .zip(&real_waits)
        .map(|(s, r)| (s - r).abs() as f64)
        .collect();
    diffs.sort_by(f64::total_cmp);
    let mean = |w: &[i64]| w.iter().sum::<i64>() as f64 / w.len() as f64;
    let (agreement, pairs) = order_agreement(&sim.starts, &real_starts, 2);
    let mut boots = boots;
    boots.sort_by(f64::total_cmp);
    println!(
        "calibration: {} jobs ({multi} multi-node, {queued} queued in the simulator), \
         replicas {:?}",
        jobs.len(),
        sim.replicas
    );
    println!(
        "mean wait: simulated {:.1} s, real {:.1} s; |difference| p50 {:.0} s, p90 {:.0} s, \
         max {:.0} s; start order agrees on {:.1} % of {pairs} pairs; node-up took p50 {:.1} s, \
         max {:.1} s",
        mean(&sim.waits),
        mean(&real_waits),
        percentile(&diffs, 0.5),
        percentile(&diffs, 0.9),
        percentile(&diffs, 1.0),
        agreement * 100.0,
        percentile(&boots, 0.5),
        percentile(&boots, 1.0),
    );
    // Measured here (README, "Calibration"): order 100 %, |difference| p50 4 s, p90 8 s. The
    // bounds leave room for a slower machine, not for a different schedule.
    assert!(
        agreement >= 0.95,
        "real Slurm started jobs in another order than the simulator: {:.1} % of {pairs} pairs agree",
        agreement * 100.0
    );
    assert!(
        percentile(&diffs, 0.5) <= 8.0 && percentile(&diffs, 0.9) <= 20.0,
        "the simulator's waits are off: |difference| p50 {} s, p90 {} s",
        percentile(&diffs, 0.5),
        percentile(&diffs, 0.9)
    );
}
