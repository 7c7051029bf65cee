//! Shared-pool replay throughput: 30 days of CEA Curie's `large` partition (512 nodes) with
//! Alibaba's GPU pod list ×8 on the same pool, through every way of sharing (25 replays with
//! the static sweep) — what `slurmscale simulate --pods` runs in the README — against one
//! fixed split alone in the same process, so the figure survives this machine's drifting speed.
//!
//!     cargo bench -p slurmscale-sim --bench shared

use std::path::PathBuf;
use std::time::Instant;

use slurmscale_sim::formats::{self, Format};
use slurmscale_sim::pods::{self, Alignment, PodFormat};
use slurmscale_sim::shared::{self, POLICIES, SharedOptions, Sharing};
use slurmscale_sim::trace::{self, NodeShape, Slice, When};

fn main() {
    let traces = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/traces");
    let t = Instant::now();
    let mut parsed = formats::read(
        &traces.join("CEA-Curie-2011-2.1-cln.swf.gz"),
        Format::Swf,
        false,
    )
    .unwrap_or_else(|e| panic!("{e} (the traces are in tests/traces)"));
    parsed.keep_partitions(&["large".to_string()]);
    let pod_log = pods::read(
        &traces.join("alibaba-gpu-2023/openb_pod_list_default.csv"),
        PodFormat::Openb,
        false,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let read = t.elapsed();
    let shape = NodeShape {
        cpus: 32,
        memory_mib: 0,
        gpus: 8,
    };
    let nodes = 512;
    let first = parsed.requests[0].submit;
    let when = |s: &str| s.parse::<When>().ok().map(|w| w.resolve(first));
    let slice = Slice {
        from: when("2012-03-08"),
        until: when("2012-04-07"),
        limit: None,
    };
    let (jobs, _) = trace::select(&parsed.requests, slice, &shape, nodes);
    let align = Alignment {
        from: 9_900_000,
        scale: 8.0,
    };
    let until = jobs[jobs.len() - 1].submit + 1;
    let (pods, _) = pods::select(&pod_log.pods, align, jobs[0].submit, until, &shape);
    let opts = SharedOptions::new(shape, nodes, nodes / 2);
    println!(
        "{} jobs and {} pods on {nodes} nodes, 30 days (read and parsed in {:.1}s)",
        jobs.len(),
        pods.len(),
        read.as_secs_f64()
    );

    let t = Instant::now();
    shared::run_sharing(
        Sharing::Static(nodes / 2),
        jobs.clone().into(),
        pods.clone().into(),
        &opts,
    )
    .expect("static replay");
    let baseline = t.elapsed().as_secs_f64();
    let t = Instant::now();
    shared::run_sharing(
        Sharing::Builtin,
        jobs.clone().into(),
        pods.clone().into(),
        &opts,
    )
    .expect("builtin replay");
    let builtin = t.elapsed().as_secs_f64();
    let policies: Vec<String> = POLICIES.iter().map(|p| p.to_string()).collect();
    let runs = shared::runs_for(&policies, nodes);
    let t = Instant::now();
    shared::run(&policies, jobs, pods, &opts, None).expect("replay");
    let all = t.elapsed().as_secs_f64();
    println!("one fixed split alone: {baseline:.2}s; builtin alone: {builtin:.2}s");
    println!(
        "every way of sharing ({runs} replays, on all cores): {all:.1}s (target ≤ 60 s), {:.1}× the fixed split",
        all / baseline
    );
}
