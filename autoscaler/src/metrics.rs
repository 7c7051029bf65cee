//! The autoscaler's own metrics, modelled on cluster-autoscaler's: desired and current
//! replicas per target, scale-ups and scale-downs, errors by kind, decision duration, last
//! activity, frozen and leader flags. Rendered with the exporter's text writer, so names and
//! labels follow the same rules (`cluster` on every series).

use std::collections::BTreeMap;
use std::time::SystemTime;

use slurmscale_exporter::metrics::{MetricsOptions, Out, PageInput, render, unix_seconds};

use crate::plan::Reason;

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
    pub reason: Reason,
    pub scale_ups: u64,
    pub scale_downs: u64,
    pub last_scale_up: Option<SystemTime>,
    pub last_scale_down: Option<SystemTime>,
    pub last_decision: Option<SystemTime>,
    pub decision_seconds: f64,
    /// Colocated autoscalers only.
    pub colocation: Option<ColocationRow>,
    /// Slurm-planned autoscalers only.
    pub planned: Option<PlannedRow>,
}

impl Row {
    /// The spec changed policy: the old one's part of the row goes.
    pub fn forget_policy(&mut self) {
        self.colocation = None;
        self.planned = None;
    }
}

/// Where a slurm-planned NodeSet's records stand.
#[derive(Clone, Debug, Default)]
pub struct PlannedRow {
    /// Records by power state (`off`, `up`, `down`, `idle`, `busy`, `failed`, `absent`).
    pub records: BTreeMap<&'static str, u64>,
    /// Pods added that slurmctld did not ask for (free ordinals below a wanted one).
    pub unrequested_pods: u64,
}

/// How a colocated pool is shared.
#[derive(Clone, Debug, Default)]
pub struct ColocationRow {
    pub pool: u64,
    pub slurm: u64,
    pub draining: u64,
    pub kubernetes_need: u64,
    pub slurm_need: u64,
}

#[derive(Clone, Debug, Default)]
pub struct AutoscalerMetrics {
    pub rows: BTreeMap<String, Row>,
    pub errors: BTreeMap<&'static str, u64>,
    pub leader: bool,
    /// `POST /wake` calls heeded (this replica leading).
    pub wakes: u64,
}

pub fn collect(out: &mut Out, m: &AutoscalerMetrics) {
    out.set_cluster("");
    out.gauge(
        "slurmscale_autoscaler_leader",
        "1 while this replica holds the lease and may actuate.",
        &[],
        f64::from(u8::from(m.leader)),
    );
    out.counter(
        "slurmscale_autoscaler_wakes_total",
        "POST /wake calls heeded by this replica (slurmctld's ResumeProgram asking for a poll now; a standby answers 503).",
        &[],
        m.wakes as f64,
    );
    for (kind, n) in &m.errors {
        out.counter(
            "slurmscale_autoscaler_errors_total",
            "Failed reconciles by kind (conflict, throttled, server, timeout, transport, not_leader, not_found, forbidden, rejected, target, config, and the Slurm kinds).",
            &[("kind", kind)],
            *n as f64,
        );
    }
    for r in m.rows.values() {
        out.set_cluster(&r.cluster);
        let l = [
            ("namespace", r.namespace.as_str()),
            ("autoscaler", r.name.as_str()),
            ("target", r.target.as_str()),
        ];
        out.gauge(
            "slurmscale_autoscaler_desired_replicas",
            "Replicas the policy decided the target should have now.",
            &l,
            r.desired as f64,
        );
        out.gauge(
            "slurmscale_autoscaler_current_replicas",
            "Replicas the target has (its scale subresource).",
            &l,
            r.current as f64,
        );
        out.gauge(
            "slurmscale_autoscaler_recommended_replicas",
            "Busy nodes plus pending demand within bounds, before stabilization and step limits.",
            &l,
            r.recommendation as f64,
        );
        out.gauge(
            "slurmscale_autoscaler_frozen",
            "1 while scale-down is suspended because the Slurm data is stale, partial or failing.",
            &l,
            f64::from(u8::from(r.frozen)),
        );
        out.gauge(
            "slurmscale_autoscaler_limited",
            "1 while busy nodes and demand exceed maxReplicas.",
            &l,
            f64::from(u8::from(r.limited)),
        );
        out.gauge(
            "slurmscale_autoscaler_unsatisfiable_jobs",
            "Pending jobs needing more nodes than maxReplicas: reported, not chased.",
            &l,
            r.unsatisfiable as f64,
        );
        out.info(
            "slurmscale_autoscaler_decision_info",
            "The reason of the latest decision (ScaleUp, ScaleDown, Idle, Steady, Stabilizing, Frozen).",
            &[l[0], l[1], l[2], ("reason", r.reason.as_str())],
        );
        out.counter(
            "slurmscale_autoscaler_scale_ups_total",
            "Times the target was scaled up.",
            &l,
            r.scale_ups as f64,
        );
        out.counter(
            "slurmscale_autoscaler_scale_downs_total",
            "Times the target was scaled down.",
            &l,
            r.scale_downs as f64,
        );
        out.gauge(
            "slurmscale_autoscaler_decision_duration_seconds",
            "Time the last reconcile took (reads, decision, writes).",
            &l,
            r.decision_seconds,
        );
        if let Some(c) = &r.colocation {
            colocation(out, &l, c);
        }
        if let Some(p) = &r.planned {
            planned(out, &l, p);
        }
        for (activity, t) in [
            ("decision", r.last_decision),
            ("scale_up", r.last_scale_up),
            ("scale_down", r.last_scale_down),
        ] {
            if let Some(t) = t {
                out.gauge(
                    "slurmscale_autoscaler_last_activity_timestamp_seconds",
                    "When the autoscaler last decided, scaled up and scaled down.",
                    &[l[0], l[1], l[2], ("activity", activity)],
                    unix_seconds(t),
                );
            }
        }
    }
}

/// How a colocated pool is shared and what each side is asking for.
fn colocation(out: &mut Out, l: &[(&str, &str); 3], c: &ColocationRow) {
    out.gauge(
        "slurmscale_colocation_pool_nodes",
        "Nodes in the colocated pool (GenericNodes with known capacity).",
        l,
        c.pool as f64,
    );
    let kubernetes = c.pool.saturating_sub(c.slurm);
    for (owner, held, need) in [
        ("slurm", c.slurm, c.slurm_need),
        ("kubernetes", kubernetes, c.kubernetes_need),
    ] {
        let lo = [l[0], l[1], l[2], ("owner", owner)];
        out.gauge(
            "slurmscale_colocation_nodes",
            "Pool nodes each side holds (Slurm: a serving NodeSet pod runs there).",
            &lo,
            held as f64,
        );
        out.gauge(
            "slurmscale_colocation_need_nodes",
            "Pool nodes each side needs now (Slurm: busy plus pending demand; Kubernetes: nodes for unschedulable pods).",
            &lo,
            need as f64,
        );
    }
    out.gauge(
        "slurmscale_colocation_draining_nodes",
        "Slurm nodes drained by slurmscale for Kubernetes that still run jobs.",
        l,
        c.draining as f64,
    );
}

/// A slurm-planned NodeSet: its records by power state, and the pods slurmctld did not ask
/// for.
fn planned(out: &mut Out, l: &[(&str, &str); 3], p: &PlannedRow) {
    for (power, n) in &p.records {
        out.gauge(
            "slurmscale_slurm_planned_records",
            "Node records of a slurm-planned NodeSet by power state as slurmctld reports it (off, up, down, idle, busy, failed, absent).",
            &[l[0], l[1], l[2], ("power", power)],
            *n as f64,
        );
    }
    out.counter(
        "slurmscale_slurm_planned_unrequested_pods_total",
        "Pods a slurm-planned NodeSet added that slurmctld did not ask for: free ordinals below a wanted one, which a NodeSet creates first.",
        l,
        p.unrequested_pods as f64,
    );
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
