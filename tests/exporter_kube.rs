//! The exporter's Kubernetes side against the harness's real kube-apiserver (and, for
//! desired nodes, the real Slurm 24.11): the GenericNode ledger and Node capacity, NodeSets
//! and their desired nodes, the KEDA examples and the RBAC example.

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Node};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use slurmscale_exporter::k8s::genericnode::GenericNode;
use slurmscale_exporter::k8s::nodeset::{v1alpha1, v1beta1};
use support::{
    Metrics, Process, SlurmCluster, exporter, kube_client, kubeconfig_path, namespace, unique,
    wait_until,
};

/// How long the exporter has to show a change made in Kubernetes (or Slurm). Generous on
/// purpose: these tests check what it shows; how fast it lists and follows is measured by
/// `cargo bench -p slurmscale-exporter --bench kube`.
const FOLLOWS: Duration = Duration::from_secs(30);

/// Waits until `check` holds on the exporter's metrics; fails with the last scrape's view.
async fn until(exporter: &Process, what: &str, check: impl Fn(&Metrics) -> bool) {
    let ok = wait_until(FOLLOWS, || async { check(&exporter.metrics().await) }).await;
    assert!(
        ok,
        "{what}: not seen within {FOLLOWS:?}\nlogs:\n{}",
        exporter.logs()
    );
}

fn genericnode(name: &str, pool: &str, status: Option<Value>) -> Value {
    let mut gn = json!({
        "apiVersion": "kai.alibabacloud.com/v1alpha1", "kind": "GenericNode",
        "metadata": {"name": name, "labels": {"kai.alibabacloud.com/cluster-name": pool}},
        "spec": {"alias": format!("slurm-{name}"), "type": "Slurm"},
    });
    if let Some(s) = status {
        gn["status"] = s;
    }
    gn
}

fn shares(slurm_cpu: &str, k8s_cpu: &str) -> Value {
    json!({"allocatedResources": [
        {"type": "Slurm", "allocated": {"cpu": slurm_cpu, "memory": "4000Mi"}},
        {"type": "Kubernetes", "allocated": {"cpu": k8s_cpu, "memory": "2393Mi", "nvidia.com/gpu": 1}},
    ], "admissionChecks": [{"name": "drain-slurm", "state": "Pending"}]})
}

#[tokio::test]
async fn the_genericnode_ledger_follows_the_apiserver() {
    let cluster = SlurmCluster::get("24.11");
    let client = kube_client().await;
    let exporter = exporter(&cluster, &kubeconfig_path());
    exporter.wait_ready(Duration::from_secs(30)).await;

    let pool = unique("pool");
    let nodes: Api<Node> = Api::all(client.clone());
    let gns: Api<GenericNode> = Api::all(client.clone());
    let name = unique("kn");
    let node: Node = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("create node");
    nodes
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2"}}})),
        )
        .await
        .expect("node allocatable");
    let gn: GenericNode = serde_json::from_value(genericnode(&name, &pool, None)).unwrap();
    gns.create(&PostParams::default(), &gn)
        .await
        .expect("create genericnode");
    gns.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": shares("2", "1735m")})),
    )
    .await
    .expect("ledger status");

    let id = |owner: &'static str| {
        [
            ("cluster", pool.as_str()),
            ("node", name.as_str()),
            ("owner", owner),
        ]
    };
    let n = [("cluster", pool.as_str()), ("node", name.as_str())];
    until(&exporter, "the ledger", |m| {
        m.get("slurm_genericnode_cpu_allocated_cores", &id("kubernetes")) == Some(1.735)
    })
    .await;
    let m = exporter.metrics().await;
    assert_eq!(
        m.get("slurm_genericnode_cpu_allocated_cores", &id("slurm")),
        Some(2.0)
    );
    assert_eq!(
        m.get("slurm_genericnode_memory_allocated_bytes", &id("slurm")),
        Some(4000.0 * 1048576.0)
    );
    assert_eq!(
        m.get(
            "slurm_genericnode_memory_allocated_bytes",
            &id("kubernetes")
        ),
        Some(2393.0 * 1048576.0)
    );
    assert_eq!(
        m.get(
            "slurm_genericnode_resource_allocated",
            &[
                n[0],
                n[1],
                ("owner", "kubernetes"),
                ("resource", "nvidia.com/gpu")
            ]
        ),
        Some(1.0)
    );
    assert_eq!(m.get("slurm_genericnode_cpu_capacity_cores", &n), Some(8.0));
    assert_eq!(
        m.get("slurm_genericnode_memory_capacity_bytes", &n),
        Some(32.0 * 1073741824.0)
    );
    let free = m.get("slurm_genericnode_cpu_free_cores", &n).unwrap();
    assert!((free - (8.0 - 2.0 - 1.735)).abs() < 1e-9, "free {free}");
    assert_eq!(
        m.get("slurm_genericnode_admission_checks_pending", &n),
        Some(1.0)
    );
    assert_eq!(
        m.get(
            "slurm_genericnode_info",
            &[n[0], n[1], ("alias", &format!("slurm-{name}"))]
        ),
        Some(1.0)
    );
    assert_eq!(
        m.get(
            "slurm_genericnode_pool_nodes",
            &[("cluster", pool.as_str())]
        ),
        Some(1.0)
    );
    assert_eq!(
        m.get(
            "slurm_genericnode_pool_cpu_capacity_cores",
            &[("cluster", pool.as_str())]
        ),
        Some(8.0)
    );

    // A status change shows up; so do malformed objects, skipped and counted by reason.
    gns.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": shares("2", "3")})),
    )
    .await
    .unwrap();
    until(&exporter, "the changed share", |m| {
        m.get("slurm_genericnode_cpu_allocated_cores", &id("kubernetes")) == Some(3.0)
    })
    .await;
    let mut bad = Vec::new();
    for (reason, status) in [
        ("no_status", None),
        (
            "bad_quantity",
            Some(json!({"allocatedResources": [{"type": "Slurm", "allocated": {"cpu": "lots"}}]})),
        ),
        (
            "unknown_type",
            Some(json!({"allocatedResources": [{"type": "Volcano", "allocated": {"cpu": "1"}}]})),
        ),
    ] {
        let bad_name = unique("bad");
        let gn: GenericNode = serde_json::from_value(genericnode(&bad_name, &pool, None)).unwrap();
        gns.create(&PostParams::default(), &gn).await.unwrap();
        if let Some(s) = status {
            gns.patch_status(
                &bad_name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": s})),
            )
            .await
            .unwrap();
        }
        bad.push((reason, bad_name));
    }
    until(&exporter, "malformed GenericNodes counted", |m| {
        bad.iter().all(|(r, _)| {
            m.get(
                "slurm_genericnode_malformed_objects",
                &[("cluster", pool.as_str()), ("reason", r)],
            ) == Some(1.0)
        })
    })
    .await;
    let m = exporter.metrics().await;
    for (_, bad_name) in &bad {
        assert!(
            m.all("slurm_genericnode_info", &[("node", bad_name)])
                .is_empty(),
            "{bad_name} was not skipped"
        );
    }
    assert_eq!(
        m.get(
            "slurm_genericnode_pool_nodes",
            &[("cluster", pool.as_str())]
        ),
        Some(1.0)
    );
    assert!(
        exporter
            .logs()
            .contains("skipping a GenericNode that cannot be read")
    );

    // Deleted objects take their series with them.
    gns.delete(&name, &DeleteParams::default()).await.unwrap();
    for (_, bad_name) in &bad {
        gns.delete(bad_name, &DeleteParams::default())
            .await
            .unwrap();
    }
    nodes.delete(&name, &DeleteParams::default()).await.unwrap();
    until(&exporter, "series of deleted GenericNodes gone", |m| {
        m.all(
            "slurm_genericnode_cpu_allocated_cores",
            &[("node", name.as_str())],
        )
        .is_empty()
            && m.all(
                "slurm_genericnode_malformed_objects",
                &[("cluster", pool.as_str())],
            )
            .is_empty()
    })
    .await;
    assert_eq!(
        exporter.metrics().await.get(
            "slurm_exporter_kubernetes_watch_up",
            &[("resource", "genericnodes")]
        ),
        Some(1.0)
    );
}

/// Jobs pending on the elastic partition raise the desired nodes of the NodeSet serving it;
/// a 3-node job counts 3; held jobs count nothing; the series is 0, not absent, when idle.
#[tokio::test]
async fn nodeset_desired_nodes_follow_slurm_demand() {
    let cluster = SlurmCluster::get("24.11");
    let _ = cluster
        .cmd("scancel")
        .args(["--user=root", "--partition=elastic"])
        .status();
    let client = kube_client().await;
    let ns = namespace(&client, "ns-desired").await;
    let exporter = exporter(&cluster, &kubeconfig_path());
    exporter.wait_ready(Duration::from_secs(30)).await;

    let beta: Api<v1beta1::NodeSet> = Api::namespaced(client.clone(), &ns);
    let mut elastic = v1beta1::NodeSet::new(
        "elastic",
        v1beta1::NodeSetSpec {
            replicas: Some(0),
            ..Default::default()
        },
    );
    elastic.metadata.annotations =
        Some([("slurmscale.io/cluster".to_string(), cluster.name.clone())].into());
    beta.create(&PostParams::default(), &elastic).await.unwrap();
    // A v1alpha1 object is served through the version the exporter watches.
    let alpha: Api<v1alpha1::NodeSet> = Api::namespaced(client.clone(), &ns);
    let mut cpu = v1alpha1::NodeSet::new(
        "cpu-nodes",
        v1alpha1::NodeSetSpec {
            replicas: Some(4),
            ..Default::default()
        },
    );
    cpu.metadata.annotations =
        Some([("slurmscale.io/partition".to_string(), "cpu".to_string())].into());
    alpha.create(&PostParams::default(), &cpu).await.unwrap();

    let id = [
        ("namespace", ns.as_str()),
        ("nodeset", "elastic"),
        ("partition", "elastic"),
    ];
    let desired = |m: &Metrics| m.get("slurm_nodeset_desired_nodes", &id);
    let cpu_info = [
        ("namespace", ns.as_str()),
        ("nodeset", "cpu-nodes"),
        ("partition", "cpu"),
    ];
    // Both NodeSets, which the watch may deliver one after the other.
    until(&exporter, "desired nodes present at 0", |m| {
        desired(m) == Some(0.0) && m.get("slurm_nodeset_info", &cpu_info).is_some()
    })
    .await;
    let m = exporter.metrics().await;
    assert_eq!(m.get("slurm_nodeset_desired_nodes_stale", &id), Some(0.0));
    assert_eq!(
        m.get("slurm_nodeset_max_nodes", &id),
        None,
        "no bound (no slurmscale.io/max-nodes, no NodeSetAutoscaler): never the partition's size, which for a Slinky partition is the pods it has now"
    );
    assert_eq!(
        m.get(
            "slurm_nodeset_info",
            &[
                ("namespace", ns.as_str()),
                ("nodeset", "cpu-nodes"),
                ("partition", "cpu")
            ]
        ),
        Some(1.0)
    );
    assert_eq!(
        m.get(
            "slurm_nodeset_spec_replicas",
            &[("namespace", ns.as_str()), ("nodeset", "cpu-nodes")]
        ),
        Some(4.0)
    );

    // Exclusive jobs take whole nodes, so each counts its node count (packing one-CPU jobs
    // onto fewer nodes is checked in autoscaler_e2e).
    let sbatch = |args: &[&str]| {
        cluster.submit(
            &[
                &["-p", "elastic", "--exclusive"],
                args,
                &["--wrap", "sleep 600"],
            ]
            .concat(),
        );
    };
    sbatch(&["-N", "3"]);
    until(&exporter, "a 3-node job counts 3", |m| {
        desired(m) == Some(3.0)
    })
    .await;
    sbatch(&["-N", "2", "--hold"]);
    sbatch(&["-N", "1"]);
    until(
        &exporter,
        "held jobs count nothing, a 1-node job counts 1",
        |m| desired(m) == Some(4.0),
    )
    .await;
    assert_eq!(
        exporter
            .metrics()
            .await
            .get("slurm_nodeset_demand_nodes", &id),
        Some(4.0)
    );

    // Status written by the operator shows up.
    beta.patch_status(
        "elastic",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"replicas": 2, "readyReplicas": 1, "slurmIdle": 2, "selector": "app=x"}})),
    )
    .await
    .unwrap();
    until(&exporter, "NodeSet status", |m| {
        m.get(
            "slurm_nodeset_slurm_nodes",
            &[
                ("namespace", ns.as_str()),
                ("nodeset", "elastic"),
                ("state", "idle"),
            ],
        ) == Some(2.0)
            && m.get(
                "slurm_nodeset_status_replicas",
                &[("namespace", ns.as_str()), ("nodeset", "elastic")],
            ) == Some(2.0)
    })
    .await;

    let _ = cluster
        .cmd("scancel")
        .args(["--user=root", "--partition=elastic"])
        .status();
    until(&exporter, "no demand: back to 0", |m| {
        desired(m) == Some(0.0)
    })
    .await;
    beta.delete("elastic", &DeleteParams::default())
        .await
        .unwrap();
    until(&exporter, "a deleted NodeSet's series go", |m| {
        desired(m).is_none()
    })
    .await;
}

fn kubectl_run(args: &[&str]) -> (bool, String) {
    support::run_tool("kubectl", args)
}

/// The KEDA examples are valid ScaledObjects for the official CRD, and the NodeSetAutoscaler
/// examples valid for ours (server-side dry run).
#[tokio::test]
async fn keda_examples_pass_server_side_dry_run() {
    let crd = support::official_crd_path("keda.sh_scaledobjects.yaml");
    let (ok, said) = kubectl_run(&["apply", "-f", crd.to_str().unwrap()]);
    assert!(ok, "installing the official ScaledObject CRD: {said}");
    let ok = wait_until(Duration::from_secs(30), || async {
        kubectl_run(&["get", "scaledobjects.keda.sh", "-A"]).0
    })
    .await;
    assert!(ok, "ScaledObject CRD not served");
    let client = kube_client().await;
    let slurm: Namespace = serde_json::from_value(json!({"metadata": {"name": "slurm"}})).unwrap();
    let _ = Api::<Namespace>::all(client)
        .create(&PostParams::default(), &slurm)
        .await;
    let mut files = Vec::new();
    for dir in ["examples/keda", "examples/autoscaler"] {
        let dir = support::repo_root().join(dir);
        let found: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .collect();
        assert!(found.len() >= 2, "examples missing in {}", dir.display());
        files.extend(found);
    }
    for f in files {
        let (ok, said) = kubectl_run(&["apply", "--dry-run=server", "-f", f.to_str().unwrap()]);
        assert!(ok, "{}: {said}", f.display());
        assert!(said.contains("(server dry run)"), "{}: {said}", f.display());
    }
}

/// The RBAC example is enough, and no more than needed: an exporter impersonating its
/// service account watches everything; one without the binding is refused.
#[tokio::test]
async fn the_rbac_example_is_sufficient() {
    let cluster = SlurmCluster::get("24.11");
    let client = kube_client().await;
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "slurmscale"}})).unwrap();
    let _ = Api::<Namespace>::all(client)
        .create(&PostParams::default(), &ns)
        .await;
    let rbac = support::repo_root().join("examples/rbac/exporter.yaml");
    let (ok, said) = kubectl_run(&["apply", "-f", rbac.to_str().unwrap()]);
    assert!(ok, "applying the RBAC example: {said}");

    for (user, allowed) in [
        ("system:serviceaccount:slurmscale:slurmscale-exporter", true),
        ("system:serviceaccount:slurmscale:nobody", false),
    ] {
        let mut kubeconfig: Value =
            serde_saphyr::from_str(&std::fs::read_to_string(kubeconfig_path()).unwrap()).unwrap();
        kubeconfig["users"][0]["user"]["as"] = Value::String(user.into());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("impersonate.kubeconfig");
        std::fs::write(&path, serde_json::to_vec(&kubeconfig).unwrap()).unwrap();
        let exporter = exporter(&cluster, &path);
        if allowed {
            exporter.wait_ready(Duration::from_secs(30)).await;
            until(&exporter, "every watch up with the example RBAC", |m| {
                ["nodes", "genericnodes", "nodesets"].iter().all(|r| {
                    m.get("slurm_exporter_kubernetes_watch_up", &[("resource", r)]) == Some(1.0)
                })
            })
            .await;
        } else {
            let refused =
                wait_until(FOLLOWS, || async { exporter.logs().contains("forbidden") }).await;
            assert!(
                refused,
                "an unbound service account was not refused:\n{}",
                exporter.logs()
            );
            let m = exporter.metrics().await;
            assert_ne!(
                m.get(
                    "slurm_exporter_kubernetes_watch_up",
                    &[("resource", "nodes")]
                ),
                Some(1.0)
            );
        }
        let _ = std::fs::remove_file(&path);
    }
}

/// NodeSets as Slinky's own Helm chart renders them (`slurm-worker-<key>`, pod host name
/// `<key>-`): their series name the partition slurm-operator gives them in Slurm, `<key>`,
/// with no annotation.
#[tokio::test]
async fn nodesets_from_slinkys_chart_are_read_under_their_slurm_names() {
    let cluster = SlurmCluster::get("26.05");
    let client = kube_client().await;
    let ns = namespace(&client, "ns-chart").await;
    let made =
        support::elastic::chart_nodesets(&client, &ns, None, &["slinky", "planned", "accel"]).await;
    assert_eq!(
        made,
        [
            "slurm-worker-accel",
            "slurm-worker-planned",
            "slurm-worker-slinky"
        ]
    );
    let exporter = exporter(&cluster, &kubeconfig_path());
    exporter.wait_ready(Duration::from_secs(30)).await;
    let partition_of = async |nodeset: &str| {
        let m = exporter.metrics().await;
        m.0.iter()
            .find(|(name, labels, _)| {
                name == "slurm_nodeset_info"
                    && labels.contains(&("namespace".to_string(), ns.clone()))
                    && labels.contains(&("nodeset".to_string(), nodeset.to_string()))
            })
            .and_then(|(_, labels, _)| {
                labels
                    .iter()
                    .find(|(k, _)| k == "partition")
                    .map(|(_, v)| v.clone())
            })
    };
    let named = wait_until(FOLLOWS, || async {
        partition_of("slurm-worker-slinky").await.as_deref() == Some("slinky")
    })
    .await;
    assert!(
        named,
        "slurm-worker-slinky's partition: {:?}",
        partition_of("slurm-worker-slinky").await
    );
    assert_eq!(
        partition_of("slurm-worker-accel").await.as_deref(),
        Some("accel")
    );
    assert_eq!(
        partition_of("slurm-worker-planned").await.as_deref(),
        Some("planned")
    );
    // As slurm-operator 1.1's chart lays a site out: partitions over NodeSets. A NodeSet
    // serves every partition Slurm puts it in, in Slurm's order: `Nodes=ALL` takes every
    // NodeSet (accel too, which has no partition of its own here), `pair` the two it names.
    let _partitions = SitePartitions::create(
        &cluster,
        &[
            "PartitionName=sitewide Nodes=ALL",
            "PartitionName=pair Nodes=slinky,planned",
        ],
    );
    let served = wait_until(FOLLOWS, || async {
        partition_of("slurm-worker-accel").await.as_deref() == Some("sitewide")
    })
    .await;
    assert!(
        served,
        "slurm-worker-accel's partitions: {:?}",
        partition_of("slurm-worker-accel").await
    );
    assert_eq!(
        partition_of("slurm-worker-slinky").await.as_deref(),
        Some("slinky,sitewide,pair")
    );
    assert_eq!(
        partition_of("slurm-worker-planned").await.as_deref(),
        Some("planned,sitewide,pair")
    );
    let nodesets: Api<v1beta1::NodeSet> = Api::namespaced(client.clone(), &ns);
    let _ = nodesets
        .delete_collection(&Default::default(), &Default::default())
        .await;
}

/// Partitions made at run time (`scontrol create`), deleted again however the test ends.
struct SitePartitions {
    cluster: SlurmCluster,
    names: Vec<String>,
}

impl SitePartitions {
    fn create(cluster: &SlurmCluster, lines: &[&str]) -> Self {
        let mut made = Self {
            cluster: cluster.clone(),
            names: Vec::new(),
        };
        for line in lines {
            let words: Vec<&str> = line.split_whitespace().collect();
            let status = cluster.cmd("scontrol").arg("create").args(&words).status();
            assert!(status.is_ok_and(|s| s.success()), "scontrol create {line}");
            made.names.push(words[0].to_string());
        }
        made
    }
}

impl Drop for SitePartitions {
    fn drop(&mut self) {
        for name in &self.names {
            let _ = self.cluster.cmd("scontrol").args(["delete", name]).status();
        }
    }
}
