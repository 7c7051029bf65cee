//! Stage one: every input of a plan, gathered into one plain [`Observation`] — the target,
//! the Slurm signals of its partitions, what the policy asks for besides (for a colocated
//! pool the ledger, its nodes and the pods that want room) and the time. Reads only; what is
//! read here and what a policy remembered itself is all it may look at, which is what keeps
//! planning pure.

use std::time::{Duration, SystemTime};

use kube::ResourceExt;
use slurmscale_exporter::k8s::nodeset::{NodeSetView, with_rivals};
use slurmscale_exporter::model::grows::{Candidate, Takes};
use slurmscale_exporter::model::origin::Origin;
use slurmscale_exporter::signals::{
    ShapeHints, Untrusted, cluster_of, partition_signals, partitions_served,
};
use slurmscale_exporter::snapshot::ClusterSnapshot;

use super::Controller;
use super::boot::{self, BootTime};
use super::observation::{Observation, Reading, RecordsView};
use super::plan::Policy;
use crate::actuator::{Kubernetes, Target};
use crate::crd::{NodeSetAutoscaler, NodeSetAutoscalerSpec};
use crate::error::Result;
use crate::plan::{Bounds, Signals};
use crate::pool::PoolReader;
use crate::records;
use crate::slurm_nodes::SlurmNodes;

/// The target and its scale.
pub async fn target<K: Kubernetes>(kube: &K, nsa: &NodeSetAutoscaler) -> Result<Target> {
    kube.read(
        &nsa.namespace().unwrap_or_default(),
        &nsa.spec.scale_target_ref,
    )
    .await
}

/// Everything else: Slurm's signals as the policy's `inputs` ask, the node records, and
/// what the policy reads for itself.
pub async fn observe<K: Kubernetes, S: SlurmNodes, P: PoolReader>(
    ctl: &Controller<K, S, P>,
    nsa: &NodeSetAutoscaler,
    policy: &dyn Policy,
    (target, lead): (Target, Option<i64>),
    now: SystemTime,
) -> Result<Observation> {
    let spec = &nsa.spec;
    let inputs = policy.inputs(spec);
    let cluster = ctl.cluster_of(nsa).map(String::from);
    let snapshot = snapshot(ctl, cluster.as_deref());
    let mut partitions = partitions(spec, &target, snapshot.as_deref().ok());
    if inputs.one_partition {
        partitions.truncate(1);
    }
    let shape = shape_hints(spec, &target);
    let origins: &[Origin] = if spec.slurm.origins.is_empty() {
        &Origin::ALL
    } else {
        &spec.slurm.origins
    };
    // Of its partitions' jobs, a NodeSet takes those it is the one to grow for.
    let choice = match snapshot.as_deref() {
        Ok(snap) => choice(
            ctl,
            nsa,
            &target,
            (&partitions, &shape, inputs.max_nodes),
            snap,
        ),
        Err(_) => Ok(None),
    };
    let ask = Ask {
        max_nodes: inputs.max_nodes,
        lead: lead.filter(|_| inputs.timed),
        shape,
        takes: Takes {
            origins,
            nodeset: choice
                .as_ref()
                .ok()
                .and_then(Option::as_ref)
                .map(|(all, me)| (&all[..], *me)),
        },
    };
    let signals = snapshot.as_ref().map_err(Clone::clone).and_then(|s| {
        choice.as_ref().map_err(Clone::clone)?;
        signals(s, &partitions, &ask, now, ctl.cfg.stale_after)
    });
    let snap = snapshot.as_deref().ok();
    // The names of the target's pods' nodes, one per ordinal below maxReplicas.
    let names = records::Names::new(
        &node_prefix(spec, &target),
        target.nodes.ordinal_padding,
        Bounds::from(spec).max,
    );
    let nodes = snap.and_then(|s| s.nodes.data.as_deref());
    let registered = nodes.map(|n| boot::registered(n, &names));
    let records = inputs.records.map(|kind| {
        let wanted = names.clone();
        RecordsView {
            existing: snap.map_or_else(
                || vec![false; wanted.len()],
                |s| records::existing(s, &partitions[0], &wanted),
            ),
            kind,
            wanted,
        }
    });
    let slurm_api = snap.and_then(|s| s.api_version);
    let slurm_release = snap.and_then(|s| s.release.clone());
    let slurm_nodes_at = snap.and_then(|s| s.nodes.last_success);
    let own = policy
        .observe(Reading {
            nsa,
            target: &target,
            cluster: cluster.as_deref(),
            snapshot: snapshot.as_deref(),
            partitions: &partitions,
            records: records.as_ref(),
            pool: &ctl.seam.pool,
            now,
            lead,
        })
        .await?;
    Ok(Observation {
        now,
        target,
        cluster,
        signals,
        records,
        own,
        slurm_api,
        slurm_release,
        slurm_nodes_at,
        registered,
        boot: BootTime::default(),
        lead: ask.lead,
    })
}

/// What the target's pods' Slurm node names start with: the NodeSet's own prefix, else the
/// target's name and `-`.
fn node_prefix(spec: &NodeSetAutoscalerSpec, target: &Target) -> String {
    match target.nodes.node_prefix.as_str() {
        "" => format!("{}-", spec.scale_target_ref.name),
        p => p.to_string(),
    }
}

/// The latest snapshot of the autoscaler's Slurm cluster, or why there is none.
fn snapshot<K, S, P>(
    ctl: &Controller<K, S, P>,
    cluster: Option<&str>,
) -> Result<std::sync::Arc<ClusterSnapshot>, Untrusted> {
    let cluster = cluster.ok_or(Untrusted::UnknownCluster(None))?;
    let rx = ctl
        .clusters
        .get(cluster)
        .ok_or_else(|| Untrusted::UnknownCluster(Some(cluster.to_string())))?;
    Ok(rx.borrow().clone())
}

/// The partitions whose work counts: the spec's, else those the target serves (the one its
/// annotation names, or those Slurm puts its NodeSet in).
fn partitions(
    spec: &NodeSetAutoscalerSpec,
    target: &Target,
    snap: Option<&ClusterSnapshot>,
) -> Vec<String> {
    if !spec.slurm.partitions.is_empty() {
        return spec.slurm.partitions.clone();
    }
    partitions_served(snap, target.named_partition.as_deref(), &target.slurm_name)
}

/// The NodeSets of the autoscaler's Slurm cluster as the choice of which one grows reads
/// them, with the target among them as the autoscaler sees it (its partitions, its spec's
/// node shape); none for a target that is no NodeSet.
/// What the site set (the autoscaler's spec over the NodeSet's annotation), then the
/// partition's nodes, then the NodeSet's pod template.
fn shape_hints(spec: &NodeSetAutoscalerSpec, target: &Target) -> ShapeHints {
    let set = target.nodes.shape.or(spec
        .node_shape
        .as_ref()
        .map(|s| s.shape())
        .unwrap_or_default());
    ShapeHints {
        set,
        set_by: if spec.node_shape.as_ref().is_some_and(|s| s.cpus.is_some()) {
            "NodeSetAutoscaler"
        } else {
            "NodeSet annotation"
        },
        template: target.nodes.template_shape,
    }
}

fn choice<K: Kubernetes, S: SlurmNodes, P: PoolReader>(
    ctl: &Controller<K, S, P>,
    nsa: &NodeSetAutoscaler,
    target: &Target,
    (partitions, shape, max_nodes): (&[String], &ShapeHints, Option<u64>),
    snap: &ClusterSnapshot,
) -> Result<Option<(Vec<Candidate>, usize)>, Untrusted> {
    if target.nodes.features.is_empty() {
        return Ok(None);
    }
    let clusters = || ctl.clusters.keys().map(String::as_str);
    let ours = ctl.cluster_of(nsa);
    let namespace = nsa.namespace().unwrap_or_default();
    let nodesets = ctl
        .seam
        .pool
        .nodesets()
        .ok_or(Untrusted::NodeSetsUnlisted)?;
    let is_me =
        |n: &NodeSetView| n.namespace == namespace && n.name == nsa.spec.scale_target_ref.name;
    // Rivals are the NodeSets of its Slurm cluster: of its Controller, where both name one.
    let mine = nodesets.iter().find(|n| is_me(n));
    // A rival's bound (its annotation, else its autoscaler's maxReplicas) and priority.
    let autoscalers = ctl.autoscalers.state();
    let rank = |n: &NodeSetView| {
        let theirs = autoscalers.iter().find(|a| {
            a.namespace().as_deref() == Some(n.namespace.as_str())
                && a.spec.scale_target_ref.name == n.name
        });
        let max = theirs.map(|a| u64::from(a.spec.max_replicas));
        (n.max_nodes.or(max), theirs.map_or(0, |a| a.spec.priority))
    };
    let rivals = nodesets
        .iter()
        .filter(|n| {
            cluster_of(n.cluster.as_deref(), clusters()) == ours
                && !is_me(n)
                && mine.is_none_or(|m| m.same_controller(n))
        })
        .map(|n| (n, rank(n)));
    let me = Candidate {
        name: target.slurm_name.clone(),
        partitions: partitions.to_vec(),
        features: target.nodes.features.clone(),
        shape: shape.template.or(shape.set),
        weight: target.nodes.weight,
        max_nodes,
        priority: nsa.spec.priority,
        full_nodes: 0,
        gpu_full_nodes: 0,
    };
    Ok(Some(with_rivals(me, rivals, snap)))
}

/// What an autoscaler asks of its partitions' pending work.
struct Ask<'a> {
    /// Jobs needing more nodes than this are unsatisfiable.
    max_nodes: Option<u64>,
    /// Jobs Slurm has planned are booted for just in time, new nodes taking this long.
    lead: Option<i64>,
    shape: ShapeHints,
    takes: Takes<'a>,
}

/// The Slurm side of `partitions`, together (a node or job in two counts once), the oldest
/// data counting. Jobs needing more than `ask.max_nodes` are unsatisfiable, not demand.
fn signals(
    snap: &ClusterSnapshot,
    partitions: &[String],
    ask: &Ask<'_>,
    now: SystemTime,
    stale_after: Duration,
) -> Signals {
    let partitions: Vec<&str> = partitions.iter().map(String::as_str).collect();
    partition_signals(
        snap,
        &partitions,
        ask.max_nodes,
        &ask.shape,
        &ask.takes,
        ask.lead,
        now,
        stale_after,
    )
}
