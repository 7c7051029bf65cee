//! The autoscaler's Events as `kubectl describe` shows them, on the harness's real
//! kube-apiserver: each new note is an Event of its own, and only the same note said again
//! is counted in its series. (kube's recorder folds every Event of one reason into the first
//! for six minutes and keeps the first note: a second record resumed showed as the first
//! one, twice — found when a slurm-planned test looked for the second record's Event.)

mod support;

use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, PostParams};
use serde_json::json;
use slurmscale_autoscaler::actuator::{Actuator, Kubernetes};
use slurmscale_autoscaler::crd::NodeSetAutoscaler;
use support::{kube_client, namespace};

#[tokio::test]
async fn each_note_is_an_event_of_its_own_and_a_repeat_is_counted() {
    let client = kube_client().await;
    let ns = namespace(&client, "events").await;
    let nsa: NodeSetAutoscaler = serde_json::from_value(json!({
        "apiVersion": "slurmscale.io/v1alpha1", "kind": "NodeSetAutoscaler",
        "metadata": {"name": "planned"},
        "spec": {"scaleTargetRef": {"name": "planned"}, "maxReplicas": 4},
    }))
    .unwrap();
    let nsa = Api::<NodeSetAutoscaler>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &nsa)
        .await
        .unwrap();
    let actuator = Actuator::new(client.clone(), "events-test");
    for note in [
        "resumed planned-3",
        "resumed planned-0",
        "resumed planned-0",
    ] {
        actuator.event(&nsa, false, "Resume", note.into()).await;
    }
    actuator
        .event(&nsa, true, "Resume", "resumed planned-0".into())
        .await;

    let events = Api::<Event>::namespaced(client.clone(), &ns)
        .list(&Default::default())
        .await
        .unwrap()
        .items;
    let mut said: Vec<(String, String, i32)> = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("Resume"))
        .map(|e| {
            (
                e.type_.clone().unwrap_or_default(),
                e.note.clone().unwrap_or_default(),
                e.series.as_ref().map_or(1, |s| s.count),
            )
        })
        .collect();
    said.sort();
    // Every autoscaler reconciles every NodeSetAutoscaler, and the test server has no
    // namespace controller: none is left for later tests' autoscalers.
    let _ = Api::<NodeSetAutoscaler>::namespaced(client, &ns)
        .delete("planned", &Default::default())
        .await;
    assert_eq!(
        said,
        [
            ("Normal".into(), "resumed planned-0".into(), 2),
            ("Normal".into(), "resumed planned-3".into(), 1),
            ("Warning".into(), "resumed planned-0".into(), 1),
        ],
        "{events:#?}"
    );
}
