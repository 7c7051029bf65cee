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
    /// Under shares.
    pub shares: Option<SharesRow>,
}

/// A pool split by shares: each side's share, the nodes reserved for Slurm, and how long each
/// side with work has held less than its share, beside the reclaim time it should not pass.
#[derive(Clone, Debug, Default)]
pub(super) struct SharesRow {
    /// Slurm's, Kubernetes'.
    pub share: [u64; 2],
    pub reserved: u64,
    pub below_share_seconds: [f64; 2],
    pub reclaim_seconds: u64,
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
        if let Some(s) = &c.shares {
            s.collect(out, l);
        }
    }
}

impl SharesRow {
    fn collect(&self, out: &mut Out, l: [(&'static str, &str); 3]) {
        for (i, owner) in ["slurm", "kubernetes"].into_iter().enumerate() {
            let lo = [l[0], l[1], l[2], ("owner", owner)];
            out.gauge(
                "slurmscale_colocation_share_nodes",
                "Each side's nominal share of the pool (spec.colocation.shares), in nodes.",
                &lo,
                self.share[i] as f64,
            );
        }
        for (i, owner) in ["slurm", "kubernetes"].into_iter().enumerate() {
            let lo = [l[0], l[1], l[2], ("owner", owner)];
            out.gauge(
                "slurmscale_colocation_below_share_seconds",
                "How long each side has had work and held less than its share (0: not now).",
                &lo,
                self.below_share_seconds[i],
            );
        }
        out.gauge(
            "slurmscale_colocation_reserved_nodes",
            "Pool nodes reserved for Slurm (tainted) while their pods end or are evicted.",
            &l,
            self.reserved as f64,
        );
        out.gauge(
            "slurmscale_colocation_reclaim_seconds",
            "The reclaim time: a side below its share with work gets its nodes back within it.",
            &l,
            self.reclaim_seconds as f64,
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::metrics::fixtures;

    /// Under shares: Slurm's share 3, Kubernetes' 1, one node reserved, Slurm short of its
    /// share for 90 s of a 600-s reclaim time.
    #[test]
    fn renders_the_shares() {
        let row = super::ColocationRow {
            pool: 4,
            slurm: 2,
            shares: Some(super::SharesRow {
                share: [3, 1],
                reserved: 1,
                below_share_seconds: [90.0, 0.0],
                reclaim_seconds: 600,
            }),
            ..Default::default()
        };
        let text = fixtures::render_policy("slurm/pool", row);
        let l = r#"cluster="lab",namespace="slurm",autoscaler="pool",target="slurm-worker-pool""#;
        for line in [
            format!(r#"slurmscale_colocation_share_nodes{{{l},owner="slurm"}} 3"#),
            format!(r#"slurmscale_colocation_share_nodes{{{l},owner="kubernetes"}} 1"#),
            format!(r#"slurmscale_colocation_below_share_seconds{{{l},owner="slurm"}} 90"#),
            format!(r#"slurmscale_colocation_below_share_seconds{{{l},owner="kubernetes"}} 0"#),
            format!("slurmscale_colocation_reserved_nodes{{{l}}} 1"),
            format!("slurmscale_colocation_reclaim_seconds{{{l}}} 600"),
        ] {
            assert!(text.lines().any(|t| t == line), "{line} not in\n{text}");
        }
    }

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
            shares: None,
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
