//! A colocated pool's sharing, for autoscalers with `spec.colocation` only: how many pool
//! nodes each side holds and needs, and how many Slurm nodes drain for Kubernetes. The two
//! owners' node counts add up to the pool, so a stacked panel shows the whole split.

use slurmscale_exporter::metrics::Out;

use super::AutoscalerMetrics;

pub fn collect(out: &mut Out, m: &AutoscalerMetrics) {
    for r in m.rows.values() {
        let Some(c) = &r.colocation else { continue };
        out.set_cluster(&r.cluster);
        let l = r.labels();
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
    use super::super::fixtures;

    /// Only the colocated fixture autoscaler (`pool`) has series; Kubernetes holds what of
    /// the pool Slurm does not.
    #[test]
    fn renders_the_fixture_pool() {
        fixtures::assert_text(
            &fixtures::render(super::collect),
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
