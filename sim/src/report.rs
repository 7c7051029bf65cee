//! What a replay shows: one row per policy (a table for people, JSON for scripts), and a
//! timeline as CSV and as an SVG plot of provisioned against busy nodes, one panel per
//! policy on one time axis, so the idle capacity each leaves is visible at a glance.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::{Policy, Run, Stats, svg};

/// One row, with the keys scripts and our acceptance checks read: keep them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub policy: &'static str,
    pub jobs: usize,
    pub node_hours: f64,
    pub busy_node_hours: f64,
    pub idle_node_hours: f64,
    pub wait_p50_s: f64,
    pub wait_p95_s: f64,
    pub wait_p99_s: f64,
    pub wait_max_s: f64,
    pub bounded_slowdown_mean: f64,
    pub scale_ups: u64,
    pub scale_downs: u64,
    /// Job CPU-seconds over provisioned CPU-seconds (table only).
    #[serde(skip)]
    pub utilization: f64,
    /// Of `idle_node_hours`, those while jobs waited.
    pub idle_waiting_node_hours: f64,
    /// Records of the trace that are not among `jobs`, by reason (never ran, unknown
    /// submit time, another partition, too big, malformed and passed over): the same for
    /// every policy, so a script sees what the figures leave out.
    pub not_replayed: BTreeMap<String, u64>,
    /// `builtin-just-in-time` beside `builtin` in one replay: the jobs it started later
    /// than booting at submit did, and how much later (what booting just in time costs
    /// where a plan moves earlier than the boot, or a wide job waits longer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub later_than_builtin: Option<Later>,
    /// Following slurmctld's power requests: the jobs that waited for a node to boot after
    /// slurmctld started them (late boots), and the records powered up ahead of a plan.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub boot_waits: Option<BootWaits>,
}

/// Jobs that waited in CONFIGURING for powered-down nodes to boot, and how long.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct BootWaits {
    pub jobs: u64,
    pub p50_s: f64,
    pub p95_s: f64,
    pub max_s: f64,
    /// Records powered up one boot ahead of the start slurmctld planned on them.
    pub early_power_ups: u64,
}

/// Jobs one run started later than another, and by how much.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Later {
    pub jobs: u64,
    pub p95_s: f64,
    pub max_s: f64,
}

impl Later {
    /// Of the jobs both started, those `run` started after `base` did.
    pub fn of(run: &Stats, base: &Stats) -> Self {
        let mut late: Vec<i64> = run
            .starts
            .iter()
            .zip(&base.starts)
            .filter_map(|(r, b)| Some(r.as_ref()? - b.as_ref()?).filter(|d| *d > 0))
            .collect();
        late.sort_unstable();
        Self {
            jobs: late.len() as u64,
            p95_s: quantile(&late, 0.95),
            max_s: late.last().copied().unwrap_or(0) as f64,
        }
    }
}

/// The `q` quantile of sorted values (nearest rank).
pub fn quantile(sorted: &[i64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1] as f64
}

impl Row {
    pub fn new(policy: &'static str, s: &Stats, node_cpus: u32) -> Self {
        let hours = |secs: f64| secs / 3600.0;
        Self {
            policy,
            jobs: s.jobs,
            node_hours: hours(s.node_seconds),
            busy_node_hours: hours(s.busy_node_seconds),
            idle_node_hours: hours(s.node_seconds - s.busy_node_seconds),
            idle_waiting_node_hours: hours(s.idle_waiting_node_seconds),
            wait_p50_s: quantile(&s.waits, 0.50),
            wait_p95_s: quantile(&s.waits, 0.95),
            wait_p99_s: quantile(&s.waits, 0.99),
            wait_max_s: s.waits.last().copied().unwrap_or(0) as f64,
            bounded_slowdown_mean: s.bounded_slowdown_mean,
            scale_ups: s.scale_ups,
            scale_downs: s.scale_downs,
            not_replayed: BTreeMap::new(),
            later_than_builtin: None,
            boot_waits: None,
            utilization: if s.node_seconds > 0.0 {
                s.cpu_seconds / (s.node_seconds * f64::from(node_cpus))
            } else {
                0.0
            },
        }
    }
}

pub fn rows(runs: &[Run], node_cpus: u32) -> Vec<Row> {
    let at_submit = runs.iter().find(|r| r.policy == Policy::Builtin);
    runs.iter()
        .map(|r| Row {
            later_than_builtin: at_submit
                .filter(|_| r.policy == Policy::BuiltinJustInTime)
                .map(|base| Later::of(&r.stats, &base.stats)),
            boot_waits: r.policy.follows_slurmctld().then(|| BootWaits {
                jobs: r.stats.boot_waits.len() as u64,
                p50_s: quantile(&r.stats.boot_waits, 0.50),
                p95_s: quantile(&r.stats.boot_waits, 0.95),
                max_s: r.stats.boot_waits.last().copied().unwrap_or(0) as f64,
                early_power_ups: r.stats.early_power_ups,
            }),
            ..Row::new(r.policy.as_str(), &r.stats, node_cpus)
        })
        .collect()
}

/// Seconds as people read them: `45s`, `12m`, `3.4h`.
pub fn human(secs: f64) -> String {
    match secs {
        s if s < 120.0 => format!("{s:.0}s"),
        s if s < 7200.0 => format!("{:.0}m", s / 60.0),
        s => format!("{:.1}h", s / 3600.0),
    }
}

/// The table: one row per policy, and how each compares with the first row's node-hours.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<20} {:>7} {:>11} {:>11} {:>11} {:>11} {:>6} {:>7} {:>7} {:>7} {:>7} {:>9} {:>6} {:>6}",
        "policy",
        "jobs",
        "node-hours",
        "busy",
        "idle",
        "idle-wait",
        "util",
        "wait50",
        "wait95",
        "wait99",
        "waitmax",
        "slowdown",
        "ups",
        "downs"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<20} {:>7} {:>11.1} {:>11.1} {:>11.1} {:>11.1} {:>5.0}% {:>7} {:>7} {:>7} {:>7} {:>9.2} {:>6} {:>6}",
            r.policy,
            r.jobs,
            r.node_hours,
            r.busy_node_hours,
            r.idle_node_hours,
            r.idle_waiting_node_hours,
            r.utilization * 100.0,
            human(r.wait_p50_s),
            human(r.wait_p95_s),
            human(r.wait_p99_s),
            human(r.wait_max_s),
            r.bounded_slowdown_mean,
            r.scale_ups,
            r.scale_downs,
        );
    }
    for r in rows {
        if let Some(b) = r.boot_waits {
            let _ = writeln!(
                out,
                "{}: {} jobs waited for a node to boot after slurmctld started them (p50 {}, p95 {}, max {}); {} records powered up ahead of a planned start",
                r.policy,
                b.jobs,
                human(b.p50_s),
                human(b.p95_s),
                human(b.max_s),
                b.early_power_ups
            );
        }
        if let Some(l) = r.later_than_builtin {
            let _ = writeln!(
                out,
                "{}: {} jobs started later than under builtin (p95 {} later, max {})",
                r.policy,
                l.jobs,
                human(l.p95_s),
                human(l.max_s)
            );
        }
    }
    out
}

/// The timeline as CSV: time (unix seconds), policy, pending jobs, demand nodes, desired,
/// provisioned and busy (averages over the bucket starting at `time`).
pub fn csv(runs: &[Run]) -> String {
    let mut out = String::from("time,policy,pending_jobs,demand_nodes,desired,provisioned,busy\n");
    for r in runs {
        for p in &r.timeline {
            let _ = writeln!(
                out,
                "{},{},{},{},{},{:.3},{:.3}",
                p.time,
                r.policy.as_str(),
                p.pending_jobs,
                p.demand_nodes,
                p.desired,
                p.provisioned,
                p.busy
            );
        }
    }
    out
}

/// An SVG: one panel per policy, provisioned nodes filled, busy nodes as a line, the same
/// axes throughout; each panel's title carries its node-hours and p95 wait.
pub fn svg(title: &str, runs: &[Run], rows: &[Row]) -> String {
    const PANEL: f64 = 150.0;
    let (t0, t1) = svg::span(
        runs.iter()
            .filter_map(|r| Some((r.timeline.first()?.time, r.timeline.last()?.time))),
    );
    let ymax = runs
        .iter()
        .flat_map(|r| r.timeline.iter())
        .map(|p| p.provisioned.max(p.busy))
        .fold(1.0_f64, f64::max)
        .ceil();
    let height = svg::TOP + runs.len() as f64 * (PANEL + 30.0) + 30.0;
    let mut page = svg::Page::new(title, (t0, t1), height);
    for (k, r) in runs.iter().enumerate() {
        let top = svg::TOP + k as f64 * (PANEL + 30.0) + 18.0;
        let y = |v: f64| top + PANEL - v / ymax * PANEL;
        let label = match rows.iter().find(|w| w.policy == r.policy.as_str()) {
            Some(w) => format!(
                "{}: {:.0} node-hours ({:.0} idle), p95 wait {}",
                w.policy,
                w.node_hours,
                w.idle_node_hours,
                human(w.wait_p95_s)
            ),
            None => r.policy.as_str().to_string(),
        };
        page.panel(&label, top, PANEL, ymax);
        let Some(first) = r.timeline.first() else {
            continue;
        };
        // Provisioned: a filled step area. Busy: a step line.
        let steps = |value: fn(&super::Point) -> f64| {
            page.steps(r.timeline.iter().map(|p| (p.time, y(value(p)))))
        };
        let area = page.area(first.time, y(0.0), &steps(|p| p.provisioned));
        let line = svg::Page::line(&steps(|p| p.busy));
        page.path(
            &area,
            r##"fill="#9ecae1" stroke="#3182bd" stroke-width="0.5""##,
        );
        page.path(&line, r##"fill="none" stroke="#e6550d" stroke-width="1""##);
    }
    let days = (t1 - t0) as f64 / 86400.0;
    let from = chrono::DateTime::from_timestamp(t0, 0).map_or(String::new(), |d| {
        d.format("%Y-%m-%d %H:%M UTC").to_string()
    });
    page.finish(&format!(
        "blue: nodes provisioned · orange: nodes busy · {days:.1} days from {from}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_rank() {
        let v: Vec<i64> = (1..=100).collect();
        assert_eq!(quantile(&v, 0.5), 50.0);
        assert_eq!(quantile(&v, 0.95), 95.0);
        assert_eq!(quantile(&v, 0.99), 99.0);
        assert_eq!(quantile(&[7], 0.99), 7.0);
        assert_eq!(quantile(&[], 0.5), 0.0);
    }

    #[test]
    fn json_rows_have_exactly_the_documented_keys() {
        let row = Row::new("builtin", &Stats::default(), 16);
        let v = serde_json::to_value(&row).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        let mut want = vec![
            "policy",
            "jobs",
            "node_hours",
            "busy_node_hours",
            "idle_node_hours",
            "idle_waiting_node_hours",
            "wait_p50_s",
            "wait_p95_s",
            "wait_p99_s",
            "wait_max_s",
            "bounded_slowdown_mean",
            "scale_ups",
            "scale_downs",
            "not_replayed",
        ];
        want.sort();
        let mut keys = keys;
        keys.sort();
        assert_eq!(keys, want);
    }
}
