//! Our Rust types read and write objects served under the *official* CRDs (Slinky's
//! NodeSet v1alpha1 and v1beta1, our GenericNode reconstruction), not just under the CRDs we
//! generate. The official schemas prune unknown fields, so a misspelt field in our types
//! shows up here as a value that does not survive a round trip.
//!
//! This swaps CRDs on the shared test apiserver, so it lives in its own test binary (cargo
//! runs test binaries one after another) and puts our CRDs back when it ends, even on panic.

mod support;

use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use slurmscale_exporter::k8s::crd;
use slurmscale_exporter::k8s::genericnode::{
    AllocatedResources, GenericNode, GenericNodeSpec, GenericNodeStatus,
};
use slurmscale_exporter::k8s::nodeset::{
    ControllerRef, NodeSetPartition, NodeSetStatus, PodTemplate, ScalingMode, SlurmdContainer,
    TemplateMetadata, TemplateSpec, v1alpha1, v1beta1,
};
use support::{kube_client, namespace, unique};

/// The official CRDs as published (CEL rules and defaults included: the test server is current).
fn official(file: &str) -> CustomResourceDefinition {
    let path = support::official_crd_path(file);
    let text = std::fs::read_to_string(&path).expect("read CRD");
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// How long the API server has to stop or start serving a CRD: generous on purpose, the test
/// checks what is served, not how soon.
const CRD_SERVED: Duration = Duration::from_secs(30);

async fn wait<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + CRD_SERVED;
    loop {
        if check().await {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within {CRD_SERVED:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Replaces the CRD of the same name with `new` and waits until its resource is served.
async fn install(client: &Client, new: &CustomResourceDefinition) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = new.metadata.name.clone().expect("CRD name");
    if crds.get_opt(&name).await.expect("get CRD").is_some() {
        crds.delete(&name, &Default::default())
            .await
            .expect("delete CRD");
        wait(&format!("CRD {name} to go"), || async {
            crds.get_opt(&name).await.expect("get CRD").is_none()
        })
        .await;
    }
    let mut new = new.clone();
    new.metadata.resource_version = None;
    crds.create(&PostParams::default(), &new)
        .await
        .expect("create CRD");
    let spec = &new.spec;
    for version in spec.versions.iter().filter(|v| v.served) {
        let gvk = GroupVersionKind::gvk(&spec.group, &version.name, &spec.names.kind);
        let resource = ApiResource::from_gvk_with_plural(&gvk, &spec.names.plural);
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        wait(
            &format!("{}/{} to be served", spec.names.plural, version.name),
            || async { api.list(&Default::default()).await.is_ok() },
        )
        .await;
    }
}

/// Puts our generated CRDs back when the test ends, however it ends.
struct RestoreOurs;

impl Drop for RestoreOurs {
    fn drop(&mut self) {
        // Drop cannot await, and the test's runtime may be unwinding: use a fresh one.
        std::thread::spawn(|| {
            tokio::runtime::Runtime::new()
                .expect("runtime")
                .block_on(async {
                    let client = kube_client().await;
                    install(&client, &crd::nodeset().expect("NodeSet CRD")).await;
                    install(&client, &crd::genericnode()).await;
                })
        })
        .join()
        .expect("restoring our CRDs");
    }
}

/// Creates `obj`, reads it back through the same type and checks nothing was pruned.
async fn round_trip<K>(api: &Api<K>, obj: &K) -> K
where
    K: Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    let created = api
        .create(&PostParams::default(), obj)
        .await
        .expect("create under official CRD");
    let name = created.meta().name.clone().expect("name");
    let status = serde_json::to_value(obj).expect("serialize")["status"].clone();
    if !status.is_null() {
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .expect("patch status under official CRD");
    }
    api.get(&name).await.expect("get under official CRD")
}

fn full_status(desired: Option<i32>) -> NodeSetStatus {
    NodeSetStatus {
        replicas: Some(2),
        ready_replicas: Some(2),
        available_replicas: Some(1),
        updated_replicas: Some(2),
        unavailable_replicas: Some(1),
        desired,
        slurm_idle: Some(1),
        slurm_allocated: Some(1),
        slurm_down: Some(0),
        slurm_drain: Some(0),
        selector: Some("app.kubernetes.io/instance=gpu".into()),
        observed_generation: Some(1),
        node_set_hash: Some("5d8f7c9b4".into()),
    }
}

fn template() -> Option<PodTemplate> {
    Some(PodTemplate {
        metadata: Some(TemplateMetadata {
            labels: [("app".to_string(), "slurmd".to_string())].into(),
            annotations: [("note".to_string(), "from-test".to_string())].into(),
        }),
        spec: Some(TemplateSpec {
            hostname: Some("gpu-".into()),
        }),
    })
}

/// An object as the operator would create it: far more fields than we model.
fn operator_object(api_version: &str, name: &str) -> serde_json::Value {
    json!({
        "apiVersion": api_version, "kind": "NodeSet", "metadata": {"name": name},
        "spec": {
            "controllerRef": {"name": "slurm"},
            "replicas": 4,
            "partition": {"enabled": true, "config": "MaxTime=UNLIMITED"},
            "template": {"spec": {"containers": [{"name": "slurmd", "image": "slurmd:25.05"}]}},
            "updateStrategy": {"type": "RollingUpdate"}
        }
    })
}

async fn scale_to_three<K>(api: &Api<K>, name: &str)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    api.patch_scale(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 3}})),
    )
    .await
    .expect("patch_scale under official CRD");
    let scale = api
        .get_scale(name)
        .await
        .expect("get_scale under official CRD");
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(3));
}

/// The slurmd container with the resources the node shape falls back on.
fn slurmd() -> SlurmdContainer {
    serde_json::from_value(json!({
        "resources": {"limits": {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "1"}}
    }))
    .unwrap()
}

#[tokio::test]
async fn our_types_read_and_write_objects_under_the_official_crds() {
    let client = kube_client().await;
    let _restore = RestoreOurs;
    let ns = namespace(&client, "conformance").await;

    // --- NodeSet v1alpha1 (slurm-operator 0.1-0.4)
    install(
        &client,
        &official("slinky.slurm.net_nodesets.v1alpha1.yaml"),
    )
    .await;
    let api: Api<v1alpha1::NodeSet> = Api::namespaced(client.clone(), &ns);
    let mut ours = v1alpha1::NodeSet::new(
        "alpha",
        v1alpha1::NodeSetSpec {
            controller_ref: ControllerRef {
                name: Some("slurm".into()),
                namespace: Some(ns.clone()),
            },
            replicas: Some(2),
            partition: Some(NodeSetPartition {
                enabled: true,
                config: Some("MaxTime=60".into()),
            }),
            template: template(),
            extra_conf: Some("CPUs=4 RealMemory=8000 Features=ib".into()),
            slurmd: Some(slurmd()),
        },
    );
    ours.status = Some(full_status(None));
    let back = round_trip(&api, &ours).await;
    assert_eq!(
        back.spec, ours.spec,
        "v1alpha1 spec pruned by the official schema"
    );
    assert_eq!(
        back.status, ours.status,
        "v1alpha1 status pruned by the official schema"
    );
    scale_to_three(&api, "alpha").await;
    let raw: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &ApiResource::erase::<v1alpha1::NodeSet>(&()),
    );
    let op: DynamicObject = serde_json::from_value(operator_object(
        "slinky.slurm.net/v1alpha1",
        "operator-made",
    ))
    .unwrap();
    raw.create(&PostParams::default(), &op)
        .await
        .expect("create operator-shaped v1alpha1");
    let read = api
        .get("operator-made")
        .await
        .expect("our type reads an operator-made v1alpha1");
    assert_eq!(read.spec.replicas, Some(4));
    assert_eq!(
        read.spec.partition.and_then(|p| p.config).as_deref(),
        Some("MaxTime=UNLIMITED")
    );

    // --- NodeSet v1beta1 (slurm-operator 1.0+): adds scalingMode and status.desired; its
    // controllerRef has no namespace.
    install(&client, &official("slinky.slurm.net_nodesets.v1beta1.yaml")).await;
    let api: Api<v1beta1::NodeSet> = Api::namespaced(client.clone(), &ns);
    let mut ours = v1beta1::NodeSet::new(
        "beta",
        v1beta1::NodeSetSpec {
            controller_ref: ControllerRef {
                name: Some("slurm".into()),
                namespace: None,
            },
            replicas: Some(0),
            scaling_mode: Some(ScalingMode::StatefulSet),
            partition: Some(NodeSetPartition {
                enabled: true,
                config: None,
            }),
            template: template(),
            extra_conf: Some("CPUs=4 RealMemory=8000 Features=ib".into()),
            slurmd: Some(slurmd()),
            ordinal_padding: Some(2),
        },
    );
    ours.status = Some(full_status(Some(2)));
    let back = round_trip(&api, &ours).await;
    assert_eq!(
        back.spec, ours.spec,
        "v1beta1 spec pruned by the official schema"
    );
    assert_eq!(
        back.status, ours.status,
        "v1beta1 status pruned by the official schema"
    );
    scale_to_three(&api, "beta").await;
    let raw: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns,
        &ApiResource::erase::<v1beta1::NodeSet>(&()),
    );
    let mut op = operator_object("slinky.slurm.net/v1beta1", "daemonset-mode");
    op["spec"]["scalingMode"] = json!("DaemonSet");
    raw.create(&PostParams::default(), &serde_json::from_value(op).unwrap())
        .await
        .expect("create operator-shaped v1beta1");
    let read = api
        .get("daemonset-mode")
        .await
        .expect("our type reads an operator-made v1beta1");
    assert_eq!(read.spec.scaling_mode, Some(ScalingMode::DaemonSet));

    // --- GenericNode (our reconstruction of ACK's ledger)
    install(&client, &official("kai.alibabacloud.com_genericnodes.yaml")).await;
    let api: Api<GenericNode> = Api::all(client.clone());
    let mut ours = GenericNode::new(
        &unique("ledger"),
        GenericNodeSpec {
            alias: Some("e1".into()),
            type_: Some("Slurm".into()),
        },
    );
    ours.status = Some(GenericNodeStatus {
        allocated_resources: vec![
            AllocatedResources {
                type_: "Slurm".into(),
                allocated: [
                    ("cpu".into(), json_quantity("2")),
                    ("memory".into(), json_quantity("4000Mi")),
                ]
                .into(),
            },
            AllocatedResources {
                type_: "Kubernetes".into(),
                allocated: [
                    ("cpu".into(), json_quantity("1735m")),
                    ("memory".into(), json_quantity("2393Mi")),
                    ("nvidia.com/gpu".into(), json_quantity("1")),
                ]
                .into(),
            },
        ],
        admission_checks: vec![json!({"name": "slurm-drain", "state": "Pending"})],
    });
    let back = round_trip(&api, &ours).await;
    assert_eq!(back.spec, ours.spec, "GenericNode spec pruned");
    assert_eq!(back.status, ours.status, "GenericNode status pruned");
    api.delete(back.metadata.name.as_deref().unwrap(), &Default::default())
        .await
        .expect("delete");
}

fn json_quantity(s: &str) -> k8s_openapi::apimachinery::pkg::util::intstr::IntOrString {
    k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(s.into())
}

/// The README's upgrade step for the CRD, run as it is written on a CRD installed as Helm
/// installs one (created with Helm's field manager), from the CRD of an earlier release
/// (tests/upgrade/chart-a561874/): it takes the CRD over, the new fields are served and kept,
/// and an object written under the old CRD still reads. Both CRDs are renamed into a group
/// of the test's own, so the harness's NodeSetAutoscaler CRD is left alone.
#[tokio::test]
async fn the_readmes_crd_upgrade_step_takes_over_a_crd_helm_installed() {
    let client = kube_client().await;
    let group = format!("{}.slurmscale.io", unique("upgrade"));
    let renamed = |text: &str| text.replace("slurmscale.io", &group);
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old.yaml");
    let root = support::repo_root();
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
    std::fs::write(
        &old,
        renamed(&read(
            "tests/upgrade/chart-a561874/crds/nodesetautoscalers.slurmscale.io.yaml",
        )),
    )
    .unwrap();
    let new_dir = dir.path().join("crds");
    std::fs::create_dir(&new_dir).unwrap();
    let crd_file = "nodesetautoscalers.slurmscale.io.yaml";
    std::fs::write(
        new_dir.join(crd_file),
        renamed(&read(&format!("charts/slurmscale/crds/{crd_file}"))),
    )
    .unwrap();
    let name = format!("nodesetautoscalers.{group}");
    let (ok, said) = support::run_tool(
        "kubectl",
        &[
            "create",
            "--field-manager=helm",
            "-f",
            old.to_str().unwrap(),
        ],
    );
    assert!(ok, "{said}");
    let resource = |version: &str| {
        let gvk = GroupVersionKind::gvk(&group, version, "NodeSetAutoscaler");
        ApiResource::from_gvk_with_plural(&gvk, "nodesetautoscalers")
    };
    let ns = namespace(&client, "upgrade").await;
    let nsas: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource("v1alpha1"));
    wait("the old CRD served", || async {
        nsas.list(&Default::default()).await.is_ok()
    })
    .await;
    let mut obj = DynamicObject::new("burst", &resource("v1alpha1"));
    obj.data = json!({"spec": {"scaleTargetRef": {"name": "burst"}, "maxReplicas": 8}});
    nsas.create(&PostParams::default(), &obj).await.unwrap();

    // The step exactly as README.md writes it, on the renamed CRDs' directory.
    let (step, args) = support::readme_crd_step(&new_dir.to_string_lossy());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, said) = support::run_tool("kubectl", &args);
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    // Checked before the CRD is deleted, asserted after: a failure leaves nothing behind.
    let mut kept = None;
    if ok {
        // A field the old CRD did not have is kept now (it would have been pruned), and the
        // object written before the upgrade is still there.
        let patch = json!({"spec": {"plannedJobs": {"boot": "JustInTime"}}});
        let read_back = std::cell::RefCell::new(None);
        wait("the new CRD served", || async {
            let patched = nsas
                .patch("burst", &PatchParams::default(), &Patch::Merge(&patch))
                .await;
            let spec = patched.ok().map(|o| o.data["spec"].clone());
            let has = spec.as_ref().is_some_and(|s| !s["plannedJobs"].is_null());
            *read_back.borrow_mut() = spec;
            has
        })
        .await;
        kept = read_back.into_inner();
    }
    let _ = crds.delete(&name, &Default::default()).await;
    assert!(ok, "`{step}` on a CRD Helm installed:\n{said}");
    let spec = kept.expect("the object written under the old CRD");
    assert_eq!(spec["maxReplicas"], 8);
    assert_eq!(spec["plannedJobs"]["boot"], "JustInTime");
}
