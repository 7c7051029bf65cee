//! What kwok never does, done for real on the harness's real node (`kube.sh node-start`: a
//! kubelet, containerd and runc, pods on a bridge of their own, Services through kube-proxy,
//! cluster DNS), beside the real slurm-operator managing the harness's Slurm 26.05:
//!
//! * the README's install: `helm install` with exactly examples/helm/slinky-quickstart.yaml
//!   plus the overrides a test cluster needs (listed in [`overrides`], no more) — the image run
//!   from containerd's store, the operator's Token mounted and re-read when it rotates, probes
//!   answered, `/metrics` through the Service's ClusterIP, the Lease held, a NodeSet scaled
//!   from inside the pod, `helm uninstall`;
//! * Slinky's own slurmd pod, exactly as the operator makes it (the test gives only the image
//!   and where to run): configless `slurmd -Z` with auth/slurm's key from the Controller's
//!   Secret, its probes and its preStop, scaled from zero and back by our autoscaler.
//!
//! Runs with the operator's tests, on the first harness copy, the only one with a node.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    ConfigMap, Event, Namespace, Pod, Secret, Service, ServiceAccount,
};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};
use slurmscale_autoscaler::crd::NodeSetAutoscaler;
use slurmscale_exporter::k8s::nodeset::v1beta1;
use support::{SlurmCluster, kube_client, kube_env, repo_root, run_tool, unique, wait_until};

/// The Slurm the operator manages.
const FLAVOR: &str = "26.05";

/// What the install needs besides the quick start's values, here: the image as the harness
/// imported it (never pulled), slurmrestd's address (the harness's, through a Service), the
/// pods on the real node, and a Token short-lived enough to see it rotate within the test
/// (the operator renews at 80% of its lifetime). Nothing else.
fn overrides(image: &str, restd: &str) -> Vec<String> {
    let (repo, tag) = image.rsplit_once(':').unwrap();
    let mut v = vec![
        format!("image.repository={repo}"),
        format!("image.tag={tag}"),
        "image.pullPolicy=Never".into(),
        format!("slurm.url={restd}"),
        // Scraped every 2 s, so the test need not wait 30.
        "serviceMonitor.interval=2s".into(),
        format!(
            "slurm.auth.slinkyToken.lifetime={}s",
            TOKEN_LIFETIME.as_secs()
        ),
    ];
    for c in ["exporter", "autoscaler"] {
        v.push(format!("{c}.nodeSelector.type=real"));
        v.push(format!(
            "{c}.tolerations[0].key={}",
            node("HARNESS_NODE_TAINT")
        ));
        v.push(format!("{c}.tolerations[0].operator=Exists"));
        v.push(format!("{c}.tolerations[0].effect=NoSchedule"));
    }
    v
}

/// The Token lifetime of the install test: two minutes (the operator stops renewing tokens
/// much shorter than that), renewed after 96 s.
const TOKEN_LIFETIME: Duration = Duration::from_secs(120);

/// What `kube.sh node-start` says of the real node; fails with what to run when it is not up.
fn node(key: &str) -> String {
    support::node_env(key).unwrap_or_else(|| {
        panic!("no {key}: the real node is not running (tests/harness/kube.sh node-start; tests/run.sh starts it for this test)")
    })
}

fn helm(args: &[&str]) -> (bool, String) {
    let out = support::helm_output(args, true);
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// What the kubelet said of the namespace's pods (FailedMount and the like), for a failure.
async fn events(client: &kube::Client, ns: &str) -> String {
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    let list = api.list(&ListParams::default()).await.map(|l| l.items);
    list.unwrap_or_default()
        .iter()
        .map(|e| {
            format!(
                "{} {}: {}",
                e.involved_object.name.clone().unwrap_or_default(),
                e.reason.clone().unwrap_or_default(),
                e.message.clone().unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn ready(p: &Pod) -> bool {
    let conditions = p.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// GET a path of the exporter through its Service's ClusterIP (kube-proxy's rules).
async fn through_service(
    client: &kube::Client,
    ns: &str,
    name: &str,
    path: &str,
) -> Option<String> {
    let svc: Service = Api::namespaced(client.clone(), ns).get(name).await.ok()?;
    let ip = svc.spec?.cluster_ip?;
    let url = format!("http://{ip}:9341{path}");
    let answer = reqwest::Client::new()
        .get(url)
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .ok()?;
    answer.text().await.ok()
}

/// kube-prometheus-stack's release name in the quick start.
const RELEASE: &str = "prometheus";

/// Prometheus 3 from the harness (killed, by its pid, when dropped); its files in a temp dir.
struct Prometheus3 {
    child: Child,
    url: String,
    dir: tempfile::TempDir,
}

impl Drop for Prometheus3 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus3 {
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }

    async fn api(&self, path: &str, query: &[(&str, &str)]) -> Option<Value> {
        let url = reqwest::Url::parse_with_params(&format!("{}{path}", self.url), query).ok()?;
        reqwest::get(url).await.ok()?.json().await.ok()
    }

    async fn query(&self, expr: &str) -> Vec<Value> {
        self.api("/api/v1/query", &[("query", expr)])
            .await
            .and_then(|v| v["data"]["result"].as_array().cloned())
            .unwrap_or_default()
    }
}

/// The Prometheus Operator (the harness's build), watching `namespaces` only, so the other
/// tests' objects are none of its business. Killed, by its pid, when dropped.
struct Operator(Child, std::path::PathBuf);

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Operator {
    fn start(namespaces: &[&str]) -> Self {
        let dir = kube_env("HARNESS_PROMETHEUS_OPERATOR")
            .expect("kube.sh env names HARNESS_PROMETHEUS_OPERATOR: restart the harness (tests/harness/up.sh)");
        let pki = kube_env("HARNESS_KUBE_PKI").expect("kube.sh env names HARNESS_KUBE_PKI");
        let api = kube_env("KUBE_API_URL").expect("kube.sh env names KUBE_API_URL");
        let log =
            std::env::temp_dir().join(format!("{}.log", support::unique("prometheus-operator")));
        let child = Command::new(Path::new(&dir).join("operator"))
            .arg(format!("--apiserver={api}"))
            .arg(format!("--ca-file={pki}/ca.crt"))
            .arg(format!("--cert-file={pki}/admin.crt"))
            .arg(format!("--key-file={pki}/admin.key"))
            .arg(format!("--namespaces={}", namespaces.join(",")))
            .arg(format!(
                "--web.listen-address=127.0.0.1:{}",
                support::free_port()
            ))
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::options().append(true).open(&log).unwrap())
            .spawn()
            .expect("start the Prometheus Operator");
        Self(child, log)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.1).unwrap_or_default()
    }
}

/// The CRDs the operator serves (its own build's, server-side: the Prometheus CRD is larger
/// than a client-side apply can record) and slurm-operator's Token, which the quick start
/// asks for.
async fn install_crds() {
    let dir = kube_env("HARNESS_PROMETHEUS_OPERATOR").expect(
        "kube.sh env names HARNESS_PROMETHEUS_OPERATOR: restart the harness (tests/harness/up.sh)",
    );
    let crds = format!("{dir}/crds");
    let token = support::official_crd_path("slinky.slurm.net_tokens.yaml");
    for file in [crds.as_str(), token.to_str().unwrap()] {
        let (ok, said) = run_tool(
            "kubectl",
            &["apply", "--server-side", "--force-conflicts", "-f", file],
        );
        assert!(ok, "installing the CRDs of {file}: {said}");
    }
    for resource in [
        "prometheuses.monitoring.coreos.com",
        "tokens.slinky.slurm.net",
    ] {
        let (ok, said) = run_tool(
            "kubectl",
            &[
                "wait",
                "--for=condition=Established",
                "--timeout=60s",
                &format!("crd/{resource}"),
            ],
        );
        assert!(ok, "{resource}: {said}");
    }
}

/// The Prometheus version the harness runs, as the Prometheus object names it (`v3.5.3`).
fn prometheus_version(dir: &Path) -> String {
    let out = Command::new("bash")
        .arg(repo_root().join("tests/harness/prometheus3.sh"))
        .arg(dir)
        .arg("--version")
        .output()
        .expect("tests/harness/prometheus3.sh");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    // "prometheus, version 3.5.3+ds1 (branch: ..."
    let v = text
        .split_whitespace()
        .skip_while(|w| *w != "version")
        .nth(1)
        .unwrap_or_else(|| panic!("no version in {text:?}"));
    format!("v{}", v.split('+').next().unwrap())
}

/// The Prometheus object kube-prometheus-stack makes with its default values (the parts that
/// decide what it picks up), evaluating rules every 5 s so the test need not wait long.
fn prometheus_object(ns: &str, version: &str) -> DynamicObject {
    let selector = json!({"matchLabels": {"release": RELEASE}});
    serde_json::from_value(json!({
        "apiVersion": "monitoring.coreos.com/v1", "kind": "Prometheus",
        "metadata": {"name": "prometheus-kube-prometheus-prometheus", "namespace": ns},
        "spec": {
            "version": version,
            "replicas": 1,
            "serviceAccountName": "prometheus-kube-prometheus-prometheus",
            "serviceMonitorSelector": selector,
            "serviceMonitorNamespaceSelector": {},
            "podMonitorSelector": selector,
            "podMonitorNamespaceSelector": {},
            "ruleSelector": selector,
            "ruleNamespaceSelector": {},
            "probeSelector": selector,
            "scrapeConfigSelector": selector,
            "evaluationInterval": "5s",
            "scrapeInterval": "30s",
            "enableAdminAPI": false,
        },
    }))
    .unwrap()
}

/// What the operator's pod would mount, written where prometheus3.sh binds it: the
/// configuration (the config reloader's output: its `$(POD_NAME)` filled in), the web config
/// and the rule files; and the service account. Returns the Prometheus container's arguments.
async fn materialize(
    client: &kube::Client,
    ns: &str,
    name: &str,
    dir: &Path,
) -> Option<Vec<String>> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), ns);
    let pod = format!("prometheus-{name}-0");

    let config = secrets.get(&format!("prometheus-{name}")).await.ok()?;
    let gz = config.data?.get("prometheus.yaml.gz")?.0.clone();
    let mut gunzip = Command::new("gzip")
        .arg("-dc")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("gzip");
    std::io::Write::write_all(gunzip.stdin.as_mut().unwrap(), &gz).unwrap();
    let out = gunzip.wait_with_output().unwrap();
    let text = String::from_utf8(out.stdout)
        .ok()?
        // What the config reloader expands from the pod's environment.
        .replace("$(POD_NAME)", &pod)
        .replace("$(SHARD)", "0");
    let etc = dir.join("etc");
    std::fs::create_dir_all(etc.join("config_out")).unwrap();
    std::fs::write(etc.join("config_out/prometheus.env.yaml"), text).unwrap();

    let web = secrets
        .get(&format!("prometheus-{name}-web-config"))
        .await
        .ok()?;
    std::fs::create_dir_all(etc.join("web_config")).unwrap();
    std::fs::write(
        etc.join("web_config/web-config.yaml"),
        &web.data?.get("web-config.yaml")?.0,
    )
    .unwrap();

    let set = sets.get(&format!("prometheus-{name}")).await.ok()?;
    let spec = set.spec?.template.spec?;
    let container = spec.containers.iter().find(|c| c.name == "prometheus")?;
    // The rule files, from the ConfigMaps the pod mounts under /etc/prometheus/rules/.
    for mount in container.volume_mounts.iter().flatten() {
        let Some(sub) = mount.mount_path.strip_prefix("/etc/prometheus/rules/") else {
            continue;
        };
        let volume = spec
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == mount.name)?;
        let source = volume.config_map.as_ref()?;
        // The operator mounts more rule ConfigMaps than it fills, as optional volumes.
        let Some(cm) = configmaps.get_opt(&source.name).await.ok()? else {
            if source.optional == Some(true) {
                continue;
            }
            return None;
        };
        let to = etc.join("rules").join(sub);
        std::fs::create_dir_all(&to).unwrap();
        for (file, body) in cm.data.unwrap_or_default() {
            std::fs::write(to.join(file), body).unwrap();
        }
    }
    Some(container.args.clone().unwrap_or_default())
}

/// A token for the Prometheus service account (bound to it by kube-prometheus-stack's
/// ClusterRole: read nodes, services, endpoints, endpoint slices and pods) and the CA.
async fn service_account(client: &kube::Client, ns: &str, sa: &str, dir: &Path) {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let account: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": sa}})).unwrap();
    accounts
        .create(&PostParams::default(), &account)
        .await
        .unwrap();
    let role = format!("{ns}-prometheus");
    for manifest in [
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": role},
        "rules": [
            {"apiGroups": [""], "resources": ["nodes", "nodes/metrics", "services", "endpoints", "pods"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
            {"nonResourceURLs": ["/metrics", "/metrics/cadvisor"], "verbs": ["get"]},
        ]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": role},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
               "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]}),
    ] {
        let file = dir.join("rbac.json");
        std::fs::write(&file, manifest.to_string()).unwrap();
        let (ok, said) = run_tool("kubectl", &["apply", "-f", file.to_str().unwrap()]);
        assert!(ok, "{said}");
    }
    let out = support::tool_output(
        "kubectl",
        &["create", "token", sa, "-n", ns, "--duration=1h"],
    );
    assert!(out.status.success(), "kubectl create token failed");
    let sa_dir = dir.join("sa");
    std::fs::write(sa_dir.join("token"), &out.stdout).unwrap();
    let pki = kube_env("HARNESS_KUBE_PKI").unwrap();
    std::fs::copy(format!("{pki}/ca.crt"), sa_dir.join("ca.crt")).unwrap();
    std::fs::write(sa_dir.join("namespace"), ns).unwrap();
}

/// The alert names of the chart's rules file.
fn chart_alerts() -> BTreeSet<String> {
    let text = std::fs::read_to_string(repo_root().join(support::prometheus::ALERTS)).unwrap();
    let rules: Value = serde_saphyr::from_str(&text).unwrap();
    rules["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().iter())
        .filter_map(|r| r["alert"].as_str().map(str::to_string))
        .collect()
}

/// The chart's ServiceMonitors and PrometheusRule under the real Prometheus Operator (the
/// harness's build) and the real Prometheus 3.5, as kube-prometheus-stack runs them with its
/// defaults as release `prometheus`: the operator turns them into a configuration and rule
/// files, Prometheus runs those unmodified (tests/harness/prometheus3.sh: as the operator's
/// pod would, its Kubernetes discovery in-cluster), finds both Services' endpoints — the
/// pods' own addresses on the real node — scrapes them under the chart's job names and loads
/// every alert.
async fn scraped_under_the_prometheus_operator(client: &kube::Client, ns: &str, release: &str) {
    install_crds().await;
    let monitoring = support::namespace(client, "monitoring").await;
    // kube-prometheus-stack's Prometheus, and the operator.
    let dir = tempfile::tempdir().unwrap();
    for d in ["etc", "sa", "data"] {
        std::fs::create_dir_all(dir.path().join(d)).unwrap();
    }
    let version = prometheus_version(dir.path());
    let object = prometheus_object(&monitoring, &version);
    let name = object.metadata.name.clone().unwrap();
    let resource = ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(
        "monitoring.coreos.com",
        "v1",
        "Prometheus",
    ));
    let prometheuses: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &monitoring, &resource);
    prometheuses
        .create(&PostParams::default(), &object)
        .await
        .expect("create the Prometheus object");
    let operator = Operator::start(&[&monitoring, ns]);
    service_account(
        client,
        &monitoring,
        "prometheus-kube-prometheus-prometheus",
        dir.path(),
    )
    .await;

    // What the operator generated: a configuration with a scrape job per ServiceMonitor of
    // the chart, and the chart's rules as a rule file.
    let config_file = dir.path().join("etc/config_out/prometheus.env.yaml");
    let mut args = None;
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while std::time::Instant::now() < deadline {
        let made = materialize(client, &monitoring, &name, dir.path()).await;
        let config = std::fs::read_to_string(&config_file).unwrap_or_default();
        let rules = std::fs::read_dir(dir.path().join("etc/rules")).map_or(0, |d| d.count());
        if made.is_some()
            && config.contains(&format!("serviceMonitor/{ns}/{release}-exporter/0"))
            && config.contains(&format!("serviceMonitor/{ns}/{release}-autoscaler/0"))
            && rules > 0
        {
            args = made;
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let Some(args) = args else {
        panic!(
            "the operator generated no configuration with the chart's ServiceMonitors and rules\nconfig:\n{}\noperator log:\n{}",
            std::fs::read_to_string(&config_file).unwrap_or_default(),
            operator.log()
        );
    };

    // Prometheus, with the container's own arguments (but for where it listens).
    let port = support::free_port();
    let mut cmd = Command::new("bash");
    cmd.arg(repo_root().join("tests/harness/prometheus3.sh"))
        .arg(dir.path());
    for a in args {
        if !a.starts_with("--web.listen-address") {
            cmd.arg(a);
        }
    }
    let api = reqwest::Url::parse(&kube_env("KUBE_API_URL").unwrap()).unwrap();
    let child = cmd
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .env("KUBERNETES_SERVICE_HOST", api.host_str().unwrap())
        .env("KUBERNETES_SERVICE_PORT", api.port().unwrap().to_string())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("log")).unwrap())
        .spawn()
        .expect("tests/harness/prometheus3.sh");
    let prometheus = Prometheus3 {
        child,
        url: format!("http://127.0.0.1:{port}"),
        dir,
    };

    // Both Services' targets are up, found through Kubernetes and labelled as the alerts and
    // dashboards expect.
    for job in ["slurmscale-exporter", "slurmscale-autoscaler"] {
        let expr = format!("up{{job=\"{job}\",namespace=\"{ns}\",service=~\"{release}-.*\"}} == 1");
        let up = wait_until(Duration::from_secs(90), || async {
            !prometheus.query(&expr).await.is_empty()
        })
        .await;
        assert!(
            up,
            "Prometheus does not scrape {job}: {expr}\ntargets: {}\nlog:\n{}",
            prometheus
                .api("/api/v1/targets", &[])
                .await
                .unwrap_or_default(),
            prometheus.log()
        );
    }
    // The Slurm data itself, from the exporter's pod (the quick start names the cluster
    // `slurm`).
    let expr = format!(
        "slurm_partition_nodes{{job=\"slurmscale-exporter\",namespace=\"{ns}\",cluster=\"slurm\"}}"
    );
    let series = wait_until(Duration::from_secs(30), || async {
        !prometheus.query(&expr).await.is_empty()
    })
    .await;
    assert!(series, "no {expr} in Prometheus");

    // Every alert of the chart loaded, and evaluated without error.
    let want = chart_alerts();
    let mut seen = BTreeMap::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut evaluated = false;
    while !evaluated && std::time::Instant::now() < deadline {
        seen.clear();
        if let Some(v) = prometheus.api("/api/v1/rules", &[("type", "alert")]).await {
            for g in v["data"]["groups"].as_array().into_iter().flatten() {
                for r in g["rules"].as_array().into_iter().flatten() {
                    seen.insert(
                        r["name"].as_str().unwrap_or_default().to_string(),
                        r["health"].as_str().unwrap_or_default().to_string(),
                    );
                }
            }
        }
        evaluated = want.iter().all(|a| seen.get(a).is_some_and(|h| h == "ok"));
        if !evaluated {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    assert!(
        evaluated,
        "alerts not loaded or not healthy: want {want:?}, have {seen:?}\nlog:\n{}",
        prometheus.log()
    );
}

/// `helm <args>` on a thread of its own, so the test's tasks run meanwhile.
async fn helm_in_background(args: Vec<String>) -> (bool, String) {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        helm(&args)
    })
    .await
    .unwrap()
}

/// A namespace the real node's token policy covers, holding Slinky's key Secret as its chart
/// (1.1) makes it for release `slurm`: slurmctld's key (the harness's is text).
async fn slurm_namespace(client: &kube::Client, cluster: &SlurmCluster, prefix: &str) -> String {
    let ns = unique(prefix);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let labelled: Namespace = serde_json::from_value(json!({"metadata": {"name": ns,
        "labels": {node("HARNESS_NODE_NAMESPACE_LABEL").split_once('=').unwrap().0:
                   "true"}}}))
    .unwrap();
    namespaces
        .create(&PostParams::default(), &labelled)
        .await
        .unwrap();
    let key = std::fs::read_to_string(&cluster.key_file).unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "slurm-auth-jwt"},
        "stringData": {"jwt.key": key},
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    ns
}

/// README.md's upgrade, from the chart of an earlier release (tests/upgrade/, a561874's) to
/// today's, while a NodeSet scales up, on a release of its own (Slurm cluster `upgrade`, so
/// the quick start's release leaves its NodeSetAutoscaler alone) signing its tokens with
/// Slinky's key, as a561874's chart could: the CRD step and `helm upgrade` as the README writes
/// them, and, once the upgrade is under way, a job that needs a NodeSet grown to 3, one
/// replica a step, while the rollout replaces the replicas. The NodeSet reaches 3 and never
/// shrinks on the way, through the leader's change.
async fn upgrades_while_scaling_up(client: &kube::Client, cluster: &SlurmCluster, sets: &[String]) {
    let ns = slurm_namespace(client, cluster, "upgrade").await;
    let release = unique("slurmscale");
    let helm_at = |verb: &str, chart: &str| {
        let mut args: Vec<String> = [verb, &release, chart, "--namespace", &ns, "--wait"]
            .into_iter()
            .map(String::from)
            .collect();
        args.extend(["--timeout", "180s"].map(String::from));
        let ours = [
            "slurm.cluster=upgrade",
            "slurm.auth.mode=jwtKey",
            "slurm.auth.existingSecret=slurm-auth-jwt",
            "slurm.auth.secretKey=jwt.key",
        ];
        for o in sets.iter().map(String::as_str).chain(ours) {
            args.extend(["--set".to_string(), o.to_string()]);
        }
        args
    };
    // The harness made the NodeSetAutoscaler CRD (today's) before: a site upgrading has the
    // one of its first install, which tests/crd_conformance.rs upgrades. Helm 4 would apply
    // the old one over it and stop on the conflict.
    let mut install = helm_at("install", "tests/upgrade/chart-a561874");
    install.push("--skip-crds".into());
    let (ok, said) = helm_in_background(install).await;
    assert!(
        ok,
        "helm install of a561874's chart:\n{said}\n{}",
        events(client, &ns).await
    );
    let nodesets: Api<v1beta1::NodeSet> = Api::namespaced(client.clone(), &ns);
    let spec = v1beta1::NodeSetSpec {
        replicas: Some(0),
        ..Default::default()
    };
    nodesets
        .create(
            &PostParams::default(),
            &v1beta1::NodeSet::new("upgrade", spec),
        )
        .await
        .unwrap();
    let nsa: NodeSetAutoscaler = serde_json::from_value(json!({
        "apiVersion": "slurmscale.io/v1alpha1", "kind": "NodeSetAutoscaler",
        "metadata": {"name": "upgrade"},
        "spec": {"scaleTargetRef": {"name": "upgrade"},
                 "slurm": {"cluster": "upgrade", "partitions": ["elastic"]},
                 "maxReplicas": 3, "scaleUp": {"maxStep": 1}}
    }))
    .unwrap();
    let autoscalers: Api<NodeSetAutoscaler> = Api::namespaced(client.clone(), &ns);
    autoscalers
        .create(&PostParams::default(), &nsa)
        .await
        .unwrap();
    // Every replica count the NodeSet has from now on, sampled.
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(Duration, i32)>::new()));
    let sampler = {
        let (nodesets, seen, start) = (nodesets.clone(), seen.clone(), Instant::now());
        tokio::spawn(async move {
            loop {
                let replicas = nodesets
                    .get("upgrade")
                    .await
                    .ok()
                    .and_then(|n| n.spec.replicas);
                if let Some(r) = replicas {
                    seen.lock().unwrap().push((start.elapsed(), r));
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        })
    };
    let (step, args) = support::readme_crd_step("charts/slurmscale/crds/");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, said) = run_tool("kubectl", &args);
    assert!(ok, "`{step}`:\n{said}");
    // A 3-node job of partition `elastic` (its nodes FUTURE records: it waits) is submitted
    // once `helm upgrade` is under way: whichever replica leads then (the old chart's, or a
    // new one taking over) starts the scale-up, a node a step.
    let upgrade = tokio::spawn(helm_in_background(helm_at("upgrade", "charts/slurmscale")));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let job = cluster.submit(&["-p", "elastic", "-N", "3", "--wrap", "sleep 600"]);
    let (ok, said) = upgrade.await.unwrap();
    assert!(
        ok,
        "helm upgrade to today's chart:\n{said}\n{}",
        events(client, &ns).await
    );
    let upgraded = seen.lock().unwrap().last().map(|(t, _)| *t);
    let reached = wait_until(Duration::from_secs(90), || async {
        seen.lock().unwrap().last().is_some_and(|(_, r)| *r == 3)
    })
    .await;
    sampler.abort();
    let _ = cluster.cmd("scancel").arg(&job).status();
    let seen = seen.lock().unwrap().clone();
    let (ok, said) = helm(&["uninstall", &release, "--namespace", &ns, "--wait"]);
    assert!(ok, "helm uninstall: {said}");
    let _ = Api::<Namespace>::all(client.clone())
        .delete(&ns, &Default::default())
        .await;
    assert!(
        reached,
        "the NodeSet never reached 3 after the upgrade: {seen:?}"
    );
    assert!(
        seen.windows(2).all(|w| w[1].1 >= w[0].1),
        "the NodeSet shrank during the upgrade: {seen:?}"
    );
    let at = seen.iter().find(|(_, r)| *r == 3).map(|(t, _)| *t);
    eprintln!(
        "upgrade from a561874's chart: helm upgrade done at {upgraded:?}, NodeSet at 3 at {at:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quick_start_installs_and_runs_on_a_real_node() {
    let client = kube_client().await;
    let cluster = SlurmCluster::get(FLAVOR);
    // The Slurm namespace of a site, here a fresh one the node's token policy covers, with
    // Slinky's key Secret.
    let ns = slurm_namespace(&client, &cluster, "slurm").await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    // slurmrestd as a site's: a Service in front of it (the harness's, on the host).
    let restd = restd_service(&client, &ns, &cluster).await;

    // A release name of its own: the chart's ClusterRoles are named after it, and another test
    // of this copy may hold `slurmscale`'s.
    let release = unique("slurmscale");
    let image = support::image_name();
    let mut args = vec![
        "install".to_string(),
        release.clone(),
        "charts/slurmscale".into(),
        "--namespace".into(),
        ns.clone(),
        "-f".into(),
        "examples/helm/slinky-quickstart.yaml".into(),
    ];
    for o in overrides(&image, &restd) {
        args.extend(["--set".into(), o]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, said) = helm(&args);
    assert!(ok, "helm install with the quick start values:\n{said}");

    // Both pods Running and Ready, as the non-root, read-only containers the chart declares.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let up = wait_until(Duration::from_secs(180), || async {
        let list = pods.list(&ListParams::default()).await.map(|l| l.items);
        let list = list.unwrap_or_default();
        list.len() >= 2 && list.iter().all(ready)
    })
    .await;
    assert!(
        up,
        "the quick start's pods never all ran Ready on the real node:\n{}",
        events(&client, &ns).await
    );
    for p in pods.list(&ListParams::default()).await.unwrap().items {
        let spec = p.spec.unwrap();
        assert_eq!(
            spec.node_name.as_deref(),
            Some(node("HARNESS_NODE_NAME").as_str())
        );
        let sc = spec.containers[0]
            .security_context
            .clone()
            .unwrap_or_default();
        assert_eq!(sc.read_only_root_filesystem, Some(true));
        // Non-root, as the kubelet enforced it: the token file was read under the pod's
        // fsGroup by user 65532.
        let pod_sc = spec.security_context.clone().unwrap_or_default();
        assert_eq!(pod_sc.run_as_non_root, Some(true));
        assert_eq!(pod_sc.run_as_user.or(sc.run_as_user), Some(65532));
        assert_eq!(pod_sc.fs_group, Some(65532));
    }

    // The exporter reads Slurm with the operator's token, through its Service.
    let exporter = format!("{release}-exporter");
    let exporter = exporter.as_str();
    let reads = wait_until(Duration::from_secs(60), || async {
        through_service(&client, &ns, exporter, "/metrics")
            .await
            .is_some_and(|m| {
                m.lines()
                    .any(|l| l.starts_with("slurm_exporter_up{") && l.ends_with(" 1"))
            })
    })
    .await;
    assert!(
        reads,
        "the exporter never read Slurm through its Service:\n{}",
        events(&client, &ns).await
    );
    // Prometheus finds and scrapes both pods through the chart's ServiceMonitors, and loads its
    // alerts (while the first token lives).
    scraped_under_the_prometheus_operator(&client, &ns, &release).await;

    // ... and still does once the token it started with has expired: the operator wrote a new
    // one into the Secret, the kubelet into the pod's file, and the exporter read it again.
    let token = format!("{release}-jwt-{}", cluster.user);
    let first = secrets.get(&token).await.unwrap().metadata.resource_version;
    // While the operator's token ages: the README's upgrade, from an earlier release's chart.
    upgrades_while_scaling_up(&client, &cluster, &overrides(&image, &restd)).await;
    let rotated = wait_until(TOKEN_LIFETIME, || async {
        secrets
            .get(&token)
            .await
            .ok()
            .map(|s| s.metadata.resource_version)
            != Some(first.clone())
    })
    .await;
    assert!(rotated, "the operator never rotated the token");
    // Renewed at 80% of the lifetime: the first token is dead 20% of it later.
    tokio::time::sleep(TOKEN_LIFETIME / 5 + Duration::from_secs(5)).await;
    let since = Instant::now();
    let reads = wait_until(Duration::from_secs(60), || async {
        let m = through_service(&client, &ns, exporter, "/metrics")
            .await
            .unwrap_or_default();
        let m = support::Metrics::parse(&m);
        // Every endpoint answered well since the first token expired.
        let ages = m.all("slurm_exporter_endpoint_data_age_seconds", &[]);
        m.get("slurm_exporter_up", &[]) == Some(1.0)
            && !ages.is_empty()
            && ages.iter().all(|age| *age < since.elapsed().as_secs_f64())
    })
    .await;
    assert!(
        reads,
        "the exporter did not read Slurm with the rotated token:\n{}",
        through_service(&client, &ns, exporter, "/metrics")
            .await
            .unwrap_or_default()
    );

    // The autoscaler holds its Lease and scales a NodeSet, from its pod.
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
    let held = wait_until(Duration::from_secs(60), || async {
        leases
            .get("slurmscale-autoscaler")
            .await
            .ok()
            .and_then(|l| l.spec?.holder_identity)
            .is_some()
    })
    .await;
    assert!(held, "the autoscaler never held its Lease");
    // `helm test`: the chart's check pod, on the real node, finds both Services answering
    // with Slurm and Kubernetes read, and the Lease held (any of them not, and it exits
    // non-zero). It is deleted once it succeeds, so the release leaves nothing behind.
    let (ok, said) = helm(&["test", &release, "--namespace", &ns]);
    let check = format!("{release}-check");
    let passed = said
        .lines()
        .any(|l| l.starts_with("Phase:") && l.trim_end().ends_with("Succeeded"));
    if !(ok && passed) {
        let (_, logs) = support::run_tool("kubectl", &["logs", "-n", &ns, &check]);
        panic!("helm test:\n{said}\n{logs}\n{}", events(&client, &ns).await);
    }
    assert!(
        pods.get_opt(&check).await.unwrap().is_none(),
        "the check pod stayed after it succeeded"
    );
    let nodesets: Api<v1beta1::NodeSet> = Api::namespaced(client.clone(), &ns);
    let spec = v1beta1::NodeSetSpec {
        replicas: Some(3),
        ..Default::default()
    };
    nodesets
        .create(&PostParams::default(), &v1beta1::NodeSet::new("idle", spec))
        .await
        .unwrap();
    let autoscalers: Api<NodeSetAutoscaler> = Api::namespaced(client.clone(), &ns);
    let nsa: NodeSetAutoscaler = serde_json::from_value(json!({
        "apiVersion": "slurmscale.io/v1alpha1", "kind": "NodeSetAutoscaler",
        "metadata": {"name": "idle"},
        "spec": {"scaleTargetRef": {"name": "idle"}, "slurm": {"partitions": ["elastic"]},
                 "minReplicas": 1, "maxReplicas": 3, "idleReplicas": 1, "idleTimeoutSeconds": 1,
                 "scaleDown": {"stabilizationWindowSeconds": 1}}
    }))
    .unwrap();
    autoscalers
        .create(&PostParams::default(), &nsa)
        .await
        .unwrap();
    let scaled = wait_until(Duration::from_secs(120), || async {
        nodesets
            .get("idle")
            .await
            .ok()
            .and_then(|n| n.spec.replicas)
            == Some(1)
    })
    .await;
    assert!(
        scaled,
        "the autoscaler in its pod never scaled the idle NodeSet down to 1"
    );

    // Uninstalled, nothing of the release is left but what the README says stays (the CRD and
    // its NodeSetAutoscalers).
    let (ok, said) = helm(&["uninstall", &release, "--namespace", &ns, "--wait"]);
    assert!(ok, "helm uninstall: {said}");
    let gone = wait_until(Duration::from_secs(120), || async {
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
        let left = deployments
            .list(&ListParams::default())
            .await
            .map(|l| l.items.len());
        let pods_left = pods
            .list(&ListParams::default())
            .await
            .map(|l| l.items.len());
        left.is_ok_and(|n| n == 0) && pods_left.is_ok_and(|n| n == 0)
    })
    .await;
    assert!(gone, "the release left Deployments or pods behind");
    let (_, left) = support::run_tool(
        "kubectl",
        &[
            "get",
            "all,configmaps,secrets,serviceaccounts,roles,rolebindings,clusterroles,clusterrolebindings,tokens.slinky.slurm.net",
            "-n",
            &ns,
            "-l",
            &format!("app.kubernetes.io/instance={release}"),
            "-o",
            "name",
        ],
    );
    // The one thing that stays, as the README says: the operator's token Secret (its owner is
    // Slinky's key Secret, not the Token).
    let left: Vec<&str> = left.lines().filter(|l| l.contains('/')).collect();
    assert_eq!(
        left,
        [format!("secret/{token}")],
        "left behind by helm uninstall"
    );
    assert!(
        autoscalers.get("idle").await.is_ok(),
        "the NodeSetAutoscaler went with the release"
    );
    let _ = namespaces.delete(&ns, &Default::default()).await;
}

/// A selector-less Service `slurm-restapi` (as Slinky names slurmrestd's) whose endpoint is the
/// real node's address, where the harness lets pods reach the host's slurmrestd; its URL.
async fn restd_service(client: &kube::Client, ns: &str, cluster: &SlurmCluster) -> String {
    let port: u16 = cluster.url.rsplit(':').next().unwrap().parse().unwrap();
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "slurm-restapi"},
        "spec": {"ports": [{"name": "restapi", "port": 6820, "targetPort": port}]},
    }))
    .unwrap();
    services.create(&PostParams::default(), &svc).await.unwrap();
    let slices: Api<k8s_openapi::api::discovery::v1::EndpointSlice> =
        Api::namespaced(client.clone(), ns);
    let slice = serde_json::from_value(json!({
        "metadata": {"name": "slurm-restapi-host",
                     "labels": {"kubernetes.io/service-name": "slurm-restapi"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [node("HARNESS_NODE_IP")]}],
        "ports": [{"name": "restapi", "port": port, "protocol": "TCP"}],
    }))
    .unwrap();
    slices.create(&PostParams::default(), &slice).await.unwrap();
    format!("http://slurm-restapi.{ns}:6820")
}

/// Waits for `check`; on failure says what the autoscaler and Slurm's `real` partition looked
/// like.
async fn until(
    cluster: &SlurmCluster,
    what: &str,
    within: Duration,
    a: &support::Process,
    check: impl AsyncFn() -> bool,
) {
    if !wait_until(within, || check()).await {
        panic!(
            "{what}: not within {within:?}\nsqueue:\n{}\nsinfo:\n{}\nautoscaler:\n{}",
            cluster.run("squeue", &["-p", REAL]),
            cluster.run("sinfo", &["-N", "-p", REAL]),
            a.logs()
        );
    }
}

/// Slinky's own slurmd pods, of the NodeSet `real` (Slurm's NodeSet and partition `real`).
const REAL: &str = "real";

/// A job at zero nodes runs in Slinky's own slurmd pod, which the real operator makes when
/// our autoscaler asks for it and takes away (through its preStop) when the autoscaler scales
/// back to zero; the autoscaler keeps the record for the next job. The NodeSet is what a site
/// writes but for the image (the harness's Slurm 26.05 as Slinky's slurmd image runs) and where
/// its pods run: args, probes, lifecycle, volumes and the key are the operator's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_at_zero_runs_in_slinkys_own_slurmd_pod_and_the_pod_goes_when_idle() {
    let hint = "the Slinky slurm-operator is not running (tests/harness/kube.sh operator-start)";
    let ns = kube_env("HARNESS_SLURM_OPERATOR_NAMESPACE").expect(hint);
    let controller = kube_env("HARNESS_SLURM_OPERATOR_CONTROLLER").expect(hint);
    let cluster = SlurmCluster::get(FLAVOR);
    let client = kube_client().await;
    let image = node("HARNESS_SLURMD_IMAGE");
    let nodesets: Api<v1beta1::NodeSet> = Api::namespaced(client.clone(), &ns);
    let nodeset = json!({
        "apiVersion": "slinky.slurm.net/v1beta1", "kind": "NodeSet",
        "metadata": {"name": REAL, "namespace": ns},
        "spec": {
            "controllerRef": {"name": controller, "namespace": ns},
            "replicas": 0,
            "slurmd": {"image": image},
            "logfile": {"image": image},
            "template": {"spec": {
                "nodeSelector": {"type": "real"},
                "tolerations": [{"key": node("HARNESS_NODE_TAINT"), "operator": "Exists",
                                 "effect": "NoSchedule"}],
            }},
        }
    });
    nodesets
        .patch(
            REAL,
            &PatchParams::apply("slurmscale-test").force(),
            &Patch::Apply(&nodeset),
        )
        .await
        .unwrap();
    // The README's NodeSetAutoscaler for it, with the test's bound and short timers.
    let autoscalers: Api<NodeSetAutoscaler> = Api::namespaced(client.clone(), &ns);
    let nsa: NodeSetAutoscaler = serde_json::from_value(json!({
        "apiVersion": "slurmscale.io/v1alpha1", "kind": "NodeSetAutoscaler",
        "metadata": {"name": REAL},
        "spec": {"scaleTargetRef": {"name": REAL},
                 "slurm": {"cluster": cluster.name, "partitions": [REAL]},
                 "minReplicas": 0, "maxReplicas": 1, "idleTimeoutSeconds": 6,
                 // What the node is, for the record made ahead of it (no more than this
                 // machine has: slurmd registers what it finds).
                 "nodeShape": {"cpus": 1, "memory": "1Gi"},
                 "scaleDown": {"stabilizationWindowSeconds": 4}, "nodeRecords": "Future"}
    }))
    .unwrap();
    let _ = autoscalers.delete(REAL, &DeleteParams::default()).await;
    autoscalers
        .create(&PostParams::default(), &nsa)
        .await
        .unwrap();
    let a = support::elastic::scontrol_autoscaler(&client, &cluster, "real-lease").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pod = |name: &str| {
        let pods = pods.clone();
        let name = name.to_string();
        async move { pods.get_opt(&name).await.ok().flatten() }
    };
    until(
        &cluster,
        "the autoscaler's record real-0",
        Duration::from_secs(30),
        &a,
        async || cluster.node_record("real-0").contains("State=FUTURE"),
    )
    .await;

    // A job while there is no node: the autoscaler asks for one, the operator makes the pod,
    // the kubelet runs Slinky's slurmd in it, slurmd fetches its config and registers, the job
    // runs.
    let sent = Instant::now();
    let job = cluster.submit(&["-p", REAL, "--wrap", "hostname; sleep 5"]);
    until(
        &cluster,
        "the autoscaler scales NodeSet real to 1",
        Duration::from_secs(30),
        &a,
        async || support::elastic::spec_replicas(&nodesets, REAL).await == 1,
    )
    .await;
    let scaled = sent.elapsed();
    until(
        &cluster,
        "pod real-0 Running and Ready on the real node",
        Duration::from_secs(90),
        &a,
        async || pod("real-0").await.is_some_and(|p| ready(&p)),
    )
    .await;
    let pod_ready = sent.elapsed();
    let p = pod("real-0").await.unwrap();
    let spec = p.spec.clone().unwrap();
    assert_eq!(
        spec.node_name.as_deref(),
        Some(node("HARNESS_NODE_NAME").as_str())
    );
    // The operator's pod, not ours: its probes on slurmd's port, its preStop, its key volume.
    let slurmd = spec.containers.iter().find(|c| c.name == "slurmd").unwrap();
    assert!(slurmd.readiness_probe.is_some() && slurmd.liveness_probe.is_some());
    assert!(
        slurmd
            .lifecycle
            .as_ref()
            .and_then(|l| l.pre_stop.as_ref())
            .is_some()
    );
    let pod_ip = p.status.as_ref().and_then(|s| s.pod_ip.clone()).unwrap();
    support::elastic::runs_on(&cluster, &job, "real-0", Duration::from_secs(60), &a).await;
    let ran = sent.elapsed();
    // slurmctld knows the node at the pod's own address (slurmd registered from it).
    let record = cluster.node_record("real-0");
    assert!(record.contains(&format!("NodeAddr={pod_ip} ")), "{record}");
    assert!(record.contains("AvailableFeatures=real"), "{record}");

    // Idle: back to zero. The operator drains the node, the kubelet runs the pod's preStop
    // (node DOWN, "Pod is terminating", then deleted) and stops it.
    let done = Instant::now();
    let reasons = std::sync::Mutex::new(Vec::<String>::new());
    until(
        &cluster,
        "NodeSet real back at 0 and pod real-0 gone",
        Duration::from_secs(180),
        &a,
        async || {
            let r = cluster.node_record("real-0");
            if let Some(reason) = r.split("Reason=").nth(1) {
                let mut seen = reasons.lock().unwrap();
                let reason = reason.split(" [").next().unwrap_or(reason).to_string();
                if !seen.contains(&reason) {
                    seen.push(reason);
                }
            }
            support::elastic::spec_replicas(&nodesets, REAL).await == 0
                && pod("real-0").await.is_none()
        },
    )
    .await;
    let back = done.elapsed();
    let reasons = reasons.into_inner().unwrap();
    assert!(
        reasons.iter().any(|r| r.starts_with("slurm-operator:")),
        "the operator drained real-0 before its pod went: {reasons:?}"
    );
    // The preStop ran in the pod (DOWN "Pod is terminating", then deleted): slurmctld's log
    // says so, whether or not a poll of ours saw the DOWN record in between.
    let log = std::fs::read_to_string(
        cluster
            .conf
            .parent()
            .unwrap()
            .parent()
            .unwrap()
            .join("log/slurmctld.log"),
    )
    .unwrap_or_default();
    assert!(
        log.contains("update_node: node real-0 reason set to: Pod is terminating"),
        "slurmctld never saw the pod's preStop set real-0 DOWN"
    );
    // The record comes back for the next job (the preStop deleted it).
    until(
        &cluster,
        "the record real-0 made again",
        Duration::from_secs(60),
        &a,
        async || cluster.node_record("real-0").contains("State=FUTURE"),
    )
    .await;
    println!(
        "real node (Slurm {FLAVOR}, slurm-operator {}): job at zero → /scale 1 in {:.1}s, pod Ready in \
         {:.1}s, job running in {:.1}s; idle → pod gone at 0 in {:.1}s",
        kube_env("HARNESS_SLURM_OPERATOR_VERSION").unwrap_or_default(),
        scaled.as_secs_f64(),
        pod_ready.as_secs_f64(),
        ran.as_secs_f64(),
        back.as_secs_f64()
    );
    autoscalers
        .delete(REAL, &DeleteParams::default())
        .await
        .unwrap();
    let _ = nodesets.delete(REAL, &DeleteParams::default()).await;
}
