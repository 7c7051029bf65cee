//! The harness's real kube-apiserver serves our NodeSet (both versions, with the scale
//! subresource) and GenericNode CRDs, and kube-rs drives them the way the autoscaler will.

mod support;

use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use slurmscale_exporter::k8s::genericnode::{AllocatedResources, GenericNode, GenericNodeStatus};
use slurmscale_exporter::k8s::nodeset::{ControllerRef, v1alpha1, v1beta1};
use support::{kube_client, namespace, unique};

fn controller() -> ControllerRef {
    ControllerRef {
        name: Some("slurm".into()),
        namespace: Some("slurm".into()),
    }
}

#[tokio::test]
async fn v1beta1_nodeset_scales_through_the_scale_subresource() {
    let client = kube_client().await;
    let ns = namespace(&client, "nodeset-beta").await;
    let api: Api<v1beta1::NodeSet> = Api::namespaced(client, &ns);
    let spec = v1beta1::NodeSetSpec {
        controller_ref: controller(),
        replicas: Some(0),
        ..Default::default()
    };
    api.create(
        &PostParams::default(),
        &v1beta1::NodeSet::new("elastic", spec),
    )
    .await
    .expect("create");

    // At zero the apiserver omits `spec.replicas` from the Scale (omitempty): absent means 0.
    let scale = api.get_scale("elastic").await.expect("get_scale");
    assert_eq!(scale.spec.and_then(|s| s.replicas).unwrap_or(0), 0);

    api.patch_scale(
        "elastic",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 3}})),
    )
    .await
    .expect("patch_scale");
    let scale = api.get_scale("elastic").await.expect("get_scale");
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(3));
    assert_eq!(
        api.get("elastic").await.expect("get").spec.replicas,
        Some(3)
    );
}

#[tokio::test]
async fn v1alpha1_nodeset_scales_through_the_scale_subresource() {
    let client = kube_client().await;
    let ns = namespace(&client, "nodeset-alpha").await;
    let api: Api<v1alpha1::NodeSet> = Api::namespaced(client, &ns);
    let spec = v1alpha1::NodeSetSpec {
        controller_ref: controller(),
        replicas: Some(1),
        ..Default::default()
    };
    api.create(&PostParams::default(), &v1alpha1::NodeSet::new("cpu", spec))
        .await
        .expect("create");

    api.patch_scale(
        "cpu",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 3}})),
    )
    .await
    .expect("patch_scale");
    let scale = api.get_scale("cpu").await.expect("get_scale");
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(3));
    // status.replicas is the operator's to set; the scale subresource reports it.
    api.patch_status(
        "cpu",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"replicas": 2, "selector": "app=slurmd"}})),
    )
    .await
    .expect("patch_status");
    let scale = api.get_scale("cpu").await.expect("get_scale");
    let status = scale.status.expect("scale status");
    assert_eq!(status.replicas, 2);
    assert_eq!(status.selector.as_deref(), Some("app=slurmd"));
}

#[tokio::test]
async fn genericnode_status_is_patched_and_listed() {
    let client = kube_client().await;
    let api: Api<GenericNode> = Api::all(client);
    let name = unique("node");
    let mut node = GenericNode::new(&name, Default::default());
    node.spec.alias = Some("e1".into());
    node.metadata.labels = Some(
        [(
            "kai.alibabacloud.com/cluster-name".to_string(),
            "s2205".to_string(),
        )]
        .into(),
    );
    api.create(&PostParams::default(), &node)
        .await
        .expect("create");

    let status = json!({"status": {"allocatedResources": [
        {"type": "Slurm", "allocated": {"cpu": "0", "memory": "0"}},
        {"type": "Kubernetes", "allocated": {"cpu": "1735m", "memory": "2393Mi"}},
    ]}});
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .expect("patch_status");

    let listed = api.list(&Default::default()).await.expect("list");
    let got = listed
        .items
        .into_iter()
        .find(|n| n.metadata.name.as_deref() == Some(name.as_str()))
        .expect("listed");
    let status: GenericNodeStatus = got.status.expect("status");
    let kubernetes: &AllocatedResources = status
        .allocated_resources
        .iter()
        .find(|a| a.type_ == "Kubernetes")
        .expect("Kubernetes share");
    assert_eq!(
        serde_json::to_value(&kubernetes.allocated).unwrap(),
        json!({"cpu": "1735m", "memory": "2393Mi"})
    );
    assert_eq!(got.spec.alias.as_deref(), Some("e1"));
    api.delete(&name, &Default::default())
        .await
        .expect("delete");
}
