//! `simulate` throughput: the first 100,000 jobs of CEA Curie from 2012-03-08 (the
//! replayable part of the trace; see tests/traces/README.md) through every policy,
//! against the same jobs through `static` alone (the scheduler with no policy) in the same
//! process, so the figure survives this machine's drifting speed. Peak RSS is the process's
//! high-water mark after everything ran.
//!
//!     cargo bench -p slurmscale-sim --bench simulate
//!     SLURMSCALE_TRACE=path.swf.gz JOBS=20000 cargo bench -p slurmscale-sim --bench simulate

use std::path::PathBuf;
use std::time::Instant;

use slurmscale_sim::formats::{self, Format};
use slurmscale_sim::trace::{self, NodeShape, Slice, When};
use slurmscale_sim::{self as simulate, Options, Policy};

fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

fn main() {
    let path = std::env::var_os("SLURMSCALE_TRACE").map_or_else(
        || {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../tests/traces/CEA-Curie-2011-2.1-cln.swf.gz")
        },
        PathBuf::from,
    );
    let limit: usize = std::env::var("JOBS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    let t = Instant::now();
    let parsed = formats::read(&path, Format::Swf, false)
        .unwrap_or_else(|e| panic!("{e} (set SLURMSCALE_TRACE to a trace)"));
    let read = t.elapsed();
    let shape = NodeShape {
        cpus: parsed.hints.node_cpus.unwrap_or(16),
        memory_mib: 0,
        gpus: 0,
    };
    let max_nodes = parsed.hints.max_nodes.unwrap_or(5544);
    let first = parsed.requests[0].submit;
    let slice = Slice {
        from: "2012-03-08"
            .parse::<When>()
            .ok()
            .map(|w| w.resolve(first))
            .filter(|_| path.to_string_lossy().contains("Curie")),
        until: None,
        limit: Some(limit),
    };
    let (jobs, _) = trace::select(&parsed.requests, slice, &shape, max_nodes);
    let opts = Options::new(shape, max_nodes);
    println!(
        "{}: {} jobs on {max_nodes} × {} CPUs (read and parsed in {:.1}s)",
        path.display(),
        jobs.len(),
        shape.cpus,
        read.as_secs_f64()
    );

    let t = Instant::now();
    simulate::run(&[Policy::Static], jobs.clone(), &opts, None).expect("static replay");
    let baseline = t.elapsed().as_secs_f64();
    // The policies a replay runs by default (booting just in time is asked for by name).
    let policies: Vec<Policy> = Policy::defaults().collect();
    let t = Instant::now();
    simulate::run(&policies, jobs.clone(), &opts, None).expect("replay");
    let all = t.elapsed().as_secs_f64();
    for &p in &policies {
        let t = Instant::now();
        simulate::run(&[p], jobs.clone(), &opts, None).expect("replay");
        println!(
            "  {:<13} alone: {:>6.1}s",
            p.as_str(),
            t.elapsed().as_secs_f64()
        );
    }
    let n = jobs.len() as f64;
    println!(
        "static alone (the scheduler, no policy): {baseline:.1}s, {:.0} jobs/s",
        n / baseline
    );
    println!(
        "all {} policies (2 threads' worth of cores): {all:.1}s (target ≤ 60 s), {:.0} jobs/s per policy, {:.1}× the static run",
        policies.len(),
        n * policies.len() as f64 / all,
        all / baseline
    );
    if let Some(rss) = peak_rss_mib() {
        println!("peak RSS: {rss:.0} MiB");
    }
}
