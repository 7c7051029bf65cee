//! Dashboards and alerts, checked with real tools: the alert rules through `promtool check
//! rules` and their unit tests; the dashboards type-checked against `@grafana/schema`; and
//! every dashboard query and alert expression run by a real Prometheus that scrapes the
//! exporter (fed by the harness's Slurm 24.11 and kube-apiserver) and the autoscaler.

mod support;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use slurmscale_autoscaler::crd::NodeSetAutoscaler;
use slurmscale_exporter::k8s::genericnode::GenericNode;
use slurmscale_exporter::k8s::nodeset::v1beta1;
use support::prometheus::{ALERTS, Prometheus};
use support::{Process, SlurmCluster, kube_client, namespace, repo_root, tool, unique, wait_until};

fn promtool(args: &[&str]) -> (bool, String) {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(repo_root())
        .output()
        .expect("promtool (Debian's prometheus package; tests/harness/deps.sh installs it)");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn alert_rules_pass_promtool_and_their_unit_tests() {
    let (ok, out) = promtool(&["check", "rules", ALERTS]);
    assert!(ok, "promtool check rules:\n{out}");
    let (ok, out) = promtool(&["test", "rules", "tests/prometheus/alerts_test.yaml"]);
    assert!(ok, "promtool test rules:\n{out}");
}

fn dashboards() -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = std::fs::read_dir(repo_root().join("dashboards"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            let v = serde_json::from_str(&std::fs::read_to_string(&p).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (name, v)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(out.len(), 4, "four dashboards expected");
    out
}

fn panels(d: &Value) -> impl Iterator<Item = &Value> {
    d["panels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["type"] != "row")
}

/// Panel types the dashboards use, and where their option types live in @grafana/schema.
const PANEL_TYPES: [(&str, &str); 3] = [
    (
        "timeseries",
        "timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen",
    ),
    ("stat", "stat/panelcfg/x/StatPanelCfg_types.gen"),
    ("table", "table/panelcfg/x/TablePanelCfg_types.gen"),
];

/// One TypeScript module per dashboard: the dashboard as `Dashboard`, each panel as
/// `Panel<Options, FieldConfig>` of its type and its options as that type's `Options`.
/// Literals get excess-property checks, so a misspelt key fails as well as a wrong value.
fn typescript_of(name: &str, d: &Value) -> String {
    let ident = name.replace('-', "_");
    let mut ts = String::from("import type { Dashboard, Panel } from '@grafana/schema';\n");
    for (t, module) in PANEL_TYPES {
        let field_config = if t == "stat" {
            ts.push_str(&format!("type {t}FieldConfig = Record<string, never>;\n"));
            String::new()
        } else {
            format!(", FieldConfig as {t}FieldConfig")
        };
        ts.push_str(&format!(
            "import type {{ Options as {t}Options{field_config} }} from '@grafana/schema/dist/esm/raw/composable/{module}';\n"
        ));
    }
    // Dashboard JSON holds enum members as their string values.
    ts.push_str("type Json<T> = T extends string ? `${T}` : T extends (infer U)[] ? Json<U>[] : T extends object ? { [K in keyof T]: Json<T[K]> } : T;\n");
    ts.push_str(&format!(
        "export const {ident}: Json<Dashboard> = {};\n",
        serde_json::to_string_pretty(d).unwrap()
    ));
    for (i, p) in panels(d).enumerate() {
        let t = p["type"].as_str().unwrap();
        assert!(
            PANEL_TYPES.iter().any(|(k, _)| *k == t),
            "{name}: panel type {t} is not type-checked here"
        );
        ts.push_str(&format!(
            "export const {ident}_panel_{i}: Json<Panel<{t}Options, {t}FieldConfig>> = {};\n",
            serde_json::to_string_pretty(p).unwrap()
        ));
        ts.push_str(&format!(
            "export const {ident}_options_{i}: Json<{t}Options> = {};\n",
            serde_json::to_string_pretty(&p["options"]).unwrap()
        ));
    }
    ts
}

#[test]
fn dashboards_type_check_against_grafana_schema() {
    let dir = tempfile::tempdir().unwrap();
    let node_modules = tool("tsc").parent().unwrap().join("../node_modules");
    std::os::unix::fs::symlink(&node_modules, dir.path().join("node_modules")).unwrap();
    std::fs::write(
        dir.path().join("tsconfig.json"),
        r#"{"compilerOptions": {"strict": true, "noEmit": true, "module": "esnext",
            "moduleResolution": "bundler", "target": "es2022", "skipLibCheck": true, "types": []},
            "include": ["*.ts"]}"#,
    )
    .unwrap();
    let mut uids = BTreeSet::new();
    for (name, d) in dashboards() {
        std::fs::write(
            dir.path().join(format!("{name}.ts")),
            typescript_of(&name, &d),
        )
        .unwrap();
        assert!(
            uids.insert(d["uid"].as_str().unwrap().to_string()),
            "{name}: uid reused"
        );
        // Multi-cluster: a `cluster` variable, and every query goes through the chosen data source.
        let vars = d["templating"]["list"].as_array().unwrap();
        assert!(
            vars.iter().any(|v| v["name"] == "cluster"),
            "{name}: no cluster variable"
        );
        for p in panels(&d) {
            assert_eq!(
                p["datasource"]["uid"], "${datasource}",
                "{name}: {}",
                p["title"]
            );
            // Each query is scoped: to the chosen clusters, or, for the replica-wide series
            // (which carry no cluster), to the chosen release namespaces, a variable of its
            // dashboard.
            for t in p["targets"].as_array().unwrap() {
                let expr = t["expr"].as_str().unwrap();
                let scoped = ["cluster", "namespace"].iter().any(|v| {
                    expr.contains(&format!("=~\"${v}\"")) && vars.iter().any(|x| x["name"] == *v)
                });
                assert!(scoped, "{name}: {}: {expr} is not scoped", p["title"]);
            }
        }
    }
    let out = Command::new(tool("tsc"))
        .args(["-p", "tsconfig.json"])
        .current_dir(dir.path())
        .output()
        .expect("run tsc");
    assert!(
        out.status.success(),
        "dashboards do not type-check against @grafana/schema:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every PromQL expression the dashboards run, with Grafana's variables as "all" would set
/// them; `label_values(expr, label)` variables become `count by (label) (expr)`.
fn dashboard_queries() -> Vec<(String, String)> {
    let subst = |e: &str| {
        e.replace("$__rate_interval", "1m")
            .replace("$__range", "1m")
            .replace("$cluster", ".+")
            .replace("$partition", ".+")
            // The release namespaces: all of them (".*" also matches a scrape without one).
            .replace("$namespace", ".*")
    };
    let mut out = Vec::new();
    for (name, d) in dashboards() {
        for v in d["templating"]["list"].as_array().unwrap() {
            if let Some(q) = v["query"]["query"].as_str() {
                let inner = q
                    .strip_prefix("label_values(")
                    .and_then(|s| s.strip_suffix(')'))
                    .expect("label_values(...) variables");
                let (expr, label) = inner.rsplit_once(',').unwrap();
                out.push((
                    format!("{name}: variable {}", v["name"]),
                    format!("count by ({}) ({})", label.trim(), subst(expr)),
                ));
            }
        }
        for p in panels(&d) {
            for t in p["targets"].as_array().unwrap() {
                out.push((
                    format!("{name}: {} [{}]", p["title"].as_str().unwrap(), t["refId"]),
                    subst(t["expr"].as_str().unwrap()),
                ));
            }
        }
    }
    out
}

/// The vector selectors of the alert rules: each must select series the product exports.
fn alert_selectors() -> Vec<(String, String, String)> {
    let rules: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(repo_root().join(ALERTS)).unwrap())
            .unwrap();
    let mut out = Vec::new();
    for g in rules["groups"].as_array().unwrap() {
        for r in g["rules"].as_array().unwrap() {
            let expr = r["expr"].as_str().unwrap().to_string();
            let alert = r["alert"].as_str().unwrap().to_string();
            let mut rest = expr.as_str();
            while let Some(i) = rest.find(|c: char| c.is_ascii_lowercase()) {
                rest = &rest[i..];
                let end = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                let word = &rest[..end];
                rest = &rest[end..];
                if word.starts_with("slurm") || word == "up" {
                    let selector = match rest.strip_prefix('{') {
                        Some(r) => {
                            let end = r.find('}').unwrap();
                            let matchers = &r[..end];
                            rest = &r[end + 1..];
                            format!("{word}{{{matchers}}}")
                        }
                        None => word.to_string(),
                    };
                    out.push((alert.clone(), expr.clone(), selector));
                }
            }
        }
    }
    assert!(out.len() >= 9, "{out:?}");
    out
}

/// Cancels the test's jobs however the test ends: later tests own the elastic partition.
struct Jobs<'a>(&'a SlurmCluster, Vec<String>);

impl Drop for Jobs<'_> {
    fn drop(&mut self) {
        for id in &self.1 {
            let _ = self.0.cmd("scancel").arg(id).status();
        }
    }
}

/// A node drained with a reason while the test runs (the dashboards show drain reasons and
/// the nodes down or drained), resumed however the test ends.
struct Drained<'a>(&'a SlurmCluster, &'static str);

impl<'a> Drained<'a> {
    fn new(cluster: &'a SlurmCluster, node: &'static str, reason: &str) -> Self {
        let name = format!("nodename={node}");
        let reason = format!("reason={reason}");
        cluster.run(
            "scontrol",
            &["update", name.as_str(), "state=drain", reason.as_str()],
        );
        Self(cluster, node)
    }
}

impl Drop for Drained<'_> {
    fn drop(&mut self) {
        let name = format!("nodename={}", self.1);
        let _ = self
            .0
            .cmd("scontrol")
            .args(["update", name.as_str(), "state=resume"])
            .status();
    }
}

/// Kubernetes objects the dashboards show: a NodeSet serving the elastic partition with its
/// autoscaler, a colocated pool (Node + GenericNode) with its own, and an autoscaler whose
/// target does not exist (so error panels have errors to show).
async fn kubernetes_fixtures(cluster: &SlurmCluster) -> (String, String) {
    let client = kube_client().await;
    let ns = namespace(&client, "obs").await;
    let pool = unique("obspool");
    let node_name = unique("obs-node");
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": node_name}})).unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    nodes
        .patch_status(
            &node_name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"allocatable": {"cpu": "8", "memory": "16Gi"}}})),
        )
        .await
        .unwrap();
    let gns: Api<GenericNode> = Api::all(client.clone());
    let gn: GenericNode = serde_json::from_value(json!({
        "apiVersion": "kai.alibabacloud.com/v1alpha1", "kind": "GenericNode",
        "metadata": {"name": node_name, "labels": {"kai.alibabacloud.com/cluster-name": pool}},
        "spec": {"alias": "c1", "type": "Slurm"},
    }))
    .unwrap();
    gns.create(&PostParams::default(), &gn).await.unwrap();
    gns.patch_status(
        &node_name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"allocatedResources": [
            {"type": "Slurm", "allocated": {"cpu": "6", "memory": "8Gi"}},
            {"type": "Kubernetes", "allocated": {"cpu": "1500m", "memory": "2Gi"}},
        ], "admissionChecks": [{"name": "drain-slurm", "state": "Pending"}]}})),
    )
    .await
    .unwrap();

    let nodesets: Api<v1beta1::NodeSet> = Api::namespaced(client.clone(), &ns);
    for name in ["elastic", "cpu", "planned"] {
        // `planned` is the harness's power-saving partition, for a slurm-planned autoscaler
        // (whose pods' slurmd must run with -b).
        let nodeset: v1beta1::NodeSet = serde_json::from_value(json!({
            "apiVersion": "slinky.slurm.net/v1beta1", "kind": "NodeSet",
            "metadata": {"name": name, "annotations": {"slurmscale.io/cluster": cluster.name}},
            "spec": {"replicas": 0, "slurmd": {"args": ["-b"]}},
        }))
        .unwrap();
        nodesets
            .create(&PostParams::default(), &nodeset)
            .await
            .unwrap();
        // As the operator reports it; the selector finds the NodeSet's pods on pool nodes.
        let status = json!({"status": {"replicas": 0, "readyReplicas": 0,
            "selector": format!("app=slurmd-{name}-{pool}"), "nodeSetHash": "obs"}});
        nodesets
            .patch_status(name, &PatchParams::default(), &Patch::Merge(status))
            .await
            .unwrap();
    }
    let autoscalers: Api<NodeSetAutoscaler> = Api::namespaced(client, &ns);
    for spec in [
        json!({"name": "elastic", "spec": {"scaleTargetRef": {"name": "elastic"},
            "slurm": {"cluster": cluster.name}, "minReplicas": 0, "maxReplicas": 4}}),
        json!({"name": "pool", "spec": {"scaleTargetRef": {"name": "cpu"},
            "slurm": {"cluster": cluster.name, "partitions": ["cpu"]},
            "minReplicas": 0, "maxReplicas": 4,
            "colocation": {"pool": pool, "minSlurmNodes": 0, "podSelector": {"app": pool},
                "shares": {"slurm": "50%"}}}}),
        json!({"name": "planned", "spec": {"scaleTargetRef": {"name": "planned"},
            "slurm": {"cluster": cluster.name}, "maxReplicas": 4, "mode": "SlurmPlanned"}}),
        json!({"name": "missing", "spec": {"scaleTargetRef": {"name": "not-there"},
            "slurm": {"cluster": cluster.name, "partitions": ["cpu"]},
            "minReplicas": 0, "maxReplicas": 4}}),
    ] {
        let nsa: NodeSetAutoscaler = serde_json::from_value(json!({
            "apiVersion": "slurmscale.io/v1alpha1", "kind": "NodeSetAutoscaler",
            "metadata": {"name": spec["name"]}, "spec": spec["spec"],
        }))
        .unwrap();
        autoscalers
            .create(&PostParams::default(), &nsa)
            .await
            .unwrap();
    }
    (ns, node_name)
}

async fn remove_fixtures(ns: &str, node_name: &str) {
    let client = kube_client().await;
    // The test server has no namespace controller: autoscalers left behind would be
    // reconciled by later tests' autoscalers, which act (a slurm-planned one makes records).
    let (delete, every) = (DeleteParams::default(), kube::api::ListParams::default());
    let _ = Api::<NodeSetAutoscaler>::namespaced(client.clone(), ns)
        .delete_collection(&delete, &every)
        .await;
    let _ = Api::<v1beta1::NodeSet>::namespaced(client.clone(), ns)
        .delete_collection(&delete, &every)
        .await;
    let _ = Api::<GenericNode>::all(client.clone())
        .delete(node_name, &DeleteParams::default())
        .await;
    let _ = Api::<Node>::all(client.clone())
        .delete(node_name, &DeleteParams::default())
        .await;
    let _ = Api::<k8s_openapi::api::core::v1::Namespace>::all(client)
        .delete(ns, &DeleteParams::default())
        .await;
}

/// The exporter polls two clusters: the real 24.11, and the real 22.05 with a token it
/// rejects — a cluster that does not answer, as the error panels and alerts expect. With
/// per-user metrics, which the per-user and per-account panels show.
fn exporter(cluster: &SlurmCluster, broken: &SlurmCluster, dir: &Path) -> Process {
    let bad_token = dir.join("bad-token");
    std::fs::write(&bad_token, "not-a-jwt").unwrap();
    let config = dir.join("clusters.yaml");
    std::fs::write(
        &config,
        format!(
            "interval: 1s\nclusters:\n- name: {}\n  url: {}\n  user: {}\n  jwtKeyFile: {}\n- name: unreachable\n  url: {}\n  tokenFile: {}\n",
            cluster.name,
            cluster.url,
            cluster.user,
            cluster.key_file.display(),
            broken.url,
            bad_token.display(),
        ),
    )
    .unwrap();
    let kubeconfig = support::kubeconfig_path();
    Process::start(
        &[
            "exporter",
            "--config",
            config.to_str().unwrap(),
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--per-user-metrics",
        ],
        &[],
    )
}

#[tokio::test]
async fn every_dashboard_and_alert_query_returns_data_from_a_real_prometheus() {
    let cluster = SlurmCluster::get("24.11");
    let broken = SlurmCluster::get("22.05");
    let pending = cluster.submit(&["-p", "elastic", "-N", "2", "--wrap", "sleep 600"]);
    let _jobs = Jobs(&cluster, vec![pending]);
    let _drained = Drained::new(&cluster, "c4", "observability: drain reason panel");
    // One drained as slurmscale drains a node it lends to Kubernetes: the down-or-drained
    // alert leaves such nodes out by their reason.
    let _lent = Drained::new(&cluster, "c3", "slurmscale: lent (observability test)");
    let (ns, node_name) = kubernetes_fixtures(&cluster).await;
    let dir = tempfile::tempdir().unwrap();
    let exporter = exporter(&cluster, &broken, dir.path());
    let autoscaler = support::autoscaler(&cluster, &ns, &["--dry-run"]);
    let prometheus = Prometheus::start(&[
        ("slurmscale-exporter", exporter.port),
        ("slurmscale-autoscaler", autoscaler.port),
    ]);

    let missing = std::cell::RefCell::new(Vec::<String>::new());
    let answered = wait_until(Duration::from_secs(90), || {
        let prometheus = &prometheus;
        let missing = &missing;
        async move {
            let mut now_missing = Vec::new();
            for (what, expr) in dashboard_queries() {
                match prometheus.query(&expr).await {
                    Ok(r) if !r.is_empty() => {}
                    Ok(_) => now_missing.push(format!("{what}: no data for {expr}")),
                    Err(e) => now_missing.push(format!("{what}: {expr}: {e}")),
                }
            }
            for (alert, _, selector) in alert_selectors() {
                match prometheus.query(&selector).await {
                    Ok(r) if !r.is_empty() => {}
                    other => now_missing.push(format!("{alert}: {selector}: {other:?}")),
                }
            }
            let done = now_missing.is_empty();
            *missing.borrow_mut() = now_missing;
            done
        }
    })
    .await;

    // The rules themselves: all evaluated without error, and the one whose condition holds
    // (the cluster that rejects our token) selects exactly that cluster.
    let rules = prometheus.api("/api/v1/rules", &[]).await;
    let unreachable = prometheus
        .query("max by (cluster) (slurm_exporter_up) == 0")
        .await;
    let logs = format!(
        "exporter:\n{}\nautoscaler:\n{}\nprometheus:\n{}",
        exporter.logs(),
        autoscaler.logs(),
        prometheus.log()
    );
    remove_fixtures(&ns, &node_name).await;
    assert!(
        answered,
        "queries without data after 90 s:\n{}\n{logs}",
        missing.borrow().join("\n")
    );
    let rules = rules.expect("/api/v1/rules");
    let evaluated: Vec<&Value> = rules["data"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .collect();
    // Every alert the chart ships is loaded, by name.
    let mut loaded: Vec<&str> = evaluated
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    let mut shipped: Vec<String> = alert_selectors().into_iter().map(|(a, _, _)| a).collect();
    loaded.sort();
    shipped.sort();
    shipped.dedup();
    assert_eq!(loaded, shipped, "{rules}");
    for r in evaluated {
        assert_eq!(
            r["health"], "ok",
            "rule {} failed: {}",
            r["name"], r["lastError"]
        );
    }
    let unreachable = unreachable.unwrap();
    let unreachable: Vec<&str> = unreachable
        .iter()
        .map(|s| s["metric"]["cluster"].as_str().unwrap())
        .collect();
    assert_eq!(unreachable, ["unreachable"]);
}

/// Runs `openssl` with `args` in `dir`; fails the test with its output.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA and a certificate for 127.0.0.1 signed by it, named `name`.crt/.key.
fn certificate(dir: &Path, name: &str, cn: &str) {
    if !dir.join("ca.crt").exists() {
        openssl(
            dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=test-ca",
                "-keyout",
                "ca.key",
                "-out",
                "ca.crt",
            ],
        );
    }
    std::fs::write(dir.join("san.ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            &format!("/CN={cn}"),
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
        ],
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "san.ext",
            "-out",
            &format!("{name}.crt"),
        ],
    );
}

/// The subject a TLS server at `port` presents now.
fn presented_subject(port: u16) -> String {
    let out = Command::new("openssl")
        .args(["s_client", "-connect", &format!("127.0.0.1:{port}")])
        .stdin(Stdio::null())
        .output()
        .expect("openssl s_client");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.starts_with("subject="))
        .unwrap_or_default()
        .to_string()
}

/// `/metrics` locked down with an exporter-toolkit web config: TLS and basic auth. A real
/// Prometheus with the right password scrapes it, one with a wrong password is refused,
/// plain HTTP and no password get nothing, the probes stay open, and a renewed certificate
/// is served without a restart.
#[tokio::test]
async fn a_real_prometheus_scrapes_over_tls_with_basic_auth() {
    let cluster = SlurmCluster::get("24.11");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    certificate(d, "server", "slurmscale-a");
    let password = format!("pw-{}", support::unique("scrape"));
    support::secrets::register(&password);
    let hash = bcrypt::hash(&password, 4).unwrap();
    std::fs::write(
        d.join("web.yml"),
        format!(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\nbasic_auth_users:\n  prometheus: '{hash}'\n"
        ),
    )
    .unwrap();
    let key = cluster.key_file.to_string_lossy().into_owned();
    let web = d.join("web.yml").to_string_lossy().into_owned();
    let exporter = Process::start(
        &[
            "exporter",
            "--no-kubernetes",
            "--interval",
            "1s",
            "--jwt-key-file",
            &key,
            "--web-config-file",
            &web,
        ],
        &[
            ("SLURM_REST_URL", &cluster.url),
            ("SLURM_USER", &cluster.user),
            ("SLURM_CLUSTER", &cluster.name),
        ],
    );
    let ca = reqwest::Certificate::from_pem(&std::fs::read(d.join("ca.crt")).unwrap()).unwrap();
    let https = reqwest::Client::builder()
        .add_root_certificate(ca)
        .build()
        .unwrap();
    let url = |path: &str| format!("https://127.0.0.1:{}{path}", exporter.port);
    let status = async |path: &str, auth: Option<&str>| {
        let mut r = https.get(url(path));
        if let Some(pw) = auth {
            r = r.basic_auth("prometheus", Some(pw));
        }
        r.send().await.ok().map(|r| r.status().as_u16())
    };
    let up = support::wait_until(Duration::from_secs(30), || async {
        status("/readyz", None).await == Some(200)
    })
    .await;
    assert!(up, "not serving over TLS:\n{}", exporter.logs());
    assert_eq!(status("/metrics", Some(&password)).await, Some(200));
    assert_eq!(status("/metrics", None).await, Some(401), "no password");
    assert_eq!(
        status("/metrics", Some("wrong")).await,
        Some(401),
        "wrong password"
    );
    assert_eq!(
        status("/healthz", None).await,
        Some(200),
        "probes stay open"
    );
    assert!(
        reqwest::get(format!("http://127.0.0.1:{}/metrics", exporter.port))
            .await
            .map_or(true, |r| !r.status().is_success()),
        "served over plain HTTP"
    );

    // A real Prometheus: the right password scrapes, a wrong one is refused.
    let job = |name: &str, pw: &str| {
        json!({"job_name": name, "scrape_interval": "1s", "scheme": "https",
               "tls_config": {"ca_file": d.join("ca.crt")},
               "basic_auth": {"username": "prometheus", "password": pw},
               "static_configs": [{"targets": [format!("127.0.0.1:{}", exporter.port)]}]})
    };
    let prometheus = Prometheus::start_with(vec![job("good", &password), job("bad", "wrong")]);
    let scraped = support::wait_until(Duration::from_secs(30), || async {
        let good = prometheus.query("up{job=\"good\"} == 1").await;
        let bad = prometheus.query("up{job=\"bad\"} == 0").await;
        let nodes = prometheus.query("slurm_nodes{job=\"good\"}").await;
        [good, bad, nodes]
            .iter()
            .all(|r| r.as_ref().is_ok_and(|v| !v.is_empty()))
    })
    .await;
    assert!(
        scraped,
        "Prometheus over TLS with basic auth:\n{}",
        prometheus.log()
    );

    // cert-manager renews the certificate in place: served without a restart.
    assert!(presented_subject(exporter.port).contains("slurmscale-a"));
    certificate(d, "renewed", "slurmscale-b");
    std::fs::rename(d.join("renewed.key"), d.join("server.key")).unwrap();
    std::fs::rename(d.join("renewed.crt"), d.join("server.crt")).unwrap();
    let renewed = support::wait_until(Duration::from_secs(30), || async {
        presented_subject(exporter.port).contains("slurmscale-b")
    })
    .await;
    assert!(
        renewed,
        "the renewed certificate is not served:\n{}",
        exporter.logs()
    );
    assert_eq!(status("/metrics", Some(&password)).await, Some(200));
}
