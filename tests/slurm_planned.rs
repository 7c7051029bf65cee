//! Slurm-planned scaling (`spec.mode: SlurmPlanned`) on the three real Slurms. The harness's
//! `planned` partition is a Slinky NodeSet's partition (`NodeSet=planned Feature=planned`)
//! with Slurm's power saving on for it alone (`tests/harness/slurm.sh`): the autoscaler keeps
//! one powered-down `State=CLOUD` record per ordinal, slurmctld plans jobs on them and powers
//! up exactly the nodes a job starts on, and powers down the ones idle for `SuspendTime`.
//!
//! The test plays slurm-operator and the kubelet, as the operator does it: the NodeSet's
//! replicas rise → a Pod object for the lowest free ordinal, whose `slurmd -Z -b` joins the
//! record (`slurm.sh pod-up`), marked Ready; replicas fall → the pod ranked first goes (lowest
//! `pod-deletion-cost`, then highest ordinal), after the operator's DRAIN and once its node
//! runs nothing, with the preStop's DOWN (`pod-down … down`). What is checked: the records
//! are made and shown; a job at zero pods scales the NodeSet to exactly its nodes and runs
//! on them without a requeue; once idle, slurmctld powers them down and exactly those pods
//! go; the records the operator left DRAIN/DOWN are resumed, so the next job plans on them
//! and runs, after a `scontrol reconfigure` too (the records refreshed); a big job that must
//! wait holds no node up before it starts (the mode's premise); a wanted ordinal above free
//! ones is covered without a requeue, the extra pods counted and later retired; a record whose pod
//! never came (DOWN at `ResumeTimeout`) is resumed too; a slurmctld restart (or a 24.11
//! reconfigure) while records power up for a job whose pods have not come loses neither the
//! job nor the nodes — and a
//! NodeSet whose slurmd lacks `-b` is refused. On 24.11 and 26.05 the main case runs on the
//! NodeSet exactly as Slinky's own chart renders it (`slurm-worker-planned`, pods
//! `slurm-worker-planned-<ordinal>` with host name, so Slurm node, `planned-<ordinal>`); the
//! rest on one named `planned`, as a NodeSet made without the chart is. The restart is why `tests/run.sh` runs these
//! on a copy of the servers whose other tests (`restarts.rs`, `keda.rs`) never run beside
//! them.

mod support;

use std::time::{Duration, Instant};

use support::planned::{
    MAX, Made, NODESET, PLANNED_SCALE, Planned, name, powered_down, ran_or_runs, reset, setup,
};
use support::{Process, SlurmCluster, kube_client, namespace};

async fn follows_slurmctlds_power_requests(flavor: &str, made: Made) {
    let p = Planned::start_made(flavor, made).await;
    let (cluster, client, ns, a) = (&p.cluster, &p.client, &p.ns, &p.a);
    let replicas = async || p.replicas().await;
    let state = |i: usize| support::elastic::node_state(cluster, &name(i));

    // A two-node job at zero pods: slurmctld powers up two records, the NodeSet gets pods
    // for exactly them (and for any free ordinal below them, which a NodeSet creates first:
    // 24.11 picks the lowest ordinals by Weight, 22.05 by its node table), and the job runs
    // on them, never requeued.
    let sent = Instant::now();
    let job = cluster.submit(&["-p", NODESET, "-N", "2", "--exclusive", "--wrap", "sleep 3"]);
    let job_nodes = || {
        let list = cluster.run("squeue", &["-h", "-j", &job, "-o", "%N"]);
        cluster
            .run("scontrol", &["show", "hostnames", list.trim()])
            .lines()
            .map(String::from)
            .collect::<Vec<String>>()
    };
    support::elastic::eventually(
        "slurmctld allocates two records",
        Duration::from_secs(30),
        a,
        async || job_nodes().len() == 2,
    )
    .await;
    let nodes = job_nodes();
    let top = nodes
        .iter()
        .filter_map(|n| n.strip_prefix("planned-")?.parse::<i32>().ok())
        .max()
        .expect("the job's nodes are records");
    support::elastic::eventually(
        "the NodeSet scaled to cover the two nodes slurmctld powers up",
        PLANNED_SCALE,
        a,
        async || replicas().await == top + 1,
    )
    .await;
    let scaled = sent.elapsed();
    support::elastic::eventually(
        "the job runs on the powered-up records",
        Duration::from_secs(90),
        a,
        async || ran_or_runs(cluster, &job),
    )
    .await;
    let started = sent.elapsed();
    if flavor == "22.05" {
        // The records the test before left resumed are schedulable: a refresh now (as a
        // new replica once did, not knowing whether slurmctld had reloaded) would have
        // requeued the job if its DRAIN met slurmctld allocating them.
        let early = support::event_notes(client, ns, "Refresh").await;
        assert!(early.is_empty(), "refreshed with no reload seen: {early:?}");
    }
    let shown = cluster.run("scontrol", &["-o", "show", "job", &job]);
    assert!(
        shown.contains("Restarts=0"),
        "the job was requeued: {shown}"
    );
    let m = a.metrics().await;
    let unrequested = m
        .get(
            "slurmscale_slurm_planned_unrequested_pods_total",
            &[("namespace", ns), ("autoscaler", NODESET)],
        )
        .unwrap_or(-1.0);
    assert_eq!(
        unrequested,
        f64::from(top + 1 - 2),
        "pods beyond the two asked for are counted: nodes {nodes:?}"
    );
    let wakes = m.get("slurmscale_autoscaler_wakes_total", &[]);
    assert!(
        wakes.is_some_and(|w| w >= 1.0),
        "slurmctld's ResumeProgram did not reach POST /wake: {wakes:?}"
    );

    // Idle for SuspendTime: slurmctld powers both down, their pods go, and the records the
    // operator left DRAIN + DOWN are resumed: powered down and plannable again.
    support::elastic::eventually(
        "back to zero pods once slurmctld powered the nodes down, the records resumed",
        Duration::from_secs(90),
        a,
        async || {
            replicas().await == 0
                && (0..MAX).all(|i| {
                    let (st, _) = state(i);
                    st.split('+').any(|w| w == "POWERED_DOWN") && support::elastic::clean(&st)
                })
        },
    )
    .await;
    let retired = support::event_notes(client, ns, "Retire").await;
    assert!(
        retired
            .iter()
            .any(|n| n.contains("planned-0") || n.contains("planned-1")),
        "{retired:?}"
    );
    let resumed = support::event_notes(client, ns, "Resume").await;
    assert!(!resumed.is_empty(), "no Resume event");

    // slurmctld loads its configuration again (Slinky reconfigures on every change; 24.11
    // and 26.05 re-execute themselves): on 22.05 and 24.11 a resumed record, left
    // NOT_RESPONDING, then takes no job until refreshed (DRAIN, RESUME), which the autoscaler
    // does once it sees the reload in /diag; 26.05 leaves it plainly powered down and plans on
    // it. The next job, pinned to a resumed record, runs.
    cluster.run("scontrol", &["reconfigure"]);
    // slurmctld answering again, waited for rather than assumed after a fixed pause.
    support::elastic::eventually(
        "slurmctld answers after its reconfigure",
        Duration::from_secs(30),
        a,
        async || support::elastic::slurmctld_up(cluster),
    )
    .await;
    let job = cluster.submit(&[
        "-p",
        NODESET,
        "-w",
        &nodes[0],
        "--exclusive",
        "--wrap",
        "sleep 1",
    ]);
    support::elastic::eventually(
        "a job runs again on a resumed record after a reconfigure",
        Duration::from_secs(90),
        a,
        async || ran_or_runs(cluster, &job),
    )
    .await;
    let refreshed = support::event_notes(client, ns, "Refresh").await;
    assert_eq!(
        refreshed.iter().any(|n| n.contains(&nodes[0])),
        flavor != "26.05",
        "{refreshed:?}"
    );
    eprintln!(
        "Slurm {flavor}: sbatch -> /scale {} in {scaled:?} (job on {nodes:?}), job running in {started:?}; pods: {:?}",
        top + 1,
        p.pods()
    );
    p.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_slurmctlds_power_requests_on_22_05() {
    follows_slurmctlds_power_requests("22.05", Made::ByHand(&["-b"])).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_slurmctlds_power_requests_on_24_11() {
    follows_slurmctlds_power_requests("24.11", Made::ByChart).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_slurmctlds_power_requests_on_26_05() {
    follows_slurmctlds_power_requests("26.05", Made::ByChart).await;
}

/// The premise of the mode: slurmctld plans on the powered-down records, so a big job that
/// must wait holds no node idle for it. With two records busy, a 4-node job waits for them
/// (backfill reserves all four) and a 1-node job too long to fit before it waits behind it:
/// nothing more is powered up and the NodeSet stays at 2 while they wait; when the busy job
/// ends the big one starts, and only then do the other two come up — the NodeSet reaches
/// exactly the big job's size. (24.11, whose weights make the first job's records 0 and 1.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_big_job_holds_no_node_up_until_it_starts() {
    let p = Planned::start("24.11").await;
    let (cluster, a) = (&p.cluster, &p.a);
    let replicas = async || p.replicas().await;

    // Long enough to watch the others wait behind it on any machine (the watch below looks
    // every half second, and each look runs four Slurm commands and a Kubernetes read).
    let busy = cluster.submit(&[
        "-p",
        NODESET,
        "-N",
        "2",
        "--exclusive",
        "-t",
        "2",
        "--wrap",
        "sleep 40",
    ]);
    support::elastic::eventually(
        "the first job runs on two records",
        // slurmctld's 30-s CONFIGURING check, as for every job here.
        Duration::from_secs(90),
        a,
        async || ran_or_runs(cluster, &busy),
    )
    .await;
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
    let long = cluster.submit(&[
        "-p",
        NODESET,
        "-N",
        "1",
        "--exclusive",
        "-t",
        "10",
        "--wrap",
        "sleep 1",
    ]);
    // The three jobs' states from one squeue call, read after the look's other checks: the
    // first job still running then means it ran through all of them (it cannot end and
    // the others move between two separate reads).
    let states = || {
        let shown = cluster.run(
            "squeue",
            &["-h", "-j", &format!("{busy},{big},{long}"), "-o", "%i %T"],
        );
        let of = |job: &str| {
            (shown.lines())
                .find_map(|l| l.strip_prefix(&format!("{job} ")))
                .unwrap_or_default()
                .trim()
                .to_string()
        };
        (of(&busy), of(&big), of(&long))
    };
    // While the first job runs, the other two wait and nothing else comes up.
    let mut looks = 0;
    loop {
        let pods = replicas().await;
        let down = (powered_down(cluster, 2), powered_down(cluster, 3));
        let (first, waiting_big, waiting_long) = states();
        if first != "RUNNING" {
            break;
        }
        assert_eq!(pods, 2, "a pod while the big job waits: {:?}", p.pods());
        assert_eq!(
            down,
            (true, true),
            "a record powered up while the big job waits: {:?} {:?}",
            support::elastic::node_state(cluster, &name(2)),
            support::elastic::node_state(cluster, &name(3))
        );
        assert_eq!(
            (waiting_big.as_str(), waiting_long.as_str()),
            ("PENDING", "PENDING")
        );
        looks += 1;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(
        looks >= 4,
        "the first job ended before the others were watched waiting"
    );
    // It ends: the big job starts on all four, the other two come up only now.
    support::elastic::eventually(
        "the NodeSet at the big job's size, the big job running",
        Duration::from_secs(90),
        a,
        async || replicas().await == 4 && ran_or_runs(cluster, &big),
    )
    .await;
    assert_eq!(p.pods(), ["+0", "+1", "+2", "+3"], "pods, in order");
    let shown = cluster.run("scontrol", &["-o", "show", "job", &big]);
    assert!(
        shown.contains("Restarts=0"),
        "the big job was requeued: {shown}"
    );
    p.finish().await;
}

/// An ordinal mismatch costs no requeue: a job that may not use records 0 and 1 gets 2
/// powered up, and since a NodeSet creates its lowest free ordinals first the autoscaler
/// covers it with three pods, counting the two slurmctld did not ask for. The job runs on its
/// own record, never requeued, and once idle slurmctld powers the other two down and they go
/// as well. (22.05, which picks records by its node table; 24.11 runs the premise above.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ordinal_above_free_ones_is_covered_without_a_requeue() {
    let p = Planned::start("22.05").await;
    let (cluster, ns, a) = (&p.cluster, &p.ns, &p.a);
    let replicas = async || p.replicas().await;

    let job = cluster.submit(&[
        "-p",
        NODESET,
        "-N",
        "1",
        "-x",
        "planned-[0-1]",
        "--exclusive",
        "--wrap",
        "sleep 1",
    ]);
    support::elastic::eventually("three pods cover ordinal 2", PLANNED_SCALE, a, async || {
        replicas().await == 3
    })
    .await;
    support::elastic::eventually(
        "the job runs on its record",
        Duration::from_secs(90),
        a,
        async || ran_or_runs(cluster, &job),
    )
    .await;
    let shown = cluster.run("scontrol", &["-o", "show", "job", &job]);
    assert!(
        shown.contains("Restarts=0"),
        "the job was requeued: {shown}"
    );
    assert!(shown.contains(" NodeList=planned-2 "), "{shown}");
    let unrequested = a.metrics().await.get(
        "slurmscale_slurm_planned_unrequested_pods_total",
        &[("namespace", ns), ("autoscaler", NODESET)],
    );
    assert_eq!(unrequested, Some(2.0));
    support::elastic::eventually(
        "all three pods gone once slurmctld powered their nodes down",
        Duration::from_secs(120),
        a,
        async || replicas().await == 0,
    )
    .await;
    let pods = p.pods();
    assert_eq!(&pods[..3], ["+0", "+1", "+2"], "pods, in order: {pods:?}");
    p.finish().await;
}

/// How slurmctld loads its configuration again.
#[derive(Clone, Copy, Debug)]
enum Reload {
    /// Stopped (its state saved) and started again.
    Restart,
    /// `scontrol reconfigure`, as Slinky does on every config change (24.11 re-executes
    /// itself; 22.05's is a known Slurm bug while nodes power up, README).
    Reconfigure,
}

/// slurmctld reloaded while two records power up for a job whose pods have not come yet: the
/// records stay allocated to the job and powering up, the NodeSet keeps its two replicas
/// (while slurmctld is away, on a restart), and once the pods come the job runs on them,
/// never requeued. (Slurm fixed CLOUD nodes "infrequently becoming FUTURE on slurmctld
/// restart" only in 25.05.7: this is the case it would show in.)
async fn a_reload_while_nodes_power_up_loses_nothing(flavor: &str, how: Reload) {
    let p = Planned::start(flavor).await;
    let (cluster, a) = (&p.cluster, &p.a);
    let powering_up = |node: &str| {
        let (st, _) = support::elastic::node_state(cluster, node);
        st.split('+').any(|w| w == "POWERING_UP")
    };
    p.hold(true);
    let job = cluster.submit(&["-p", NODESET, "-N", "2", "--exclusive", "--wrap", "sleep 2"]);
    support::elastic::eventually(
        "the NodeSet asked for the two powered-up nodes",
        PLANNED_SCALE,
        a,
        async || p.replicas().await == 2,
    )
    .await;
    let list = cluster.run("squeue", &["-h", "-j", &job, "-o", "%N"]);
    let nodes = cluster.run("scontrol", &["show", "hostnames", list.trim()]);
    let nodes: Vec<&str> = nodes.split_whitespace().collect();
    assert_eq!(nodes.len(), 2, "the job's nodes: {list:?}");
    assert!(nodes.iter().all(|n| powering_up(n)), "{nodes:?} power up");

    match how {
        Reload::Restart => {
            cluster.harness(&["ctld-stop"]);
            let until = Instant::now() + Duration::from_secs(5);
            while Instant::now() < until {
                assert_eq!(p.replicas().await, 2, "scaled while slurmctld was away");
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            cluster.harness(&["ctld-start"]);
        }
        Reload::Reconfigure => {
            cluster.run("scontrol", &["reconfigure"]);
            support::elastic::eventually(
                "slurmctld answers after its reconfigure",
                Duration::from_secs(30),
                a,
                async || support::elastic::slurmctld_up(cluster),
            )
            .await;
        }
    }
    let back = cluster.run("squeue", &["-h", "-j", &job, "-o", "%T %N"]);
    assert!(
        back.trim().starts_with("CONFIGURING") && nodes.iter().all(|n| powering_up(n)),
        "after the {how:?} the job still waits on its powering-up nodes: {back:?}, {:?}",
        nodes
            .iter()
            .map(|n| support::elastic::node_state(cluster, n))
            .collect::<Vec<_>>()
    );
    assert_eq!(p.replicas().await, 2);

    p.hold(false);
    support::elastic::eventually(
        "the job runs on its nodes once their pods come",
        Duration::from_secs(90),
        a,
        async || ran_or_runs(cluster, &job),
    )
    .await;
    let shown = cluster.run("scontrol", &["-o", "show", "job", &job]);
    assert!(shown.contains("Restarts=0"), "never requeued: {shown}");
    p.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_while_nodes_power_up_loses_nothing_on_22_05() {
    a_reload_while_nodes_power_up_loses_nothing("22.05", Reload::Restart).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_while_nodes_power_up_loses_nothing_on_24_11() {
    a_reload_while_nodes_power_up_loses_nothing("24.11", Reload::Restart).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_while_nodes_power_up_loses_nothing_on_26_05() {
    a_reload_while_nodes_power_up_loses_nothing("26.05", Reload::Restart).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconfigure_while_nodes_power_up_loses_nothing_on_24_11() {
    a_reload_while_nodes_power_up_loses_nothing("24.11", Reload::Reconfigure).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconfigure_while_nodes_power_up_loses_nothing_on_26_05() {
    a_reload_while_nodes_power_up_loses_nothing("26.05", Reload::Reconfigure).await;
}

/// A pod that never comes: slurmctld gives up on the record at `ResumeTimeout` (30 s here),
/// sets it DOWN and requeues the job; the autoscaler resumes the record (no pod, down for
/// ResumeTimeout), so slurmctld plans on it again. The NodeSet meanwhile holds at what it was
/// asked (its operator never reported the pod).
async fn resumes_a_record_that_missed_resume_timeout(flavor: &str) {
    let _turn = support::turn(flavor).await;
    let cluster = SlurmCluster::get(flavor);
    reset(&cluster).await;
    let client = kube_client().await;
    let ns = namespace(&client, "planned").await;
    let (nodesets, _autoscalers, a) = setup(&client, &ns, &cluster, Made::ByHand(&["-b"])).await;
    let clean_and_down = |i: usize| {
        let (st, _) = support::elastic::node_state(&cluster, &name(i));
        st.split('+').any(|w| w == "POWERED_DOWN") && support::elastic::clean(&st)
    };
    support::elastic::eventually(
        "four powered-down records",
        Duration::from_secs(60),
        &a,
        async || (0..MAX).all(clean_and_down),
    )
    .await;
    support::elastic::reloaded_after_new_records(&client, &ns, &cluster).await;
    // No operator runs: the NodeSet is asked for a pod that never comes.
    let job = cluster.submit(&["-p", NODESET, "-N", "1", "--exclusive", "--wrap", "sleep 1"]);
    support::elastic::eventually(
        "the NodeSet asked for the powered-up node",
        PLANNED_SCALE,
        &a,
        async || support::elastic::spec_replicas(&nodesets, NODESET).await == 1,
    )
    .await;
    let list = cluster.run("squeue", &["-h", "-j", &job, "-o", "%N"]);
    let node = list.trim().to_string();
    let ordinal: usize = node
        .strip_prefix("planned-")
        .and_then(|o| o.parse().ok())
        .unwrap_or_else(|| panic!("the job's node is not a record: {node:?}"));
    // The DOWN may last less than a poll: the Resume Event and the requeue say it happened.
    support::elastic::eventually(
        "the record DOWN at ResumeTimeout, then resumed by the autoscaler",
        Duration::from_secs(75),
        &a,
        async || {
            let resumed = support::event_notes(&client, &ns, "Resume").await;
            resumed.iter().any(|n| n.contains(&node)) && clean_and_down(ordinal)
        },
    )
    .await;
    let shown = cluster.run("scontrol", &["-o", "show", "job", &job]);
    assert!(
        shown.contains("Restarts=1"),
        "slurmctld requeues the job it could not start: {shown}"
    );
    drop(a);
    reset(&cluster).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resumes_a_record_that_missed_resume_timeout_on_22_05() {
    resumes_a_record_that_missed_resume_timeout("22.05").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resumes_a_record_that_missed_resume_timeout_on_24_11() {
    resumes_a_record_that_missed_resume_timeout("24.11").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resumes_a_record_that_missed_resume_timeout_on_26_05() {
    resumes_a_record_that_missed_resume_timeout("26.05").await;
}

/// A NodeSet whose slurmd runs without `-b` is refused, in its status and an Event, and
/// never scaled; no record is made for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodeset_without_slurmd_b_is_refused() {
    let _turn = support::turn("24.11").await;
    let cluster = SlurmCluster::get("24.11");
    reset(&cluster).await;
    let client = kube_client().await;
    let ns = namespace(&client, "planned-refused").await;
    let (nodesets, autoscalers, a) = setup(&client, &ns, &cluster, Made::ByHand(&[])).await;
    support::elastic::eventually(
        "refused: Ready=False, SlurmPlannedNotSetUp",
        Duration::from_secs(20),
        &a,
        async || {
            let s = autoscalers.get(NODESET).await.ok().and_then(|n| n.status);
            s.is_some_and(|s| {
                s.conditions.iter().any(|c| {
                    c.type_ == "Ready"
                        && c.status == "False"
                        && c.reason == "SlurmPlannedNotSetUp"
                        && c.message.contains("-b")
                })
            })
        },
    )
    .await;
    let made = support::event_notes(&client, &ns, "NodeRecords").await;
    assert!(
        made.is_empty(),
        "records asked for a refused NodeSet: {made:?}"
    );
    let scaled = nodesets.get(NODESET).await.unwrap().spec.replicas;
    assert_eq!(scaled, Some(0), "a refused NodeSet was scaled");
    let _ = autoscalers.delete(NODESET, &Default::default()).await;
    drop(a);
}

/// `POST /wake`, what the documented ResumeProgram calls, reads Slurm's nodes at once rather
/// than at the next poll, and a standby, which reads nothing, answers 503 so the program
/// tries again (through a Service, perhaps reaching the leader).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wake_reads_slurms_nodes_at_once_and_a_standby_declines() {
    // Its turn too: another test restarts this slurmctld.
    let _turn = support::turn("24.11").await;
    let cluster = SlurmCluster::get("24.11");
    let client = kube_client().await;
    let lease = namespace(&client, "wake-lease").await;
    // Polls ten minutes apart: any read after the wake, within the minute the test allows,
    // is the wake's, however slow the machine. A cluster name of their own: the other tests'
    // autoscalers name theirs, which these two then leave alone (they would act on them with
    // data minutes old).
    let slow = ["--interval", "600s", "--cluster", "wake"];
    let (a, b) = (
        support::autoscaler(&cluster, &lease, &slow),
        support::autoscaler(&cluster, &lease, &slow),
    );
    // (Not yet, until it serves.)
    let leads = async |p: &Process| {
        let page = p.get("/metrics").await.map(|(_, body)| body);
        page.is_some_and(|b| {
            support::Metrics::parse(&b).get("slurmscale_autoscaler_leader", &[]) == Some(1.0)
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let (leader, standby) = loop {
        match (leads(&a).await, leads(&b).await) {
            (true, false) => break (&a, &b),
            (false, true) => break (&b, &a),
            _ if Instant::now() > deadline => panic!("no one of two replicas leads in 30 s"),
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    let nodes_age = async || {
        leader.metrics().await.get(
            "slurm_exporter_endpoint_data_age_seconds",
            &[("endpoint", "nodes")],
        )
    };
    let aged = support::wait_until(Duration::from_secs(30), || async {
        nodes_age().await.is_some_and(|age| age >= 4.0)
    })
    .await;
    assert!(
        aged,
        "the leader's nodes never aged: {:?}",
        nodes_age().await
    );

    // Read after the wake: the nodes' last good answer is later than it (a timestamp against
    // the wake, not an age against a clock).
    let nodes_read_at = async || {
        leader.metrics().await.get(
            "slurm_exporter_endpoint_last_success_timestamp_seconds",
            &[("endpoint", "nodes")],
        )
    };
    let woken = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert_eq!(
        leader.post("/wake").await.map(|(s, _)| s),
        Some(202),
        "the leader heeds a wake"
    );
    let fresh = support::wait_until(Duration::from_secs(60), || async {
        nodes_read_at().await.is_some_and(|t| t > woken)
    })
    .await;
    assert!(
        fresh,
        "nodes not read within 60 s of a wake (polls are 600 s apart): last read at {:?}, \
         woken at {woken}",
        nodes_read_at().await
    );
    let (status, said) = standby.post("/wake").await.expect("the standby answers");
    assert_eq!(
        (status, said.trim()),
        (503, "standby: the leader polls Slurm")
    );
    let wakes = async |p: &Process| {
        p.metrics()
            .await
            .get("slurmscale_autoscaler_wakes_total", &[])
    };
    assert_eq!(wakes(leader).await, Some(1.0));
    assert_eq!(wakes(standby).await, Some(0.0));
}
