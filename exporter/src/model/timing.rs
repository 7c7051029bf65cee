//! Just in time: when to boot for a pending job Slurm has already planned. Slurm's backfill
//! plans a start (`start_time`) for the jobs it tests, on nodes that exist: busy ones that
//! free up by their jobs' time limits, idle ones it keeps for the job meanwhile. Booting for
//! such a job at submit buys nothing when those nodes free up before a new one could boot,
//! and leaves new nodes idle until the start when growing cannot start it sooner (the
//! NodeSet has too little room left). So each planned job, in priority order (the wider job
//! at the head of the queue is not starved of room by the small ones behind it), is one of:
//! * **wait**: the plan starts it no later than nodes booted now would (within one lead:
//!   boot time and margin), or growing cannot start it before the plan: no boot;
//! * **now**: growing within the NodeSet's bound starts it one lead from now, sooner than
//!   the plan: the nodes it needs besides those freeing up by then are demand now;
//! * **later**: growing starts it sooner than the plan, but only once enough busy nodes have
//!   freed up: the new nodes are booted one lead before that, not now.
//!
//! Each job takes the nodes and the room it would use, so the next one sees what is left;
//! a job taking a node holds it from then on (the time limits of pending jobs are not read),
//! which makes later jobs' starts, if anything, later than they will be. Nodes are counted
//! whole. A job with no plan, or a plan slurmctld has not renewed (its start long past),
//! is demand as before: the caller leaves it out.

use std::collections::VecDeque;

/// What a planned job's nodes need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    /// Boot now: this many of its nodes are demand (idle nodes it would take and new
    /// ones; those freeing up within the lead are not).
    Now(u64),
    /// Slurm's plan starts it, at this time, on nodes that free up: boot nothing for it.
    Wait(i64),
    /// Boot `nodes` new nodes at `at`, one lead before it can start on them.
    Later { at: i64, nodes: u64 },
}

/// A plan whose start is more than this far in the past was not renewed by slurmctld's
/// scheduling passes (backfill replans every `bf_interval`, 30 s by default): not trusted.
pub const STALE_AFTER_SECONDS: i64 = 120;

/// The NodeSet's nodes and room as the planned jobs take them, earliest first.
#[derive(Clone, Debug)]
pub struct Timeline {
    now: i64,
    /// Boot time plus margin, in seconds.
    lead: i64,
    /// When each node that exists is free (now for idle ones), earliest first; nodes that
    /// never free up at a known time are left out.
    free: VecDeque<i64>,
    /// Nodes that exist and are busy until a time not known (a job without a time limit):
    /// where growing would need them, it is not known whether it beats the plan.
    unknown: usize,
    /// Nodes the NodeSet may still add.
    room: u64,
}

impl Timeline {
    /// At `now` (unix seconds), with nodes free at `free_at` (`None`: at a time not known)
    /// and `room` more allowed, and a new node ready `lead` seconds after it is asked for.
    pub fn new(
        now: i64,
        lead: i64,
        free_at: impl IntoIterator<Item = Option<i64>>,
        room: u64,
    ) -> Self {
        let mut unknown = 0;
        let mut free: Vec<i64> = free_at
            .into_iter()
            .filter_map(|t| {
                unknown += usize::from(t.is_none());
                t.map(|t| t.max(now))
            })
            .collect();
        free.sort_unstable();
        Self {
            now,
            lead: lead.max(0),
            free: free.into(),
            unknown,
            room,
        }
    }

    /// Whether a plan starting at `start` is still slurmctld's.
    pub fn fresh(&self, start: i64) -> bool {
        start >= self.now - STALE_AFTER_SECONDS
    }

    /// Room the NodeSet has left for jobs with no plan, which are booted for now.
    pub fn reserve(&mut self, nodes: u64) {
        self.room = self.room.saturating_sub(nodes);
    }

    /// What a job needing `nodes` nodes that Slurm plans to start at `start` needs now, and
    /// what it takes of the timeline.
    pub fn when(&mut self, start: i64, nodes: u64) -> When {
        let ready = self.now + self.lead;
        let grown = nodes.min(self.room);
        // Nodes that must come from those that exist: the `from_nodes`-th earliest to free
        // decides when growing could start the job.
        let from_nodes = (nodes - grown) as usize;
        let earliest = match from_nodes {
            0 => Some(ready),
            k => self.free.get(k - 1).map(|&t| t.max(ready)),
        };
        // Growing would need nodes busy for a time not known: whether it beats the plan is
        // not known either, so it is booted for now, as without a plan.
        if earliest.is_none() && start > ready && from_nodes <= self.free.len() + self.unknown {
            let (used, idle) = self.take(ready, nodes);
            let new = (nodes - used).min(self.room);
            self.room -= new;
            return When::Now(idle + new);
        }
        let Some(earliest) = earliest.filter(|&e| start > ready && e < start) else {
            self.take(start, nodes);
            return When::Wait(start);
        };
        let (used, idle) = self.take(earliest, nodes);
        let new = nodes - used;
        self.room -= new;
        if earliest == ready {
            When::Now(nodes - (used - idle))
        } else {
            When::Later {
                at: earliest - self.lead,
                nodes: new,
            }
        }
    }

    /// Takes up to `nodes` of the nodes free by `by`, earliest first: how many, and how many
    /// of them are idle now.
    fn take(&mut self, by: i64, nodes: u64) -> (u64, u64) {
        let (mut used, mut idle) = (0, 0);
        while used < nodes {
            match self.free.front() {
                Some(&t) if t <= by => {
                    self.free.pop_front();
                    used += 1;
                    idle += u64::from(t <= self.now);
                }
                _ => break,
            }
        }
        (used, idle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_000;
    const LEAD: i64 = 100;

    fn at<const N: usize>(times: [i64; N]) -> impl Iterator<Item = Option<i64>> {
        times.into_iter().map(Some)
    }

    #[test]
    fn a_plan_sooner_than_a_boot_is_waited_for() {
        // Two busy nodes free in 60 s; the job needs both; a boot takes 100 s.
        let mut t = Timeline::new(NOW, LEAD, at([NOW + 60, NOW + 60]), 10);
        assert_eq!(t.when(NOW + 60, 2), When::Wait(NOW + 60));
        // It took them: a second job planned after it sees none free and all the room.
        assert_eq!(t.when(NOW + 5_000, 1), When::Now(1));
    }

    #[test]
    fn growing_that_starts_the_job_sooner_than_the_plan_boots_now() {
        // One idle node, one busy for an hour; the job needs two; room for one more.
        let mut t = Timeline::new(NOW, LEAD, at([NOW, NOW + 3_600]), 1);
        // The idle node it takes and the new one: two nodes of demand.
        assert_eq!(t.when(NOW + 3_600, 2), When::Now(2));
        // Nodes freeing up within the lead are not booted for: 3 nodes, 2 of them free in
        // 30 s, so one new node.
        let mut t = Timeline::new(NOW, LEAD, at([NOW + 30, NOW + 30, NOW + 3_600]), 5);
        assert_eq!(t.when(NOW + 3_600, 3), When::Now(1));
    }

    #[test]
    fn without_room_enough_the_boot_waits_for_the_nodes_that_free_up() {
        // Four nodes busy: two free in 10 min, two in an hour. The job needs four; the
        // NodeSet may add two. Slurm plans it in an hour (all four of its nodes); with two
        // new nodes it starts in 10 min: boot them one lead before.
        let busy = [NOW + 600, NOW + 600, NOW + 3_600, NOW + 3_600];
        let mut t = Timeline::new(NOW, LEAD, at(busy), 2);
        assert_eq!(
            t.when(NOW + 3_600, 4),
            When::Later {
                at: NOW + 600 - LEAD,
                nodes: 2
            }
        );
        // No room at all: growing cannot beat the plan.
        let mut t = Timeline::new(NOW, LEAD, at(busy), 0);
        assert_eq!(t.when(NOW + 3_600, 4), When::Wait(NOW + 3_600));
    }

    #[test]
    fn each_job_takes_what_it_uses_in_priority_order() {
        // Two idle nodes and room for one: the first job takes both idle nodes, the second
        // gets the room, the third waits for its plan.
        let mut t = Timeline::new(NOW, LEAD, at([NOW, NOW]), 1);
        assert_eq!(t.when(NOW + 900, 2), When::Now(2));
        assert_eq!(t.when(NOW + 900, 1), When::Now(1));
        assert_eq!(t.when(NOW + 900, 1), When::Wait(NOW + 900));
        // Jobs booted for without a plan take room first.
        let mut t = Timeline::new(NOW, LEAD, None, 3);
        t.reserve(2);
        assert_eq!(t.when(NOW + 900, 2), When::Wait(NOW + 900));
    }

    #[test]
    fn where_growing_needs_nodes_busy_for_a_time_not_known_it_boots_now() {
        // One node idle, one busy without a time limit; the job needs three, room for one.
        let mut t = Timeline::new(NOW, LEAD, [Some(NOW), None], 1);
        assert_eq!(t.when(NOW + 3_600, 3), When::Now(2));
        // Not enough nodes even then: Slurm's plan stands.
        let mut t = Timeline::new(NOW, LEAD, [Some(NOW), None], 0);
        assert_eq!(t.when(NOW + 3_600, 3), When::Wait(NOW + 3_600));
    }

    #[test]
    fn a_plan_long_past_is_not_slurmctlds_any_more() {
        let t = Timeline::new(NOW, LEAD, None, 0);
        assert!(t.fresh(NOW - 30));
        assert!(!t.fresh(NOW - STALE_AFTER_SECONDS - 1));
    }
}
