//! Slurm as a Slinky 1.1+ site configures it. The real slurm-operator renders slurm.conf from
//! a site's values for Slinky's own chart (`tests/harness/site/values.yaml`: NodeSets `alpha`
//! with GPUs, `bravo` plain and preferred by Weight, `charlie` with the feature `fastscratch`;
//! the chart's default partition `all` over every NodeSet and a partition `cpu` over the two
//! CPU ones), and the harness runs Slurm 26.05, and 24.11 (whose REST the operator reaches
//! through the v0.0.44 proxy), on that file, changed only by
//! `tests/harness/operator-conf.sh`'s table (`kube.sh site-start`). On each, one autoscaler per
//! NodeSet grows, for each pending job, only the NodeSet Slurm would run it on (a job larger
//! than one NodeSet may be, the next ones too for the rest); the operator makes the pods,
//! each job runs, and everything returns to zero.
//!
//! `tests/run.sh` starts the site with the operator, for the operator's tests; alone:
//! `tests/harness/kube.sh operator-start && tests/harness/kube.sh site-start`.

mod support;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;
use slurmscale_autoscaler::crd::NodeSetAutoscaler;
use slurmscale_exporter::k8s::nodeset::v1beta1;
use slurmscale_exporter::model::grows::of_nodeset;
use support::{Metrics, Process, SlurmCluster, kube_client, repo_root};

const TABLE: &str = "tests/harness/operator-conf.sh";
/// The site's NodeSets, by their name in Slurm (and the values' key).
const NODESETS: [&str; 3] = ["alpha", "bravo", "charlie"];

/// The chart's name for the site's objects: its release (the cluster's name) and `-slurm`.
fn chart_name(cluster: &SlurmCluster) -> String {
    format!("{}-slurm", cluster.name)
}

/// NodeSet `name` of the site as the chart names it.
fn nodeset_of(cluster: &SlurmCluster, name: &str) -> String {
    format!("{}-worker-{name}", chart_name(cluster))
}
const SLURMD_PODS: &str = "app.kubernetes.io/name=slurmd";

/// The namespace and Slurm of the site on Slurm `release`; fails with what to run when it is
/// not up.
fn site(release: &str) -> (String, SlurmCluster) {
    let flavor = format!("site-{release}");
    assert!(
        support::run_dir()
            .join(format!("slurm-{flavor}/env"))
            .exists(),
        "the site on Slurm {release} is not up: run tests/harness/kube.sh operator-start && \
         tests/harness/kube.sh site-start (tests/run.sh does, for the operator's tests)"
    );
    (
        format!("site-{}", release.replace('.', "")),
        SlurmCluster::get(&flavor),
    )
}

/// The operator's render of the site's values for `cluster`, as recorded (see [`renders`]).
fn recorded(cluster: &str) -> String {
    format!("tests/harness/site/operator-slurm-{cluster}.conf")
}

/// The `KEY=` keys operator-conf.sh's table changes or adds.
fn table_keys() -> Vec<String> {
    let table = std::fs::read_to_string(repo_root().join(TABLE)).unwrap();
    table
        .lines()
        .filter_map(|l| {
            l.strip_prefix("replace ")
                .or_else(|| l.strip_prefix("add "))
        })
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect()
}

fn key(line: &str) -> &str {
    line.split('=').next().unwrap_or_default()
}

/// operator-conf.sh on `render` (a file's text), for run dir `dir`.
fn substitute(render: &str, dir: &str) -> std::process::Output {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), render).unwrap();
    Command::new(repo_root().join(TABLE))
        .arg(file.path())
        .args([dir, "14817", "14818"])
        .output()
        .unwrap()
}

/// The table on the operator's recorded render: each entry changes its one line, or adds
/// its line, and nothing else; no address, port or path of the operator's pods is left; a
/// render without one of the keys it replaces (or with one it adds) is refused, not run.
#[test]
fn the_harness_changes_only_the_lines_of_its_table() {
    let render = std::fs::read_to_string(repo_root().join(recorded("site2605"))).unwrap();
    let out = substitute(&render, "/run/x");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ours = String::from_utf8(out.stdout).unwrap();
    let keys = table_keys();
    assert!(keys.len() >= 15, "{keys:?}");
    let theirs: Vec<&str> = render.lines().collect();
    let changed: Vec<&str> = ours.lines().filter(|l| !theirs.contains(l)).collect();
    let mut changed_keys: Vec<&str> = changed.iter().map(|l| key(l)).collect();
    changed_keys.sort();
    let mut want: Vec<&str> = keys.iter().map(String::as_str).collect();
    want.sort();
    assert_eq!(changed_keys, want, "lines changed: {changed:?}");
    // Every line of the operator's that is not in the table is kept as it is.
    for line in theirs.iter().filter(|l| !l.is_empty()) {
        if !keys.iter().any(|k| k == key(line)) {
            assert!(ours.lines().any(|l| l == *line), "{line:?} lost");
        }
    }
    for gone in [
        "/etc/slurm",
        "/var/spool",
        "/var/log",
        "=6817",
        "=6818",
        "-controller",
        "cgroup",
    ] {
        assert!(
            !ours
                .lines()
                .any(|l| l.contains(gone) && !l.starts_with('#')),
            "{gone} left in:\n{ours}"
        );
    }
    assert!(ours.contains("StateSaveLocation=/run/x/state"));
    assert!(ours.contains("SlurmdPort=14818"));
    // A render that moved a key the table replaces, or wrote one it adds.
    let without = render.replace("\nTaskPlugin=", "\n#TaskPlugin=");
    let out = substitute(&without, "/run/x");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("TaskPlugin is on 0 lines"));
    let with = format!("{render}SlurmdPidFile=/run/slurmd.pid\n");
    let out = substitute(&with, "/run/x");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("SlurmdPidFile is already"));
}

/// The real operator renders, from the site's values, the file recorded beside them, and
/// the Slurm the harness runs has exactly that file through the table.
async fn renders(release: &str) {
    let (ns, cluster) = site(release);
    let maps: Api<ConfigMap> = Api::namespaced(kube_client().await, &ns);
    let config = format!("{}-config", chart_name(&cluster));
    let live = maps.get(&config).await.unwrap();
    let live = live.data.unwrap_or_default();
    let live = live.get("slurm.conf").expect("the operator's slurm.conf");
    let file = recorded(&cluster.name);
    let recorded = std::fs::read_to_string(repo_root().join(&file)).unwrap();
    assert_eq!(
        live.trim_end(),
        recorded.trim_end(),
        "slurm-operator renders another slurm.conf from tests/harness/site/values.yaml than \
         {file}: if the values or the operator changed on purpose, record it again from \
         ConfigMap {ns}/{config}"
    );
    let running = std::fs::read_to_string(&cluster.conf).unwrap();
    let dir = cluster.conf.parent().unwrap().parent().unwrap();
    let out = substitute(live, &dir.to_string_lossy());
    let ours = String::from_utf8(out.stdout).unwrap();
    let port = |text: &str, k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .map(String::from)
    };
    // The same file but for the ports, which the harness passes from its own base.
    let ours = ours
        .replace(
            "SlurmctldPort=14817",
            &format!("SlurmctldPort={}", port(&running, "SlurmctldPort").unwrap()),
        )
        .replace(
            "SlurmdPort=14818",
            &format!("SlurmdPort={}", port(&running, "SlurmdPort").unwrap()),
        );
    assert_eq!(running, ours);
}

/// Waits for `check`, saying `what`, the site's queue and nodes, the autoscalers' statuses
/// and the autoscaler's log when it does not hold.
async fn until(
    what: &str,
    within: Duration,
    c: &SlurmCluster,
    a: &Process,
    check: impl AsyncFn() -> bool,
) {
    if support::wait_until(within, || check()).await {
        return;
    }
    let nsas: Api<NodeSetAutoscaler> = Api::all(kube_client().await);
    let statuses: Vec<String> = nsas
        .list(&ListParams::default())
        .await
        .map(|l| {
            l.items
                .iter()
                .filter(|n| n.spec.slurm.cluster.as_deref() == Some(&c.name))
                .map(|n| format!("{:?}: {:?}", n.metadata.name, n.status))
                .collect()
        })
        .unwrap_or_default();
    // What the site's pods did (the harness's stand-in for their kubelet): pods up, down,
    // replaced, records deleted.
    let pods_log = support::run_dir().join(format!("kube/log/operator-pods-{}.log", c.flavor));
    let pods = std::fs::read_to_string(&pods_log).unwrap_or_default();
    let pods: Vec<&str> = pods.lines().rev().take(40).collect();
    panic!(
        "{what}: not within {within:?}\nsqueue:\n{}\nsinfo:\n{}\nautoscalers:\n{}\nautoscaler logs:\n{}\nthe pods ({}, last 40 lines):\n{}",
        c.run("squeue", &["-o", "%i %P %T %r %N %C %b %f"]),
        c.run("sinfo", &["-N", "-a"]),
        statuses.join("\n"),
        a.logs(),
        pods_log.display(),
        pods.into_iter().rev().collect::<Vec<_>>().join("\n")
    );
}

/// NodeSetAutoscaler `name` on NodeSet `nodeset` (the README's, 0-2 replicas, keeping node
/// records so slurmctld takes a job that needs a feature or a GPU while there is no pod),
/// made anew.
async fn autoscaler_of(
    nsas: &Api<NodeSetAutoscaler>,
    cluster: &SlurmCluster,
    name: &str,
    nodeset: &str,
) {
    let nsa = support::elastic::readme_nsa(cluster, (name, nodeset), 2);
    let _ = nsas.delete(name, &DeleteParams::default()).await;
    support::wait_until(Duration::from_secs(10), || async {
        nsas.get_opt(name).await.is_ok_and(|n| n.is_none())
    })
    .await;
    nsas.create(&PostParams::default(), &nsa).await.unwrap();
}

/// squeue's count of jobs in `partition` in `state`.
fn squeue_count(c: &SlurmCluster, partition: &str, state: &str) -> f64 {
    c.run("squeue", &["-h", "-p", partition, "-t", state, "-o", "%i"])
        .lines()
        .count() as f64
}

/// Nodes of each partition by base state (`future`, `idle`, `allocated`, …) as `scontrol`
/// says, FUTURE records included.
fn node_states(c: &SlurmCluster) -> BTreeMap<(String, String), f64> {
    let mut states = BTreeMap::new();
    for line in c
        .run("scontrol", &["-o", "--future", "show", "node"])
        .lines()
    {
        let field = |k: &str| line.split_whitespace().find_map(|w| w.strip_prefix(k));
        let (Some(state), Some(partitions)) = (field("State="), field("Partitions=")) else {
            continue;
        };
        let base = state
            .split('+')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        for p in partitions.split(',') {
            *states.entry((p.to_string(), base.clone())).or_default() += 1.0;
        }
    }
    states
}

/// The exporter says what squeue and scontrol say of both partitions: jobs pending and
/// running, nodes in all and by base state.
async fn slurm_figures_agree(c: &SlurmCluster, m: &Metrics) -> bool {
    // A series missing is a disagreement, not a 0.
    let part = |name: &str, p: &str| m.get(name, &[("partition", p)]).unwrap_or(-1.0);
    let states = node_states(c);
    let count = |p: &str, base: &str| {
        states
            .get(&(p.to_string(), base.to_string()))
            .copied()
            .unwrap_or(0.0)
    };
    ["all", "cpu"].iter().all(|p| {
        let total: f64 = states
            .iter()
            .filter(|((q, _), _)| q == p)
            .map(|(_, n)| n)
            .sum();
        part("slurm_partition_jobs_pending", p) == squeue_count(c, p, "PD")
            && part("slurm_partition_jobs_running", p) == squeue_count(c, p, "R")
            && part("slurm_partition_nodes", p) == total
            && [
                ("alloc", "allocated"),
                ("idle", "idle"),
                ("mixed", "mixed"),
                ("down", "down"),
                ("future", "future"),
            ]
            .iter()
            .all(|(suffix, base)| {
                part(&format!("slurm_partition_nodes_{suffix}"), p) == count(p, base)
            })
    })
}

/// The exporter says what squeue and scontrol say of both partitions, and each NodeSet's
/// desired nodes are its autoscaler's replicas (the exporter's rule is the autoscaler's).
async fn figures_agree(
    c: &SlurmCluster,
    e: &Process,
    ns: &str,
    replicas: &BTreeMap<&str, i32>,
) -> bool {
    let m: Metrics = e.metrics().await;
    slurm_figures_agree(c, &m).await
        && NODESETS.iter().all(|name| {
            // One series a partition the NodeSet serves: each says the same.
            let desired = m.all(
                "slurm_nodeset_desired_nodes",
                &[("namespace", ns), ("nodeset", &nodeset_of(c, name))],
            );
            let want = replicas.get(name).map(|r| *r as f64);
            !desired.is_empty() && desired.iter().all(|d| Some(*d) == want)
        })
}

/// No job, no autoscaler, no pod and no node record left by an earlier run.
async fn reset(
    cluster: &SlurmCluster,
    nsas: &Api<NodeSetAutoscaler>,
    nodesets: &Api<v1beta1::NodeSet>,
    pods: &Api<Pod>,
) {
    let _ = cluster.cmd("scancel").arg("--user=root").status();
    for name in NODESETS {
        let _ = nsas.delete(name, &DeleteParams::default()).await;
        let zero = json!({"spec": {"replicas": 0}});
        let _ = nodesets
            .patch(
                &nodeset_of(cluster, name),
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&zero),
            )
            .await;
    }
    let gone = support::wait_until(Duration::from_secs(120), || async {
        pods.list(&ListParams::default().labels(SLURMD_PODS))
            .await
            .is_ok_and(|l| l.items.is_empty())
            && cluster.run("squeue", &["-h"]).trim().is_empty()
    })
    .await;
    assert!(gone, "the site's pods or jobs of an earlier run did not go");
    for name in NODESETS {
        for i in 0..4 {
            let _ = cluster
                .cmd("scontrol")
                .args(["delete", &format!("nodename={name}-{i}")])
                .output();
        }
    }
}

#[tokio::test]
async fn the_operator_renders_the_recorded_slurm_conf_on_26_05() {
    renders("26.05").await
}

#[tokio::test]
async fn the_operator_renders_the_recorded_slurm_conf_on_24_11() {
    renders("24.11").await
}

#[tokio::test]
async fn each_job_grows_only_the_nodeset_slurm_would_run_it_on_and_all_returns_to_zero_on_26_05() {
    grows("26.05").await
}

#[tokio::test]
async fn each_job_grows_only_the_nodeset_slurm_would_run_it_on_and_all_returns_to_zero_on_24_11() {
    grows("24.11").await
}

async fn grows(release: &str) {
    let (ns, cluster) = site(release);
    let client = kube_client().await;
    let nsas: Api<NodeSetAutoscaler> = Api::namespaced(client.clone(), &ns);
    let nodesets: Api<v1beta1::NodeSet> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    reset(&cluster, &nsas, &nodesets, &pods).await;
    for name in NODESETS {
        autoscaler_of(&nsas, &cluster, name, &nodeset_of(&cluster, name)).await;
    }
    let lease = format!("{ns}-lease");
    let a = support::elastic::scontrol_autoscaler(&client, &cluster, &lease).await;
    let e = support::exporter(&cluster, &support::kubeconfig_path());
    let replicas = async || {
        let mut r = BTreeMap::new();
        for name in NODESETS {
            let nodeset = nodeset_of(&cluster, name);
            r.insert(
                name,
                support::elastic::spec_replicas(&nodesets, &nodeset).await,
            );
        }
        r
    };
    until(
        "the autoscalers' FUTURE records of every NodeSet",
        Duration::from_secs(60),
        &cluster,
        &a,
        async || {
            NODESETS.iter().all(|n| {
                (0..2).all(|i| {
                    cluster
                        .node_record(&format!("{n}-{i}"))
                        .contains("State=FUTURE")
                })
            })
        },
    )
    .await;

    // Five jobs at zero pods, in the site's default partition `all` (over every NodeSet): one
    // that needs a GPU (only alpha has them), one that needs `fastscratch` (only charlie), a
    // plain one (all three fit it; bravo has the lowest Weight), a plain one excluding every
    // node bravo may have (charlie, the next by Weight), and one no NodeSet can run
    // (more nodes than the NodeSets may have together: 26.05 takes it and leaves it pending,
    // 24.11 refuses it at submit, as the node records give the partition its full size).
    // Each takes its node whole: the chart sets no default memory, so a job gets all of its
    // node's. They run until cancelled: a job that ended before a slower NodeSet's node came
    // up would free its node for a job meant for that NodeSet, and the figures compared
    // below would move while being compared.
    let sleep = ["--wrap", "sleep 600"];
    let gpu = cluster.submit(&[&["--gres=gpu:1", "-c", "2"][..], &sleep].concat());
    let feature = cluster.submit(&[&["--constraint=fastscratch", "-c", "2"][..], &sleep].concat());
    // (Submitted before the plain job, so it comes first to a charlie node that is up first.)
    let excluding = cluster.submit(&[&["-c", "2", "--exclude=bravo-[0-1]"][..], &sleep].concat());
    let plain = cluster.submit(&[&["-c", "2"][..], &sleep].concat());
    let too_large = [
        "--parsable",
        "-o",
        "/dev/null",
        "-N",
        "7",
        "--wrap",
        "sleep 1",
    ];
    let never = if release == "24.11" {
        let out = cluster.cmd("sbatch").args(too_large).output().unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && said.contains("Requested node configuration is not available"),
            "{said}"
        );
        None
    } else {
        Some(cluster.submit(&too_large[3..]))
    };
    let want: BTreeMap<&str, i32> = [("alpha", 1), ("bravo", 1), ("charlie", 2)].into();
    let most = std::cell::RefCell::new(BTreeMap::<&str, i32>::new());
    let runnable = [
        (&gpu, "alpha"),
        (&feature, "charlie"),
        (&plain, "bravo"),
        (&excluding, "charlie"),
    ];
    until(
        "each runnable job running at once, on one node of its NodeSet each",
        Duration::from_secs(180),
        &cluster,
        &a,
        async || {
            let now = replicas().await;
            for (k, v) in &now {
                let m = *most.borrow().get(k).unwrap_or(&0);
                most.borrow_mut().insert(k, m.max(*v));
            }
            runnable.iter().all(|(job, nodeset)| {
                cluster
                    .run("squeue", &["-h", "-j", job, "-o", "%T %N"])
                    .starts_with(&format!("RUNNING {nodeset}-"))
            })
        },
    )
    .await;
    // None grew for a job another NodeSet runs, and none for the job nobody can run.
    assert_eq!(
        *most.borrow(),
        want,
        "the most replicas each NodeSet had; autoscaler log:\n{}",
        a.logs()
    );
    assert_eq!(replicas().await, want);
    // Each NodeSet that grew learned how long its nodes took from the scale-up to register
    // in Slurm (the operator's pods, played by the harness, within seconds).
    until(
        "every NodeSet's boot time learned from its nodes",
        Duration::from_secs(20),
        &cluster,
        &a,
        async || {
            let mut learned = 0;
            for name in NODESETS {
                let status = nsas.get(name).await.ok().and_then(|n| n.status);
                let boot = status.and_then(|s| s.boot_time).unwrap_or_default();
                let seconds = boot.split('s').next().and_then(|s| s.parse::<u32>().ok());
                learned += usize::from(boot.contains("learned from") && seconds < Some(60));
            }
            learned == NODESETS.len()
        },
    )
    .await;
    if let Some(never) = &never {
        assert_eq!(support::elastic::job_state(&cluster, never), "PENDING");
    }
    // The exporter agrees with squeue and with the autoscalers, and counts the job nobody
    // can run as such, in the partition it waits in.
    let now = replicas().await;
    until(
        "the exporter's figures equal squeue's and the autoscalers'",
        Duration::from_secs(20),
        &cluster,
        &a,
        async || figures_agree(&cluster, &e, &ns, &now).await,
    )
    .await;
    let m = e.metrics().await;
    assert_eq!(
        m.get(
            "slurm_partition_demand_unsatisfiable_jobs",
            &[("partition", "all")]
        ),
        Some(if never.is_some() { 1.0 } else { 0.0 }),
        "{}",
        e.logs()
    );

    for (job, _) in runnable {
        let _ = cluster.cmd("scancel").arg(job).status();
    }
    // The jobs end and every NodeSet goes back to zero; the pods' preStop deletes their
    // records and the autoscalers make them again, so the partition `cpu` has its full size
    // (4 records) for the next job. (Submitted while charlie's pods were going, with their
    // records deleted and not yet made again, it would be refused, as a site's would be.)
    until(
        "the first jobs ended, every NodeSet at 0 and its FUTURE records back",
        Duration::from_secs(200),
        &cluster,
        &a,
        async || {
            replicas().await.values().all(|r| *r == 0)
                && NODESETS.iter().all(|n| {
                    (0..2).all(|i| {
                        cluster
                            .node_record(&format!("{n}-{i}"))
                            .contains("State=FUTURE")
                    })
                })
        },
    )
    .await;
    // A job of the partition `cpu` needing 3 nodes, more than bravo may have (2): bravo grows
    // to its bound for it and charlie, next by Weight, by one for the rest; counted whole on
    // bravo, it would be more than bravo may have, and nothing would grow for it.
    let wide = cluster.submit(&["-p", "cpu", "-N", "3", "--wrap", "sleep 10"]);
    let hosts = std::cell::RefCell::new(Vec::<String>::new());
    let bravo_most = std::cell::Cell::new(0);
    let charlie_most = std::cell::Cell::new(0);
    until(
        "the 3-node job running on nodes of bravo and charlie, bravo grown to 2 for it",
        Duration::from_secs(150),
        &cluster,
        &a,
        async || {
            let now = replicas().await;
            bravo_most.set(bravo_most.get().max(now["bravo"]));
            charlie_most.set(charlie_most.get().max(now["charlie"]));
            let state = cluster.run("squeue", &["-h", "-j", &wide, "-o", "%T %N"]);
            if let Some(list) = state.trim().strip_prefix("RUNNING ") {
                let names = cluster.run("scontrol", &["show", "hostnames", list]);
                *hosts.borrow_mut() = names.lines().map(String::from).collect();
            }
            hosts.borrow().len() == 3 && bravo_most.get() == 2
        },
    )
    .await;
    let on = |n: &str| hosts.borrow().iter().filter(|h| of_nodeset(h, n)).count();
    assert_eq!((on("bravo"), on("charlie")), (2, 1), "{:?}", hosts.borrow());
    assert_eq!(charlie_most.get(), 1, "autoscaler log:\n{}", a.logs());
    // Once it ends, the NodeSets go back to zero: sampled on the way, the exporter's Slurm
    // figures still say what squeue and scontrol say (its desired nodes drop at once, the
    // replicas only after the idle timeout, so those are compared at zero below).
    until(
        "the 3-node job ended",
        Duration::from_secs(60),
        &cluster,
        &a,
        async || {
            cluster
                .run("squeue", &["-h", "-j", &wide])
                .trim()
                .is_empty()
        },
    )
    .await;
    until(
        "the exporter's Slurm figures equal squeue's and scontrol's while scaling down",
        Duration::from_secs(20),
        &cluster,
        &a,
        async || slurm_figures_agree(&cluster, &e.metrics().await).await,
    )
    .await;

    // The jobs end; nobody can run the last one: it goes too. Back to zero: the operator
    // drains each node and deletes its pod.
    if let Some(never) = &never {
        let _ = cluster.cmd("scancel").arg(never).status();
    }
    until(
        "every NodeSet back at 0 and the operator's pods gone",
        Duration::from_secs(200),
        &cluster,
        &a,
        async || {
            replicas().await.values().all(|r| *r == 0)
                && pods
                    .list(&ListParams::default().labels(SLURMD_PODS))
                    .await
                    .is_ok_and(|l| l.items.is_empty())
        },
    )
    .await;
    until(
        "the exporter's figures equal squeue's and the autoscalers' at zero",
        Duration::from_secs(20),
        &cluster,
        &a,
        async || figures_agree(&cluster, &e, &ns, &replicas().await).await,
    )
    .await;
    for name in NODESETS {
        let _ = nsas.delete(name, &DeleteParams::default()).await;
    }
}
