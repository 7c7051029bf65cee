//! How long the NodeSet's new nodes take to boot: from the scale-up that asks for a node to
//! its slurmd registering in Slurm (pod scheduled, image pulled, container started, slurmd
//! joined). Learned from what every reconcile observes — the target's replicas and how many
//! of its nodes are registered — so a standby learns as the leader does, and a scale-up made
//! by anyone counts. A site may set it instead (`spec.bootTimeSeconds`); it is what deciding
//! when to boot for work Slurm has planned needs, and a site sees its own figure in the
//! status and metrics.
//!
//! The oldest node asked for is taken to register first (pods of one NodeSet boot alike);
//! a scale-down cancels the latest asks. A rise of the replicas is dated to the observation
//! before the one that shows it — when the autoscaler's own scale-up was written, right after
//! it; another's, at most a poll earlier than it was — and a registration to the one that
//! shows it: a boot is counted exactly, or up to a poll long, never short.

use std::collections::VecDeque;
use std::time::{Duration, SystemTime};

use slurmscale_exporter::model::{Node, NodeBase, NodeFlags};

use crate::records::Names;

/// Boots remembered: the boot time is their median.
const KEEP: usize = 16;

/// The boot time an autoscaler works with, and where it comes from.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BootTime {
    /// `None` until a boot was seen (and none is set).
    pub seconds: Option<f64>,
    /// `spec.bootTimeSeconds` set it (else it is learned).
    pub set: bool,
    /// Boots seen since the autoscaler started.
    pub observed: u64,
}

impl BootTime {
    /// As the status says it: `92s, learned from 5 boots`, `300s, spec.bootTimeSeconds`;
    /// `None` while unknown.
    pub fn describe(&self) -> Option<String> {
        let s = self.seconds?;
        Some(match (self.set, self.observed) {
            (true, _) => format!("{s:.0}s, spec.bootTimeSeconds"),
            (false, 1) => format!("{s:.0}s, learned from 1 boot"),
            (false, n) if n <= KEEP as u64 => format!("{s:.0}s, learned from {n} boots"),
            (false, n) => format!("{s:.0}s, the median of the last {KEEP} of {n} boots"),
        })
    }
}

/// What the boots seen so far say.
#[derive(Debug, Default)]
pub struct BootClock {
    /// When the last observation was made, and the replicas and registered nodes it saw.
    last: Option<(SystemTime, u64, u64)>,
    /// Nodes asked for and not registered yet whose ask was not seen (booting when the
    /// autoscaler started): they register first and teach nothing.
    unknown: u64,
    /// When each node asked for and not registered yet was asked for, oldest first.
    waiting: VecDeque<SystemTime>,
    /// The latest boots, in seconds, oldest first.
    samples: VecDeque<f64>,
    observed: u64,
}

impl BootClock {
    /// One observation at `now`: the target's `replicas` and its nodes `registered` (`None`
    /// when Slurm's nodes are not known). Returns the boot time to work with, `set` by the
    /// spec or learned.
    pub fn observe(
        &mut self,
        now: SystemTime,
        replicas: u64,
        registered: Option<u64>,
        set: Option<u32>,
    ) -> BootTime {
        if let Some(up) = registered {
            self.count(now, replicas, up);
        }
        BootTime {
            seconds: self.current(set),
            set: set.is_some(),
            observed: self.observed,
        }
    }

    /// The boot time to work with before this reconcile's observation: `set` by the spec,
    /// else learned so far.
    pub fn current(&self, set: Option<u32>) -> Option<f64> {
        set.map(f64::from).or_else(|| self.median())
    }

    fn count(&mut self, now: SystemTime, replicas: u64, up: u64) {
        match self.last {
            None => self.unknown = replicas.saturating_sub(up),
            Some((seen, was, was_up)) => {
                for _ in was..replicas {
                    self.waiting.push_back(seen);
                }
                for _ in was_up..up {
                    if self.unknown > 0 {
                        self.unknown -= 1;
                    } else if let Some(asked) = self.waiting.pop_front() {
                        let secs = now.duration_since(asked).unwrap_or(Duration::ZERO);
                        if self.samples.len() == KEEP {
                            self.samples.pop_front();
                        }
                        self.samples.push_back(secs.as_secs_f64());
                        self.observed += 1;
                    }
                }
            }
        }
        // Asks beyond what is still to come were cancelled, the latest first.
        let to_come = replicas.saturating_sub(up);
        while self.waiting.len() as u64 + self.unknown > to_come {
            if self.waiting.pop_back().is_none() {
                self.unknown -= 1;
            }
        }
        self.last = Some((now, replicas, up));
    }

    fn median(&self) -> Option<f64> {
        let mut s: Vec<f64> = self.samples.iter().copied().collect();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        match n {
            0 => None,
            _ if n % 2 == 1 => Some(s[n / 2]),
            _ => Some((s[n / 2 - 1] + s[n / 2]) / 2.0),
        }
    }
}

/// Of `nodes`, the target's (named as [`Names`] writes its pods' nodes) whose slurmd has
/// registered: up in Slurm (idle or running work), not powered down, powering up or not
/// responding.
pub fn registered(nodes: &[Node], names: &Names) -> u64 {
    let own = |n: &&Node| names.ordinal(&n.name).is_some();
    let up = |n: &&Node| {
        matches!(
            n.state.base,
            NodeBase::Idle | NodeBase::Mixed | NodeBase::Allocated
        ) && ![
            NodeFlags::POWERED_DOWN,
            NodeFlags::POWERING_UP,
            NodeFlags::NOT_RESPONDING,
        ]
        .iter()
        .any(|f| n.state.flags.contains(*f))
    };
    nodes.iter().filter(own).filter(up).count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + s)
    }

    #[test]
    fn a_boot_is_the_time_from_the_ask_to_the_node_registering() {
        let mut c = BootClock::default();
        assert_eq!(c.observe(at(8), 0, Some(0), None).seconds, None);
        // Two nodes asked for just after the observation at 8 (seen at 10); one registers
        // at 98, the other at 108.
        c.observe(at(10), 2, Some(0), None);
        c.observe(at(50), 2, Some(0), None);
        assert_eq!(c.observe(at(98), 2, Some(1), None).seconds, Some(90.0));
        let t = c.observe(at(108), 2, Some(2), None);
        assert_eq!((t.seconds, t.observed), (Some(95.0), 2));
        assert_eq!(t.describe().as_deref(), Some("95s, learned from 2 boots"));
        // A site's setting wins, and says so.
        let t = c.observe(at(120), 2, Some(2), Some(300));
        assert_eq!(t.describe().as_deref(), Some("300s, spec.bootTimeSeconds"));
    }

    #[test]
    fn a_cancelled_ask_or_a_node_booting_before_the_start_teaches_nothing() {
        let mut c = BootClock::default();
        // Started with 3 replicas of which 1 registered: 2 boots whose start was not seen.
        c.observe(at(0), 3, Some(1), None);
        c.observe(at(20), 3, Some(3), None);
        assert_eq!(c.observe(at(21), 3, Some(3), None).observed, 0);
        // Asked for 2 more after 21, then back to 4 by 40 (the latest ask cancelled): the
        // one that registers at 121 booted 100 s; nothing is left waiting.
        c.observe(at(30), 5, Some(3), None);
        c.observe(at(40), 4, Some(3), None);
        let t = c.observe(at(121), 4, Some(4), None);
        assert_eq!((t.seconds, t.observed), (Some(100.0), 1));
        assert!(c.waiting.is_empty());
        // Slurm's nodes unknown for a while: the asks are dated to the last time they
        // were known (130), nothing is lost.
        c.observe(at(130), 4, Some(4), None);
        c.observe(at(140), 6, None, None);
        c.observe(at(150), 6, Some(4), None);
        c.observe(at(220), 6, Some(6), None);
        assert_eq!(c.observe(at(241), 6, Some(6), None).observed, 3);
    }

    #[test]
    fn the_boot_time_is_the_median_of_the_last_sixteen() {
        let mut c = BootClock::default();
        c.observe(at(0), 0, Some(0), None);
        let mut t = 0;
        for boot in [500].into_iter().chain(std::iter::repeat_n(60, 16)) {
            t += 1000;
            c.observe(at(t), 0, Some(0), None);
            c.observe(at(t + 2), 1, Some(0), None);
            c.observe(at(t + boot), 1, Some(1), None);
            c.observe(at(t + boot + 1), 0, Some(0), None);
        }
        let b = c.observe(at(t + 2000), 0, Some(0), None);
        assert_eq!(
            (b.seconds, b.observed),
            (Some(60.0), 17),
            "the slow first boot aged out"
        );
        assert_eq!(
            b.describe().as_deref(),
            Some("60s, the median of the last 16 of 17 boots")
        );
    }
}
