//! Booting just in time for slurmctld's plan (`spec.plannedJobs.boot: JustInTime`) on a
//! slurm-planned NodeSet, on real Slurm 24.11 and 26.05 (whose slurmrestd names the nodes a
//! pending job is planned on: `scheduled_nodes`, v0.0.40 on): a 4-node job waits behind a
//! 2-node job that runs to its 1-minute limit, and slurmctld plans it on the two busy records
//! and two powered-down ones. The autoscaler powers those two up one lead (boot time and
//! margin) before the planned start — not at submit, when slurmctld itself would only power
//! them up at the start and the job would wait a boot then.
//!
//! A boot is made to take [`BOOT`]: the stand-in operator (`support::planned`) holds the pods
//! that long after slurmctld asks for them. A node that is up and idle for the harness
//! partition's `SuspendTime` (10 s, which `scontrol` cannot change) is powered down again, so
//! the margin — the time a booted node waits for the start — stays well under it while the
//! lead is long enough for a loaded machine's poll, POWER_UP and power-save pass; a site's
//! `SuspendTime` (600 s by default) must likewise exceed its margin.

mod support;

use std::time::{Duration, Instant, SystemTime};

use kube::api::{Patch, PatchParams};
use serde_json::json;
use support::SlurmCluster;
use support::planned::{NODESET, Planned, name, powered_down, ran_or_runs};

/// How long a pod takes here from slurmctld's power-up to its slurmd starting.
const BOOT: Duration = Duration::from_secs(10);
/// The spec's boot time and margin: a power-up `LEAD` seconds before the planned start.
const BOOT_TIME: i64 = 10;
const MARGIN: i64 = 4;
const LEAD: i64 = BOOT_TIME + MARGIN;

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Job `job`'s planned start and the nodes slurmctld holds for it, once backfill has
/// planned it.
fn plan(c: &SlurmCluster, job: &str) -> Option<(i64, String)> {
    let shown = c.run("scontrol", &["show", "job", job, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&shown).ok()?;
    let j = &v["jobs"][0];
    let nodes = j["scheduled_nodes"].as_str().unwrap_or_default();
    let start = j["start_time"]["number"].as_i64()?;
    (!nodes.is_empty() && start > 0).then(|| (start, nodes.to_string()))
}

async fn boots_planned_records_one_lead_ahead(flavor: &str) {
    let p = Planned::start(flavor).await;
    let (cluster, a) = (&p.cluster, &p.a);
    let spec = json!({"spec": {
        "bootTimeSeconds": BOOT_TIME,
        "plannedJobs": {"boot": "JustInTime", "marginSeconds": MARGIN},
    }});
    p.autoscalers
        .patch(NODESET, &PatchParams::default(), &Patch::Merge(spec))
        .await
        .unwrap();
    let busy = cluster.submit(&[
        "-p",
        NODESET,
        "-N",
        "2",
        "--exclusive",
        "-t",
        "1",
        "--wrap",
        "sleep 300",
    ]);
    support::elastic::eventually(
        "the first job runs on two records",
        Duration::from_secs(90),
        a,
        async || ran_or_runs(cluster, &busy),
    )
    .await;
    // From here a pod takes BOOT to come.
    p.hold(true);
    let big = cluster.submit(&[
        "-p",
        NODESET,
        "-N",
        "4",
        "--exclusive",
        "-t",
        "1",
        "--wrap",
        "sleep 1",
    ]);
    let planned = Instant::now() + Duration::from_secs(60);
    let (start, nodes) = loop {
        if let Some(p) = plan(cluster, &big) {
            break p;
        }
        assert!(
            Instant::now() < planned,
            "slurmctld never planned job {big}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(nodes, format!("{NODESET}-[0-3]"), "the records it holds");
    assert!(
        start - unix_now() > LEAD + 10,
        "planned too soon to tell a power-up ahead from one at submit: start in {} s",
        start - unix_now()
    );
    // Powered down at submit and until one lead before the start; then both come up, before
    // the start. The start is slurmctld's plan as it stands at each look: backfill may move
    // it, and the autoscaler follows the plan it reads, not the first one.
    let first_start = start;
    let mut start = start;
    let mut looks = 0;
    let up_at = loop {
        let now = unix_now();
        let down = powered_down(cluster, 2) && powered_down(cluster, 3);
        if let Some((planned, _)) = plan(cluster, &big) {
            start = planned;
        }
        if !down {
            break now;
        }
        assert!(
            now < start + 5,
            "the planned records were not powered up before job {big}'s start: {:?} {:?}",
            support::elastic::node_state(cluster, &name(2)),
            support::elastic::node_state(cluster, &name(3))
        );
        looks += 1;
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(looks > 10, "the records came up at submit ({looks} looks)");
    let said = || {
        format!(
            "planned start {start} (first planned {first_start}), up at {up_at}\n{}",
            a.logs()
        )
    };
    // A look runs Slurm commands and may lag: up to 3 s early, as a 1-s poll and a 1-s
    // power-save pass allow.
    assert!(
        up_at >= start - LEAD - 3,
        "powered up {} s before the start, a lead is {LEAD} s: {}",
        start - up_at,
        said()
    );
    assert!(
        up_at < start,
        "powered up {} s after the planned start: {}",
        up_at - start,
        said()
    );
    // The boot.
    tokio::time::sleep(BOOT).await;
    p.hold(false);
    support::elastic::eventually(
        "the big job runs on all four",
        Duration::from_secs(90),
        a,
        async || ran_or_runs(cluster, &big),
    )
    .await;
    let shown = cluster.run("scontrol", &["-o", "show", "job", &big]);
    assert!(
        shown.contains("Restarts=0"),
        "the big job was requeued: {shown}"
    );
    support::elastic::eventually(
        "a PowerUp Event naming a record and the job",
        Duration::from_secs(10),
        a,
        async || {
            let notes = support::event_notes(&p.client, &p.ns, "PowerUp").await;
            (notes.iter()).any(|n| n.contains(&name(2)) && n.contains(&format!("job {big}")))
        },
    )
    .await;
    let m = a.metrics().await;
    let early = m.get("slurmscale_slurm_planned_early_power_ups_total", &[]);
    assert_eq!(early, Some(2.0), "records powered up ahead");
    p.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn boots_planned_records_one_lead_ahead_on_24_11() {
    boots_planned_records_one_lead_ahead("24.11").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn boots_planned_records_one_lead_ahead_on_26_05() {
    boots_planned_records_one_lead_ahead("26.05").await;
}
