//! The release as `release/release.sh` makes it, rehearsed by the test command against the
//! harness's loopback registry (`tests/harness/registry.sh`), checked as a site would pull it:
//! `REGISTRY/slurmscale:VERSION` is one manifest for linux/amd64 and linux/arm64, each image
//! of its own architecture, running as 65532; the arm64 binary, taken out of the pushed
//! image's own layer, runs under qemu's user-mode emulation and serves `/metrics` read from
//! the real Slurm 22.05; the chart installs from `oci://REGISTRY/charts` onto the real
//! Kubernetes with the pushed image; every file matches SHA256SUMS, and each SBOM pins
//! exactly the crates and checksums of Cargo.lock the binary links.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use support::SlurmCluster;

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Where the test command's rehearsal wrote the release, and the registry it pushed to.
fn rehearsal() -> (PathBuf, String) {
    let dir = support::run_dir().join("release");
    let env = support::run_dir().join("registry/env");
    let registry = std::fs::read_to_string(&env).ok().and_then(|e| {
        e.lines()
            .find_map(|l| l.strip_prefix("SLURMSCALE_REGISTRY="))
            .map(str::to_string)
    });
    match (dir.join("SHA256SUMS").exists(), registry) {
        (true, Some(registry)) => (dir, registry),
        _ => panic!(
            "no release rehearsal in {}: tests/run.sh makes one; by hand, \
             `tests/harness/registry.sh start && release/release.sh --registry \
             $(tests/harness/registry.sh env | cut -d= -f2) --plain-http --profile test-image \
             --out {}`",
            dir.display(),
            dir.display()
        ),
    }
}

/// GET from the registry's API: the body, with `accept` for manifests.
async fn pull(registry: &str, path: &str, accept: &str) -> Vec<u8> {
    let url = format!("http://{registry}/v2/slurmscale/{path}");
    let resp = reqwest::Client::new()
        .get(&url)
        .header("Accept", accept)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    assert!(resp.status().is_success(), "GET {url}: {}", resp.status());
    resp.bytes().await.unwrap().to_vec()
}

const INDEX: &str = "application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json";
const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json";

/// Each platform of the pushed manifest list ("linux/amd64", …) and its image manifest.
async fn platforms(registry: &str) -> BTreeMap<String, Value> {
    let index: Value =
        serde_json::from_slice(&pull(registry, &format!("manifests/{VERSION}"), INDEX).await)
            .expect("the manifest list is JSON");
    let mut out = BTreeMap::new();
    for m in index["manifests"].as_array().expect("a manifest list") {
        let platform = format!(
            "{}/{}",
            m["platform"]["os"].as_str().unwrap_or("?"),
            m["platform"]["architecture"].as_str().unwrap_or("?")
        );
        let digest = m["digest"].as_str().unwrap();
        let manifest: Value =
            serde_json::from_slice(&pull(registry, &format!("manifests/{digest}"), MANIFEST).await)
                .unwrap();
        out.insert(platform, manifest);
    }
    out
}

/// The image's one layer, unpacked into a new directory.
async fn unpack(registry: &str, manifest: &Value) -> tempfile::TempDir {
    let layers = manifest["layers"].as_array().expect("layers");
    assert_eq!(
        layers.len(),
        1,
        "one layer (FROM scratch, one COPY): {manifest}"
    );
    let digest = layers[0]["digest"].as_str().unwrap();
    let blob = pull(registry, &format!("blobs/{digest}"), "*/*").await;
    let dir = tempfile::tempdir().unwrap();
    let tar = dir.path().join("layer.tar");
    std::fs::write(&tar, blob).unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let out = Command::new("tar")
        .args(["-xf"])
        .arg(&tar)
        .arg("-C")
        .arg(&root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tar: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

/// The ELF machine of a binary: 62 for x86-64, 183 for AArch64.
fn machine(bin: &Path) -> u16 {
    let bytes = std::fs::read(bin).unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    assert_eq!(&bytes[..4], b"\x7fELF", "{} is not ELF", bin.display());
    u16::from_le_bytes([bytes[18], bytes[19]])
}

#[tokio::test]
async fn the_image_is_one_manifest_for_two_architectures_each_with_its_own_binary() {
    let (_, registry) = rehearsal();
    let platforms = platforms(&registry).await;
    assert_eq!(
        platforms.keys().collect::<Vec<_>>(),
        ["linux/amd64", "linux/arm64"],
        "{platforms:?}"
    );
    for (platform, manifest) in &platforms {
        let digest = manifest["config"]["digest"].as_str().unwrap();
        let config: Value =
            serde_json::from_slice(&pull(&registry, &format!("blobs/{digest}"), "*/*").await)
                .unwrap();
        assert_eq!(
            format!("linux/{}", config["architecture"].as_str().unwrap_or("?")),
            *platform
        );
        assert_eq!(config["config"]["User"], "65532:65532", "{platform}");
        assert_eq!(
            config["config"]["Labels"]["org.opencontainers.image.version"], VERSION,
            "{platform}"
        );
        let root = unpack(&registry, manifest).await;
        let bin = root.path().join("root/usr/local/bin/slurmscale");
        let expected = if platform == "linux/arm64" { 183 } else { 62 };
        assert_eq!(machine(&bin), expected, "{platform}'s binary");
    }
}

/// The arm64 image's own files (its loader and libraries where its loader looks) run the
/// exporter under qemu-aarch64: it reads the real Slurm 22.05 and serves its metrics.
#[tokio::test]
async fn the_arm64_binary_from_the_pushed_image_serves_metrics_under_emulation() {
    let (_, registry) = rehearsal();
    let platforms = platforms(&registry).await;
    let root = unpack(&registry, &platforms["linux/arm64"]).await;
    let root = root.path().join("root");
    let qemu = "/usr/bin/qemu-aarch64-static";
    assert!(
        Path::new(qemu).exists(),
        "{qemu} is missing (Debian: apt-get install qemu-user-static, or run tests/harness/deps.sh)"
    );
    let cluster = SlurmCluster::get("22.05");
    let mut cmd = Command::new(qemu);
    cmd.arg("-L")
        .arg(&root)
        .arg(root.join("usr/local/bin/slurmscale"));
    let exporter = support::slurm_exporter(cmd, &cluster, &cluster.user);
    exporter.wait_ready(Duration::from_secs(90)).await;
    let m = exporter.metrics().await;
    assert_eq!(
        m.get("slurm_exporter_up", &[]),
        Some(1.0),
        "{}",
        exporter.logs()
    );
    assert!(m.get("slurm_nodes", &[]).is_some_and(|n| n > 0.0));
}

/// `helm install oci://…` as a site installs a release: the chart at this version, both
/// components' Deployments on the image just pushed; `helm uninstall` removes it.
#[tokio::test]
async fn the_chart_installs_from_the_registry_with_the_pushed_image() {
    let (_, registry) = rehearsal();
    let ns = support::unique("release");
    let chart = format!("oci://{registry}/charts/slurmscale");
    let helm = |args: &[&str]| {
        let out = support::helm_output(args, true);
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), said)
    };
    let (ok, said) = helm(&[
        "show",
        "chart",
        &chart,
        "--version",
        VERSION,
        "--plain-http",
    ]);
    assert!(ok, "helm show chart: {said}");
    assert!(said.contains(&format!("appVersion: {VERSION}")), "{said}");
    // The release named after its namespace: the chart's ClusterRoles are named after the
    // release, and other tests install theirs on the same Kubernetes.
    let (ok, said) = helm(&[
        "install",
        &ns,
        &chart,
        "--version",
        VERSION,
        "--plain-http",
        "--namespace",
        &ns,
        "--create-namespace",
        "--skip-crds",
        "--set",
        "slurm.url=http://slurmrestd.invalid:6820",
        "--set",
        "slurm.auth.value=c2VjcmV0LWtleS1ieXRlcw==",
    ]);
    assert!(ok, "helm install from {chart}: {said}");
    let client = support::kube_client().await;
    let deployments: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
        kube::Api::namespaced(client.clone(), &ns);
    let images: Vec<String> = deployments
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .flat_map(|d| {
            let spec = d.spec.as_ref().and_then(|s| s.template.spec.as_ref());
            spec.map(|s| {
                s.containers
                    .iter()
                    .filter_map(|c| c.image.clone())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
        })
        .collect();
    assert_eq!(
        images,
        [
            format!("{registry}/slurmscale:{VERSION}"),
            format!("{registry}/slurmscale:{VERSION}")
        ],
        "both components on the pushed image"
    );
    let (ok, said) = helm(&["uninstall", &ns, "--namespace", &ns, "--wait"]);
    assert!(ok, "helm uninstall: {said}");
}

/// What a site verifies before it trusts the files: each matches SHA256SUMS, and each
/// architecture's SBOM lists the crates the binary links with Cargo.lock's checksums.
#[test]
fn the_files_match_their_checksums_and_each_sbom_pins_cargo_lock() {
    let (dir, _) = rehearsal();
    let out = Command::new("sha256sum")
        .args(["--check", "--strict", "SHA256SUMS"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "sha256sum --check: {said}");
    for f in [
        format!("slurmscale-{VERSION}-linux-amd64.tar.gz"),
        format!("slurmscale-{VERSION}-linux-arm64.tar.gz"),
        format!("slurmscale-{VERSION}.tgz"),
        format!("slurmscale-{VERSION}-linux-amd64.sbom.cdx.json"),
        format!("slurmscale-{VERSION}-linux-arm64.sbom.cdx.json"),
        "image-digest.txt".to_string(),
    ] {
        assert!(
            said.contains(&format!("{f}: OK")),
            "{f} not checked: {said}"
        );
    }

    let lock = std::fs::read_to_string(support::repo_root().join("Cargo.lock")).unwrap();
    let lock: BTreeMap<(String, String), String> = lock
        .split("[[package]]")
        .filter_map(|p| {
            let field = |k: &str| {
                p.lines()
                    .find_map(|l| l.strip_prefix(&format!("{k} = \"")))
                    .map(|v| v.trim_end_matches('"').to_string())
            };
            Some(((field("name")?, field("version")?), field("checksum")?))
        })
        .collect();
    for arch in ["amd64", "arm64"] {
        let path = dir.join(format!("slurmscale-{VERSION}-linux-{arch}.sbom.cdx.json"));
        let bom: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(bom["bomFormat"], "CycloneDX");
        assert_eq!(bom["metadata"]["component"]["name"], "slurmscale");
        assert_eq!(bom["metadata"]["component"]["version"], VERSION);
        let components = bom["components"].as_array().unwrap();
        let names: Vec<&str> = components
            .iter()
            .filter_map(|c| c["name"].as_str())
            .collect();
        for linked in [
            "tokio",
            "kube-client",
            "prometheus",
            "rustls",
            "aws-lc-sys",
            "slurmscale-exporter",
        ] {
            assert!(names.contains(&linked), "{arch}: {linked} missing");
        }
        for test_only in ["tempfile", "proptest"] {
            assert!(
                !names.contains(&test_only),
                "{arch}: {test_only} is not linked"
            );
        }
        for c in components {
            let key = (
                c["name"].as_str().unwrap().to_string(),
                c["version"].as_str().unwrap().to_string(),
            );
            let hash = c["hashes"][0]["content"].as_str();
            match lock.get(&key) {
                Some(sum) => assert_eq!(hash, Some(sum.as_str()), "{arch}: {key:?}"),
                None => assert!(
                    hash.is_none(),
                    "{arch}: {key:?} is not in Cargo.lock's registry"
                ),
            }
            assert_eq!(
                c["purl"].as_str(),
                Some(format!("pkg:cargo/{}@{}", key.0, key.1).as_str())
            );
        }
    }
}
