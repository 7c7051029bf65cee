//! Two NodeSetAutoscalers on Slurm cluster `lab` for the families' unit tests, as a leading
//! replica's reconciles leave them: `gpu` (slurm-planned, scaling up past its maxReplicas,
//! once refused with a conflict) and `pool` (a colocated pool of four nodes, three
//! Slurm's, one of them draining for Kubernetes, one NodeSet pod waiting for room, frozen
//! on stale data). Each family's test
//! renders them alone and compares the exposition text line by line.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use slurmscale_exporter::metrics::Out;

use super::{AutoscalerMetrics, ColocationRow, Family, PlannedRow, Row};
use crate::plan::Reason;

fn at(unix: f64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs_f64(unix)
}

pub fn metrics() -> AutoscalerMetrics {
    let row = |name: &str| Row {
        cluster: "lab".into(),
        namespace: "slurm".into(),
        name: name.into(),
        target: format!("slurm-worker-{name}"),
        ..Default::default()
    };
    let gpu = Row {
        desired: 3,
        current: 1,
        recommendation: 4,
        limited: true,
        unsatisfiable: 1,
        reason: Reason::ScaleUp,
        scale_ups: 5,
        scale_downs: 4,
        last_decision: Some(at(1_800_000_060.0)),
        last_scale_up: Some(at(1_800_000_060.0)),
        last_scale_down: Some(at(1_799_999_000.0)),
        decision_seconds: 0.012,
        planned: Some(PlannedRow {
            records: BTreeMap::from([("off", 2), ("up", 1), ("busy", 1)]),
            unrequested_pods: 1,
        }),
        ..row("gpu")
    };
    let pool = Row {
        desired: 2,
        current: 2,
        recommendation: 1,
        frozen: true,
        reason: Reason::Frozen,
        scale_ups: 2,
        last_decision: Some(at(1_800_000_059.5)),
        last_scale_up: Some(at(1_799_990_000.0)),
        decision_seconds: 0.25,
        colocation: Some(ColocationRow {
            pool: 4,
            slurm: 3,
            draining: 1,
            kubernetes_need: 2,
            slurm_need: 1,
            unschedulable_pods: 1,
        }),
        ..row("pool")
    };
    AutoscalerMetrics {
        rows: BTreeMap::from([
            ("slurm/gpu".to_string(), gpu),
            ("slurm/pool".to_string(), pool),
        ]),
        errors: BTreeMap::from([("conflict", 2), ("slurm", 1)]),
        leader: true,
        wakes: 3,
    }
}

/// One family rendered alone on `m`.
pub fn render_of(family: Family, m: &AutoscalerMetrics) -> String {
    let mut out = Out::new();
    family(&mut out, m);
    out.encode()
}

/// One family rendered alone on the fixture.
pub fn render(family: Family) -> String {
    render_of(family, &metrics())
}

/// Compares rendered text with the expected lines (indentation dropped), showing both in
/// full on a difference.
#[track_caller]
pub fn assert_text(got: &str, want: &str) {
    let want: String = want
        .lines()
        .map(str::trim_start)
        .filter(|l| !l.is_empty())
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(got == want, "rendered:\n{got}\nexpected:\n{want}");
}
