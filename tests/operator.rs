//! The real Slinky slurm-operator (v1.1.0-rc1, the newest the module proxy builds) under the
//! autoscaler, against the real Slurm 26.05, which speaks the operator's REST v0.0.44 itself
//! (no proxy): a job waits → the builtin autoscaler patches the NodeSet's `/scale` → the
//! operator creates the pods → kwok runs them and the harness starts a real `slurmd -Z` for
//! each under the pod's host name (`tests/harness/operator-pods.sh`) → the job runs on them;
//! idle → the autoscaler scales to zero → the operator drains the nodes through slurmrestd,
//! waits, and deletes the pods → their nodes leave Slurm (the operator's preStop deletes them)
//! → the autoscaler keeps the node records for the next job. The first test's NodeSet is the
//! one Slinky's own `slurm` Helm chart renders (`slurm-worker-slinky`, pod host name
//! `slinky-`), applied as it is, but for its Controller.
//!
//! Slurm 22.05's REST API has no node writes and other types: the operator cannot run against
//! it; 24.11 needs a path-rewriting proxy (`SLURMSCALE_OPERATOR_SLURM=24.11`). `tests/run.sh`
//! starts the operator for this test only (it reconciles every NodeSet of the cluster);
//! alone: `tests/harness/kube.sh operator-start`.

mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;
use slurmscale_autoscaler::crd::NodeSetAutoscaler;
use slurmscale_exporter::k8s::nodeset::v1beta1;
use support::{SlurmCluster, kube_client, kube_env};

const PARTITION: &str = "slinky";
/// The first test's NodeSet, as Slinky's chart names it (`slinky` in Slurm).
const NODESET: &str = "slurm-worker-slinky";
const SLURMD_PODS: &str = "app.kubernetes.io/name=slurmd";

/// How long a job has to run on the pods the operator started for it: scale, pods Running,
/// slurmd registered, job started. Generous on purpose: the test checks that it runs there;
/// how fast belongs to a bench (the docs' figures come from this test's printout).
const JOB_RUNS: Duration = Duration::from_secs(90);

/// The lifetime slurm-operator gives the tokens it signs in the rotation test.
const TOKEN_LIFETIME: Duration = Duration::from_secs(20);

/// The harness can run one NodeSet's pods (`slinky-N`): the tests take turns.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The Slurm the operator manages (`kube.sh operator-start`: 26.05 unless told otherwise).
fn operated() -> SlurmCluster {
    SlurmCluster::get(&kube_env("HARNESS_SLURM_OPERATOR_SLURM").unwrap_or_else(|| "26.05".into()))
}

/// The operator's namespace and Controller, as `kube.sh operator-start` set them up; fails
/// with what to run when the operator is not there.
fn operator() -> (String, String) {
    let hint = "the Slinky slurm-operator is not running: start it with \
                `tests/harness/kube.sh operator-start` (tests/run.sh does, for this test)";
    let ns = kube_env("HARNESS_SLURM_OPERATOR_NAMESPACE").expect(hint);
    let controller = kube_env("HARNESS_SLURM_OPERATOR_CONTROLLER").expect(hint);
    assert!(
        std::net::TcpStream::connect("127.0.0.1:6820").is_ok(),
        "{hint} (nothing answers on 127.0.0.1:6820)"
    );
    (ns, controller)
}

/// Waits for `check`, saying `what` and the autoscaler's log when it does not hold.
async fn until(what: &str, within: Duration, a: &support::Process, check: impl AsyncFn() -> bool) {
    support::elastic::eventually(what, within, a, check).await
}

/// The slurmd container of a NodeSet as a site writes it for slurm-operator 1.x.
fn slurmd() -> serde_json::Value {
    json!({"image": "harness/slurmd"})
}

/// NodeSet `name` as a site writes it for slurm-operator 1.x (its pods tolerate kwok's
/// nodes, where they run), at `replicas`, with this `slurmd` container.
async fn nodeset(
    client: &kube::Client,
    ns: &str,
    controller: &str,
    (name, replicas): (&str, i32),
    slurmd: serde_json::Value,
) -> Api<v1beta1::NodeSet> {
    let nodesets: Api<v1beta1::NodeSet> = Api::namespaced(client.clone(), ns);
    let nodeset = json!({
        "apiVersion": "slinky.slurm.net/v1beta1", "kind": "NodeSet",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "controllerRef": {"name": controller, "namespace": ns},
            "replicas": replicas,
            "extraConf": "CPUs=4 RealMemory=8000",
            "slurmd": slurmd,
            "logfile": {"image": "harness/logfile"},
            "partition": {"enabled": false},
            "template": {"spec": {"tolerations": [
                {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}
            ]}},
        }
    });
    nodesets
        .patch(
            name,
            &PatchParams::apply("slurmscale-test").force(),
            &Patch::Apply(&nodeset),
        )
        .await
        .unwrap();
    nodesets
}

/// The operator's slurmd pods that are Running, by name.
async fn running(pods: &Api<Pod>) -> Vec<String> {
    let mut names: Vec<String> = pods
        .list(&ListParams::default().labels(SLURMD_PODS))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .filter_map(|p| p.metadata.name)
        .collect();
    names.sort();
    names
}

/// No NodeSet `slinky` (so no operator pod, no slurmd of ours), no job and no record in the
/// partition, and no autoscaler of this Slurm left by another test.
async fn reset(cluster: &SlurmCluster, ns: &str) {
    let client = kube_client().await;
    let nsas: Api<NodeSetAutoscaler> = Api::all(client.clone());
    for n in nsas.list(&Default::default()).await.unwrap().items {
        if n.spec.slurm.cluster.as_deref() == Some(&cluster.name) {
            let at = n.metadata.namespace.clone().unwrap_or_default();
            let name = n.metadata.name.clone().unwrap_or_default();
            let _ = Api::<NodeSetAutoscaler>::namespaced(client.clone(), &at)
                .delete(&name, &DeleteParams::default())
                .await;
        }
    }
    let nodesets: Api<v1beta1::NodeSet> = Api::namespaced(client.clone(), ns);
    for name in [
        "slinky",
        "slurm-worker-slinky",
        "slurm-worker-planned",
        "slurm-worker-accel",
    ] {
        let _ = nodesets.delete(name, &DeleteParams::default()).await;
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let gone = support::wait_until(Duration::from_secs(90), || async {
        pods.list(&ListParams::default().labels(SLURMD_PODS))
            .await
            .is_ok_and(|l| l.items.is_empty())
    })
    .await;
    assert!(
        gone,
        "the operator's pods of an earlier NodeSet slinky did not go"
    );
    // …and their slurmds and records with them: operator-pods.sh does the pods' preStop a
    // moment after they go, which would delete the records the next test's autoscaler makes.
    let state = kube_env("HARNESS_SLURM_OPERATOR_PODS").expect("HARNESS_SLURM_OPERATOR_PODS");
    let done = support::wait_until(Duration::from_secs(30), || async {
        std::fs::read_dir(&state).is_ok_and(|d| {
            d.flatten()
                .all(|e| e.file_name().to_string_lossy().starts_with('.'))
        })
    })
    .await;
    assert!(
        done,
        "operator-pods.sh still runs slurmds of gone pods ({state})"
    );
    let c = cluster.clone();
    tokio::task::spawn_blocking(move || support::elastic::reset_slinky(&c))
        .await
        .unwrap();
}

#[tokio::test]
async fn the_real_operator_runs_the_pods_the_autoscaler_asks_for_and_drains_them_back_to_zero() {
    let _turn = TURN.lock().await;
    let (ns, controller) = operator();
    let cluster = operated();
    reset(&cluster, &ns).await;
    let client = kube_client().await;

    // The NodeSets of Slinky's chart, their Controller the harness's.
    let made = support::elastic::chart_nodesets(
        &client,
        &ns,
        Some((&ns, &controller)),
        &["slinky", "planned", "accel"],
    )
    .await;
    assert!(made.iter().any(|n| n == NODESET), "{made:?}");
    let nodesets: Api<v1beta1::NodeSet> = Api::namespaced(client.clone(), &ns);
    // Records first: 24.11 refuses a job for a NodeSet= partition without nodes, and on any
    // release they give the partition its size at zero pods.
    let (autoscalers, a) =
        support::elastic::slinky_autoscaler_of(&client, &ns, &cluster, NODESET).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let running_pods = async || running(&pods).await;
    let replicas = async || support::elastic::spec_replicas(&nodesets, NODESET).await;
    until(
        "the autoscaler's three FUTURE records",
        Duration::from_secs(30),
        &a,
        async || {
            (0..3).all(|i| {
                cluster
                    .node_record(&format!("slinky-{i}"))
                    .contains("State=FUTURE")
            })
        },
    )
    .await;

    // A job for two nodes while there are none.
    let sent = Instant::now();
    let job = cluster.submit(&[
        "-p",
        PARTITION,
        "-N",
        "2",
        "--exclusive",
        "--wrap",
        "sleep 8",
    ]);
    until(
        "the autoscaler scales the NodeSet to 2",
        Duration::from_secs(20),
        &a,
        async || replicas().await == 2,
    )
    .await;
    let scaled = sent.elapsed();
    until(
        "the operator runs pods slurm-worker-slinky-0 and -1 (nodes slinky-0, slinky-1)",
        Duration::from_secs(60),
        &a,
        async || running_pods().await == ["slurm-worker-slinky-0", "slurm-worker-slinky-1"],
    )
    .await;
    let pods_up = sent.elapsed();
    support::elastic::runs_on(&cluster, &job, "slinky-[0-1]", JOB_RUNS, &a).await;
    let ran = sent.elapsed();
    // The operator reached Slurm through slurmrestd: it wrote its pod's identity on the node.
    until(
        "the operator's pod info on slinky-0",
        Duration::from_secs(30),
        &a,
        async || {
            cluster
                .node_record("slinky-0")
                .contains(r#""podName":"slurm-worker-slinky-0""#)
        },
    )
    .await;

    // Idle: back to zero. The operator drains each node (its reason, not ours), deletes the
    // pod once the node is drained, and the pod's going takes the node out of Slurm.
    let done = Instant::now();
    let drained_by_operator = std::sync::atomic::AtomicBool::new(false);
    until(
        "the NodeSet back at 0 and the operator's pods gone",
        // The 8-s job, the idle timeout (6 s) and the down window (4 s), then the operator's
        // drain and deletion, with room for a slow machine.
        Duration::from_secs(200),
        &a,
        async || {
            if cluster
                .node_record("slinky-0")
                .contains("Reason=slurm-operator:")
            {
                drained_by_operator.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            replicas().await == 0 && running_pods().await.is_empty()
        },
    )
    .await;
    let back = done.elapsed();
    assert!(
        drained_by_operator.into_inner(),
        "the operator drained slinky-0 (reason slurm-operator: …) before deleting its pod"
    );
    // Nothing of ours drained them: this autoscaler is not colocated.
    let ours = a.logs().matches("drained slinky-").count();
    assert_eq!(ours, 0, "the autoscaler drained a node itself");
    // The next job finds its records again (the preStop deleted them).
    until(
        "the records made again for the next job",
        Duration::from_secs(60),
        &a,
        async || (0..3).all(|i| !cluster.node_record(&format!("slinky-{i}")).is_empty()),
    )
    .await;
    println!(
        "operator e2e (Slurm {}, slurm-operator {}, Slinky chart's NodeSet): submit → /scale 2 \
         in {:.1}s, pods Running in {:.1}s, job running in {:.1}s; job end → pods gone at 0 in \
         {:.1}s",
        cluster.flavor,
        kube_env("HARNESS_SLURM_OPERATOR_VERSION").unwrap_or_default(),
        scaled.as_secs_f64(),
        pods_up.as_secs_f64(),
        ran.as_secs_f64(),
        back.as_secs_f64()
    );
    autoscalers
        .delete("slinky", &DeleteParams::default())
        .await
        .unwrap();
    let _ = nodesets
        .delete_collection(&DeleteParams::default(), &Default::default())
        .await;
}

/// What the colocation planner counts on (it marks the pod on the node it hands to
/// Kubernetes, then lowers replicas by one): on a scale-in, the real operator removes the pod
/// carrying our deletion cost, not the highest ordinal, after draining its node.
#[tokio::test]
async fn the_real_operator_removes_the_pod_we_mark_to_go_first() {
    let _turn = TURN.lock().await;
    let (ns, controller) = operator();
    let cluster = operated();
    reset(&cluster, &ns).await;
    let client = kube_client().await;
    let nodesets = nodeset(&client, &ns, &controller, ("slinky", 3), slurmd()).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let all = ["slinky-0", "slinky-1", "slinky-2"];
    // Ready too: slurm-operator removes a pod that is not Ready before any deletion cost
    // counts.
    let ready = async || {
        let list = pods.list(&ListParams::default().labels(SLURMD_PODS)).await;
        list.map(|l| l.items)
            .unwrap_or_default()
            .iter()
            .filter(|p| {
                (p.status.as_ref().and_then(|s| s.conditions.as_ref()))
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .count()
    };
    let settled = async || {
        running(&pods).await == all
            && ready().await == 3
            && all
                .iter()
                .all(|n| cluster.node_record(n).contains("State=IDLE"))
    };
    // And still so a few seconds later: the operator may replace a pod whose slurmd has not
    // registered yet (seen: "Slurm node is not registered but pod is healthy"), and a pod
    // just made Ready again can still be unready in its cache, which ranks it first.
    let uids = async || {
        let list = pods.list(&ListParams::default().labels(SLURMD_PODS)).await;
        let mut uids: Vec<String> = (list.map(|l| l.items).unwrap_or_default().iter())
            .filter_map(|p| p.metadata.uid.clone())
            .collect();
        uids.sort();
        uids
    };
    let up = support::wait_until(Duration::from_secs(60), || async {
        let before = uids().await;
        if !settled().await {
            return false;
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
        settled().await && uids().await == before
    })
    .await;
    assert!(
        up,
        "three pods and their idle nodes: {:?}",
        running(&pods).await
    );
    pods.patch(
        "slinky-1",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {
            slurmscale_autoscaler::actuator::POD_DELETION_COST: "-100000"
        }}})),
    )
    .await
    .unwrap();
    // The operator reads pods and NodeSets through separate watches, so the autoscaler drops
    // replicas no sooner than MARKS_SETTLE after its marks: as it does, so does the test.
    tokio::time::sleep(slurmscale_autoscaler::controller::MARKS_SETTLE).await;
    // As the actuator scales: a merge patch of the scale subresource.
    nodesets
        .patch_scale(
            "slinky",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 2}})),
        )
        .await
        .unwrap();
    let drained = std::sync::atomic::AtomicBool::new(false);
    let went = support::wait_until(Duration::from_secs(90), || async {
        if cluster
            .node_record("slinky-1")
            .contains("Reason=slurm-operator:")
        {
            drained.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        running(&pods).await == ["slinky-0", "slinky-2"]
            && cluster.node_record("slinky-1").is_empty()
    })
    .await;
    assert!(
        went,
        "the marked pod slinky-1 should go, slinky-0 and slinky-2 stay: pods {:?}, slinky-1: {}",
        running(&pods).await,
        cluster.node_record("slinky-1")
    );
    assert!(
        drained.into_inner(),
        "the operator drained slinky-1 before deleting its pod"
    );
    assert!(cluster.node_record("slinky-2").contains("State=IDLE"));
    nodesets
        .delete("slinky", &DeleteParams::default())
        .await
        .unwrap();
}

/// Slurm-planned mode (`spec.mode: SlurmPlanned`) under the real operator, on the harness's
/// power-saving `planned` partition: slurmctld powers up the records it allocates a job →
/// the autoscaler scales the NodeSet to them → the operator creates the pods (lowest free
/// ordinals) and their slurmd `-b` (the NodeSet's `spec.slurmd.args`) joins the records → the
/// job runs; idle past SuspendTime → slurmctld powers them down → the autoscaler marks those
/// pods and scales down → the operator drains and deletes them, the preStop (overridden, as
/// slurm-planned mode needs before operator 1.2: DOWN, no delete) leaves the records DOWN →
/// the autoscaler resumes them, powered down and plannable again.
#[tokio::test]
async fn the_real_operator_follows_slurmctlds_power_requests_in_slurm_planned_mode() {
    let _turn = TURN.lock().await;
    let (ns, controller) = operator();
    let cluster = operated();
    reset(&cluster, &ns).await;
    let client = kube_client().await;
    let nodesets: Api<v1beta1::NodeSet> = Api::namespaced(client.clone(), &ns);
    let _ = nodesets.delete("planned", &DeleteParams::default()).await;
    let c = cluster.clone();
    tokio::task::spawn_blocking(move || support::elastic::reset_planned(&c))
        .await
        .unwrap();
    let prestop = "scontrol update nodename=$(hostname) state=down reason='Pod is terminating'";
    // slurm-planned needs slurmd -b, and a preStop that does not delete the node.
    let slurmd = json!({
        "image": "harness/slurmd",
        "args": ["-b"],
        "lifecycle": {"preStop": {"exec": {"command": ["/bin/sh", "-c", prestop]}}},
    });
    let nodesets = nodeset(&client, &ns, &controller, ("planned", 0), slurmd).await;
    let autoscalers: Api<NodeSetAutoscaler> = Api::namespaced(client.clone(), &ns);
    let nsa: NodeSetAutoscaler = serde_json::from_value(json!({
        "apiVersion": "slurmscale.io/v1alpha1", "kind": "NodeSetAutoscaler",
        "metadata": {"name": "planned"},
        "spec": {"scaleTargetRef": {"name": "planned"}, "slurm": {"cluster": cluster.name},
                 "maxReplicas": 4, "mode": "SlurmPlanned"}
    }))
    .unwrap();
    autoscalers.create(&Default::default(), &nsa).await.unwrap();
    let a = support::elastic::scontrol_autoscaler(&client, &cluster, "planned-lease").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let replicas = async || support::elastic::spec_replicas(&nodesets, "planned").await;
    let state = |i: usize| support::elastic::node_state(&cluster, &support::elastic::planned(i)).0;
    let down_and_clean =
        |s: &str| s.split('+').any(|w| w == "POWERED_DOWN") && support::elastic::clean(s);
    until(
        "four powered-down CLOUD records",
        Duration::from_secs(60),
        &a,
        async || (0..4).all(|i| down_and_clean(&state(i))),
    )
    .await;
    support::elastic::reloaded_after_new_records(&client, &ns, &cluster).await;

    let sent = Instant::now();
    let job = cluster.submit(&[
        "-p",
        "planned",
        "-N",
        "2",
        "--exclusive",
        "--wrap",
        "sleep 3",
    ]);
    until(
        "the NodeSet scaled to the nodes slurmctld powers up",
        Duration::from_secs(60),
        &a,
        async || replicas().await >= 2,
    )
    .await;
    let scaled = sent.elapsed();
    until(
        "the operator's pods run and the job ran on them",
        Duration::from_secs(120),
        &a,
        async || {
            let done = cluster.run("sacct", &["-n", "-X", "-j", &job, "-o", "State"]);
            done.contains("COMPLETED")
        },
    )
    .await;
    let ran = sent.elapsed();
    let shown = cluster.run("sacct", &["-n", "-X", "-j", &job, "-o", "NodeList"]);
    let requeued = cluster.run("scontrol", &["-o", "show", "job", &job]);
    assert!(
        requeued.is_empty() || requeued.contains("Restarts=0"),
        "the job was requeued: {requeued}"
    );
    until(
        "back to zero pods once slurmctld powered the nodes down, the records resumed",
        // SuspendTime and SuspendTimeout are the timers; the rest gets slack.
        Duration::from_secs(180),
        &a,
        async || {
            replicas().await == 0
                && running(&pods)
                    .await
                    .iter()
                    .all(|p| !p.starts_with("planned-"))
                && (0..4).all(|i| down_and_clean(&state(i)))
        },
    )
    .await;
    eprintln!(
        "slurm-planned under slurm-operator {}: sbatch -> /scale in {scaled:?}, job on {} done in {ran:?}, back to zero and resumed at {:?}",
        kube_env("HARNESS_SLURM_OPERATOR_VERSION").unwrap_or_default(),
        shown.trim(),
        sent.elapsed()
    );
    let _ = autoscalers
        .delete("planned", &DeleteParams::default())
        .await;
    drop(a);
    nodesets
        .delete("planned", &DeleteParams::default())
        .await
        .unwrap();
}

/// Slinky's way to a token, as the chart's `slurm.auth.mode: slinkyToken` sets it up: the
/// chart renders a Token; slurm-operator signs a JWT for the Slurm user with the key it
/// holds, keeps it in a Secret and rotates it; slurmscale reads that file, as the Secret's
/// volume has it, across rotations — and never sees slurmctld's signing key.
#[tokio::test]
async fn the_operators_rotating_token_keeps_the_exporter_in() {
    use k8s_openapi::api::core::v1::Secret;
    use kube::api::DynamicObject;
    use kube::discovery::ApiResource;
    let (ns, controller) = operator();
    let cluster = operated();
    let client = kube_client().await;
    // Our chart, rendered as `helm install slurmscale -n <ns>` with the Token mode does.
    // The key Secret as Slinky's chart names it, under its default key (jwt.key).
    let key_secret = format!("{controller}-auth-jwt");
    let out = std::process::Command::new(support::tool("helm"))
        .args(["template", "slurmscale"])
        .arg(support::repo_root().join("charts/slurmscale"))
        .args(["-n", &ns, "--set", "slurm.url=http://127.0.0.1:6820"])
        .args(["--set", "slurm.auth.mode=slinkyToken"])
        .args([
            "--set",
            &format!("slurm.auth.slinkyToken.jwtKeySecret={key_secret}"),
        ])
        .args([
            "--set",
            &format!(
                "slurm.auth.slinkyToken.lifetime={}s",
                TOKEN_LIFETIME.as_secs()
            ),
        ])
        .env("HOME", std::env::temp_dir())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token: serde_json::Value = String::from_utf8_lossy(&out.stdout)
        .split("\n---")
        .filter_map(|d| serde_saphyr::from_str::<serde_json::Value>(d).ok())
        .find(|d| d["kind"] == "Token")
        .expect("the chart renders a Token");
    let gvk = kube::core::GroupVersionKind::gvk("slinky.slurm.net", "v1beta1", "Token");
    let tokens: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns, &ApiResource::from_gvk(&gvk));
    let token: DynamicObject = serde_json::from_value(token).unwrap();
    let name = token.metadata.name.clone().unwrap();
    let _ = tokens.delete(&name, &DeleteParams::default()).await;
    tokens
        .create(&kube::api::PostParams::default(), &token)
        .await
        .unwrap();
    // The Secret the chart mounts: <token>-jwt-<user>, key SLURM_JWT.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let secret = format!("{name}-jwt-{}", cluster.user);
    let jwt = async || {
        let s = secrets.get(&secret).await.ok()?;
        let data = s.data?.get("SLURM_JWT")?.0.clone();
        String::from_utf8(data).ok()
    };
    let first = support::wait_until(Duration::from_secs(30), async || jwt().await.is_some()).await;
    assert!(first, "slurm-operator wrote no Secret {secret}");
    let first = jwt().await.unwrap();
    // Signed no later than now: expired a lifetime from now at the latest.
    let first_seen = Instant::now();
    let first_expired_by =
        (chrono::Utc::now().timestamp() + TOKEN_LIFETIME.as_secs() as i64) as f64;
    // As the kubelet updates a Secret volume: the new file swapped in.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("SLURM_JWT");
    let write = |t: &str| {
        let tmp = dir.path().join("..new");
        std::fs::write(&tmp, t).unwrap();
        std::fs::rename(&tmp, &file).unwrap();
    };
    write(&first);
    let path = file.to_string_lossy().into_owned();
    let exporter = support::Process::start(
        &[
            "exporter",
            "--no-kubernetes",
            "--interval",
            "1s",
            "--token-file",
            &path,
        ],
        &[
            ("SLURM_REST_URL", &cluster.url),
            ("SLURM_USER", &cluster.user),
            ("SLURM_CLUSTER", &cluster.name),
        ],
    );
    exporter.wait_ready(Duration::from_secs(30)).await;
    // Rotated at four fifths of its 20 s: the new one in the file, the first expired.
    let rotated = support::wait_until(Duration::from_secs(30), async || {
        jwt().await.is_some_and(|t| t != first)
    })
    .await;
    assert!(rotated, "slurm-operator never rotated the token");
    write(&jwt().await.unwrap());
    tokio::time::sleep(
        (TOKEN_LIFETIME + Duration::from_secs(3)).saturating_sub(first_seen.elapsed()),
    )
    .await;
    // Still reading Slurm: answers good on the endpoints slurmctld authenticates, taken after
    // the first token expired (a timestamp against its expiry, not an age against a clock).
    let fresh = support::wait_until(Duration::from_secs(30), async || {
        let m = exporter.metrics().await;
        m.get("slurm_exporter_up", &[]) == Some(1.0)
            && ["diag", "nodes", "partitions"].into_iter().all(|e| {
                m.get(
                    "slurm_exporter_endpoint_last_success_timestamp_seconds",
                    &[("endpoint", e)],
                )
                .is_some_and(|t| t > first_expired_by)
            })
    })
    .await;
    assert!(
        fresh,
        "the exporter lost Slurm once the first token expired\n{}",
        exporter.logs()
    );
    let _ = tokens.delete(&name, &DeleteParams::default()).await;
}
