//! `slurmscale demo`: the exporter's metric families and the autoscaler's controller,
//! running on a simulated cluster ([`sim`]) instead of slurmrestd and a kube-apiserver.
//! Nothing here decides anything on its own: each tick the simulation publishes a Slurm
//! snapshot and what the Kubernetes watchers would hold, the real controller reconciles two
//! real NodeSetAutoscalers — the burst NodeSet following demand, and the cpu NodeSet sharing
//! a colocated pool with Kubernetes — on the in-memory fake ([`OnFake`]) on the simulation's
//! clock, every 2 s as a deployment polls, and the writes it makes (replicas, drains,
//! resumes, pods marked to go) are applied to the simulation: sim's [`Driver`] does both, the
//! way the replays run it. `/metrics` is rendered by the
//! same code a real deployment serves. No cluster, no root, no network beyond the 127.0.0.1
//! listener.

mod summary;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Result;
use slurmscale_autoscaler::crd::NodeSetAutoscaler;
use slurmscale_autoscaler::fakes::{self, FakeTarget, OnFake, Recorded};
use slurmscale_autoscaler::metrics as autoscaler_metrics;
use slurmscale_exporter::metrics::{MetricsOptions, PageInput, render};
use slurmscale_exporter::server::{self, AppState, Page};
use slurmscale_exporter::signals::{ShapeHints, partition_signals, stale_after};
use slurmscale_exporter::snapshot::ClusterSnapshot;
use slurmscale_sim::driver::{Driver, Polls, Sense};
use slurmscale_sim::view::{POLL, replay_config};
use tokio_util::sync::CancellationToken;

use crate::cli::DemoArgs;
use slurmscale_sim::demo::{
    AtPoll, BURST, BURST_MAX, CLUSTER, NAMESPACE, POOL, POOL_NODES, Simulation, selector,
};
pub use summary::Moves;

/// The autoscalers the demo plays, with windows short enough to watch (a real one would
/// idle for minutes): the burst NodeSet, scale to zero; and the cpu NodeSet sharing the
/// pool with Kubernetes, keeping at least half of it. `simulate --workload demo` replays the
/// burst jobs under the first.
pub fn autoscalers() -> [NodeSetAutoscaler; 2] {
    let nsa = |name: &str, spec: serde_json::Value| {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "slurmscale.io/v1alpha1", "kind": "NodeSetAutoscaler",
            "metadata": {"name": name, "namespace": NAMESPACE, "generation": 1},
            "spec": spec,
        }))
        .expect("the demo's autoscalers are valid")
    };
    [
        nsa(
            BURST,
            serde_json::json!({
                "scaleTargetRef": {"name": BURST},
                "slurm": {"cluster": CLUSTER, "partitions": [BURST]},
                "minReplicas": 0,
                "maxReplicas": BURST_MAX,
                "idleReplicas": 0,
                "idleTimeoutSeconds": 60,
                "scaleUp": {"maxStep": 8},
                "scaleDown": {"maxStep": 4, "stabilizationWindowSeconds": 30},
            }),
        ),
        nsa(
            POOL,
            serde_json::json!({
                "scaleTargetRef": {"name": POOL},
                "slurm": {"cluster": CLUSTER, "partitions": [POOL]},
                "maxReplicas": POOL_NODES,
                "colocation": {"pool": CLUSTER, "minSlurmNodes": POOL_NODES / 2,
                               "cooldownSeconds": 30},
            }),
        ),
    ]
}

/// The simulation and the controller, stepped together.
pub struct Demo {
    pub sim: Simulation,
    /// The controller on the simulation's clock.
    driver: Driver,
    /// It reconciles at every poll, as a deployment does.
    polls: Polls<()>,
    /// What the controller did so far, counted.
    pub moves: Moves,
}

/// The controller polls and reconciles every 2 s, a deployment's default `--interval`.
const INTERVAL: Duration = Duration::from_secs(POLL as u64);

/// What one tick produced.
pub struct Tick {
    pub page: String,
    pub snapshot: Arc<ClusterSnapshot>,
    pub demand_nodes: u64,
    /// The burst autoscaler's last decision.
    pub reason: String,
    pub message: String,
    /// Events worth a line of their own: the pool's moves and any warning.
    pub events: Vec<String>,
}

impl Demo {
    /// `ticks` simulated seconds of the workload of `seed`, from about `start`.
    pub fn new(seed: u64, start: SystemTime, ticks: u64) -> Self {
        let sim = Simulation::new(seed, start, ticks);
        let target = |name: &str| {
            let t = FakeTarget {
                selector: Some(selector(name)),
                ..FakeTarget::default()
            };
            (name.to_string(), t)
        };
        let world = fakes::World {
            targets: BTreeMap::from([target(BURST), target(POOL)]),
            ..fakes::World::default()
        };
        let on = OnFake::new(world, CLUSTER, autoscalers(), replay_config(), sim.now());
        let every_poll = Sense::EveryEvent {
            replays_skipped: false,
        };
        Self {
            polls: Polls::new(every_poll, sim.base, true),
            sim,
            driver: Driver::new(on, CLUSTER),
            moves: Moves::default(),
        }
    }

    /// One simulated second: Slurm and Kubernetes move; on a poll the controller
    /// reconciles both autoscalers and what it wrote is applied; the page is rendered.
    pub async fn step(&mut self) -> Tick {
        self.sim.advance();
        let now = self.sim.now();
        let snap = Arc::new(self.sim.snapshot());
        let kube = self.sim.kube_snapshot();
        let mut events = Vec::new();
        let at = self.sim.base + self.sim.tick as i64;
        if self.polls.look(at, (), None).is_some() {
            let mut world = AtPoll {
                sim: &mut self.sim,
                snapshot: snap.clone(),
                kube: &kube,
            };
            let writes = self.driver.reconcile(&mut world, at).await;
            events = self.events(writes);
        }
        self.sim.settle();

        let opts = MetricsOptions {
            interval: INTERVAL,
            ..MetricsOptions::default()
        };
        let input = PageInput {
            snapshots: std::slice::from_ref(&snap),
            kube: Some(&kube),
            opts: &opts,
            now,
            health_only: false,
        };
        let page = render(&input, |out| {
            let m = self.driver.on.controller.metrics.lock();
            autoscaler_metrics::collect(out, &m.unwrap_or_else(|e| e.into_inner()));
        });
        // For the live line only: the demand the controller saw.
        let demand_nodes = partition_signals(
            &snap,
            &[BURST],
            None,
            &ShapeHints::default(),
            &slurmscale_exporter::model::grows::Takes::ALL,
            None,
            now,
            stale_after(INTERVAL),
        )
        .map_or(0, |s| s.demand.nodes);
        let (reason, message) = self
            .driver
            .on
            .fake
            .status(BURST)
            .and_then(|s| s.last_decision)
            .map(|d| (d.reason, d.message))
            .unwrap_or_default();
        Tick {
            page,
            snapshot: snap,
            demand_nodes,
            reason,
            message,
            events,
        }
    }

    /// The controller's Events worth a line of their own (the pool's moves and any
    /// warning), each counted.
    fn events(&mut self, writes: Vec<Recorded>) -> Vec<String> {
        let mut lines = Vec::new();
        for w in writes {
            if let Recorded::Event {
                autoscaler,
                warning,
                reason,
                note,
            } = w
            {
                if autoscaler == POOL || warning {
                    lines.push(format!("{autoscaler}: {reason}: {note}"));
                }
                self.moves.count(&autoscaler, &reason);
            }
        }
        lines
    }

    /// The live line: the workload, the burst NodeSet and its last decision, the pool.
    pub fn line(&self, t: &Tick) -> String {
        let s = &self.sim;
        let [desired, pods, ready, busy] = s.burst_nodeset();
        let mut message: String = t.message.chars().take(70).collect();
        if message.len() < t.message.len() {
            message.push('…');
        }
        format!(
            "{:>5}s {:<6} | pending {:>3} jobs, burst demand {:>3} nodes | NodeSet burst: desired {:>2}, {:>2} pods, {:>2} ready, {:>2} busy | pool: Slurm {}/{POOL_NODES}, {} pod(s) wait | {}: {}",
            s.tick,
            s.phase().as_str(),
            s.pending(),
            t.demand_nodes,
            desired,
            pods,
            ready,
            busy,
            s.pool.held(),
            s.pool.waiting(),
            t.reason,
            message,
        )
    }
}

pub async fn run(args: DemoArgs) -> Result<()> {
    let stop = CancellationToken::new();
    tokio::spawn(crate::shutdown_on_signal(stop.clone()));
    let speed = args.speed.max(1);
    let ticks = args.duration.as_secs().saturating_mul(speed);
    let mut demo = Demo::new(args.seed, SystemTime::now(), ticks);
    let (tx, rx) = tokio::sync::watch::channel(Arc::new(Page::default()));
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    let addr = listener.local_addr()?;
    let serving = tokio::spawn(server::serve_on(listener, AppState::new(rx), stop.clone()));
    println!(
        "slurmscale demo: a simulated Slurm cluster ({CLUSTER}: a gpu partition, an autoscaled \
         {BURST} NodeSet of up to {BURST_MAX} nodes, and a {POOL} partition on {POOL_NODES} nodes \
         it shares with Kubernetes), seed {}, {}x speed",
        args.seed, speed
    );
    println!("metrics: http://{addr}/metrics   (Ctrl-C to stop)");

    let mut clock = tokio::time::interval(Duration::from_secs(1) / speed as u32);
    clock.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for _ in 0..ticks {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = clock.tick() => {}
        }
        let tick = demo.step().await;
        println!("{}", demo.line(&tick));
        for e in &tick.events {
            println!("        ↳ {e}");
        }
        tx.send_replace(Arc::new(Page {
            text: tick.page.into(),
            snapshots: vec![tick.snapshot],
        }));
    }
    print!("{}", summary::render(&demo.sim, &demo.moves, args.seed));
    stop.cancel();
    serving.await??;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ten simulated minutes: the burst NodeSet follows the demand up and back to zero,
    /// never below the busy nodes; the pool gives Kubernetes room and takes it back; the
    /// page carries what users graph.
    #[tokio::test]
    async fn both_autoscalers_move_and_the_page_has_what_the_dashboards_graph() {
        let mut demo = Demo::new(
            42,
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
            900,
        );
        let (mut peak, mut back_to_zero, mut last) = (0, false, None);
        let mut planned = false;
        for _ in 0..900 {
            let t = demo.step().await;
            planned |= t
                .page
                .lines()
                .any(|l| l.starts_with("slurm_partition_planned_jobs{") && !l.ends_with(" 0"));
            let replicas = demo.sim.burst_nodeset()[0];
            assert!(
                replicas >= demo.sim.burst_nodeset()[3],
                "below busy nodes at {}",
                demo.sim.tick
            );
            assert!(
                demo.sim.pool.held() >= POOL_NODES as u64 / 2,
                "below minSlurmNodes"
            );
            peak = peak.max(replicas);
            back_to_zero |= peak > 0 && replicas == 0;
            last = Some(t);
        }
        assert!(peak >= 2, "never scaled up: peak {peak}");
        assert!(back_to_zero, "never went back to zero");
        assert!(planned, "Slurm's planned starts never reached the page");
        let m = &demo.moves;
        for (what, n) in [
            ("drains", m.get(POOL, "Drain")),
            ("releases", m.get(POOL, "Release")),
        ] {
            assert!(n > 0, "the pool made no {what}: {m:?}");
        }
        assert!(
            demo.sim.pool.pod_waits().len() >= 2,
            "no web pod got a node"
        );
        let page = last.unwrap().page;
        for family in [
            "slurm_partition_jobs_pending",
            "slurm_node_cpus",
            "slurm_nodeset_desired_nodes",
            "slurm_genericnode_cpu_allocated_cores",
            "slurmscale_autoscaler_desired_replicas",
            "slurmscale_autoscaler_scale_ups_total",
            "slurmscale_colocation_pool_nodes",
            "slurmscale_colocation_need_nodes",
            "slurmscale_colocation_draining_nodes",
        ] {
            assert!(page.contains(family), "{family} missing from the page");
        }
    }

    /// What a newcomer sees first: both autoscalers act within five simulated seconds.
    #[tokio::test]
    async fn something_happens_in_the_first_five_seconds() {
        let mut demo = Demo::new(
            1,
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
            5,
        );
        let mut lines = Vec::new();
        for _ in 0..5 {
            let t = demo.step().await;
            lines.push(demo.line(&t));
            lines.extend(t.events);
        }
        let text = lines.join("\n");
        assert!(text.contains("ScaleUp: scaling up 0 →"), "{text}");
        assert!(text.contains("cpu: Drain: drained cpu-"), "{text}");
        assert!(text.contains("cpu: Release: handing pool-"), "{text}");
    }
}
