//! The scaling policy, as a pure function: bounds, Slurm signals, the target's current
//! replicas, the recent history and the time in; a decision out. No I/O, no clock of its
//! own, so it is unit- and property-tested and the demo runs the very same code.
//!
//! desired = clamp(busy + demand, min, max), never below busy; nothing running and nothing
//! waiting for `idleTimeout` (counted from the first decision that saw nothing) →
//! `idleReplicas` (0: scale to zero); up at once (or after the up window), down only once the
//! down window has seen nothing higher; untrusted data → no change at all (Frozen).
//!
//! Every decision also says when, if nothing else changes, it could come out differently
//! (`revisit`: a window or the idle timeout ending). The controller needs no more than that
//! to be woken, which is what lets `slurmscale simulate` replay months of a trace through it
//! without deciding every two seconds of quiet.

use std::collections::VecDeque;
use std::time::{Duration, SystemTime};

use slurmscale_exporter::model::PendingClass;
use slurmscale_exporter::signals::desired_nodes;

use crate::plan::{Bounds, Plan, Reason, Signals, frozen};

/// What the policy remembers between decisions: recent recommendations and since when there
/// has been no work. Kept in memory; after a restart or a change of leader the history starts
/// empty, and no scale-down happens until a full window has been observed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct History {
    recommendations: VecDeque<(SystemTime, u64)>,
    /// The first decision that saw nothing running or waiting, since the last that saw work.
    idle_since: Option<SystemTime>,
    since: Option<SystemTime>,
}

impl History {
    /// Remembers a plan's recommendation; drops what no window can need any more.
    pub fn record(&mut self, d: &Plan, now: SystemTime, keep: Duration) {
        self.since.get_or_insert(now);
        if d.frozen {
            return;
        }
        self.recommendations.push_back((now, d.recommendation));
        if d.active {
            self.idle_since = None;
        } else {
            self.idle_since.get_or_insert(now);
        }
        while self
            .recommendations
            .front()
            .is_some_and(|(t, _)| now.duration_since(*t).unwrap_or_default() > keep)
        {
            self.recommendations.pop_front();
        }
    }

    fn within(&self, now: SystemTime, window: Duration) -> impl Iterator<Item = u64> + '_ {
        self.recommendations
            .iter()
            .filter(move |(t, _)| now.duration_since(*t).unwrap_or_default() <= window)
            .map(|(_, r)| *r)
    }

    /// True once observations span at least `window`.
    fn covers(&self, now: SystemTime, window: Duration) -> bool {
        self.since
            .is_some_and(|s| now.duration_since(s).unwrap_or_default() >= window)
    }

    /// When the last recommendation within `window` that `keep` selects leaves it.
    fn leaves(
        &self,
        now: SystemTime,
        window: Duration,
        keep: impl Fn(u64) -> bool,
    ) -> Option<SystemTime> {
        self.recommendations
            .iter()
            .rev()
            .take_while(|(t, _)| now.duration_since(*t).unwrap_or_default() <= window)
            .find(|(_, r)| keep(*r))
            .map(|(t, _)| *t + window + JUST_AFTER)
    }
}

/// A record stays in a window while its age is at most the window: it is gone this much later.
const JUST_AFTER: Duration = Duration::from_millis(1);

/// Decides. Pure: the same inputs always give the same plan. Only replicas move: the plan's
/// node lists stay empty.
pub fn decide(
    bounds: &Bounds,
    signals: &Signals,
    current: u64,
    history: &History,
    now: SystemTime,
) -> Plan {
    let s = match signals {
        Err(why) => return frozen(current, why),
        Ok(s) => s,
    };
    let (busy, demand) = (s.busy_nodes, s.demand.nodes);
    let wanted = busy.saturating_add(demand);
    // Jobs the list may lack could be waiting: never idle on such a list; nor while jobs
    // Slurm has planned wait for their start.
    let waiting = s.demand.planned_jobs + s.demand.deferred_jobs > 0;
    let active = wanted > 0 || s.demand.open_ended || waiting;
    // With nothing to do the recommendation is the idle size; the idle timeout (and the
    // down window) decide when it is acted on.
    let recommend = |need: u64| {
        if active {
            desired_nodes(busy, need.saturating_sub(busy), bounds.min, bounds.max)
        } else {
            bounds.idle
        }
    };
    // A job list kept incrementally may be behind slurmctld: grow only to what is certainly
    // needed, shrink only to what may be needed — never while new jobs may be missing.
    let grow_to = recommend(s.certain_need());
    let shrink_to = match s.possible_need() {
        Some(need) => recommend(need),
        None => current.max(grow_to),
    };
    let recommendation = if current < grow_to {
        grow_to
    } else if current > shrink_to {
        shrink_to
    } else {
        current
    };
    let mut p = Plan {
        replicas: current,
        recommendation,
        limited: wanted > bounds.max,
        active,
        unsatisfiable_jobs: s.demand.unsatisfiable_jobs,
        no_nodeset_jobs: s.demand.no_nodeset_jobs,
        ..Plan::default()
    };
    let mut why = format!(
        "{busy} busy + {demand} pending → {recommendation} (min {}, max {})",
        bounds.min, bounds.max
    );
    if s.demand.jobs(PendingClass::Schedulable) > 0 {
        why = format!("{why}: {}", s.demand.explain());
    } else if s.demand.elsewhere_jobs > 0 {
        why = format!(
            "{why}; {} more grow other NodeSets of its partitions",
            s.demand.elsewhere_jobs
        );
    }
    if grow_to != shrink_to && active {
        why = format!(
            "{why} (the job list is catching up with Slurm: between {} and {}{} pending nodes)",
            s.demand.floor_nodes(),
            demand,
            if s.demand.open_ended { "+" } else { "" }
        );
    } else if s.demand.open_ended {
        why = format!(
            "{why} (the job list may lack jobs not read yet: up on what is listed, never down)"
        );
    }
    let message = if recommendation > current {
        up(&mut p, bounds, history, current, now, &why)
    } else if recommendation < current {
        down(&mut p, bounds, history, (current, busy), now, &why)
    } else {
        format!("steady at {current}: {why}")
    };
    // Jobs booted for later: the plan changes when their boot is due.
    if let Some(at) = s.demand.next_boot {
        let at = crate::plan::unix_time(at);
        p.revisit = Some(p.revisit.map_or(at, |r| r.min(at)));
    }
    p.steps = vec![message];
    p
}

/// Up: the lowest recommendation of the up window (just this one with a 0 s window), at
/// most a step at a time. Returns the message.
fn up(
    p: &mut Plan,
    bounds: &Bounds,
    history: &History,
    current: u64,
    now: SystemTime,
    why: &str,
) -> String {
    let floor = history
        .within(now, bounds.up_window)
        .chain([p.recommendation])
        .min()
        .unwrap_or(p.recommendation);
    let target = floor.max(current);
    let target = bounds
        .up_step
        .map_or(target, |step| target.min(current.saturating_add(step)));
    if target > current {
        p.replicas = target;
        p.reason = Reason::ScaleUp;
        format!("scaling up {current} → {target}: {why}")
    } else {
        p.reason = Reason::Stabilizing;
        p.revisit = history.leaves(now, bounds.up_window, |r| r <= current);
        format!("holding {current} for the scale-up window: {why}")
    }
}

/// Down: only after the idle timeout when idle, only once a whole down window has been
/// observed, to the highest recommendation of that window, a step at a time and never below
/// busy nodes. Returns the message.
fn down(
    p: &mut Plan,
    bounds: &Bounds,
    history: &History,
    (current, busy): (u64, u64),
    now: SystemTime,
    why: &str,
) -> String {
    let idle_since = history.idle_since.unwrap_or(now);
    let idle_for = now.duration_since(idle_since).unwrap_or_default();
    let going_idle = !p.active && idle_for >= bounds.idle_timeout;
    p.reason = Reason::Stabilizing;
    if !p.active && !going_idle {
        p.revisit = Some(idle_since + bounds.idle_timeout);
        return format!(
            "holding {current}: idle for {}s of {}s before going to {}",
            idle_for.as_secs(),
            bounds.idle_timeout.as_secs(),
            bounds.idle
        );
    }
    if !history.covers(now, bounds.down_window) {
        p.revisit = history.since.map(|s| s + bounds.down_window);
        return format!("holding {current} until a full scale-down window is observed: {why}");
    }
    let ceiling = history
        .within(now, bounds.down_window)
        .chain([p.recommendation])
        .max()
        .unwrap_or(p.recommendation);
    let target = ceiling
        .max(current.saturating_sub(bounds.down_step))
        .max(busy)
        .min(current);
    if target >= current {
        // Busy nodes never go away with time; a higher recommendation does.
        if busy < current {
            p.revisit = history.leaves(now, bounds.down_window, |r| r >= current);
        }
        return format!("holding {current} for the scale-down window: {why}");
    }
    p.replicas = target;
    if going_idle && target == bounds.idle {
        p.reason = Reason::Idle;
        format!("idle for {}s: {current} → {target}", idle_for.as_secs())
    } else {
        p.reason = Reason::ScaleDown;
        format!("scaling down {current} → {target}: {why}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use slurmscale_exporter::model::demand::Demand;
    use slurmscale_exporter::signals::{PartitionSignals, Untrusted};

    fn signals(busy: u64, demand: u64) -> Signals {
        Ok(PartitionSignals {
            busy_nodes: busy,
            total_nodes: 100,
            demand: Demand {
                nodes: demand,
                ..Default::default()
            },
            shape: Default::default(),
            shape_source: "unknown",
            as_of: SystemTime::UNIX_EPOCH,
        })
    }

    fn bounds(min: u64, max: u64) -> Bounds {
        Bounds {
            min,
            max,
            idle_timeout: Duration::from_secs(60),
            down_window: Duration::from_secs(30),
            ..Default::default()
        }
    }

    fn at(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + s)
    }

    /// Runs decisions every second, applying each, from `current`; returns replicas per step.
    fn run(b: &Bounds, mut current: u64, steps: &[(u64, u64)]) -> Vec<u64> {
        let mut h = History::default();
        let mut out = Vec::new();
        for (i, (busy, demand)) in steps.iter().enumerate() {
            let now = at(i as u64);
            let d = decide(b, &signals(*busy, *demand), current, &h, now);
            h.record(&d, now, Duration::from_secs(3600));
            current = d.replicas;
            out.push(current);
        }
        out
    }

    #[test]
    fn wakes_from_zero_on_the_first_job_and_a_3_node_job_needs_3() {
        assert_eq!(run(&bounds(0, 8), 0, &[(0, 0), (0, 3)]), [0, 3]);
    }

    /// Signals from a job list that is catching up: `maybe` of the demand's nodes may belong
    /// to jobs that started, and new jobs may be missing (`open`).
    fn uncertain(busy: u64, demand: u64, maybe: u64, open: bool) -> Signals {
        let mut s = signals(busy, demand).unwrap();
        s.demand.maybe_started_nodes = maybe;
        s.demand.open_ended = open;
        Ok(s)
    }

    #[test]
    fn an_uncertain_job_list_grows_to_what_is_certain_and_shrinks_to_what_is_possible() {
        let b = bounds(0, 10);
        let h = History::default();
        // 5 pending nodes, 3 of them perhaps started already (their nodes busy): up to 2.
        let d = decide(&b, &uncertain(0, 5, 3, false), 0, &h, at(0));
        assert_eq!(d.replicas, 2, "{:?}", d.steps);
        assert!(d.steps[0].contains("catching up"), "{:?}", d.steps);
        // Between 2 and 5 already: hold.
        let d = decide(&b, &uncertain(0, 5, 3, false), 4, &h, at(0));
        assert_eq!((d.replicas, d.recommendation), (4, 4));
        // Above what may be wanted: down, after the window, as ever.
        let mut h = History::default();
        let mut current = 8;
        for s in 0..40 {
            let d = decide(&b, &uncertain(0, 5, 3, false), current, &h, at(s));
            h.record(&d, at(s), Duration::from_secs(3600));
            current = d.replicas;
        }
        assert_eq!(current, 5);
        // New jobs may be missing: never down, never idle.
        let mut h = History::default();
        let mut current = 4;
        for s in 0..200 {
            let d = decide(&b, &uncertain(0, 0, 0, true), current, &h, at(s));
            h.record(&d, at(s), Duration::from_secs(3600));
            current = d.replicas;
        }
        assert_eq!(current, 4, "scaled down while new jobs may be missing");
        // Scaling up on a list still being read says so.
        let d = decide(&b, &uncertain(0, 6, 0, true), 4, &h, at(200));
        assert_eq!(d.recommendation, 6);
        assert!(d.steps[0].contains("never down"), "{:?}", d.steps);
    }

    #[test]
    fn goes_idle_only_after_the_idle_timeout() {
        let mut steps = vec![(2, 0)];
        steps.extend(std::iter::repeat_n((0, 0), 70));
        let r = run(&bounds(1, 8), 2, &steps);
        assert_eq!(r[30], 2, "held while idle, within the timeout");
        assert_eq!(r[59], 2, "held until the timeout has passed");
        assert_eq!(
            *r.last().unwrap(),
            0,
            "idle replicas after the timeout, even below min"
        );
    }

    /// The timeout counts from the first decision that saw nothing, not from the last that
    /// saw work: polled every 10 s, work seen last at 0 s and gone at 10 s, a 60 s timeout
    /// ends at 70 s.
    #[test]
    fn the_idle_timeout_counts_from_the_first_idle_observation() {
        let b = Bounds {
            down_window: Duration::ZERO,
            ..bounds(0, 8)
        };
        let mut h = History::default();
        let mut current = 2;
        let mut went_idle_at = None;
        for i in 0..12u64 {
            let now = at(i * 10);
            let s = if i == 0 { signals(2, 0) } else { signals(0, 0) };
            let d = decide(&b, &s, current, &h, now);
            h.record(&d, now, Duration::from_secs(3600));
            if d.replicas == 0 && went_idle_at.is_none() {
                went_idle_at = Some(i * 10);
            }
            current = d.replicas;
        }
        assert_eq!(went_idle_at, Some(70));
    }

    #[test]
    fn never_scales_below_busy_nodes() {
        let steps: Vec<_> = std::iter::repeat_n((3, 0), 120).collect();
        assert!(run(&bounds(0, 8), 6, &steps).iter().all(|r| *r >= 3));
    }

    #[test]
    fn frozen_on_untrusted_data() {
        let d = decide(
            &bounds(0, 8),
            &Err(Untrusted::Stale(
                slurmscale_exporter::slurm::Endpoint::Jobs,
                Duration::from_secs(99),
            )),
            5,
            &History::default(),
            at(0),
        );
        assert_eq!((d.replicas, d.reason, d.frozen), (5, Reason::Frozen, true));
    }

    #[test]
    fn demand_beyond_max_is_limited() {
        let d = decide(
            &bounds(0, 8),
            &signals(2, 20),
            2,
            &History::default(),
            at(0),
        );
        assert_eq!((d.replicas, d.limited), (8, true));
    }

    fn any_bounds() -> impl Strategy<Value = Bounds> {
        (
            0u64..5,
            1u64..20,
            0u64..3,
            0u64..40,
            0u64..40,
            1u64..6,
            prop::option::of(1u64..6),
        )
            .prop_map(
                |(min, extra, idle, idle_timeout, window, down_step, up_step)| Bounds {
                    min,
                    max: min + extra,
                    idle,
                    idle_timeout: Duration::from_secs(idle_timeout),
                    up_step,
                    up_window: Duration::ZERO,
                    down_step,
                    down_window: Duration::from_secs(window),
                },
            )
    }

    proptest! {
        #[test]
        fn never_above_max_never_below_busy(
            b in any_bounds(),
            start in 0u64..25,
            steps in prop::collection::vec((0u64..25, 0u64..25), 1..60),
        ) {
            let mut h = History::default();
            let mut current = start;
            for (i, (busy, demand)) in steps.iter().enumerate() {
                let now = at(i as u64);
                let d = decide(&b, &signals(*busy, *demand), current, &h, now);
                if current >= *busy {
                    prop_assert!(d.replicas >= *busy, "below busy {busy}: {d:?}");
                }
                if current <= b.max && *busy <= b.max {
                    prop_assert!(d.replicas <= b.max, "above max {}: {d:?}", b.max);
                }
                if d.replicas < current {
                    prop_assert!(d.replicas >= *busy, "scaled below busy: {d:?}");
                }
                h.record(&d, now, Duration::from_secs(3600));
                current = d.replicas;
            }
        }

        #[test]
        fn monotone_in_demand(b in any_bounds(), busy in 0u64..10, current in 0u64..20, d1 in 0u64..20, extra in 0u64..20) {
            let h = History::default();
            let low = decide(&b, &signals(busy, d1), current, &h, at(0));
            let high = decide(&b, &signals(busy, d1 + extra), current, &h, at(0));
            prop_assert!(high.replicas >= low.replicas, "{low:?} vs {high:?}");
        }

        #[test]
        fn no_scale_down_inside_the_window_after_a_scale_up(
            b in any_bounds(),
            steps in prop::collection::vec((0u64..6, 0u64..12), 1..80),
        ) {
            let mut h = History::default();
            let mut current = 0;
            let mut last_up: Option<(u64, u64)> = None; // (time, replicas)
            for (i, (busy, demand)) in steps.iter().enumerate() {
                let t = i as u64;
                let d = decide(&b, &signals(*busy, *demand), current, &h, at(t));
                if d.replicas > current {
                    last_up = Some((t, d.replicas));
                }
                if let Some((up_at, up_to)) = last_up
                    && d.replicas < current && t < up_at + b.down_window.as_secs() {
                        prop_assert!(d.replicas >= up_to, "flapped down at {t} after scaling up to {up_to} at {up_at}: {d:?}");
                    }
                h.record(&d, at(t), Duration::from_secs(3600));
                current = d.replicas;
            }
        }

        /// Between a decision and its `revisit`, deciding again every second on the same
        /// inputs changes nothing; without a `revisit`, nothing for ten minutes.
        #[test]
        fn nothing_changes_before_the_revisit_time(
            b in any_bounds(),
            steps in prop::collection::vec((0u64..6, 0u64..12, 1u64..40), 1..40),
            quiet in (0u64..6, 0u64..12),
        ) {
            let mut h = History::default();
            let mut current = 0;
            let mut t = 0;
            for (busy, demand, gap) in steps {
                let d = decide(&b, &signals(busy, demand), current, &h, at(t));
                h.record(&d, at(t), Duration::from_secs(3600));
                current = d.replicas;
                t += gap;
            }
            // Decide once on the quiet inputs; if that changes replicas, apply it first.
            let s = signals(quiet.0, quiet.1);
            let mut d = decide(&b, &s, current, &h, at(t));
            h.record(&d, at(t), Duration::from_secs(3600));
            if d.replicas != current {
                current = d.replicas;
                t += 1;
                d = decide(&b, &s, current, &h, at(t));
                h.record(&d, at(t), Duration::from_secs(3600));
                prop_assume!(d.replicas == current);
            }
            let until = d.revisit.unwrap_or(at(t + 600));
            let mut i = t + 1;
            while at(i) < until {
                let e = decide(&b, &s, current, &h, at(i));
                prop_assert_eq!(e.replicas, current, "changed at {} before revisit {:?}: {:?}", i, d.revisit, e);
                h.record(&e, at(i), Duration::from_secs(3600));
                i += 1;
            }
        }

        #[test]
        fn untrusted_data_never_changes_replicas(b in any_bounds(), current in 0u64..30) {
            let d = decide(&b, &Err(Untrusted::NoData(slurmscale_exporter::slurm::Endpoint::Nodes)), current, &History::default(), at(0));
            prop_assert_eq!(d.replicas, current);
        }
    }
}
