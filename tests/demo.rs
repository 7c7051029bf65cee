//! `slurmscale demo`, the README's first command, as a newcomer runs it: it prints where its
//! metrics are and a live line per simulated second in which both autoscalers act from the
//! first seconds (the burst NodeSet scales up, the colocated pool drains a node for
//! Kubernetes and hands it over), serves the families the dashboards graph — the colocated
//! pool's included — while it runs, and stops after `--duration` or on Ctrl-C with a summary.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use support::Metrics;

/// Starts the demo; its stdout, line by line.
fn demo(args: &[&str]) -> (Child, Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_slurmscale"))
        .args(["demo", "--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start slurmscale demo");
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().expect("piped stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    (child, rx)
}

/// The lines before the metrics URL, and the URL.
fn metrics_url(rx: &Receiver<String>) -> (Vec<String>, String) {
    let mut lines = Vec::new();
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the demo prints its metrics URL");
        if let Some(rest) = line.strip_prefix("metrics: ") {
            let url = rest
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_string();
            assert!(url.starts_with("http://127.0.0.1:"), "{url}");
            return (lines, url);
        }
        lines.push(line);
    }
}

fn is_live(line: &str) -> bool {
    line.contains("| pending")
}

/// The summary printed on the way out: jobs, waits, node-hours (idle ones too), scale events.
fn assert_summary(lines: &[String]) {
    let at = lines
        .iter()
        .position(|l| l.starts_with("done after"))
        .unwrap_or_else(|| panic!("no summary: {:?}", lines.last()));
    let summary = lines[at..].join("\n");
    for fact in [
        "jobs:",
        "submitted",
        "waits:",
        "node-hours:",
        "idle",
        "scale events:",
        "drained",
    ] {
        assert!(summary.contains(fact), "{fact} missing from\n{summary}");
    }
}

/// The scripted run's `--duration` and `--speed`.
const RUN: Duration = Duration::from_secs(30);
const SPEED: u64 = 60;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_serves_metrics_prints_live_lines_and_stops_on_time() {
    let started = Instant::now();
    let (duration, speed) = (format!("{}s", RUN.as_secs()), SPEED.to_string());
    let (mut child, rx) = demo(&["--duration", &duration, "--speed", &speed, "--seed", "5"]);
    let (mut lines, url) = metrics_url(&rx);

    // While it runs: what users graph, with the burst NodeSet scaled up and the pool's
    // shares on cluster="demo" for the colocation dashboard. Both act from the first
    // simulated seconds; the deadline is generous on purpose and stays inside the run, so
    // the page is still served when they have.
    let mut ready = false;
    let mut page = Metrics::default();
    while started.elapsed() < RUN - Duration::from_secs(5) && !ready {
        tokio::time::sleep(Duration::from_millis(300)).await;
        if let Ok(resp) = reqwest::get(&url).await {
            page = Metrics::parse(&resp.text().await.unwrap());
            let scaled_up = page
                .get(
                    "slurmscale_autoscaler_scale_ups_total",
                    &[("autoscaler", "burst")],
                )
                .is_some_and(|v| v > 0.0);
            let pool = page
                .get(
                    "slurmscale_colocation_nodes",
                    &[
                        ("cluster", "demo"),
                        ("autoscaler", "cpu"),
                        ("owner", "kubernetes"),
                    ],
                )
                .is_some_and(|v| v > 0.0);
            ready = scaled_up && pool;
        }
    }
    assert!(
        ready,
        "the burst NodeSet never scaled up or the pool never gave Kubernetes a node: {:?}",
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
        "slurmscale_colocation_pool_nodes",
        "slurmscale_colocation_need_nodes",
        "slurmscale_colocation_draining_nodes",
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

    // It stops by itself: not before its duration (its first tick comes at once, hence a
    // second's allowance), and within a generous deadline after it. A slow machine makes it
    // late, never wrong: it runs every tick its duration holds, however long they take. At a
    // third of the machine's speed (the suite's rule for deadlines) that is three times its
    // duration; a minute more for its start.
    let exit_by = RUN * 3 + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("the demo's exit status") {
            break status;
        }
        if started.elapsed() > exit_by {
            let _ = child.kill();
            let _ = child.wait();
            panic!("--duration {duration} still running after {exit_by:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(status.success(), "{status}");
    let ran = started.elapsed();
    assert!(
        ran >= RUN.saturating_sub(Duration::from_secs(1)),
        "--duration {duration} stopped after {ran:?}"
    );
    // Everything it printed: the reader ends at the pipe's end, which comes with the exit.
    lines.extend(std::iter::from_fn(|| {
        rx.recv_timeout(Duration::from_secs(30)).ok()
    }));
    let live: Vec<&String> = lines.iter().filter(|l| is_live(l)).collect();
    // One live line per simulated second, as many as the summary says it simulated, and all
    // of its duration at its speed (the first line is second 0, hence the one of slack). How
    // many simulated seconds a real one holds is not asserted.
    let simulated: u64 = lines
        .iter()
        .find_map(|l| l.strip_prefix("done after ")?.split_once("s simulated"))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("no \"done after Ns simulated\" line: {:?}", lines.last()));
    eprintln!("--duration {duration} --speed {speed}: {simulated} simulated seconds in {ran:?}");
    assert!(
        simulated + 1 >= RUN.as_secs() * SPEED,
        "the demo stopped after {simulated} simulated seconds of {}",
        RUN.as_secs() * SPEED
    );
    assert!(
        (live.len() as u64).abs_diff(simulated) <= 1,
        "{} live lines for {simulated} simulated seconds",
        live.len()
    );
    assert!(
        live.iter().any(|l| l.contains("ScaleUp:")),
        "no scale-up in the live lines"
    );
    for event in ["cpu: Drain:", "cpu: Release:"] {
        assert!(lines.iter().any(|l| l.contains(event)), "no {event} line");
    }
    assert_summary(&lines);
}

/// At the default speed, as the README runs it: within the first five simulated seconds the
/// burst NodeSet scales up and the pool drains a node for Kubernetes; Ctrl-C stops it with
/// the summary.
#[test]
fn at_the_default_speed_it_moves_at_once_and_ctrl_c_prints_the_summary() {
    let (mut child, rx) = demo(&["--duration", "10m"]);
    let (mut lines, _) = metrics_url(&rx);
    let started = Instant::now();
    while lines.iter().filter(|l| is_live(l)).count() < 5 {
        let line = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("a live line a second");
        lines.push(line);
    }
    // Informative only: a line a second is the design, and each line already had its own
    // generous deadline above.
    eprintln!("five live lines after {:?}", started.elapsed());
    let first = lines.join("\n");
    assert!(first.contains("ScaleUp: scaling up 0 →"), "{first}");
    assert!(first.contains("cpu: Drain: drained cpu-"), "{first}");
    assert!(
        !first.contains("steady at 0"),
        "nothing moved in the first seconds:\n{first}"
    );

    // Ctrl-C (SIGINT) to the demo we started, by its pid.
    let interrupted = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(interrupted.success());
    let status = child.wait().expect("the demo exits");
    assert!(status.success(), "{status}");
    lines.extend(rx.iter());
    assert_summary(&lines);
}
