//! Colocation against both real Slurms and the real kube-apiserver: a pool of four Kubernetes
//! nodes (c1–c4 of the cpu partition, each with a GenericNode), a NodeSet with one pod on
//! each, and jobs of different sizes on them. The test plays everything that is not ours:
//! the scheduler (marks a pod Unschedulable, later places it), slurm-operator (deletes the pod
//! marked to go, adds one when replicas rise) and the ledger writer (GenericNode status).
//!
//! On 24.11 and 26.05 the NodeSet is the one Slinky's own chart renders (`slurm-worker-cpu`,
//! pod host name `cpu-`), and the autoscaler serves its partition by that name alone.
//! Slurm 22.05 has no REST node update, so there the autoscaler drains with `scontrol`.
//! Both tests drain nodes of the cpu partition of their own cluster, so they run side by side.

mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use slurmscale_autoscaler::actuator::POD_DELETION_COST;
use slurmscale_autoscaler::crd::NodeSetAutoscaler;
use slurmscale_exporter::k8s::genericnode::GenericNode;
use slurmscale_exporter::k8s::nodeset::v1beta1;
use support::{Process, SlurmCluster, autoscaler, kube_client, namespace, unique};

const NODES: [&str; 4] = ["c1", "c2", "c3", "c4"];

/// How long a running autoscaler has to act on a change (drain, hand-over, metrics, growth).
/// Generous on purpose: these tests check what it does; how fast it reacts is measured by
/// `cargo bench -p slurmscale-autoscaler --bench reaction`.
const ACTS: Duration = Duration::from_secs(40);

/// As [`ACTS`], for an autoscaler just started: its start, its lease and its first full look
/// come first.
const STARTS_AND_ACTS: Duration = Duration::from_secs(60);

/// Cancels the cpu partition's jobs and lifts every drain on its nodes.
fn reset_cpu(cluster: &SlurmCluster) {
    let _ = cluster
        .cmd("scancel")
        .args(["--user=root", "--partition=cpu"])
        .status();
    for n in NODES {
        // Fails harmlessly on a node that is not drained.
        let _ = cluster
            .cmd("scontrol")
            .args(["update", &format!("nodename={n}"), "state=resume"])
            .output();
    }
}

/// (state, reason) as sinfo says, e.g. ("draining", "slurmscale: capacity for Kubernetes").
fn node_state(cluster: &SlurmCluster, node: &str) -> (String, String) {
    let out = cluster.run("sinfo", &["-h", "-N", "-n", node, "-o", "%T|%E"]);
    let line = out.lines().next().unwrap_or_default();
    let (state, reason) = line.split_once('|').unwrap_or((line, ""));
    (state.trim().to_string(), reason.trim().to_string())
}

fn drained_by_us(cluster: &SlurmCluster, node: &str) -> bool {
    let (state, reason) = node_state(cluster, node);
    state.starts_with("drain") && reason.starts_with("slurmscale:")
}

/// A job of `tasks` CPUs on `node` with a time limit of `minutes` (the planner drains the
/// node whose work ends soonest among those running the fewest jobs, so a test that expects a
/// node must not leave it to which job started a second earlier).
fn sbatch(cluster: &SlurmCluster, node: &str, tasks: u32, minutes: u32) -> String {
    cluster.submit(&[
        "-p",
        "cpu",
        "-w",
        node,
        "-N1",
        "-n",
        &tasks.to_string(),
        "--mem=100",
        "--time",
        &minutes.to_string(),
        "--wrap",
        "sleep 600",
    ])
}

fn ledger_status(slurm_cpu: &str, k8s_cpu: &str) -> Value {
    json!({"status": {"allocatedResources": [
        {"type": "Slurm", "allocated": {"cpu": slurm_cpu, "memory": "8Gi"}},
        {"type": "Kubernetes", "allocated": {"cpu": k8s_cpu, "memory": "1Gi"}},
    ]}})
}

/// Everything one test made in Kubernetes, to look at and clean up.
struct Pool {
    ns: String,
    name: String,
    cluster: SlurmCluster,
    pods: Api<Pod>,
    nodes: Api<Node>,
    gns: Api<GenericNode>,
    nodesets: Api<v1beta1::NodeSet>,
    autoscalers: Api<NodeSetAutoscaler>,
    /// The NodeSet's name: `cpu`, or `slurm-worker-cpu` as Slinky's chart names it.
    nodeset: &'static str,
}

/// A test that fails leaves no autoscaler object behind: the next test's autoscaler watches
/// every namespace and would act on it, on the same Slurm nodes, and fail that test too. Its
/// jobs are cancelled and drains lifted as well.
impl Drop for Pool {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        support::elastic::delete_while_unwinding(&self.autoscalers, "cpu");
        reset_cpu(&self.cluster);
    }
}

impl Pool {
    fn k8s_node(&self, slurm_node: &str) -> String {
        format!("{}-{slurm_node}", self.name)
    }

    /// A NodeSet pod on the Kubernetes node of `slurm_node` (what slurm-operator would run).
    async fn add_slurmd_pod(&self, slurm_node: &str) {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("slurmd-{slurm_node}"), "labels": {"app": format!("slurmd-{}", self.name)}},
            "spec": {"nodeName": self.k8s_node(slurm_node), "containers": [{"name": "slurmd", "image": "slurmd"}]},
        }))
        .unwrap();
        self.pods
            .create(&PostParams::default(), &pod)
            .await
            .unwrap();
    }

    async fn set_nodeset_replicas_status(&self, replicas: u32) {
        let status = json!({"status": {"replicas": replicas, "readyReplicas": replicas,
            "selector": format!("app=slurmd-{}", self.name), "nodeSetHash": "test"}});
        self.nodesets
            .patch_status(self.nodeset, &PatchParams::default(), &Patch::Merge(status))
            .await
            .unwrap();
    }

    async fn replicas(&self) -> i32 {
        self.nodesets
            .get(self.nodeset)
            .await
            .unwrap()
            .spec
            .replicas
            .unwrap_or(0)
    }

    async fn ledger(&self, slurm_node: &str, slurm_cpu: &str, k8s_cpu: &str) {
        self.gns
            .patch_status(
                &self.k8s_node(slurm_node),
                &PatchParams::default(),
                &Patch::Merge(ledger_status(slurm_cpu, k8s_cpu)),
            )
            .await
            .unwrap();
    }

    /// A pod of 6 CPUs bound to `slurm_node`'s Kubernetes node, which Slurm's reclaim may
    /// evict (label `borrow: yes`); gone at once when deleted (no kubelet here to wait for).
    async fn borrowing_pod(&self, name: &str, slurm_node: &str) {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"borrow": "yes"}},
            "spec": {"nodeName": self.k8s_node(slurm_node), "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "web", "image": "web",
                    "resources": {"requests": {"cpu": "6", "memory": "1Gi"}}}]},
        }))
        .unwrap();
        self.pods
            .create(&PostParams::default(), &pod)
            .await
            .unwrap();
        // Running and ready, as its kubelet would report it: a budget guards only such pods
        // (the Eviction API lets a pending one go whatever its budget says).
        let status = json!({"status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}]}});
        self.pods
            .patch_status(name, &PatchParams::default(), &Patch::Merge(status))
            .await
            .unwrap();
    }

    /// The hand-over of `slurm_node` carried out as the others would: slurm-operator removes
    /// its NodeSet pod (`replicas` left), the scheduler binds the waiting pod `web` there as
    /// a borrowing pod, and the ledger shows it.
    async fn borrows(&self, slurm_node: &str, web: &str, replicas: u32) {
        let now = DeleteParams::default().grace_period(0);
        let slurmd = format!("slurmd-{slurm_node}");
        self.pods.delete(&slurmd, &now).await.unwrap();
        self.set_nodeset_replicas_status(replicas).await;
        self.pods.delete(web, &now).await.unwrap();
        self.borrowing_pod(web, slurm_node).await;
        self.ledger(slurm_node, "0", "6").await;
    }

    /// A pod the scheduler could not place: 6 CPUs, which no pool node has free.
    async fn unschedulable_pod(&self, name: &str, node_selector: Value) {
        self.unschedulable_pod_with(name, json!({"nodeSelector": node_selector}))
            .await;
    }

    /// As [`Self::unschedulable_pod`], with `spec` (placement) merged into the pod's spec.
    async fn unschedulable_pod_with(&self, name: &str, spec: Value) {
        let mut pod = json!({
            "metadata": {"name": name, "labels": {"app": format!("web-{}", self.name)}},
            "spec": {"containers": [{"name": "web", "image": "web",
                "resources": {"requests": {"cpu": "6", "memory": "1Gi"}}}]},
        });
        merge(&mut pod["spec"], spec);
        self.create_unschedulable(name, pod).await;
    }

    /// A pod of the NodeSet that kube-scheduler found no node for, as it reports one.
    async fn unschedulable_nodeset_pod(&self, name: &str) {
        let pod = json!({
            "metadata": {"name": name, "labels": {"app": format!("slurmd-{}", self.name)}},
            "spec": {"containers": [{"name": "slurmd", "image": "slurmd"}]},
        });
        self.create_unschedulable(name, pod).await;
    }

    /// Creates `pod` and reports it Pending and unschedulable, as kube-scheduler would.
    async fn create_unschedulable(&self, name: &str, pod: Value) {
        let pod: Pod = serde_json::from_value(pod).unwrap();
        self.pods
            .create(&PostParams::default(), &pod)
            .await
            .unwrap();
        let status = json!({"status": {"phase": "Pending", "conditions": [{"type": "PodScheduled",
            "status": "False", "reason": "Unschedulable", "message": "0/4 nodes are available: 4 Insufficient cpu."}]}});
        self.pods
            .patch_status(name, &PatchParams::default(), &Patch::Merge(status))
            .await
            .unwrap();
    }

    async fn marked_to_go(&self, slurm_node: &str) -> bool {
        self.pods
            .get(&format!("slurmd-{slurm_node}"))
            .await
            .ok()
            .and_then(|p| p.metadata.annotations)
            .is_some_and(|a| a.contains_key(POD_DELETION_COST))
    }

    async fn status(&self) -> String {
        let nsa = self.autoscalers.get("cpu").await.ok();
        format!("{:#?}", nsa.and_then(|n| n.status))
    }

    /// Whether the autoscaler's condition `type_` is True.
    async fn condition(&self, type_: &str) -> bool {
        self.autoscalers
            .get("cpu")
            .await
            .ok()
            .and_then(|n| n.status)
            .is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == type_ && c.status == "True")
            })
    }

    /// Waits up to `within` for `check`; on failure shows Slurm's nodes, the autoscaler's
    /// status and logs.
    async fn eventually(
        &self,
        what: &str,
        within: Duration,
        p: &Process,
        check: impl AsyncFn() -> bool,
    ) {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if check().await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        self.fail(&format!("{what}: not within {within:?}"), p)
            .await;
    }

    /// Checks that `check` keeps holding for `during`.
    async fn stays(
        &self,
        what: &str,
        during: Duration,
        p: &Process,
        check: impl AsyncFn() -> bool,
    ) {
        let deadline = Instant::now() + during;
        while Instant::now() < deadline {
            if !check().await {
                self.fail(&format!("{what}: broke within {during:?}"), p)
                    .await;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    async fn fail(&self, what: &str, p: &Process) -> ! {
        let sinfo = self
            .cluster
            .run("sinfo", &["-N", "-p", "cpu", "-o", "%N %T %C %E"]);
        panic!(
            "Slurm {}: {what}\nsinfo:\n{sinfo}\nstatus: {}\nautoscaler logs:\n{}",
            self.cluster.flavor,
            self.status().await,
            p.logs()
        );
    }

    async fn cleanup(self) {
        let _ = self
            .autoscalers
            .delete("cpu", &DeleteParams::default())
            .await;
        for n in NODES {
            let _ = self
                .gns
                .delete(&self.k8s_node(n), &DeleteParams::default())
                .await;
            let _ = self
                .nodes
                .delete(&self.k8s_node(n), &DeleteParams::default())
                .await;
        }
        reset_cpu(&self.cluster);
    }
}

/// Tests of one Slurm's cpu partition take turns.
static CPU_2205: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
static CPU_2411: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
static CPU_2605: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn turn(cluster: &SlurmCluster) -> tokio::sync::MutexGuard<'static, ()> {
    match cluster.flavor.as_str() {
        "22.05" => CPU_2205.lock().await,
        "24.11" => CPU_2411.lock().await,
        _ => CPU_2605.lock().await,
    }
}

/// The pool, the NodeSet with its four pods, and the autoscaler object (minSlurmNodes 2,
/// cooldown 3 s, demand only from this test's pods), each Kubernetes node also given
/// `decorate(slurm_node)` (labels, taints: a Node object to merge). With `chart`, the NodeSet
/// is the one Slinky's own chart renders (`slurm-worker-cpu`, pod host name `cpu-`: Slurm's
/// `cpu`) and the autoscaler names no partition, so it serves the NodeSet's own.
async fn setup(cluster: &SlurmCluster, decorate: impl Fn(&str) -> Value, chart: bool) -> Pool {
    reset_cpu(cluster);
    let client = kube_client().await;
    let ns = namespace(&client, "coloc").await;
    let pool = Pool {
        name: unique("pool"),
        cluster: cluster.clone(),
        pods: Api::namespaced(client.clone(), &ns),
        nodes: Api::all(client.clone()),
        gns: Api::all(client.clone()),
        nodesets: Api::namespaced(client.clone(), &ns),
        autoscalers: Api::namespaced(client.clone(), &ns),
        nodeset: if chart { "slurm-worker-cpu" } else { "cpu" },
        ns,
    };
    for n in NODES {
        let name = pool.k8s_node(n);
        let mut node = json!({"metadata": {"name": name}});
        merge(&mut node, decorate(n));
        let node: Node = serde_json::from_value(node).unwrap();
        pool.nodes
            .create(&PostParams::default(), &node)
            .await
            .unwrap();
        // The API server taints a new Node not-ready (the node lifecycle controller, which
        // this harness lacks, lifts it once the kubelet reports): the test lifts it instead,
        // leaving only the taints the case asked for.
        let taints = json!({"spec": {"taints": decorate(n)["spec"]["taints"].as_array().cloned().unwrap_or_default()}});
        pool.nodes
            .patch(&name, &PatchParams::default(), &Patch::Merge(taints))
            .await
            .unwrap();
        let allocatable = json!({"status": {"allocatable": {"cpu": "8", "memory": "16Gi"}}});
        pool.nodes
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(allocatable))
            .await
            .unwrap();
        let gn: GenericNode = serde_json::from_value(json!({
            "apiVersion": "kai.alibabacloud.com/v1alpha1", "kind": "GenericNode",
            "metadata": {"name": name, "labels": {"kai.alibabacloud.com/cluster-name": pool.name}},
            "spec": {"alias": n, "type": "Slurm"},
        }))
        .unwrap();
        pool.gns.create(&PostParams::default(), &gn).await.unwrap();
        pool.ledger(n, "8", "0").await;
        pool.add_slurmd_pod(n).await;
    }
    if chart {
        support::elastic::chart_nodesets(&client, &pool.ns, None, &["cpu"]).await;
        let four = json!({"spec": {"replicas": 4}});
        pool.nodesets
            .patch(pool.nodeset, &PatchParams::default(), &Patch::Merge(four))
            .await
            .unwrap();
    } else {
        let spec = v1beta1::NodeSetSpec {
            replicas: Some(4),
            ..Default::default()
        };
        pool.nodesets
            .create(&PostParams::default(), &v1beta1::NodeSet::new("cpu", spec))
            .await
            .unwrap();
    }
    pool.set_nodeset_replicas_status(4).await;
    let slurm = if chart {
        json!({"cluster": cluster.name})
    } else {
        json!({"cluster": cluster.name, "partitions": ["cpu"]})
    };
    let nsa: NodeSetAutoscaler = serde_json::from_value(json!({
        "apiVersion": "slurmscale.io/v1alpha1", "kind": "NodeSetAutoscaler",
        "metadata": {"name": "cpu"},
        "spec": {
            "scaleTargetRef": {"name": pool.nodeset},
            "slurm": slurm,
            "minReplicas": 0, "maxReplicas": 4,
            "colocation": {
                "pool": pool.name, "minSlurmNodes": 2, "cooldownSeconds": 3,
                "podSelector": {"app": format!("web-{}", pool.name)},
            },
        }
    }))
    .unwrap();
    pool.autoscalers
        .create(&PostParams::default(), &nsa)
        .await
        .unwrap();
    pool
}

/// The autoscaler, with `scontrol` only where the REST API cannot drain (22.05): on 24.11
/// a drain that did not go over REST fails.
fn colocated_autoscaler(cluster: &SlurmCluster, lease_ns: &str, extra: &[&str]) -> Process {
    let scontrol = if cluster.api_versions.iter().any(|v| v == "v0.0.38") {
        cluster.bin.join("scontrol").to_string_lossy().into_owned()
    } else {
        "/nonexistent/scontrol".to_string()
    };
    let conf = cluster.conf.to_string_lossy().into_owned();
    let mut args = vec!["--scontrol", &scontrol, "--scontrol-conf", &conf];
    args.extend_from_slice(extra);
    autoscaler(cluster, lease_ns, &args)
}

/// Merges `extra` into `base`, objects key by key.
fn merge(base: &mut Value, extra: Value) {
    match (base, extra) {
        (Value::Object(b), Value::Object(e)) => {
            for (k, v) in e {
                merge(b.entry(k).or_insert(Value::Null), v);
            }
        }
        (b, e) => *b = e,
    }
}

async fn rebalances_the_pool(flavor: &str, chart: bool) {
    let cluster = SlurmCluster::get(flavor);
    let _turn = turn(&cluster).await;
    let pool = setup(&cluster, |_| json!({}), chart).await;
    // Different amounts of work on each node; c4 is drained by an administrator.
    // c3's job is the smallest and ends first: whichever rule breaks the tie, c3 is the node
    // to give.
    let jobs: Vec<String> = [("c1", 6, 60), ("c2", 4, 60), ("c3", 1, 30), ("c4", 3, 60)]
        .iter()
        .map(|(n, tasks, minutes)| sbatch(&cluster, n, *tasks, *minutes))
        .collect();
    let running = support::wait_until(Duration::from_secs(30), || async {
        let out = cluster.run("squeue", &["-h", "-p", "cpu", "-t", "R", "-o", "%i"]);
        jobs.iter().all(|j| out.lines().any(|l| l.trim() == j))
    })
    .await;
    assert!(running, "the jobs on c1-c4 did not start");
    cluster.run(
        "scontrol",
        &[
            "update",
            "nodename=c4",
            "state=drain",
            "reason=maintenance window",
        ],
    );
    let c4 = node_state(&cluster, "c4");

    // An autoscaler that cannot read the ledger (a GenericNode version nobody serves) moves
    // nothing, even with a pod waiting.
    // The second pod may only run on GPU nodes, which the pool has none of: it never counts.
    pool.unschedulable_pod("web", json!({})).await;
    pool.unschedulable_pod("gpu-web", json!({"gpu": "true"}))
        .await;
    let blind = colocated_autoscaler(&cluster, &pool.ns, &["--genericnode-version", "v1alpha9"]);
    pool.eventually(
        "frozen without a ledger",
        STARTS_AND_ACTS,
        &blind,
        async || pool.condition("Frozen").await,
    )
    .await;
    pool.stays(
        "no drain while frozen",
        Duration::from_secs(3),
        &blind,
        async || NODES.iter().all(|n| !drained_by_us(&cluster, n)) && pool.replicas().await == 4,
    )
    .await;
    drop(blind);

    // With the ledger: the node Slurm may best give (c3: one job on one CPU, ending first) is
    // drained for the pod; its replica stays until its job ends.
    let p = colocated_autoscaler(&cluster, &pool.ns, &[]);
    pool.eventually(
        "c3 drained for Kubernetes",
        STARTS_AND_ACTS,
        &p,
        async || drained_by_us(&cluster, "c3"),
    )
    .await;
    pool.stays(
        "the drain waits for c3's job",
        Duration::from_secs(3),
        &p,
        async || {
            pool.replicas().await == 4
                && !pool.marked_to_go("c3").await
                && ["c1", "c2"].iter().all(|n| !drained_by_us(&cluster, n))
                && job_running(&cluster, &jobs[2])
                && pool.condition("Reclaiming").await
        },
    )
    .await;
    assert_eq!(
        node_state(&cluster, "c4"),
        c4,
        "someone else's drain was touched"
    );

    pool.eventually(
        "the drain and the need in the metrics",
        ACTS,
        &p,
        async || {
            let m = p.metrics().await;
            let l = [("namespace", pool.ns.as_str()), ("autoscaler", "cpu")];
            let k8s = [l[0], l[1], ("owner", "kubernetes")];
            m.get("slurmscale_colocation_draining_nodes", &l) == Some(1.0)
                && m.get("slurmscale_colocation_need_nodes", &k8s) == Some(1.0)
                && m.get("slurmscale_colocation_nodes", &k8s) == Some(0.0)
        },
    )
    .await;

    // The job ends: c3's pod is marked to go first and replicas drop to 3.
    cluster.run("scancel", &[&jobs[2]]);
    pool.eventually("c3 handed to Kubernetes", ACTS, &p, async || {
        pool.replicas().await == 3 && pool.marked_to_go("c3").await
    })
    .await;
    // slurm-operator removes that pod; the scheduler places the waiting pod on the node (it
    // stops pending) and the ledger shows it there.
    pool.pods
        .delete("slurmd-c3", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    pool.set_nodeset_replicas_status(3).await;
    pool.pods
        .delete("web", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    pool.ledger("c3", "0", "6").await;
    pool.eventually(
        "the pool's new shares in the metrics",
        ACTS,
        &p,
        async || {
            let m = p.metrics().await;
            let owner = |o| {
                [
                    ("namespace", pool.ns.as_str()),
                    ("autoscaler", "cpu"),
                    ("owner", o),
                ]
            };
            m.get("slurmscale_colocation_nodes", &owner("slurm")) == Some(3.0)
                && m.get("slurmscale_colocation_nodes", &owner("kubernetes")) == Some(1.0)
        },
    )
    .await;
    pool.stays(
        "nothing more taken from Slurm",
        Duration::from_secs(3),
        &p,
        async || {
            pool.replicas().await == 3 && ["c1", "c2"].iter().all(|n| !drained_by_us(&cluster, n))
        },
    )
    .await;

    // Kubernetes is done with c3 and Slurm wants four nodes: replicas go back to 4, and once
    // slurm-operator has a pod on c3 again our drain there is lifted.
    pool.ledger("c3", "0", "0").await;
    let wide = cluster.submit(&["-p", "cpu", "-N4", "--exclusive", "--wrap", "sleep 600"]);
    pool.eventually("Slurm grows back to 4", ACTS, &p, async || {
        pool.replicas().await == 4
    })
    .await;
    // Had a Kubernetes pod stayed on c3, the NodeSet's fourth pod would find no room: the
    // plan says so and the metric counts it.
    pool.unschedulable_nodeset_pod("slurmd-waiting").await;
    pool.eventually(
        "the waiting NodeSet pod said and counted",
        ACTS,
        &p,
        async || {
            let said = (pool.status().await).contains("1 NodeSet pod(s) found no node with room");
            let m = p.metrics().await;
            let l = [("namespace", pool.ns.as_str()), ("autoscaler", "cpu")];
            said && m.get("slurmscale_colocation_unschedulable_pods", &l) == Some(1.0)
        },
    )
    .await;
    pool.pods
        .delete("slurmd-waiting", &DeleteParams::default())
        .await
        .unwrap();
    pool.add_slurmd_pod("c3").await;
    pool.set_nodeset_replicas_status(4).await;
    pool.eventually("our drain on c3 lifted", ACTS, &p, async || {
        !node_state(&cluster, "c3").0.starts_with("drain")
    })
    .await;
    assert_eq!(
        node_state(&cluster, "c4"),
        c4,
        "someone else's drain was touched"
    );
    let _ = cluster.cmd("scancel").arg(&wide).status();
    pool.cleanup().await;
}

fn job_running(cluster: &SlurmCluster, id: &str) -> bool {
    cluster.run("squeue", &["-h", "-j", id, "-o", "%T"]).trim() == "RUNNING"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebalances_a_pool_with_slurm_24_11_over_rest() {
    rebalances_the_pool("24.11", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebalances_a_pool_with_slurm_26_05_over_rest() {
    rebalances_the_pool("26.05", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebalances_a_pool_with_slurm_22_05_over_scontrol() {
    rebalances_the_pool("22.05", false).await;
}

/// Pending pods are placed by the pool nodes' labels and taints: the node drained for a pod
/// is one the pod could run on. Three pools on Slurm 24.11's c1-c4, each with one pending
/// pod that needs a whole node: a selector every pool node matches, a selector two of them
/// match (one of which is tainted), and a required affinity of `In`, `NotIn` and `Exists`
/// that one node matches — a busy one, though idle nodes are otherwise drained first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drains_a_node_the_pending_pod_may_use() {
    let cluster = SlurmCluster::get("24.11");
    let _turn = turn(&cluster).await;
    type Labels = fn(&str) -> Value;
    let cases: [(&str, Labels, Value, &[&str]); 3] = [
        (
            "nodeSelector matching every pool node",
            |_| json!({"metadata": {"labels": {"pool": "a"}}}),
            json!({"nodeSelector": {"pool": "a"}}),
            &["c2", "c3", "c4"],
        ),
        (
            "nodeSelector matching c3 and c4, c4 tainted",
            |n| {
                let rack = if n == "c3" || n == "c4" { "r2" } else { "r1" };
                let mut node = json!({"metadata": {"labels": {"rack": rack}}});
                if n == "c4" {
                    node["spec"] = json!({"taints": [{"key": "dedicated", "value": "slurm", "effect": "NoSchedule"}]});
                }
                node
            },
            json!({"nodeSelector": {"rack": "r2"}}),
            &["c3"],
        ),
        (
            "required affinity (In, NotIn, Exists) only c1 meets",
            |n| {
                let labels = match n {
                    "c1" => json!({"zone": "x", "ssd": "1"}),
                    "c2" => json!({"zone": "x", "ssd": "1", "rack": "old"}),
                    "c3" => json!({"zone": "y", "ssd": "1"}),
                    _ => json!({"zone": "x"}),
                };
                json!({"metadata": {"labels": labels}})
            },
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["x"]},
                {"key": "rack", "operator": "NotIn", "values": ["old"]},
                {"key": "ssd", "operator": "Exists"},
            ]}]}}}}),
            &["c1"],
        ),
    ];
    for (what, labels, placement, allowed) in cases {
        let pool = setup(&cluster, labels, false).await;
        // c1 runs a job, so an idle node would be drained first wherever the pod may go.
        let job = sbatch(&cluster, "c1", 1, 60);
        let running = support::wait_until(Duration::from_secs(30), || async {
            job_running(&cluster, &job)
        })
        .await;
        assert!(running, "the job on c1 did not start");
        pool.unschedulable_pod_with("web", placement).await;
        let p = colocated_autoscaler(&cluster, &pool.ns, &[]);
        pool.eventually(
            &format!("{what}: a node drained for the pod"),
            STARTS_AND_ACTS,
            &p,
            async || NODES.iter().any(|n| drained_by_us(&cluster, n)),
        )
        .await;
        pool.stays(
            &format!("{what}: only a node in {allowed:?} drained, and only one"),
            Duration::from_secs(2),
            &p,
            async || {
                let drained: Vec<&str> = NODES
                    .into_iter()
                    .filter(|n| drained_by_us(&cluster, n))
                    .collect();
                drained.len() == 1 && allowed.contains(&drained[0])
            },
        )
        .await;
        drop(p);
        pool.cleanup().await;
    }
}

/// A kube-scheduler the test started, killed (by its pid) when dropped.
struct Scheduler(std::process::Child);

impl Drop for Scheduler {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// examples/kube-scheduler/pack-pool-pods.yaml on the real kube-scheduler 1.37: run as a
/// second scheduler, its `pack` profile puts three pods on one of two nodes, leaving the
/// other empty for a NodeSet pod, where a profile with the default scoring (run beside it)
/// spreads the same pods over both. Both profiles see only the test's two Nodes, and under
/// names of their own, so no other test's pod is theirs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_packing_profile_packs_pool_pods_on_the_real_kube_scheduler() {
    let client = kube_client().await;
    let ns = namespace(&client, "pack").await;
    let example: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(
            support::repo_root().join("examples/kube-scheduler/pack-pool-pods.yaml"),
        )
        .unwrap(),
    )
    .unwrap();
    let pack = example["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["schedulerName"] == "pack")
        .expect("the example's `pack` profile")
        .clone();
    // Only the test's Nodes, for both profiles.
    let only_ours = json!({"name": "NodeAffinity", "args": {"addedAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "slurmscale.io/test-pool", "operator": "In", "values": [ns]}]}]}}}});
    let mut packed = pack.clone();
    packed["schedulerName"] = json!(format!("pack-{ns}"));
    packed["pluginConfig"]
        .as_array_mut()
        .unwrap()
        .push(only_ours.clone());
    let spread = json!({"schedulerName": format!("spread-{ns}"), "pluginConfig": [only_ours]});
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("scheduler.yaml");
    let kubeconfig = support::kubeconfig_path();
    std::fs::write(
        &config,
        serde_json::to_string(&json!({
            "apiVersion": example["apiVersion"], "kind": example["kind"],
            "clientConnection": {"kubeconfig": kubeconfig},
            "leaderElection": {"leaderElect": false},
            "profiles": [packed, spread],
        }))
        .unwrap(),
    )
    .unwrap();
    let bin = support::kube_env("HARNESS_KUBE_BIN")
        .expect("kube.sh env names HARNESS_KUBE_BIN: restart the harness (tests/harness/up.sh)");
    let log = dir.path().join("kube-scheduler.log");
    let _scheduler = Scheduler(
        std::process::Command::new(std::path::Path::new(&bin).join("kube-scheduler"))
            .arg(format!("--config={}", config.display()))
            .arg("--secure-port=0")
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start kube-scheduler"),
    );

    let nodes: Api<Node> = Api::all(client.clone());
    let names = [unique("pack-a"), unique("pack-b")];
    for name in &names {
        let node: Node = serde_json::from_value(json!({"metadata": {
            "name": name, "labels": {"slurmscale.io/test-pool": ns}}}))
        .unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();
        // Lift the not-ready taint the API server puts on a new Node (no kubelet here).
        let untaint = json!({"spec": {"taints": []}});
        nodes
            .patch(name, &PatchParams::default(), &Patch::Merge(untaint))
            .await
            .unwrap();
        let room = json!({"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "4", "pods": "110"});
        let status = json!({"status": {"capacity": room, "allocatable": room}});
        nodes
            .patch_status(name, &PatchParams::default(), &Patch::Merge(status))
            .await
            .unwrap();
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    // Three pods of a quarter node each, one after the other, under `scheduler`: the nodes
    // they were bound to.
    let place = async |scheduler: String| {
        let mut placed = std::collections::BTreeSet::new();
        for i in 0..3 {
            let name = format!("{scheduler}-{i}");
            let pod: Pod = serde_json::from_value(json!({
                "metadata": {"name": name},
                "spec": {"schedulerName": scheduler, "containers": [{"name": "work", "image": "work",
                    "resources": {"requests": {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"},
                                  "limits": {"nvidia.com/gpu": "1"}}}]},
            }))
            .unwrap();
            pods.create(&PostParams::default(), &pod).await.unwrap();
            let node_of = async || pods.get(&name).await.ok().and_then(|p| p.spec?.node_name);
            let bound = support::wait_until(Duration::from_secs(30), || async {
                node_of().await.is_some()
            })
            .await;
            assert!(
                bound,
                "{name} was never bound; kube-scheduler's log:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            placed.insert(node_of().await.unwrap());
        }
        placed
    };
    // A scheduler's three pods, forced out (no kubelet here to confirm a graceful end).
    let remove = async |scheduler: String| {
        for i in 0..3 {
            let _ = pods
                .delete(
                    &format!("{scheduler}-{i}"),
                    &DeleteParams::default().grace_period(0),
                )
                .await;
        }
    };
    let spread_nodes = place(format!("spread-{ns}")).await;
    let spread_on = spread_nodes.len();
    remove(format!("spread-{ns}")).await;
    let gone = support::wait_until(Duration::from_secs(30), || async {
        pods.list(&Default::default())
            .await
            .map(|l| l.items.is_empty())
            .unwrap_or(false)
    })
    .await;
    assert!(gone, "the spread pods did not go");
    let packed_nodes = place(format!("pack-{ns}")).await;
    remove(format!("pack-{ns}")).await;
    for name in &names {
        let _ = nodes.delete(name, &DeleteParams::default()).await;
    }
    assert_eq!(
        spread_on, 2,
        "the default scoring spreads: {spread_nodes:?}"
    );
    assert_eq!(
        packed_nodes.len(),
        1,
        "the example's profile packs the three pods onto one node: {packed_nodes:?}"
    );
}

/// How long a side below its share waits for borrowed nodes in [`shares_hold_for_both_sides`].
const RECLAIM: u64 = 20;

/// Shares on Slurm 24.11's c1-c4: Slurm's share is 3 of the 4 nodes, Kubernetes' the fourth.
/// Kubernetes gets the node beyond Slurm's share, then borrows one of Slurm's idle nodes;
/// Slurm's work rises to three nodes and the borrowed node comes back: reserved (tainted) at
/// once, its borrowing pod evicted after the reclaim time — but a PodDisruptionBudget that
/// allows no disruption is waited for and said, never forced; once it allows, the pod goes,
/// Slurm's pod lands and the job runs. Then a new pod waits, and Slurm keeps its share.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shares_hold_for_both_sides() {
    let cluster = SlurmCluster::get("24.11");
    let _turn = turn(&cluster).await;
    let pool = setup(&cluster, |_| json!({}), false).await;
    let client = kube_client().await;
    let shares = json!({"spec": {"colocation": {"minSlurmNodes": 0, "shares": {
        "slurm": 3, "reclaimSeconds": RECLAIM, "evictablePods": {"borrow": "yes"},
    }}}});
    pool.autoscalers
        .patch("cpu", &PatchParams::default(), &Patch::Merge(shares))
        .await
        .unwrap();
    let p = colocated_autoscaler(&cluster, &pool.ns, &[]);
    let drained = || {
        NODES
            .iter()
            .filter(|n| drained_by_us(&cluster, n))
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
    };

    // Kubernetes takes an idle node (Slurm holds 4, one beyond its share), then borrows a
    // second (Slurm has no work for its three): each drained, handed over, its pod placed.
    let mut k8s_nodes = Vec::new();
    for (i, web) in ["web1", "web2"].into_iter().enumerate() {
        pool.unschedulable_pod(web, json!({})).await;
        pool.eventually(
            &format!("a node drained for {web}"),
            STARTS_AND_ACTS,
            &p,
            async || drained().len() == i + 1,
        )
        .await;
        let node = drained()
            .into_iter()
            .find(|n| !k8s_nodes.contains(n))
            .unwrap();
        let replicas = 3 - i as i32;
        pool.eventually(&format!("{node} handed over"), ACTS, &p, async || {
            pool.replicas().await == replicas && pool.marked_to_go(&node).await
        })
        .await;
        pool.borrows(&node, web, replicas as u32).await;
        k8s_nodes.push(node);
    }

    // Slurm's work rises to three nodes: it is owed one. A PodDisruptionBudget keeps every
    // borrowing pod for now.
    let pdbs: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> =
        Api::namespaced(client.clone(), &pool.ns);
    let pdb = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"borrow": "yes"}}},
    }))
    .unwrap();
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    let job = cluster.submit(&["-p", "cpu", "-N3", "--exclusive", "--wrap", "sleep 600"]);
    let reserved = async || {
        let mut on = Vec::new();
        for n in &k8s_nodes {
            let node = pool.nodes.get(&pool.k8s_node(n)).await.unwrap();
            let taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
            if taints
                .iter()
                .any(|t| t.key == "slurmscale.io/reserved-for-slurm" && t.effect == "NoSchedule")
            {
                on.push(n.clone());
            }
        }
        on
    };
    pool.eventually(
        "one borrowed node reserved for Slurm, replicas 3",
        ACTS,
        &p,
        async || reserved().await.len() == 1 && pool.replicas().await == 3,
    )
    .await;
    let since = Instant::now();
    let node = reserved().await.remove(0);
    // Said in the status and the metrics: the shares, what Kubernetes borrows, the node
    // reserved, Slurm below its share.
    pool.eventually(
        "the shares in the status and metrics",
        ACTS,
        &p,
        async || {
            let nsa = pool.autoscalers.get("cpu").await.unwrap();
            let shares = nsa.status.and_then(|s| s.colocation).and_then(|c| c.shares);
            let said = shares.is_some_and(|s| {
                (
                    s.slurm_share_nodes,
                    s.kubernetes_share_nodes,
                    s.kubernetes_borrowed_nodes,
                ) == (3, 1, 1)
                    && s.reserved == [pool.k8s_node(&node)]
                    && s.slurm_below_share_since.is_some()
            });
            let m = p.metrics().await;
            let l = [("namespace", pool.ns.as_str()), ("autoscaler", "cpu")];
            let slurm = [l[0], l[1], ("owner", "slurm")];
            said && m.get("slurmscale_colocation_reserved_nodes", &l) == Some(1.0)
                && m.get("slurmscale_colocation_share_nodes", &slurm) == Some(3.0)
                && m.get("slurmscale_colocation_below_share_seconds", &slurm)
                    .is_some_and(|s| s > 0.0)
        },
    )
    .await;
    let web = if node == k8s_nodes[0] { "web1" } else { "web2" };
    let blocked = async || support::event_notes(&client, &pool.ns, "EvictionBlocked").await;
    pool.eventually(
        "the blocked eviction said",
        Duration::from_secs(RECLAIM) + ACTS,
        &p,
        async || {
            (blocked().await.iter()).any(|n| n.contains(web) && n.contains("PodDisruptionBudget"))
        },
    )
    .await;
    assert!(
        since.elapsed() >= Duration::from_secs(RECLAIM - 3),
        "evicted {:?} after the reservation, before the reclaim time ({RECLAIM} s)",
        since.elapsed()
    );
    pool.stays(
        "the pod kept while its budget allows no disruption",
        Duration::from_secs(3),
        &p,
        async || pool.pods.get(web).await.is_ok(),
    )
    .await;
    assert!(!job_running(&cluster, &job));

    // The budget allows it: the pod is evicted; the node empties (the ledger says so), Slurm's
    // pod lands, the reservation is lifted and our old drain there too, and the job runs.
    pdbs.delete("web", &DeleteParams::default()).await.unwrap();
    pool.eventually("the borrowing pod evicted", ACTS, &p, async || {
        pool.pods.get(web).await.is_err()
    })
    .await;
    let evicted = support::event_notes(&client, &pool.ns, "Evict").await;
    assert!(
        evicted.iter().any(|n| n.contains(&pool.k8s_node(&node))),
        "{evicted:?}"
    );
    pool.ledger(&node, "0", "0").await;
    pool.add_slurmd_pod(&node).await;
    pool.set_nodeset_replicas_status(3).await;
    pool.eventually(
        "the reservation and our drain lifted, the job running",
        ACTS,
        &p,
        async || {
            reserved().await.is_empty()
                && !drained_by_us(&cluster, &node)
                && job_running(&cluster, &job)
        },
    )
    .await;

    // Both sides hold their shares: a new pod waits, and no Slurm node is drained for it.
    pool.unschedulable_pod("web3", json!({})).await;
    pool.stays(
        "Slurm keeps its share",
        Duration::from_secs(6),
        &p,
        async || {
            drained()
                .iter()
                .all(|n| k8s_nodes.contains(n) && *n != node)
                && pool.replicas().await == 3
        },
    )
    .await;
    assert!(
        pool.status().await.contains("Slurm keeps its share"),
        "{}",
        pool.status().await
    );
    let _ = cluster.cmd("scancel").arg(&job).status();
    pool.cleanup().await;
}

/// `requeueAfterSeconds` in the requeue test: short, so the test is.
const REQUEUE: u64 = 10;

/// The longest between two full reads of the job list, and a look.
const FULL_READ: Duration = Duration::from_secs(90);

async fn full_job_list_reads(p: &Process) -> f64 {
    let full = [("request", "full")];
    let m = p.metrics().await;
    m.get("slurm_exporter_job_list_requests_total", &full)
        .unwrap_or(0.0)
}

/// A job on `node` with a time limit of `minutes`, and `extra` options.
fn sbatch_with(cluster: &SlurmCluster, node: &str, minutes: u32, extra: &[&str]) -> String {
    let minutes = minutes.to_string();
    let mut args = vec![
        "-p",
        "cpu",
        "-w",
        node,
        "-N1",
        "-n",
        "1",
        "--mem=100",
        "--time",
        &minutes,
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--wrap", "sleep 600"]);
    cluster.submit(&args)
}

fn restarts(cluster: &SlurmCluster, job: &str) -> String {
    let shown = cluster.run("scontrol", &["-o", "show", "job", job]);
    let field = shown
        .split_whitespace()
        .find(|w| w.starts_with("Restarts="));
    field.unwrap_or("Restarts=?").to_string()
}

/// With `requeueAfterSeconds` set, Kubernetes below its share takes back a node Slurm
/// borrowed before the job there ends: the node is drained at once, its job requeued by
/// slurmctld (the node set DOWN) once the drain is that old — not before — and the node
/// handed over. A job Slurm may not requeue (`--no-requeue`) is waited for, and Slurm keeps
/// its share.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn borrowed_nodes_come_back_by_requeue_past_the_requeue_time() {
    let cluster = SlurmCluster::get("24.11");
    let _turn = turn(&cluster).await;
    let pool = setup(&cluster, |_| json!({}), false).await;
    let client = kube_client().await;
    let shares = json!({"spec": {"colocation": {"minSlurmNodes": 0, "shares": {
        "slurm": 2, "requeueAfterSeconds": REQUEUE,
    }}}});
    pool.autoscalers
        .patch("cpu", &PatchParams::default(), &Patch::Merge(shares))
        .await
        .unwrap();
    // A job on each node, c1's ending first (so it is the one drained first), c2's not
    // requeueable; Slurm holds all four, two beyond its share.
    let jobs = [
        sbatch_with(&cluster, "c1", 10, &[]),
        sbatch_with(&cluster, "c2", 20, &["--no-requeue"]),
        sbatch_with(&cluster, "c3", 30, &[]),
        sbatch_with(&cluster, "c4", 40, &[]),
    ];
    let p = colocated_autoscaler(&cluster, &pool.ns, &[]);
    // Running, and in the autoscaler's job list: a node whose job it has yet to list ranks
    // last, which would make the first drain another node than c1.
    pool.eventually("all four jobs running", STARTS_AND_ACTS, &p, async || {
        jobs.iter().all(|j| job_running(&cluster, j))
    })
    .await;
    // The autoscaler's job list reads node lists whole at a full `/jobs`: one made after
    // the jobs run lets it rank c1 (ending first) first and know which jobs may be requeued.
    p.wait_ready(STARTS_AND_ACTS).await;
    let full_reads = full_job_list_reads(&p).await;
    pool.eventually("a full job list read", FULL_READ, &p, async || {
        full_job_list_reads(&p).await > full_reads
    })
    .await;

    pool.unschedulable_pod("web1", json!({})).await;
    pool.eventually("c1 drained for web1", ACTS, &p, async || {
        drained_by_us(&cluster, "c1")
    })
    .await;
    let drained_at = Instant::now();
    pool.eventually(
        "c1's job requeued",
        Duration::from_secs(REQUEUE) + ACTS,
        &p,
        async || restarts(&cluster, &jobs[0]) == "Restarts=1",
    )
    .await;
    // The drain was seen by the autoscaler a look after it was made, at the earliest.
    assert!(
        drained_at.elapsed() >= Duration::from_secs(REQUEUE - 2),
        "requeued {:?} after the drain, before requeueAfterSeconds ({REQUEUE} s)",
        drained_at.elapsed()
    );
    assert!(!job_running(&cluster, &jobs[0]));
    let said = support::event_notes(&client, &pool.ns, "Requeue").await;
    assert!(said.iter().any(|n| n.contains("c1")), "{said:?}");
    pool.eventually("c1 handed over", ACTS, &p, async || {
        pool.replicas().await == 3 && pool.marked_to_go("c1").await
    })
    .await;
    // Its user gives up on it (pinned to c1, it would wait for c1 to come back).
    let _ = cluster.cmd("scancel").arg(&jobs[0]).status();
    pool.borrows("c1", "web1", 3).await;

    // The next pod: c2 is drained, but its job may not be requeued: it runs on.
    pool.unschedulable_pod("web2", json!({})).await;
    pool.eventually("c2 drained for web2", ACTS, &p, async || {
        drained_by_us(&cluster, "c2")
    })
    .await;
    let full_reads = full_job_list_reads(&p).await;
    pool.eventually("a full job list read", FULL_READ, &p, async || {
        full_job_list_reads(&p).await > full_reads
    })
    .await;
    pool.stays(
        "c2's job running, c3 and c4 serving Slurm",
        Duration::from_secs(REQUEUE + 3),
        &p,
        async || {
            job_running(&cluster, &jobs[1])
                && !drained_by_us(&cluster, "c3")
                && !drained_by_us(&cluster, "c4")
        },
    )
    .await;
    assert_eq!(restarts(&cluster, &jobs[1]), "Restarts=0");
    let said = support::event_notes(&client, &pool.ns, "Requeue").await;
    assert!(!said.iter().any(|n| n.contains("c2")), "{said:?}");
    for j in &jobs {
        let _ = cluster.cmd("scancel").arg(j).status();
    }
    pool.cleanup().await;
}
