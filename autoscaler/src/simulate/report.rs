//! What a replay shows: one row per policy (a table for people, JSON for scripts), and a
//! timeline as CSV and as an SVG plot of provisioned against busy nodes, one panel per
//! policy on one time axis, so the idle capacity each leaves is visible at a glance.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::{Run, Stats};

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
    /// Of `idle_node_hours`, those while jobs waited (table only).
    #[serde(skip)]
    pub idle_waiting_node_hours: f64,
    /// Records of the trace that are not among `jobs`, by reason (never ran, unknown
    /// submit time, another partition, too big, malformed and passed over): the same for
    /// every policy, so a script sees what the figures leave out.
    pub not_replayed: BTreeMap<String, u64>,
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
            utilization: if s.node_seconds > 0.0 {
                s.cpu_seconds / (s.node_seconds * f64::from(node_cpus))
            } else {
                0.0
            },
        }
    }
}

pub fn rows(runs: &[Run], node_cpus: u32) -> Vec<Row> {
    runs.iter()
        .map(|r| Row::new(r.policy.as_str(), &r.stats, node_cpus))
        .collect()
}

/// Seconds as people read them: `45s`, `12m`, `3.4h`.
fn human(secs: f64) -> String {
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
        "{:<13} {:>7} {:>11} {:>11} {:>11} {:>11} {:>6} {:>7} {:>7} {:>7} {:>7} {:>9} {:>6} {:>6}",
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
            "{:<13} {:>7} {:>11.1} {:>11.1} {:>11.1} {:>11.1} {:>5.0}% {:>7} {:>7} {:>7} {:>7} {:>9.2} {:>6} {:>6}",
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
    const W: f64 = 960.0;
    const PANEL: f64 = 150.0;
    const LEFT: f64 = 60.0;
    const RIGHT: f64 = 20.0;
    const TOP: f64 = 40.0;
    let t0 = runs
        .iter()
        .filter_map(|r| r.timeline.first())
        .map(|p| p.time)
        .min()
        .unwrap_or(0);
    let t1 = runs
        .iter()
        .filter_map(|r| r.timeline.last())
        .map(|p| p.time)
        .max()
        .unwrap_or(t0 + 1)
        .max(t0 + 1);
    let ymax = runs
        .iter()
        .flat_map(|r| r.timeline.iter())
        .map(|p| p.provisioned.max(p.busy))
        .fold(1.0_f64, f64::max)
        .ceil();
    let height = TOP + runs.len() as f64 * (PANEL + 30.0) + 30.0;
    let x = |t: i64| LEFT + (t - t0) as f64 / (t1 - t0) as f64 * (W - LEFT - RIGHT);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" viewBox="0 0 {W} {height}" font-family="sans-serif" font-size="12">"##
    );
    let _ = writeln!(s, r##"<rect width="100%" height="100%" fill="white"/>"##);
    let _ = writeln!(
        s,
        r##"<text x="{LEFT}" y="22" font-size="15" font-weight="bold">{}</text>"##,
        escape(title)
    );
    for (k, r) in runs.iter().enumerate() {
        let top = TOP + k as f64 * (PANEL + 30.0) + 18.0;
        let y = |v: f64| top + PANEL - v / ymax * PANEL;
        let row = rows.iter().find(|w| w.policy == r.policy.as_str());
        let label = match row {
            Some(w) => format!(
                "{}: {:.0} node-hours ({:.0} idle), p95 wait {}",
                w.policy,
                w.node_hours,
                w.idle_node_hours,
                human(w.wait_p95_s)
            ),
            None => r.policy.as_str().to_string(),
        };
        let _ = writeln!(
            s,
            r##"<text x="{LEFT}" y="{:.1}">{}</text>"##,
            top - 5.0,
            escape(&label)
        );
        let _ = writeln!(
            s,
            r##"<rect x="{LEFT}" y="{top:.1}" width="{:.1}" height="{PANEL}" fill="none" stroke="#999"/>"##,
            W - LEFT - RIGHT
        );
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="end">{ymax:.0}</text><text x="{:.1}" y="{:.1}" text-anchor="end">0</text>"##,
            LEFT - 4.0,
            top + 10.0,
            LEFT - 4.0,
            top + PANEL
        );
        if r.timeline.is_empty() {
            continue;
        }
        // Provisioned: a filled step area. Busy: a step line. A step is drawn only where
        // the value changes (at the plot's resolution), which keeps the file small.
        let steps = |value: fn(&super::Point) -> f64| {
            let mut d = String::new();
            let mut last: Option<String> = None;
            for p in &r.timeline {
                let yv = format!("{:.1}", y(value(p)));
                if last.as_deref() != Some(yv.as_str()) {
                    if let Some(prev) = &last {
                        let _ = write!(d, " L{:.1},{prev}", x(p.time));
                    }
                    let _ = write!(d, " L{:.1},{yv}", x(p.time));
                    last = Some(yv);
                }
            }
            if let Some(prev) = last {
                let _ = write!(d, " L{:.1},{prev}", x(t1));
            }
            d
        };
        let area = format!(
            "M{:.1},{:.1}{} L{:.1},{:.1} Z",
            x(r.timeline[0].time),
            y(0.0),
            steps(|p| p.provisioned),
            x(t1),
            y(0.0)
        );
        let line = format!(
            "M{}",
            steps(|p| p.busy).trim_start().trim_start_matches('L')
        );
        let _ = writeln!(
            s,
            r##"<path d="{area}" fill="#9ecae1" stroke="#3182bd" stroke-width="0.5"/>"##
        );
        let _ = writeln!(
            s,
            r##"<path d="{line}" fill="none" stroke="#e6550d" stroke-width="1"/>"##
        );
    }
    let bottom = height - 12.0;
    let days = (t1 - t0) as f64 / 86400.0;
    let _ = writeln!(
        s,
        r##"<text x="{LEFT}" y="{bottom}">blue: nodes provisioned · orange: nodes busy · {days:.1} days from {}</text>"##,
        chrono::DateTime::from_timestamp(t0, 0).map_or(String::new(), |d| d
            .format("%Y-%m-%d %H:%M UTC")
            .to_string())
    );
    s.push_str("</svg>\n");
    s
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
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
