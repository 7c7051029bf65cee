//! `slurmscale demo`: the exporter's metric families and the autoscaler's policy, signals and
//! metrics, running on a simulated cluster ([`sim`]) instead of slurmrestd and a
//! kube-apiserver. Nothing here decides anything on its own: each tick the simulation
//! publishes a snapshot, the exporter's `partition_signals` and the autoscaler's `decide`
//! turn it into replicas for the burst NodeSet, and `/metrics` is rendered by the same code a
//! real deployment serves. No cluster, no root, no network beyond the 127.0.0.1 listener.

pub mod sim;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Result;
use slurmscale_autoscaler::crd::NodeSetAutoscalerSpec;
use slurmscale_autoscaler::metrics::{self as autoscaler_metrics, AutoscalerMetrics, Row};
use slurmscale_autoscaler::policy::{Bounds, Decision, History, Reason, decide};
use slurmscale_exporter::metrics::{MetricsOptions, Out, render};
use slurmscale_exporter::server::{self, AppState, Page};
use slurmscale_exporter::signals::partition_signals;
use tokio_util::sync::CancellationToken;

use crate::cli::DemoArgs;
use sim::{BURST, BURST_MAX, CLUSTER, NAMESPACE, Simulation};

/// The autoscaler object the demo plays: the burst partition, scale to zero, with windows
/// short enough to watch (a real one would idle for minutes).
fn autoscaler_spec() -> NodeSetAutoscalerSpec {
    serde_json::from_value(serde_json::json!({
        "scaleTargetRef": {"name": BURST},
        "slurm": {"cluster": CLUSTER, "partitions": [BURST]},
        "minReplicas": 0,
        "maxReplicas": BURST_MAX,
        "idleReplicas": 0,
        "idleTimeoutSeconds": 60,
        "scaleUp": {"maxStep": 8},
        "scaleDown": {"maxStep": 4, "stabilizationWindowSeconds": 30},
    }))
    .expect("the demo's autoscaler spec is valid")
}

/// The simulation and the autoscaler's memory, stepped together.
pub struct Demo {
    pub sim: Simulation,
    bounds: Bounds,
    history: History,
    pub metrics: AutoscalerMetrics,
}

/// What one tick produced.
pub struct Tick {
    pub page: String,
    pub decision: Decision,
    pub demand_nodes: u64,
}

impl Demo {
    pub fn new(seed: u64, start: SystemTime) -> Self {
        let mut metrics = AutoscalerMetrics {
            leader: true,
            ..Default::default()
        };
        metrics.rows.insert(
            BURST.into(),
            Row {
                cluster: CLUSTER.into(),
                namespace: NAMESPACE.into(),
                name: BURST.into(),
                target: BURST.into(),
                ..Default::default()
            },
        );
        Self {
            sim: Simulation::new(seed, start),
            bounds: Bounds::from(&autoscaler_spec()),
            history: History::default(),
            metrics,
        }
    }

    /// One simulated second: Slurm moves, the policy decides, the NodeSet is scaled, the
    /// page is rendered.
    pub fn step(&mut self) -> Tick {
        self.sim.step();
        let now = self.sim.now();
        let snap = Arc::new(self.sim.snapshot());
        let signals = partition_signals(
            &snap,
            BURST,
            Some(self.bounds.max),
            now,
            Duration::from_secs(10),
        );
        let current = self.sim.nodeset.replicas;
        let decision = decide(&self.bounds, &signals, current, &self.history, now);
        self.history.record(
            &decision,
            now,
            self.bounds.down_window + Duration::from_secs(60),
        );
        let row = self.metrics.rows.entry(BURST.into()).or_default();
        if decision.replicas != current {
            self.sim.scale(decision.replicas);
            if decision.replicas > current {
                row.scale_ups += 1;
                row.last_scale_up = Some(now);
            } else {
                row.scale_downs += 1;
                row.last_scale_down = Some(now);
            }
        }
        row.record(&decision, self.sim.nodeset.replicas, &signals);
        row.last_decision = Some(now);

        let opts = MetricsOptions {
            per_owner: false,
            interval: Duration::from_secs(1),
        };
        let kube = self.sim.kube_snapshot();
        let mut page = render(std::slice::from_ref(&snap), Some(&kube), &opts, now);
        let mut out = Out::new();
        autoscaler_metrics::collect(&mut out, &self.metrics);
        page.push_str(&out.encode());
        Tick {
            page,
            demand_nodes: signals.as_ref().map_or(0, |s| s.demand.nodes),
            decision,
        }
    }

    /// The live line: the workload, the demand, the NodeSet and the last decision.
    pub fn line(&self, t: &Tick) -> String {
        let s = &self.sim;
        let pct = |(a, t): (u64, u64)| (a * 100).checked_div(t).unwrap_or(0);
        let mut message: String = t.decision.message.chars().take(70).collect();
        if message.len() < t.decision.message.len() {
            message.push('…');
        }
        format!(
            "{:>5}s {:<6} | pending {:>3} jobs, burst demand {:>3} nodes | NodeSet burst: desired {:>2}, {:>2} pods, {:>2} ready, {:>2} busy | cpu {:>3}% | {}: {}",
            s.tick,
            s.phase.as_str(),
            s.pending(),
            t.demand_nodes,
            s.nodeset.replicas,
            s.nodeset.pods(),
            s.nodeset.ready(s.tick),
            s.busy_burst_nodes(),
            pct(s.cpu_use("cpu")),
            reason_word(t.decision.reason),
            message,
        )
    }
}

fn reason_word(r: Reason) -> &'static str {
    r.as_str()
}

pub async fn run(args: DemoArgs) -> Result<()> {
    let stop = CancellationToken::new();
    tokio::spawn(crate::shutdown_on_signal(stop.clone()));
    let speed = args.speed.max(1);
    let mut demo = Demo::new(args.seed, SystemTime::now());
    let (tx, rx) = tokio::sync::watch::channel(Arc::new(Page::default()));
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    let addr = listener.local_addr()?;
    let serving = tokio::spawn(server::serve_on(listener, AppState::new(rx), stop.clone()));
    println!(
        "slurmscale demo: a simulated Slurm cluster ({CLUSTER}: partitions cpu, gpu and an autoscaled \
         {BURST} NodeSet of up to {BURST_MAX} nodes), seed {}, {}x speed",
        args.seed, speed
    );
    println!("metrics: http://{addr}/metrics   (Ctrl-C to stop)");

    let ticks = args.duration.as_secs().saturating_mul(speed);
    let mut clock = tokio::time::interval(Duration::from_secs(1) / speed as u32);
    clock.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for _ in 0..ticks {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = clock.tick() => {}
        }
        let tick = demo.step();
        println!("{}", demo.line(&tick));
        let snapshots = vec![Arc::new(demo.sim.snapshot())];
        tx.send_replace(Arc::new(Page {
            text: tick.page.into(),
            snapshots,
        }));
    }
    let row = demo.metrics.rows.get(BURST).cloned().unwrap_or_default();
    println!(
        "done after {}s simulated: {} scale-ups, {} scale-downs",
        demo.sim.tick, row.scale_ups, row.scale_downs
    );
    stop.cancel();
    serving.await??;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ten simulated minutes: the NodeSet follows the demand up and back to zero, never
    /// below the busy nodes, and the page carries what users graph.
    #[test]
    fn the_burst_nodeset_follows_demand_up_and_back_to_zero() {
        let mut demo = Demo::new(
            42,
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
        );
        let (mut peak, mut back_to_zero, mut last) = (0, false, None);
        for _ in 0..900 {
            let t = demo.step();
            let replicas = demo.sim.nodeset.replicas;
            assert!(
                replicas >= demo.sim.busy_burst_nodes(),
                "below busy nodes at {}",
                demo.sim.tick
            );
            peak = peak.max(replicas);
            back_to_zero |= peak > 0 && replicas == 0;
            last = Some(t);
        }
        assert!(peak >= 2, "never scaled up: peak {peak}");
        assert!(back_to_zero, "never went back to zero");
        let page = last.unwrap().page;
        for family in [
            "slurm_partition_jobs_pending",
            "slurm_node_cpus",
            "slurm_nodeset_desired_nodes",
            "slurm_genericnode_cpu_allocated_cores",
            "slurmscale_autoscaler_desired_replicas",
            "slurmscale_autoscaler_scale_ups_total",
        ] {
            assert!(page.contains(family), "{family} missing from the page");
        }
    }
}
