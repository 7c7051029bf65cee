//! Metric families: one module per family, all listed in [`FAMILIES`] — the one place to add
//! one. A family renders from a published [`ClusterSnapshot`] and never calls Slurm.
//!
//! Rendering happens once per new snapshot (see [`crate::server`]); scrapes serve the cached
//! text plus a few age gauges computed at scrape time. Naming follows Slurm 25.11's native
//! OpenMetrics where it has the same quantity (`slurm_partition_jobs_pending`, ...), and
//! Prometheus conventions elsewhere: base units, `_total` only on counters, `_info` for
//! properties, and a `cluster` label on every series.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::Arc;
use std::time::SystemTime;

use prometheus::proto::{Counter, Gauge, LabelPair, Metric, MetricFamily, MetricType};
use prometheus::{Encoder, TextEncoder};

use crate::snapshot::ClusterSnapshot;

pub mod demand;
pub mod exporter;
pub mod jobs;
pub mod nodes;
pub mod partitions;
pub mod scheduler;

/// What to render beyond the defaults.
#[derive(Clone, Debug, Default)]
pub struct MetricsOptions {
    /// Per-user and per-account job series (`slurm_user_jobs{username}`, ...).
    pub per_owner: bool,
}

/// A family renders a cluster's snapshot into `out`.
pub type Collect = fn(&mut Out, &ClusterSnapshot, &MetricsOptions);

/// Every Slurm metric family, in rendering order.
pub const FAMILIES: &[(&str, Collect)] = &[
    ("exporter", exporter::collect),
    ("nodes", nodes::collect),
    ("partitions", partitions::collect),
    ("jobs", jobs::collect),
    ("demand", demand::collect),
    ("scheduler", scheduler::collect),
];

/// Collects samples into metric families; the current cluster's label comes first on every
/// series.
#[derive(Default)]
pub struct Out {
    cluster: String,
    families: Vec<MetricFamily>,
    index: HashMap<&'static str, usize>,
}

impl Out {
    pub fn new() -> Self {
        Self::default()
    }

    /// Series added from now on carry `cluster="<name>"`.
    pub fn set_cluster(&mut self, name: &str) {
        self.cluster = name.to_string();
    }

    fn push(
        &mut self,
        name: &'static str,
        help: &'static str,
        kind: MetricType,
        labels: &[(&str, &str)],
        m: Metric,
    ) {
        let i = *self.index.entry(name).or_insert_with(|| {
            let mut f = MetricFamily::default();
            f.set_name(name.to_string());
            f.set_help(help.to_string());
            f.set_field_type(kind);
            self.families.push(f);
            self.families.len() - 1
        });
        let mut m = m;
        let mut pairs = Vec::with_capacity(labels.len() + 1);
        pairs.push(label("cluster", &self.cluster));
        pairs.extend(labels.iter().map(|(k, v)| label(k, v)));
        m.set_label(pairs);
        self.families[i].mut_metric().push(m);
    }

    pub fn gauge(
        &mut self,
        name: &'static str,
        help: &'static str,
        labels: &[(&str, &str)],
        value: f64,
    ) {
        let mut g = Gauge::default();
        g.set_value(value);
        let mut m = Metric::default();
        m.set_gauge(g);
        self.push(name, help, MetricType::GAUGE, labels, m);
    }

    pub fn counter(
        &mut self,
        name: &'static str,
        help: &'static str,
        labels: &[(&str, &str)],
        value: f64,
    ) {
        let mut c = Counter::default();
        c.set_value(value);
        let mut m = Metric::default();
        m.set_counter(c);
        self.push(name, help, MetricType::COUNTER, labels, m);
    }

    /// A gauge that is present (1) or absent: how `_info` metrics carry properties.
    pub fn info(&mut self, name: &'static str, help: &'static str, labels: &[(&str, &str)]) {
        self.gauge(name, help, labels, 1.0);
    }

    /// The text exposition format of everything collected.
    pub fn encode(mut self) -> String {
        self.families.retain(|f| !f.get_metric().is_empty());
        let mut buf = Vec::new();
        // Cannot fail: every family has a name and at least one sample.
        let _ = TextEncoder::new().encode(&self.families, &mut buf);
        String::from_utf8(buf).unwrap_or_default()
    }

    /// Samples of one family, for tests: (labels without `cluster`, value).
    pub fn samples(&self, name: &str) -> Vec<(Vec<(String, String)>, f64)> {
        let Some(&i) = self.index.get(name) else {
            return Vec::new();
        };
        self.families[i]
            .get_metric()
            .iter()
            .map(|m| {
                let labels = m
                    .get_label()
                    .iter()
                    .filter(|l| l.name() != "cluster")
                    .map(|l| (l.name().to_string(), l.value().to_string()))
                    .collect();
                let v = m.get_gauge().get_value() + m.get_counter().get_value();
                (labels, v)
            })
            .collect()
    }
}

fn label(k: &str, v: &str) -> LabelPair {
    let mut l = LabelPair::default();
    l.set_name(k.to_string());
    l.set_value(v.to_string());
    l
}

/// Renders every family for every cluster: the part of `/metrics` that changes only when a
/// new snapshot is published.
pub fn render(snapshots: &[Arc<ClusterSnapshot>], opts: &MetricsOptions) -> String {
    let mut out = Out::new();
    collect_all(&mut out, snapshots, opts);
    out.encode()
}

pub fn collect_all(out: &mut Out, snapshots: &[Arc<ClusterSnapshot>], opts: &MetricsOptions) {
    for (_, family) in FAMILIES {
        for snap in snapshots {
            out.set_cluster(&snap.cluster);
            family(out, snap, opts);
        }
    }
}

/// The part of `/metrics` that depends on the scrape time: how old each snapshot and each
/// endpoint's data is.
pub fn render_ages(snapshots: &[Arc<ClusterSnapshot>], now: SystemTime) -> String {
    let mut out = Out::new();
    for snap in snapshots {
        out.set_cluster(&snap.cluster);
        exporter::ages(&mut out, snap, now);
    }
    out.encode()
}

/// Seconds since the epoch, for `_timestamp_seconds` gauges.
pub fn unix_seconds(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Joins words for a label value (`drain,maint`).
pub fn join<'a>(words: impl IntoIterator<Item = &'a str>) -> String {
    let mut s = String::new();
    for w in words {
        if !s.is_empty() {
            s.push(',');
        }
        let _ = write!(s, "{w}");
    }
    s
}
