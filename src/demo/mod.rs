//! `slurmscale demo`: the exporter's metric families and the autoscaler's controller,
//! running on a simulated cluster ([`sim`]) instead of slurmrestd and a kube-apiserver.
//! Nothing here decides anything on its own: each tick the simulation publishes a Slurm
//! snapshot, the real [`Controller`] reconciles a real NodeSetAutoscaler against it through
//! [`SimTarget`] (the simulated side of the controller's `Kubernetes` trait: one NodeSet
//! whose scale is the simulation's), on the simulation's clock, and `/metrics` is rendered by
//! the same code a real deployment serves. No cluster, no root, no network beyond the
//! 127.0.0.1 listener.

pub mod sim;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use anyhow::Result;
use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::watcher;
use slurmscale_autoscaler::controller::{Controller, ControllerConfig, Seam};
use slurmscale_autoscaler::crd::NodeSetAutoscaler;
use slurmscale_autoscaler::fakes::{Fake, FakeTarget, World, Write};
use slurmscale_autoscaler::leader::Leadership;
use slurmscale_autoscaler::metrics as autoscaler_metrics;
use slurmscale_exporter::metrics::{MetricsOptions, Out, render};
use slurmscale_exporter::model::demand::Shape;
use slurmscale_exporter::server::{self, AppState, Page};
use slurmscale_exporter::signals::{partition_signals, stale_after};
use slurmscale_exporter::snapshot::ClusterSnapshot;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::cli::DemoArgs;
use sim::{BURST, BURST_MAX, CLUSTER, NAMESPACE, Simulation};

/// The autoscaler object the demo plays: the burst partition, scale to zero, with windows
/// short enough to watch (a real one would idle for minutes).
fn autoscaler() -> NodeSetAutoscaler {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "slurmscale.io/v1alpha1", "kind": "NodeSetAutoscaler",
        "metadata": {"name": BURST, "namespace": NAMESPACE, "generation": 1},
        "spec": {
            "scaleTargetRef": {"name": BURST},
            "slurm": {"cluster": CLUSTER, "partitions": [BURST]},
            "minReplicas": 0,
            "maxReplicas": BURST_MAX,
            "idleReplicas": 0,
            "idleTimeoutSeconds": 60,
            "scaleUp": {"maxStep": 8},
            "scaleDown": {"maxStep": 4, "stabilizationWindowSeconds": 30},
        },
    }))
    .expect("the demo's autoscaler is valid")
}

/// The simulation and the controller, stepped together.
pub struct Demo {
    pub sim: Simulation,
    controller: Controller<Arc<Fake>, Arc<Fake>, Arc<Fake>>,
    kubernetes: Arc<Fake>,
    snapshots: watch::Sender<Arc<ClusterSnapshot>>,
    /// The simulation's time, read by the controller's clock (ms since the epoch).
    now_ms: Arc<AtomicU64>,
    _autoscalers: Writer<NodeSetAutoscaler>,
}

/// The simulation is polled every simulated second.
const INTERVAL: Duration = Duration::from_secs(1);

/// What one tick produced.
pub struct Tick {
    pub page: String,
    pub snapshot: Arc<ClusterSnapshot>,
    pub demand_nodes: u64,
    pub reason: String,
    pub message: String,
}

fn millis(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Demo {
    pub fn new(seed: u64, start: SystemTime) -> Self {
        let sim = Simulation::new(seed, start);
        let (store, mut writer) = reflector::store::<NodeSetAutoscaler>();
        writer.apply_watcher_event(&watcher::Event::Apply(autoscaler()));
        let (snapshots, rx) = watch::channel(Arc::new(sim.snapshot()));
        let now_ms = Arc::new(AtomicU64::new(millis(sim.now())));
        let clock = {
            let now_ms = now_ms.clone();
            Arc::new(move || {
                SystemTime::UNIX_EPOCH + Duration::from_millis(now_ms.load(Ordering::SeqCst))
            })
        };
        let kubernetes = Arc::new(Fake::new(World {
            targets: BTreeMap::from([(
                BURST.to_string(),
                FakeTarget {
                    selector: Some(format!("app.kubernetes.io/instance={BURST}")),
                    ..FakeTarget::default()
                },
            )]),
            ..World::default()
        }));
        let seam = Seam {
            kubernetes: kubernetes.clone(),
            slurm: kubernetes.clone(),
            pool: kubernetes.clone(),
            clock,
        };
        let controller = Controller::new(
            seam,
            store,
            BTreeMap::from([(CLUSTER.to_string(), rx)]),
            Leadership::always(),
            ControllerConfig {
                resync: Duration::from_secs(1),
                stale_after: stale_after(INTERVAL),
                dry_run: false,
            },
        );
        Self {
            sim,
            controller,
            kubernetes,
            snapshots,
            now_ms,
            _autoscalers: writer,
        }
    }

    /// One simulated second: Slurm moves, the controller reconciles, the NodeSet is scaled
    /// to what it asked, the page is rendered.
    pub async fn step(&mut self) -> Tick {
        self.sim.step();
        let now = self.sim.now();
        self.now_ms.store(millis(now), Ordering::SeqCst);
        let snap = Arc::new(self.sim.snapshot());
        self.snapshots.send_replace(snap.clone());
        let replicas = self.sim.nodeset.replicas;
        self.kubernetes.with(|w| {
            if let Some(t) = w.targets.get_mut(BURST) {
                t.replicas = replicas;
            }
        });
        self.controller.reconcile_all().await;
        for w in self.kubernetes.take_writes() {
            if let Write::Scale { replicas, .. } = w {
                self.sim.scale(replicas);
            }
        }

        let opts = MetricsOptions {
            per_owner: false,
            interval: Duration::from_secs(1),
        };
        let kube = self.sim.kube_snapshot();
        let mut page = render(std::slice::from_ref(&snap), Some(&kube), &opts, now);
        let mut out = Out::new();
        autoscaler_metrics::collect(
            &mut out,
            &self
                .controller
                .metrics
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        page.push_str(&out.encode());
        // For the live line only: the demand the controller saw.
        let demand_nodes = partition_signals(
            &snap,
            BURST,
            None,
            Shape::default(),
            now,
            stale_after(INTERVAL),
        )
        .map_or(0, |s| s.demand.nodes);
        let (reason, message) = self
            .kubernetes
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
        }
    }

    /// Scale-ups and scale-downs the controller made so far.
    pub fn scalings(&self) -> (u64, u64) {
        let m = self
            .controller
            .metrics
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        m.rows
            .values()
            .fold((0, 0), |(u, d), r| (u + r.scale_ups, d + r.scale_downs))
    }

    /// The live line: the workload, the demand, the NodeSet and the last decision.
    pub fn line(&self, t: &Tick) -> String {
        let s = &self.sim;
        let pct = |(a, t): (u64, u64)| (a * 100).checked_div(t).unwrap_or(0);
        let mut message: String = t.message.chars().take(70).collect();
        if message.len() < t.message.len() {
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
            t.reason,
            message,
        )
    }
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
        let tick = demo.step().await;
        println!("{}", demo.line(&tick));
        tx.send_replace(Arc::new(Page {
            text: tick.page.into(),
            snapshots: vec![tick.snapshot],
        }));
    }
    let (ups, downs) = demo.scalings();
    println!(
        "done after {}s simulated: {ups} scale-ups, {downs} scale-downs",
        demo.sim.tick
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
    #[tokio::test]
    async fn the_burst_nodeset_follows_demand_up_and_back_to_zero() {
        let mut demo = Demo::new(
            42,
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
        );
        let (mut peak, mut back_to_zero, mut last) = (0, false, None);
        for _ in 0..900 {
            let t = demo.step().await;
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
