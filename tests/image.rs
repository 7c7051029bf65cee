//! The container image, run the way the chart runs it: as UID 65532, with a read-only root
//! filesystem, every capability dropped, no privilege escalation and no writable path (not
//! even a /tmp). `tests/harness/image.sh` builds it (tests/run.sh does, before the tests);
//! podman runs it on runc with `tests/harness/containers.conf`, on the host network so the
//! exporter inside reaches the harness's real slurmrestd on the loopback.
//!
//! A missing podman or image is a failure with the command that fixes it, never a skip.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::{Metrics, SlurmCluster, free_port, repo_root, unique};

const MAX_IMAGE_BYTES: u64 = 40_000_000;
const NONROOT: u32 = 65532;

/// `podman` on runc with our containers.conf (crun and default ulimits fail here).
fn podman() -> Command {
    let mut cmd = Command::new("podman");
    cmd.env(
        "CONTAINERS_CONF",
        repo_root().join("tests/harness/containers.conf"),
    )
    .args(["--runtime", "runc"]);
    cmd
}

/// Runs podman to completion: (success, stdout, stderr).
fn podman_output(args: &[&str]) -> (bool, String, String) {
    let out = podman().args(args).output().unwrap_or_else(|e| {
        panic!("cannot run podman ({e}): install it with tests/harness/deps.sh (apt-get install podman runc buildah)")
    });
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The image, which must have been built from this checkout.
fn built_image() -> String {
    let image = support::image_name();
    let (ok, _, _) = podman_output(&["image", "exists", &image]);
    assert!(
        ok,
        "no image {image}: build it with tests/harness/image.sh (tests/run.sh does before the tests)"
    );
    image
}

fn inspect(image: &str, format: &str) -> String {
    let (ok, out, err) = podman_output(&["image", "inspect", "--format", format, image]);
    assert!(ok, "podman image inspect {image}: {err}");
    out.trim().to_string()
}

/// What `--version` must say: the package version and the checkout's commit.
fn expected_version() -> String {
    let out = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(repo_root())
        .output()
        .expect("git rev-parse");
    let commit = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(!commit.is_empty(), "git rev-parse HEAD said nothing");
    format!("slurmscale {} (commit {commit})", env!("CARGO_PKG_VERSION"))
}

/// The options the chart's pod and container security contexts amount to.
const LOCKED_DOWN: &[&str] = &[
    "--user",
    "65532:65532",
    "--read-only",
    // podman's --read-only adds writable tmpfs at /tmp, /run and /var/tmp; the chart has none.
    "--read-only-tmpfs=false",
    "--cap-drop",
    "ALL",
    "--security-opt",
    "no-new-privileges",
];

#[test]
fn the_binary_names_its_version_and_commit() {
    let out = Command::new(env!("CARGO_BIN_EXE_slurmscale"))
        .arg("--version")
        .output()
        .expect("run slurmscale --version");
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        expected_version()
    );
}

#[test]
fn the_image_is_small_nonroot_and_from_this_commit() {
    let image = built_image();
    let size: u64 = inspect(&image, "{{.Size}}").parse().expect("image size");
    eprintln!("image {image}: {size} bytes");
    assert!(
        size <= MAX_IMAGE_BYTES,
        "image {image} is {size} bytes, more than {MAX_IMAGE_BYTES}"
    );
    assert_eq!(inspect(&image, "{{.Config.User}}"), "65532:65532");
    assert_eq!(
        inspect(&image, "{{json .Config.Entrypoint}}"),
        r#"["/usr/local/bin/slurmscale"]"#
    );

    let mut args = vec!["run", "--rm", "--network", "none"];
    args.extend_from_slice(LOCKED_DOWN);
    args.extend([image.as_str(), "--version"]);
    let started = Instant::now();
    let (ok, out, err) = podman_output(&args);
    let took = started.elapsed();
    assert!(ok, "podman run {image} --version: {err}");
    assert_eq!(
        out.trim(),
        expected_version(),
        "the image is not from this checkout: rebuild it with tests/harness/image.sh"
    );
    eprintln!("podman run {image} --version: {took:?}");
}

/// A container started by a test, removed (by its name) when dropped.
struct Container {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Container {
    fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = podman_output(&["rm", "--force", "--time", "0", &self.name]);
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !std::thread::panicking() {
            let _ = std::fs::remove_file(&self.log);
        }
    }
}

/// The harness's HS256 key, copied to where only UID 65532 may read it, as the chart's
/// Secret volume (mode 0440, fsGroup 65532) is.
fn key_for_nonroot(cluster: &SlurmCluster, dir: &Path) -> PathBuf {
    let key = dir.join("jwt_hs256.key");
    std::fs::write(&key, cluster.jwt_key()).expect("copy the JWT key");
    std::os::unix::fs::chown(&key, Some(NONROOT), Some(NONROOT)).expect("chown the key");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o400)).expect("chmod");
    key
}

/// `slurmscale exporter --no-kubernetes` in the image, reading `cluster` at `url`.
fn run_exporter(
    image: &str,
    cluster: &SlurmCluster,
    url: &str,
    key: &Path,
    port: u16,
) -> Container {
    let name = unique("slurmscale-image");
    let log = std::env::temp_dir().join(format!("{name}.log"));
    let mount = format!("{}:/var/run/secrets/slurm/jwt_hs256.key:ro", key.display());
    let listen = format!("127.0.0.1:{port}");
    let envs = [
        format!("SLURM_REST_URL={url}"),
        format!("SLURM_USER={}", cluster.user),
        format!("SLURM_CLUSTER={}", cluster.name),
        "SLURM_JWT_KEY_FILE=/var/run/secrets/slurm/jwt_hs256.key".to_string(),
        "SLURMSCALE_NO_KUBERNETES=true".to_string(),
        format!("SLURMSCALE_LISTEN={listen}"),
        "SLURMSCALE_INTERVAL=1s".to_string(),
    ];
    let mut args = vec!["run", "--rm", "--name", &name, "--network", "host"];
    args.extend_from_slice(LOCKED_DOWN);
    args.extend(["--volume", &mount]);
    for e in &envs {
        args.extend(["--env", e]);
    }
    args.extend([image, "exporter"]);
    let out = std::fs::File::create(&log).expect("log file");
    let child = podman()
        .args(&args)
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .stdin(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot run podman ({e}): install it with tests/harness/deps.sh (apt-get install podman runc buildah)")
        });
    Container { name, child, log }
}

/// Reads one line of /proc/PID/status, e.g. `Uid` or `CapEff`.
fn proc_status(pid: &str, key: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}:")))
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|| panic!("no {key} in /proc/{pid}/status"))
}

/// The exporter inside the image serves real Slurm metrics from both real Slurms, as the
/// chart would run it: the figure to beat is 1 s from `podman run` to the first scrape
/// holding Slurm's partitions and nodes.
#[tokio::test]
async fn the_exporter_in_the_image_serves_real_slurm_metrics_at_once() {
    let image = built_image();
    let dir = tempfile::tempdir().unwrap();
    // One at a time: the launch time is the figure, not how two launches share the CPU.
    for cluster in SlurmCluster::all() {
        let flavor = &cluster.flavor;
        // By name, not address: getaddrinfo inside the image resolves through its
        // nsswitch.conf and the /etc/hosts podman mounts, as a pod resolves a Service.
        let url = cluster.url.replace("127.0.0.1", "localhost");
        assert_ne!(
            url, cluster.url,
            "harness URL {} is not on 127.0.0.1",
            cluster.url
        );
        let key_dir = dir.path().join(flavor);
        std::fs::create_dir_all(&key_dir).unwrap();
        let key = key_for_nonroot(&cluster, &key_dir);
        let cpu_nodes: f64 = cluster
            .run("sinfo", &["-h", "-p", "cpu", "-o", "%D"])
            .trim()
            .parse()
            .expect("sinfo node count");
        let port = free_port();
        let metrics_url = format!("http://127.0.0.1:{port}/metrics");
        let http = reqwest::Client::new();

        let launched = Instant::now();
        let mut c = run_exporter(&image, &cluster, &url, &key, port);
        let (mut first_answer, mut first_data) = (None, None);
        let mut last = Metrics::default();
        while launched.elapsed() < Duration::from_secs(20) && first_data.is_none() {
            if let Ok(resp) = http.get(&metrics_url).send().await
                && resp.status() == 200
                && let Ok(body) = resp.text().await
            {
                first_answer.get_or_insert_with(|| launched.elapsed());
                last = Metrics::parse(&body);
                let labels = [("cluster", cluster.name.as_str()), ("partition", "cpu")];
                if last.get("slurm_partition_nodes", &labels) == Some(cpu_nodes)
                    && last
                        .get("slurm_nodes", &[("cluster", &cluster.name)])
                        .is_some()
                {
                    first_data = Some(launched.elapsed());
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let Some(first_data) = first_data else {
            panic!(
                "Slurm {flavor}: the image's exporter served no Slurm metrics within 20 s \
                 (last scrape had {:?})\npodman said:\n{}",
                last.names(),
                c.logs()
            );
        };
        eprintln!(
            "Slurm {flavor}: podman run to first /metrics answer {:?}, to real Slurm metrics {first_data:?}",
            first_answer.unwrap()
        );
        // Only printed: how fast the image starts is `tests/harness/startup.sh`'s to measure
        // against its target (docs/operations.md); here it is enough that it serves Slurm's data.
        let (status, _) = support_get(&http, port, "/readyz").await;
        assert_eq!(status, 200, "Slurm {flavor}: /readyz");

        // What the process really runs as, read from the host: UID and GID 65532, no
        // capability of any kind, no way to gain one.
        let (ok, pid, err) = podman_output(&["inspect", "--format", "{{.State.Pid}}", &c.name]);
        assert!(ok, "podman inspect {}: {err}", c.name);
        let pid = pid.trim();
        let ids = |k| {
            proc_status(pid, k)
                .split_whitespace()
                .map(String::from)
                .collect::<Vec<_>>()
        };
        assert!(
            ids("Uid").iter().all(|u| u == "65532"),
            "Uid {:?}",
            ids("Uid")
        );
        assert!(
            ids("Gid").iter().all(|g| g == "65532"),
            "Gid {:?}",
            ids("Gid")
        );
        for cap in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
            assert_eq!(proc_status(pid, cap), "0000000000000000", "{cap}");
        }
        assert_eq!(proc_status(pid, "NoNewPrivs"), "1");
        let (ok, ro, _) = podman_output(&[
            "inspect",
            "--format",
            "{{.HostConfig.ReadonlyRootfs}}",
            &c.name,
        ]);
        assert!(
            ok && ro.trim() == "true",
            "root filesystem not read-only: {ro}"
        );

        // SIGTERM, as Kubernetes stops a pod: a clean exit.
        let (ok, _, err) = podman_output(&["stop", "--time", "10", &c.name]);
        assert!(ok, "podman stop {}: {err}", c.name);
        // `podman run` exits with the container's status.
        let status = c.child.wait().expect("podman run exits");
        assert!(
            status.success(),
            "Slurm {flavor}: {status} on SIGTERM\n{}",
            c.logs()
        );
    }
}

async fn support_get(http: &reqwest::Client, port: u16, path: &str) -> (u16, String) {
    let resp = http
        .get(format!("http://127.0.0.1:{port}{path}"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {path}: {e}"));
    let status = resp.status().as_u16();
    (status, resp.text().await.unwrap_or_default())
}
