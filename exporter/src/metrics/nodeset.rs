//! Slinky NodeSets: replicas as asked and as running, the Slurm node states the operator
//! reports, and the number of nodes each NodeSet should have now
//! (`slurm_nodeset_desired_nodes`): busy nodes of its partitions (those Slurm puts it in, or
//! the one a site names: [`partitions_served`]; the `partition` label lists them) plus the
//! node demand of the schedulable pending jobs there it is the NodeSet to grow for
//! ([`crate::model::grows`]), capped at its own maximum (never at the nodes its partitions
//! have now: a Slinky partition at zero pods has none) — the one number KEDA scales on
//! (`AverageValue`, target 1), computed by the same function the built-in autoscaler uses.
//!
//! The desired series is always present. When the Slurm data behind it cannot be trusted
//! (failing, stale, partition unknown) it holds the NodeSet's current replicas, so nothing
//! that follows it scales down on bad data, and `slurm_nodeset_desired_nodes_stale` says so.

use std::sync::Arc;
use std::time::SystemTime;

use super::{MetricsOptions, Out};
use crate::k8s::nodeset::{NodeSetView, with_rivals};
use crate::k8s::watch::KubeSnapshot;
use crate::model::grows::Takes;
use crate::model::origin::Origin;
use crate::signals::{
    PartitionSignals, ShapeHints, cluster_of, partition_signals, partitions_served, stale_after,
};
use crate::snapshot::ClusterSnapshot;

pub fn collect(
    out: &mut Out,
    k: &KubeSnapshot,
    slurm: &[Arc<ClusterSnapshot>],
    opts: &MetricsOptions,
    now: SystemTime,
) {
    for ns in &k.nodesets {
        // The Slurm cluster: the NodeSet's annotation, or the only one we read.
        let cluster = cluster_of(ns.cluster.as_deref(), slurm.iter().map(|s| &*s.cluster))
            .unwrap_or_default();
        out.set_cluster(cluster);
        let snap = slurm.iter().find(|s| *s.cluster == *cluster);
        let served = partitions_served(
            snap.map(|s| &**s),
            ns.named_partition.as_deref(),
            &ns.slurm_name,
        );
        let partition = served.join(",");
        replicas(out, ns, &partition);
        let part = [
            ("namespace", ns.namespace.as_str()),
            ("nodeset", ns.name.as_str()),
            ("partition", partition.as_str()),
        ];
        let max_age = stale_after(opts.interval);
        let max = k.max_nodes(ns);
        let hints = ShapeHints {
            set: ns.shape,
            set_by: "NodeSet annotation",
            template: ns.template_shape,
        };
        // Of the jobs of its partitions, those it is the NodeSet to grow for among the
        // NodeSets of its cluster.
        let choice = snap.map(|s| {
            let me = ns.candidate(served.clone(), (max, k.priority(ns)));
            let rivals = k
                .nodesets
                .iter()
                .filter(|n| {
                    !std::ptr::eq(*n, ns)
                        && ns.same_controller(n)
                        && cluster_of(n.cluster.as_deref(), slurm.iter().map(|s| &*s.cluster))
                            == Some(cluster)
                })
                .map(|n| (n, (k.max_nodes(n), k.priority(n))));
            with_rivals(me, rivals, s)
        });
        let served: Vec<&str> = served.iter().map(String::as_str).collect();
        let takes = Takes {
            origins: &Origin::ALL,
            nodeset: choice.as_ref().map(|(all, me)| (&all[..], *me)),
        };
        let signals =
            snap.map(|s| partition_signals(s, &served, max, &hints, &takes, None, now, max_age));
        let (desired, stale) = match signals {
            Some(Ok(s)) => {
                signal_gauges(out, &part, &s, max);
                (s.published_desired(max), false)
            }
            // Hold what it has: never a reason to scale down.
            _ => (ns.spec_replicas(), true),
        };
        out.gauge(
            "slurm_nodeset_desired_nodes",
            "Nodes the NodeSet should have now: busy plus pending demand of its partition, capped; holds the current replicas when the data is stale.",
            &part,
            desired as f64,
        );
        out.gauge(
            "slurm_nodeset_desired_nodes_stale",
            "1 when the Slurm data behind slurm_nodeset_desired_nodes is missing, failing or stale.",
            &part,
            f64::from(u8::from(stale)),
        );
    }
}

/// The NodeSet's share of its partitions' work, as the choice of which NodeSet grows gives it.
fn signal_gauges(out: &mut Out, part: &[(&str, &str); 3], s: &PartitionSignals, max: Option<u64>) {
    out.gauge(
        "slurm_nodeset_busy_nodes",
        "Nodes of the NodeSet's partition running work.",
        part,
        s.busy_nodes as f64,
    );
    out.gauge(
        "slurm_nodeset_demand_nodes",
        "Nodes the schedulable pending jobs of the NodeSet's partition need.",
        part,
        s.demand.nodes as f64,
    );
    out.gauge(
            "slurm_nodeset_demand_elsewhere_jobs",
            "Schedulable pending jobs of the NodeSet's partitions that another NodeSet of them grows for (array tasks counted).",
            part,
            s.demand.elsewhere_jobs as f64,
        );
    out.gauge(
            "slurm_nodeset_demand_unsatisfiable_jobs",
            "Schedulable pending jobs of the NodeSet's partitions that no NodeSet of them fits, or that need more nodes than its bound: not counted as demand.",
            part,
            s.demand.unsatisfiable_jobs as f64,
        );
    if let Some(max) = max {
        out.gauge(
                "slurm_nodeset_max_nodes",
                "The most nodes the NodeSet may have: its slurmscale.io/max-nodes annotation, else the maxReplicas of the NodeSetAutoscaler scaling it (absent: no bound).",
                part,
                max as f64,
            );
    }
}

/// The NodeSet as Kubernetes and the operator report it: what it is, its replicas asked for
/// and running, and its pods by their Slurm node's state.
fn replicas(out: &mut Out, ns: &NodeSetView, partition: &str) {
    let id = [
        ("namespace", ns.namespace.as_str()),
        ("nodeset", ns.name.as_str()),
    ];
    let mode = match &ns.scaling_mode {
        None => String::new(),
        Some(m) => String::from(m.clone()),
    };
    out.info(
        "slurm_nodeset_info",
        "A NodeSet, the Slurm partition it serves, its API version and scaling mode.",
        &[
            id[0],
            id[1],
            ("partition", partition),
            ("version", ns.api_version),
            ("scaling_mode", &mode),
        ],
    );
    let status = &ns.status;
    out.gauge(
        "slurm_nodeset_spec_replicas",
        "Replicas the NodeSet asks for (spec.replicas).",
        &id,
        ns.spec_replicas() as f64,
    );
    let opt = |v: Option<i32>| v.unwrap_or(0) as f64;
    out.gauge(
        "slurm_nodeset_status_replicas",
        "Pods of the NodeSet (status.replicas).",
        &id,
        opt(status.replicas),
    );
    out.gauge(
        "slurm_nodeset_ready_replicas",
        "Ready pods of the NodeSet.",
        &id,
        opt(status.ready_replicas),
    );
    for (state, v) in [
        ("idle", status.slurm_idle),
        ("allocated", status.slurm_allocated),
        ("down", status.slurm_down),
        ("drain", status.slurm_drain),
    ] {
        out.gauge(
            "slurm_nodeset_slurm_nodes",
            "The NodeSet's pods by the Slurm state of their node, as the operator reports it.",
            &[id[0], id[1], ("state", state)],
            opt(v),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures;

    /// The family alone on the fixture cluster (`metrics::fixtures`), line by line.
    #[test]
    fn renders_the_fixture_cluster() {
        fixtures::assert_text(
            &fixtures::render_kube(super::collect),
            r#"
            # HELP slurm_nodeset_info A NodeSet, the Slurm partition it serves, its API version and scaling mode.
            # TYPE slurm_nodeset_info gauge
            slurm_nodeset_info{cluster="fixture",namespace="slurm",nodeset="slurm-worker-gpu",partition="gpu",version="slinky.slurm.net/v1beta1",scaling_mode=""} 1
            # HELP slurm_nodeset_spec_replicas Replicas the NodeSet asks for (spec.replicas).
            # TYPE slurm_nodeset_spec_replicas gauge
            slurm_nodeset_spec_replicas{cluster="fixture",namespace="slurm",nodeset="slurm-worker-gpu"} 2
            # HELP slurm_nodeset_status_replicas Pods of the NodeSet (status.replicas).
            # TYPE slurm_nodeset_status_replicas gauge
            slurm_nodeset_status_replicas{cluster="fixture",namespace="slurm",nodeset="slurm-worker-gpu"} 1
            # HELP slurm_nodeset_ready_replicas Ready pods of the NodeSet.
            # TYPE slurm_nodeset_ready_replicas gauge
            slurm_nodeset_ready_replicas{cluster="fixture",namespace="slurm",nodeset="slurm-worker-gpu"} 1
            # HELP slurm_nodeset_slurm_nodes The NodeSet's pods by the Slurm state of their node, as the operator reports it.
            # TYPE slurm_nodeset_slurm_nodes gauge
            slurm_nodeset_slurm_nodes{cluster="fixture",namespace="slurm",nodeset="slurm-worker-gpu",state="idle"} 0
            slurm_nodeset_slurm_nodes{cluster="fixture",namespace="slurm",nodeset="slurm-worker-gpu",state="allocated"} 0
            slurm_nodeset_slurm_nodes{cluster="fixture",namespace="slurm",nodeset="slurm-worker-gpu",state="down"} 0
            slurm_nodeset_slurm_nodes{cluster="fixture",namespace="slurm",nodeset="slurm-worker-gpu",state="drain"} 0
            # HELP slurm_nodeset_busy_nodes Nodes of the NodeSet's partition running work.
            # TYPE slurm_nodeset_busy_nodes gauge
            slurm_nodeset_busy_nodes{cluster="fixture",namespace="slurm",nodeset="slurm-worker-gpu",partition="gpu"} 1
            # HELP slurm_nodeset_demand_nodes Nodes the schedulable pending jobs of the NodeSet's partition need.
            # TYPE slurm_nodeset_demand_nodes gauge
            slurm_nodeset_demand_nodes{cluster="fixture",namespace="slurm",nodeset="slurm-worker-gpu",partition="gpu"} 1
            # HELP slurm_nodeset_demand_elsewhere_jobs Schedulable pending jobs of the NodeSet's partitions that another NodeSet of them grows for (array tasks counted).
            # TYPE slurm_nodeset_demand_elsewhere_jobs gauge
            slurm_nodeset_demand_elsewhere_jobs{cluster="fixture",namespace="slurm",nodeset="slurm-worker-gpu",partition="gpu"} 0
            # HELP slurm_nodeset_demand_unsatisfiable_jobs Schedulable pending jobs of the NodeSet's partitions that no NodeSet of them fits, or that need more nodes than its bound: not counted as demand.
            # TYPE slurm_nodeset_demand_unsatisfiable_jobs gauge
            slurm_nodeset_demand_unsatisfiable_jobs{cluster="fixture",namespace="slurm",nodeset="slurm-worker-gpu",partition="gpu"} 0
            # HELP slurm_nodeset_max_nodes The most nodes the NodeSet may have: its slurmscale.io/max-nodes annotation, else the maxReplicas of the NodeSetAutoscaler scaling it (absent: no bound).
            # TYPE slurm_nodeset_max_nodes gauge
            slurm_nodeset_max_nodes{cluster="fixture",namespace="slurm",nodeset="slurm-worker-gpu",partition="gpu"} 4
            # HELP slurm_nodeset_desired_nodes Nodes the NodeSet should have now: busy plus pending demand of its partition, capped; holds the current replicas when the data is stale.
            # TYPE slurm_nodeset_desired_nodes gauge
            slurm_nodeset_desired_nodes{cluster="fixture",namespace="slurm",nodeset="slurm-worker-gpu",partition="gpu"} 2
            # HELP slurm_nodeset_desired_nodes_stale 1 when the Slurm data behind slurm_nodeset_desired_nodes is missing, failing or stale.
            # TYPE slurm_nodeset_desired_nodes_stale gauge
            slurm_nodeset_desired_nodes_stale{cluster="fixture",namespace="slurm",nodeset="slurm-worker-gpu",partition="gpu"} 0
            
            "#,
        );
    }
}
