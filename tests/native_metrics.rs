//! slurmctld's own metrics beside ours, on the real Slurm 26.05: its OpenMetrics endpoints
//! (`MetricsType=metrics/openmetrics`, `/metrics/{jobs,nodes,partitions,scheduler}` on the
//! slurmctld port — what Slinky 1.x reads instead of an exporter) and our exporter, scraped
//! together on one cluster state: idle nodes, a queue with a pending array, held and waiting
//! jobs, running CPU and GPU jobs, a drained node, FUTURE nodes and powered-down CLOUD
//! records. Every family both publish must agree series by series, or differ only by a rule
//! of the table in docs/metrics.md ("Beside slurmctld's own metrics"), which this test reads:
//! a row per family that differs, its rule named in the last column.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use support::{Metrics, Process, SlurmCluster, repo_root, wait_until};

/// Series of a family by their labels (without `cluster`), as `name -> labels -> value`.
type Page = BTreeMap<String, BTreeMap<Vec<(String, String)>, f64>>;

fn page(m: &Metrics) -> Page {
    let mut out = Page::new();
    for (name, labels, value) in &m.0 {
        let labels: Vec<(String, String)> = labels
            .iter()
            .filter(|(k, _)| k != "cluster")
            .cloned()
            .collect();
        out.entry(name.clone()).or_default().insert(labels, *value);
    }
    out
}

/// slurmctld's own page: every endpoint of its metrics, in one.
async fn native(cluster: &SlurmCluster) -> Metrics {
    let mut text = String::new();
    for endpoint in ["jobs", "nodes", "partitions", "scheduler"] {
        let url = format!("{}/metrics/{endpoint}", cluster.ctld_url);
        let body = reqwest::get(&url)
            .await
            .unwrap_or_else(|e| panic!("GET {url}: {e}"))
            .text()
            .await
            .unwrap();
        text.push_str(&body);
    }
    Metrics::parse(&text)
}

/// The documented differences: family → rule, from the table in docs/metrics.md.
fn documented() -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(repo_root().join("docs/metrics.md")).unwrap();
    let section = text
        .split("## Beside slurmctld's own metrics")
        .nth(1)
        .expect("docs/metrics.md has a section \"Beside slurmctld's own metrics\"");
    section
        .lines()
        .take_while(|l| !l.starts_with("## "))
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let family = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            let rule = cells.get(cells.len().checked_sub(2)?)?.trim_matches('`');
            Some((family.to_string(), rule.to_string()))
        })
        .collect()
}

/// What a rule lets differ between slurmctld's value and ours for one series (`None` where
/// the series is not on that side), given the cluster state.
fn allowed(
    (family, rule): (&str, &str),
    series: &[(String, String)],
    native: Option<f64>,
    ours: Option<f64>,
    state: &State,
) -> bool {
    let node = series
        .iter()
        .find(|(k, _)| k == "node")
        .map(|(_, v)| v.as_str());
    match rule {
        // slurmctld's `_bytes` families carry MiB.
        "mib" => {
            matches!((native, ours), (Some(n), Some(o)) if n * 1_048_576.0 == o)
                || future_only(node, native, ours, state)
        }
        // As `mib`; and where no slurmd reported free memory (FUTURE nodes, powered-down
        // records), slurmctld says 0 and we leave the series out: unknown is not none.
        "mib-free" => {
            allowed((family, "mib"), series, native, ours, state)
                || (native == Some(0.0) && ours.is_none())
        }
        // slurmctld lists FUTURE nodes (no slurmd yet, hidden from REST /nodes) per node.
        "future-nodes" => future_only(node, native, ours, state),
        // slurmctld adds the configured CPUs or GPUs of FUTURE nodes to the partition's.
        "future-in-partition" => {
            let partition = series
                .iter()
                .find(|(k, _)| k == "partition")
                .map(|(_, v)| v);
            let future = partition.and_then(|p| state.future_in_partition.get(p.as_str()));
            matches!((native, ours, future), (Some(n), Some(o), Some(f)) if n - o == f.for_rule(family))
        }
        // slurmctld counts every task of a pending array not split yet; we count the record.
        "array-tasks" => {
            matches!((native, ours), (Some(n), Some(o)) if n == o + state.unsplit_extra)
        }
        other => panic!("docs/metrics.md names a rule this test does not know: {other}"),
    }
}

fn future_only(node: Option<&str>, native: Option<f64>, ours: Option<f64>, state: &State) -> bool {
    ours.is_none() && native.is_some() && node.is_some_and(|n| state.future.contains(n))
}

/// What the rules need to know of the cluster.
struct State {
    future: BTreeSet<String>,
    /// Tasks of pending arrays not split yet, beyond one a record.
    unsplit_extra: f64,
    /// The configured CPUs and GPUs of each partition's FUTURE nodes.
    future_in_partition: BTreeMap<&'static str, Configured>,
}

struct Configured {
    cpus: f64,
    gpus: f64,
}

impl Configured {
    fn for_rule(&self, family: &str) -> f64 {
        if family.contains("gpus") {
            self.gpus
        } else {
            self.cpus
        }
    }
}

/// The differences between the two pages in the families both publish, by family.
fn differences(native: &Page, ours: &Page) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for (family, theirs) in native {
        let Some(mine) = ours.get(family) else {
            continue;
        };
        let keys: BTreeSet<_> = theirs.keys().chain(mine.keys()).collect();
        let diffs: Vec<String> = keys
            .into_iter()
            .filter(|k| theirs.get(*k) != mine.get(*k))
            .map(|k| {
                format!(
                    "{k:?}: slurmctld {:?}, ours {:?}",
                    theirs.get(k),
                    mine.get(k)
                )
            })
            .collect();
        if !diffs.is_empty() {
            out.insert(family.clone(), diffs);
        }
    }
    out
}

#[tokio::test]
async fn every_family_both_publish_agrees_or_differs_by_a_documented_rule() {
    let cluster = SlurmCluster::get("26.05");
    let _turn = support::turn("26.05").await;
    let _ = cluster.cmd("scancel").arg("--user=root").status();
    let sbatch = |args: &[&str]| cluster.submit(&[args, &["--wrap", "sleep 600"]].concat());
    // Running: a 2-node CPU job, a GPU job; pending: an array not split yet, a held job, one
    // waiting on a begin time, a GPU job too wide for what is free.
    sbatch(&["-p", "cpu", "-N", "2", "-n", "4"]);
    sbatch(&["-p", "gpu", "--gres=gpu:2", "-c", "3", "--mem=2000"]);
    let started = wait_until(Duration::from_secs(60), || async {
        cluster
            .run("squeue", &["-h", "-t", "R", "-o", "%i"])
            .lines()
            .count()
            == 2
    })
    .await;
    assert!(started, "the running jobs did not start");
    sbatch(&["-p", "elastic", "--array=1-6"]);
    sbatch(&["-p", "cpu", "--hold"]);
    sbatch(&["-p", "cpu", "--begin", "now+3600"]);
    sbatch(&["-p", "gpu", "-N", "2", "--gres=gpu:4"]);
    cluster.run(
        "scontrol",
        &[
            "update",
            "nodename=c4",
            "state=drain",
            "reason=native comparison",
        ],
    );
    // Two powered-down CLOUD records in the power-saving partition (as a slurm-planned
    // NodeSet keeps them); slurmctld starts saving power on them once it reloads.
    for i in 0..2 {
        let record =
            format!("NodeName=planned-{i} Feature=planned CPUs=4 RealMemory=8000 State=CLOUD");
        cluster.run("scontrol", &["create", &record]);
    }
    cluster.run("scontrol", &["reconfigure"]);
    // SuspendTime (10 s) and SuspendTimeout (5 s) are the timers; the rest gets slack.
    let powered_down = wait_until(Duration::from_secs(60), || async {
        let out = cluster.run("sinfo", &["-h", "-N", "-p", "planned", "-o", "%T"]);
        out.lines().filter(|l| l.trim() == "idle~").count() == 2
    })
    .await;
    assert!(powered_down, "the CLOUD records are not powered down");
    // e1-e8, FUTURE: 4 CPUs and 2 GPUs each (slurm.sh).
    let state = State {
        future: cluster.elastic_nodes.iter().cloned().collect(),
        unsplit_extra: 5.0,
        future_in_partition: [(
            "elastic",
            Configured {
                cpus: 32.0,
                gpus: 16.0,
            },
        )]
        .into(),
    };

    let key = cluster.key_file.to_string_lossy().into_owned();
    let exporter = Process::start(
        &[
            "exporter",
            "--no-kubernetes",
            "--interval",
            "1s",
            "--jwt-key-file",
            &key,
        ],
        &[
            ("SLURM_REST_URL", &cluster.url),
            ("SLURM_USER", &cluster.user),
            ("SLURM_CLUSTER", &cluster.name),
        ],
    );
    exporter.wait_ready(Duration::from_secs(30)).await;
    let rules = documented();
    // Both sides settle within a few seconds (slurmctld counts jobs every few seconds too):
    // compare until the two pages differ only as the table says, or show what is left.
    let left = std::cell::RefCell::new(BTreeMap::new());
    let settled = wait_until(Duration::from_secs(60), || async {
        let (theirs, mine) = (
            page(&native(&cluster).await),
            page(&exporter.metrics().await),
        );
        let now: BTreeMap<String, Vec<String>> = differences(&theirs, &mine)
            .into_iter()
            .filter_map(|(family, diffs)| {
                let rule = rules.get(&family);
                let ok = rule.is_some_and(|rule| {
                    let (t, m) = (&theirs[&family], &mine[&family]);
                    t.keys().chain(m.keys()).all(|k| {
                        t.get(k) == m.get(k)
                            || allowed(
                                (family.as_str(), rule),
                                k,
                                t.get(k).copied(),
                                m.get(k).copied(),
                                &state,
                            )
                    })
                });
                (!ok).then_some((family, diffs))
            })
            .collect();
        let settled = now.is_empty();
        *left.borrow_mut() = now;
        settled
    })
    .await;
    let left = left.into_inner();
    cluster.run("scontrol", &["update", "nodename=c4", "state=resume"]);
    let _ = cluster.cmd("scancel").arg("--user=root").status();
    for i in 0..2 {
        let _ = cluster
            .cmd("scontrol")
            .args(["delete", &format!("nodename=planned-{i}")])
            .status();
    }
    assert!(
        settled,
        "families that differ beyond the table in docs/metrics.md:\n{}",
        left.iter()
            .map(|(f, d)| format!(
                "{f} ({}):\n  {}",
                rules.get(f).map_or("no rule", String::as_str),
                d.join("\n  ")
            ))
            .collect::<Vec<_>>()
            .join("\n")
    );
    // And every documented rule is about a family both still publish.
    let both: BTreeSet<String> = {
        let (theirs, mine) = (
            page(&native(&cluster).await),
            page(&exporter.metrics().await),
        );
        theirs
            .keys()
            .filter(|k| mine.contains_key(*k))
            .cloned()
            .collect()
    };
    let stale: Vec<_> = rules.keys().filter(|f| !both.contains(*f)).collect();
    assert!(
        stale.is_empty(),
        "documented but not published by both: {stale:?}"
    );
}
