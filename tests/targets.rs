//! The autoscaler reads its NodeSet targets from a watch, on the harness's real
//! kube-apiserver (through a recording proxy): once the watch has listed, a read sends no
//! request, and what it reads is what the scale subresource says — including a NodeSet whose
//! object leaves `status.replicas` out (its controller does at 0 pods) and one whose scale
//! was just written (the first read after a write waits for the watch to show it).

mod support;

use std::time::Duration;

use kube::api::{Api, PostParams};
use serde_json::json;
use slurmscale_autoscaler::actuator::{Actuator, Kubernetes};
use slurmscale_autoscaler::crd::ScaleTargetRef;
use slurmscale_exporter::k8s::nodeset::v1beta1;
use support::kube_fault::KubeProxy;
use support::{kube_client, namespace, wait_until};

fn target(name: &str) -> ScaleTargetRef {
    serde_json::from_value(json!({"name": name})).unwrap()
}

#[tokio::test]
async fn nodesets_are_read_from_a_watch_as_their_scale_says() {
    let client = kube_client().await;
    let ns = namespace(&client, "targets").await;
    let nodesets: Api<v1beta1::NodeSet> = Api::namespaced(client.clone(), &ns);
    for (name, replicas) in [("zero", 0), ("three", 3)] {
        let spec = v1beta1::NodeSetSpec {
            replicas: Some(replicas),
            ..Default::default()
        };
        let nodeset = v1beta1::NodeSet::new(name, spec);
        nodesets
            .create(&PostParams::default(), &nodeset)
            .await
            .unwrap();
    }
    let proxy = KubeProxy::start().await;
    let through = kube::Client::try_from(
        kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(&proxy.kubeconfig).unwrap(),
            &Default::default(),
        )
        .await
        .unwrap(),
    )
    .unwrap();
    let actuator = Actuator::new(through, "targets-test");
    let path = |name: &str| format!("/namespaces/{ns}/nodesets/{name}");
    // The first reads go to the API server (the watch has not listed yet): what the scale
    // subresource says.
    let direct_zero = actuator.read(&ns, &target("zero")).await.unwrap();
    let direct_three = actuator.read(&ns, &target("three")).await.unwrap();
    assert_eq!(
        (direct_zero.replicas, direct_zero.status_replicas),
        (0, Some(0))
    );
    assert_eq!(
        (direct_three.replicas, direct_three.status_replicas),
        (3, Some(0))
    );
    // Then from the watch: the same targets, and no request.
    let quiet = wait_until(Duration::from_secs(60), || async {
        let before = proxy.requests_to(&path("three")).len();
        let read = actuator.read(&ns, &target("three")).await.unwrap();
        read == direct_three && proxy.requests_to(&path("three")).len() == before
    })
    .await;
    assert!(
        quiet,
        "reads still go to the API server once the watch listed"
    );
    let (sent, zero) = (
        proxy.requests_to(&path("zero")).len(),
        actuator.read(&ns, &target("zero")).await.unwrap(),
    );
    assert_eq!(zero, direct_zero, "the watched NodeSet reads as its scale");
    assert_eq!(
        proxy.requests_to(&path("zero")).len(),
        sent,
        "a request sent"
    );

    // A scale written is read back as written, never as the watch last showed it.
    let rv = zero.resource_version.as_deref();
    actuator.scale(&ns, &target("zero"), 2, rv).await.unwrap();
    let after = actuator.read(&ns, &target("zero")).await.unwrap();
    assert_eq!(after.replicas, 2, "read before the watch showed the write");
    assert_ne!(after.resource_version, zero.resource_version);
}
