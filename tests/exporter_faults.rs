//! Bad input gets a clear error and loses nothing. The exporter reads a real slurmrestd
//! (Slurm 24.11, v0.0.42) through a fault-injecting proxy; for each fault it must not crash,
//! must count the error by kind, log it, flag the endpoint down, keep serving the last good
//! data and stay ready; and recover when the fault goes. The "slurmrestd is down" case uses
//! the real slurmrestd of Slurm 22.05, stopped and restarted.

mod support;

use std::time::Duration;

use serde_json::Value;
use support::fault::{Fault, FaultProxy};
use support::{Metrics, Process, SlurmCluster, wait_until};

fn exporter_for(cluster: &SlurmCluster, url: &str, extra: &[&str]) -> Process {
    let key = cluster.key_file.to_string_lossy().into_owned();
    let mut args = vec![
        "exporter",
        "--no-kubernetes",
        "--interval",
        "1s",
        "--timeout",
        "2s",
        "--jwt-key-file",
        &key,
    ];
    args.extend_from_slice(extra);
    Process::start(
        &args,
        &[
            ("SLURM_REST_URL", url),
            ("SLURM_USER", &cluster.user),
            ("SLURM_CLUSTER", &cluster.name),
        ],
    )
}

fn errors_of(m: &Metrics, endpoint: &str, kind: &str) -> f64 {
    m.get(
        "slurm_exporter_errors_total",
        &[("endpoint", endpoint), ("kind", kind)],
    )
    .unwrap_or(0.0)
}

/// Values that must survive a fault of `endpoint` (all endpoints when `None`): each comes
/// from the last good answer of the endpoint it is read from.
fn kept(m: &Metrics, endpoint: Option<&str>) -> Vec<(&'static str, Option<f64>)> {
    let all = [
        ("nodes", m.get("slurm_nodes", &[])),
        (
            "partitions",
            m.get("slurm_partition_cpus", &[("partition", "gpu")]),
        ),
        ("nodes", m.get("slurm_node_cpus", &[("node", "g1")])),
        ("jobs", m.get("slurm_jobs", &[])),
        ("diag", m.get("slurm_scheduler_threads", &[])),
    ];
    all.into_iter()
        .filter(|(e, _)| endpoint.is_none_or(|only| only == *e))
        .collect()
}

fn unknown_enums(v: &mut Value) {
    for job in v["jobs"].as_array_mut().into_iter().flatten() {
        job["job_state"] = serde_json::json!(["TELEPORTING", "NEW_FLAG"]);
        job["brand_new_field"] = serde_json::json!({"nested": [1, 2, 3]});
    }
    for node in v["nodes"].as_array_mut().into_iter().flatten() {
        node["state"] = serde_json::json!(["HIBERNATING", "DRAIN"]);
    }
}

fn missing_fields(v: &mut Value) {
    for job in v["jobs"].as_array_mut().into_iter().flatten() {
        let obj = job.as_object_mut().unwrap();
        for k in [
            "node_count",
            "partition",
            "cpus",
            "tres_per_node",
            "memory_per_cpu",
            "job_resources",
        ] {
            obj.remove(k);
        }
    }
    for node in v["nodes"].as_array_mut().into_iter().flatten() {
        node.as_object_mut().unwrap().retain(|k, _| k == "name");
    }
}

fn wrong_types(v: &mut Value) {
    for job in v["jobs"].as_array_mut().into_iter().flatten() {
        job["node_count"] = Value::String("three".into());
        job["cpus"] = Value::Null;
        job["partition"] = serde_json::json!(42);
        job["hold"] = serde_json::json!("yes");
    }
}

#[tokio::test]
async fn every_fault_is_counted_logged_and_survived() {
    let cluster = SlurmCluster::get("24.11");
    let proxy = FaultProxy::start(&cluster.url).await;
    let exporter = exporter_for(&cluster, &proxy.url, &["--api-version", "v0.0.42"]);
    exporter.wait_ready(Duration::from_secs(30)).await;
    let good = exporter.metrics().await;
    let baseline = kept(&good, None);
    assert!(
        baseline.iter().all(|(_, v)| v.is_some()),
        "baseline: {baseline:?}"
    );

    let faults: Vec<(&str, Fault, Option<&'static str>, &str, &str)> = vec![
        (
            "slow",
            Fault::Slow(Duration::from_secs(4)),
            Some("jobs"),
            "jobs",
            "timeout",
        ),
        (
            "401",
            Fault::Status(401, "Authentication failure"),
            None,
            "nodes",
            "auth",
        ),
        (
            "500 with errors[]",
            Fault::Status(
                500,
                r#"{"errors":[{"error":"Unable to query jobs","error_number":2,"source":"slurm_load_jobs"}],"jobs":[]}"#,
            ),
            Some("jobs"),
            "jobs",
            "http",
        ),
        (
            "200 with errors[]",
            Fault::ErrorsIn200,
            Some("partitions"),
            "partitions",
            "slurm_errors",
        ),
        (
            "truncated JSON",
            Fault::TruncatedJson,
            Some("nodes"),
            "nodes",
            "decode",
        ),
        (
            "invalid JSON",
            Fault::InvalidJson,
            Some("diag"),
            "diag",
            "decode",
        ),
        (
            "dropped mid-body",
            Fault::DroppedMidBody,
            Some("jobs"),
            "jobs",
            "transport",
        ),
    ];
    let mut submitted = Vec::new();
    for (what, fault, only, endpoint, kind) in faults {
        let before = errors_of(&exporter.metrics().await, endpoint, kind);
        proxy.set(fault, only);
        if endpoint == "jobs" {
            // The exporter reads the whole list once and then only what changes: a new job
            // makes it read (through the fault).
            submitted.push(cluster.submit(&["-p", "cpu", "--hold", "--wrap", "sleep 600"]));
        }
        let noticed = wait_until(Duration::from_secs(30), || async {
            let m = exporter.metrics().await;
            errors_of(&m, endpoint, kind) > before
                && m.get("slurm_exporter_endpoint_up", &[("endpoint", endpoint)]) == Some(0.0)
        })
        .await;
        assert!(
            noticed,
            "{what}: no {kind} error counted on {endpoint}:\n{}",
            exporter.logs()
        );
        // Slurm itself moves on (thread counts, jobs ageing out), so the faulted endpoint's
        // values are compared over two more failed polls, not with the first scrape.
        let held = kept(&exporter.metrics().await, only);
        assert!(
            held.iter().all(|(_, v)| v.is_some()),
            "{what}: the last good data was dropped: {held:?}"
        );
        tokio::time::sleep(Duration::from_millis(2500)).await;
        let m = exporter.metrics().await;
        assert_eq!(
            kept(&m, only),
            held,
            "{what}: the last good data was not kept"
        );
        assert_eq!(
            m.get("slurm_exporter_up", &[]),
            Some(0.0),
            "{what}: the exporter claims all is well"
        );
        assert!(
            m.get(
                "slurm_exporter_endpoint_data_age_seconds",
                &[("endpoint", endpoint)]
            )
            .is_some(),
            "{what}: the age of the kept data is not exported"
        );
        assert!(
            matches!(exporter.get("/readyz").await, Some((200, _))),
            "{what}: /readyz dropped on stale data"
        );
        let logs = exporter.logs();
        assert!(
            logs.lines()
                .any(|l| l.contains("keeping the last good data")
                    && l.contains(&format!("kind=\"{kind}\""))
                    && l.contains(endpoint)),
            "{what}: no log line naming the {kind} failure on {endpoint}:\n{logs}"
        );

        proxy.clear();
        let recovered = wait_until(Duration::from_secs(30), || async {
            exporter
                .metrics()
                .await
                .get("slurm_exporter_endpoint_up", &[("endpoint", endpoint)])
                == Some(1.0)
        })
        .await;
        assert!(recovered, "{what}: no recovery once the fault went away");
    }

    for id in &submitted {
        let _ = cluster.cmd("scancel").arg(id).status();
    }
    assert!(
        exporter.logs().lines().all(|l| !l.contains("panicked")),
        "a panic was logged"
    );
    drop(exporter);

    // Shapes from a future Slurm are not errors: unknown enums, missing fields, wrong types.
    // A fresh exporter each time, so the whole job list goes through the rewrite.
    for (what, rewrite) in [
        ("unknown enum values", unknown_enums as fn(&mut Value)),
        ("missing fields", missing_fields),
        ("wrong types", wrong_types),
    ] {
        proxy.set(Fault::Rewrite(rewrite), None);
        let exporter = exporter_for(&cluster, &proxy.url, &["--api-version", "v0.0.42"]);
        exporter.wait_ready(Duration::from_secs(30)).await;
        // The rewritten answers accepted: waited for, generously, rather than assumed after a
        // fixed pause; the assertions below say which endpoint refused them.
        wait_until(Duration::from_secs(30), || async {
            let m = exporter.metrics().await;
            ["jobs", "nodes", "partitions"]
                .into_iter()
                .all(|e| m.get("slurm_exporter_endpoint_up", &[("endpoint", e)]) == Some(1.0))
        })
        .await;
        let m = exporter.metrics().await;
        for e in ["jobs", "nodes", "partitions"] {
            assert_eq!(
                m.get("slurm_exporter_endpoint_up", &[("endpoint", e)]),
                Some(1.0),
                "{what}: {e} rejected"
            );
        }
        // Job records age out of slurmctld (MinJobAge) while this runs: compare with what
        // the exporter was just sent, not with an earlier scrape.
        let sent = proxy.items("jobs");
        assert!(sent.is_some(), "{what}: the proxy saw no /jobs");
        let counted = wait_until(Duration::from_secs(30), || async {
            exporter.metrics().await.get("slurm_jobs", &[]) == proxy.items("jobs").map(|n| n as f64)
        })
        .await;
        assert!(
            counted,
            "{what}: job records lost: sent {:?}, counted {:?}",
            proxy.items("jobs"),
            exporter.metrics().await.get("slurm_jobs", &[])
        );
        proxy.clear();
        assert!(
            exporter.logs().lines().all(|l| !l.contains("panicked")),
            "{what}: a panic was logged"
        );
        let token = std::fs::read_to_string(&cluster.jwt_file).unwrap();
        assert!(
            !exporter.logs().contains(token.trim()),
            "a token leaked into the logs"
        );
    }
}

/// Until every cluster has answered once, /readyz is 503 and says why; /healthz is 200.
#[tokio::test]
async fn readyz_explains_what_is_missing() {
    let cluster = SlurmCluster::get("24.11");
    let proxy = FaultProxy::start(&cluster.url).await;
    proxy.set(Fault::Status(401, "Authentication failure"), None);
    let exporter = exporter_for(&cluster, &proxy.url, &["--api-version", "v0.0.42"]);
    let answered = wait_until(Duration::from_secs(20), || async {
        matches!(exporter.get("/readyz").await, Some((503, body)) if body.contains("jobs") && body.contains("401"))
    })
    .await;
    assert!(answered, "readyz: {:?}", exporter.get("/readyz").await);
    assert!(matches!(exporter.get("/healthz").await, Some((200, _))));
    proxy.clear();
    exporter.wait_ready(Duration::from_secs(30)).await;
}

/// The real slurmrestd goes away and comes back.
#[tokio::test]
async fn slurmrestd_down_then_back() {
    let cluster = SlurmCluster::get("22.05");
    let exporter = exporter_for(&cluster, &cluster.url, &[]);
    exporter.wait_ready(Duration::from_secs(30)).await;
    let baseline = exporter.metrics().await.get("slurm_nodes", &[]);

    assert_eq!(
        exporter
            .metrics()
            .await
            .get("slurm_controller_up", &[("mode", "primary")]),
        Some(1.0)
    );

    cluster.harness(&["restd-stop"]);
    // Until a ping has failed too: slurmrestd may stop between a collection's ping and its
    // other requests, and that ping's answer stands until the next.
    let down = wait_until(Duration::from_secs(20), || async {
        let m = exporter.metrics().await;
        errors_of(&m, "jobs", "connect") > 0.0
            && m.get("slurm_exporter_up", &[]) == Some(0.0)
            && m.get("slurm_exporter_endpoint_up", &[("endpoint", "ping")]) == Some(0.0)
    })
    .await;
    let logs = exporter.logs();
    // Nobody can say whether slurmctld is up: its series is gone, not a stale 1.
    let m = exporter.metrics().await;
    let controller = m.all("slurm_controller_up", &[]);
    let ping = m.get("slurm_exporter_endpoint_up", &[("endpoint", "ping")]);
    cluster.harness(&["restd-start"]);
    assert!(down, "a stopped slurmrestd went unnoticed:\n{logs}");
    assert!(
        controller.is_empty(),
        "slurm_controller_up still reported while slurmrestd is gone: {controller:?}"
    );
    assert_eq!(ping, Some(0.0));
    assert_eq!(
        exporter.metrics().await.get("slurm_nodes", &[]),
        baseline,
        "last good data kept while down"
    );

    let back = wait_until(Duration::from_secs(30), || async {
        let m = exporter.metrics().await;
        m.get("slurm_exporter_up", &[]) == Some(1.0)
            && m.get("slurm_controller_up", &[("mode", "primary")]) == Some(1.0)
    })
    .await;
    assert!(
        back,
        "no recovery after slurmrestd came back:\n{}",
        exporter.logs()
    );
}
