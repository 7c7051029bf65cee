//! Load, against the real kube-apiserver and both real Slurms: one autoscaler
//! with 200 NodeSetAutoscalers over three clusters, one failing, and one exporter with ten
//! clusters, one black-holed. The test asserts what happens, never how fast: the bench
//! (`cargo bench --bench load`) runs the same scenarios and measures the speed, its figures
//! in `autoscaler/benches/README.md` and `exporter/benches/README.md`.

mod support;

use std::time::Duration;

use support::load::{HOLE, autoscaler_load_watching, exporter_load, quantile};

/// Both scenarios load the same two cores: they take turns (and the elastic partitions
/// are the autoscaler tests' to share).
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Every healthy autoscaler keeps deciding and its NodeSet follows a job; the failing
/// cluster's are Frozen and their NodeSets never move.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_autoscalers_over_three_clusters_one_failing() {
    let _turn = TURN.lock().await;
    let _elastic = support::elastic::ELASTIC.lock().await;
    let interval = Duration::from_secs(2);
    // Twenty intervals: an autoscaler with fewer than two decisions in them is stuck, however
    // slow the machine.
    let r = autoscaler_load_watching(200, interval, interval * 20).await;
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
    // Decisions keep coming: every healthy autoscaler decided at least twice (its gap is
    // finite). The gap itself is printed above; its target is the load bench's.
    let stuck = r.decision_gap.iter().filter(|g| !g.is_finite()).count();
    assert!(
        r.decision_gap.len() == r.healthy && stuck == 0,
        "{} of {} healthy autoscalers decided, {stuck} of them fewer than twice in {:?}",
        r.decision_gap.len(),
        r.healthy,
        interval * 20
    );
    // Every healthy NodeSet followed its job within support::load's generous deadline (a
    // NodeSet that never did counts as infinite). The p99 is printed above and is the load
    // bench's to hold to a target.
    let missed = r.reaction.iter().filter(|t| !t.is_finite()).count();
    assert!(
        r.reaction.len() == r.healthy && missed == 0,
        "{missed} of {} healthy NodeSets never followed the job: {:?}",
        r.healthy,
        r.reaction
    );
    assert!(
        r.hwm_kib < 512 * 1024,
        "the autoscaler peaked at {} MiB",
        r.hwm_kib / 1024
    );
}

/// The exporter's client gives up on a connect after 5 s (exporter/src/slurm/client.rs): a
/// scrape or a poller that waited on the black hole would take at least that long.
const HOLE_CONNECT_DEADLINE: Duration = Duration::from_secs(5);

/// Ten clusters, one whose slurmrestd never answers a connect: scrapes never wait on it and
/// the other nine keep collecting; the black hole is reported down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_clusters_one_black_holed_scrapes_stay_fast() {
    let _turn = TURN.lock().await;
    let interval = Duration::from_secs(2);
    // 200 scrapes (20 s and more): several of the black hole's connect deadlines, so its
    // poller's count and a healthy one's can be told apart below.
    let r = exporter_load(10, interval, 200, Duration::from_millis(100)).await;
    r.print();
    // Every scrape answered before the black hole's connect deadline: none waited on a poll.
    // The scrape p99 is printed above; its target is the load bench's.
    let slowest = quantile(&r.scrape, 1.0);
    assert!(
        slowest < HOLE_CONNECT_DEADLINE.as_secs_f64(),
        "a scrape took {slowest:.2} s, as long as a connect to the black hole: {:?}",
        r.scrape
    );
    assert!(
        r.healthy_down.is_empty(),
        "healthy clusters down: {:?}",
        r.healthy_down
    );
    // Fresh, without a clock: a healthy cluster's poller held up behind the black hole would
    // finish no more collections than the hole's own. The data's age is printed above; its
    // target is the load bench's.
    let hole = r.collections.get(HOLE).copied().unwrap_or(f64::NAN);
    let behind: Vec<(&String, &f64)> = r
        .collections
        .iter()
        .filter(|(c, n)| c.as_str() != HOLE && (n.is_nan() || **n <= hole))
        .collect();
    assert!(
        hole.is_finite() && behind.is_empty(),
        "healthy clusters that collected no more often than the black hole ({hole} collections): \
         {behind:?}"
    );
    assert!(
        !r.hole_up.is_empty() && r.hole_up.iter().all(|v| *v == 0.0),
        "the black-holed cluster's slurm_exporter_up: {:?}",
        r.hole_up
    );
}
