//! A colocated pool's sharing in the autoscaler's metrics: how many pool nodes each side
//! holds and needs, and how many Slurm nodes drain for Kubernetes. The two owners' node
//! counts add up to the pool, so a stacked panel shows the whole split.

use slurmscale_exporter::metrics::Out;

use crate::metrics::PolicyRow;

/// How a colocated pool is shared.
#[derive(Clone, Debug, Default)]
pub(super) struct ColocationRow {
    pub pool: u64,
    pub slurm: u64,
    pub draining: u64,
    pub kubernetes_need: u64,
    pub slurm_need: u64,
    /// NodeSet pods no node has room for.
    pub unschedulable_pods: u64,
}

impl PolicyRow for ColocationRow {
    fn collect(&self, out: &mut Out, l: [(&'static str, &str); 3]) {
        let c = self;
        out.gauge(
            "slurmscale_colocation_pool_nodes",
            "Nodes in the colocated pool (GenericNodes with known capacity).",
            &l,
            c.pool as f64,
        );
        let kubernetes = c.pool.saturating_sub(c.slurm);
        for (owner, held, need) in [
            ("slurm", c.slurm, c.slurm_need),
            ("kubernetes", kubernetes, c.kubernetes_need),
        ] {
            let lo = [l[0], l[1], l[2], ("owner", owner)];
            out.gauge(
                "slurmscale_colocation_nodes",
                "Pool nodes each side holds (Slurm: a serving NodeSet pod runs there).",
                &lo,
                held as f64,
            );
            out.gauge(
            "slurmscale_colocation_need_nodes",
            "Pool nodes each side needs now (Slurm: busy plus pending demand; Kubernetes: nodes for unschedulable pods).",
            &lo,
            need as f64,
        );
        }
        out.gauge(
            "slurmscale_colocation_draining_nodes",
            "Slurm nodes drained by slurmscale for Kubernetes that still run jobs.",
            &l,
            c.draining as f64,
        );
        out.gauge(
        "slurmscale_colocation_unschedulable_pods",
        "NodeSet pods kube-scheduler found no node for (PodScheduled=False, Unschedulable): Slurm's growth waits for a pool node with room for one.",
        &l,
        c.unschedulable_pods as f64,
    );
    }
}

#[cfg(test)]
mod tests {
    use crate::metrics::fixtures;

    /// The colocated fixture autoscaler (`pool`): four nodes, three Slurm's, one of them
    /// draining for Kubernetes, one NodeSet pod waiting for room; Kubernetes holds what of
    /// the pool Slurm does not.
    #[test]
    fn renders_the_fixture_pool() {
        let row = super::ColocationRow {
            pool: 4,
            slurm: 3,
            draining: 1,
            kubernetes_need: 2,
            slurm_need: 1,
            unschedulable_pods: 1,
        };
        fixtures::assert_text(
            &fixtures::render_policy("slurm/pool", row),
            r#"
            # HELP slurmscale_colocation_pool_nodes Nodes in the colocated pool (GenericNodes with known capacity).
            # TYPE slurmscale_colocation_pool_nodes gauge
            slurmscale_colocation_pool_nodes{cluster="lab",namespace="slurm",autoscaler="pool",target="slurm-worker-pool"} 4
            # HELP slurmscale_colocation_nodes Pool nodes each side holds (Slurm: a serving NodeSet pod runs there).
            # TYPE slurmscale_colocation_nodes gauge
            slurmscale_colocation_nodes{cluster="lab",namespace="slurm",autoscaler="pool",target="slurm-worker-pool",owner="slurm"} 3
            slurmscale_colocation_nodes{cluster="lab",namespace="slurm",autoscaler="pool",target="slurm-worker-pool",owner="kubernetes"} 1
            # HELP slurmscale_colocation_need_nodes Pool nodes each side needs now (Slurm: busy plus pending demand; Kubernetes: nodes for unschedulable pods).
            # TYPE slurmscale_colocation_need_nodes gauge
            slurmscale_colocation_need_nodes{cluster="lab",namespace="slurm",autoscaler="pool",target="slurm-worker-pool",owner="slurm"} 1
            slurmscale_colocation_need_nodes{cluster="lab",namespace="slurm",autoscaler="pool",target="slurm-worker-pool",owner="kubernetes"} 2
            # HELP slurmscale_colocation_draining_nodes Slurm nodes drained by slurmscale for Kubernetes that still run jobs.
            # TYPE slurmscale_colocation_draining_nodes gauge
            slurmscale_colocation_draining_nodes{cluster="lab",namespace="slurm",autoscaler="pool",target="slurm-worker-pool"} 1
            # HELP slurmscale_colocation_unschedulable_pods NodeSet pods kube-scheduler found no node for (PodScheduled=False, Unschedulable): Slurm's growth waits for a pool node with room for one.
            # TYPE slurmscale_colocation_unschedulable_pods gauge
            slurmscale_colocation_unschedulable_pods{cluster="lab",namespace="slurm",autoscaler="pool",target="slurm-worker-pool"} 1
            "#,
        );
    }
}
