//! slurm-operator's NodeSet controller, as far as the simulated worlds need it: which pods it
//! deletes when `spec.replicas` drops below the pods it has. Every world asks here — a
//! NodeSet's partition (`cluster`), one following slurmctld's power requests (`builtin`) and
//! a pool shared with Kubernetes (`colocated`) — so a replay and the demo scale in as the
//! operator does, and alike.
//!
//! slurm-operator (v1.1.0) sorts a NodeSet's pods for deletion with `ActivePods.Less`
//! (`internal/controller/nodeset/utils/sort.go`), which `syncNodeSet`
//! (`internal/controller/nodeset/nodeset_sync.go`) applies through `SplitActivePods` when it
//! finds more pods than replicas. Earlier in this list goes first:
//!
//! 1. a pod bound to no node;
//! 2. a pod not Running (Pending, then Unknown), then one not Ready: a pod whose slurmd has
//!    not registered yet;
//! 3. a lower `controller.kubernetes.io/pod-deletion-cost`: the pods the autoscaler marked;
//! 4. an earlier `slinky.slurm.net/pod-deadline`, which the operator keeps on each pod as the
//!    latest end (start plus time limit) of the jobs running on its Slurm node: a node that
//!    runs nothing has no deadline and goes before every busy one;
//! 5. a cordoned pod (one an earlier scale-in condemned);
//! 6. the higher ordinal; then the one Ready most recently, then the newest (never reached
//!    here: ordinals differ).
//!
//! A condemned pod is cordoned and its Slurm node drained; the pod is deleted once the node
//! runs nothing. Slurm's node state (idle, allocated) counts only through the deadline.

use std::cmp::Reverse;

/// A NodeSet pod as slurm-operator ranks it for deletion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pod {
    pub ordinal: u32,
    /// Bound to a node.
    pub bound: bool,
    /// Running and Ready: its slurmd registered.
    pub ready: bool,
    /// Carries the deletion cost that makes it go first.
    pub marked: bool,
    /// The latest end of the jobs running on its node; `None` when it runs none.
    pub deadline: Option<i64>,
    /// Cordoned by an earlier scale-in (its node draining).
    pub cordoned: bool,
}

/// Where a pod stands in the order, step by step: lower goes first.
type Rank = (bool, bool, bool, Option<i64>, bool, Reverse<u32>);

impl Pod {
    fn rank(&self) -> Rank {
        (
            self.bound,
            self.ready,
            !self.marked,
            self.deadline,
            !self.cordoned,
            Reverse(self.ordinal),
        )
    }
}

/// The `n` of `pods` slurm-operator deletes when replicas drop by `n`, first to go first.
pub fn condemn(mut pods: Vec<Pod>, n: usize) -> Vec<Pod> {
    if n == 0 {
        return Vec::new();
    }
    if n < pods.len() {
        // Only the first n are ordered: a partition has thousands of pods.
        pods.select_nth_unstable_by_key(n - 1, Pod::rank);
        pods.truncate(n);
    }
    pods.sort_unstable_by_key(Pod::rank);
    pods
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(ordinal: u32) -> Pod {
        Pod {
            ordinal,
            bound: true,
            ready: true,
            marked: false,
            deadline: None,
            cordoned: false,
        }
    }

    fn order(pods: Vec<Pod>) -> Vec<u32> {
        let n = pods.len();
        condemn(pods, n).iter().map(|p| p.ordinal).collect()
    }

    /// Each step of the operator's order outranks the ones after it.
    #[test]
    fn unbound_then_not_ready_then_marked_then_idle_then_soonest_free_then_highest() {
        let pods = vec![
            Pod {
                deadline: Some(500),
                ..pod(0)
            },
            Pod {
                deadline: Some(100),
                ..pod(1)
            },
            pod(2),
            pod(3),
            Pod {
                marked: true,
                deadline: Some(900),
                ..pod(4)
            },
            Pod {
                ready: false,
                ..pod(5)
            },
            Pod {
                bound: false,
                ready: false,
                ..pod(6)
            },
            Pod {
                cordoned: true,
                deadline: Some(100),
                ..pod(7)
            },
        ];
        // 6 unbound; 5 not ready; 4 marked though busy longest; 3 and 2 run nothing (the
        // higher first); 7 and 1 are free soonest (the cordoned one first); 0 last.
        assert_eq!(order(pods), [6, 5, 4, 3, 2, 7, 1, 0]);
    }

    #[test]
    fn only_as_many_as_replicas_dropped_by() {
        let pods: Vec<Pod> = (0..100).map(pod).collect();
        let gone = condemn(pods.clone(), 3);
        assert_eq!(
            gone.iter().map(|p| p.ordinal).collect::<Vec<_>>(),
            [99, 98, 97]
        );
        assert!(condemn(pods, 0).is_empty());
    }
}
