//! Metric families: one module per family, all listed in [`FAMILIES`] — the one place to add
//! one. A family renders from a published [`ClusterSnapshot`] or from what the Kubernetes
//! watchers hold, and never calls Slurm. Every `/metrics` page — the exporter's, the
//! autoscaler's, the demo's — is composed by [`render`] from that list.
//!
//! Rendering happens once per new snapshot (see [`crate::server`]); scrapes serve the cached
//! text plus the few families that move between snapshots ([`Source::AtScrape`],
//! [`Source::Process`]: data ages, the Kubernetes client's pushback), rendered at each scrape. Naming follows Slurm 25.11's native
//! OpenMetrics where it has the same quantity (`slurm_partition_jobs_pending`, ...), and
//! Prometheus conventions elsewhere: base units, `_total` only on counters, `_info` for
//! properties, and a `cluster` label on every series.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::histogram::Histogram;
use crate::k8s::watch::KubeSnapshot;
use crate::snapshot::ClusterSnapshot;

pub mod demand;
pub mod exporter;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod genericnode;
pub mod jobs;
pub mod kubernetes;
pub mod nodes;
pub mod nodeset;
pub mod partitions;
pub mod planned_starts;
pub mod scheduler;

/// What to render beyond the defaults, and what not to.
#[derive(Clone, Debug)]
pub struct MetricsOptions {
    /// Per-user and per-account job series (`slurm_user_jobs{username}`, ...).
    pub per_owner: bool,
    /// Per-node series (`slurm_node_*{node}`): most of a large cluster's page.
    pub per_node: bool,
    /// Families of [`FAMILIES`] left out, by name.
    pub skip: Vec<&'static str>,
    /// The poll interval: scaling signals older than a few intervals are stale.
    pub interval: Duration,
}

impl Default for MetricsOptions {
    fn default() -> Self {
        Self {
            per_owner: false,
            per_node: true,
            skip: Vec::new(),
            interval: Duration::from_secs(30),
        }
    }
}

/// What a family renders from.
#[derive(Clone, Copy)]
pub enum Source {
    /// Each Slurm cluster's snapshot in turn (the cluster label set).
    Cluster(fn(&mut Out, &ClusterSnapshot, &MetricsOptions)),
    /// What the Kubernetes watchers hold, with every cluster's snapshot (rendered only when
    /// Kubernetes is watched).
    Kubernetes(fn(&mut Out, &KubeSnapshot, &[Arc<ClusterSnapshot>], &MetricsOptions, SystemTime)),
    /// Each cluster's snapshot at the scrape's time: rendered at every scrape, not once per
    /// snapshot (how old the data is moves between snapshots).
    AtScrape(fn(&mut Out, &ClusterSnapshot, SystemTime)),
    /// What this process counts itself, at every scrape (no cluster).
    Process(fn(&mut Out)),
}

/// Every metric family, in rendering order.
pub const FAMILIES: &[(&str, Source)] = &[
    ("exporter", Source::Cluster(exporter::collect)),
    ("nodes", Source::Cluster(nodes::collect)),
    ("partitions", Source::Cluster(partitions::collect)),
    ("jobs", Source::Cluster(jobs::collect)),
    ("demand", Source::Cluster(demand::collect)),
    ("planned_starts", Source::Cluster(planned_starts::collect)),
    ("scheduler", Source::Cluster(scheduler::collect)),
    ("genericnode", Source::Kubernetes(genericnode::collect)),
    ("nodeset", Source::Kubernetes(nodeset::collect)),
    ("ages", Source::AtScrape(exporter::ages)),
    ("kubernetes", Source::Process(kubernetes::collect)),
];

/// What one page is rendered from.
pub struct PageInput<'a> {
    pub snapshots: &'a [Arc<ClusterSnapshot>],
    /// The Kubernetes families render only when Kubernetes is watched.
    pub kube: Option<&'a KubeSnapshot>,
    pub opts: &'a MetricsOptions,
    pub now: SystemTime,
    /// Only the `exporter` family (how polling goes): a process that polls Slurm for its
    /// own use and serves no Slurm families (the autoscaler without `--exporter`).
    pub health_only: bool,
}

impl<'a> PageInput<'a> {
    /// Every family of these snapshots; Kubernetes not watched.
    pub fn new(
        snapshots: &'a [Arc<ClusterSnapshot>],
        opts: &'a MetricsOptions,
        now: SystemTime,
    ) -> Self {
        Self {
            snapshots,
            kube: None,
            opts,
            now,
            health_only: false,
        }
    }
}

/// A series as data: its name, help and type, and how its value is read from `T` (`None`:
/// not rendered). A family is mostly a list of these, kube-state-metrics' way, so reading the
/// family reads what it exposes; [`Out::series`] renders a list for one `T` and its labels.
pub struct Series<T> {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: Kind,
    pub value: fn(&T) -> Option<f64>,
}

/// The exposition type of a [`Series`].
#[derive(Clone, Copy)]
pub enum Kind {
    Gauge,
    Counter,
}

impl<T> Series<T> {
    pub const fn gauge(
        name: &'static str,
        help: &'static str,
        value: fn(&T) -> Option<f64>,
    ) -> Self {
        Self::of(Kind::Gauge, name, help, value)
    }

    pub const fn counter(
        name: &'static str,
        help: &'static str,
        value: fn(&T) -> Option<f64>,
    ) -> Self {
        Self::of(Kind::Counter, name, help, value)
    }

    const fn of(
        kind: Kind,
        name: &'static str,
        help: &'static str,
        value: fn(&T) -> Option<f64>,
    ) -> Self {
        Self {
            name,
            help,
            kind,
            value,
        }
    }
}

/// A count as a sample value (every series of ours is `f64` on the page).
pub fn number(v: impl TryInto<u64>) -> Option<f64> {
    Some(v.try_into().unwrap_or(u64::MAX) as f64)
}

/// A flag as a sample value: 1 or 0.
pub fn flag(v: bool) -> Option<f64> {
    Some(f64::from(u8::from(v)))
}

/// Collects samples into metric families, written straight to exposition text (no per-series
/// objects: a 10,000-node cluster renders 160,000 series in one pass). The current cluster's
/// label comes first on every series.
#[derive(Default)]
pub struct Out {
    cluster: String,
    families: Vec<Family>,
    index: HashMap<&'static str, usize>,
}

struct Family {
    name: &'static str,
    help: &'static str,
    kind: &'static str,
    samples: String,
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
        kind: &'static str,
        labels: &[(&str, &str)],
        value: f64,
    ) {
        self.push_sample(name, help, kind, name, labels, value);
    }

    /// One sample of family `family`, named `sample` (a histogram's `_bucket`, `_sum`...).
    fn push_sample(
        &mut self,
        family: &'static str,
        help: &'static str,
        kind: &'static str,
        sample: &str,
        labels: &[(&str, &str)],
        value: f64,
    ) {
        let i = *self.index.entry(family).or_insert_with(|| {
            self.families.push(Family {
                name: family,
                help,
                kind,
                samples: String::new(),
            });
            self.families.len() - 1
        });
        let out = &mut self.families[i].samples;
        out.push_str(sample);
        out.push_str("{cluster=\"");
        escape_into(out, &self.cluster, true);
        for (k, v) in labels {
            out.push_str("\",");
            out.push_str(k);
            out.push_str("=\"");
            escape_into(out, v, true);
        }
        out.push_str("\"} ");
        if value.is_infinite() {
            out.push_str(if value > 0.0 { "+Inf" } else { "-Inf" });
        } else {
            let _ = write!(out, "{value}");
        }
        out.push('\n');
    }

    pub fn gauge(
        &mut self,
        name: &'static str,
        help: &'static str,
        labels: &[(&str, &str)],
        value: f64,
    ) {
        self.push(name, help, "gauge", labels, value);
    }

    pub fn counter(
        &mut self,
        name: &'static str,
        help: &'static str,
        labels: &[(&str, &str)],
        value: f64,
    ) {
        self.push(name, help, "counter", labels, value);
    }

    /// A histogram: cumulative counts per upper bound (`le`), then the sum and count.
    pub fn histogram(
        &mut self,
        name: &'static str,
        help: &'static str,
        labels: &[(&str, &str)],
        h: &Histogram,
    ) {
        let bucket = format!("{name}_bucket");
        let mut cumulative = 0;
        for (le, n) in h.bounds.iter().zip(&h.counts) {
            cumulative += n;
            let le = le.to_string();
            let mut with_le = labels.to_vec();
            with_le.push(("le", &le));
            self.push_sample(
                name,
                help,
                "histogram",
                &bucket,
                &with_le,
                cumulative as f64,
            );
        }
        let mut with_le = labels.to_vec();
        with_le.push(("le", "+Inf"));
        self.push_sample(name, help, "histogram", &bucket, &with_le, h.count as f64);
        self.push_sample(
            name,
            help,
            "histogram",
            &format!("{name}_sum"),
            labels,
            h.sum,
        );
        self.push_sample(
            name,
            help,
            "histogram",
            &format!("{name}_count"),
            labels,
            h.count as f64,
        );
    }

    /// Every series of `list` that `from` has a value for, each with `labels`.
    pub fn series<T>(&mut self, list: &[Series<T>], from: &T, labels: &[(&str, &str)]) {
        for s in list {
            if let Some(v) = (s.value)(from) {
                let kind = match s.kind {
                    Kind::Gauge => "gauge",
                    Kind::Counter => "counter",
                };
                self.push(s.name, s.help, kind, labels, v);
            }
        }
    }

    /// A gauge that is present (1) or absent: how `_info` metrics carry properties.
    pub fn info(&mut self, name: &'static str, help: &'static str, labels: &[(&str, &str)]) {
        self.gauge(name, help, labels, 1.0);
    }

    /// The text exposition format of everything collected.
    pub fn encode(self) -> String {
        let size = self
            .families
            .iter()
            .map(|f| f.samples.len() + f.help.len() + 64)
            .sum();
        let mut text = String::with_capacity(size);
        for f in self.families {
            text.push_str("# HELP ");
            text.push_str(f.name);
            text.push(' ');
            escape_into(&mut text, f.help, false);
            text.push_str("\n# TYPE ");
            text.push_str(f.name);
            text.push(' ');
            text.push_str(f.kind);
            text.push('\n');
            text.push_str(&f.samples);
        }
        text
    }

    /// Samples of one family, for tests: (labels without `cluster`, value).
    pub fn samples(&self, name: &str) -> Vec<(Vec<(String, String)>, f64)> {
        let Some(&i) = self.index.get(name) else {
            return Vec::new();
        };
        self.families[i].samples.lines().map(parse_sample).collect()
    }
}

/// Escapes a label value (`\`, `"`, newline) or HELP text (`\`, newline).
fn escape_into(out: &mut String, s: &str, quotes: bool) {
    if !s.contains(['\\', '\n', '"']) {
        out.push_str(s);
        return;
    }
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if quotes => out.push_str("\\\""),
            c => out.push(c),
        }
    }
}

/// Reads back one sample line written by [`Out`] (tests only).
fn parse_sample(line: &str) -> (Vec<(String, String)>, f64) {
    let (series, value) = line.rsplit_once(' ').unwrap_or((line, "NaN"));
    let mut labels = Vec::new();
    let mut rest = series.split_once('{').map_or("", |(_, r)| r);
    while let Some((k, after)) = rest.split_once("=\"") {
        let (mut v, mut chars, mut end) = (String::new(), after.char_indices(), after.len());
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => v.push('\n'),
                    Some((_, c)) => v.push(c),
                    None => {}
                },
                '"' => {
                    end = i + 1;
                    break;
                }
                c => v.push(c),
            }
        }
        let k = k.trim_start_matches(',').to_string();
        if k != "cluster" {
            labels.push((k, v));
        }
        rest = &after[end..];
    }
    (labels, value.parse().unwrap_or(f64::NAN))
}

/// The part of a `/metrics` page that changes only when a new snapshot is published: the
/// [`FAMILIES`] `input` asks for, then the process's own (`own`: the autoscaler's).
pub fn render(input: &PageInput<'_>, own: impl FnOnce(&mut Out)) -> String {
    let mut out = Out::new();
    collect(&mut out, input);
    own(&mut out);
    out.encode()
}

/// The families of [`render`], into `out`.
pub fn collect(out: &mut Out, input: &PageInput<'_>) {
    let families = FAMILIES
        .iter()
        .filter(|(name, _)| !input.health_only || *name == "exporter")
        .filter(|(name, _)| !input.opts.skip.contains(name));
    for (_, source) in families {
        match *source {
            Source::Cluster(family) => {
                for snap in input.snapshots {
                    out.set_cluster(&snap.cluster);
                    family(out, snap, input.opts);
                }
            }
            Source::Kubernetes(family) => {
                if let Some(kube) = input.kube {
                    family(out, kube, input.snapshots, input.opts, input.now);
                }
            }
            Source::AtScrape(_) | Source::Process(_) => {}
        }
    }
}

/// The part of `/metrics` that depends on the scrape time, the [`FAMILIES`] rendered at each
/// scrape: how old each snapshot and each endpoint's data is, and how the Kubernetes API
/// server has been answering.
pub fn render_ages(snapshots: &[Arc<ClusterSnapshot>], now: SystemTime) -> String {
    let mut out = Out::new();
    for (_, source) in FAMILIES {
        match *source {
            Source::AtScrape(family) => {
                for snap in snapshots {
                    out.set_cluster(&snap.cluster);
                    family(&mut out, snap, now);
                }
            }
            Source::Process(family) => family(&mut out),
            Source::Cluster(_) | Source::Kubernetes(_) => {}
        }
    }
    out.encode()
}

/// Seconds since the epoch, for `_timestamp_seconds` gauges.
/// The partitions a pending-job family reports: every one Slurm has, and every one a
/// pending job asks for (a job may name one the partition list does not show).
pub fn pending_partitions<'a>(
    s: &'a ClusterSnapshot,
    jobs: &'a crate::model::Jobs,
) -> std::collections::BTreeSet<&'a str> {
    let configured = s.partitions.data.as_deref().into_iter().flatten();
    configured
        .map(|p| &*p.name)
        .chain(
            jobs.pending
                .iter()
                .flat_map(|j| j.partitions.iter().map(|p| &**p)),
        )
        .collect()
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_and_help_are_escaped() {
        let mut out = Out::new();
        out.set_cluster("c\"1");
        out.info(
            "x_info",
            "help with \\ and\nnewline",
            &[("reason", "bad \"disk\"\nat \\dev")],
        );
        out.gauge("x", "h", &[], f64::INFINITY);
        let text = out.encode();
        assert!(
            text.contains("# HELP x_info help with \\\\ and\\nnewline\n"),
            "{text}"
        );
        assert!(
            text.contains(r#"x_info{cluster="c\"1",reason="bad \"disk\"\nat \\dev"} 1"#),
            "{text}"
        );
        assert!(text.contains("x{cluster=\"c\\\"1\"} +Inf\n"), "{text}");
        let mut out = Out::new();
        out.info("x_info", "h", &[("reason", "bad \"disk\"\nat \\dev")]);
        assert_eq!(
            out.samples("x_info"),
            [(
                vec![("reason".into(), "bad \"disk\"\nat \\dev".into())],
                1.0
            )]
        );
    }
}
