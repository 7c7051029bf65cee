//! The ways of sharing a pool that sites run without slurmscale, as the replay plays them
//! on the pool's counts ([`Pool`]): CoreWeave SUNK's Slurm-first and ACK's first-come.

use super::pool::Pool;
use crate::cluster::Slot;

impl Pool {
    /// ACK's first-come handover: while a side has work waiting that its own nodes cannot
    /// take, an empty node of the other side goes to it, the side whose work has waited
    /// longest first.
    pub(super) fn first_come(&mut self, now: i64) {
        loop {
            self.refresh_changed();
            let slurm_since = self
                .cluster
                .head_nodes()
                .filter(|&need| need > self.totals.slurm_free)
                .and_then(|_| self.cluster.oldest_pending());
            let kube_since = (self.world.kube.first_empty().is_none())
                .then(|| self.world.kube.oldest_pending())
                .flatten();
            let to_slurm = match (slurm_since, kube_since) {
                (Some(s), Some(k)) => s <= k,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => return,
            };
            if to_slurm {
                let Some(i) = self.world.kube.first_empty() else {
                    return;
                };
                self.hand_to_slurm(i, now);
            } else {
                let Some(i) = self.slurm_idle.first().copied() else {
                    return;
                };
                self.cluster.retire(i);
                self.hand_to_kube(i);
                self.world.kube.schedule(now);
            }
        }
    }

    /// Slurm-first: a job on a node evicts the pods there; pods may use nodes Slurm runs
    /// nothing on.
    pub(super) fn slurm_first(&mut self, now: i64) {
        let all = self.world.nodes();
        let (slots, c) = self.cluster.touched_since(self.cursors.0);
        let slots: Vec<u32> = slots.map_or_else(|| (0..all).collect(), <[u32]>::to_vec);
        for &i in &slots {
            let busy = self.cluster.slot(i) == Slot::Busy;
            if busy && !self.world.kube.empty(i) {
                self.world.kube.evict(i, now);
            }
            self.world.kube.set_usable(i, !busy);
        }
        // The counts see these slots on their next refresh.
        let _ = c;
        self.world.kube.schedule(now);
    }
}
