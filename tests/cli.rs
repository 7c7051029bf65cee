//! The command line as a site uses it, against the real Slurm 22.05: the token in the
//! variable Slurm's own commands read still works but is called deprecated (never echoed),
//! the metrics page moves with `--web.telemetry-path`, and `--no-collector.node` drops the
//! per-node series a 10,000-node cluster would be mostly made of.

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
