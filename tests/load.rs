//! Load, against the real kube-apiserver and both real Slurms: one autoscaler
//! with 200 NodeSetAutoscalers over three clusters, one failing, and one exporter with ten
//! clusters, one black-holed. The bounds here are generous so the suite is never flaky; the
//! bench (`cargo bench --bench load`) runs the same scenarios and its figures are in
//! `autoscaler/benches/README.md` and `exporter/benches/README.md`.

mod support;

use std::time::Duration;

use support::load::{autoscaler_load, exporter_load, quantile};

/// Both scenarios load the same two cores: they take turns (and the elastic partitions
/// are the autoscaler tests' to share).
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Every healthy autoscaler decides within its interval and follows a job within one poll
/// plus its decision; the failing cluster's are Frozen and their NodeSets never move.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_autoscalers_over_three_clusters_one_failing() {
    let _turn = TURN.lock().await;
    let _elastic = support::elastic::ELASTIC.lock().await;
    let interval = Duration::from_secs(2);
    let r = autoscaler_load(200, interval).await;
    r.print();
    assert!(
        r.failing_not_frozen.is_empty(),
        "failing-cluster autoscalers not Frozen: {:?}",
        r.failing_not_frozen
    );
    assert!(
        r.failing_moved.is_empty(),
        "failing-cluster NodeSets moved: {:?}",
        r.failing_moved
    );
    // A decision at least every interval (plus a reconcile round's slack).
    let gap = quantile(&r.decision_gap, 1.0);
    assert!(
        r.decision_gap.len() == r.healthy && gap <= interval.as_secs_f64() + 1.5,
        "{} of {} healthy autoscalers decided; the longest gap between decisions was {gap:.2} s (interval {interval:?})",
        r.decision_gap.len(),
        r.healthy
    );
    // sbatch → scaled: the wait for the next poll (≤ one interval), the poll, the decision.
    let p99 = quantile(&r.reaction, 0.99);
    assert!(
        p99 <= 2.0 * interval.as_secs_f64() + 2.0,
        "p99 sbatch -> NodeSet scaled {p99:.2} s (interval {interval:?}): {:?}",
        r.reaction
    );
    assert!(
        r.hwm_kib < 512 * 1024,
        "the autoscaler peaked at {} MiB",
        r.hwm_kib / 1024
    );
}

/// Ten clusters, one whose slurmrestd never answers a connect: scrapes stay fast and the
/// other nine fresh; the black hole is reported down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_clusters_one_black_holed_scrapes_stay_fast() {
    let _turn = TURN.lock().await;
    let interval = Duration::from_secs(2);
    let r = exporter_load(10, interval, 60, Duration::from_millis(100)).await;
    r.print();
    let p99 = quantile(&r.scrape, 0.99);
    assert!(p99 < 0.25, "p99 scrape {:.1} ms: {:?}", p99 * 1e3, r.scrape);
    assert!(
        r.healthy_down.is_empty(),
        "healthy clusters down: {:?}",
        r.healthy_down
    );
    let oldest = quantile(&r.healthy_age, 1.0);
    assert!(
        oldest <= 2.0 * interval.as_secs_f64() + 1.0,
        "a healthy cluster's data got {oldest:.2} s old (interval {interval:?})"
    );
    assert!(
        !r.hole_up.is_empty() && r.hole_up.iter().all(|v| *v == 0.0),
        "the black-holed cluster's slurm_exporter_up: {:?}",
        r.hole_up
    );
}
