//! KEDA for real: `examples/keda/scaledobject-metrics-api.yaml`, as shipped but for where the
//! exporter listens and which NodeSet it scales, takes a NodeSet from zero to what a waiting
//! job needs through the harness's KEDA (operator and metrics adapter behind the aggregation
//! layer) and the HPA in its kube-controller-manager, reading our exporter's
//! `slurm_nodeset_desired_nodes` from the real Slurm 24.11. `tests/run.sh` starts KEDA beside
//! the third harness copy; alone: `tests/harness/kube.sh keda-start`.

mod support;

use std::time::Duration;

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;
use slurmscale_exporter::k8s::nodeset::v1beta1;
use support::prometheus::Prometheus;
use support::{SlurmCluster, exporter, kube_client, kubeconfig_path, namespace, wait_until};

/// The example, pointed at this test's exporter and NodeSet; nothing else changed.
fn scaled_object(ns: &str, cluster: &str, url: &str) -> DynamicObject {
    let path = support::repo_root().join("examples/keda/scaledobject-metrics-api.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    let mut so: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    so["metadata"]["namespace"] = json!(ns);
    let meta = &mut so["spec"]["triggers"][0]["metadata"];
    meta["url"] = json!(url);
    meta["valueLocation"] = json!(format!(
        "slurm_nodeset_desired_nodes{{cluster=\"{cluster}\",namespace=\"{ns}\",nodeset=\"elastic\"}}"
    ));
    serde_json::from_value(so).unwrap()
}

/// The Prometheus example (`examples/keda/scaledobject-prometheus.yaml`), pointed at this
/// test's Prometheus — which scrapes this test's exporter — and NodeSet; nothing else changed.
fn scaled_object_prometheus(ns: &str, prometheus: &str) -> DynamicObject {
    let path = support::repo_root().join("examples/keda/scaledobject-prometheus.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    let mut so: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    so["metadata"]["namespace"] = json!(ns);
    let meta = &mut so["spec"]["triggers"][0]["metadata"];
    meta["serverAddress"] = json!(prometheus);
    let query = meta["query"]
        .as_str()
        .unwrap()
        .replace(r#"namespace="slurm""#, &format!(r#"namespace="{ns}""#));
    meta["query"] = json!(query);
    serde_json::from_value(so).unwrap()
}

/// NodeSet `elastic` at 0 in `ns`, and slurm-operator's part without pods: its status
/// follows spec.replicas (the HPA reads the current replicas and the pod selector from the
/// scale subresource) until the task is aborted.
async fn elastic_nodeset(
    client: &kube::Client,
    ns: &str,
) -> (Api<v1beta1::NodeSet>, tokio::task::JoinHandle<()>) {
    let nodesets = support::elastic::nodeset_at_zero(client, ns, "elastic", None).await;
    let operator = {
        let nodesets = nodesets.clone();
        tokio::spawn(async move {
            loop {
                if let Ok(set) = nodesets.get("elastic").await {
                    let r = set.spec.replicas.unwrap_or(0);
                    let status = json!({"status": {"replicas": r, "readyReplicas": r,
                        "selector": "app.kubernetes.io/instance=elastic"}});
                    let _ = nodesets
                        .patch_status("elastic", &PatchParams::default(), &Patch::Merge(status))
                        .await;
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        })
    };
    (nodesets, operator)
}

/// Submits a job for 3 whole nodes of the elastic partition and waits (up to 120 s) for
/// `replicas` to say 3; whether it did, and when. The job is cancelled either way.
async fn three_node_job(
    cluster: &SlurmCluster,
    replicas: &impl AsyncFn() -> i32,
) -> (bool, Duration) {
    let job = cluster.submit(&[
        "-p",
        "elastic",
        "-N",
        "3",
        "--exclusive",
        "--wrap",
        "sleep 600",
    ]);
    let at = std::time::Instant::now();
    let reached = wait_until(Duration::from_secs(120), || async { replicas().await == 3 }).await;
    let took = at.elapsed();
    let _ = cluster.run("scancel", &[&job]);
    (reached, took)
}

/// The elastic partition of one Slurm is used by one test at a time.
static ELASTIC: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test]
async fn the_keda_example_scales_a_nodeset_from_zero_to_what_a_job_needs() {
    let _turn = ELASTIC.lock().await;
    let cluster = SlurmCluster::get("24.11");
    cluster.reset_elastic();
    let client = kube_client().await;
    let served = client
        .list_api_group_resources("external.metrics.k8s.io/v1beta1")
        .await;
    assert!(
        served.is_ok(),
        "KEDA's metrics adapter is not serving external.metrics.k8s.io ({served:?}): start it with tests/harness/kube.sh keda-start (tests/run.sh does)"
    );
    let ns = namespace(&client, "keda").await;
    let (nodesets, operator) = elastic_nodeset(&client, &ns).await;

    let exporter = exporter(&cluster, &kubeconfig_path());
    exporter.wait_ready(Duration::from_secs(60)).await;

    let gvk = GroupVersionKind::gvk("keda.sh", "v1alpha1", "ScaledObject");
    let scaled: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &ApiResource::from_gvk_with_plural(&gvk, "scaledobjects"),
    );
    let so = scaled_object(&ns, &cluster.name, &exporter.url("/metrics"));
    scaled.create(&PostParams::default(), &so).await.unwrap();

    // Nothing waits: KEDA keeps the NodeSet at its idle count, 0.
    tokio::time::sleep(Duration::from_secs(20)).await;
    let replicas = async || support::elastic::spec_replicas(&nodesets, "elastic").await;
    assert_eq!(replicas().await, 0, "idle: no node");

    let (reached, took) = three_node_job(&cluster, &replicas).await;
    operator.abort();
    assert!(
        reached,
        "KEDA did not take the NodeSet to the 3 nodes a waiting job needs within 120 s (at {}); exporter says {:?}",
        replicas().await,
        exporter
            .metrics()
            .await
            .get("slurm_nodeset_desired_nodes", &[("namespace", &ns)])
    );
    eprintln!("sbatch → 3 replicas through KEDA and the HPA: {took:.1?}");

    // The tolerance the example sets reached the HPA KEDA made: this server honours it.
    let hpa = Api::<HorizontalPodAutoscaler>::namespaced(client.clone(), &ns)
        .get("keda-hpa-slurm-elastic-direct")
        .await
        .unwrap();
    let up = hpa.spec.and_then(|s| s.behavior?.scale_up);
    assert_eq!(
        up.as_ref().and_then(|u| u.tolerance.clone()),
        Some(Quantity("0".into())),
        "{up:?}"
    );
    let _ = scaled
        .delete("slurm-elastic-direct", &Default::default())
        .await;
}

/// The same through Prometheus, as most sites run KEDA: a real Prometheus scrapes the
/// exporter every second and KEDA's Prometheus trigger reads `slurm_nodeset_desired_nodes`
/// from it, as the Prometheus example has it.
#[tokio::test]
async fn the_prometheus_keda_example_scales_a_nodeset_from_zero_to_what_a_job_needs() {
    let _turn = ELASTIC.lock().await;
    let cluster = SlurmCluster::get("24.11");
    cluster.reset_elastic();
    let client = kube_client().await;
    assert!(
        client
            .list_api_group_resources("external.metrics.k8s.io/v1beta1")
            .await
            .is_ok(),
        "KEDA's metrics adapter is not serving external.metrics.k8s.io: start it with tests/harness/kube.sh keda-start (tests/run.sh does)"
    );
    let ns = namespace(&client, "keda-prom").await;
    let (nodesets, operator) = elastic_nodeset(&client, &ns).await;
    let exporter = exporter(&cluster, &kubeconfig_path());
    exporter.wait_ready(Duration::from_secs(60)).await;
    let prometheus = Prometheus::start(&[("slurmscale-exporter", exporter.port)]);
    let query =
        format!(r#"max(slurm_nodeset_desired_nodes{{namespace="{ns}",nodeset="elastic"}})"#);
    let scraped = wait_until(Duration::from_secs(30), || async {
        prometheus.query(&query).await.is_ok_and(|r| !r.is_empty())
    })
    .await;
    assert!(scraped, "Prometheus has no {query}:\n{}", prometheus.log());

    let gvk = GroupVersionKind::gvk("keda.sh", "v1alpha1", "ScaledObject");
    let scaled: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &ApiResource::from_gvk_with_plural(&gvk, "scaledobjects"),
    );
    let so = scaled_object_prometheus(&ns, &prometheus.url);
    scaled.create(&PostParams::default(), &so).await.unwrap();
    let replicas = async || support::elastic::spec_replicas(&nodesets, "elastic").await;
    let (reached, took) = three_node_job(&cluster, &replicas).await;
    operator.abort();
    assert!(
        reached,
        "KEDA (Prometheus trigger) did not take the NodeSet to the 3 nodes a waiting job needs within 120 s (at {}); Prometheus says {:?}",
        replicas().await,
        prometheus.query(&query).await
    );
    eprintln!("sbatch → 3 replicas through Prometheus, KEDA and the HPA: {took:.1?}");
    let _ = scaled.delete("slurm-elastic", &Default::default()).await;
}
