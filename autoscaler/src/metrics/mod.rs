//! The autoscaler's own metrics, modelled on cluster-autoscaler's: desired and current
//! replicas per target, scale-ups and scale-downs, errors by kind, decision duration, last
//! activity, frozen and leader flags. Rendered with the exporter's text writer, so names and
//! labels follow the same rules (`cluster` on every series).
//!
//! One module per family, all listed in [`FAMILIES`] — the one place to add one. A family
//! renders from [`AutoscalerMetrics`], the numbers the controller's reconciles leave behind
//! (a policy fills its own part of a [`Row`], a [`PolicyRow`], through its `metrics` hook, and
//! renders that part itself), and never calls
//! Kubernetes or Slurm.

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use slurmscale_exporter::metrics::{MetricsOptions, Out, PageInput, render};

use crate::plan::Reason;

mod autoscaler;
mod boot;
#[cfg(test)]
pub(crate) mod fixtures;
mod policy;
mod process;
mod timing;

/// A family renders from what the reconciles left behind.
pub type Family = fn(&mut Out, &AutoscalerMetrics);

/// Every family, in rendering order.
pub const FAMILIES: &[(&str, Family)] = &[
    ("process", process::collect),
    ("autoscaler", autoscaler::collect),
    ("boot", boot::collect),
    ("timing", timing::collect),
    ("policy", policy::collect),
];

/// One NodeSetAutoscaler's latest numbers.
#[derive(Clone, Debug, Default)]
pub struct Row {
    pub cluster: String,
    pub namespace: String,
    pub name: String,
    pub target: String,
    pub desired: u64,
    pub current: u64,
    pub recommendation: u64,
    pub frozen: bool,
    pub limited: bool,
    pub unsatisfiable: u64,
    /// How long the target's new nodes take to boot, as far as known.
    pub boot: crate::controller::BootTime,
    /// Pending jobs Slurm has planned that nothing is booted for now ([`timing`]).
    pub timing: Timing,
    pub reason: Reason,
    pub scale_ups: u64,
    pub scale_downs: u64,
    pub last_scale_up: Option<SystemTime>,
    pub last_scale_down: Option<SystemTime>,
    pub last_decision: Option<SystemTime>,
    pub decision_seconds: f64,
    /// The policy's own numbers, and the series they make ([`PolicyRow`]).
    pub policy: Option<Arc<dyn PolicyRow>>,
}

/// What an autoscaler booting just in time leaves for later (not `known` while it boots at
/// submit, has no boot time yet, or cannot read Slurm).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Timing {
    pub known: bool,
    /// Jobs Slurm's plan starts on nodes that free up sooner than new ones could.
    pub waiting_jobs: u64,
    /// Jobs new nodes start sooner than the plan, once busy nodes free up; those new
    /// nodes, and when the first is to be asked for (unix seconds).
    pub deferred_jobs: u64,
    pub deferred_nodes: u64,
    pub next_boot: Option<i64>,
}

impl Row {
    /// The labels every per-autoscaler series carries after `cluster`.
    pub fn labels(&self) -> [(&'static str, &str); 3] {
        [
            ("namespace", self.namespace.as_str()),
            ("autoscaler", self.name.as_str()),
            ("target", self.target.as_str()),
        ]
    }

    /// The policy's part of the row, if it is of type `T` (a policy reads its own back).
    pub fn policy<T: PolicyRow>(&self) -> Option<&T> {
        let any: &dyn Any = self.policy.as_deref()?;
        any.downcast_ref()
    }

    /// The spec changed policy: the old one's part of the row goes.
    pub fn forget_policy(&mut self) {
        self.policy = None;
    }
}

/// A policy's own part of its autoscaler's row, in a type of its own that only its room
/// knows, and the series it makes: a policy's families live in its room, rendered for every
/// autoscaler that has its row (the `policy` family).
pub trait PolicyRow: Any + fmt::Debug + Send + Sync {
    /// Its series, each with `labels` after the `cluster` already set.
    fn collect(&self, out: &mut Out, labels: [(&'static str, &str); 3]);
}

#[derive(Clone, Debug, Default)]
pub struct AutoscalerMetrics {
    pub rows: BTreeMap<String, Row>,
    pub errors: BTreeMap<&'static str, u64>,
    pub leader: bool,
    /// `POST /wake` calls heeded (this replica leading).
    pub wakes: u64,
}

/// Every family of [`FAMILIES`], into `out`.
pub fn collect(out: &mut Out, m: &AutoscalerMetrics) {
    for (_, family) in FAMILIES {
        family(out, m);
    }
}

/// The autoscaler's `/metrics` page: its own metrics and the health of its Slurm polling.
pub fn page(
    snapshots: Vec<std::sync::Arc<slurmscale_exporter::snapshot::ClusterSnapshot>>,
    m: &AutoscalerMetrics,
    exporter: Option<(
        &slurmscale_exporter::metrics::MetricsOptions,
        &slurmscale_exporter::k8s::watch::KubeSnapshot,
    )>,
) -> slurmscale_exporter::server::Page {
    // With the exporter: every family it serves, from the same snapshots; without, only the
    // health of the Slurm polling.
    let defaults = MetricsOptions::default();
    let (opts, kube) = exporter.map_or((&defaults, None), |(o, k)| (o, Some(k)));
    let input = PageInput {
        snapshots: &snapshots,
        kube,
        opts,
        now: std::time::SystemTime::now(),
        health_only: exporter.is_none(),
    };
    let text = render(&input, |out| collect(out, m));
    slurmscale_exporter::server::Page {
        text: text.into(),
        snapshots,
    }
}
