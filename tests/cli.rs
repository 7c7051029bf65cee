//! The command line as a site uses it, against the real Slurm 22.05: the token in the
//! variable Slurm's own commands read still works but is called deprecated (never echoed),
//! the metrics page moves with `--web.telemetry-path`, and `--no-collector.node` drops the
//! per-node series a 10,000-node cluster would be mostly made of; `slurmscale check` tells a
//! working exporter from a broken one; and on all three real Slurms the exporter reads
//! everything as a user with no privileges.

mod support;

use std::time::Duration;

use support::{Process, SlurmCluster, mint_hs256};

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

#[tokio::test]
async fn the_old_token_variable_works_with_a_warning_and_the_collectors_switch_off() {
    let cluster = SlurmCluster::get("22.05");
    let token = mint_hs256(&cluster.jwt_key(), &cluster.user, now(), now() + 3600);
    let exporter = Process::start(
        &[
            "exporter",
            "--no-kubernetes",
            "--interval",
            "2s",
            "--web.telemetry-path",
            "/slurm-metrics",
            "--no-collector.node",
        ],
        &[
            ("SLURM_REST_URL", &cluster.url),
            ("SLURM_USER", &cluster.user),
            ("SLURM_CLUSTER", &cluster.name),
            ("SLURM_JWT", &token),
        ],
    );
    exporter.wait_ready(Duration::from_secs(30)).await;
    let (status, body) = exporter.get("/slurm-metrics").await.expect("answers");
    assert_eq!(status, 200);
    let m = support::Metrics::parse(&body);
    assert_eq!(m.get("slurm_exporter_up", &[]), Some(1.0), "{body}");
    assert!(m.get("slurm_nodes", &[]).is_some_and(|n| n > 0.0));
    assert!(
        m.all("slurm_node_cpus", &[]).is_empty(),
        "per-node series left in"
    );
    assert_eq!(exporter.get("/metrics").await.map(|(s, _)| s), Some(404));
    let log = exporter.logs();
    assert!(
        log.contains("SLURM_JWT is deprecated: set SLURMSCALE_JWT"),
        "{log}"
    );
    assert!(!log.contains(&token), "the token was logged");
}

/// `slurmscale check <what>`: its exit status and what it printed.
fn check(args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_slurmscale"))
        .arg("check")
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

/// What `helm test` runs: `slurmscale check` passes on an exporter reading the real Slurm,
/// and fails, saying which, on one whose Slurm does not answer and on a port nobody serves.
/// The exporters log in logfmt, as the Prometheus exporters' `--log.format=logfmt` does.
#[tokio::test]
async fn check_tells_a_working_exporter_from_a_broken_one_and_logs_are_logfmt() {
    let cluster = SlurmCluster::get("22.05");
    let token = mint_hs256(&cluster.jwt_key(), &cluster.user, now(), now() + 3600);
    let start = |url: &str| {
        Process::start(
            &["exporter", "--no-kubernetes", "--interval", "1s"],
            &[
                ("SLURM_REST_URL", url),
                ("SLURM_USER", &cluster.user),
                ("SLURM_CLUSTER", &cluster.name),
                ("SLURMSCALE_JWT", &token),
                ("SLURMSCALE_LOG_FORMAT", "logfmt"),
            ],
        )
    };
    let good = start(&cluster.url);
    good.wait_ready(Duration::from_secs(30)).await;
    let (ok, said) = check(&["--metrics", &good.url("/metrics")]);
    assert!(ok, "{said}");
    assert!(said.starts_with("ok    metrics "), "{said}");

    // slurmrestd at a port nobody serves: the exporter answers, and says it reads nothing.
    let dead = format!("http://127.0.0.1:{}", support::free_port());
    let broken = start(&dead);
    let said = std::cell::RefCell::new(String::new());
    let failed = support::wait_until(Duration::from_secs(30), || async {
        let (ok, out) = check(&["--metrics", &broken.url("/metrics")]);
        *said.borrow_mut() = out;
        !ok && said.borrow().contains("reports down: slurm_exporter_up")
    })
    .await;
    let said = said.into_inner();
    assert!(failed && said.contains("1 check(s) failed"), "{said}");

    let nobody = format!("http://127.0.0.1:{}/metrics", support::free_port());
    let (ok, said) = check(&["--metrics", &nobody, "--metrics", &good.url("/metrics")]);
    assert!(!ok, "{said}");
    assert!(
        said.contains(&format!("FAIL  metrics {nobody}: no answer")),
        "{said}"
    );
    assert!(said.contains("ok    metrics "), "{said}");

    for line in good.logs().lines().filter(|l| !l.is_empty()) {
        assert!(
            line.starts_with("ts=") && line.contains(" level=") && line.contains(" target="),
            "not logfmt: {line}"
        );
    }
    assert!(
        good.logs()
            .contains("msg=\"serving /metrics, /healthz, /readyz\"")
    );
    assert!(!good.logs().contains(&token));
}

/// The exporter needs no administrator (docs/security.md, "Least privilege"): signing for a
/// user neither slurmctld nor slurmdbd made one (`nobody`, in no association), it reads every
/// endpoint of each real Slurm that it reads as SlurmUser, each answering well.
#[tokio::test]
async fn the_exporter_reads_everything_as_a_user_without_privileges() {
    let checks = SlurmCluster::all().into_iter().map(|cluster| async move {
        let start = |user: &str| support::slurm_exporter(Process::command(), &cluster, user);
        let (admin, reader) = (start(&cluster.user), start("nobody"));
        admin.wait_ready(Duration::from_secs(60)).await;
        reader.wait_ready(Duration::from_secs(60)).await;
        // Two collections at least, so every endpoint (accounting's among them) was asked.
        support::wait_until(Duration::from_secs(60), || async {
            let mut done = true;
            for p in [&admin, &reader] {
                let n = p
                    .metrics()
                    .await
                    .get("slurm_exporter_collections_total", &[]);
                done &= n.is_some_and(|n| n >= 2.0);
            }
            done
        })
        .await;
        // Each endpoint read, and whether its last answer was good.
        let endpoints = |m: &support::Metrics| -> Vec<(String, f64)> {
            let mut e: Vec<(String, f64)> = (m.0.iter())
                .filter(|(n, _, _)| n == "slurm_exporter_endpoint_up")
                .flat_map(|(_, l, v)| {
                    l.iter()
                        .filter(|(k, _)| k == "endpoint")
                        .map(|(_, e)| (e.clone(), *v))
                })
                .collect();
            e.sort_by(|x, y| x.0.cmp(&y.0));
            e
        };
        let (a, r) = (admin.metrics().await, reader.metrics().await);
        let flavor = &cluster.flavor;
        let all_up =
            |e: &[(String, f64)]| e.iter().map(|(n, _)| (n.clone(), 1.0)).collect::<Vec<_>>();
        assert_eq!(
            endpoints(&a),
            all_up(&endpoints(&a)),
            "{flavor}: SlurmUser's"
        );
        assert_eq!(
            endpoints(&r),
            all_up(&endpoints(&a)),
            "{flavor}: what nobody reads\n{}",
            reader.logs()
        );
        assert_eq!(r.get("slurm_exporter_up", &[]), Some(1.0), "{flavor}");
        assert!(
            r.get("slurm_nodes", &[]).is_some_and(|n| n > 0.0),
            "{flavor}"
        );
    });
    futures::future::join_all(checks).await;
}
