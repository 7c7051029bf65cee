//! The harness's `planned` partition as a slurm-planned NodeSet sees it, for the tests that
//! run one (`slurm_planned.rs`, `just_in_time.rs`): its autoscaler, and a stand-in for
//! slurm-operator and the kubelet that runs each pod's `slurmd -Z -b` on the records
//! (`slurm.sh pod-up`), as `slurm_planned.rs`'s header describes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use slurmscale_autoscaler::crd::NodeSetAutoscaler;
use slurmscale_exporter::k8s::nodeset::v1beta1;

use super::{Process, SlurmCluster, kube_client, namespace};

/// The partition, its autoscaler and (made by hand) its NodeSet.
pub const NODESET: &str = "planned";
/// The NodeSet as Slinky's chart names it (pod host name `planned-`, so Slurm's `planned`).
pub const CHART_NODESET: &str = "slurm-worker-planned";
/// Ordinals the autoscaler keeps records for (`maxReplicas`).
pub const MAX: usize = 4;
pub const SELECTOR: &str = "app=planned";
pub const DELETION_COST: &str = "nodeset.slinky.slurm.net/pod-deletion-cost";
/// What the pods' slurmd registers (the NodeSet's extraConf, with its feature).
pub const POD_CONF: &str = "Feature=planned CPUs=4 RealMemory=8000";

/// How long the NodeSet has to follow the records slurmctld powers up. Generous on purpose:
/// the test checks what it is scaled to; how fast is `cargo bench -p slurmscale-autoscaler
/// --bench reaction`'s to measure (its slurm-planned cases).
pub const PLANNED_SCALE: Duration = Duration::from_secs(60);

/// The Slurm node of ordinal `i`, whichever way the NodeSet is named.
pub fn name(i: usize) -> String {
    format!("{NODESET}-{i}")
}

/// The partition as a fresh install has it: no job, no pod's slurmd, no record, and no
/// NodeSetAutoscaler of this Slurm left by an earlier run to make records or act on them.
pub async fn reset(cluster: &SlurmCluster) {
    super::elastic::delete_autoscalers(cluster, "planned-", NODESET).await;
    let _ = std::fs::remove_file(&cluster.wake_file);
    let c = cluster.clone();
    tokio::task::spawn_blocking(move || super::elastic::reset_planned(&c))
        .await
        .unwrap();
}

/// Record `i` is powered down and not asked to come up.
pub fn powered_down(c: &SlurmCluster, i: usize) -> bool {
    let (state, _) = super::elastic::node_state(c, &name(i));
    state.split('+').any(|w| w == "POWERED_DOWN") && !state.contains("POWERING_UP")
}

/// The job runs (past CONFIGURING: its nodes are up) or has completed.
pub fn ran_or_runs(c: &SlurmCluster, job: &str) -> bool {
    let now = c.run("squeue", &["-h", "-j", job, "-o", "%T"]);
    now.trim() == "RUNNING"
        || (now.trim().is_empty()
            && c.run("sacct", &["-n", "-X", "-j", job, "-o", "State"])
                .contains("COMPLETED"))
}

/// slurm-operator and the kubelet for NodeSet `nodeset`: pods `<nodeset>-<ordinal>` (host
/// name, so Slurm node, `planned-<ordinal>`) for the lowest free ordinals as replicas rise,
/// the first-ranked pod (deletion cost, then highest ordinal) drained, stopped with the
/// preStop's DOWN and deleted as they fall. The ordinals it ran, in order. While `hold` is
/// set it starts no pod (a pod slow to come: an image pull).
pub fn operate(
    client: kube::Client,
    ns: String,
    cluster: SlurmCluster,
    hold: Arc<AtomicBool>,
    nodeset: &'static str,
) -> (
    tokio::task::JoinHandle<()>,
    std::sync::Arc<std::sync::Mutex<Vec<String>>>,
) {
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let said = log.clone();
    let task = tokio::spawn(async move {
        let nodesets: Api<v1beta1::NodeSet> = Api::namespaced(client.clone(), &ns);
        let pods: Api<Pod> = Api::namespaced(client, &ns);
        loop {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let Ok(object) = nodesets.get(nodeset).await else {
                continue;
            };
            let Ok(list) = pods.list(&Default::default()).await else {
                continue;
            };
            let want = object.spec.replicas.unwrap_or(0).clamp(0, MAX as i32) as usize;
            // Ordinal → deletion cost of the pods there are.
            let mut have: BTreeMap<usize, i64> = list
                .items
                .iter()
                .filter_map(|p| {
                    let n = p.metadata.name.as_deref()?;
                    let i = n.strip_prefix(nodeset)?.strip_prefix('-')?.parse().ok()?;
                    let cost = p
                        .metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(DELETION_COST))
                        .and_then(|c| c.parse().ok())
                        .unwrap_or(0);
                    Some((i, cost))
                })
                .collect();
            while have.len() < want && !hold.load(Ordering::SeqCst) {
                let i = (0..MAX).find(|i| !have.contains_key(i)).unwrap();
                let pod: Pod = serde_json::from_value(json!({
                    "metadata": {"name": format!("{nodeset}-{i}"), "labels": {"app": NODESET}},
                    "spec": {"hostname": name(i), "containers": [{"name": "slurmd", "image": "slurmd"}]},
                }))
                .unwrap();
                if pods.create(&PostParams::default(), &pod).await.is_err() {
                    break;
                }
                let c = cluster.clone();
                tokio::task::spawn_blocking(move || {
                    c.harness(&["pod-up", &name(i), POD_CONF, "-b"])
                })
                .await
                .unwrap();
                let ready = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
                let _ = pods
                    .patch_status(
                        &format!("{nodeset}-{i}"),
                        &PatchParams::default(),
                        &Patch::Merge(ready),
                    )
                    .await;
                said.lock().unwrap().push(format!("+{i}"));
                have.insert(i, 0);
            }
            if have.len() > want {
                // slurm-operator's victim order among running, ready pods.
                let (&i, _) = have
                    .iter()
                    .min_by_key(|(i, cost)| (**cost, std::cmp::Reverse(**i)))
                    .unwrap();
                let c = cluster.clone();
                let gone = tokio::task::spawn_blocking(move || {
                    let node = name(i);
                    let _ = c
                        .cmd("scontrol")
                        .args([
                            "update",
                            &format!("nodename={node}"),
                            "state=drain",
                            "reason=slurm-operator: scale-in",
                        ])
                        .output();
                    // pod-down refuses while the node runs jobs: drained, it runs none soon.
                    std::process::Command::new("bash")
                        .arg(super::repo_root().join("tests/harness/slurm.sh"))
                        .args([&c.flavor, "pod-down", &node, "down"])
                        .output()
                        .is_ok_and(|o| o.status.success())
                })
                .await
                .unwrap();
                if gone {
                    let _ = pods
                        .delete(&format!("{nodeset}-{i}"), &DeleteParams::default())
                        .await;
                    said.lock().unwrap().push(format!("-{i}"));
                    have.remove(&i);
                }
            }
            let status = json!({"status": {"replicas": have.len(), "readyReplicas": have.len(), "selector": SELECTOR, "nodeSetHash": "test"}});
            let _ = nodesets
                .patch_status(nodeset, &PatchParams::default(), &Patch::Merge(status))
                .await;
        }
    });
    (task, log)
}

/// How the test's NodeSet is made.
#[derive(Clone, Copy)]
pub enum Made {
    /// By hand, `planned`, its slurmd run with these args.
    ByHand(&'static [&'static str]),
    /// As Slinky's own chart renders it: `slurm-worker-planned`, pod host name `planned-`,
    /// slurmd run with `-b` (tests/support/slinky-chart-values.yaml).
    ByChart,
}

impl Made {
    pub fn nodeset(self) -> &'static str {
        match self {
            Made::ByHand(_) => NODESET,
            Made::ByChart => CHART_NODESET,
        }
    }
}

/// The NodeSet at 0, made as `made` says, and a slurm-planned autoscaler `planned` on it
/// (naming no partition: it is the NodeSet's name in Slurm), and the autoscaler process (its
/// Lease in a namespace of its own).
pub async fn setup(
    client: &kube::Client,
    ns: &str,
    cluster: &SlurmCluster,
    made: Made,
) -> (Api<v1beta1::NodeSet>, Api<NodeSetAutoscaler>, Process) {
    let nodesets: Api<v1beta1::NodeSet> = Api::namespaced(client.clone(), ns);
    match made {
        Made::ByHand(args) => {
            let nodeset: v1beta1::NodeSet = serde_json::from_value(json!({
                "apiVersion": "slinky.slurm.net/v1beta1", "kind": "NodeSet",
                "metadata": {"name": NODESET},
                "spec": {"replicas": 0, "extraConf": "CPUs=4 RealMemory=8000", "slurmd": {"args": args}},
            }))
            .unwrap();
            nodesets
                .create(&PostParams::default(), &nodeset)
                .await
                .unwrap();
        }
        Made::ByChart => {
            super::elastic::chart_nodesets(client, ns, None, &["planned"]).await;
        }
    }
    let status = json!({"status": {"replicas": 0, "selector": SELECTOR, "nodeSetHash": "test"}});
    nodesets
        .patch_status(
            made.nodeset(),
            &PatchParams::default(),
            &Patch::Merge(status),
        )
        .await
        .unwrap();
    let autoscalers: Api<NodeSetAutoscaler> = Api::namespaced(client.clone(), ns);
    let nsa: NodeSetAutoscaler = serde_json::from_value(json!({
        "apiVersion": "slurmscale.io/v1alpha1", "kind": "NodeSetAutoscaler",
        "metadata": {"name": NODESET},
        "spec": {
            "scaleTargetRef": {"name": made.nodeset()},
            "slurm": {"cluster": cluster.name},
            "maxReplicas": MAX,
            "mode": "SlurmPlanned",
        }
    }))
    .unwrap();
    autoscalers
        .create(&PostParams::default(), &nsa)
        .await
        .unwrap();
    let a = super::elastic::scontrol_autoscaler(client, cluster, "planned-lease").await;
    // slurmctld's ResumeProgram (the one the README documents) wakes this autoscaler.
    std::fs::write(&cluster.wake_file, format!("127.0.0.1:{}", a.port)).unwrap();
    (nodesets, autoscalers, a)
}

/// A slurm-planned NodeSet at zero on one Slurm's `planned` partition, in a namespace of its
/// own, with its autoscaler and the stand-in operator, once its four records are made, CLOUD,
/// powered down and schedulable; the partition's turn held until [`Planned::finish`].
pub struct Planned {
    pub _turn: tokio::sync::MutexGuard<'static, ()>,
    pub cluster: SlurmCluster,
    pub client: kube::Client,
    pub ns: String,
    pub nodesets: Api<v1beta1::NodeSet>,
    pub autoscalers: Api<NodeSetAutoscaler>,
    pub a: Process,
    pub operator: tokio::task::JoinHandle<()>,
    /// The ordinals the operator ran and removed, in order (`+i`, `-i`).
    pub ran: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// Set: the operator starts no pod.
    pub hold: Arc<AtomicBool>,
    pub nodeset: &'static str,
}

impl Planned {
    pub async fn start(flavor: &str) -> Self {
        Self::start_made(flavor, Made::ByHand(&["-b"])).await
    }

    pub async fn start_made(flavor: &str, made: Made) -> Self {
        let _turn = super::turn(flavor).await;
        let cluster = SlurmCluster::get(flavor);
        reset(&cluster).await;
        let client = kube_client().await;
        let ns = namespace(&client, "planned").await;
        let (nodesets, autoscalers, a) = setup(&client, &ns, &cluster, made).await;
        let hold = Arc::new(AtomicBool::new(false));
        let (operator, ran) = operate(
            client.clone(),
            ns.clone(),
            cluster.clone(),
            hold.clone(),
            made.nodeset(),
        );
        let state = |i: usize| super::elastic::node_state(&cluster, &name(i));
        super::elastic::eventually(
            "four powered-down CLOUD records in the partition",
            Duration::from_secs(60),
            &a,
            async || {
                let s = autoscalers.get(NODESET).await.ok().and_then(|n| n.status);
                s.and_then(|s| s.node_records)
                    .is_some_and(|r| (r.wanted, r.existing) == (4, 4))
                    && (0..MAX).all(|i| {
                        let (st, _) = state(i);
                        st.contains("CLOUD") && st.split('+').any(|w| w == "POWERED_DOWN")
                    })
            },
        )
        .await;
        super::elastic::reloaded_after_new_records(&client, &ns, &cluster).await;
        Self {
            _turn,
            cluster,
            client,
            ns,
            nodesets,
            autoscalers,
            a,
            operator,
            ran,
            hold,
            nodeset: made.nodeset(),
        }
    }

    /// The operator starts no pod while `on` (as if their image were still being pulled).
    pub fn hold(&self, on: bool) {
        self.hold.store(on, Ordering::SeqCst);
    }

    pub async fn replicas(&self) -> i32 {
        super::elastic::spec_replicas(&self.nodesets, self.nodeset).await
    }

    /// The pods the operator ran and removed so far.
    pub fn pods(&self) -> Vec<String> {
        self.ran.lock().unwrap().clone()
    }

    /// Everything stopped and the partition as a fresh install has it.
    pub async fn finish(self) {
        let _ = self.autoscalers.delete(NODESET, &Default::default()).await;
        self.operator.abort();
        drop(self.a);
        reset(&self.cluster).await;
    }
}
