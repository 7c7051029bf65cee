//! The Helm chart, checked with real tools: `helm lint` and `helm template` (a real helm),
//! the rendered manifests through `kubernetes-validate --strict` (Kubernetes 1.33 schemas)
//! and through a server-side dry run on the harness's kube-apiserver with the official
//! Prometheus Operator CRDs. Also what the rendered objects promise: least privilege,
//! non-root, read-only root filesystem, probes, a leader-elected autoscaler.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use support::{repo_root, run_tool, tool, wait_until};

/// Helm with its home, cache and config in a throwaway directory: (success, stdout,
/// stdout + stderr). Helm logs to stderr (e.g. that the dashboards are a symlink).
fn helm(args: &[&str]) -> (bool, String, String) {
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(tool("helm"))
        .args(args)
        .current_dir(repo_root())
        .env("HOME", home.path())
        .env("HELM_CACHE_HOME", home.path().join("cache"))
        .env("HELM_CONFIG_HOME", home.path().join("config"))
        .env("HELM_DATA_HOME", home.path().join("data"))
        .output()
        .expect("run helm");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let all = format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    (out.status.success(), stdout, all)
}

/// Values sets the chart must accept: the defaults with what is required, and every file
/// in examples/helm/.
fn values_sets() -> Vec<(String, Vec<String>)> {
    let mut sets = vec![(
        "defaults".to_string(),
        vec![
            "--set".into(),
            "slurm.url=http://slurmrestd:6820".into(),
            "--set".into(),
            "slurm.auth.value=c2VjcmV0LWtleS1ieXRlcw==".into(),
            "--set".into(),
            "serviceMonitor.enabled=true".into(),
            "--set".into(),
            "prometheusRule.enabled=true".into(),
            "--set".into(),
            "dashboards.enabled=true".into(),
        ],
    )];
    let dir = repo_root().join("examples/helm");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("examples/helm")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 3, "examples/helm has {files:?}");
    for f in files {
        sets.push((
            f.file_name().unwrap().to_string_lossy().into_owned(),
            vec!["-f".into(), f.to_string_lossy().into_owned()],
        ));
    }
    sets
}

fn render(namespace: &str, values: &[String]) -> String {
    let mut args = vec![
        "template",
        "slurmscale",
        "charts/slurmscale",
        "--namespace",
        namespace,
        "--include-crds",
    ];
    args.extend(values.iter().map(String::as_str));
    let (ok, rendered, all) = helm(&args);
    assert!(ok, "helm template {values:?}:\n{all}");
    rendered
}

/// The rendered documents as JSON values.
fn objects(rendered: &str) -> Vec<Value> {
    rendered
        .split("\n---")
        .filter_map(|doc| {
            let v: Value = serde_saphyr::from_str(doc).unwrap_or_else(|e| {
                panic!("rendered YAML does not parse: {e}\n{doc}");
            });
            (!v.is_null()).then_some(v)
        })
        .collect()
}

fn find<'a>(objs: &'a [Value], kind: &str, name_suffix: &str) -> Option<&'a Value> {
    objs.iter().find(|o| {
        o["kind"] == kind
            && o["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.ends_with(name_suffix))
    })
}

#[test]
fn the_chart_lints_and_renders_valid_manifests() {
    for (name, values) in values_sets() {
        let mut lint = vec!["lint", "--strict", "charts/slurmscale"];
        lint.extend(values.iter().map(String::as_str));
        let (ok, _, out) = helm(&lint);
        assert!(ok, "helm lint --strict with {name}:\n{out}");

        let rendered = render("slurm", &values);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("rendered.yaml");
        std::fs::write(&file, &rendered).unwrap();
        let (ok, out) = run_tool(
            "kubernetes-validate",
            &["--strict", "-k", "1.33.0", file.to_str().unwrap()],
        );
        assert!(ok, "kubernetes-validate --strict with {name}:\n{out}");
        assert!(
            !out.contains("ERROR"),
            "kubernetes-validate reported errors with {name}:\n{out}"
        );

        for o in objects(&rendered) {
            if o["kind"] != "Deployment" {
                continue;
            }
            let what = format!("{name}: {}", o["metadata"]["name"]);
            let pod = &o["spec"]["template"]["spec"];
            assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{what}");
            let c = &pod["containers"][0];
            assert_eq!(
                c["securityContext"]["readOnlyRootFilesystem"], true,
                "{what}"
            );
            assert_eq!(
                c["securityContext"]["allowPrivilegeEscalation"], false,
                "{what}"
            );
            assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz", "{what}");
            assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz", "{what}");
            assert!(c["resources"]["requests"]["memory"].is_string(), "{what}");
            // Credentials come from a mounted Secret, never from an env value.
            for e in c["env"].as_array().unwrap() {
                let n = e["name"].as_str().unwrap();
                assert!(
                    !(n == "SLURM_JWT"
                        || e["value"].as_str().is_some_and(|v| v.contains("c2VjcmV0"))),
                    "{what}: a secret in env {e}"
                );
            }
        }
    }
}

/// Two autoscaler replicas, leader-elected, each with its own identity in the Lease; the
/// request limit follows the interval.
#[test]
fn the_autoscaler_runs_leader_elected_replicas_each_with_its_own_identity() {
    let (_, values) = values_sets().remove(0);
    let objs = objects(&render("slurm", &values));

    let autoscaler = find(&objs, "Deployment", "-autoscaler").expect("autoscaler Deployment");
    assert_eq!(autoscaler["spec"]["replicas"], 2);
    let env = autoscaler["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap();
    let var = |n: &str| env.iter().find(|e| e["name"] == n).cloned();
    assert_eq!(
        var("POD_NAME").unwrap()["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.name",
        "each replica needs its own identity in the Lease"
    );
    assert_eq!(
        var("SLURMSCALE_LEADER_ELECTION_NAMESPACE").unwrap()["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.namespace"
    );
    assert!(
        var("SLURM_MAX_REQUESTS_PER_SECOND").is_none(),
        "the request limit is left to follow the interval"
    );
    assert!(var("SLURMSCALE_EXPORTER_METRICS").is_none());
}

#[test]
fn a_locked_down_metrics_endpoint_is_mounted_probed_and_scraped_over_https() {
    let (_, values) = values_sets().remove(0);

    // /metrics locked down: the web config Secret is mounted and named, probes and the
    // ServiceMonitor speak https, the ServiceMonitor carries the scrape credentials.
    let mut locked = values.clone();
    locked.extend(
        [
            "--set",
            "webConfig.existingSecret=slurmscale-web",
            "--set",
            "webConfig.tls=true",
            "--set",
            "serviceMonitor.basicAuth.username.name=scrape",
            "--set",
            "serviceMonitor.basicAuth.username.key=user",
        ]
        .map(String::from),
    );
    let objs_locked = objects(&render("slurm", &locked));
    for component in ["-exporter", "-autoscaler"] {
        let d = find(&objs_locked, "Deployment", component).expect("Deployment");
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        assert!(
            c["env"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["name"] == "SLURMSCALE_WEB_CONFIG_FILE"
                    && e["value"] == "/etc/slurmscale/web/web.yml"),
            "{component}: no --web-config-file"
        );
        assert_eq!(
            c["readinessProbe"]["httpGet"]["scheme"], "HTTPS",
            "{component}"
        );
        let sm = find(&objs_locked, "ServiceMonitor", component).expect("ServiceMonitor");
        let ep = &sm["spec"]["endpoints"][0];
        assert_eq!(ep["scheme"], "https", "{component}");
        assert_eq!(ep["basicAuth"]["username"]["name"], "scrape", "{component}");
    }
}

#[test]
fn the_autoscaler_alone_serves_the_exporter_metrics_when_asked() {
    let (_, values) = values_sets().remove(0);

    // One poller for both roles: the autoscaler serves the exporter's metrics, no exporter.
    let mut shared = values.clone();
    shared.extend(
        [
            "--set",
            "autoscaler.exporterMetrics=true",
            "--set",
            "exporter.enabled=false",
        ]
        .map(String::from),
    );
    let objs_shared = objects(&render("slurm", &shared));
    assert!(find(&objs_shared, "Deployment", "-exporter").is_none());
    let a = find(&objs_shared, "Deployment", "-autoscaler").expect("autoscaler Deployment");
    let env = a["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap();
    assert!(
        env.iter()
            .any(|e| e["name"] == "SLURMSCALE_EXPORTER_METRICS" && e["value"] == "true"),
        "autoscaler.exporterMetrics does not reach the autoscaler"
    );
}

#[test]
fn the_rbac_grants_least_privilege() {
    let (_, values) = values_sets().remove(0);
    let objs = objects(&render("slurm", &values));

    // The exporter only reads.
    let role = find(&objs, "ClusterRole", "-exporter").expect("exporter ClusterRole");
    for rule in role["rules"].as_array().unwrap() {
        for verb in rule["verbs"].as_array().unwrap() {
            assert!(
                verb == "list" || verb == "watch",
                "exporter may {verb} {}",
                rule["resources"]
            );
        }
    }
    // The autoscaler writes only /scale, its own status, pods (deletion cost) and Events;
    // it never touches Secrets, and its Lease rights stop at its namespace.
    let role = find(&objs, "ClusterRole", "-autoscaler").expect("autoscaler ClusterRole");
    for rule in role["rules"].as_array().unwrap() {
        let resources: Vec<&str> = rule["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap())
            .collect();
        assert!(!resources.contains(&"secrets"), "{rule}");
        let writes = rule["verbs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| !matches!(v.as_str().unwrap(), "get" | "list" | "watch"));
        if writes {
            assert!(
                resources.iter().all(|r| matches!(
                    *r,
                    "nodesets/scale" | "nodesetautoscalers/status" | "pods" | "events"
                )),
                "autoscaler writes {resources:?}"
            );
        }
    }
    let lease = find(&objs, "Role", "-leader-election").expect("leader-election Role");
    assert_eq!(lease["metadata"]["namespace"], "slurm");
    assert_eq!(lease["rules"][0]["resources"][0], "leases");
}

#[test]
fn monitoring_objects_dashboards_and_our_crd_come_along() {
    let (_, values) = values_sets().remove(0);
    let objs = objects(&render("slurm", &values));

    // Monitoring objects: fixed job names (the alerts use them), the alert file, dashboards.
    let sm = find(&objs, "ServiceMonitor", "-exporter").expect("ServiceMonitor");
    assert_eq!(sm["spec"]["jobLabel"], "slurmscale.io/job");
    let svc = find(&objs, "Service", "-exporter").expect("exporter Service");
    assert_eq!(
        svc["metadata"]["labels"]["slurmscale.io/job"],
        "slurmscale-exporter"
    );
    let rule = find(&objs, "PrometheusRule", "slurmscale").expect("PrometheusRule");
    let alerts: Vec<&str> = rule["spec"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .map(|r| r["alert"].as_str().unwrap())
        .collect();
    for a in [
        "SlurmExporterDown",
        "SlurmExporterDataStale",
        "SlurmUnreachable",
        "SlurmscaleAutoscalerFrozen",
        "SlurmscaleScaleErrors",
        "NodeSetBelowDesired",
    ] {
        assert!(alerts.contains(&a), "{a} missing from {alerts:?}");
    }
    let dashboards: Vec<&Value> = objs
        .iter()
        .filter(|o| o["kind"] == "ConfigMap" && o["metadata"]["labels"]["grafana_dashboard"] == "1")
        .collect();
    let on_disk = std::fs::read_dir(repo_root().join("dashboards"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "json")
        })
        .count();
    assert_eq!(dashboards.len(), on_disk, "one ConfigMap per dashboard");
    for cm in dashboards {
        for (_, json) in cm["data"].as_object().unwrap() {
            let d: Value = serde_json::from_str(json.as_str().unwrap()).expect("dashboard JSON");
            assert!(d["uid"].is_string());
        }
    }
    // A CRD of ours comes along.
    assert!(
        find(
            &objs,
            "CustomResourceDefinition",
            "nodesetautoscalers.slurmscale.io"
        )
        .is_some()
    );
}

/// Missing or wrong values fail at install time with a message naming the value.
#[test]
fn bad_values_are_refused_with_a_clear_message() {
    const URL: &str = "slurm.url=http://x:6820";
    const SECRET: &str = "slurm.auth.existingSecret=s";
    for (sets, says) in [
        (vec!["slurm.auth.value=a2V5"], "slurm.url is required"),
        (
            vec![URL],
            "slurm.auth.value or slurm.auth.existingSecret is required",
        ),
        (vec![URL, SECRET, "slurm.apiVersion=v0.0.39"], "apiVersion"),
        (vec![URL, SECRET, "exporter.interval=often"], "interval"),
        (vec![URL, SECRET, "autoscaler.replicaz=2"], "replicaz"),
    ] {
        let mut a = vec!["template", "x", "charts/slurmscale"];
        for set in &sets {
            a.extend(["--set", set]);
        }
        let (ok, _, out) = helm(&a);
        assert!(!ok, "{sets:?} was accepted");
        assert!(out.contains(says), "{sets:?}: expected {says:?} in:\n{out}");
    }
}

async fn apply_official_crd(file: &str, resource: &str) {
    let crd = support::official_crd_path(file);
    let (ok, said) = run_tool("kubectl", &["apply", "-f", crd.to_str().unwrap()]);
    assert!(ok, "installing {file}: {said}");
    let served = wait_until(Duration::from_secs(30), || async {
        run_tool("kubectl", &["get", resource, "-A"]).0
    })
    .await;
    assert!(served, "{resource} not served");
}

/// What helm would install passes the real kube-apiserver's validation (server-side dry run),
/// with the official ServiceMonitor and PrometheusRule CRDs.
#[tokio::test]
async fn the_rendered_chart_passes_a_server_side_dry_run() {
    apply_official_crd(
        "monitoring.coreos.com_servicemonitors.yaml",
        "servicemonitors.monitoring.coreos.com",
    )
    .await;
    apply_official_crd(
        "monitoring.coreos.com_prometheusrules.yaml",
        "prometheusrules.monitoring.coreos.com",
    )
    .await;
    let client = support::kube_client().await;
    let ns = support::namespace(&client, "chart").await;
    for (name, values) in values_sets() {
        let rendered = render(&ns, &values);
        let dir = tempfile::tempdir().unwrap();
        let file: &Path = &dir.path().join("rendered.yaml");
        std::fs::write(file, &rendered).unwrap();
        let (ok, out) = run_tool(
            "kubectl",
            &["apply", "--dry-run=server", "-f", file.to_str().unwrap()],
        );
        assert!(ok, "server-side dry run of the chart with {name}:\n{out}");
        assert!(
            out.contains("deployment.apps/slurmscale-exporter created (server dry run)"),
            "{name}: {out}"
        );
    }
}

/// With default values the chart pulls the image `tests/harness/image.sh` builds and tags:
/// values.yaml's repository, the chart's appVersion as tag, which is the version the binary
/// prints. A tag set in the values wins.
#[test]
fn the_default_image_is_the_one_the_build_script_tags() {
    let built = support::image_name();
    assert_eq!(
        built,
        format!(
            "ghcr.io/slurmscale/slurmscale:{}",
            env!("CARGO_PKG_VERSION")
        ),
        "the image name or the chart's appVersion drifted from the package version"
    );

    let (_, values) = values_sets().remove(0);
    let objs = objects(&render("slurm", &values));
    let deployments: Vec<&Value> = objs.iter().filter(|o| o["kind"] == "Deployment").collect();
    assert_eq!(deployments.len(), 2, "exporter and autoscaler");
    for d in deployments {
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["image"], built.as_str(), "{}", d["metadata"]["name"]);
        assert_eq!(c["imagePullPolicy"], "IfNotPresent");
    }

    let mut tagged = values.clone();
    tagged.extend(["--set", "image.tag=0.0.9-rc1"].map(String::from));
    let objs = objects(&render("slurm", &tagged));
    let d = find(&objs, "Deployment", "-exporter").expect("exporter Deployment");
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "ghcr.io/slurmscale/slurmscale:0.0.9-rc1"
    );
}

/// Every `apiVersion` enum in the chart's values schema (wherever it sits) lists exactly the
/// slurmrestd versions the exporter speaks, plus `auto`: a version added to
/// `slurm::versions` and forgotten in the chart would be refused by `helm install`.
#[test]
fn the_values_schema_offers_every_api_version_the_exporter_speaks() {
    fn enums<'a>(v: &'a Value, out: &mut Vec<&'a Value>) {
        match v {
            Value::Object(m) => {
                if let Some(e) = m.get("apiVersion").and_then(|a| a.get("enum")) {
                    out.push(e);
                }
                m.values().for_each(|x| enums(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| enums(x, out)),
            _ => {}
        }
    }
    let text =
        std::fs::read_to_string(repo_root().join("charts/slurmscale/values.schema.json")).unwrap();
    let schema: Value = serde_json::from_str(&text).unwrap();
    let mut found = Vec::new();
    enums(&schema, &mut found);
    assert!(!found.is_empty(), "the schema constrains apiVersion");
    let mut want: Vec<&str> = slurmscale_exporter::slurm::ApiVersion::ALL
        .iter()
        .map(|v| v.as_str())
        .collect();
    want.push("auto");
    want.sort();
    for e in found {
        let mut got: Vec<&str> = e
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        got.sort();
        assert_eq!(got, want);
    }
}

/// The API versions written out by hand for people — `--api-version`'s help, the flag table
/// in docs/exporter.md, the chart's values.yaml — name exactly the versions the exporter speaks
/// (ranges like `v0.0.40-v0.0.45` spelled out), so none of them goes stale when
/// `slurm::versions` gains one.
#[test]
fn every_hand_written_list_of_api_versions_names_what_the_exporter_speaks() {
    let mut want: Vec<u32> = slurmscale_exporter::slurm::ApiVersion::ALL
        .iter()
        .map(|v| v.as_str()["v0.0.".len()..].parse().unwrap())
        .collect();
    want.sort();
    for (file, marker) in [
        ("src/cli.rs", "REST API version"),
        ("docs/exporter.md", "| `--api-version`"),
        ("charts/slurmscale/values.yaml", "probes the newest version"),
    ] {
        let text = std::fs::read_to_string(repo_root().join(file)).unwrap();
        let line = text
            .lines()
            .find(|l| l.contains(marker))
            .unwrap_or_else(|| panic!("{file}: no line with {marker:?}"));
        // Each `v0.0.NN`, and after a dash every minor up to it.
        let (mut got, mut rest) = (Vec::<u32>::new(), line);
        while let Some(i) = rest.find("v0.0.") {
            let tail = &rest[i + "v0.0.".len()..];
            let digits = tail.chars().take_while(char::is_ascii_digit).count();
            let n: u32 = tail[..digits].parse().unwrap();
            match got.last() {
                Some(&lo) if matches!(rest[..i].trim(), "-" | "–") => got.extend(lo + 1..=n),
                _ => got.push(n),
            }
            rest = &tail[digits..];
        }
        assert_eq!(got, want, "{file}: {line}");
    }
}

/// The exporter and the autoscaler do their work as the chart's own ServiceAccounts, bound
/// by the chart's own RBAC — not as the harness's admin: a permission the chart forgets
/// (the scale subresource, the status, Events, the Lease, a watch) fails here. The chart's
/// RBAC objects are installed for real under a release of this test; each process gets a
/// kubeconfig holding its ServiceAccount's token (TokenRequest, as a projected token in a pod).
#[tokio::test]
async fn the_processes_work_with_the_charts_own_service_accounts_and_rbac() {
    use support::elastic;

    let _turn = elastic::ELASTIC.lock().await;
    let client = support::kube_client().await;
    let ns = support::namespace(&client, "rbac").await;
    let release = support::unique("rbac");
    let (ok, rendered, all) = helm(&[
        "template",
        &release,
        "charts/slurmscale",
        "--namespace",
        &ns,
        "--set",
        "slurm.url=http://slurmrestd:6820",
        "--set",
        "slurm.auth.value=c2VjcmV0LWtleS1ieXRlcw==",
    ]);
    assert!(ok, "helm template: {all}");
    let rbac: Vec<Value> = objects(&rendered)
        .into_iter()
        .filter(|o| {
            [
                "ServiceAccount",
                "ClusterRole",
                "ClusterRoleBinding",
                "Role",
                "RoleBinding",
            ]
            .contains(&o["kind"].as_str().unwrap_or_default())
        })
        .collect();
    assert_eq!(
        rbac.len(),
        8,
        "two ServiceAccounts, ClusterRoles and bindings; a Lease Role and its binding"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rbac.json");
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": rbac});
    std::fs::write(&file, list.to_string()).unwrap();
    let (ok, out) = run_tool("kubectl", &["apply", "-f", file.to_str().unwrap()]);
    assert!(ok, "installing the chart's RBAC: {out}");

    // A kubeconfig per component: the harness's server and CA, the ServiceAccount's token.
    let admin: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(support::kubeconfig_path()).unwrap())
            .unwrap();
    let kubeconfig_of = |component: &str| {
        let sa = rbac
            .iter()
            .find(|o| {
                o["kind"] == "ServiceAccount"
                    && o["metadata"]["name"]
                        .as_str()
                        .is_some_and(|n| n.ends_with(component))
            })
            .and_then(|o| o["metadata"]["name"].as_str())
            .unwrap_or_else(|| panic!("no ServiceAccount for the {component}"))
            .to_string();
        let out = support::tool_output(
            "kubectl",
            &["create", "token", &sa, "-n", &ns, "--duration", "1h"],
        );
        // The token is a secret: never in a message.
        assert!(
            out.status.success(),
            "kubectl create token {sa}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let token = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let mut k = admin.clone();
        k["users"][0]["user"] = serde_json::json!({ "token": token });
        let path = dir.path().join(format!("{component}.kubeconfig"));
        std::fs::write(&path, k.to_string()).unwrap();
        path
    };
    let (exporter_kc, autoscaler_kc) = (kubeconfig_of("exporter"), kubeconfig_of("autoscaler"));

    let cluster = support::SlurmCluster::get("24.11");
    let s = elastic::setup(&cluster, false).await;
    // The Lease lives in the release namespace: the only one its Role covers.
    let a = support::autoscaler_with(&cluster, &cluster.url, &autoscaler_kc, &ns, &[]);
    let e = support::exporter(&cluster, &exporter_kc);
    e.wait_ready(Duration::from_secs(30)).await;
    elastic::sbatch(&cluster, &["-N", "2", "--wrap", "sleep 2"]);
    elastic::eventually(
        "scaled to 2 for the job, as the chart's autoscaler ServiceAccount",
        Duration::from_secs(30),
        &a,
        async || elastic::replicas(&s).await == 2,
    )
    .await;
    elastic::eventually(
        "the NodeSetAutoscaler's status written and a ScaledUp Event",
        Duration::from_secs(15),
        &a,
        async || {
            let status = s
                .autoscalers
                .get("elastic")
                .await
                .ok()
                .and_then(|n| n.status);
            status.is_some_and(|st| st.desired_replicas == Some(2))
                && !elastic::events(&s, "ScaledUp").await.is_empty()
        },
    )
    .await;
    // Every watch of the exporter listed and healthy as its ServiceAccount.
    let watched = wait_until(Duration::from_secs(30), || async {
        let m = e.metrics().await;
        let up = m.all("slurm_exporter_kubernetes_watch_up", &[]);
        up.len() >= 4 && up.iter().all(|v| *v == 1.0)
    })
    .await;
    assert!(
        watched,
        "the exporter's watches as its ServiceAccount:\n{}",
        e.logs()
    );
    elastic::eventually(
        "back to 0 once the job is done",
        Duration::from_secs(60),
        &a,
        async || elastic::replicas(&s).await == 0,
    )
    .await;
    for (who, logs) in [("autoscaler", a.logs()), ("exporter", e.logs())] {
        assert!(
            !logs.contains("Forbidden") && !logs.contains("forbidden"),
            "the {who} was refused something the chart should grant:\n{logs}"
        );
    }
    s.teardown(&cluster).await;
    // Cluster-scoped objects outlive the namespace: remove this release's.
    let (ok, out) = run_tool(
        "kubectl",
        &["delete", "-f", file.to_str().unwrap(), "--ignore-not-found"],
    );
    assert!(ok, "{out}");
}
