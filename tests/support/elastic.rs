//! The elastic partition as the autoscaler tests drive it: a namespace with a NodeSet and a
//! NodeSetAutoscaler on it, and the test playing the operator (when the NodeSet's replicas
//! rise it starts slurmd for that many elastic nodes, e1, e2, ..., when they fall it stops
//! the highest ones, as slurm-operator does with NodeSet pods).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use slurmscale_autoscaler::crd::NodeSetAutoscaler;
use slurmscale_exporter::k8s::nodeset::v1beta1;

use super::{Process, RESET, SlurmCluster, kube_client, namespace};

/// The elastic partition is one per Slurm: tests that use it take turns.
pub static ELASTIC: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// No jobs and no elastic node up.
pub async fn reset_elastic(cluster: &SlurmCluster) {
    let c = cluster.clone();
    tokio::task::spawn_blocking(move || c.reset_elastic())
        .await
        .unwrap();
}

/// Deletes the NodeSetAutoscalers named `name` that an earlier test left in a namespace
/// starting with `prefix` and reading `cluster`'s Slurm, so none makes records or acts on
/// the partition the next test starts from.
pub async fn delete_autoscalers(cluster: &SlurmCluster, prefix: &str, name: &str) {
    let client = kube_client().await;
    let nsas: Api<NodeSetAutoscaler> = Api::all(client.clone());
    for n in nsas
        .list(&Default::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
    {
        let ns = n.metadata.namespace.clone().unwrap_or_default();
        if ns.starts_with(prefix) && n.spec.slurm.cluster.as_deref() == Some(&cluster.name) {
            let _ = Api::<NodeSetAutoscaler>::namespaced(client.clone(), &ns)
                .delete(name, &Default::default())
                .await;
        }
    }
}

/// The test's operator: follows the NodeSet's replicas with elastic slurmds.
pub fn operate(
    client: kube::Client,
    ns: String,
    cluster: SlurmCluster,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let api: Api<v1beta1::NodeSet> = Api::namespaced(client, &ns);
        let mut up: BTreeSet<usize> = BTreeSet::new();
        loop {
            // An API server that does not answer says nothing about the wanted size.
            let Ok(nodeset) = api.get("elastic").await else {
                tokio::time::sleep(Duration::from_millis(300)).await;
                continue;
            };
            let want = nodeset.spec.replicas.unwrap_or(0).clamp(0, 8) as usize;
            while up.len() < want {
                let i = up.len() + 1;
                let c = cluster.clone();
                tokio::task::spawn_blocking(move || c.harness(&["node-up", &format!("e{i}")]))
                    .await
                    .unwrap();
                up.insert(i);
            }
            while up.len() > want {
                let i = *up.iter().next_back().unwrap();
                let c = cluster.clone();
                let ok = tokio::task::spawn_blocking(move || {
                    std::process::Command::new("bash")
                        .arg(super::repo_root().join("tests/harness/slurm.sh"))
                        .args([&c.flavor, "node-down", &format!("e{i}")])
                        .status()
                        .is_ok_and(|s| s.success())
                })
                .await
                .unwrap();
                if !ok {
                    break; // still busy: the operator drains first; try again later
                }
                up.remove(&i);
            }
            let status = json!({"status": {"replicas": up.len(), "readyReplicas": up.len(), "selector": "app=slurmd", "nodeSetHash": "test"}});
            let _ = api
                .patch_status("elastic", &PatchParams::default(), &Patch::Merge(status))
                .await;
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    })
}

/// A v1beta1 NodeSet `name` at 0 replicas in `ns` (with `extra_conf`, what its pods'
/// slurmd registers), created; its API.
pub async fn nodeset_at_zero(
    client: &kube::Client,
    ns: &str,
    name: &str,
    extra_conf: Option<&str>,
) -> Api<v1beta1::NodeSet> {
    let nodesets: Api<v1beta1::NodeSet> = Api::namespaced(client.clone(), ns);
    let spec = v1beta1::NodeSetSpec {
        replicas: Some(0),
        extra_conf: extra_conf.map(String::from),
        ..Default::default()
    };
    nodesets
        .create(&PostParams::default(), &v1beta1::NodeSet::new(name, spec))
        .await
        .unwrap();
    nodesets
}

/// The replicas NodeSet `name` asks for (`spec.replicas`); -1 when it cannot be read.
pub async fn spec_replicas(nodesets: &Api<v1beta1::NodeSet>, name: &str) -> i32 {
    nodesets
        .get(name)
        .await
        .ok()
        .and_then(|n| n.spec.replicas)
        .unwrap_or(-1)
}

/// NodeSetAutoscaler `slinky` in `ns` on NodeSet `slinky` of `cluster`, keeping node records
/// (0-3 replicas, idle after 6 s, a 4 s down window), and the autoscaler process that makes
/// the records with `scontrol` (its Lease in a namespace of its own).
pub async fn slinky_autoscaler(
    client: &kube::Client,
    ns: &str,
    cluster: &SlurmCluster,
) -> (Api<NodeSetAutoscaler>, Process) {
    slinky_autoscaler_of(client, ns, cluster, "slinky").await
}

/// [`slinky_autoscaler`] of NodeSet `nodeset`: the partition is the one it serves, as
/// slurm-operator names it (no annotation, no `spec.slurm.partitions`). It is the README's
/// NodeSetAutoscaler with the test's bounds and short timers; on a NodeSet of Slinky's chart,
/// the README's must name it as it is.
pub async fn slinky_autoscaler_of(
    client: &kube::Client,
    ns: &str,
    cluster: &SlurmCluster,
    nodeset: &str,
) -> (Api<NodeSetAutoscaler>, Process) {
    let autoscalers: Api<NodeSetAutoscaler> = Api::namespaced(client.clone(), ns);
    let nsa = readme_nsa(cluster, ("slinky", nodeset), 3);
    autoscalers
        .create(&PostParams::default(), &nsa)
        .await
        .unwrap();
    (
        autoscalers,
        scontrol_autoscaler(client, cluster, "slinky-lease").await,
    )
}

/// The NodeSetAutoscaler of the README's "Install beside Slinky", named `name` on NodeSet
/// `nodeset` of `cluster`, with the test's bound (0 to `max` replicas) and short timers (idle
/// after 6 s, a 4 s down window), keeping node records. The partition is the one the NodeSet
/// serves, as slurm-operator names it (no annotation, no `spec.slurm.partitions`); on a
/// NodeSet of Slinky's chart, the README's must name it as it is.
pub fn readme_nsa(
    cluster: &SlurmCluster,
    (name, nodeset): (&str, &str),
    max: u32,
) -> NodeSetAutoscaler {
    let mut nsa = super::readme_yaml("slinky-nsa.yaml");
    if nodeset.starts_with("slurm-worker-") {
        assert_eq!(
            nsa["spec"]["scaleTargetRef"]["name"], nodeset,
            "the README's NodeSetAutoscaler targets the NodeSet Slinky's chart makes"
        );
    }
    assert_eq!(
        nsa["metadata"]["name"], "slinky",
        "README's NodeSetAutoscaler"
    );
    nsa["metadata"] = json!({"name": name});
    nsa["spec"]["scaleTargetRef"]["name"] = json!(nodeset);
    let spec = nsa["spec"].as_object_mut().unwrap();
    assert!(
        !spec.contains_key("slurm"),
        "README: the partition is the NodeSet's own"
    );
    for (key, value) in [
        ("slurm", json!({"cluster": cluster.name})),
        ("maxReplicas", json!(max)),
        ("idleTimeoutSeconds", json!(6)),
        (
            "scaleDown",
            json!({"stabilizationWindowSeconds": 4, "maxStep": 8}),
        ),
        ("nodeRecords", json!("Future")),
    ] {
        spec.insert(key.into(), value);
    }
    serde_json::from_value(nsa).unwrap()
}

/// The autoscaler process for `cluster`, making node records (and on 22.05 its node updates)
/// with the cluster's `scontrol`; its Lease in a new namespace `<lease>-…`.
pub async fn scontrol_autoscaler(
    client: &kube::Client,
    cluster: &SlurmCluster,
    lease: &str,
) -> Process {
    let scontrol = cluster.bin.join("scontrol").to_string_lossy().into_owned();
    let conf = cluster.conf.to_string_lossy().into_owned();
    let lease = namespace(client, lease).await;
    super::autoscaler(
        cluster,
        &lease,
        &["--scontrol", &scontrol, "--scontrol-conf", &conf],
    )
}

/// The harness's Slinky partition (`slinky`) with no job, no pod's slurmd and no record:
/// cancels its jobs, waits for them to go (panics if they do not within [`RESET`]), takes
/// down any `slinky-N` pod the harness runs and deletes every record.
pub fn reset_slinky(c: &SlurmCluster) {
    let _ = c
        .cmd("scancel")
        .args(["--user=root", "--partition", "slinky"])
        .status();
    jobs_gone(c, "slinky");
    for i in 0..16 {
        let name = format!("slinky-{i}");
        let _ = std::process::Command::new("bash")
            .arg(super::repo_root().join("tests/harness/slurm.sh"))
            .args([&c.flavor, "pod-down", &name, "delete"])
            .output();
        // Records nobody's pod registered (FUTURE) are not seen by pod-down.
        let _ = c
            .cmd("scontrol")
            .args(["delete", &format!("nodename={name}")])
            .output();
    }
}

pub struct Setup {
    pub client: kube::Client,
    pub ns: String,
    pub nodesets: Api<v1beta1::NodeSet>,
    pub autoscalers: Api<NodeSetAutoscaler>,
    pub operator: tokio::task::JoinHandle<()>,
}

/// A failing test leaves no NodeSetAutoscaler behind: the next test's autoscaler watches
/// every namespace and would act on it, a rival NodeSet of the same partition, and fail that
/// test too.
impl Drop for Setup {
    fn drop(&mut self) {
        self.operator.abort();
        if std::thread::panicking() {
            delete_while_unwinding(&self.autoscalers, "elastic");
        }
    }
}

/// Deletes `name` from a `Drop` of a panicking test, where no runtime may be entered: on a
/// thread of its own, given 10 s.
pub fn delete_while_unwinding(autoscalers: &Api<NodeSetAutoscaler>, name: &str) {
    let (autoscalers, name) = (autoscalers.clone(), name.to_owned());
    let _ = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime for the clean-up");
        rt.block_on(async {
            let params = Default::default();
            let gone = autoscalers.delete(&name, &params);
            let _ = tokio::time::timeout(Duration::from_secs(10), gone).await;
        });
    })
    .join();
}

impl Setup {
    /// Deletes the autoscaler (so no later test's autoscaler process acts on it) and stops
    /// the operator; elastic nodes and jobs are reset.
    pub async fn teardown(self, cluster: &SlurmCluster) {
        let _ = self
            .autoscalers
            .delete("elastic", &Default::default())
            .await;
        self.operator.abort();
        reset_elastic(cluster).await;
    }
}

pub async fn setup(cluster: &SlurmCluster, dry_run: bool) -> Setup {
    setup_with(cluster, dry_run, json!({})).await
}

/// As [`setup`], with `spec` merged into the NodeSetAutoscaler's spec.
pub async fn setup_with(
    cluster: &SlurmCluster,
    dry_run: bool,
    spec_extra: serde_json::Value,
) -> Setup {
    reset_elastic(cluster).await;
    let mut spec = json!({ "dryRun": dry_run });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), spec_extra.as_object()) {
        spec.extend(extra.clone());
    }
    let (client, ns, nodesets, autoscalers) =
        nodeset_and_autoscaler(cluster, "autoscale", spec).await;
    let operator = operate(client.clone(), ns.clone(), cluster.clone());
    Setup {
        client,
        ns,
        nodesets,
        autoscalers,
        operator,
    }
}

/// A new namespace (`prefix-…`) holding a NodeSet `elastic` at 0 replicas and a
/// NodeSetAutoscaler `elastic` on it for `cluster` (0-8 replicas, idle after 6 s, a 4 s
/// down window, steps of 8), with `spec_extra` merged into its spec. Nobody operates it.
pub async fn nodeset_and_autoscaler(
    cluster: &SlurmCluster,
    prefix: &str,
    spec_extra: serde_json::Value,
) -> (
    kube::Client,
    String,
    Api<v1beta1::NodeSet>,
    Api<NodeSetAutoscaler>,
) {
    let client = kube_client().await;
    let ns = namespace(&client, prefix).await;
    let nodesets = nodeset_at_zero(&client, &ns, "elastic", None).await;
    let autoscalers: Api<NodeSetAutoscaler> = Api::namespaced(client.clone(), &ns);
    let mut nsa = json!({
        "apiVersion": "slurmscale.io/v1alpha1", "kind": "NodeSetAutoscaler",
        "metadata": {"name": "elastic"},
        "spec": {
            "scaleTargetRef": {"name": "elastic"},
            "slurm": {"cluster": cluster.name},
            "minReplicas": 0, "maxReplicas": 8, "idleReplicas": 0, "idleTimeoutSeconds": 6,
            "scaleUp": {"maxStep": 8},
            "scaleDown": {"stabilizationWindowSeconds": 4, "maxStep": 8},
        }
    });
    if let (Some(spec), Some(extra)) = (nsa["spec"].as_object_mut(), spec_extra.as_object()) {
        spec.extend(extra.clone());
    }
    let nsa: NodeSetAutoscaler = serde_json::from_value(nsa).unwrap();
    autoscalers
        .create(&PostParams::default(), &nsa)
        .await
        .unwrap();
    (client, ns, nodesets, autoscalers)
}

pub async fn replicas(s: &Setup) -> i32 {
    s.nodesets
        .get("elastic")
        .await
        .unwrap()
        .spec
        .replicas
        .unwrap_or(0)
}

pub async fn condition(s: &Setup, type_: &str) -> Option<String> {
    let nsa = s.autoscalers.get("elastic").await.ok()?;
    nsa.status?
        .conditions
        .into_iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status)
}

/// Waits for `check`; on failure says what the autoscaler, Slurm and the NodeSet looked like.
pub async fn eventually(what: &str, within: Duration, p: &Process, check: impl AsyncFn() -> bool) {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let mut slurm = String::new();
    for flavor in super::FLAVORS {
        let cluster = SlurmCluster::get(flavor);
        let queue = cluster.run("squeue", &["-p", "elastic,planned,slinky"]);
        let nodes = cluster.run("sinfo", &["-N", "-p", "elastic,planned,slinky"]);
        slurm.push_str(&format!(
            "Slurm {flavor}:\nsqueue:\n{queue}\nsinfo:\n{nodes}\n"
        ));
    }
    let client = kube_client().await;
    let nsas: Api<NodeSetAutoscaler> = Api::all(client);
    let statuses: Vec<String> = nsas
        .list(&ListParams::default())
        .await
        .map(|l| {
            l.items
                .iter()
                .map(|n| {
                    format!(
                        "{:?}: {:?}",
                        n.metadata.namespace,
                        n.status.as_ref().map(|s| (
                            &s.current_replicas,
                            &s.desired_replicas,
                            &s.last_decision
                        ))
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    panic!(
        "{what}: not within {within:?}\n{slurm}autoscalers:\n{}\nautoscaler logs:\n{}",
        statuses.join("\n"),
        p.logs()
    );
}

/// Submits an exclusive job to the elastic partition: each job needs whole nodes, so node
/// counts are what the test says (a 1-core job would otherwise share a busy node).
/// Waits until `job` runs on `nodes` (squeue's node list) or has already ended.
pub async fn runs_on(
    cluster: &SlurmCluster,
    job: &str,
    nodes: &str,
    within: Duration,
    p: &Process,
) {
    let what = format!("job {job} running on {nodes}");
    eventually(&what, within, p, async || {
        let state = cluster.run("squeue", &["-h", "-j", job, "-o", "%T %N"]);
        state.starts_with(&format!("RUNNING {nodes}")) || state.trim().is_empty()
    })
    .await
}

pub fn sbatch(cluster: &SlurmCluster, args: &[&str]) -> String {
    cluster.submit(&[&["-p", "elastic", "--exclusive"], args].concat())
}

pub fn job_state(cluster: &SlurmCluster, id: &str) -> String {
    cluster
        .run("squeue", &["-h", "-j", id, "-o", "%T"])
        .trim()
        .to_string()
}

pub async fn events(s: &Setup, reason: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(s.client.clone(), &s.ns);
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .collect()
}

/// The harness's power-saving `planned` partition (slurm-planned mode): no job and no pod;
/// records (never deleted: a deleted CLOUD record cannot be scheduled on
/// 24.11.5 until slurmctld reconfigures) resumed where DOWN or DRAIN and powered down, as a
/// fresh NodeSet would find them.
///
/// Panics if the jobs or the records do not get there within [`RESET`] each: the next test
/// would otherwise start on a partition that is not what it expects and fail for it later.
pub fn reset_planned(c: &SlurmCluster) {
    let _ = c
        .cmd("scancel")
        .args(["--user=root", "--partition", "planned"])
        .status();
    jobs_gone(c, "planned");
    for i in 0..8 {
        let _ = std::process::Command::new("bash")
            .arg(super::repo_root().join("tests/harness/slurm.sh"))
            .args([&c.flavor, "pod-down", &planned(i), "down"])
            .output();
    }
    // Generous on purpose: SuspendTimeout (5 s) is the timer; the rest is slurmctld's work.
    let deadline = Instant::now() + RESET;
    loop {
        let mut unsettled = Vec::new();
        for i in 0..8 {
            let (state, _) = node_state(c, &planned(i));
            let words: Vec<&str> = state.split('+').collect();
            if state.is_empty() || (words.contains(&"POWERED_DOWN") && clean(&state)) {
                continue;
            }
            unsettled.push(format!("{}: {state}", planned(i)));
            let fix = if !clean(&state) {
                "state=resume"
            } else if !words.iter().any(|w| w.starts_with("POWER")) {
                "state=power_down_force"
            } else {
                continue; // on its way down
            };
            let _ = c
                .cmd("scontrol")
                .args(["update", &format!("nodename={}", planned(i)), fix])
                .output();
        }
        if unsettled.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "Slurm {}: planned records not back to POWERED_DOWN within {RESET:?}: {unsettled:?}",
            c.flavor
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Waits for every job of `partition` to leave `squeue` (after a scancel); panics, with what
/// is left, if they have not within [`RESET`].
fn jobs_gone(c: &SlurmCluster, partition: &str) {
    let deadline = Instant::now() + RESET;
    loop {
        let left = c.run("squeue", &["-h", "-p", partition, "-o", "%A %T %N"]);
        if left.trim().is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "Slurm {}: the {partition} partition's jobs still there {RESET:?} after \
             scancel:\n{left}",
            c.flavor
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Neither DOWN nor DRAIN (`scontrol`'s State= words).
pub fn clean(state: &str) -> bool {
    !state.split('+').any(|w| w == "DOWN" || w == "DRAIN")
}

/// `scontrol show node`'s State= and Reason= of a record ("" when there is none).
pub fn node_state(c: &SlurmCluster, node: &str) -> (String, String) {
    let out = c
        .cmd("scontrol")
        .args(["-o", "show", "node", node])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let field = |k: &str| {
        out.split_whitespace()
            .find_map(|w| w.strip_prefix(k))
            .unwrap_or_default()
            .to_string()
    };
    let reason = out
        .split_once(" Reason=")
        .map(|(_, r)| r.split(" [").next().unwrap_or(r).trim().to_string())
        .unwrap_or_default();
    (field("State="), reason)
}

/// Record `planned-<i>`.
pub fn planned(i: usize) -> String {
    format!("planned-{i}")
}

/// Slurm 24.11.5 does not schedule CLOUD records created after any dynamic node was deleted
/// (as Slinky 1.0/1.1's preStop deletes a pod's node), and 26.05.5 powers none up when it
/// started with no node to save power on, until slurmctld reconfigures: so where the
/// autoscaler made records in namespace `ns` it has slurmctld reconfigure once they are
/// there: waits for its `Reconfigured` Event, then for slurmctld (24.11 and 26.05 re-execute
/// themselves). On 22.05, which is affected by neither, there must be none.
pub async fn reloaded_after_new_records(client: &kube::Client, ns: &str, cluster: &SlurmCluster) {
    let reloads = async || super::event_notes(client, ns, "Reconfigured").await;
    if cluster.flavor == "22.05" {
        assert_eq!(
            reloads().await,
            Vec::<String>::new(),
            "22.05 needs no reload"
        );
        return;
    }
    if super::event_notes(client, ns, "NodeRecords")
        .await
        .is_empty()
    {
        return;
    }
    // Generous on purpose: only that the reconfigure comes matters here, not how soon.
    let reloaded = super::wait_until(Duration::from_secs(60), async || {
        !reloads().await.is_empty()
    })
    .await;
    assert!(
        reloaded,
        "the autoscaler made records on {} but never had slurmctld reconfigure \
         (it uses none of them until it does); events: {:?}",
        cluster.flavor,
        super::event_notes(client, ns, "ReconfigureFailed").await
    );
    // The re-exec'd slurmctld must answer before the caller goes on: a test that went on
    // without it failed later on an unrelated-looking Slurm error.
    let up = super::wait_until(Duration::from_secs(60), async || slurmctld_up(cluster)).await;
    assert!(
        up,
        "slurmctld {} did not answer `scontrol ping` within 60 s of its reconfigure",
        cluster.flavor
    );
}

/// `scontrol ping` answered that slurmctld is up.
pub fn slurmctld_up(cluster: &SlurmCluster) -> bool {
    cluster
        .cmd("scontrol")
        .arg("ping")
        .output()
        .is_ok_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).contains("UP"))
}

/// The NodeSets of Slinky's own `slurm` Helm chart (the operator module's, which the harness
/// builds), rendered with `tests/support/slinky-chart-values.yaml` as a site's `helm install
/// slurm` would make them, and those of `keys` created in `ns` unmodified — but for their
/// `controllerRef`, pointed at `controller` (namespace, name) when given (the harness's
/// Controller, for the real operator). The keys: `slinky` (NodeSet `slurm-worker-slinky`,
/// host name `slinky-`, Slurm's `slinky`), `planned` (`planned-`, its pods' slurmd run with
/// `-b`), `accel` (`accel-`, 4 GPUs a node) and `cpu` (`cpu-`, for a colocated pool). Returns
/// the names made.
pub async fn chart_nodesets(
    client: &kube::Client,
    ns: &str,
    controller: Option<(&str, &str)>,
    keys: &[&str],
) -> Vec<String> {
    use kube::api::DynamicObject;
    use kube::discovery::ApiResource;
    let chart = super::kube_env("HARNESS_SLINKY_CHART").expect(
        "kube.sh env names HARNESS_SLINKY_CHART: restart the harness (tests/harness/up.sh)",
    );
    let values = super::repo_root().join("tests/support/slinky-chart-values.yaml");
    let out = std::process::Command::new(super::tool("helm"))
        .args(["template", "slurm", &chart, "-n", ns, "-f"])
        .arg(&values)
        .env("HOME", std::env::temp_dir())
        .output()
        .expect("helm (tests/harness/tools.sh)");
    assert!(
        out.status.success(),
        "helm template of Slinky's chart failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let resource = ApiResource::erase::<v1beta1::NodeSet>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
    let mut names = Vec::new();
    for doc in text.split("\n---") {
        let Ok(mut object) = serde_saphyr::from_str::<serde_json::Value>(doc) else {
            continue;
        };
        if object["kind"] != "NodeSet"
            || !keys
                .iter()
                .any(|k| object["metadata"]["name"] == format!("slurm-worker-{k}"))
        {
            continue;
        }
        if let Some((namespace, name)) = controller {
            object["spec"]["controllerRef"] = json!({"namespace": namespace, "name": name});
        }
        let object: DynamicObject = serde_json::from_value(object).unwrap();
        names.push(object.metadata.name.clone().unwrap_or_default());
        api.create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("creating {:?}: {e}", object.metadata.name));
    }
    names.sort();
    assert_eq!(
        names.len(),
        keys.len(),
        "the chart rendered {names:?} of {keys:?}"
    );
    names
}
