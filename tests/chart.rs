//! The Helm chart, checked with real tools: `helm lint` and `helm template` (a real helm),
//! the rendered manifests through `kubernetes-validate --strict` (Kubernetes 1.33 schemas)
//! and through a server-side dry run on the harness's kube-apiserver with the official
//! Prometheus Operator CRDs. Also what the rendered objects promise: least privilege,
//! non-root, read-only root filesystem, probes, a leader-elected autoscaler kept through node
//! drains, objects where the release (or namespaceOverride) puts them, monitoring objects a
//! kube-prometheus-stack picks up, alerts with runbooks, and a README listing every value.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use support::{repo_root, run_tool, wait_until};

/// Helm with its home, cache and config in a throwaway directory: (success, stdout,
/// stdout + stderr). Helm logs to stderr (e.g. that the dashboards are a symlink).
fn helm(args: &[&str]) -> (bool, String, String) {
    let out = support::helm_output(args, false);
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
                    !(matches!(n, "SLURM_JWT" | "SLURMSCALE_JWT")
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

/// `exporter.slurmUser`: the exporter reads as its own Slurm user while the autoscaler keeps
/// `slurm.user` — signing for it with the same key (jwtKey), or from a second Token that
/// slurm-operator keeps for it (slinkyToken); a given token (mode token) cannot, and says so.
#[test]
fn the_exporter_reads_as_its_own_slurm_user_when_given_one() {
    let (_, values) = values_sets().remove(0);
    let env = |d: &Value, name: &str| -> Option<String> {
        (d["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array()?
            .iter())
        .find(|e| e["name"] == name)
        .and_then(|e| e["value"].as_str().map(str::to_string))
    };
    let secret = |d: &Value| -> Option<String> {
        (d["spec"]["template"]["spec"]["volumes"].as_array()?.iter())
            .find(|v| v["name"] == "slurm-auth")
            .and_then(|v| v["secret"]["secretName"].as_str().map(str::to_string))
    };
    let with = |extra: &[&str]| {
        let mut v = values.clone();
        v.extend(extra.iter().map(|s| s.to_string()));
        objects(&render("slurm", &v))
    };

    let objs = with(&["--set", "exporter.slurmUser=reader"]);
    let (e, a) = (
        find(&objs, "Deployment", "-exporter").unwrap(),
        find(&objs, "Deployment", "-autoscaler").unwrap(),
    );
    assert_eq!(env(e, "SLURM_USER").as_deref(), Some("reader"));
    assert_eq!(env(a, "SLURM_USER").as_deref(), Some("slurm"));
    assert!(
        env(e, "SLURM_JWT_KEY_FILE").is_some(),
        "the exporter signs its own tokens"
    );
    assert_eq!(secret(e), secret(a), "with the same key");

    let objs = with(&[
        "--set",
        "slurm.auth.mode=slinkyToken",
        "--set",
        "exporter.slurmUser=reader",
    ]);
    let tokens: Vec<(&str, &str)> = (objs.iter())
        .filter(|o| o["kind"] == "Token")
        .map(|t| {
            (
                t["metadata"]["name"].as_str().unwrap(),
                t["spec"]["username"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        tokens,
        [("slurmscale", "slurm"), ("slurmscale-exporter", "reader")],
        "a Token per user"
    );
    let (e, a) = (
        find(&objs, "Deployment", "-exporter").unwrap(),
        find(&objs, "Deployment", "-autoscaler").unwrap(),
    );
    assert_eq!(secret(e).as_deref(), Some("slurmscale-exporter-jwt-reader"));
    assert_eq!(secret(a).as_deref(), Some("slurmscale-jwt-slurm"));
    assert_eq!(env(e, "SLURM_USER").as_deref(), Some("reader"));

    let mut token = values.clone();
    token.extend(
        [
            "--set",
            "slurm.auth.mode=token",
            "--set",
            "exporter.slurmUser=reader",
        ]
        .map(String::from),
    );
    let mut args = vec!["template", "slurmscale", "charts/slurmscale"];
    args.extend(token.iter().map(String::as_str));
    let (ok, _, all) = helm(&args);
    assert!(
        !ok && all.contains("a token given in mode token is one user's"),
        "{all}"
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
                    "nodesets/scale"
                        | "nodesetautoscalers/status"
                        | "pods"
                        | "events"
                        | "nodes"
                        | "pods/eviction"
                )),
                "autoscaler writes {resources:?}"
            );
        }
    }
    // Nodes and evictions only for shares, when the value asks for them.
    let reclaims = |objs: &[Value]| {
        let role = find(objs, "ClusterRole", "-autoscaler").expect("autoscaler ClusterRole");
        let rules = role["rules"].as_array().unwrap().clone();
        rules
            .into_iter()
            .filter(|r| {
                r["verbs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|v| v == "patch" || v == "create")
            })
            .flat_map(|r| r["resources"].as_array().unwrap().clone())
            .filter(|r| r == "nodes" || r == "pods/eviction")
            .count()
    };
    assert_eq!(reclaims(&objs), 0, "no node patch or eviction by default");
    let mut reclaiming = values.clone();
    reclaiming.extend(["--set".into(), "autoscaler.reclaimNodes=true".into()]);
    assert_eq!(reclaims(&objects(&render("slurm", &reclaiming))), 2);
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
        "SlurmMetricsAbsent",
        "SlurmExporterDataStale",
        "SlurmUnreachable",
        "SlurmNodesDownOrDrained",
        "SlurmPartitionNotUp",
        "SlurmJobPendingTooLong",
        "SlurmDbdQueueGrowing",
        "SlurmscaleAutoscalerAbsent",
        "SlurmscaleAutoscalerFrozen",
        "SlurmscaleScaleErrors",
        "SlurmscaleColocationBelowShare",
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

/// A file of the repository, as text.
fn read(path: &str) -> String {
    std::fs::read_to_string(repo_root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `values` with `--set` of each of `sets` after them.
fn with(values: &[String], sets: &[&str]) -> Vec<String> {
    let mut out = values.to_vec();
    for s in sets {
        out.extend(["--set".to_string(), s.to_string()]);
    }
    out
}

/// Two replicas are kept through node drains: a PodDisruptionBudget of one, and the
/// replicas spread over nodes. One replica has nothing to keep, so no budget (it would
/// block every drain of its node).
#[test]
fn the_autoscaler_keeps_a_replica_through_drains_only_when_it_has_two() {
    let (_, values) = values_sets().remove(0);
    let objs = objects(&render("slurm", &values));
    let d = find(&objs, "Deployment", "-autoscaler").expect("autoscaler Deployment");
    let selector = &d["spec"]["selector"]["matchLabels"];
    let pdb = find(&objs, "PodDisruptionBudget", "-autoscaler").expect("a budget with 2 replicas");
    assert_eq!(pdb["metadata"]["namespace"], "slurm");
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    assert_eq!(&pdb["spec"]["selector"]["matchLabels"], selector);
    // The default spread: one replica per node where it can be, never unschedulable for it.
    let spread = &d["spec"]["template"]["spec"]["topologySpreadConstraints"][0];
    assert_eq!(spread["topologyKey"], "kubernetes.io/hostname");
    assert_eq!(spread["whenUnsatisfiable"], "ScheduleAnyway");
    assert_eq!(&spread["labelSelector"]["matchLabels"], selector);

    for (sets, what) in [
        (["autoscaler.replicas=1"], "one replica"),
        (
            ["autoscaler.podDisruptionBudget.enabled=false"],
            "switched off",
        ),
    ] {
        let objs = objects(&render("slurm", &with(&values, &sets)));
        assert!(
            find(&objs, "PodDisruptionBudget", "").is_none(),
            "a PodDisruptionBudget with {what}"
        );
    }
}

/// A PodMonitor per component instead of the ServiceMonitors, with the same job names (the
/// pods carry the label the Services do) and the same scrape options; both at once is refused.
#[test]
fn a_pod_monitor_replaces_the_service_monitors_with_the_same_jobs_and_options() {
    let (_, values) = values_sets().remove(0);
    for kind in ["ServiceMonitor", "PodMonitor"] {
        let key = if kind == "ServiceMonitor" {
            "serviceMonitor"
        } else {
            "podMonitor"
        };
        let sets = [
            "serviceMonitor.enabled=false".to_string(),
            format!("{key}.enabled=true"),
            format!("{key}.scrapeTimeout=20s"),
            format!("{key}.labels.release=prometheus"),
            format!("{key}.relabelings[0].targetLabel=site"),
            format!("{key}.relabelings[0].replacement=hpc"),
            format!("{key}.metricRelabelings[0].action=drop"),
            format!("{key}.metricRelabelings[0].regex=slurm_node_gres.*"),
            format!("{key}.metricRelabelings[0].sourceLabels[0]=__name__"),
        ];
        let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
        let objs = objects(&render("slurm", &with(&values, &sets)));
        let other = if kind == "ServiceMonitor" {
            "PodMonitor"
        } else {
            "ServiceMonitor"
        };
        assert!(
            objs.iter().all(|o| o["kind"] != other),
            "{kind}: a {other} too"
        );
        for component in ["exporter", "autoscaler"] {
            let what = format!("{kind} of the {component}");
            let m = find(&objs, kind, &format!("-{component}")).unwrap_or_else(|| panic!("{what}"));
            assert_eq!(m["metadata"]["labels"]["release"], "prometheus", "{what}");
            assert_eq!(m["spec"]["jobLabel"], "slurmscale.io/job", "{what}");
            assert_eq!(m["spec"]["namespaceSelector"]["matchNames"][0], "slurm");
            let endpoints = if kind == "ServiceMonitor" {
                "endpoints"
            } else {
                "podMetricsEndpoints"
            };
            let ep = &m["spec"][endpoints][0];
            assert_eq!(ep["port"], "metrics", "{what}");
            assert_eq!(ep["scrapeTimeout"], "20s", "{what}");
            assert_eq!(ep["relabelings"][0]["targetLabel"], "site", "{what}");
            assert_eq!(ep["metricRelabelings"][0]["action"], "drop", "{what}");
            assert_eq!(
                ep["metricRelabelings"][0]["sourceLabels"][0], "__name__",
                "{what}"
            );
            // What the monitor selects carries the job label it names.
            let job = format!("slurmscale-{component}");
            let (selected, labels) = if kind == "ServiceMonitor" {
                let svc = find(&objs, "Service", &format!("-{component}")).expect("Service");
                (svc, &svc["metadata"]["labels"])
            } else {
                let d = find(&objs, "Deployment", &format!("-{component}")).expect("Deployment");
                (d, &d["spec"]["template"]["metadata"]["labels"])
            };
            assert_eq!(labels["slurmscale.io/job"], job.as_str(), "{what}");
            for (k, v) in m["spec"]["selector"]["matchLabels"].as_object().unwrap() {
                assert_eq!(
                    &labels[k], v,
                    "{what} does not select {}",
                    selected["metadata"]["name"]
                );
            }
        }
    }
}

/// The values file of the README's "Install beside Slinky" says what the quick-start file
/// says, key for key, so the tests below cover the front door too.
#[test]
fn the_readme_s_values_are_the_quick_start_s() {
    fn agree(path: &str, readme: &Value, file: &Value) {
        match readme.as_object() {
            Some(keys) => {
                for (k, v) in keys {
                    agree(&format!("{path}.{k}"), v, &file[k]);
                }
            }
            None => assert_eq!(readme, file, "README.md's values.yaml at {path}"),
        }
    }
    let readme = support::readme_yaml("values.yaml");
    let file: Value =
        serde_saphyr::from_str(&read("examples/helm/slinky-quickstart.yaml")).unwrap();
    assert!(readme.as_object().is_some_and(|o| o.len() >= 4), "{readme}");
    agree("", &readme, &file);
}

/// examples/helm/slinky-quickstart.yaml against a kube-prometheus-stack installed with its
/// defaults as release `prometheus`: its Prometheus selects ServiceMonitors and rules by
/// `release: prometheus`, its Grafana sidecar ConfigMaps by `grafana_dashboard: "1"`.
#[test]
fn the_quick_start_is_picked_up_by_a_default_kube_prometheus_stack() {
    let file = repo_root().join("examples/helm/slinky-quickstart.yaml");
    let values = ["-f".to_string(), file.to_string_lossy().into_owned()];
    let objs = objects(&render("slurm", &values));
    let monitoring: Vec<&Value> = objs
        .iter()
        .filter(|o| {
            matches!(
                o["kind"].as_str(),
                Some("ServiceMonitor" | "PodMonitor" | "PrometheusRule")
            )
        })
        .collect();
    let kinds: Vec<&str> = monitoring
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == "ServiceMonitor").count(),
        2,
        "{kinds:?}"
    );
    assert_eq!(
        kinds.iter().filter(|k| **k == "PrometheusRule").count(),
        1,
        "{kinds:?}"
    );
    for o in monitoring {
        assert_eq!(
            o["metadata"]["labels"]["release"], "prometheus",
            "{} {}",
            o["kind"], o["metadata"]["name"]
        );
    }
    let dashboards = objs
        .iter()
        .filter(|o| o["kind"] == "ConfigMap" && o["metadata"]["labels"]["grafana_dashboard"] == "1")
        .count();
    assert_eq!(
        dashboards, 4,
        "one ConfigMap per dashboard, labelled for the sidecar"
    );
    // Slinky's slurmrestd, and a Token slurm-operator signs with Slinky's JWT key: the pods
    // mount the Secret it keeps the token in, never the key.
    let d = find(&objs, "Deployment", "-exporter").expect("exporter Deployment");
    let pod = &d["spec"]["template"]["spec"];
    let env = pod["containers"][0]["env"].as_array().unwrap();
    assert!(
        env.iter()
            .any(|e| e["name"] == "SLURM_REST_URL"
                && e["value"] == "http://slurm-restapi.slurm:6820")
    );
    assert!(
        env.iter().any(|e| e["name"] == "SLURMSCALE_JWT_FILE"
            && e["value"] == "/var/run/secrets/slurm/SLURM_JWT"),
        "{env:?}"
    );
    let token = objs
        .iter()
        .find(|o| o["kind"] == "Token")
        .expect("a Token for slurm-operator");
    // Slinky 1.1's key Secret, under both of the key's fields (1.0's CRD requires
    // jwtHs256KeyRef, 1.1 reads jwtKeyRef).
    for field in ["jwtKeyRef", "jwtHs256KeyRef"] {
        let key = &token["spec"][field];
        assert_eq!(
            (&key["name"], &key["key"]),
            (&json!("slurm-auth-jwt"), &json!("jwt.key"))
        );
    }
    assert_eq!(token["spec"]["username"], "slurm");
    // The Secret the operator writes holds one key, SLURM_JWT: that is the item mounted, at
    // the path the pods read (a kubelet refuses a Secret volume whose item is missing).
    let mounted = format!("{}-jwt-slurm", token["metadata"]["name"].as_str().unwrap());
    let volumes = pod["volumes"].as_array().unwrap();
    let auth = volumes
        .iter()
        .find(|v| v["secret"]["secretName"] == mounted.as_str())
        .unwrap_or_else(|| panic!("no volume of Secret {mounted}: {volumes:?}"));
    assert_eq!(
        auth["secret"]["items"],
        json!([{"key": "SLURM_JWT", "path": "SLURM_JWT"}]),
        "{auth:?}"
    );
    assert!(
        !volumes
            .iter()
            .any(|v| v["secret"]["secretName"] == "slurm-auth-jwt"),
        "the pods mount the key: {volumes:?}"
    );
}

/// GitHub's anchor of a Markdown heading: lower case, spaces to dashes, other punctuation
/// dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Every alert of files/alerts.yaml links its runbook: `runbook_url` is docs/runbooks.md
/// (the chart's default prometheusRule.runbookUrl), `#`, the alert's name in lower case, and
/// docs/runbooks.md has that section. The chart points them at another base when asked, and
/// leaves out the alerts named in prometheusRule.disabled.
#[test]
fn every_alert_links_its_section_of_the_runbooks() {
    let values: Value = serde_saphyr::from_str(&read("charts/slurmscale/values.yaml")).unwrap();
    let base = values["prometheusRule"]["runbookUrl"]
        .as_str()
        .expect("prometheusRule.runbookUrl");
    assert!(
        base.ends_with("/docs/runbooks.md"),
        "the default runbookUrl is docs/runbooks.md: {base}"
    );
    let sections: Vec<String> = read("docs/runbooks.md")
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(anchor)
        .collect();
    let rules: Value =
        serde_saphyr::from_str(&read("charts/slurmscale/files/alerts.yaml")).unwrap();
    let mut alerts = Vec::new();
    for g in rules["groups"].as_array().unwrap() {
        for r in g["rules"].as_array().unwrap() {
            let alert = r["alert"].as_str().expect("alert rules only");
            let url = r["annotations"]["runbook_url"]
                .as_str()
                .unwrap_or_else(|| panic!("{alert}: no runbook_url"));
            let lower = alert.to_lowercase();
            assert_eq!(url, format!("{base}#{lower}"), "{alert}");
            assert!(
                sections.contains(&lower),
                "{alert}: docs/runbooks.md has no section #{lower} (sections: {sections:?})"
            );
            alerts.push(alert.to_string());
        }
    }
    assert_eq!(
        sections.len(),
        alerts.len(),
        "one section per alert: {sections:?} for {alerts:?}"
    );
    // docs/operations.md's table says when each fires: every alert, and no other.
    let listed: Vec<String> = read("docs/operations.md")
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once("` |").map(|(name, _)| name.to_string()))
        .filter(|name| name.starts_with(|c: char| c.is_ascii_uppercase()))
        .collect();
    assert_eq!(
        listed.iter().collect::<std::collections::BTreeSet<_>>(),
        alerts.iter().collect::<std::collections::BTreeSet<_>>(),
        "docs/operations.md's alert table"
    );

    let (_, values) = values_sets().remove(0);
    let sets = [
        "prometheusRule.runbookUrl=https://wiki.example.org/slurm/runbooks",
        "prometheusRule.disabled={SlurmPartitionNotUp,SlurmJobPendingTooLong}",
    ];
    let objs = objects(&render("slurm", &with(&values, &sets)));
    let rule = find(&objs, "PrometheusRule", "slurmscale").expect("PrometheusRule");
    let rendered: Vec<&Value> = rule["spec"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .collect();
    assert_eq!(rendered.len(), alerts.len() - 2, "two alerts left out");
    for r in rendered {
        let alert = r["alert"].as_str().unwrap();
        assert!(!["SlurmPartitionNotUp", "SlurmJobPendingTooLong"].contains(&alert));
        assert_eq!(
            r["annotations"]["runbook_url"],
            format!(
                "https://wiki.example.org/slurm/runbooks#{}",
                alert.to_lowercase()
            )
            .as_str()
        );
    }
}

/// A release without the autoscaler does not alert on its absence (its series are absent by
/// design); one without anything serving Slurm's metrics does not alert on theirs.
#[test]
fn absent_series_alerts_follow_the_components_the_release_runs() {
    let (_, values) = values_sets().remove(0);
    let alerts_with = |sets: &[&str]| -> Vec<String> {
        let objs = objects(&render("slurm", &with(&values, sets)));
        let rule = find(&objs, "PrometheusRule", "slurmscale").expect("PrometheusRule");
        rule["spec"]["groups"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["rules"].as_array().unwrap())
            .map(|r| r["alert"].as_str().unwrap().to_string())
            .collect()
    };
    let all = alerts_with(&[]);
    assert!(all.iter().any(|a| a == "SlurmMetricsAbsent"));
    assert!(all.iter().any(|a| a == "SlurmscaleAutoscalerAbsent"));
    let exporter_only = alerts_with(&["autoscaler.enabled=false"]);
    assert!(exporter_only.iter().any(|a| a == "SlurmMetricsAbsent"));
    assert!(
        !exporter_only
            .iter()
            .any(|a| a == "SlurmscaleAutoscalerAbsent")
    );
    let shared = alerts_with(&["exporter.enabled=false", "autoscaler.exporterMetrics=true"]);
    assert!(shared.iter().any(|a| a == "SlurmMetricsAbsent"));
    let nothing = alerts_with(&["exporter.enabled=false"]);
    assert!(!nothing.iter().any(|a| a == "SlurmMetricsAbsent"));
}

/// Every namespaced object goes to the release namespace, or to namespaceOverride; the
/// bindings name the ServiceAccounts there and the monitors look there. Cluster-scoped
/// objects have none. The only exception: the pod Roles of autoscaler.podNamespaces, in the
/// namespaces they cover.
#[test]
fn every_object_goes_to_the_release_namespace_or_the_override() {
    let mut sets = values_sets();
    let (_, defaults) = sets[0].clone();
    sets.push((
        "namespaceOverride".into(),
        with(
            &defaults,
            &[
                "namespaceOverride=elsewhere",
                "autoscaler.podNamespaces={hpc}",
            ],
        ),
    ));
    sets.push((
        "podMonitor".into(),
        with(
            &defaults,
            &[
                "namespaceOverride=elsewhere",
                "serviceMonitor.enabled=false",
                "podMonitor.enabled=true",
            ],
        ),
    ));
    for (name, values) in sets {
        let want = if values.iter().any(|v| v == "namespaceOverride=elsewhere") {
            "elsewhere"
        } else {
            "slurm"
        };
        for o in objects(&render("slurm", &values)) {
            let kind = o["kind"].as_str().unwrap();
            let obj = format!("{name}: {kind} {}", o["metadata"]["name"]);
            let namespace = &o["metadata"]["namespace"];
            if matches!(
                kind,
                "ClusterRole" | "ClusterRoleBinding" | "CustomResourceDefinition"
            ) {
                assert!(namespace.is_null(), "{obj} has a namespace");
            } else if matches!(kind, "Role" | "RoleBinding")
                && o["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.ends_with("-autoscaler-pods"))
            {
                assert_eq!(namespace, "hpc", "{obj}");
            } else {
                assert_eq!(namespace, want, "{obj}");
            }
            for subject in o["subjects"].as_array().into_iter().flatten() {
                assert_eq!(subject["namespace"], want, "{obj}");
            }
            if let Some(names) = o["spec"]["namespaceSelector"]["matchNames"].as_array() {
                assert_eq!(names, &[Value::from(want)], "{obj}");
            }
        }
    }
}

/// autoscaler.podNamespaces moves the pod patch from the ClusterRole to a Role in each
/// namespace listed; listing pods stays cluster-wide (a colocated pool looks for
/// unschedulable pods in every namespace).
#[test]
fn pod_patches_can_be_limited_to_the_namespaces_of_the_autoscalers() {
    let (_, values) = values_sets().remove(0);
    let pod_verbs = |role: &Value| -> Vec<String> {
        role["rules"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| {
                r["resources"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|x| x == "pods")
            })
            .flat_map(|r| r["verbs"].as_array().unwrap().iter())
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    };
    let objs = objects(&render("slurm", &values));
    let role = find(&objs, "ClusterRole", "-autoscaler").expect("autoscaler ClusterRole");
    assert_eq!(pod_verbs(role), ["list", "patch"]);
    assert!(find(&objs, "Role", "-autoscaler-pods").is_none());

    let objs = objects(&render(
        "slurm",
        &with(&values, &["autoscaler.podNamespaces={slurm,hpc}"]),
    ));
    let role = find(&objs, "ClusterRole", "-autoscaler").expect("autoscaler ClusterRole");
    assert_eq!(pod_verbs(role), ["list"], "patch left in the ClusterRole");
    for ns in ["slurm", "hpc"] {
        let in_ns = |kind: &str| {
            objs.iter()
                .find(|o| {
                    o["kind"] == kind
                        && o["metadata"]["namespace"] == ns
                        && o["metadata"]["name"]
                            .as_str()
                            .is_some_and(|n| n.ends_with("-autoscaler-pods"))
                })
                .unwrap_or_else(|| panic!("no pod {kind} in {ns}"))
        };
        let role = in_ns("Role");
        assert_eq!(pod_verbs(role), ["list", "patch"], "{ns}");
        let binding = in_ns("RoleBinding");
        assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
        assert_eq!(binding["subjects"][0]["namespace"], "slurm");
        assert!(
            binding["subjects"][0]["name"]
                .as_str()
                .is_some_and(|n| n.ends_with("-autoscaler")),
            "{binding}"
        );
    }
}

/// nameOverride, fullnameOverride and the PriorityClass (a component's own over the
/// top-level one) reach the objects and pods.
#[test]
fn names_and_priority_classes_follow_the_values() {
    let (_, values) = values_sets().remove(0);
    let objs = objects(&render(
        "slurm",
        &with(
            &values,
            &[
                "fullnameOverride=hpc",
                "nameOverride=batch-scaler",
                "priorityClassName=high",
                "autoscaler.priorityClassName=system-cluster-critical",
                "exporter.podLabels.team=hpc",
            ],
        ),
    ));
    for (component, class) in [
        ("exporter", "high"),
        ("autoscaler", "system-cluster-critical"),
    ] {
        let d = find(&objs, "Deployment", &format!("hpc-{component}"))
            .unwrap_or_else(|| panic!("Deployment hpc-{component}"));
        assert_eq!(d["metadata"]["name"], format!("hpc-{component}").as_str());
        assert_eq!(
            d["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"],
            "batch-scaler"
        );
        assert_eq!(
            d["spec"]["template"]["spec"]["priorityClassName"], class,
            "{component}"
        );
    }
    let d = find(&objs, "Deployment", "hpc-exporter").unwrap();
    assert_eq!(d["spec"]["template"]["metadata"]["labels"]["team"], "hpc");
    assert!(
        d["spec"]["selector"]["matchLabels"]["team"].is_null(),
        "podLabels stay out of the selector"
    );
}

/// A site that makes its own ServiceAccounts (`serviceAccount.create=false`) names them: the
/// chart makes none, each Deployment runs as its component's, and every binding of the
/// chart's RBAC binds it — not a `<fullname>-<component>` account nobody made.
#[test]
fn service_accounts_made_elsewhere_are_run_as_and_bound() {
    let (_, values) = values_sets().remove(0);
    let sets = [
        "serviceAccount.create=false",
        "serviceAccount.names.exporter=site-exporter",
        "serviceAccount.names.autoscaler=site-autoscaler",
    ];
    let objs = objects(&render("slurm", &with(&values, &sets)));
    assert!(objs.iter().all(|o| o["kind"] != "ServiceAccount"));
    for component in ["exporter", "autoscaler"] {
        let d = find(&objs, "Deployment", &format!("-{component}")).unwrap();
        assert_eq!(
            d["spec"]["template"]["spec"]["serviceAccountName"],
            format!("site-{component}").as_str()
        );
    }
    let bound: Vec<&str> = objs
        .iter()
        .filter(|o| o["kind"] == "ClusterRoleBinding" || o["kind"] == "RoleBinding")
        .flat_map(|b| b["subjects"].as_array().into_iter().flatten())
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert!(
        bound.len() >= 3 && bound.iter().all(|n| n.starts_with("site-")),
        "{bound:?}"
    );
    // Created by the chart, the ServiceAccounts take the names given too.
    let objs = objects(&render(
        "slurm",
        &with(&values, &["serviceAccount.names.exporter=site-exporter"]),
    ));
    let accounts: Vec<&str> = objs
        .iter()
        .filter(|o| o["kind"] == "ServiceAccount")
        .filter_map(|o| o["metadata"]["name"].as_str())
        .collect();
    assert_eq!(accounts, ["site-exporter", "slurmscale-autoscaler"]);
}

/// A site's own volumes reach both components' pods and containers, and its own objects are
/// installed with the release, each rendered as a template.
#[test]
fn extra_volumes_mounts_and_objects_are_added() {
    let (_, mut values) = values_sets().remove(0);
    let file = std::env::temp_dir().join(format!("slurmscale-extra-{}.yaml", std::process::id()));
    let extra = r#"
extraVolumes:
  - name: clusters
    configMap: {name: "{{ .Release.Name }}-clusters"}
extraVolumeMounts:
  - {name: clusters, mountPath: /etc/slurmscale/clusters, readOnly: true}
extraObjects:
  - apiVersion: v1
    kind: ConfigMap
    metadata: {name: "{{ .Release.Name }}-clusters"}
    data: {clusters.yaml: x}
"#;
    std::fs::write(&file, extra).unwrap();
    values.extend(["-f".to_string(), file.to_string_lossy().into_owned()]);
    let objs = objects(&render("slurm", &values));
    let _ = std::fs::remove_file(&file);
    for component in ["exporter", "autoscaler"] {
        let pod = &find(&objs, "Deployment", &format!("-{component}")).unwrap()["spec"]["template"]
            ["spec"];
        let volume = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == "clusters");
        assert_eq!(
            volume.unwrap()["configMap"]["name"],
            "slurmscale-clusters",
            "{component}"
        );
        let mounts = pod["containers"][0]["volumeMounts"].as_array().unwrap();
        assert!(
            mounts
                .iter()
                .any(|m| m["name"] == "clusters" && m["mountPath"] == "/etc/slurmscale/clusters"),
            "{component}: {mounts:?}"
        );
    }
    let config = find(&objs, "ConfigMap", "slurmscale-clusters").expect("the extra object");
    assert_eq!(config["data"]["clusters.yaml"], "x");
}

/// The values table of charts/slurmscale/README.md has one row per leaf key of values.yaml
/// (a key whose default is not a non-empty map: scalars, lists, and maps empty by default),
/// each with a type, a default and a description; `python3 charts/values-table.py --write`
/// regenerates it.
#[test]
fn the_chart_readme_lists_every_value() {
    fn leaves(v: &Value, path: &str, out: &mut Vec<String>) {
        match v {
            Value::Object(m) if !m.is_empty() => {
                for (k, x) in m {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    leaves(x, &p, out);
                }
            }
            _ => out.push(path.to_string()),
        }
    }
    let values: Value = serde_saphyr::from_str(&read("charts/slurmscale/values.yaml")).unwrap();
    let mut want = Vec::new();
    leaves(&values, "", &mut want);
    want.sort();

    let readme = read("charts/slurmscale/README.md");
    let start = readme
        .find("<!-- values-table")
        .expect("README: the values table's start marker");
    let end = readme
        .find("<!-- end of values-table -->")
        .expect("README: the values table's end marker");
    let mut got = Vec::new();
    for row in readme[start..end].lines().filter(|l| l.starts_with("| `")) {
        let key = row["| `".len()..].split('`').next().unwrap();
        let cells: Vec<&str> = row.split(" | ").collect();
        assert!(cells.len() >= 4, "README: {row}");
        assert!(
            !cells[1].trim().is_empty()
                && !cells
                    .last()
                    .unwrap()
                    .trim_end_matches('|')
                    .trim()
                    .is_empty(),
            "README: {key} has no type or description: {row}"
        );
        got.push(key.to_string());
    }
    let rows = got.len();
    got.sort();
    got.dedup();
    assert_eq!(got.len(), rows, "README: a key listed twice");
    let missing: Vec<&String> = want.iter().filter(|k| !got.contains(*k)).collect();
    let extra: Vec<&String> = got.iter().filter(|k| !want.contains(*k)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "charts/slurmscale/README.md's values table is stale (python3 charts/values-table.py --write): missing {missing:?}, not in values.yaml {extra:?}"
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
        (
            vec![URL, SECRET, "podMonitor.scrapeTimout=5s"],
            "scrapeTimout",
        ),
        (
            vec![
                URL,
                SECRET,
                "serviceMonitor.enabled=true",
                "podMonitor.enabled=true",
            ],
            "enable one of them",
        ),
        (
            vec![
                URL,
                SECRET,
                "prometheusRule.enabled=true",
                "prometheusRule.disabled={SlurmNodesDown}",
            ],
            "SlurmNodesDown, which is not an alert of this chart",
        ),
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
    // The quick start asks slurm-operator for a Token.
    apply_official_crd("slinky.slurm.net_tokens.yaml", "tokens.slinky.slurm.net").await;
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
    // The autoscaler too: its start is not what the scale-up's deadline below is for.
    a.wait_ready(Duration::from_secs(30)).await;
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
        Duration::from_secs(30),
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
    // Every watch of the exporter listed and healthy as its ServiceAccount. Generous on
    // purpose: the listing's speed is `cargo bench -p slurmscale-exporter --bench kube`'s.
    let watched = wait_until(Duration::from_secs(60), || async {
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

/// `image.digest` pins every container of the release, the `helm test` pod's included, by
/// content; and that pod checks what the release runs: each component's Service and the
/// autoscaler's Lease, as the account that may read it, over https when the web config says.
#[test]
fn the_image_pins_by_digest_and_helm_test_checks_both_components_and_the_lease() {
    let (_, mut values) = values_sets().remove(0);
    let digest = format!("sha256:{}", "ab".repeat(32));
    values.extend(["--set".into(), format!("image.digest={digest}")]);
    let objs = objects(&render("slurm", &values));
    let check = find(&objs, "Pod", "-check").expect("the helm test pod");
    assert_eq!(check["metadata"]["annotations"]["helm.sh/hook"], "test");
    let images: Vec<&Value> = objs
        .iter()
        .filter(|o| o["kind"] == "Deployment")
        .map(|d| &d["spec"]["template"]["spec"]["containers"][0]["image"])
        .chain([&check["spec"]["containers"][0]["image"]])
        .collect();
    assert_eq!(images.len(), 3);
    for image in images {
        assert_eq!(
            image.as_str(),
            Some(format!("ghcr.io/slurmscale/slurmscale@{digest}").as_str())
        );
    }
    let ns = check["metadata"]["namespace"].as_str().unwrap();
    let args: Vec<&str> = check["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        args,
        [
            "check".to_string(),
            format!("--metrics=http://slurmscale-exporter.{ns}.svc:9341/metrics"),
            format!("--metrics=http://slurmscale-autoscaler.{ns}.svc:9342/metrics"),
            format!("--lease={ns}/slurmscale-autoscaler"),
        ]
    );
    assert_eq!(check["spec"]["serviceAccountName"], "slurmscale-autoscaler");
}

/// `slurm.clusters`: one release reads several Slurm clusters. The chart renders the CLI's
/// clusters.yaml into a ConfigMap, both components read it where it is mounted, and no
/// single-cluster Secret or variable is left; the file rendered is one the binary takes:
/// an exporter run on it reads the real 22.05 and 24.11 at once.
#[tokio::test]
async fn several_clusters_from_one_release_are_read_from_the_rendered_file() {
    let old = support::SlurmCluster::get("22.05");
    let new = support::SlurmCluster::get("24.11");
    let file =
        std::env::temp_dir().join(format!("slurmscale-clusters-{}.yaml", std::process::id()));
    let entry = |c: &support::SlurmCluster| {
        serde_json::json!({"name": c.name, "url": c.url, "user": c.user,
                           "jwtKeyFile": c.key_file.to_string_lossy()})
    };
    let values = serde_json::json!({"slurm": {"clusters": [entry(&old), entry(&new)]}});
    std::fs::write(&file, values.to_string()).unwrap();
    let objs = objects(&render(
        "slurm",
        &["-f".to_string(), file.to_string_lossy().into_owned()],
    ));
    let _ = std::fs::remove_file(&file);
    assert!(
        find(&objs, "Secret", "").is_none(),
        "a Secret for one cluster"
    );
    let config = find(&objs, "ConfigMap", "-clusters").expect("the clusters ConfigMap");
    let rendered = config["data"]["clusters.yaml"]
        .as_str()
        .unwrap()
        .to_string();
    for component in ["exporter", "autoscaler"] {
        let pod = &find(&objs, "Deployment", &format!("-{component}")).unwrap()["spec"]["template"]
            ["spec"];
        let env = pod["containers"][0]["env"].as_array().unwrap();
        let var = |k: &str| {
            env.iter()
                .find(|e| e["name"] == k)
                .map(|e| e["value"].clone())
        };
        assert_eq!(
            var("SLURMSCALE_CONFIG"),
            Some("/etc/slurmscale/clusters/clusters.yaml".into())
        );
        assert_eq!(var("SLURM_REST_URL"), None, "{component}");
        let mounts = pod["containers"][0]["volumeMounts"].as_array().unwrap();
        let mount = mounts
            .iter()
            .find(|m| m["mountPath"] == "/etc/slurmscale/clusters");
        let volume = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| Some(&v["name"]) == mount.map(|m| &m["name"]));
        assert_eq!(
            volume.map(|v| &v["configMap"]["name"]),
            Some(&config["metadata"]["name"]),
            "{component}: {mounts:?}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("clusters.yaml");
    std::fs::write(&path, &rendered).unwrap();
    let e = support::Process::start(
        &[
            "exporter",
            "--no-kubernetes",
            "--interval",
            "1s",
            "--config",
        ]
        .into_iter()
        .chain([path.to_str().unwrap()])
        .collect::<Vec<_>>(),
        &[],
    );
    e.wait_ready(Duration::from_secs(30)).await;
    let both = wait_until(Duration::from_secs(30), || async {
        let m = e.metrics().await;
        [&old, &new]
            .iter()
            .all(|c| m.get("slurm_exporter_up", &[("cluster", &c.name)]) == Some(1.0))
    })
    .await;
    assert!(
        both,
        "the exporter on the chart's file:\n{rendered}\n{}",
        e.logs()
    );
}
