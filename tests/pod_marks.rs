//! The deletion cost the autoscaler sets on NodeSet pods to go first, and takes back, on the
//! harness's real kube-apiserver: marked by node and by name, taken back by a merge patch
//! that removes the annotation, and a deletion cost a site set itself left alone.

mod support;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::json;
use slurmscale_autoscaler::actuator::{Actuator, Kubernetes, POD_DELETION_COST, PodsBy};
use support::{kube_client, namespace};

const SELECTOR: &str = "app=slurmd";

#[tokio::test]
async fn marks_go_on_and_come_off_and_a_sites_own_cost_stays() {
    let client = kube_client().await;
    let ns = namespace(&client, "marks").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    // slurmd-3 carries a cost of the site's own; other-0 is not the NodeSet's.
    for (name, node, app, cost) in [
        ("slurmd-0", "n0", "slurmd", None),
        ("slurmd-1", "n1", "slurmd", None),
        ("slurmd-2", "n2", "slurmd", None),
        ("slurmd-3", "n3", "slurmd", Some("5")),
        ("other-0", "n0", "web", None),
    ] {
        let annotations = cost.map(|c| json!({POD_DELETION_COST: c}));
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"app": app}, "annotations": annotations},
            "spec": {"nodeName": node, "containers": [{"name": "slurmd", "image": "slurmd"}]},
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    let costs = async || -> BTreeMap<String, String> {
        let list = pods.list(&Default::default()).await.unwrap().items;
        list.into_iter()
            .filter_map(|p| {
                let cost = p.metadata.annotations?.get(POD_DELETION_COST)?.clone();
                Some((p.metadata.name?, cost))
            })
            .collect()
    };
    let actuator = Actuator::new(client.clone(), "marks-test");
    let (nodes, names) = (["n0".to_string()], ["slurmd-1".to_string()]);
    let by_node = || PodsBy::Node(&nodes);
    let by_name = || PodsBy::Name(&names);
    let marked = actuator.mark_pods_to_go(&ns, Some(SELECTOR), by_node());
    assert_eq!(
        marked.await.unwrap(),
        1,
        "slurmd-0 only: other-0 is not the NodeSet's"
    );
    let marked = actuator.mark_pods_to_go(&ns, Some(SELECTOR), by_name());
    assert_eq!(marked.await.unwrap(), 1);
    let want = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        (pairs.iter())
            .map(|(n, c)| (n.to_string(), c.to_string()))
            .collect()
    };
    let after_marks = costs().await;
    assert_eq!(
        after_marks,
        want(&[
            ("slurmd-0", "-100000"),
            ("slurmd-1", "-100000"),
            ("slurmd-3", "5")
        ])
    );

    let unmarked = actuator.unmark_pods(&ns, Some(SELECTOR), by_node());
    assert_eq!(unmarked.await.unwrap(), 1);
    let unmarked = actuator.unmark_pods(&ns, Some(SELECTOR), by_name());
    assert_eq!(unmarked.await.unwrap(), 1);
    let theirs = ["slurmd-2".to_string(), "slurmd-3".to_string()];
    let unmarked = actuator.unmark_pods(&ns, Some(SELECTOR), PodsBy::Name(&theirs));
    assert_eq!(unmarked.await.unwrap(), 0, "neither carries our mark");
    assert_eq!(costs().await, want(&[("slurmd-3", "5")]));
}
