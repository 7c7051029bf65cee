//! A Slurm partition over several NodeSets — Slinky 1.1's layout, where a site puts its CPU,
//! GPU or large-memory NodeSets under one partition — replayed with the real controller: one
//! NodeSetAutoscaler per NodeSet, all reconciled by one controller, each growing its
//! NodeSet for the pending jobs it takes. The simulated slurmctld places jobs as Slurm does
//! whoever grew for them (the lowest `Weight` first, [`Cluster::grouped`]), so a NodeSet grown
//! for a job that starts elsewhere costs node-hours and starts nothing. Which NodeSet grows
//! for a job is chosen one of three ways ([`Choice`]) on the same trace and the same
//! slurmctld, so a site sees what the choice is worth.

use std::fmt::Write as _;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::SystemTime;

use slurmscale_autoscaler::actuator::NodeFacts;
use slurmscale_autoscaler::crd::{NodeSetAutoscaler, ScalingMode};
use slurmscale_autoscaler::fakes::{Fake, FakeTarget, OnFake, Recorded};
use slurmscale_exporter::k8s::nodeset::NodeSetView;
use slurmscale_exporter::model::demand::Shape;
use slurmscale_exporter::snapshot::ClusterSnapshot;

use super::cluster::{Cluster, Counts, Mode, SchedConfig};
use super::driver::{Driver, Polls, Sense, World, clock};
use serde::Serialize;

use super::replay::{run_policy, side_by_side};
use super::report::{self, Row, quantile};
use super::trace::{NodeShape, TraceJob};
use super::view::{CLUSTER, PARTITION, SlurmView, replay_config};
use super::{Options, Policy, Run, Scaler};

use crate::error::{Error, Result};

/// How the autoscalers of a partition's NodeSets split its pending jobs among them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Choice {
    /// slurmscale's: the NodeSet Slurm would start the job on — the lowest Weight, then
    /// the autoscaler's `priority`, then the smallest node that fits — a job larger than
    /// one NodeSet split as Slurm splits it, a full NodeSet passing it to the next.
    SlurmOrder,
    /// Every NodeSet that can run a job grows for it: each autoscaler knows its own nodes
    /// and shape and no other NodeSet (one KEDA ScaledObject per NodeSet on the jobs its
    /// shape can run does the same).
    EveryFit,
    /// The first NodeSet of the partition's list that can run a job grows for it: an order
    /// the site writes instead of Slurm's Weights (the autoscalers are shown no Weight,
    /// their priorities follow the list).
    FirstFit,
}

impl Choice {
    pub const ALL: [Choice; 3] = [Self::SlurmOrder, Self::EveryFit, Self::FirstFit];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::SlurmOrder => "slurm-order",
            Self::EveryFit => "every-fit",
            Self::FirstFit => "first-fit",
        }
    }
}

impl FromStr for Choice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Self::ALL.iter().map(|c| c.as_str()).collect();
                format!("unknown choice {s:?} (one of {})", names.join(", "))
            })
    }
}

/// One NodeSet of the partition, as `--nodeset` gives it.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeSetSpec {
    /// Its name: its nodes are `<name>-0` on, registered with it as their feature.
    pub name: String,
    pub shape: NodeShape,
    /// Its nodes' `Weight=` (Slurm's default, 1, unless given).
    pub weight: u64,
    /// The most nodes it may have (its autoscaler's `maxReplicas`).
    pub max_nodes: u32,
    /// The trace's partition whose jobs are fitted to its shape (they ask for this shape's
    /// CPUs per node); the others' are fitted to the first NodeSet's.
    pub partition: Option<String>,
}

impl FromStr for NodeSetSpec {
    type Err = String;
    /// `NAME,cpus=N,nodes=N[,gpus=N][,memory=MiB][,weight=N][,partition=P]`.
    fn from_str(s: &str) -> Result<Self, String> {
        let mut parts = s.split(',').map(str::trim);
        let name = parts.next().unwrap_or_default().to_string();
        let valid = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
        if name.is_empty() || !name.chars().all(valid) || name.starts_with('-') {
            return Err(format!(
                "{s:?}: a NodeSet's name first (lower-case letters, digits and '-'), then cpus=N,nodes=N"
            ));
        }
        let mut spec = NodeSetSpec {
            name,
            shape: NodeShape {
                cpus: 0,
                memory_mib: 0,
                gpus: 0,
            },
            weight: 1,
            max_nodes: 0,
            partition: None,
        };
        for part in parts {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| format!("{s:?}: {part:?} is not key=value"))?;
            let number = || {
                value
                    .parse::<u64>()
                    .map_err(|_| format!("{s:?}: {key}={value:?} is not a whole number"))
            };
            let small = || {
                number().and_then(|n| {
                    u32::try_from(n).map_err(|_| format!("{s:?}: {key}={value} is too large"))
                })
            };
            match key {
                "cpus" => spec.shape.cpus = small()?,
                "nodes" => spec.max_nodes = small()?,
                "gpus" => spec.shape.gpus = small()?,
                "memory" => spec.shape.memory_mib = number()?,
                "weight" => spec.weight = number()?,
                "partition" => spec.partition = Some(value.to_string()),
                _ => {
                    return Err(format!(
                        "{s:?}: unknown key {key:?} (cpus, nodes, gpus, memory, weight, partition)"
                    ));
                }
            }
        }
        if spec.shape.cpus == 0 || spec.max_nodes == 0 {
            return Err(format!(
                "{s:?}: cpus=N and nodes=N are needed, both above 0"
            ));
        }
        Ok(spec)
    }
}

/// The partition's NodeSets, in the order its `Nodes=` lists them, and how their autoscalers
/// choose.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    pub sets: Vec<NodeSetSpec>,
    pub choice: Choice,
}

impl Layout {
    /// Nodes the partition may have: every NodeSet's.
    pub fn max_nodes(&self) -> u32 {
        self.sets.iter().map(|s| s.max_nodes).sum()
    }

    /// The NodeSet whose shape a job of the trace's `partition` is fitted to.
    pub fn fitted_to(&self, partition: Option<&str>) -> &NodeSetSpec {
        partition
            .and_then(|p| self.sets.iter().find(|s| s.partition.as_deref() == Some(p)))
            .unwrap_or(&self.sets[0])
    }

    /// The simulated partition: the NodeSets' node slots in their order.
    pub fn cluster(&self, sched: SchedConfig, jobs: Arc<[TraceJob]>, start: i64) -> Cluster {
        let sets: Vec<_> = self
            .sets
            .iter()
            .map(|s| (s.shape, s.weight, s.max_nodes))
            .collect();
        Cluster::grouped(&sets, Mode::Elastic, sched, jobs, start)
    }

    /// What slurmrestd shows of it.
    pub fn view(&self, cluster: &Cluster) -> SlurmView {
        let names: Vec<&str> = self.sets.iter().map(|s| s.name.as_str()).collect();
        SlurmView::over(cluster, PARTITION, &names)
    }
}

fn shape(s: &NodeShape) -> Shape {
    Shape {
        cpus: Some(s.cpus.into()),
        memory_bytes: (s.memory_mib > 0).then_some(s.memory_mib << 20),
        gpus: Some(s.gpus.into()),
    }
}

/// The real controller with one NodeSetAutoscaler per NodeSet, as [`Choice`] sets them up.
fn controller(opts: &Options, layout: &Layout) -> OnFake {
    let n = layout.sets.len();
    let choice = layout.choice;
    let nsas = layout.sets.iter().enumerate().map(|(k, set)| {
        let mut spec = opts.autoscaler.clone();
        spec.scale_target_ref.name = set.name.clone();
        spec.max_replicas = set.max_nodes;
        spec.min_replicas = spec.min_replicas.min(set.max_nodes);
        spec.slurm.cluster = Some(CLUSTER.into());
        spec.slurm.partitions = vec![PARTITION.into()];
        spec.dry_run = false;
        spec.colocation = None;
        spec.mode = ScalingMode::Replicas;
        spec.priority = match choice {
            Choice::FirstFit => (n - k) as i32,
            _ => 0,
        };
        let mut nsa = NodeSetAutoscaler::new(&set.name, spec);
        nsa.metadata.namespace = Some("slurm".into());
        nsa.metadata.generation = Some(1);
        nsa
    });
    let weight = |set: &NodeSetSpec| match choice {
        Choice::FirstFit => 1,
        _ => set.weight,
    };
    let targets = layout.sets.iter().map(|set| {
        let nodes = NodeFacts {
            shape: shape(&set.shape),
            features: vec![set.name.clone()],
            weight: weight(set),
            node_prefix: format!("{}-", set.name),
            ..NodeFacts::default()
        };
        let target = FakeTarget {
            nodes,
            ..FakeTarget::default()
        };
        (set.name.clone(), target)
    });
    let views = layout.sets.iter().map(|set| NodeSetView {
        namespace: "slurm".into(),
        name: set.name.clone(),
        api_version: "slinky.slurm.net/v1beta1",
        replicas: Some(0),
        status: Default::default(),
        scaling_mode: None,
        named_partition: None,
        slurm_name: set.name.clone(),
        features: vec![set.name.clone()],
        weight: weight(set),
        cluster: None,
        controller: None,
        max_nodes: Some(set.max_nodes.into()),
        shape: shape(&set.shape),
        template_shape: Shape::default(),
    });
    let world = slurmscale_autoscaler::fakes::World {
        targets: targets.collect(),
        // Choosing alone, an autoscaler is shown no other NodeSet.
        nodesets: match choice {
            Choice::EveryFit => Vec::new(),
            _ => views.collect(),
        },
        ..slurmscale_autoscaler::fakes::World::default()
    };
    OnFake::new(
        world,
        CLUSTER,
        nsas.collect::<Vec<_>>(),
        replay_config(),
        SystemTime::UNIX_EPOCH,
    )
}

/// `builtin` over several NodeSets: the real controller and its autoscalers, on the
/// replay's [`Driver`], skipping the polls where nothing it reads moved (as
/// [`super::builtin::Builtin`] does for one NodeSet).
pub struct Several {
    driver: Driver,
    polls: Polls<(Counts, Vec<(u32, u32)>)>,
    view: SlurmView,
    names: Vec<String>,
    /// The replicas each autoscaler last asked for.
    desired: Vec<u32>,
}

/// The NodeSets and their slurmctld at one reconcile: the world the controller runs in.
struct OnSets<'a> {
    view: &'a mut SlurmView,
    cluster: &'a mut Cluster,
    names: &'a [String],
}

impl World for OnSets<'_> {
    fn show(&mut self, fake: &Fake, at: SystemTime) -> Arc<ClusterSnapshot> {
        let groups = self.cluster.groups();
        fake.with(|w| {
            for (name, g) in self.names.iter().zip(groups) {
                if let Some(t) = w.targets.get_mut(name) {
                    t.replicas = g.replicas.into();
                }
            }
        });
        self.view.sync(self.cluster);
        Arc::new(self.view.snapshot(at))
    }

    /// The replicas, as slurm-operator applies them to each NodeSet.
    fn apply(&mut self, write: &Recorded, now: i64) {
        if let Recorded::Scale { target, replicas } = write
            && let Some(g) = self.names.iter().position(|n| n == target)
        {
            self.cluster.scale_group(g, *replicas as u32, now);
        }
    }
}

impl Several {
    pub fn new(opts: &Options, cluster: &Cluster) -> Self {
        let layout = opts
            .nodesets
            .as_ref()
            .expect("a replay over several NodeSets has their layout");
        let sense = Sense::EveryEvent {
            replays_skipped: true,
        };
        Self {
            driver: Driver::new(controller(opts, layout), CLUSTER),
            polls: Polls::new(sense, 0, opts.every_poll),
            view: layout.view(cluster),
            names: layout.sets.iter().map(|s| s.name.clone()).collect(),
            desired: vec![0; layout.sets.len()],
        }
    }

    /// Notes the replicas a reconcile's writes asked for; whether they did.
    fn note(&mut self, writes: &[Recorded]) -> bool {
        let mut asked = false;
        for w in writes {
            if let Recorded::Scale { target, replicas } = w
                && let Some(g) = self.names.iter().position(|n| n == target)
            {
                self.desired[g] = *replicas as u32;
                asked = true;
            }
        }
        asked
    }
}

impl Scaler for Several {
    fn wake(&self) -> Option<i64> {
        self.polls.wake(self.driver.revisit())
    }

    fn look(&mut self, now: i64, cluster: &mut Cluster) -> Option<u32> {
        let sets = cluster.groups().iter().map(|g| (g.replicas, g.busy));
        // (It reads no plan beyond the first job's: backfill passes alone change nothing.)
        let counts = Counts {
            plan_changes: 0,
            ..cluster.counts
        };
        let inputs = (counts, sets.collect());
        let due = self.polls.look(now, inputs, self.driver.revisit())?;
        // The poll before this one read what the last reconcile read: replay it.
        if let Some(before) = due.replay_first {
            let snapshot = Arc::new(self.view.snapshot(clock(before)));
            let writes = self.driver.rerun_blocking(snapshot, before);
            self.note(&writes);
        }
        let mut world = OnSets {
            view: &mut self.view,
            cluster,
            names: &self.names,
        };
        let writes = self.driver.reconcile_blocking(&mut world, now);
        if self.note(&writes) {
            // The next poll reads the new replicas.
            self.polls.again(now);
        }
        None
    }

    fn desired(&self) -> u32 {
        self.desired.iter().sum()
    }
}

/// Replays `jobs` over the NodeSets of `opts` once per choice in `choices` (in parallel),
/// `builtin` deciding, on one horizon.
pub fn run(
    choices: &[Choice],
    jobs: Vec<TraceJob>,
    opts: &Options,
    progress: Option<Arc<AtomicU64>>,
) -> Result<Vec<(Choice, Run)>> {
    let Some(layout) = &opts.nodesets else {
        return Err(Error::Simulate("no NodeSets to replay over".into()));
    };
    let runs = side_by_side(choices, jobs, |&choice, jobs| {
        let mut opts = opts.clone();
        opts.nodesets = Some(Layout {
            choice,
            ..layout.clone()
        });
        run_policy(Policy::Builtin, jobs, &opts, progress.as_deref())
    })?;
    Ok(choices.iter().copied().zip(runs).collect())
}

/// One choice's figures: the single-partition row's (node-hours in all, waits) with the
/// CPU-hours its nodes held — nodes of several shapes cost by their size — and each
/// NodeSet's share.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChoiceRow {
    #[serde(flatten)]
    pub row: Row,
    /// Provisioned node-hours, each NodeSet's weighed by its CPUs.
    pub cpu_hours: f64,
    pub nodesets: Vec<SetRow>,
}

/// One NodeSet's share of a choice's run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SetRow {
    pub nodeset: String,
    pub node_hours: f64,
    pub busy_node_hours: f64,
    /// Jobs that started on its nodes (a job over several counts where its first node is).
    pub jobs: usize,
    pub wait_p50_s: f64,
    pub wait_p95_s: f64,
}

/// The rows of `runs` over `layout`'s NodeSets.
pub fn rows(runs: &[(Choice, Run)], layout: &Layout) -> Vec<ChoiceRow> {
    runs.iter()
        .map(|(choice, run)| {
            let s = &run.stats;
            let sets = layout.sets.iter().zip(&s.nodesets);
            let cpu_seconds: f64 = sets
                .clone()
                .map(|(spec, set)| set.node_seconds * f64::from(spec.shape.cpus))
                .sum();
            let mut row = Row::new(choice.as_str(), s, 0);
            row.utilization = match cpu_seconds > 0.0 {
                true => s.cpu_seconds / cpu_seconds,
                false => 0.0,
            };
            ChoiceRow {
                row,
                cpu_hours: cpu_seconds / 3600.0,
                nodesets: sets
                    .map(|(spec, set)| SetRow {
                        nodeset: spec.name.clone(),
                        node_hours: set.node_seconds / 3600.0,
                        busy_node_hours: set.busy_node_seconds / 3600.0,
                        jobs: set.waits.len(),
                        wait_p50_s: quantile(&set.waits, 0.50),
                        wait_p95_s: quantile(&set.waits, 0.95),
                    })
                    .collect(),
            }
        })
        .collect()
}

/// The table: the single-partition columns with CPU-hours, then each NodeSet's share.
pub fn table(rows: &[ChoiceRow]) -> String {
    let plain: Vec<Row> = rows.iter().map(|r| r.row.clone()).collect();
    let mut out = String::new();
    for (line, r) in report::table(&plain)
        .lines()
        .zip(std::iter::once(None).chain(rows.iter().map(Some)))
    {
        let cpu = r.map_or_else(
            || "cpu-hours".to_string(),
            |r| format!("{:.1}", r.cpu_hours),
        );
        let _ = writeln!(out, "{line} {cpu:>12}");
    }
    let _ = writeln!(
        out,
        "\n{:<13} {:<16} {:>11} {:>11} {:>7} {:>7} {:>7}",
        "policy", "nodeset", "node-hours", "busy", "jobs", "wait50", "wait95"
    );
    for r in rows {
        for set in &r.nodesets {
            let _ = writeln!(
                out,
                "{:<13} {:<16} {:>11.1} {:>11.1} {:>7} {:>7} {:>7}",
                r.row.policy,
                set.nodeset,
                set.node_hours,
                set.busy_node_hours,
                set.jobs,
                report::human(set.wait_p50_s),
                report::human(set.wait_p95_s)
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Stats;

    fn job(submit: i64, run: u64, nodes: u32, cpus: u32) -> TraceJob {
        TraceJob {
            id: format!("{submit}"),
            submit,
            run,
            limit: run * 2,
            nodes,
            cpus_per_node: cpus,
            memory_mib_per_node: 0,
            gpus_per_node: 0,
            recorded_wait: None,
        }
    }

    /// A partition over `gpu` (16 CPUs and 4 GPUs, Weight 10, listed first) and `cpu` (16
    /// CPUs, Weight 1), as a site lists them: Slurm keeps its GPU nodes for the jobs that
    /// need them.
    fn layout() -> Layout {
        let set = |s: &str| s.parse::<NodeSetSpec>().unwrap();
        Layout {
            sets: vec![
                set("gpu,cpus=16,gpus=4,nodes=4,weight=10"),
                set("cpu,cpus=16,nodes=4,weight=1"),
            ],
            choice: Choice::SlurmOrder,
        }
    }

    /// Two hours of 4-CPU jobs either NodeSet can run, and now and then one with a GPU.
    fn jobs() -> Vec<TraceJob> {
        (0..120)
            .map(|k| {
                let mut j = job(k * 60, 900, 1, 4);
                j.gpus_per_node = u32::from(k % 10 == 9);
                j
            })
            .collect()
    }

    #[test]
    fn a_nodeset_is_given_with_its_shape_weight_and_bound() {
        let s: NodeSetSpec = "gpu,cpus=32,nodes=8,gpus=4,memory=256000,weight=5,partition=g"
            .parse()
            .unwrap();
        assert_eq!(
            s.shape,
            NodeShape {
                cpus: 32,
                memory_mib: 256_000,
                gpus: 4
            }
        );
        assert_eq!((s.weight, s.max_nodes), (5, 8));
        assert_eq!(s.partition.as_deref(), Some("g"));
        for bad in [
            "",
            "GPU,cpus=1,nodes=1",
            "gpu,cpus=1",
            "gpu,cpus=1,nodes=1,colour=red",
        ] {
            assert!(bad.parse::<NodeSetSpec>().is_err(), "{bad}");
        }
    }

    #[test]
    fn slurm_places_on_the_lowest_weight_and_each_nodeset_scales_alone() {
        let layout = layout();
        let mut gpu_job = job(0, 100, 1, 4);
        gpu_job.gpus_per_node = 1;
        let jobs: Arc<[TraceJob]> = vec![job(0, 100, 1, 4), gpu_job].into();
        let mut c = layout.cluster(SchedConfig::default(), jobs, 0);
        c.scale_group(0, 1, 0);
        c.scale_group(1, 1, 0);
        assert_eq!(c.replicas(), 2);
        c.advance(90);
        c.check();
        // The CPU job fits both and takes the cpu node (Weight 1) though gpu was listed
        // first; the GPU job takes the gpu node.
        assert_eq!(c.group_of(c.outcomes[0].node), 1);
        assert_eq!(c.group_of(c.outcomes[1].node), 0);
        c.advance(190);
        c.scale_group(1, 0, 200);
        c.check();
        assert_eq!((c.groups()[0].replicas, c.groups()[1].replicas), (1, 0));
        assert_eq!(c.groups()[1].provisioned, 0, "the cpu node went once idle");
        assert_eq!(c.groups()[0].provisioned, 1, "the gpu node stays");
    }

    #[test]
    fn slurm_s_order_grows_only_where_jobs_start_and_the_rivals_pay_for_nodes_they_idle() {
        let mut opts = Options::new(layout().sets[0].shape, layout().max_nodes());
        opts.nodesets = Some(layout());
        let runs = run(&Choice::ALL, jobs(), &opts, None).unwrap();
        let get = |c: Choice| &runs.iter().find(|r| r.0 == c).unwrap().1.stats;
        let (ours, every, first) = (
            get(Choice::SlurmOrder),
            get(Choice::EveryFit),
            get(Choice::FirstFit),
        );
        for (c, r) in &runs {
            assert_eq!(r.stats.starved, 0, "{}: every job runs", c.as_str());
            let per_set: f64 = r.stats.nodesets.iter().map(|s| s.node_seconds).sum();
            assert!(
                (per_set - r.stats.node_seconds).abs() < 1e-6,
                "{}",
                c.as_str()
            );
        }
        // The GPU jobs ran on gpu nodes and most CPU jobs on cpu nodes; some found room
        // on a gpu node already up (Slurm starts a job where it fits now).
        let on_cpu = ours.nodesets[1].waits.len();
        assert!(
            (90..=108).contains(&on_cpu),
            "{on_cpu} of 108 CPU jobs on cpu nodes"
        );
        // Growing every NodeSet for every job pays for gpu nodes the CPU jobs never use
        // (Slurm puts them on cpu nodes): twice the node-hours. Growing the first listed
        // spends as many node-hours, but on gpu nodes.
        let gpu = |s: &Stats| s.nodesets[0].node_seconds;
        assert!(every.node_seconds > 1.5 * ours.node_seconds);
        assert!(first.node_seconds > 0.9 * ours.node_seconds);
        assert!(
            gpu(every) > 2.0 * gpu(ours),
            "{} vs {}",
            gpu(every),
            gpu(ours)
        );
        assert!(
            gpu(first) > 2.0 * gpu(ours),
            "{} vs {}",
            gpu(first),
            gpu(ours)
        );
        // No job waits more than a boot (every-fit's idle nodes start more at once).
        assert!(ours.waits.last() <= Some(&90), "{:?}", ours.waits.last());
    }
}
