//! Two NodeSetAutoscalers on Slurm cluster `lab` for the families' unit tests, as a leading
//! replica's reconciles leave them: `gpu` (slurm-planned, scaling up past its maxReplicas,
//! once refused with a conflict) and `pool` (a colocated pool, frozen on stale data). Each
//! family's test renders them alone and compares the exposition text line by line; a
//! policy's room adds its own part of the row ([`render_policy`]).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use slurmscale_exporter::metrics::Out;

use super::{AutoscalerMetrics, FAMILIES, Family, PolicyRow, Row};
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
        boot: crate::controller::BootTime {
            seconds: Some(92.0),
            set: false,
            observed: 5,
        },
        timing: super::Timing {
            known: true,
            waiting_jobs: 2,
            deferred_jobs: 1,
            deferred_nodes: 1,
            next_boot: Some(1_800_000_600),
        },
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

/// The policy family alone on the fixture, with `row` as autoscaler `key`'s policy part (each
/// policy's room tests its own row this way).
pub fn render_policy(key: &str, row: impl PolicyRow) -> String {
    let mut m = metrics();
    m.rows.get_mut(key).expect("a fixture autoscaler").policy = Some(std::sync::Arc::new(row));
    let (_, family) = FAMILIES.iter().find(|(n, _)| *n == "policy").unwrap();
    render_of(*family, &m)
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
