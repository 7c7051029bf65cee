//! Jobs: counts by state, cluster-wide (`slurm_jobs_*`) and per partition
//! (`slurm_partition_jobs_*`), allocated CPUs/GPUs, the node-count extremes of pending jobs,
//! pending jobs by reason, and — behind `--per-user-metrics` — per user and account.
//!
//! Counts are job records as slurmctld holds them (an unsplit pending array counts once,
//! finished jobs still in memory count in `slurm_jobs`); per-partition job counts use the
//! job's first partition. Demand, which counts array tasks and every partition a job may
//! use, is in [`super::demand`].

use std::collections::{BTreeMap, BTreeSet};

use super::{MetricsOptions, Out, Series, number};
use crate::model::origin::Origin;
use crate::model::{JobCounts, JobState, Jobs};
use crate::snapshot::ClusterSnapshot;

/// (state, cluster metric, partition metric, user metric, account metric)
type StateNames = (JobState, &'static str, &'static str);

const STATES: [StateNames; 13] = [
    (
        JobState::Pending,
        "slurm_jobs_pending",
        "slurm_partition_jobs_pending",
    ),
    (
        JobState::Running,
        "slurm_jobs_running",
        "slurm_partition_jobs_running",
    ),
    (
        JobState::Suspended,
        "slurm_jobs_suspended",
        "slurm_partition_jobs_suspended",
    ),
    (
        JobState::Completing,
        "slurm_jobs_completing",
        "slurm_partition_jobs_completing",
    ),
    (
        JobState::Completed,
        "slurm_jobs_completed",
        "slurm_partition_jobs_completed",
    ),
    (
        JobState::Cancelled,
        "slurm_jobs_cancelled",
        "slurm_partition_jobs_cancelled",
    ),
    (
        JobState::Failed,
        "slurm_jobs_failed",
        "slurm_partition_jobs_failed",
    ),
    (
        JobState::Timeout,
        "slurm_jobs_timeout",
        "slurm_partition_jobs_timeout",
    ),
    (
        JobState::NodeFail,
        "slurm_jobs_node_failed",
        "slurm_partition_jobs_node_failed",
    ),
    (
        JobState::Preempted,
        "slurm_jobs_preempted",
        "slurm_partition_jobs_preempted",
    ),
    (
        JobState::BootFail,
        "slurm_jobs_bootfail",
        "slurm_partition_jobs_bootfail",
    ),
    (
        JobState::Deadline,
        "slurm_jobs_deadline",
        "slurm_partition_jobs_deadline",
    ),
    (
        JobState::OutOfMemory,
        "slurm_jobs_outofmemory",
        "slurm_partition_jobs_outofmemory",
    ),
];

const HELP_STATE: &str =
    "Job records in this state (pending includes held jobs; an unsplit array counts once).";

/// Jobs not yet finished: what native `slurm_partition_jobs` counts.
fn active(c: &JobCounts) -> u64 {
    [
        JobState::Pending,
        JobState::Running,
        JobState::Suspended,
        JobState::Completing,
    ]
    .iter()
    .map(|s| c.state(*s))
    .sum()
}

/// Pending and running jobs by origin, and the pods Kubernetes placeholders stand for.
fn by_origin(
    out: &mut Out,
    c: &JobCounts,
    labels: &[(&str, &str)],
    (jobs, pods): (&'static str, &'static str),
) {
    for origin in Origin::ALL {
        let counts = &c.by_origin[origin.index()];
        for (state, n) in [("pending", counts.pending), ("running", counts.running)] {
            let mut l = labels.to_vec();
            l.extend([("origin", origin.as_str()), ("state", state)]);
            out.gauge(
                jobs,
                "Pending and running job records by origin: batch, or kubernetes (placeholders pods are scheduled through, such as Slinky slurm-bridge's).",
                &l,
                n as f64,
            );
        }
    }
    let k = &c.by_origin[Origin::Kubernetes.index()];
    for (state, n) in [("pending", k.pods_pending), ("running", k.pods_running)] {
        let mut l = labels.to_vec();
        l.push(("state", state));
        out.gauge(
            pods,
            "Kubernetes pods waiting for or running on Slurm nodes, from the pod lists of the placeholder jobs that carry one.",
            &l,
            n as f64,
        );
    }
}

pub fn collect(out: &mut Out, s: &ClusterSnapshot, opts: &MetricsOptions) {
    let Some(jobs) = &s.jobs.data else { return };
    let c = &jobs.cluster;
    out.gauge(
        "slurm_jobs",
        "Job records slurmctld holds, finished ones still in memory included.",
        &[],
        c.total() as f64,
    );
    for (state, name, _) in STATES {
        out.gauge(name, HELP_STATE, &[], c.state(state) as f64);
    }
    out.gauge(
        "slurm_jobs_hold",
        "Pending jobs held by their user or an admin.",
        &[],
        c.held as f64,
    );
    out.gauge(
        "slurm_jobs_cpus_alloc",
        "CPUs allocated to running and suspended jobs.",
        &[],
        c.cpus_alloc as f64,
    );
    out.gauge(
        "slurm_jobs_gpus_alloc",
        "GPUs allocated to running and suspended jobs.",
        &[],
        c.gpus_alloc as f64,
    );
    // Native meaning: distinct nodes with work. /nodes knows them exactly; without it, the sum
    // over jobs (which counts a shared node once per job) is the best we have.
    let nodes_alloc = match &s.nodes.data {
        Some(nodes) => nodes.iter().filter(|n| n.busy()).count() as u64,
        None => c.nodes_alloc,
    };
    out.gauge(
        "slurm_jobs_nodes_alloc",
        "Distinct nodes running jobs.",
        &[],
        nodes_alloc as f64,
    );
    by_origin(out, c, &[], ("slurm_origin_jobs", "slurm_kubernetes_pods"));
    out.gauge(
        "slurm_exporter_malformed_admin_comments",
        "Jobs whose admin comment looked like a pod list (slurm-bridge's mark) but was not one: counted as batch jobs.",
        &[],
        jobs.malformed_admin_comments as f64,
    );

    let mut names: BTreeSet<&str> = jobs.partitions.keys().map(|p| &**p).collect();
    names.extend(
        s.partitions
            .data
            .iter()
            .flat_map(|ps| ps.iter().map(|p| &*p.name)),
    );
    let empty = JobCounts::default();
    for name in names {
        partition(out, name, jobs.partitions.get(name).unwrap_or(&empty));
    }
    if opts.per_owner {
        per_owner(out, jobs);
    }
}

/// One partition's job counts (jobs whose first partition it is).
fn partition(out: &mut Out, name: &str, c: &JobCounts) {
    let part = [("partition", name)];
    out.gauge(
        "slurm_partition_jobs",
        "Jobs of the partition not yet finished (pending, running, suspended, completing).",
        &part,
        active(c) as f64,
    );
    for (state, _, name) in STATES {
        out.gauge(name, HELP_STATE, &part, c.state(state) as f64);
    }
    out.gauge(
        "slurm_partition_jobs_hold",
        "Pending jobs of the partition held by their user or an admin.",
        &part,
        c.held as f64,
    );
    by_origin(
        out,
        c,
        &part,
        (
            "slurm_partition_origin_jobs",
            "slurm_partition_kubernetes_pods",
        ),
    );
    out.series(PARTITION_USE, c, &part);
    for (reason, n) in &c.pending_by_reason {
        out.gauge(
            "slurm_partition_jobs_pending_reason",
            "Pending jobs of the partition by the reason slurmctld gives (Resources, Priority, Dependency, ...).",
            &[("partition", name), ("reason", reason)],
            *n as f64,
        );
    }
}

/// Job records of one user or account: all of them, pending, running.
#[derive(Default)]
struct Owned {
    all: u64,
    pending: u64,
    running: u64,
}

const USER: &[Series<Owned>] = &[
    Series::gauge("slurm_user_jobs", "Job records of the user.", |o| {
        number(o.all)
    }),
    Series::gauge(
        "slurm_user_jobs_pending",
        "Pending jobs of the user.",
        |o| number(o.pending),
    ),
    Series::gauge(
        "slurm_user_jobs_running",
        "Running jobs of the user.",
        |o| number(o.running),
    ),
];

const ACCOUNT: &[Series<Owned>] = &[
    Series::gauge("slurm_account_jobs", "Job records of the account.", |o| {
        number(o.all)
    }),
    Series::gauge(
        "slurm_account_jobs_pending",
        "Pending jobs of the account.",
        |o| number(o.pending),
    ),
    Series::gauge(
        "slurm_account_jobs_running",
        "Running jobs of the account.",
        |o| number(o.running),
    ),
];

/// Per user and per account (`--per-user-metrics`).
fn per_owner(out: &mut Out, jobs: &Jobs) {
    let mut users: BTreeMap<&str, Owned> = BTreeMap::new();
    let mut accounts: BTreeMap<&str, Owned> = BTreeMap::new();
    for ((user, account), states) in &jobs.by_owner {
        let get = |s| states.get(&s).copied().unwrap_or(0);
        for (map, key) in [(&mut users, &**user), (&mut accounts, &**account)] {
            let e = map.entry(key).or_default();
            e.all += states.values().sum::<u64>();
            e.pending += get(JobState::Pending);
            e.running += get(JobState::Running);
        }
    }
    for (user, owned) in &users {
        out.series(USER, owned, &[("username", user)]);
    }
    for (account, owned) in &accounts {
        out.series(ACCOUNT, owned, &[("account", account)]);
    }
}

/// What a partition's jobs use and the node-count extremes of its pending ones (0: none).
const PARTITION_USE: &[Series<JobCounts>] = &[
    Series::gauge(
        "slurm_partition_jobs_cpus_alloc",
        "CPUs allocated to the partition's running and suspended jobs.",
        |c| number(c.cpus_alloc),
    ),
    Series::gauge(
        "slurm_partition_jobs_gpus_alloc",
        "GPUs allocated to the partition's running and suspended jobs.",
        |c| number(c.gpus_alloc),
    ),
    Series::gauge(
        "slurm_partition_jobs_max_job_nodes",
        "Largest node count (max of requested min and max nodes) over the partition's pending jobs; 0 when none.",
        |c| number(c.pending_nodes_max.unwrap_or(0)),
    ),
    Series::gauge(
        "slurm_partition_jobs_max_job_nodes_nohold",
        "As slurm_partition_jobs_max_job_nodes, held jobs left out.",
        |c| number(c.pending_nodes_max_nohold.unwrap_or(0)),
    ),
    Series::gauge(
        "slurm_partition_jobs_min_job_nodes",
        "Largest requested minimum node count over the partition's pending jobs; 0 when none.",
        |c| number(c.pending_nodes_min.unwrap_or(0)),
    ),
    Series::gauge(
        "slurm_partition_jobs_min_job_nodes_nohold",
        "As slurm_partition_jobs_min_job_nodes, held jobs left out.",
        |c| number(c.pending_nodes_min_nohold.unwrap_or(0)),
    ),
];

#[cfg(test)]
mod tests {
    use super::super::fixtures;

    /// The family alone on the fixture cluster (`metrics::fixtures`), line by line.
    #[test]
    fn renders_the_fixture_cluster() {
        fixtures::assert_text(
            &fixtures::render(super::collect),
            r#"
            # HELP slurm_jobs Job records slurmctld holds, finished ones still in memory included.
            # TYPE slurm_jobs gauge
            slurm_jobs{cluster="fixture"} 5
            # HELP slurm_jobs_pending Job records in this state (pending includes held jobs; an unsplit array counts once).
            # TYPE slurm_jobs_pending gauge
            slurm_jobs_pending{cluster="fixture"} 3
            # HELP slurm_jobs_running Job records in this state (pending includes held jobs; an unsplit array counts once).
            # TYPE slurm_jobs_running gauge
            slurm_jobs_running{cluster="fixture"} 2
            # HELP slurm_jobs_suspended Job records in this state (pending includes held jobs; an unsplit array counts once).
            # TYPE slurm_jobs_suspended gauge
            slurm_jobs_suspended{cluster="fixture"} 0
            # HELP slurm_jobs_completing Job records in this state (pending includes held jobs; an unsplit array counts once).
            # TYPE slurm_jobs_completing gauge
            slurm_jobs_completing{cluster="fixture"} 0
            # HELP slurm_jobs_completed Job records in this state (pending includes held jobs; an unsplit array counts once).
            # TYPE slurm_jobs_completed gauge
            slurm_jobs_completed{cluster="fixture"} 0
            # HELP slurm_jobs_cancelled Job records in this state (pending includes held jobs; an unsplit array counts once).
            # TYPE slurm_jobs_cancelled gauge
            slurm_jobs_cancelled{cluster="fixture"} 0
            # HELP slurm_jobs_failed Job records in this state (pending includes held jobs; an unsplit array counts once).
            # TYPE slurm_jobs_failed gauge
            slurm_jobs_failed{cluster="fixture"} 0
            # HELP slurm_jobs_timeout Job records in this state (pending includes held jobs; an unsplit array counts once).
            # TYPE slurm_jobs_timeout gauge
            slurm_jobs_timeout{cluster="fixture"} 0
            # HELP slurm_jobs_node_failed Job records in this state (pending includes held jobs; an unsplit array counts once).
            # TYPE slurm_jobs_node_failed gauge
            slurm_jobs_node_failed{cluster="fixture"} 0
            # HELP slurm_jobs_preempted Job records in this state (pending includes held jobs; an unsplit array counts once).
            # TYPE slurm_jobs_preempted gauge
            slurm_jobs_preempted{cluster="fixture"} 0
            # HELP slurm_jobs_bootfail Job records in this state (pending includes held jobs; an unsplit array counts once).
            # TYPE slurm_jobs_bootfail gauge
            slurm_jobs_bootfail{cluster="fixture"} 0
            # HELP slurm_jobs_deadline Job records in this state (pending includes held jobs; an unsplit array counts once).
            # TYPE slurm_jobs_deadline gauge
            slurm_jobs_deadline{cluster="fixture"} 0
            # HELP slurm_jobs_outofmemory Job records in this state (pending includes held jobs; an unsplit array counts once).
            # TYPE slurm_jobs_outofmemory gauge
            slurm_jobs_outofmemory{cluster="fixture"} 0
            # HELP slurm_jobs_hold Pending jobs held by their user or an admin.
            # TYPE slurm_jobs_hold gauge
            slurm_jobs_hold{cluster="fixture"} 1
            # HELP slurm_jobs_cpus_alloc CPUs allocated to running and suspended jobs.
            # TYPE slurm_jobs_cpus_alloc gauge
            slurm_jobs_cpus_alloc{cluster="fixture"} 20
            # HELP slurm_jobs_gpus_alloc GPUs allocated to running and suspended jobs.
            # TYPE slurm_jobs_gpus_alloc gauge
            slurm_jobs_gpus_alloc{cluster="fixture"} 2
            # HELP slurm_jobs_nodes_alloc Distinct nodes running jobs.
            # TYPE slurm_jobs_nodes_alloc gauge
            slurm_jobs_nodes_alloc{cluster="fixture"} 2
            # HELP slurm_origin_jobs Pending and running job records by origin: batch, or kubernetes (placeholders pods are scheduled through, such as Slinky slurm-bridge's).
            # TYPE slurm_origin_jobs gauge
            slurm_origin_jobs{cluster="fixture",origin="batch",state="pending"} 3
            slurm_origin_jobs{cluster="fixture",origin="batch",state="running"} 2
            slurm_origin_jobs{cluster="fixture",origin="kubernetes",state="pending"} 0
            slurm_origin_jobs{cluster="fixture",origin="kubernetes",state="running"} 0
            # HELP slurm_kubernetes_pods Kubernetes pods waiting for or running on Slurm nodes, from the pod lists of the placeholder jobs that carry one.
            # TYPE slurm_kubernetes_pods gauge
            slurm_kubernetes_pods{cluster="fixture",state="pending"} 0
            slurm_kubernetes_pods{cluster="fixture",state="running"} 0
            # HELP slurm_exporter_malformed_admin_comments Jobs whose admin comment looked like a pod list (slurm-bridge's mark) but was not one: counted as batch jobs.
            # TYPE slurm_exporter_malformed_admin_comments gauge
            slurm_exporter_malformed_admin_comments{cluster="fixture"} 0
            # HELP slurm_partition_jobs Jobs of the partition not yet finished (pending, running, suspended, completing).
            # TYPE slurm_partition_jobs gauge
            slurm_partition_jobs{cluster="fixture",partition="cpu"} 3
            slurm_partition_jobs{cluster="fixture",partition="gpu"} 2
            # HELP slurm_partition_jobs_pending Job records in this state (pending includes held jobs; an unsplit array counts once).
            # TYPE slurm_partition_jobs_pending gauge
            slurm_partition_jobs_pending{cluster="fixture",partition="cpu"} 2
            slurm_partition_jobs_pending{cluster="fixture",partition="gpu"} 1
            # HELP slurm_partition_jobs_running Job records in this state (pending includes held jobs; an unsplit array counts once).
            # TYPE slurm_partition_jobs_running gauge
            slurm_partition_jobs_running{cluster="fixture",partition="cpu"} 1
            slurm_partition_jobs_running{cluster="fixture",partition="gpu"} 1
            # HELP slurm_partition_jobs_suspended Job records in this state (pending includes held jobs; an unsplit array counts once).
            # TYPE slurm_partition_jobs_suspended gauge
            slurm_partition_jobs_suspended{cluster="fixture",partition="cpu"} 0
            slurm_partition_jobs_suspended{cluster="fixture",partition="gpu"} 0
            # HELP slurm_partition_jobs_completing Job records in this state (pending includes held jobs; an unsplit array counts once).
            # TYPE slurm_partition_jobs_completing gauge
            slurm_partition_jobs_completing{cluster="fixture",partition="cpu"} 0
            slurm_partition_jobs_completing{cluster="fixture",partition="gpu"} 0
            # HELP slurm_partition_jobs_completed Job records in this state (pending includes held jobs; an unsplit array counts once).
            # TYPE slurm_partition_jobs_completed gauge
            slurm_partition_jobs_completed{cluster="fixture",partition="cpu"} 0
            slurm_partition_jobs_completed{cluster="fixture",partition="gpu"} 0
            # HELP slurm_partition_jobs_cancelled Job records in this state (pending includes held jobs; an unsplit array counts once).
            # TYPE slurm_partition_jobs_cancelled gauge
            slurm_partition_jobs_cancelled{cluster="fixture",partition="cpu"} 0
            slurm_partition_jobs_cancelled{cluster="fixture",partition="gpu"} 0
            # HELP slurm_partition_jobs_failed Job records in this state (pending includes held jobs; an unsplit array counts once).
            # TYPE slurm_partition_jobs_failed gauge
            slurm_partition_jobs_failed{cluster="fixture",partition="cpu"} 0
            slurm_partition_jobs_failed{cluster="fixture",partition="gpu"} 0
            # HELP slurm_partition_jobs_timeout Job records in this state (pending includes held jobs; an unsplit array counts once).
            # TYPE slurm_partition_jobs_timeout gauge
            slurm_partition_jobs_timeout{cluster="fixture",partition="cpu"} 0
            slurm_partition_jobs_timeout{cluster="fixture",partition="gpu"} 0
            # HELP slurm_partition_jobs_node_failed Job records in this state (pending includes held jobs; an unsplit array counts once).
            # TYPE slurm_partition_jobs_node_failed gauge
            slurm_partition_jobs_node_failed{cluster="fixture",partition="cpu"} 0
            slurm_partition_jobs_node_failed{cluster="fixture",partition="gpu"} 0
            # HELP slurm_partition_jobs_preempted Job records in this state (pending includes held jobs; an unsplit array counts once).
            # TYPE slurm_partition_jobs_preempted gauge
            slurm_partition_jobs_preempted{cluster="fixture",partition="cpu"} 0
            slurm_partition_jobs_preempted{cluster="fixture",partition="gpu"} 0
            # HELP slurm_partition_jobs_bootfail Job records in this state (pending includes held jobs; an unsplit array counts once).
            # TYPE slurm_partition_jobs_bootfail gauge
            slurm_partition_jobs_bootfail{cluster="fixture",partition="cpu"} 0
            slurm_partition_jobs_bootfail{cluster="fixture",partition="gpu"} 0
            # HELP slurm_partition_jobs_deadline Job records in this state (pending includes held jobs; an unsplit array counts once).
            # TYPE slurm_partition_jobs_deadline gauge
            slurm_partition_jobs_deadline{cluster="fixture",partition="cpu"} 0
            slurm_partition_jobs_deadline{cluster="fixture",partition="gpu"} 0
            # HELP slurm_partition_jobs_outofmemory Job records in this state (pending includes held jobs; an unsplit array counts once).
            # TYPE slurm_partition_jobs_outofmemory gauge
            slurm_partition_jobs_outofmemory{cluster="fixture",partition="cpu"} 0
            slurm_partition_jobs_outofmemory{cluster="fixture",partition="gpu"} 0
            # HELP slurm_partition_jobs_hold Pending jobs of the partition held by their user or an admin.
            # TYPE slurm_partition_jobs_hold gauge
            slurm_partition_jobs_hold{cluster="fixture",partition="cpu"} 1
            slurm_partition_jobs_hold{cluster="fixture",partition="gpu"} 0
            # HELP slurm_partition_origin_jobs Pending and running job records by origin: batch, or kubernetes (placeholders pods are scheduled through, such as Slinky slurm-bridge's).
            # TYPE slurm_partition_origin_jobs gauge
            slurm_partition_origin_jobs{cluster="fixture",partition="cpu",origin="batch",state="pending"} 2
            slurm_partition_origin_jobs{cluster="fixture",partition="cpu",origin="batch",state="running"} 1
            slurm_partition_origin_jobs{cluster="fixture",partition="cpu",origin="kubernetes",state="pending"} 0
            slurm_partition_origin_jobs{cluster="fixture",partition="cpu",origin="kubernetes",state="running"} 0
            slurm_partition_origin_jobs{cluster="fixture",partition="gpu",origin="batch",state="pending"} 1
            slurm_partition_origin_jobs{cluster="fixture",partition="gpu",origin="batch",state="running"} 1
            slurm_partition_origin_jobs{cluster="fixture",partition="gpu",origin="kubernetes",state="pending"} 0
            slurm_partition_origin_jobs{cluster="fixture",partition="gpu",origin="kubernetes",state="running"} 0
            # HELP slurm_partition_kubernetes_pods Kubernetes pods waiting for or running on Slurm nodes, from the pod lists of the placeholder jobs that carry one.
            # TYPE slurm_partition_kubernetes_pods gauge
            slurm_partition_kubernetes_pods{cluster="fixture",partition="cpu",state="pending"} 0
            slurm_partition_kubernetes_pods{cluster="fixture",partition="cpu",state="running"} 0
            slurm_partition_kubernetes_pods{cluster="fixture",partition="gpu",state="pending"} 0
            slurm_partition_kubernetes_pods{cluster="fixture",partition="gpu",state="running"} 0
            # HELP slurm_partition_jobs_cpus_alloc CPUs allocated to the partition's running and suspended jobs.
            # TYPE slurm_partition_jobs_cpus_alloc gauge
            slurm_partition_jobs_cpus_alloc{cluster="fixture",partition="cpu"} 4
            slurm_partition_jobs_cpus_alloc{cluster="fixture",partition="gpu"} 16
            # HELP slurm_partition_jobs_gpus_alloc GPUs allocated to the partition's running and suspended jobs.
            # TYPE slurm_partition_jobs_gpus_alloc gauge
            slurm_partition_jobs_gpus_alloc{cluster="fixture",partition="cpu"} 0
            slurm_partition_jobs_gpus_alloc{cluster="fixture",partition="gpu"} 2
            # HELP slurm_partition_jobs_max_job_nodes Largest node count (max of requested min and max nodes) over the partition's pending jobs; 0 when none.
            # TYPE slurm_partition_jobs_max_job_nodes gauge
            slurm_partition_jobs_max_job_nodes{cluster="fixture",partition="cpu"} 2
            slurm_partition_jobs_max_job_nodes{cluster="fixture",partition="gpu"} 1
            # HELP slurm_partition_jobs_max_job_nodes_nohold As slurm_partition_jobs_max_job_nodes, held jobs left out.
            # TYPE slurm_partition_jobs_max_job_nodes_nohold gauge
            slurm_partition_jobs_max_job_nodes_nohold{cluster="fixture",partition="cpu"} 2
            slurm_partition_jobs_max_job_nodes_nohold{cluster="fixture",partition="gpu"} 1
            # HELP slurm_partition_jobs_min_job_nodes Largest requested minimum node count over the partition's pending jobs; 0 when none.
            # TYPE slurm_partition_jobs_min_job_nodes gauge
            slurm_partition_jobs_min_job_nodes{cluster="fixture",partition="cpu"} 2
            slurm_partition_jobs_min_job_nodes{cluster="fixture",partition="gpu"} 1
            # HELP slurm_partition_jobs_min_job_nodes_nohold As slurm_partition_jobs_min_job_nodes, held jobs left out.
            # TYPE slurm_partition_jobs_min_job_nodes_nohold gauge
            slurm_partition_jobs_min_job_nodes_nohold{cluster="fixture",partition="cpu"} 2
            slurm_partition_jobs_min_job_nodes_nohold{cluster="fixture",partition="gpu"} 1
            # HELP slurm_partition_jobs_pending_reason Pending jobs of the partition by the reason slurmctld gives (Resources, Priority, Dependency, ...).
            # TYPE slurm_partition_jobs_pending_reason gauge
            slurm_partition_jobs_pending_reason{cluster="fixture",partition="cpu",reason="JobHeldUser"} 1
            slurm_partition_jobs_pending_reason{cluster="fixture",partition="cpu",reason="Resources"} 1
            slurm_partition_jobs_pending_reason{cluster="fixture",partition="gpu",reason="Resources"} 1
            # HELP slurm_user_jobs Job records of the user.
            # TYPE slurm_user_jobs gauge
            slurm_user_jobs{cluster="fixture",username="alice"} 2
            slurm_user_jobs{cluster="fixture",username="bob"} 1
            slurm_user_jobs{cluster="fixture",username="carol"} 2
            # HELP slurm_user_jobs_pending Pending jobs of the user.
            # TYPE slurm_user_jobs_pending gauge
            slurm_user_jobs_pending{cluster="fixture",username="alice"} 1
            slurm_user_jobs_pending{cluster="fixture",username="bob"} 1
            slurm_user_jobs_pending{cluster="fixture",username="carol"} 1
            # HELP slurm_user_jobs_running Running jobs of the user.
            # TYPE slurm_user_jobs_running gauge
            slurm_user_jobs_running{cluster="fixture",username="alice"} 1
            slurm_user_jobs_running{cluster="fixture",username="bob"} 0
            slurm_user_jobs_running{cluster="fixture",username="carol"} 1
            # HELP slurm_account_jobs Job records of the account.
            # TYPE slurm_account_jobs gauge
            slurm_account_jobs{cluster="fixture",account="ml"} 2
            slurm_account_jobs{cluster="fixture",account="physics"} 3
            # HELP slurm_account_jobs_pending Pending jobs of the account.
            # TYPE slurm_account_jobs_pending gauge
            slurm_account_jobs_pending{cluster="fixture",account="ml"} 1
            slurm_account_jobs_pending{cluster="fixture",account="physics"} 2
            # HELP slurm_account_jobs_running Running jobs of the account.
            # TYPE slurm_account_jobs_running gauge
            slurm_account_jobs_running{cluster="fixture",account="ml"} 1
            slurm_account_jobs_running{cluster="fixture",account="physics"} 1
            
            "#,
        );
    }
}
