//! A queue longer than `--request-max-jobs`, on both real Slurms: the exporter never asks for
//! the whole job list in one answer. It finds where the job ids are from slurmdbd's
//! accounting, reads the list id by id from the newest down (on 24.11's v0.0.42 with
//! `/jobs/state/` saying which ids exist; on 22.05's v0.0.38 accounting which ended), publishes what it has
//! as it goes, and ends with every family as Slurm's own commands count it; then it follows
//! submissions, cancellations and a hold the same way, still without one full `/jobs`.
//!
//! The bound is set low (20) so a queue of some sixty jobs is "long": the code path is the
//! one a 100,000-job queue takes at the default bound (the start at that size is measured by
//! `exporter/benches/start.py`, not here). It runs on the second harness copy (tests/run.sh):
//! it waits for slurmctld's periodic count of its jobs (every 30 s). Its deadlines are
//! generous on purpose: it checks what the exporter reads and when relative to the read, not
//! how fast; the speed is `start.py`'s and the exporter's load bench's to measure.

mod support;

use std::time::Duration;

use support::{Metrics, Process, SlurmCluster, wait_until};

/// Live jobs above which the list is not asked for whole, in this test.
const BOUND: &str = "20";

/// slurmctld's job count is taken every 30 s: one more than that, and slack for the work.
const RECOUNT: Duration = Duration::from_secs(60);

/// How long an exporter may take to be ready, and to agree with squeue after a change.
const READY: Duration = Duration::from_secs(60);
const AGREES: u64 = 60;

/// slurmctld's count of pending and running jobs (recounted every 30 s) and when it was
/// taken (unix seconds), from `sdiag`.
fn counted(cluster: &SlurmCluster) -> (i64, u64) {
    let out = cluster.run("sdiag", &[]);
    let live = out
        .lines()
        .filter(|l| l.starts_with("Jobs pending:") || l.starts_with("Jobs running:"))
        .filter_map(|l| l.split(':').nth(1)?.trim().parse::<u64>().ok())
        .sum();
    let at = out
        .lines()
        .find(|l| l.starts_with("Job states ts:"))
        .and_then(|l| l.rsplit_once('(')?.1.trim_end_matches(')').parse().ok())
        .unwrap_or(0);
    (at, live)
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Pending, held and running jobs as `squeue` lists them (arrays' pending tasks on one line,
/// as the exporter counts them).
fn squeue(cluster: &SlurmCluster) -> (f64, f64, f64) {
    let out = cluster.run("squeue", &["-h", "-o", "%T %r"]);
    let count = |f: &dyn Fn(&str) -> bool| out.lines().filter(|l| f(l)).count() as f64;
    (
        count(&|l| l.starts_with("PENDING")),
        count(&|l| l.starts_with("PENDING") && l.contains("JobHeld")),
        count(&|l| l.starts_with("RUNNING")),
    )
}

fn requests(m: &Metrics, how: &str) -> f64 {
    m.get(
        "slurm_exporter_job_list_requests_total",
        &[("request", how)],
    )
    .unwrap_or(0.0)
}

/// Waits until the exporter's pending, held and running counts are squeue's and nothing in
/// the list is in doubt; panics with both sides and the log otherwise.
async fn agrees(exporter: &Process, cluster: &SlurmCluster, within: u64, what: &str) {
    let exported = |m: &Metrics| {
        (
            m.get("slurm_jobs_pending", &[]),
            m.get("slurm_jobs_hold", &[]),
            m.get("slurm_jobs_running", &[]),
        )
    };
    let ok = wait_until(Duration::from_secs(within), || async {
        let m = exporter.metrics().await;
        let (pending, held, running) = squeue(cluster);
        exported(&m) == (Some(pending), Some(held), Some(running))
            && m.get("slurm_exporter_jobs_unread", &[]) == Some(0.0)
            && m.get("slurm_exporter_jobs_unlisted_new", &[]) == Some(0.0)
            && m.get("slurm_exporter_jobs_maybe_started", &[]) == Some(0.0)
    })
    .await;
    let m = exporter.metrics().await;
    assert!(
        ok,
        "Slurm {}, {what}: exporter (pending, held, running) {:?}, squeue {:?}, (unread, unlisted new, maybe started) {:?}\n{}",
        cluster.flavor,
        exported(&m),
        squeue(cluster),
        [
            "slurm_exporter_jobs_unread",
            "slurm_exporter_jobs_unlisted_new",
            "slurm_exporter_jobs_maybe_started"
        ]
        .map(|name| m.get(name, &[])),
        exporter.logs()
    );
}

async fn a_long_queue_is_read_id_by_id(flavor: &str) {
    let cluster = SlurmCluster::get(flavor);
    let _ = cluster.cmd("scancel").arg("--user=root").status();
    // Sixty-odd live jobs: plain, multi-node, an array, held, and two running.
    let elastic = |extra: &[&str]| {
        let mut args = vec!["-p", "elastic", "-J", "long-queue"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--wrap", "sleep 60"]);
        cluster.submit(&args)
    };
    // A job that ran and was requeued: accounting keeps its ended run beside its new wait
    // (it must be read), and ended jobs among the live ones, cancelled while waiting (on
    // 22.05 accounting says they ended, on 24.11 `/jobs/state/` that they are gone).
    let requeued = cluster.submit(&[
        "-p",
        "cpu",
        "-J",
        "long-queue",
        "--requeue",
        "--wrap",
        "sleep 300",
    ]);
    let ran = wait_until(Duration::from_secs(60), || async {
        cluster
            .run("squeue", &["-h", "-j", &requeued, "-o", "%T"])
            .trim()
            == "RUNNING"
    })
    .await;
    assert!(ran, "job {requeued} never started");
    cluster.run("scontrol", &["requeue", &requeued]);
    let mut cancelled = Vec::new();
    for i in 0..40 {
        elastic(if i % 5 == 0 { &["-N", "2"] } else { &[] });
        if i % 2 == 0 {
            cancelled.push(elastic(&[]));
        }
    }
    cluster.run(
        "scancel",
        &cancelled.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let array = elastic(&["--array=1-10"]);
    for _ in 0..5 {
        elastic(&["--hold"]);
    }
    for _ in 0..2 {
        cluster.submit(&["-p", "cpu", "-J", "long-queue", "--wrap", "sleep 300"]);
    }
    // The exporter decides from slurmctld's own count, taken every 30 s: one taken after
    // the last submission.
    let submitted = unix_now();
    let live = 1 + 40 + 10 + 5 + 2;
    let recounted = wait_until(RECOUNT, || async { counted(&cluster).0 > submitted }).await;
    let (_, n) = counted(&cluster);
    assert!(
        recounted && n == live,
        "slurmctld counted {n} live jobs, not {live}"
    );

    let key = cluster.key_file.to_string_lossy().into_owned();
    let version = cluster.api_versions.last().unwrap().clone();
    let exporter = Process::start(
        &[
            "exporter",
            "--no-kubernetes",
            "--interval",
            "1s",
            "--api-version",
            &version,
            "--jwt-key-file",
            &key,
            "--request-max-jobs",
            BOUND,
        ],
        &[
            ("SLURM_REST_URL", &cluster.url),
            ("SLURM_USER", &cluster.user),
            ("SLURM_CLUSTER", &cluster.name),
        ],
    );
    exporter.wait_ready(READY).await;
    agrees(&exporter, &cluster, AGREES, "read id by id").await;
    let m = exporter.metrics().await;
    assert!(requests(&m, "accounting") >= 1.0, "accounting said nothing");
    // Each record once at least (an array's pending tasks are one record).
    let records = 1 + 40 + 1 + 5 + 2;
    assert!(
        requests(&m, "single") >= records as f64,
        "jobs were not read one by one"
    );

    // Followed as a short list is, without a whole read. The list stays long (48 live): a
    // list that became short may rightly be read whole once slurmctld's next count says so.
    let mut gone: Vec<String> = (0..3).map(|_| elastic(&[])).collect();
    gone.push(array);
    cluster.run(
        "scancel",
        &gone.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    agrees(
        &exporter,
        &cluster,
        AGREES,
        "3 more, then they and the array cancelled",
    )
    .await;
    let id = elastic(&[]);
    let _ = cluster.cmd("scontrol").args(["hold", &id]).status();
    agrees(&exporter, &cluster, AGREES, "one more, held").await;

    let m = exporter.metrics().await;
    assert_eq!(requests(&m, "full"), 0.0, "a whole /jobs was asked for");
    assert_eq!(
        m.get(
            "slurm_exporter_request_duration_seconds_count",
            &[("endpoint", "jobs")]
        ),
        None,
        "a whole /jobs was asked for"
    );
    let log = exporter.logs();
    assert!(
        log.contains("reading the job list id by id") && !log.contains("WARN"),
        "{log}"
    );
    drop(exporter);

    // A few hundred more, held: long enough a list that a first read under a low rate limit
    // takes tens of seconds (a 100,000-job queue's takes minutes at any limit).
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..75 {
                    cluster.submit(&["-p", "cpu", "--hold", "-J", "long-queue", "--wrap", "true"]);
                }
            });
        }
    });
    // The exporter goes by slurmctld's count of its jobs (every 30 s): one with them.
    let filled = unix_now();
    let recounted = wait_until(RECOUNT, || async { counted(&cluster).0 > filled }).await;
    assert!(recounted, "slurmctld did not count its jobs again");
    new_jobs_during_the_first_read(&cluster, &key, &cluster.url).await;
    accounting_behind(&cluster, &key).await;
    without_accounting(&cluster, &key, &elastic).await;
    let _ = cluster.cmd("scancel").arg("--user=root").status();
}

/// Requests a second the first read is held to below: 2 (against 0.5 a second of polls at
/// the 10-s interval, so no warning that the limit cannot keep up).
const SLOW_READ_RATE: u32 = 2;

/// Jobs submitted while a long list is first read are read ahead of what is left of it: their
/// demand shows while the read still runs, not when it ends. A rate limit set low stands in
/// for a queue of 100,000 jobs, whose first read takes minutes; here it makes the read outlast
/// the deadline below on any machine, so whether the new jobs came first is a matter of order,
/// not of speed.
async fn new_jobs_during_the_first_read(cluster: &SlurmCluster, key: &str, url: &str) {
    let rate = SLOW_READ_RATE.to_string();
    let exporter = Process::start(
        &[
            "exporter",
            "--no-kubernetes",
            "--interval",
            "10s",
            "--jwt-key-file",
            key,
            "--request-max-jobs",
            BOUND,
            "--max-requests-per-second",
            &rate,
        ],
        &[
            ("SLURM_REST_URL", url),
            ("SLURM_USER", &cluster.user),
            ("SLURM_CLUSTER", &cluster.name),
        ],
    );
    // Ready as soon as part of the list is published.
    exporter.wait_ready(READY).await;
    let unread = |m: &Metrics| m.get("slurm_exporter_jobs_unread", &[]).unwrap_or(0.0);
    // The new jobs get a deadline of their own; the read must outlast it whatever the machine:
    // this many ids left take longer than that at the rate limit, one request an id.
    let new_jobs_seen = Duration::from_secs(90);
    let left_to_read = (new_jobs_seen.as_secs_f64() + 10.0) * f64::from(SLOW_READ_RATE);
    let reading = wait_until(Duration::from_secs(120), || async {
        unread(&exporter.metrics().await) > left_to_read
    })
    .await;
    assert!(
        reading,
        "Slurm {}: the exporter never published part of the list with more than \
         {left_to_read} ids left to read\n{}",
        cluster.flavor,
        exporter.logs()
    );
    // Three new jobs where no other job is: the gpu partition, waiting for a begin time.
    let new: Vec<String> = (0..3)
        .map(|_| {
            let args = ["-p", "gpu", "-J", "long-queue", "--begin", "now+3600"];
            cluster.submit(&[&args[..], &["--wrap", "sleep 60"]].concat())
        })
        .collect();
    let submitted = std::time::Instant::now();
    let waiting = [("partition", "gpu"), ("class", "waiting")];
    // The new jobs' demand and the read still running, in the same scrape: that is the
    // property (read ahead of the rest), whatever the time it took.
    let demand = |m: &Metrics| m.get("slurm_partition_demand_jobs", &waiting);
    let seen = wait_until(new_jobs_seen, || async {
        let m = exporter.metrics().await;
        demand(&m) == Some(3.0) || unread(&m) == 0.0
    })
    .await;
    let m = exporter.metrics().await;
    assert!(
        seen && demand(&m) == Some(3.0),
        "Slurm {} ({url}): the 3 new jobs' demand after {:?}: {:?}\n{}",
        cluster.flavor,
        submitted.elapsed(),
        demand(&m),
        exporter.logs()
    );
    assert!(
        unread(&m) > 0.0,
        "Slurm {}: the read ended before the new jobs were read (their demand shows only now, \
         {:?} after they were submitted)",
        cluster.flavor,
        submitted.elapsed()
    );
    // Informative only: the figure with its target is `exporter/benches/start.py`'s.
    eprintln!(
        "Slurm {} ({url}): the new jobs' demand {:?} after sbatch, {} ids still unread",
        cluster.flavor,
        submitted.elapsed(),
        unread(&m)
    );
    cluster.run(
        "scancel",
        &new.iter().map(String::as_str).collect::<Vec<_>>(),
    );
}

/// slurmdbd behind slurmctld (`slurm.sh dbd-hold` until dropped): slurmctld's records of
/// new jobs wait in its queue, so accounting's newest id is far below slurmctld's.
struct DbdHeld<'a>(&'a SlurmCluster);

impl<'a> DbdHeld<'a> {
    fn hold(cluster: &'a SlurmCluster) -> Self {
        cluster.harness(&["dbd-hold"]);
        Self(cluster)
    }
}

impl Drop for DbdHeld<'_> {
    fn drop(&mut self) {
        let _ = std::process::Command::new("bash")
            .arg(support::repo_root().join("tests/harness/slurm.sh"))
            .args([&self.0.flavor, "dbd-release"])
            .status();
    }
}

/// Whether slurmdbd has a record of job `id` (`sacct` asks slurmdbd directly, as root).
fn accounted(cluster: &SlurmCluster, id: &str) -> bool {
    let out = cluster.run("sacct", &["-n", "-X", "-j", id, "-o", "JobID"]);
    out.lines().any(|l| l.trim() == id)
}

/// Restarted while slurmdbd is still recording a burst of submissions (a site's usual state
/// right after one): accounting's newest id is hundreds below slurmctld's. The read starts at
/// slurmctld's newest all the same, reads ahead the jobs submitted meanwhile, and ends with
/// every live job slurmctld counts, never a list called complete with jobs missing.
async fn accounting_behind(cluster: &SlurmCluster, key: &str) {
    let held = DbdHeld::hold(cluster);
    // Three hundred held jobs accounting hears nothing of while the hold lasts.
    let first = cluster.submit(&["-p", "cpu", "--hold", "-J", "long-queue", "--wrap", "true"]);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..75 {
                    cluster.submit(&["-p", "cpu", "--hold", "-J", "long-queue", "--wrap", "true"]);
                }
            });
        }
    });
    assert!(
        !accounted(cluster, &first),
        "Slurm {}: slurmdbd recorded job {first}: the hold did not hold",
        cluster.flavor
    );
    let filled = unix_now();
    let recounted = wait_until(RECOUNT, || async { counted(cluster).0 > filled }).await;
    assert!(recounted, "slurmctld did not count its jobs again");
    let exporter = Process::start(
        &[
            "exporter",
            "--no-kubernetes",
            "--interval",
            "2s",
            "--jwt-key-file",
            key,
            "--request-max-jobs",
            BOUND,
        ],
        &[
            ("SLURM_REST_URL", &cluster.url),
            ("SLURM_USER", &cluster.user),
            ("SLURM_CLUSTER", &cluster.name),
        ],
    );
    exporter.wait_ready(READY).await;
    // Submitted after the read began, above every id accounting knows: read ahead of the rest.
    let new: Vec<String> = (0..3)
        .map(|_| {
            let args = ["-p", "gpu", "-J", "long-queue", "--begin", "now+3600"];
            cluster.submit(&[&args[..], &["--wrap", "sleep 60"]].concat())
        })
        .collect();
    let waiting = [("partition", "gpu"), ("class", "waiting")];
    let seen = wait_until(Duration::from_secs(90), || async {
        exporter
            .metrics()
            .await
            .get("slurm_partition_demand_jobs", &waiting)
            == Some(3.0)
    })
    .await;
    assert!(
        seen,
        "Slurm {}: the 3 new jobs' demand never showed while accounting was behind
{}",
        cluster.flavor,
        exporter.logs()
    );
    // Every live job, exactly, while accounting is still behind.
    agrees(&exporter, cluster, 180, "accounting behind slurmctld").await;
    assert!(!accounted(cluster, &first), "slurmdbd caught up meanwhile");
    let m = exporter.metrics().await;
    let unaccounted = m
        .get("slurm_exporter_job_ids_unaccounted", &[])
        .unwrap_or(0.0);
    assert!(
        unaccounted >= 300.0,
        "Slurm {}: {unaccounted} ids unaccounted",
        cluster.flavor
    );
    assert_eq!(requests(&m, "full"), 0.0, "a whole /jobs was asked for");
    let log = exporter.logs();
    assert!(!log.contains("fewer live jobs than"), "{log}");
    assert!(log.contains("accounting_newest"), "{log}");
    // slurmdbd catches up: nothing changes in the list.
    drop(held);
    let caught_up = wait_until(Duration::from_secs(120), || async {
        accounted(cluster, &first) && new.iter().all(|id| accounted(cluster, id))
    })
    .await;
    assert!(caught_up, "slurmdbd never caught up");
    agrees(&exporter, cluster, AGREES, "after slurmdbd caught up").await;
    cluster.run(
        "scancel",
        &new.iter().map(String::as_str).collect::<Vec<_>>(),
    );
}

/// The same long queue through a slurmrestd that serves no accounting (started without its
/// slurmdbd plugins, as many sites run it): found out once and said once — never taken for a
/// changed server (the API version probed again and the list started over every poll, its
/// data ages gone from the page). On 24.11 one `/jobs/state/` says where the ids are and the
/// list is still read id by id; 22.05 has nothing to say it, so the list is read whole. Jobs
/// keep coming, one a second, meanwhile.
async fn without_accounting(cluster: &SlurmCluster, key: &str, submit: &dyn Fn(&[&str]) -> String) {
    let exporter = Process::start(
        &[
            "exporter",
            "--no-kubernetes",
            // How the list was read and followed, step by step, for a failure to show.
            "--log",
            "info,slurmscale_exporter::collect::jobs=debug",
            "--interval",
            "2s",
            "--jwt-key-file",
            key,
            "--request-max-jobs",
            BOUND,
        ],
        &[
            ("SLURM_REST_URL", &cluster.no_accounting_url),
            ("SLURM_USER", &cluster.user),
            ("SLURM_CLUSTER", &cluster.name),
        ],
    );
    exporter.wait_ready(READY).await;
    // The ages stay on the page (the regression: a list started over every poll lost them);
    // how old the data gets is the `plain` shape of the exporter's load bench to measure.
    let mut ages = Vec::new();
    for _ in 0..15 {
        submit(&[]);
        let m = exporter.metrics().await;
        let age = m.get(
            "slurm_exporter_endpoint_data_age_seconds",
            &[("endpoint", "jobs")],
        );
        let snapshot_age = m.get("slurm_exporter_snapshot_age_seconds", &[]);
        assert!(
            age.is_some() && snapshot_age.is_some(),
            "Slurm {}: job data age {age:?}, snapshot age {snapshot_age:?} (ages so far {ages:?})\n{}",
            cluster.flavor,
            exporter.logs()
        );
        ages.push(age.unwrap_or_default());
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    eprintln!(
        "Slurm {}: job data ages without accounting {ages:?}",
        cluster.flavor
    );
    // The whole list of some 350 jobs, without accounting to say where the ids are.
    agrees(&exporter, cluster, 180, "without accounting").await;
    let m = exporter.metrics().await;
    let by_id = cluster.flavor != "22.05";
    let read = if by_id { "id_by_id" } else { "whole" };
    assert_eq!(
        m.get(
            "slurm_exporter_job_list_info",
            &[("read", read), ("accounting", "not_served")]
        ),
        Some(1.0),
        "Slurm {}: {:?}",
        cluster.flavor,
        m.all("slurm_exporter_job_list_info", &[])
    );
    assert_eq!(
        requests(&m, "full") == 0.0,
        by_id,
        "Slurm {}: full /jobs {}",
        cluster.flavor,
        requests(&m, "full")
    );
    // Found out by one request, not asked again meanwhile.
    assert_eq!(requests(&m, "accounting"), 1.0);
    let log = exporter.logs();
    let times = |what: &str| log.matches(what).count();
    assert_eq!(
        (
            times("using slurmrestd API version"),
            times("cannot say where their ids are"),
            times("probing its API version again"),
        ),
        (1, 1, 0),
        "Slurm {}: the version probed once, the missing accounting said once\n{log}",
        cluster.flavor
    );
    drop(exporter);
    if by_id {
        // Read by the ids /jobs/state/ lists, new jobs are read ahead all the same.
        new_jobs_during_the_first_read(cluster, key, &cluster.no_accounting_url).await;
    }
}

#[tokio::test]
async fn a_long_queue_is_read_id_by_id_on_22_05() {
    a_long_queue_is_read_id_by_id("22.05").await;
}

#[tokio::test]
async fn a_long_queue_is_read_id_by_id_on_24_11() {
    a_long_queue_is_read_id_by_id("24.11").await;
}

#[tokio::test]
async fn a_long_queue_is_read_id_by_id_on_26_05() {
    a_long_queue_is_read_id_by_id("26.05").await;
}
