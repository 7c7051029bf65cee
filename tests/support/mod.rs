//! What the end-to-end tests know about the harness: where the real Slurm clusters and the
//! real kube-apiserver are (read from the env files `tests/harness/*.sh start` write), how to
//! run Slurm commands against one of them, and how to mint tokens.
//!
//! A missing server is a failure with the command to run, never a skipped test.

#![allow(dead_code)] // each test binary uses its own part of this module

pub mod elastic;
pub mod fault;
pub mod kube_fault;
pub mod load;
pub mod planned;
pub mod prometheus;
pub mod secrets;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// How long a reset between tests may take to clear a partition (jobs cancelled, records
/// back): generous on purpose, so only a reset that cannot finish fails, loudly.
pub const RESET: std::time::Duration = std::time::Duration::from_secs(60);

pub const START_HINT: &str =
    "start the harness with `tests/harness/up.sh` (or run the whole suite with `tests/run.sh`)";

pub fn run_dir() -> PathBuf {
    std::env::var_os("SLURMSCALE_RUN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/slurmscale-harness"))
}

/// The package's directory as the running `cargo test` says: a target dir shared by two
/// checkouts may hold this binary built from the other, with the other's path compiled in.
pub fn repo_root() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
}

/// README.md's CRD upgrade step as written there (`kubectl apply … charts/slurmscale/crds/`),
/// and its kubectl arguments with that directory replaced by `crds`.
pub fn readme_crd_step(crds: &str) -> (String, Vec<String>) {
    const DIR: &str = "charts/slurmscale/crds/";
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let step = readme
        .lines()
        .find(|l| l.starts_with("kubectl apply ") && l.ends_with(DIR))
        .expect("README.md's CRD upgrade step");
    let args = step
        .split_whitespace()
        .skip(1)
        .map(|a| if a == DIR { crds } else { a }.to_string())
        .collect();
    (step.to_string(), args)
}

/// The README's YAML block that starts with the comment `# <name>`, as written there.
pub fn readme_yaml(name: &str) -> serde_json::Value {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let block = readme
        .split(&format!("```yaml\n# {name}\n"))
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .unwrap_or_else(|| panic!("README.md: the `# {name}` block"));
    serde_saphyr::from_str(block).unwrap_or_else(|e| panic!("README.md's {name}: {e}"))
}

/// Reads `export KEY=value` lines as the harness writes them.
fn read_env_file(path: &Path) -> Option<HashMap<String, String>> {
    let text = std::fs::read_to_string(path).ok()?;
    let vars = text
        .lines()
        .filter_map(|line| line.strip_prefix("export "))
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.trim_matches('"').to_string()))
        .collect();
    Some(vars)
}

/// One real Slurm cluster started by `tests/harness/slurm.sh`.
#[derive(Clone, Debug)]
pub struct SlurmCluster {
    pub flavor: String,
    pub name: String,
    pub url: String,
    /// A second slurmrestd of the same cluster, started without its slurmdbd plugins (every
    /// `/slurmdb/` path answers 404), as many sites run it.
    pub no_accounting_url: String,
    /// slurmctld's own HTTP address (26.05 serves its OpenMetrics endpoints there).
    pub ctld_url: String,
    /// REST API versions this slurmrestd serves, e.g. `["v0.0.38"]`.
    pub api_versions: Vec<String>,
    pub user: String,
    pub jwt_file: PathBuf,
    pub key_file: PathBuf,
    pub conf: PathBuf,
    pub bin: PathBuf,
    pub elastic_nodes: Vec<String>,
    /// Where a test names the autoscaler (host:port) the harness's ResumeProgram wakes.
    pub wake_file: PathBuf,
}

pub const FLAVORS: [&str; 3] = ["22.05", "24.11", "26.05"];

impl SlurmCluster {
    /// The running cluster of this flavor; panics with the fix when it is not running.
    pub fn get(flavor: &str) -> Self {
        let path = run_dir().join(format!("slurm-{flavor}/env"));
        let vars = read_env_file(&path).unwrap_or_else(|| {
            panic!(
                "the real Slurm {flavor} is not running (no {}): {START_HINT}",
                path.display()
            )
        });
        let var = |k: &str| {
            vars.get(k)
                .cloned()
                .unwrap_or_else(|| panic!("{} lacks {k}: restart the harness", path.display()))
        };
        let words = |k: &str| var(k).split_whitespace().map(String::from).collect();
        Self {
            flavor: flavor.to_string(),
            name: var("SLURM_CLUSTER"),
            url: var("SLURM_REST_URL"),
            no_accounting_url: var("SLURM_REST_URL_NO_ACCOUNTING"),
            ctld_url: var("SLURMCTLD_URL"),
            api_versions: words("SLURM_API_VERSIONS"),
            user: var("SLURM_USER"),
            jwt_file: var("HARNESS_JWT_FILE").into(),
            key_file: var("HARNESS_JWT_KEY_FILE").into(),
            conf: var("SLURM_CONF").into(),
            bin: var("SLURM_BIN").into(),
            elastic_nodes: words("SLURM_ELASTIC_NODES"),
            wake_file: var("SLURM_WAKE_FILE").into(),
        }
    }

    /// The three real Slurms: 22.05 (REST v0.0.38), 24.11 (v0.0.40-v0.0.42) and 26.05
    /// (v0.0.42-v0.0.45).
    pub fn all() -> Vec<Self> {
        FLAVORS.iter().map(|f| Self::get(f)).collect()
    }

    /// A Slurm command (`sbatch`, `squeue`, `scontrol`, ...) of this cluster's own build,
    /// as root with the cluster's own auth (munge; auth/slurm on 26.05), never with a JWT from
    /// our environment. It runs in the cluster's run dir, so batch jobs write their
    /// `slurm-N.out` there, not in the repo.
    pub fn cmd(&self, program: &str) -> Command {
        let mut cmd = Command::new(self.bin.join(program));
        cmd.env("SLURM_CONF", &self.conf).env_remove("SLURM_JWT");
        if let Some(run_dir) = self.conf.parent().and_then(Path::parent) {
            cmd.current_dir(run_dir);
        }
        cmd
    }

    /// Runs a Slurm command and returns its stdout; panics with its stderr on failure.
    pub fn run(&self, program: &str, args: &[&str]) -> String {
        let out = self
            .cmd(program)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
        assert!(
            out.status.success(),
            "{program} {args:?} failed on Slurm {}: {}",
            self.flavor,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// What slurmctld says of `node` (`scontrol --future -o show node`: FUTURE records too),
    /// or "" when it has no such node.
    pub fn node_record(&self, node: &str) -> String {
        self.cmd("scontrol")
            .args(["--future", "-o", "show", "node", node])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .ok()
            // "Node slinky-1 not found" comes on stdout too.
            .filter(|out| out.starts_with("NodeName="))
            .unwrap_or_default()
    }

    /// `sbatch --parsable -o /dev/null <args>`: submits a job and returns its id.
    pub fn submit(&self, args: &[&str]) -> String {
        let mut a = vec!["--parsable", "-o", "/dev/null"];
        a.extend_from_slice(args);
        self.run("sbatch", &a).trim().to_string()
    }

    /// The HS256 key bytes slurmctld verifies tokens with.
    pub fn jwt_key(&self) -> Vec<u8> {
        std::fs::read(&self.key_file)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", self.key_file.display()))
    }

    /// No jobs in the elastic partition and none of its nodes up: cancels its jobs, waits for
    /// them to leave their nodes, then returns every elastic node to FUTURE. Panics when it
    /// cannot: a reset that gave up quietly left the next test to fail on someone else's jobs.
    pub fn reset_elastic(&self) {
        let _ = self
            .cmd("scancel")
            .args(["--user=root", "--partition=elastic"])
            .status();
        let left = || {
            let out = self
                .cmd("squeue")
                .args([
                    "-h",
                    "-p",
                    "elastic",
                    "-t",
                    "running,completing",
                    "-o",
                    "%A %T %N",
                ])
                .output();
            match out {
                Ok(o) if o.status.success() => {
                    Some(String::from_utf8_lossy(&o.stdout).trim().to_string())
                }
                _ => None,
            }
        };
        // Generous on purpose (KillWait is 5 s): how fast Slurm lets go is not what a reset
        // tests, only that it does.
        let deadline = std::time::Instant::now() + RESET;
        let mut last = left();
        while last.as_deref() != Some("") && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(200));
            last = left();
        }
        assert_eq!(
            last.as_deref(),
            Some(""),
            "Slurm {}: the elastic partition's jobs were still there {RESET:?} after scancel \
             (None: squeue failed)",
            self.flavor
        );
        for n in &self.elastic_nodes {
            let out = Command::new("bash")
                .arg(repo_root().join("tests/harness/slurm.sh"))
                .args([&self.flavor, "node-down", n])
                .output();
            // A node that is not up is no failure; one refused for a job on it is.
            if let Ok(o) = out {
                let said = String::from_utf8_lossy(&o.stderr);
                assert!(
                    !said.contains("still runs jobs")
                        && !said.contains("took a job")
                        && !said.contains("refused to return"),
                    "Slurm {}: elastic node {n} could not be taken down: {said}",
                    self.flavor
                );
            }
        }
    }

    /// Runs the harness helper for this cluster (`node-up e1`, `node-down e1`, ...).
    pub fn harness(&self, args: &[&str]) {
        let script = repo_root().join("tests/harness/slurm.sh");
        let out = Command::new("bash")
            .arg(&script)
            .arg(&self.flavor)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        assert!(
            out.status.success(),
            "slurm.sh {} {args:?} failed: {}",
            self.flavor,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Claims slurmrestd's `auth/jwt` reads: user name, issued-at and expiry.
#[derive(serde::Serialize)]
struct Claims<'a> {
    sun: &'a str,
    iat: i64,
    exp: i64,
}

/// An HS256 token for `user`, valid from `iat` until `exp` (unix seconds).
pub fn mint_hs256(key: &[u8], user: &str, iat: i64, exp: i64) -> String {
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &Claims {
            sun: user,
            iat,
            exp,
        },
        &jsonwebtoken::EncodingKey::from_secret(key),
    )
    .expect("HS256 signing")
}

/// An official CRD, unmodified (tests/upstream/crds/, with its upstream version: the
/// published CRDs, CEL rules and all, which the harness's kube-apiserver 1.37 takes as they
/// are).
pub fn official_crd_path(file: &str) -> PathBuf {
    let path = repo_root().join("tests/upstream/crds").join(file);
    assert!(path.is_file(), "official CRD {} missing", path.display());
    path
}

/// The real kube-apiserver started by `tests/harness/kube.sh`.
pub fn kubeconfig_path() -> PathBuf {
    let path = run_dir().join("kube/env");
    let vars = read_env_file(&path).unwrap_or_else(|| {
        panic!(
            "the real kube-apiserver is not running (no {}): {START_HINT}",
            path.display()
        )
    });
    vars.get("KUBECONFIG")
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("{} lacks KUBECONFIG: restart the harness", path.display()))
}

/// A variable of the harness Kubernetes' env file (`$SLURMSCALE_RUN/kube/env`), if set.
pub fn kube_env(key: &str) -> Option<String> {
    read_env_file(&run_dir().join("kube/env"))?.remove(key)
}

/// A variable of the real node's env file (`$SLURMSCALE_RUN/kube/node.env`, written by
/// `kube.sh node-start`), if the node is up.
pub fn node_env(key: &str) -> Option<String> {
    read_env_file(&run_dir().join("kube/node.env"))?.remove(key)
}

/// A client for the harness kube-apiserver, as its admin.
pub async fn kube_client() -> kube::Client {
    let path = kubeconfig_path();
    let kubeconfig = kube::config::Kubeconfig::read_from(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("harness kubeconfig");
    kube::Client::try_from(config).expect("kube client")
}

/// A name no other test (or earlier run against the same server) uses.
pub fn unique(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!(
        "{prefix}-{}-{:x}{}",
        std::process::id(),
        nanos & 0xffff,
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A fresh namespace for one test; objects of different tests never meet.
pub async fn namespace(client: &kube::Client, prefix: &str) -> String {
    use k8s_openapi::api::core::v1::Namespace;
    let name = unique(prefix);
    let ns: Namespace = serde_json::from_value(serde_json::json!({
        "metadata": { "name": name }
    }))
    .expect("namespace object");
    kube::Api::<Namespace>::all(client.clone())
        .create(&Default::default(), &ns)
        .await
        .unwrap_or_else(|e| panic!("cannot create namespace {name}: {e}"));
    name
}

/// A free TCP port on 127.0.0.1 (bound then released; the OS does not hand it out again
/// at once).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// A `slurmscale` process started by a test, killed (by its pid) when dropped. Its stderr
/// goes to a file the test can read.
pub struct Process {
    pub child: std::process::Child,
    pub port: u16,
    pub log: PathBuf,
}

impl Process {
    /// Runs `slurmscale <args>` with `envs`, listening on a fresh port (`--listen` is added).
    pub fn start(args: &[&str], envs: &[(&str, &str)]) -> Self {
        Self::start_command(Self::command(), args, envs)
    }

    /// The slurmscale this run tests. SLURMSCALE_BENCH_BIN: another build of slurmscale,
    /// for a bench to measure beside this one in the same minute (an older commit's, say).
    pub fn command() -> Command {
        let bin = std::env::var_os("SLURMSCALE_BENCH_BIN").map_or_else(
            || PathBuf::from(env!("CARGO_BIN_EXE_slurmscale")),
            PathBuf::from,
        );
        Command::new(bin)
    }

    /// `start`, of `cmd` (another slurmscale binary, or one run under an emulator with its
    /// leading arguments) with `args` after what it has.
    pub fn start_command(mut cmd: Command, args: &[&str], envs: &[(&str, &str)]) -> Self {
        let port = free_port();
        let log = std::env::temp_dir().join(format!("{}.log", unique("slurmscale")));
        let stderr = std::fs::File::create(&log).expect("log file");
        let listen = format!("127.0.0.1:{port}");
        cmd.args(args)
            .args(["--listen", &listen])
            .stdout(std::process::Stdio::null())
            .stderr(stderr);
        // Only what the test passes: the harness's SLURM_JWT etc. must not leak in.
        for (k, _) in std::env::vars() {
            if k.starts_with("SLURM") || k == "KUBECONFIG" {
                cmd.env_remove(k);
            }
        }
        // SLURMSCALE_TEST_LOG (e.g. `slurmscale_exporter::collect=debug`) raises what the
        // processes of a run log, to see why a test failed.
        let level = std::env::var("SLURMSCALE_TEST_LOG").unwrap_or_else(|_| "info".into());
        cmd.env("SLURMSCALE_LOG", level).envs(envs.iter().copied());
        let child = cmd.spawn().expect("start slurmscale");
        Self { child, port, log }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// POST to a path with no body; (status, body), or None while the server is not up.
    pub async fn post(&self, path: &str) -> Option<(u16, String)> {
        let resp = reqwest::Client::new()
            .post(self.url(path))
            .send()
            .await
            .ok()?;
        let status = resp.status().as_u16();
        Some((status, resp.text().await.ok()?))
    }

    /// GET a path; (status, body), or None while the server is not up.
    pub async fn get(&self, path: &str) -> Option<(u16, String)> {
        let resp = reqwest::get(self.url(path)).await.ok()?;
        let status = resp.status().as_u16();
        let body = resp.text().await.ok()?;
        secrets::check(&format!("{path} of a slurmscale process"), &body);
        Some((status, body))
    }

    pub async fn metrics(&self) -> Metrics {
        let (status, body) = self.get("/metrics").await.expect("/metrics answers");
        assert_eq!(status, 200);
        Metrics::parse(&body)
    }

    /// Waits for /readyz to say 200.
    pub async fn wait_ready(&self, within: std::time::Duration) {
        let ok = wait_until(within, || async {
            matches!(self.get("/readyz").await, Some((200, _)))
        })
        .await;
        if !ok {
            let said = self.get("/readyz").await;
            panic!(
                "exporter not ready within {within:?}: {said:?}\nlogs:\n{}",
                self.logs()
            );
        }
    }
}

/// `slurmscale exporter` against `cluster`, polling every second, watching Kubernetes through
/// `kubeconfig` (the harness's, or a proxy's).
pub fn exporter(cluster: &SlurmCluster, kubeconfig: &Path) -> Process {
    let key = cluster.key_file.to_string_lossy().into_owned();
    let kubeconfig = kubeconfig.to_string_lossy().into_owned();
    Process::start(
        &[
            "exporter",
            "--interval",
            "1s",
            "--jwt-key-file",
            &key,
            "--kubeconfig",
            &kubeconfig,
        ],
        &[
            ("SLURM_REST_URL", &cluster.url),
            ("SLURM_USER", &cluster.user),
            ("SLURM_CLUSTER", &cluster.name),
        ],
    )
}

/// `slurmscale exporter` run by `cmd` ([`Process::command`], or a build under an emulator)
/// against `cluster` alone, no Kubernetes, polling every 2 s and signing its tokens for
/// `user` with the cluster's key.
pub fn slurm_exporter(cmd: Command, cluster: &SlurmCluster, user: &str) -> Process {
    let key = cluster.key_file.to_string_lossy().into_owned();
    Process::start_command(
        cmd,
        &[
            "exporter",
            "--no-kubernetes",
            "--interval",
            "2s",
            "--jwt-key-file",
            &key,
        ],
        &[
            ("SLURM_REST_URL", &cluster.url),
            ("SLURM_USER", user),
            ("SLURM_CLUSTER", &cluster.name),
        ],
    )
}

/// `slurmscale autoscaler` against `cluster` and the harness's kube-apiserver, polling every
/// second, with its Lease in `lease_ns` (so tests never share a leader).
pub fn autoscaler(cluster: &SlurmCluster, lease_ns: &str, extra: &[&str]) -> Process {
    autoscaler_via(cluster, &cluster.url, lease_ns, extra)
}

/// As [`autoscaler`], reaching slurmrestd at `url` (a proxy in front of the cluster's).
pub fn autoscaler_via(
    cluster: &SlurmCluster,
    url: &str,
    lease_ns: &str,
    extra: &[&str],
) -> Process {
    autoscaler_with(cluster, url, &kubeconfig_path(), lease_ns, extra)
}

/// As [`autoscaler_via`], reaching Kubernetes through `kubeconfig` (a proxy's).
pub fn autoscaler_with(
    cluster: &SlurmCluster,
    url: &str,
    kubeconfig: &Path,
    lease_ns: &str,
    extra: &[&str],
) -> Process {
    let key = cluster.key_file.to_string_lossy().into_owned();
    let kubeconfig = kubeconfig.to_string_lossy().into_owned();
    // Every second, unless `extra` says otherwise.
    let interval = ["--interval", "1s"];
    let mut args = vec!["autoscaler"];
    if !extra.contains(&"--interval") {
        args.extend(interval);
    }
    args.extend([
        "--jwt-key-file",
        &key,
        "--kubeconfig",
        &kubeconfig,
        "--leader-election-namespace",
        lease_ns,
        "--leader-election-duration",
        "6s",
    ]);
    args.extend_from_slice(extra);
    Process::start(
        &args,
        &[
            ("SLURM_REST_URL", url),
            ("SLURM_USER", &cluster.user),
            ("SLURM_CLUSTER", &cluster.name),
        ],
    )
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !std::thread::panicking() {
            secrets::check("the logs of a slurmscale process", &self.logs());
        }
        // A failing test keeps the log for a look; a passing one leaves nothing behind.
        if !std::thread::panicking() {
            let _ = std::fs::remove_file(&self.log);
        }
    }
}

/// Polls `check` every 200 ms until it holds or `within` passes; returns whether it held.
pub async fn wait_until<F, Fut>(within: std::time::Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + within;
    loop {
        if check().await {
            return true;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// One sample: (name, labels, value).
pub type Sample = (String, Vec<(String, String)>, f64);

/// A parsed exposition.
#[derive(Clone, Debug, Default)]
pub struct Metrics(pub Vec<Sample>);

impl Metrics {
    pub fn parse(text: &str) -> Self {
        let mut out = Vec::new();
        for line in text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        {
            let (series, value) = line.rsplit_once(' ').expect("sample line");
            let value: f64 = value.parse().unwrap_or(f64::NAN);
            let (name, labels) = match series.split_once('{') {
                Some((n, rest)) => (n, parse_labels(rest.trim_end_matches('}'))),
                None => (series, Vec::new()),
            };
            out.push((name.to_string(), labels, value));
        }
        Self(out)
    }

    /// Values of `name` whose labels include all of `labels`.
    pub fn all(&self, name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
        self.0
            .iter()
            .filter(|(n, l, _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| l.iter().any(|(a, b)| a == k && b == v))
            })
            .map(|(_, _, v)| *v)
            .collect()
    }

    /// The one value of `name` with these labels; None if absent, panics if ambiguous.
    pub fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let all = self.all(name, labels);
        assert!(
            all.len() <= 1,
            "{name}{labels:?} matches {} series",
            all.len()
        );
        all.first().copied()
    }

    pub fn names(&self) -> std::collections::BTreeSet<&str> {
        self.0.iter().map(|(n, _, _)| n.as_str()).collect()
    }
}

fn parse_labels(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some((k, after)) = rest.split_once("=\"") {
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, n)) = chars.next() {
                        value.push(if n == 'n' { '\n' } else { n });
                    }
                }
                '"' => {
                    end = i + 1;
                    break;
                }
                c => value.push(c),
            }
        }
        out.push((k.trim_start_matches(',').trim().to_string(), value));
        rest = &after[end..];
    }
    out
}

/// A validation tool (kubectl, helm, kubernetes-validate, tsc) from the cache that
/// `tests/harness/tools.sh` fills; the script is cheap once they are there.
pub fn tool(name: &str) -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let out = Command::new("bash")
            .arg(repo_root().join("tests/harness/tools.sh"))
            .output()
            .expect("run tests/harness/tools.sh");
        assert!(
            out.status.success(),
            "tests/harness/tools.sh failed (it needs npm and python3-venv: run tests/harness/deps.sh as root): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    })
    .join(name)
}

/// Runs a tool with the harness's kubeconfig; its output, stdout apart (it may be a token).
pub fn tool_output(name: &str, args: &[&str]) -> std::process::Output {
    Command::new(tool(name))
        .args(args)
        .env("KUBECONFIG", kubeconfig_path())
        .output()
        .unwrap_or_else(|e| panic!("run {name}: {e}"))
}

/// Runs a tool with the harness's kubeconfig; (success, stdout + stderr).
pub fn run_tool(name: &str, args: &[&str]) -> (bool, String) {
    let out = tool_output(name, args);
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Helm with its home, cache and config in a throwaway directory, in the repository, and
/// with the harness's kubeconfig when `cluster` (rendering and linting need none).
pub fn helm_output(args: &[&str], cluster: bool) -> std::process::Output {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(tool("helm"));
    cmd.args(args)
        .current_dir(repo_root())
        .env("HOME", home.path())
        .env("HELM_CACHE_HOME", home.path().join("cache"))
        .env("HELM_CONFIG_HOME", home.path().join("config"))
        .env("HELM_DATA_HOME", home.path().join("data"));
    if cluster {
        cmd.env("KUBECONFIG", kubeconfig_path());
    }
    cmd.output().expect("run helm")
}

/// The image `tests/harness/image.sh` builds, by the name the chart pulls by default.
pub fn image_name() -> String {
    let out = Command::new("bash")
        .arg(repo_root().join("tests/harness/image.sh"))
        .arg("name")
        .output()
        .expect("run tests/harness/image.sh name");
    assert!(out.status.success(), "tests/harness/image.sh name failed");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Tests of one test binary that drive the same partition of a Slurm take turns (a binary's
/// tests run in parallel threads; each binary has its own turns).
pub async fn turn(flavor: &str) -> tokio::sync::MutexGuard<'static, ()> {
    static TURN_2205: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    static TURN_2411: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    static TURN_2605: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    match flavor {
        "24.11" => TURN_2411.lock().await,
        "26.05" => TURN_2605.lock().await,
        _ => TURN_2205.lock().await,
    }
}

/// Who holds the autoscaler's Lease (`slurmscale-autoscaler`) in `ns`; empty when nobody
/// does or it cannot be read.
pub async fn lease_holder(client: &kube::Client, ns: &str) -> String {
    kube::Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(client.clone(), ns)
        .get_opt("slurmscale-autoscaler")
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec?.holder_identity)
        .unwrap_or_default()
}

/// The notes of the Events of `reason` in `ns`.
pub async fn event_notes(client: &kube::Client, ns: &str, reason: &str) -> Vec<String> {
    let api: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(client.clone(), ns);
    api.list(&Default::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter_map(|e| e.note)
        .collect()
}
