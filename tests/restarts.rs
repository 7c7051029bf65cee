//! The real servers restarted under a running exporter and autoscaler, with nothing fake:
//! slurmctld stopped and started again from its saved state (both Slurms), the JWT key
//! rotated (a new key for slurmctld, then the exporter's key file replaced), and the
//! kube-apiserver stopped and started on the same etcd while a scale-up is due.
//!
//! Each restarts a server the other tests here use, so all of them take turns on the elastic
//! partition's lock (other test binaries never run at the same time).

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use support::elastic::*;
use support::{Metrics, Process, SlurmCluster, autoscaler, repo_root};

/// The exporter's interval here.
const INTERVAL: Duration = Duration::from_secs(2);

/// `slurmscale exporter --no-kubernetes` every [`INTERVAL`], signing its tokens with `key`.
fn exporter(cluster: &SlurmCluster, key: &Path) -> Process {
    Process::start(
        &[
            "exporter",
            "--no-kubernetes",
            "--interval",
            &format!("{}s", INTERVAL.as_secs()),
            "--jwt-key-file",
            key.to_str().unwrap(),
        ],
        &[
            ("SLURM_REST_URL", &cluster.url),
            ("SLURM_USER", &cluster.user),
            ("SLURM_CLUSTER", &cluster.name),
        ],
    )
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// Whether every endpoint the exporter polls answered after `since` (unix seconds) and the
/// last collection was good throughout.
fn fresh_since(m: &Metrics, since: f64) -> bool {
    let last = m.all(
        "slurm_exporter_endpoint_last_success_timestamp_seconds",
        &[],
    );
    m.get("slurm_exporter_up", &[]) == Some(1.0)
        && !last.is_empty()
        && last.iter().all(|t| *t >= since)
}

/// Collections the exporter has finished (`slurm_exporter_collections_total`).
fn collections(m: &Metrics) -> f64 {
    m.get("slurm_exporter_collections_total", &[])
        .unwrap_or(0.0)
}

/// Waits until the exporter's data is fresh after `since`: how long that took from `from`
/// (printed, never asserted), and how many collections it finished from `counted` (its
/// collection count at `from`) until then, the one that made it fresh included. The deadline
/// is generous on purpose; how soon data is fresh again is for a bench to measure.
async fn until_fresh(
    e: &Process,
    since: f64,
    from: Instant,
    counted: f64,
    what: &str,
) -> (Duration, f64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let m = e.metrics().await;
        if fresh_since(&m, since) {
            return (from.elapsed(), collections(&m) - counted);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "{what}: the exporter's data never became fresh again\n{}",
        e.logs()
    );
}

fn kube_harness(cmd: &str) {
    let script = repo_root().join("tests/harness/kube.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .arg(cmd)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "kube.sh {cmd} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// slurmctld stopped (it saves its state) and started again, with the exporter and the
/// autoscaler running and a 2-node job on the elastic NodeSet. While it is away the
/// autoscaler is Frozen and the NodeSet keeps its nodes; the exporter keeps serving its last
/// data and says it is stale. Once slurmctld answers again, the exporter's data is fresh
/// within a few collections, the job is still there and running (recovered from the state
/// files), and the NodeSet never shrank.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slurmctld_restart_is_no_reason_to_scale_down() {
    let _turn = ELASTIC.lock().await;
    for flavor in ["24.11", "22.05"] {
        let cluster = SlurmCluster::get(flavor);
        let s = setup(&cluster, false).await;
        // Every decision logged (what it saw busy and pending), and how its job list followed
        // the restart, for a failure to show.
        let decisions = [
            "--log",
            "info,slurmscale_autoscaler::controller::act=debug,slurmscale_exporter::collect::jobs=debug",
        ];
        let a = autoscaler(&cluster, &s.ns, &decisions);
        let e = exporter(&cluster, &cluster.key_file);
        a.wait_ready(Duration::from_secs(30)).await;
        e.wait_ready(Duration::from_secs(30)).await;
        let job = sbatch(&cluster, &["-N", "2", "--wrap", "sleep 600"]);
        eventually(
            &format!("{flavor}: scaled to 2"),
            Duration::from_secs(30),
            &a,
            async || replicas(&s).await == 2,
        )
        .await;
        eventually(
            &format!("{flavor}: the job runs"),
            Duration::from_secs(30),
            &a,
            async || job_state(&cluster, &job) == "RUNNING",
        )
        .await;
        let nodes_before = e.metrics().await.get("slurm_nodes", &[]);
        assert!(nodes_before.is_some(), "{flavor}: no slurm_nodes before");

        cluster.harness(&["ctld-stop"]);
        eventually(
            &format!("{flavor}: Frozen=True while slurmctld is away"),
            // Stale after 3 polls + 5 s (8 s here): that timer, with slack for the work.
            Duration::from_secs(30),
            &a,
            async || condition(&s, "Frozen").await.as_deref() == Some("True"),
        )
        .await;
        // Longer than idle timeout (6 s) + stabilization window (4 s): a scale-down would
        // have come by now if the autoscaler took "no answer" for "no work".
        let until = Instant::now() + Duration::from_secs(12);
        while Instant::now() < until {
            assert_eq!(
                replicas(&s).await,
                2,
                "{flavor}: scaled while slurmctld was away\n{}",
                a.logs()
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        let m = e.metrics().await;
        assert_eq!(m.get("slurm_exporter_up", &[]), Some(0.0), "{flavor}: up");
        assert_eq!(
            m.get("slurm_nodes", &[]),
            nodes_before,
            "{flavor}: the last good data is still served"
        );
        let age = m
            .all("slurm_exporter_endpoint_data_age_seconds", &[])
            .into_iter()
            .fold(0.0, f64::max);
        assert!(
            age >= 8.0,
            "{flavor}: data age {age} s while slurmctld is away"
        );

        cluster.harness(&["ctld-start"]); // returns once `scontrol ping` answers
        let back = Instant::now();
        let since = unix_now();
        let counted = collections(&e.metrics().await);
        let (took, made) = until_fresh(&e, since, back, counted, flavor).await;
        eprintln!(
            "Slurm {flavor}: exporter fresh {took:?} ({made} collections) after slurmctld \
             answered ping"
        );
        // Counted in collections, not seconds: the one under way when slurmctld came back
        // may fail, the next is good; a poll budget still holding requests back after the
        // outage (the regression this guards) would take many more.
        assert!(
            made <= 3.0,
            "{flavor}: fresh only after {made} collections ({took:?}, interval {INTERVAL:?}) \
             once slurmctld came back\n{}",
            e.logs()
        );
        eventually(
            &format!("{flavor}: unfrozen once slurmctld is back"),
            Duration::from_secs(30),
            &a,
            async || condition(&s, "Frozen").await.as_deref() == Some("False"),
        )
        .await;
        assert_eq!(
            job_state(&cluster, &job),
            "RUNNING",
            "{flavor}: the job did not survive the restart"
        );
        // Some seconds of decisions on fresh data: the running job still holds both nodes.
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            assert_eq!(
                replicas(&s).await,
                2,
                "{flavor}: scaled after the restart\nsqueue:\n{}\nsinfo:\n{}\n{}",
                cluster.run("squeue", &[]),
                cluster.run("sinfo", &["-N"]),
                a.logs()
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        // Nothing scaled down while the job ran, the restart included; once it ends its nodes
        // free up one by one, and the NodeSet may go down in steps.
        assert!(
            events(&s, "ScaledDown").await.is_empty(),
            "{flavor}: a scale-down while the job ran\nsqueue:\n{}\nsinfo:\n{}\n{}",
            cluster.run("squeue", &["-o", "%i %T %N"]),
            cluster.run("sinfo", &["-N"]),
            a.logs()
        );
        cluster.run("scancel", &[&job]);
        eventually(
            &format!("{flavor}: back to 0 once the job is gone"),
            Duration::from_secs(60),
            &a,
            async || replicas(&s).await == 0,
        )
        .await;
        s.teardown(&cluster).await;
    }
}

/// Puts slurmctld's original key back (and restarts it to read it) however the test ends.
struct RestoreKey {
    cluster: SlurmCluster,
    original: Vec<u8>,
}

impl Drop for RestoreKey {
    fn drop(&mut self) {
        std::fs::write(&self.cluster.key_file, &self.original).expect("restore the JWT key");
        self.cluster.harness(&["ctld-stop"]);
        self.cluster.harness(&["ctld-start"]);
    }
}

/// Replaces `file` as a Kubernetes Secret volume does: written aside, then swapped in.
fn replace(file: &Path, content: &[u8]) {
    let tmp: PathBuf = file.with_extension("new");
    std::fs::write(&tmp, content).unwrap();
    std::fs::rename(&tmp, file).unwrap();
}

/// A site rotates its JWT key: slurmctld restarts with a new one, so every token signed
/// with the old key is refused, and then the Secret the exporter mounts is updated. From the
/// moment the exporter's key file holds the new key, its next collection succeeds: no gap
/// longer than one interval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_jwt_key_is_used_from_the_next_collection() {
    let _turn = ELASTIC.lock().await;
    for flavor in ["24.11", "22.05"] {
        let cluster = SlurmCluster::get(flavor);
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("jwt_hs256.key");
        replace(&key, &cluster.jwt_key());
        let e = exporter(&cluster, &key);
        e.wait_ready(Duration::from_secs(30)).await;

        let restore = RestoreKey {
            original: cluster.jwt_key(),
            cluster: cluster.clone(),
        };
        let mut new_key = [0u8; 32];
        std::io::Read::read_exact(
            &mut std::fs::File::open("/dev/urandom").unwrap(),
            &mut new_key,
        )
        .unwrap();
        // In place: slurmctld reads it as SlurmUser, so owner and mode stay.
        std::fs::write(&cluster.key_file, new_key).unwrap();
        cluster.harness(&["ctld-stop"]);
        cluster.harness(&["ctld-start"]);
        // 24.11 answers 401; 22.05 an HTTP 500 ("Unspecified error"): any failure will do.
        let refused = support::wait_until(Duration::from_secs(30), || async {
            let m = e.metrics().await;
            m.get("slurm_exporter_up", &[]) == Some(0.0)
                && m.all("slurm_exporter_errors_total", &[])
                    .iter()
                    .sum::<f64>()
                    >= 1.0
        })
        .await;
        assert!(
            refused,
            "{flavor}: tokens signed with the old key were not refused: the test proves nothing\n{}",
            e.logs()
        );

        let rotated = Instant::now();
        let since = unix_now();
        replace(&key, &new_key);
        // Counted once the file is replaced: a collection under way then may still sign with
        // the old key; the next one must use the new.
        let counted = collections(&e.metrics().await);
        let (took, made) = until_fresh(&e, since, rotated, counted, flavor).await;
        eprintln!(
            "Slurm {flavor}: exporter fresh {took:?} ({made} collections) after its key file \
             was replaced"
        );
        assert!(
            made <= 2.0,
            "{flavor}: the new key was used only after {made} collections ({took:?}, interval \
             {INTERVAL:?}) once the file changed\n{}",
            e.logs()
        );
        drop(restore);
    }
}

/// The kube-apiserver goes away while a scale-up is due (the job is submitted while it is
/// stopped, for longer than the autoscaler's lease) and comes back on the same etcd. The
/// autoscaler, never restarted, resumes by itself: the NodeSet ends at 3 replicas, written
/// exactly once (its generation moves by one) with one ScaledUp Event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kube_apiserver_restarting_before_a_scale_up_delays_it_only() {
    let _turn = ELASTIC.lock().await;
    let cluster = SlurmCluster::get("24.11");
    let s = setup(&cluster, false).await;
    let mut a = autoscaler(&cluster, &s.ns, &[]);
    a.wait_ready(Duration::from_secs(30)).await;
    eventually("leading", Duration::from_secs(20), &a, async || {
        a.metrics().await.get("slurmscale_autoscaler_leader", &[]) == Some(1.0)
    })
    .await;
    let generation = s.nodesets.get("elastic").await.unwrap().metadata.generation;

    // Restarted even if the test fails, so the other tests here find it.
    struct Start;
    impl Drop for Start {
        fn drop(&mut self) {
            kube_harness("apiserver-start");
        }
    }
    let started = Start;
    kube_harness("apiserver-stop");
    let job = sbatch(&cluster, &["-N", "3", "--wrap", "sleep 600"]);
    // Longer than the lease (6 s): the autoscaler must step down and win the lease again.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(
        a.child.try_wait().unwrap().is_none(),
        "the autoscaler exited while the API server was away:\n{}",
        a.logs()
    );
    drop(started);
    let back = Instant::now();
    eventually(
        "scaled to 3 after the API server came back",
        Duration::from_secs(30),
        &a,
        async || replicas(&s).await == 3,
    )
    .await;
    eprintln!("scaled {:?} after the API server came back", back.elapsed());
    eventually("the job runs", Duration::from_secs(30), &a, async || {
        job_state(&cluster, &job) == "RUNNING"
    })
    .await;
    let nodeset = s.nodesets.get("elastic").await.unwrap();
    assert_eq!(
        nodeset.metadata.generation,
        generation.map(|g| g + 1),
        "the NodeSet's spec was written more than once:\n{}",
        a.logs()
    );
    assert_eq!(events(&s, "ScaledUp").await.len(), 1, "ScaledUp Events");
    s.teardown(&cluster).await;
}
