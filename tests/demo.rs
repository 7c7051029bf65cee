//! `slurmscale demo`, the README's first command, as a user runs it: it prints where its
//! metrics are and a live line per tick, serves the families users graph while it runs, and
//! stops by itself after `--duration`.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::Metrics;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_serves_metrics_prints_live_lines_and_stops_on_time() {
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_slurmscale"))
        .args([
            "demo",
            "--listen",
            "127.0.0.1:0",
            "--duration",
            "8s",
            "--speed",
            "60",
            "--seed",
            "5",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start slurmscale demo");
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut lines = Vec::new();
    let url = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the demo prints its metrics URL");
        if let Some(rest) = line.strip_prefix("metrics: ") {
            break rest.split_whitespace().next().unwrap().to_string();
        }
        lines.push(line);
    };
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");

    // While it runs: what users graph, with the burst NodeSet scaled up at some point.
    let mut scaled_up = false;
    let mut page = Metrics::default();
    while started.elapsed() < Duration::from_secs(6) && !scaled_up {
        tokio::time::sleep(Duration::from_millis(300)).await;
        if let Ok(resp) = reqwest::get(&url).await {
            page = Metrics::parse(&resp.text().await.unwrap());
            scaled_up = page
                .get(
                    "slurmscale_autoscaler_scale_ups_total",
                    &[("autoscaler", "burst")],
                )
                .is_some_and(|v| v > 0.0);
        }
    }
    assert!(
        scaled_up,
        "the burst NodeSet never scaled up: {:?}",
        page.names()
    );
    let names = page.names();
    for family in [
        "slurm_exporter_up",
        "slurm_nodes",
        "slurm_node_cpus",
        "slurm_partition_jobs_pending",
        "slurm_partition_demand_nodes",
        "slurm_scheduler_cycle_last_seconds",
        "slurm_nodeset_spec_replicas",
        "slurm_nodeset_desired_nodes",
        "slurm_genericnode_cpu_allocated_cores",
        "slurmscale_autoscaler_desired_replicas",
        "slurmscale_autoscaler_current_replicas",
        "slurmscale_autoscaler_decision_info",
    ] {
        assert!(
            names.contains(family),
            "{family} missing; the page has {names:?}"
        );
    }
    // Every Slurm series says which cluster it is from (the watch health is per process).
    for (name, labels, _) in page
        .0
        .iter()
        .filter(|(n, ..)| n.starts_with("slurm_") && !n.starts_with("slurm_exporter_kubernetes"))
    {
        assert!(
            labels.iter().any(|(k, v)| k == "cluster" && v == "demo"),
            "{name} {labels:?}"
        );
    }

    let status = child.wait().expect("the demo exits");
    assert!(status.success(), "{status}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "--duration 8s ran for {:?}",
        started.elapsed()
    );
    lines.extend(rx.try_iter());
    let live: Vec<&String> = lines.iter().filter(|l| l.contains("| pending")).collect();
    // 8 s at 60x: one line per simulated second, give or take the start.
    assert!(live.len() >= 400, "only {} live lines", live.len());
    assert!(
        live.iter().any(|l| l.contains("ScaleUp:")),
        "no scale-up in the live lines"
    );
    assert!(
        lines.last().is_some_and(|l| l.starts_with("done after")),
        "{:?}",
        lines.last()
    );
}
