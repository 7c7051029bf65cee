//! What slurmrestd would show of the simulated partition: its nodes, its pending jobs and
//! the partition, as the exporter's model holds them. Everything that reads Slurm in a
//! replay reads this — the builtin controller its snapshots, the `keda-desired` rival and
//! the timeline the demand the exporter would publish — so a rival cannot see a demand the
//! real metric does not give.
//!
//! The view is kept in step with the [`Cluster`] incrementally: only node slots whose state
//! changed are rewritten, and the published figures are worked out again only when
//! something changed since they were last asked for.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use slurmscale_exporter::model::grows::Takes;
use slurmscale_exporter::model::jobs::{JobRecord, JobsBuilder};
use slurmscale_exporter::model::origin::Origin;
use slurmscale_exporter::model::{
    Gres, JobState, Jobs, Node, NodeBase, NodeFlags, NodeSets, NodeState, NodeWork, Partition,
    PendingClass, PendingJob, PlannedStart,
};
use slurmscale_exporter::signals::{PartitionSignals, ShapeHints, partition_signals};
use slurmscale_exporter::snapshot::ClusterSnapshot;

use super::cluster::{Cluster, DrainedBy, PowerFlag, Reservation};
use super::trace::NodeShape;
use slurmscale_autoscaler::slurm_nodes::drain_reason;

/// The real autoscaler's default `--interval`: the replays poll (and reconcile) at it.
pub const POLL: i64 = 2;

/// The controller as the replays run it: it reconciles each poll on a snapshot taken that
/// instant (stale after as many polls as in production), one autoscaler at a time so runs
/// are reproducible.
pub fn replay_config() -> slurmscale_autoscaler::controller::ControllerConfig {
    let poll = Duration::from_secs(POLL as u64);
    slurmscale_autoscaler::controller::ControllerConfig {
        resync: poll,
        stale_after: slurmscale_exporter::signals::stale_after(poll),
        dry_run: false,
        concurrency: 1,
    }
}

/// The cluster and partition names the replay's Slurm has.
pub const CLUSTER: &str = "simulated";
pub const PARTITION: &str = "sim";

/// The real controller on the in-memory world, reconciling one NodeSetAutoscaler of `spec`
/// whose target is the replay's NodeSet (its pods matched by `selector`, if any), on the
/// replay's partition, clock at 0: how both replays run `builtin`.
pub fn replay_controller(
    spec: &slurmscale_autoscaler::crd::NodeSetAutoscalerSpec,
    selector: Option<&str>,
) -> slurmscale_autoscaler::fakes::OnFake {
    let mut spec = spec.clone();
    spec.scale_target_ref.name = PARTITION.into();
    spec.slurm.cluster = Some(CLUSTER.into());
    spec.slurm.partitions = vec![PARTITION.into()];
    spec.dry_run = false;
    let mut nsa = slurmscale_autoscaler::crd::NodeSetAutoscaler::new(PARTITION, spec);
    nsa.metadata.namespace = Some("slurm".into());
    nsa.metadata.generation = Some(1);
    let target = slurmscale_autoscaler::fakes::FakeTarget {
        selector: selector.map(String::from),
        ..slurmscale_autoscaler::fakes::FakeTarget::default()
    };
    let world = slurmscale_autoscaler::fakes::World {
        targets: [(PARTITION.to_string(), target)].into(),
        ..slurmscale_autoscaler::fakes::World::default()
    };
    slurmscale_autoscaler::fakes::OnFake::new(
        world,
        CLUSTER,
        [nsa],
        replay_config(),
        SystemTime::UNIX_EPOCH,
    )
}

pub struct SlurmView {
    /// Every node slot as /nodes would show it; changed in place (nothing else holds it
    /// between snapshots).
    nodes: Arc<Vec<Node>>,
    jobs: Arc<Jobs>,
    partitions: Arc<Vec<Partition>>,
    partition_list: Arc<[Arc<str>]>,
    /// Each node slot's name, written once: a planned start names hundreds of them at
    /// every change.
    names: Arc<[Arc<str>]>,
    /// Where it is in the cluster's record of changed node slots.
    cursor: u64,
    /// The cluster's change count (and backfill passes, where plans are read) the jobs and
    /// `signals` were made at.
    synced: Option<(u64, u64)>,
    signals: Option<PartitionSignals>,
    /// Whether /jobs shows every waiting job's planned start and the work on each node
    /// ([`SlurmView::reading_plans`]); else only the first job's reservation.
    plans: bool,
}

impl SlurmView {
    pub fn new(cluster: &Cluster) -> Self {
        Self::named(cluster, PARTITION)
    }

    /// The view of a partition called `partition`, its nodes `partition-0` on.
    pub fn named(cluster: &Cluster, partition: &str) -> Self {
        Self::over(cluster, partition, &[partition])
    }

    /// The view of a partition called `partition` over NodeSets called `nodesets`, one for
    /// each of the cluster's [groups](Cluster::groups): the nodes of each are
    /// `<nodeset>-0` on, registered with its name as their feature (as slurm-operator makes
    /// them), and the partition lists them as its node sets. One NodeSet named as the
    /// partition is the partition of one NodeSet the other replays run.
    pub fn over(cluster: &Cluster, partition: &str, nodesets: &[&str]) -> Self {
        assert_eq!(
            nodesets.len(),
            cluster.groups().len(),
            "a name for each NodeSet"
        );
        let name: Arc<str> = Arc::from(partition);
        let max = cluster.max_nodes();
        let groups = cluster.groups();
        let nodes: Vec<Node> = (0..max)
            .map(|i| {
                let g = cluster.group_of(i);
                let node = format!("{}-{}", nodesets[g], i - groups[g].first);
                self::node(&name, node, i, cluster)
            })
            .collect();
        let sum = |per: &dyn Fn(&NodeShape) -> u64| {
            groups
                .iter()
                .map(|g| u64::from(g.len) * per(&g.shape))
                .sum::<u64>()
        };
        let node_list = groups
            .iter()
            .zip(nodesets)
            .map(|(g, n)| format!("{n}-[0-{}]", g.len.saturating_sub(1)))
            .collect::<Vec<_>>()
            .join(",");
        let several = nodesets.len() > 1;
        Self {
            names: nodes.iter().map(|n| Arc::from(n.name.as_str())).collect(),
            nodes: Arc::new(nodes),
            jobs: Arc::new(Jobs::default()),
            partitions: Arc::new(vec![Partition {
                name: name.clone(),
                state: "UP".into(),
                total_nodes: max.into(),
                total_cpus: sum(&|s| s.cpus.into()),
                total_memory_bytes: groups
                    .iter()
                    .all(|g| g.shape.memory_mib > 0)
                    .then(|| sum(&|s| s.memory_mib << 20)),
                total_gpus: Some(sum(&|s| s.gpus.into())),
                max_nodes_per_job: None,
                node_list,
                never_suspends: false,
                node_sets: match several {
                    true => NodeSets::Named(nodesets.iter().map(|n| n.to_string()).collect()),
                    false => NodeSets::default(),
                },
            }]),
            partition_list: Arc::from(vec![name.clone()]),
            cursor: 0,
            synced: None,
            signals: None,
            plans: false,
        }
    }

    /// The view shows every waiting job's planned start (as slurmctld's backfill plans
    /// them) and when each busy node frees up: what booting just in time for Slurm's plan
    /// reads. Off, it shows only the first waiting job's reservation, and planning the
    /// rest costs nothing.
    pub fn reading_plans(mut self, on: bool) -> Self {
        self.plans = on;
        self
    }

    pub fn reads_plans(&self) -> bool {
        self.plans
    }

    /// Brings the view up to the cluster's present state.
    pub fn sync(&mut self, cluster: &Cluster) {
        let passes = if self.plans {
            cluster.counts.plan_changes
        } else {
            0
        };
        if self.synced == Some((cluster.changes(), passes)) {
            return;
        }
        let (touched, cursor) = cluster.touched_since(self.cursor);
        let nodes = Arc::make_mut(&mut self.nodes);
        match touched {
            Some(slots) => slots
                .iter()
                .for_each(|&i| update(&mut nodes[i as usize], i, cluster)),
            None => {
                (0..cluster.max_nodes()).for_each(|i| update(&mut nodes[i as usize], i, cluster))
            }
        }
        self.cursor = cursor;
        self.jobs = Arc::new(pending(
            cluster,
            &self.partition_list,
            &self.names,
            self.plans,
        ));
        self.synced = Some((cluster.changes(), passes));
        self.signals = None;
    }

    /// The partition's node slots as /nodes shows them (FUTURE while off or booting).
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The partition as /partitions shows it.
    pub fn partition(&self) -> &Partition {
        &self.partitions[0]
    }

    /// The jobs as /jobs would list them with the work on each node (which running jobs,
    /// until when): what colocation ranks nodes to drain by.
    pub fn jobs_with_running(&self, cluster: &Cluster) -> Jobs {
        let mut jobs = (*self.jobs).clone();
        self.add_running(cluster, &mut jobs);
        jobs
    }

    /// The work on each node of the partition that runs any.
    fn add_running(&self, cluster: &Cluster, jobs: &mut Jobs) {
        for (i, name) in self.names.iter().enumerate() {
            let (count, free_at) = cluster.node_work(i as u32);
            if count > 0 {
                jobs.running_on.insert(
                    name.clone(),
                    NodeWork {
                        jobs: count,
                        free_at,
                        // Traces do not say; Slurm's default (`JobRequeue=1`) allows it.
                        requeueable: true,
                    },
                );
            }
        }
    }

    /// A snapshot of every endpoint, all confirmed at `at`.
    pub fn snapshot(&self, at: SystemTime) -> ClusterSnapshot {
        let took = Duration::from_millis(1);
        let mut snap = ClusterSnapshot::new(CLUSTER, "simulated://");
        // Node writes (drains, resumes) go to the in-memory Slurm whatever the version.
        snap.api_version = Some(slurmscale_exporter::slurm::ApiVersion::V0042);
        snap.nodes.succeed(at, took, None);
        snap.nodes.data = Some(self.nodes.clone());
        snap.jobs.succeed(at, took, None);
        snap.jobs.data = Some(self.jobs.clone());
        snap.partitions.succeed(at, took, None);
        snap.partitions.data = Some(self.partitions.clone());
        snap.collected_at = Some(at);
        snap
    }

    /// The partition's signals as the exporter works them out (busy nodes, packed demand),
    /// for the cluster as last synced.
    pub fn signals(&mut self) -> &PartitionSignals {
        if self.signals.is_none() {
            let at = SystemTime::UNIX_EPOCH;
            let signals = partition_signals(
                &self.snapshot(at),
                &[&self.partitions[0].name],
                None,
                &ShapeHints::default(),
                &Takes::ALL,
                None,
                at,
                Duration::MAX,
            )
            .expect("the simulated partition's data is always fresh and whole");
            self.signals = Some(signals);
        }
        self.signals.as_ref().expect("worked out above")
    }

    /// What the exporter's `slurm_nodeset_desired_nodes` would publish now for a NodeSet
    /// that may grow to the whole partition.
    pub fn published_desired(&mut self) -> u64 {
        let max = self.partitions[0].total_nodes;
        self.signals().published_desired(Some(max))
    }
}

fn node(partition: &Arc<str>, name: String, i: u32, cluster: &Cluster) -> Node {
    let shape = cluster.groups()[cluster.group_of(i)].shape;
    let gres = |count| {
        (shape.gpus > 0)
            .then(|| Gres {
                name: Arc::from("gpu"),
                kind: Arc::from(""),
                count,
            })
            .into_iter()
            .collect()
    };
    let mut n = Node {
        name,
        state: NodeState {
            base: NodeBase::Future,
            flags: NodeFlags::default(),
        },
        partitions: vec![partition.clone()],
        cpus: shape.cpus.into(),
        alloc_cpus: 0,
        memory_bytes: shape.memory_mib << 20,
        alloc_memory_bytes: 0,
        free_memory_bytes: None,
        gres: gres(shape.gpus.into()),
        gres_used: gres(0),
        reason: String::new(),
        reason_set_by: String::new(),
    };
    update(&mut n, i, cluster);
    n
}

/// Brings one node's Slurm view up to date: absent nodes (off, booting) are FUTURE.
fn update(n: &mut Node, i: u32, cluster: &Cluster) {
    match cluster.node_view(i) {
        None => {
            n.state.base = NodeBase::Future;
            n.state.flags = NodeFlags::default();
            n.alloc_cpus = 0;
            n.alloc_memory_bytes = 0;
        }
        Some(v) => {
            n.state.base = match v.alloc_cpus {
                0 => NodeBase::Idle,
                c if u64::from(c) >= n.cpus => NodeBase::Allocated,
                _ => NodeBase::Mixed,
            };
            n.state.flags = match v.drain {
                Some(_) => NodeFlags::DRAIN,
                None => NodeFlags::default(),
            };
            n.state.flags.insert(match v.power {
                PowerFlag::None => NodeFlags::default(),
                PowerFlag::PoweredDown => NodeFlags::POWERED_DOWN,
                PowerFlag::PoweringUp => NodeFlags::POWERING_UP,
                PowerFlag::PoweringDown => NodeFlags::POWERING_DOWN,
            });
            n.reason = match v.drain {
                Some(DrainedBy::Autoscaler) => drain_reason("capacity for Kubernetes"),
                Some(DrainedBy::Operator) => "slurm-operator: scale-in".into(),
                None => String::new(),
            };
            n.alloc_cpus = v.alloc_cpus.into();
            n.alloc_memory_bytes = v.alloc_memory_mib << 20;
            if let Some(g) = n.gres_used.first_mut() {
                g.count = v.alloc_gpus.into();
            }
        }
    }
    n.free_memory_bytes = Some(n.memory_bytes - n.alloc_memory_bytes);
}

/// The start the backfill scheduler plans for job `j` (its index in the cluster's jobs) and
/// the nodes it holds for it, if it plans one.
fn plan_of(cluster: &Cluster, j: usize, names: &[Arc<str>], all: bool) -> Option<PlannedStart> {
    let nodes = |r: &Reservation| r.nodes.iter().map(|&i| names[i as usize].clone()).collect();
    match cluster.plan() {
        Some(r) if r.job == j => Some(PlannedStart {
            start: r.start,
            nodes: nodes(r),
        }),
        // (Slurm names the nodes it holds for every job it plans: none are modelled beyond
        // the first job's.)
        _ if all => Some(PlannedStart {
            start: cluster.planned_start(j)?,
            nodes: Vec::new(),
        }),
        _ => None,
    }
}

/// The waiting jobs as /jobs would list them: all schedulable, in priority order. What a
/// replay reads, on every change of the queue: made directly, without the text of a whole
/// listing ([`listing`] is the rest of /jobs, made from the same cluster).
fn pending(
    cluster: &Cluster,
    partitions: &Arc<[Arc<str>]>,
    names: &[Arc<str>],
    plans: bool,
) -> Jobs {
    let reason: Arc<str> = Arc::from("Resources");
    let unconstrained: Arc<str> = Arc::from("");
    let mb = |mib: u64| mib << 20;
    Jobs {
        pending: cluster
            .queued()
            .enumerate()
            .map(|(k, (index, j))| PendingJob {
                id: k as u64,
                partitions: partitions.clone(),
                class: PendingClass::Schedulable,
                reason: reason.clone(),
                tasks: 1,
                throttled: 0,
                nodes: j.nodes.into(),
                cpus: u64::from(j.cpus_per_node) * u64::from(j.nodes),
                gpus: u64::from(j.gpus_per_node) * u64::from(j.nodes),
                memory_bytes: mb(j.memory_mib_per_node) * u64::from(j.nodes),
                // Over several NodeSets a job asks for CPUs, not for whole nodes of a shape.
                whole_node: cluster.groups().len() == 1 && j.whole_nodes(&cluster.shape),
                constraint: unconstrained.clone(),
                excluded: unconstrained.clone(),
                submit_time: Some(j.submit),
                origin: Origin::Batch,
                planned_start: plan_of(cluster, index, names, plans),
            })
            .collect(),
        // When each busy node frees up, by its jobs' limits: what deciding when to boot for
        // a planned job reads.
        running_on: if plans {
            running_on(cluster, names)
        } else {
            Default::default()
        },
        ..Jobs::default()
    }
}

/// The work on each busy node, by its jobs' limits (slurmrestd's `end_time`): when each
/// frees up.
fn running_on(cluster: &Cluster, names: &[Arc<str>]) -> BTreeMap<Arc<str>, NodeWork> {
    cluster
        .busy_until()
        .into_iter()
        .map(|(i, jobs, t)| {
            let work = NodeWork {
                jobs: jobs as u64,
                free_at: Some(t),
                requeueable: true,
            };
            (names[i as usize].clone(), work)
        })
        .collect()
}

/// A job of a partition as /jobs lists it beyond its shape: whose it is, and when it was
/// submitted and released by its user (unix seconds; slurmctld's queue has it from then).
#[derive(Clone, Copy, Debug)]
pub struct Listed<'a> {
    pub id: u64,
    pub user: &'a str,
    pub account: &'a str,
    pub submit: i64,
    pub released: i64,
}

/// The jobs of one partition that /jobs lists: by their index in the cluster's jobs.
pub struct Listing<'a> {
    pub view: &'a SlurmView,
    pub cluster: &'a Cluster,
    pub jobs: Vec<(usize, Listed<'a>)>,
}

/// /jobs as slurmrestd answers it at `now` (unix seconds) and the exporter folds it, with its
/// own [`JobsBuilder`]: every listed job of each partition — held until released, waiting,
/// running or completed — the backfill scheduler's planned start on the job it plans for, and
/// the work on each node.
pub fn listing<'a>(parts: impl IntoIterator<Item = Listing<'a>>, now: i64) -> Jobs {
    let mut b = JobsBuilder::new(false);
    let mut running = Vec::new();
    for part in parts {
        let (cluster, view) = (part.cluster, part.view);
        let partition = &view.partition().name;
        let shape = cluster.shape;
        for (j, listed) in part.jobs {
            let job = &cluster.jobs()[j];
            let ran = cluster
                .started(j)
                .filter(|&s| s <= now)
                .map(|s| (s, s + job.run as i64));
            let (state, reason) = match ran {
                Some((_, end)) if end <= now => (JobState::Completed, "None"),
                Some(_) => (JobState::Running, "None"),
                None if listed.released > now => (JobState::Pending, "JobHeldUser"),
                None => (JobState::Pending, "Resources"),
            };
            let (cpus, nodes) = (u64::from(job.cpus_per_node), u64::from(job.nodes));
            let gpus = u64::from(job.gpus_per_node);
            let gres = if gpus > 0 {
                format!("gres/gpu:{gpus}")
            } else {
                String::new()
            };
            let alloc = if state == JobState::Running {
                format!(
                    "cpu={},mem={}M,node={nodes},billing={}{}",
                    cpus * nodes,
                    job.memory_mib_per_node * nodes,
                    cpus * nodes,
                    if gpus > 0 {
                        format!(",gres/gpu={}", gpus * nodes)
                    } else {
                        String::new()
                    }
                )
            } else {
                String::new()
            };
            let plan = (reason == "Resources")
                .then(|| plan_of(cluster, j, &view.names, view.plans))
                .flatten();
            let scheduled: Vec<&str> = plan.iter().flat_map(|p| &p.nodes).map(|n| &**n).collect();
            let scheduled = scheduled.join(",");
            b.add(JobRecord {
                id: listed.id,
                state: Some(state),
                reason,
                partition,
                user: listed.user,
                account: listed.account,
                nodes: Some(nodes),
                cpus: Some(cpus * nodes),
                tasks: Some(nodes),
                // 0 is a trace's "not said" here, not Slurm's "all of the node's".
                memory_per_node_mib: (job.memory_mib_per_node > 0)
                    .then_some(job.memory_mib_per_node),
                hold: reason == "JobHeldUser",
                whole_node: job.cpus_per_node >= shape.cpus,
                tres_per_node: &gres,
                tres_alloc: &alloc,
                submit_time: Some(listed.submit),
                end_time: ran.map(|(_, end)| end),
                start_time: plan.as_ref().map(|p| p.start),
                scheduled_nodes: &scheduled,
                ..Default::default()
            });
        }
        running.push((view, cluster));
    }
    let mut jobs = b.finish();
    for (view, cluster) in running {
        view.add_running(cluster, &mut jobs);
    }
    jobs
}
