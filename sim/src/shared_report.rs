//! What a shared-pool replay shows: one row per way of sharing (a table for people, JSON for
//! scripts), and a timeline as CSV and as an SVG with one panel per way of sharing — the
//! nodes each side held, the idle ones, and the work waiting on each side.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::report::quantile;
use super::shared::{SharedPoint, SharedRun};
use super::svg;

/// One row, with the keys scripts and our acceptance checks read: keep them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SharedRow {
    pub policy: String,
    pub jobs: usize,
    pub pods: usize,
    pub stranded_node_hours: f64,
    pub slurm_node_hours: f64,
    pub kubernetes_node_hours: f64,
    pub idle_node_hours: f64,
    pub slurm_wait_p50_s: f64,
    pub slurm_wait_p95_s: f64,
    pub slurm_wait_p99_s: f64,
    pub slurm_wait_max_s: f64,
    pub slurm_bounded_slowdown_mean: f64,
    /// Jobs and pods together, each weighted by the node-hours it runs.
    pub combined_bounded_slowdown_mean: f64,
    pub pod_wait_p50_s: f64,
    pub pod_wait_p95_s: f64,
    pub pod_wait_p99_s: f64,
    pub pod_wait_max_s: f64,
    pub drains: u64,
    pub handovers_to_kubernetes: u64,
    pub handovers_to_slurm: u64,
    pub evictions: u64,
    pub pod_hours_lost: f64,
    /// Idle node-hours Slurm kept for a planned start while pods waited: what lending
    /// those nodes to pods could at most have used.
    pub lendable_node_hours: f64,
    pub jobs_killed: u64,
    pub jobs_requeued: u64,
    /// Node-hours of the runs requeued jobs lost.
    pub job_hours_lost: f64,
    /// Jobs and pods never placed when the replay stopped.
    pub starved_jobs: usize,
    pub starved_pods: usize,
    /// `(static-best − this) ÷ (static-best − oracle)` in stranded node-hours; `None` where
    /// either is missing from the run.
    pub gap_closed: Option<f64>,
    /// Records of either log left out, by reason.
    pub not_replayed: BTreeMap<String, u64>,
    /// How kube-scheduler placed pods (`least-allocated` or `most-allocated`); `None` for
    /// the oracle, which schedules both sides itself.
    pub kube_scoring: Option<&'static str>,
}

impl SharedRow {
    pub fn new(name: String, run: &SharedRun) -> Self {
        let s = &run.stats;
        let hours = |secs: f64| secs / 3600.0;
        let q = |v: &[i64], p| quantile(v, p);
        Self {
            policy: name,
            jobs: s.jobs,
            pods: s.pods,
            stranded_node_hours: hours(s.stranded_node_seconds),
            slurm_node_hours: hours(s.slurm_node_seconds),
            kubernetes_node_hours: hours(s.kube_node_seconds),
            idle_node_hours: hours(s.idle_node_seconds),
            slurm_wait_p50_s: q(&s.job_waits, 0.5),
            slurm_wait_p95_s: q(&s.job_waits, 0.95),
            slurm_wait_p99_s: q(&s.job_waits, 0.99),
            slurm_wait_max_s: s.job_waits.last().copied().unwrap_or(0) as f64,
            slurm_bounded_slowdown_mean: s.bounded_slowdown_mean,
            combined_bounded_slowdown_mean: s.combined_slowdown_mean,
            pod_wait_p50_s: q(&s.pod_waits, 0.5),
            pod_wait_p95_s: q(&s.pod_waits, 0.95),
            pod_wait_p99_s: q(&s.pod_waits, 0.99),
            pod_wait_max_s: s.pod_waits.last().copied().unwrap_or(0) as f64,
            drains: s.drains,
            handovers_to_kubernetes: s.to_kubernetes,
            handovers_to_slurm: s.to_slurm,
            evictions: s.evictions,
            pod_hours_lost: hours(s.pod_seconds_lost),
            lendable_node_hours: hours(s.lendable_node_seconds),
            jobs_killed: s.jobs_killed,
            jobs_requeued: s.jobs_requeued,
            job_hours_lost: hours(s.job_node_seconds_lost),
            starved_jobs: s.starved_jobs,
            starved_pods: s.starved_pods,
            gap_closed: None,
            not_replayed: BTreeMap::new(),
            kube_scoring: None,
        }
    }
}

/// The rows of `runs` (named as they come), with the share of the gap each closes between
/// `static-best` and `oracle` when both are there.
pub fn rows(runs: &[(String, SharedRun)]) -> Vec<SharedRow> {
    let mut rows: Vec<SharedRow> = runs
        .iter()
        .map(|(name, r)| SharedRow::new(name.clone(), r))
        .collect();
    let stranded = |name: &str| {
        rows.iter()
            .find(|r| r.policy == name)
            .map(|r| r.stranded_node_hours)
    };
    if let (Some(best), Some(bound)) = (stranded("static-best"), stranded("oracle")) {
        let gap = best - bound;
        for r in &mut rows {
            r.gap_closed = (gap > 0.0).then(|| (best - r.stranded_node_hours) / gap);
        }
    }
    rows
}

fn human(secs: f64) -> String {
    match secs {
        s if s < 120.0 => format!("{s:.0}s"),
        s if s < 7200.0 => format!("{:.0}m", s / 60.0),
        s => format!("{:.1}h", s / 3600.0),
    }
}

pub fn table(rows: &[SharedRow]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<17} {:>10} {:>10} {:>10} {:>9} {:>7} {:>7} {:>7} {:>8} {:>7} {:>7} {:>7} {:>7} {:>6} {:>11} {:>6} {:>9} {:>7} {:>9} {:>6}",
        "policy",
        "stranded",
        "slurm",
        "k8s",
        "idle",
        "wait50",
        "wait95",
        "wait99",
        "slowdown",
        "pod50",
        "pod95",
        "pod99",
        "both",
        "drains",
        "handovers",
        "evict",
        "pod-h lost",
        "requeue",
        "job-h lost",
        "gap"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<17} {:>10.1} {:>10.1} {:>10.1} {:>9.1} {:>7} {:>7} {:>7} {:>8.2} {:>7} {:>7} {:>7} {:>7.2} {:>6} {:>5}/{:<5} {:>6} {:>9.1} {:>7} {:>9.1} {:>6}",
            r.policy,
            r.stranded_node_hours,
            r.slurm_node_hours,
            r.kubernetes_node_hours,
            r.idle_node_hours,
            human(r.slurm_wait_p50_s),
            human(r.slurm_wait_p95_s),
            human(r.slurm_wait_p99_s),
            r.slurm_bounded_slowdown_mean,
            human(r.pod_wait_p50_s),
            human(r.pod_wait_p95_s),
            human(r.pod_wait_p99_s),
            r.combined_bounded_slowdown_mean,
            r.drains,
            r.handovers_to_kubernetes,
            r.handovers_to_slurm,
            r.evictions,
            r.pod_hours_lost,
            r.jobs_requeued,
            r.job_hours_lost,
            r.gap_closed
                .map_or("-".to_string(), |g| format!("{:.0}%", g * 100.0)),
        );
    }
    out
}

/// The timeline as CSV: time, policy, nodes Slurm and Kubernetes held and idle (averages
/// over the bucket starting at `time`), jobs and pods waiting at `time`.
pub fn csv(runs: &[(String, SharedRun)]) -> String {
    let mut out = String::from(
        "time,policy,slurm_nodes,kubernetes_nodes,idle_nodes,jobs_waiting,pods_waiting\n",
    );
    for (name, r) in runs {
        for p in &r.timeline {
            let _ = writeln!(
                out,
                "{},{name},{:.3},{:.3},{:.3},{},{}",
                p.time, p.slurm_nodes, p.kube_nodes, p.idle_nodes, p.jobs_waiting, p.pods_waiting
            );
        }
    }
    out
}

/// One panel per way of sharing: nodes Slurm held (blue) and Kubernetes held (green)
/// stacked, idle nodes as a grey line, and below each panel the work waiting (jobs orange,
/// pods purple) on its own scale.
pub fn svg(title: &str, runs: &[(String, SharedRun)], rows: &[SharedRow]) -> String {
    const PANEL: f64 = 120.0;
    const WAIT: f64 = 40.0;
    let shown: Vec<&(String, SharedRun)> = runs
        .iter()
        .filter(|(_, r)| !r.timeline.is_empty())
        .collect();
    let (t0, t1) = svg::span(
        shown
            .iter()
            .filter_map(|(_, r)| Some((r.timeline.first()?.time, r.timeline.last()?.time))),
    );
    let ymax = shown
        .iter()
        .flat_map(|(_, r)| r.timeline.iter())
        .map(|p| p.slurm_nodes + p.kube_nodes)
        .fold(1.0_f64, f64::max)
        .ceil();
    let wmax = shown
        .iter()
        .flat_map(|(_, r)| r.timeline.iter())
        .map(|p| f64::from(p.jobs_waiting.max(p.pods_waiting)))
        .fold(1.0_f64, f64::max);
    let step = PANEL + WAIT + 36.0;
    let height = svg::TOP + shown.len() as f64 * step + 30.0;
    let mut page = svg::Page::new(title, (t0, t1), height);
    for (k, (name, r)) in shown.iter().enumerate() {
        let top = svg::TOP + k as f64 * step + 18.0;
        let y = |v: f64| top + PANEL - v / ymax * PANEL;
        let wy = |v: f64| top + PANEL + 8.0 + WAIT - v / wmax * WAIT;
        let label = match rows.iter().find(|w| &w.policy == name) {
            Some(w) => format!(
                "{name}: {:.0} stranded node-hours, Slurm p95 wait {}, pod p95 {}",
                w.stranded_node_hours,
                human(w.slurm_wait_p95_s),
                human(w.pod_wait_p95_s)
            ),
            None => name.clone(),
        };
        page.panel(&label, top, PANEL, ymax);
        let steps = |f: &dyn Fn(&SharedPoint) -> f64, yy: &dyn Fn(f64) -> f64| {
            page.steps(r.timeline.iter().map(|p| (p.time, yy(f(p)))))
        };
        let base = r.timeline[0].time;
        // Stacked: Kubernetes on top of Slurm.
        let stacked = [
            (steps(&|p| p.slurm_nodes + p.kube_nodes, &y), "#a1d99b"),
            (steps(&|p| p.slurm_nodes, &y), "#9ecae1"),
        ];
        let lines = [
            (steps(&|p| p.idle_nodes, &y), "#636363"),
            (steps(&|p| f64::from(p.jobs_waiting), &wy), "#e6550d"),
            (steps(&|p| f64::from(p.pods_waiting), &wy), "#756bb1"),
        ];
        for (d, fill) in stacked {
            let area = page.area(base, y(0.0), &d);
            page.path(&area, &format!(r##"fill="{fill}" stroke="none""##));
        }
        for (d, color) in lines {
            let line = svg::Page::line(&d);
            page.path(
                &line,
                &format!(r##"fill="none" stroke="{color}" stroke-width="1""##),
            );
        }
    }
    let days = (t1 - t0) as f64 / 86400.0;
    page.finish(&format!(
        "blue: nodes Slurm holds · green: nodes Kubernetes holds · grey: idle nodes · below: jobs (orange) and pods (purple) waiting, up to {wmax:.0} · {days:.1} days"
    ))
}
