//! The colocation ledger: per GenericNode, what Slurm and Kubernetes each hold (CPU in cores,
//! memory in bytes, other resources as counts), what the Kubernetes node can give
//! (allocatable) and what is left; pending admission checks; pool sums per cluster; and the
//! objects skipped as unreadable. `cluster` is the GenericNode's cluster-name label.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use super::{MetricsOptions, Out};
use crate::k8s::ledger::{Capacity, LedgerNode, Owner};
use crate::k8s::watch::KubeSnapshot;
use crate::snapshot::ClusterSnapshot;

const OWNERS: [Owner; 2] = [Owner::Slurm, Owner::Kubernetes];

#[derive(Default)]
struct Pool {
    nodes: u64,
    held: BTreeMap<(Owner, &'static str), f64>,
    capacity: BTreeMap<&'static str, f64>,
}

pub fn collect(
    out: &mut Out,
    k: &KubeSnapshot,
    _: &[Arc<ClusterSnapshot>],
    _: &MetricsOptions,
    _: SystemTime,
) {
    let mut pools: BTreeMap<&str, Pool> = BTreeMap::new();
    for n in k.ledger.iter() {
        out.set_cluster(&n.cluster);
        let pool = pools.entry(&n.cluster).or_default();
        ledger_node(out, n, k.capacity.get(&n.name), pool);
    }
    for (cluster, pool) in &pools {
        out.set_cluster(cluster);
        pool_sums(out, pool);
    }
    for ((cluster, reason), n) in &k.malformed {
        out.set_cluster(cluster);
        out.gauge(
            "slurm_genericnode_malformed_objects",
            "GenericNodes skipped because their ledger cannot be read, by reason.",
            &[("reason", reason.as_str())],
            *n as f64,
        );
    }
    out.set_cluster("");
    for (resource, h) in &k.watches {
        out.gauge(
            "slurm_exporter_kubernetes_watch_up",
            "1 when the resource is served, fully listed and its watch is healthy.",
            &[("resource", resource)],
            f64::from(u8::from(h.served && h.synced && h.last_error.is_none())),
        );
        out.gauge(
            "slurm_exporter_kubernetes_resource_served",
            "1 when the API server serves the resource (its CRD is installed).",
            &[("resource", resource)],
            f64::from(u8::from(h.served)),
        );
    }
}

/// One GenericNode's series: who holds how much of it, what it can give and what is left,
/// added to its pool's sums.
fn ledger_node(out: &mut Out, n: &LedgerNode, capacity: Option<&Capacity>, pool: &mut Pool) {
    let id = [("node", n.name.as_str()), ("alias", n.alias.as_str())];
    out.info(
        "slurm_genericnode_info",
        "A GenericNode: the Kubernetes node and its Slurm node name (alias).",
        &id,
    );
    pool.nodes += 1;
    for (resource, name_alloc, name_cap, name_free, help_alloc, help_cap, help_free) in [
        (
            "cpu",
            "slurm_genericnode_cpu_allocated_cores",
            "slurm_genericnode_cpu_capacity_cores",
            "slurm_genericnode_cpu_free_cores",
            "CPU cores of the node held by each scheduler, from the GenericNode ledger.",
            "Allocatable CPU cores of the Kubernetes node.",
            "CPU cores of the node held by neither scheduler.",
        ),
        (
            "memory",
            "slurm_genericnode_memory_allocated_bytes",
            "slurm_genericnode_memory_capacity_bytes",
            "slurm_genericnode_memory_free_bytes",
            "Memory of the node held by each scheduler, from the GenericNode ledger.",
            "Allocatable memory of the Kubernetes node.",
            "Memory of the node held by neither scheduler.",
        ),
    ] {
        let mut held_total = 0.0;
        for owner in OWNERS {
            let held = n.held(owner, resource);
            held_total += held;
            *pool.held.entry((owner, resource)).or_default() += held;
            out.gauge(
                name_alloc,
                help_alloc,
                &[id[0], id[1], ("owner", owner.as_str())],
                held,
            );
        }
        if let Some(cap) = capacity.and_then(|c| c.get(resource)) {
            *pool.capacity.entry(resource).or_default() += cap;
            out.gauge(name_cap, help_cap, &id, cap);
            out.gauge(name_free, help_free, &id, cap - held_total);
        }
    }
    let others: std::collections::BTreeSet<&str> = n
        .allocated
        .keys()
        .map(|(_, r)| r.as_str())
        .filter(|r| *r != "cpu" && *r != "memory")
        .collect();
    for resource in others {
        for owner in OWNERS {
            out.gauge(
                "slurm_genericnode_resource_allocated",
                "Other resources (GPUs, ...) of the node held by each scheduler, from the GenericNode ledger.",
                &[id[0], id[1], ("owner", owner.as_str()), ("resource", resource)],
                n.held(owner, resource),
            );
        }
        if let Some(cap) = capacity.and_then(|c| c.get(resource)) {
            out.gauge(
                "slurm_genericnode_resource_capacity",
                "Allocatable amount of other resources of the Kubernetes node.",
                &[id[0], id[1], ("resource", resource)],
                cap,
            );
        }
    }
    out.gauge(
        "slurm_genericnode_admission_checks_pending",
        "Admission checks on the GenericNode not yet passed.",
        &id,
        n.pending_checks as f64,
    );
}

/// A pool's sums over its GenericNodes.
fn pool_sums(out: &mut Out, pool: &Pool) {
    out.gauge(
        "slurm_genericnode_pool_nodes",
        "GenericNodes of the cluster's colocated pool.",
        &[],
        pool.nodes as f64,
    );
    for ((owner, resource), held) in &pool.held {
        let (name, help) = match *resource {
            "cpu" => (
                "slurm_genericnode_pool_cpu_allocated_cores",
                "CPU cores of the pool held by each scheduler.",
            ),
            _ => (
                "slurm_genericnode_pool_memory_allocated_bytes",
                "Memory of the pool held by each scheduler.",
            ),
        };
        out.gauge(name, help, &[("owner", owner.as_str())], *held);
    }
    for (resource, cap) in &pool.capacity {
        let (name, help) = match *resource {
            "cpu" => (
                "slurm_genericnode_pool_cpu_capacity_cores",
                "Allocatable CPU cores of the pool's Kubernetes nodes.",
            ),
            _ => (
                "slurm_genericnode_pool_memory_capacity_bytes",
                "Allocatable memory of the pool's Kubernetes nodes.",
            ),
        };
        out.gauge(name, help, &[], *cap);
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
            # HELP slurm_genericnode_info A GenericNode: the Kubernetes node and its Slurm node name (alias).
            # TYPE slurm_genericnode_info gauge
            slurm_genericnode_info{cluster="fixture",node="node-c1",alias="c1"} 1
            slurm_genericnode_info{cluster="fixture",node="node-c2",alias="c2"} 1
            # HELP slurm_genericnode_cpu_allocated_cores CPU cores of the node held by each scheduler, from the GenericNode ledger.
            # TYPE slurm_genericnode_cpu_allocated_cores gauge
            slurm_genericnode_cpu_allocated_cores{cluster="fixture",node="node-c1",alias="c1",owner="slurm"} 8
            slurm_genericnode_cpu_allocated_cores{cluster="fixture",node="node-c1",alias="c1",owner="kubernetes"} 0
            slurm_genericnode_cpu_allocated_cores{cluster="fixture",node="node-c2",alias="c2",owner="slurm"} 4
            slurm_genericnode_cpu_allocated_cores{cluster="fixture",node="node-c2",alias="c2",owner="kubernetes"} 4
            # HELP slurm_genericnode_cpu_capacity_cores Allocatable CPU cores of the Kubernetes node.
            # TYPE slurm_genericnode_cpu_capacity_cores gauge
            slurm_genericnode_cpu_capacity_cores{cluster="fixture",node="node-c1",alias="c1"} 8
            slurm_genericnode_cpu_capacity_cores{cluster="fixture",node="node-c2",alias="c2"} 8
            # HELP slurm_genericnode_cpu_free_cores CPU cores of the node held by neither scheduler.
            # TYPE slurm_genericnode_cpu_free_cores gauge
            slurm_genericnode_cpu_free_cores{cluster="fixture",node="node-c1",alias="c1"} 0
            slurm_genericnode_cpu_free_cores{cluster="fixture",node="node-c2",alias="c2"} 0
            # HELP slurm_genericnode_memory_allocated_bytes Memory of the node held by each scheduler, from the GenericNode ledger.
            # TYPE slurm_genericnode_memory_allocated_bytes gauge
            slurm_genericnode_memory_allocated_bytes{cluster="fixture",node="node-c1",alias="c1",owner="slurm"} 0
            slurm_genericnode_memory_allocated_bytes{cluster="fixture",node="node-c1",alias="c1",owner="kubernetes"} 1073741824
            slurm_genericnode_memory_allocated_bytes{cluster="fixture",node="node-c2",alias="c2",owner="slurm"} 0
            slurm_genericnode_memory_allocated_bytes{cluster="fixture",node="node-c2",alias="c2",owner="kubernetes"} 1073741824
            # HELP slurm_genericnode_memory_capacity_bytes Allocatable memory of the Kubernetes node.
            # TYPE slurm_genericnode_memory_capacity_bytes gauge
            slurm_genericnode_memory_capacity_bytes{cluster="fixture",node="node-c1",alias="c1"} 17179869184
            slurm_genericnode_memory_capacity_bytes{cluster="fixture",node="node-c2",alias="c2"} 17179869184
            # HELP slurm_genericnode_memory_free_bytes Memory of the node held by neither scheduler.
            # TYPE slurm_genericnode_memory_free_bytes gauge
            slurm_genericnode_memory_free_bytes{cluster="fixture",node="node-c1",alias="c1"} 16106127360
            slurm_genericnode_memory_free_bytes{cluster="fixture",node="node-c2",alias="c2"} 16106127360
            # HELP slurm_genericnode_admission_checks_pending Admission checks on the GenericNode not yet passed.
            # TYPE slurm_genericnode_admission_checks_pending gauge
            slurm_genericnode_admission_checks_pending{cluster="fixture",node="node-c1",alias="c1"} 0
            slurm_genericnode_admission_checks_pending{cluster="fixture",node="node-c2",alias="c2"} 0
            # HELP slurm_genericnode_pool_nodes GenericNodes of the cluster's colocated pool.
            # TYPE slurm_genericnode_pool_nodes gauge
            slurm_genericnode_pool_nodes{cluster="fixture"} 2
            # HELP slurm_genericnode_pool_cpu_allocated_cores CPU cores of the pool held by each scheduler.
            # TYPE slurm_genericnode_pool_cpu_allocated_cores gauge
            slurm_genericnode_pool_cpu_allocated_cores{cluster="fixture",owner="slurm"} 12
            slurm_genericnode_pool_cpu_allocated_cores{cluster="fixture",owner="kubernetes"} 4
            # HELP slurm_genericnode_pool_memory_allocated_bytes Memory of the pool held by each scheduler.
            # TYPE slurm_genericnode_pool_memory_allocated_bytes gauge
            slurm_genericnode_pool_memory_allocated_bytes{cluster="fixture",owner="slurm"} 0
            slurm_genericnode_pool_memory_allocated_bytes{cluster="fixture",owner="kubernetes"} 2147483648
            # HELP slurm_genericnode_pool_cpu_capacity_cores Allocatable CPU cores of the pool's Kubernetes nodes.
            # TYPE slurm_genericnode_pool_cpu_capacity_cores gauge
            slurm_genericnode_pool_cpu_capacity_cores{cluster="fixture"} 16
            # HELP slurm_genericnode_pool_memory_capacity_bytes Allocatable memory of the pool's Kubernetes nodes.
            # TYPE slurm_genericnode_pool_memory_capacity_bytes gauge
            slurm_genericnode_pool_memory_capacity_bytes{cluster="fixture"} 34359738368
            # HELP slurm_genericnode_malformed_objects GenericNodes skipped because their ledger cannot be read, by reason.
            # TYPE slurm_genericnode_malformed_objects gauge
            slurm_genericnode_malformed_objects{cluster="fixture",reason="no_status"} 1
            # HELP slurm_exporter_kubernetes_watch_up 1 when the resource is served, fully listed and its watch is healthy.
            # TYPE slurm_exporter_kubernetes_watch_up gauge
            slurm_exporter_kubernetes_watch_up{cluster="",resource="genericnodes"} 1
            slurm_exporter_kubernetes_watch_up{cluster="",resource="nodesets"} 1
            # HELP slurm_exporter_kubernetes_resource_served 1 when the API server serves the resource (its CRD is installed).
            # TYPE slurm_exporter_kubernetes_resource_served gauge
            slurm_exporter_kubernetes_resource_served{cluster="",resource="genericnodes"} 1
            slurm_exporter_kubernetes_resource_served{cluster="",resource="nodesets"} 1
            
            "#,
        );
    }
}
