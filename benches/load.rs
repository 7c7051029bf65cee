//! Load at full size, with the figures written down in
//! `autoscaler/benches/README.md` and `exporter/benches/README.md`. The scenarios are the
//! test's (`tests/support/load.rs`; `tests/load.rs` runs them once with generous bounds),
//! against the harness's real kube-apiserver and both real Slurms, with the `slurmscale`
//! binary built in the bench profile. Run with:
//!
//!     tests/harness/up.sh
//!     cargo bench --bench load
//!
//! It lives in the root package because it runs the `slurmscale` binary as a user would.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::Duration;

use support::load::{autoscaler_load, exporter_load, quantile};

const TRIALS: usize = 3;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let interval = Duration::from_secs(2);
    let mut reaction = Vec::new();
    let mut gap = Vec::new();
    let mut hwm = 0;
    for trial in 1..=TRIALS {
        eprintln!("trial {trial} of {TRIALS}");
        let r = autoscaler_load(200, interval).await;
        r.print();
        assert!(r.failing_moved.is_empty() && r.failing_not_frozen.is_empty());
        reaction.extend(r.reaction);
        gap.extend(r.decision_gap);
        hwm = hwm.max(r.hwm_kib);
    }
    println!(
        "autoscaler, 200 NodeSetAutoscalers over 3 clusters (1 failing), {TRIALS} trials, poll every {interval:?}:\n  \
         sbatch -> NodeSet scaled ({} NodeSets): p50 {:.2} s, p99 {:.2} s (target <= 2 x interval), max {:.2} s\n  \
         longest gap between decisions ({} autoscalers): p50 {:.2} s, p99 {:.2} s (target <= interval + 0.5 s), max {:.2} s\n  \
         peak RSS {:.0} MiB",
        reaction.len(),
        quantile(&reaction, 0.5),
        quantile(&reaction, 0.99),
        quantile(&reaction, 1.0),
        gap.len(),
        quantile(&gap, 0.5),
        quantile(&gap, 0.99),
        quantile(&gap, 1.0),
        hwm as f64 / 1024.0
    );
    let e = exporter_load(10, interval, 300, Duration::from_millis(100)).await;
    e.print();
}
