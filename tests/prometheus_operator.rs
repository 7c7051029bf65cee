//! The chart's monitoring under the real Prometheus Operator and the real Prometheus, as a site
//! runs them: kube-prometheus-stack installed with its defaults as release `prometheus` (its
//! Prometheus object selects ServiceMonitors and PrometheusRules labelled `release:
//! prometheus` in every namespace) and slurmscale installed with `helm install` and the quick
//! start values (examples/helm/slinky-quickstart.yaml).
//!
//! The Prometheus Operator (v0.93, the harness's build) turns the chart's ServiceMonitors and
//! PrometheusRule into a Prometheus configuration and rule files; Prometheus 3.5 (Debian's, the
//! release kube-prometheus-stack ships) runs them unmodified, the way the operator's pod
//! would — the configuration, web config and rule files where the pod mounts them, its
//! Kubernetes discovery in-cluster with a service account token
//! (tests/harness/prometheus3.sh) — and must scrape the exporter and the autoscaler through
//! their Services and load every alert.
//!
//! One concession to a cluster without a network: kwok's pods have addresses nothing listens
//! on, so the values add a relabeling (the chart's `serviceMonitor.relabelings`) that sends
//! each Service's scrape to the real slurmscale process the test runs for it.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};
use support::{
    SlurmCluster, kube_client, kube_env, namespace, repo_root, run_tool, tool, wait_until,
};

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

fn helm(args: &[&str]) -> (bool, String) {
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(tool("helm"))
        .args(args)
        .current_dir(repo_root())
        .env("HOME", home.path())
        .env("HELM_CACHE_HOME", home.path().join("cache"))
        .env("HELM_CONFIG_HOME", home.path().join("config"))
        .env("HELM_DATA_HOME", home.path().join("data"))
        .env("KUBECONFIG", support::kubeconfig_path())
        .output()
        .expect("run helm");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quickstart_is_scraped_and_its_alerts_load_under_the_prometheus_operator() {
    let cluster = SlurmCluster::get("26.05");
    let client = kube_client().await;
    install_crds().await;
    let monitoring = namespace(&client, "monitoring").await;
    let slurm = namespace(&client, "slurm").await;

    // The real slurmscale processes the chart's pods stand for.
    let exporter = support::exporter(&cluster, &support::kubeconfig_path());
    let autoscaler = support::autoscaler(&cluster, &slurm, &[]);
    exporter.wait_ready(Duration::from_secs(30)).await;

    // The quick start, as its header says to install it (plus the relabeling above, kwok's
    // toleration for the pods, and a scrape every 2 s so the test need not wait 30).
    let to = |job: &str, port: u16| {
        json!({"sourceLabels": ["__meta_kubernetes_service_label_slurmscale_io_job"],
               "regex": job, "targetLabel": "__address__", "replacement": format!("127.0.0.1:{port}")})
    };
    let relabel = json!([
        to("slurmscale-exporter", exporter.port),
        to("slurmscale-autoscaler", autoscaler.port)
    ]);
    let kwok = json!([{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}]);
    // A release name of its own: the chart's ClusterRoles are named after it.
    let release = support::unique("slurmscale");
    let (ok, said) = helm(&[
        "install",
        &release,
        "charts/slurmscale",
        "--namespace",
        &slurm,
        "-f",
        "examples/helm/slinky-quickstart.yaml",
        "--set",
        &format!("slurm.url={}", cluster.url),
        "--set",
        "serviceMonitor.interval=2s",
        "--set-json",
        &format!("serviceMonitor.relabelings={relabel}"),
        "--set-json",
        &format!("exporter.tolerations={kwok}"),
        "--set-json",
        &format!("autoscaler.tolerations={kwok}"),
    ]);
    assert!(ok, "helm install with the quick start values:\n{said}");

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
    let operator = Operator::start(&[&monitoring, &slurm]);
    service_account(
        &client,
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
        let made = materialize(&client, &monitoring, &name, dir.path()).await;
        let config = std::fs::read_to_string(&config_file).unwrap_or_default();
        let rules = std::fs::read_dir(dir.path().join("etc/rules")).map_or(0, |d| d.count());
        if made.is_some()
            && config.contains(&format!("serviceMonitor/{slurm}/{release}-exporter/0"))
            && config.contains(&format!("serviceMonitor/{slurm}/{release}-autoscaler/0"))
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
        let expr =
            format!("up{{job=\"{job}\",namespace=\"{slurm}\",service=~\"{release}-.*\"}} == 1");
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
    let series = prometheus
        .query(&format!(
            "slurm_partition_nodes{{job=\"slurmscale-exporter\",cluster=\"{}\"}}",
            cluster.name
        ))
        .await;
    assert!(
        !series.is_empty(),
        "no slurm_partition_nodes from the exporter's cluster in Prometheus"
    );

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
    let (ok, said) = helm(&["uninstall", &release, "--namespace", &slurm]);
    assert!(ok, "helm uninstall: {said}");
}
