//! Command-line surface: the flags and environment variables the tables in docs/exporter.md
//! and docs/autoscaler.md list, which users, charts and tests rely on (a name changes only
//! with a note in those pages). Every flag has an environment variable; the single-cluster
//! case needs only the slurmrestd URL and a token. Values of secret variables are never shown
//! in `--help`. The names Prometheus exporters share (`--web.listen-address`,
//! `--web.telemetry-path`, `--web.config.file`, `--log.level`, `--[no-]collector.NAME`) work
//! too, so a site's habits carry over.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand, ValueEnum};
use slurmscale_exporter::config::{self, AuthConfig, ClusterConfig, parse_duration};
use slurmscale_exporter::metrics::MetricsOptions;
use slurmscale_exporter::slurm::{Secret, SigningAlgorithm};
use slurmscale_sim::formats::Format;

/// `slurmscale --version`: the release and the git commit it was built from (build.rs).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("SLURMSCALE_GIT_COMMIT"),
    ")"
);

#[derive(Parser)]
#[command(
    name = "slurmscale",
    version = VERSION,
    about = "Prometheus exporter and autoscaler for Slurm beside Kubernetes"
)]
pub struct Cli {
    #[command(flatten)]
    pub log: LogArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Serve Prometheus metrics for Slurm clusters (and, with Kubernetes, NodeSets and GenericNodes).
    Exporter(Box<ExporterArgs>),
    /// Scale NodeSets (or anything with a scale subresource) on Slurm demand, as NodeSetAutoscalers say.
    Autoscaler(Box<AutoscalerArgs>),
    /// Run the exporter and the autoscaler policy on a simulated cluster: no Slurm, no Kubernetes.
    Demo(DemoArgs),
    /// Replay a job trace through the autoscaler and its rivals (KEDA, Slurm power saving,
    /// static) on a simulated partition, and compare node-hours and queue waits.
    Simulate(Box<SimulateArgs>),
    /// Check an install: each /metrics answers and reports its sources up, and the
    /// autoscaler's Lease is held (what the chart's `helm test` runs). Exits non-zero on any
    /// failure.
    Check(Box<CheckArgs>),
    /// Print the CustomResourceDefinitions generated from slurmscale's types, as YAML.
    Crds {
        #[arg(value_enum)]
        which: CrdName,
    },
}

#[derive(Clone, Copy, ValueEnum)]
pub enum CrdName {
    /// Our NodeSetAutoscaler (what the Helm chart installs).
    Nodesetautoscaler,
    /// Slinky's NodeSet (v1alpha1 and v1beta1), as our tests serve it.
    Nodeset,
    /// ACK's GenericNode, as our tests serve it.
    Genericnode,
}

#[derive(Args)]
#[command(next_help_heading = "Logging")]
pub struct LogArgs {
    /// Log format.
    #[arg(
        long,
        visible_alias = "log.format",
        global = true,
        env = "SLURMSCALE_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub log_format: LogFormat,
    /// Log filter: a level (`debug`, `info`, `warn`, `error`) or tracing's EnvFilter syntax
    /// (`info,slurmscale_exporter=debug`).
    #[arg(
        long,
        visible_alias = "log.level",
        global = true,
        env = "SLURMSCALE_LOG",
        default_value = "info"
    )]
    pub log: String,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum LogFormat {
    /// tracing's human-readable lines.
    Text,
    /// `key=value` lines, as the Prometheus exporters write them.
    Logfmt,
    /// One JSON object a line.
    Json,
}

fn duration(s: &str) -> Result<Duration, String> {
    parse_duration(s)
}

/// How to reach and authenticate to slurmrestd (one cluster), or a file with several.
#[derive(Args, Clone)]
#[command(next_help_heading = "Slurm")]
pub struct SlurmArgs {
    /// slurmrestd base URL, e.g. http://slurmrestd:6820.
    #[arg(long, env = "SLURM_REST_URL")]
    pub slurm_url: Option<String>,
    /// User name sent as X-SLURM-USER-NAME (and the `sun` claim of tokens we sign).
    #[arg(long, env = "SLURM_USER", default_value = config::DEFAULT_USER)]
    pub slurm_user: String,
    /// The `cluster` label of every series.
    #[arg(long, env = "SLURM_CLUSTER", default_value = "default")]
    pub cluster: String,
    /// A file holding the JWT; re-read when it changes and when slurmrestd rejects the token
    /// (Slinky's Token object rotates one). SLURM_JWT_FILE is still read, with a warning.
    #[arg(long, env = "SLURMSCALE_JWT_FILE")]
    pub token_file: Option<PathBuf>,
    /// The JWT itself. Prefer the environment variable: arguments show in `ps`. SLURM_JWT is
    /// still read, with a warning: it is the variable Slurm's own commands read (it switches
    /// `sbatch` and `squeue` in the same shell to JWT auth).
    #[arg(long, env = "SLURMSCALE_JWT", hide_env_values = true)]
    pub token: Option<String>,
    /// Sign tokens ourselves with this key: slurmctld's jwt_hs256.key, or a PEM private key.
    #[arg(long, env = "SLURM_JWT_KEY_FILE")]
    pub jwt_key_file: Option<PathBuf>,
    /// Algorithm for --jwt-key-file.
    #[arg(long, env = "SLURM_JWT_ALGORITHM", default_value = "HS256")]
    pub jwt_algorithm: SigningAlgorithm,
    /// Lifetime of tokens we sign; they are renewed after two thirds of it.
    #[arg(long, env = "SLURM_JWT_LIFETIME", default_value = "10m", value_parser = duration)]
    pub jwt_lifetime: Duration,
    /// REST API version: `auto` (the newest slurmrestd serves) or one of v0.0.38, v0.0.40-v0.0.45.
    #[arg(long, env = "SLURM_API_VERSION", default_value = "auto")]
    pub api_version: String,
    /// Extra CA certificate (PEM) to trust for an https slurmrestd.
    #[arg(long, env = "SLURM_CA_FILE")]
    pub ca_file: Option<PathBuf>,
    /// Timeout of one request to slurmrestd (a 20k-job /jobs takes 10-20 s).
    #[arg(long, env = "SLURM_TIMEOUT", default_value = "60s", value_parser = duration)]
    pub timeout: Duration,
    /// Upper bound on requests per second to slurmrestd (each one takes slurmctld locks).
    /// Default: what one collection needs at --interval (its requests / the interval, so
    /// `--interval 1s` is never slowed down by it); a lower value lengthens every collection
    /// to requests / this many seconds (a warning says so at start).
    #[arg(long, env = "SLURM_MAX_REQUESTS_PER_SECOND")]
    pub max_requests_per_second: Option<u32>,
    /// The most of slurmrestd's time each kind of request may take (`3%` or `0.03`): after a
    /// request that took d, the next of its kind waits d × (1/share − 1), so a 22 s /jobs of
    /// 20,000 jobs goes at most every 12 minutes while cheap requests follow --interval.
    /// The job list stays current between full fetches from /diag and single-job reads.
    #[arg(long, env = "SLURMSCALE_POLL_BUDGET", default_value = "3%")]
    pub poll_budget: slurmscale_exporter::collect::Budget,
    /// The most jobs the job list may be asked for in one answer. Above this many live
    /// jobs (as slurmctld counts them), the list is read id by id from the newest down —
    /// never one full /jobs, which at 100,000 jobs takes 24.11's slurmrestd past 6 GiB —
    /// with slurmdbd's accounting saying where the ids are; and no one request asks for
    /// more than 2,000 job ids. The default is Slurm's own default MaxJobCount.
    #[arg(long, env = "SLURMSCALE_REQUEST_MAX_JOBS", default_value_t = slurmscale_exporter::collect::jobs::REQUEST_MAX_JOBS)]
    pub request_max_jobs: u64,
    /// Slurm jobs that are placeholders for Kubernetes pods, besides those Slinky's
    /// slurm-bridge marks itself: FIELD:PATTERN rules (field: comment, admin_comment, name,
    /// wckey, account or mcs_label; `*` matches anything), e.g. `comment:sunk-*`.
    #[arg(
        long = "kubernetes-job",
        env = "SLURMSCALE_KUBERNETES_JOBS",
        value_delimiter = ','
    )]
    pub kubernetes_jobs: Vec<String>,
    /// YAML file listing several clusters (replaces the single-cluster flags above).
    #[arg(long, env = "SLURMSCALE_CONFIG")]
    pub config: Option<PathBuf>,
}

impl SlurmArgs {
    /// The clusters to read, and the interval the config file asks for (if any).
    pub fn clusters(&self) -> Result<(Vec<ClusterConfig>, Option<Duration>)> {
        if let Some(path) = &self.config {
            if self.slurm_url.is_some() {
                bail!("set either --config or --slurm-url, not both");
            }
            return config::load(path).context("loading the cluster config");
        }
        let Some(url) = self.slurm_url.clone() else {
            bail!(
                "no Slurm cluster: set --slurm-url (SLURM_REST_URL) or --config (SLURMSCALE_CONFIG)"
            );
        };
        let (token_file, token) = self.token_sources();
        let auth = match (&token_file, &token, &self.jwt_key_file) {
            (Some(f), None, None) => AuthConfig::TokenFile(f.clone()),
            (None, Some(t), None) => AuthConfig::Token(Secret::new(t.trim())),
            (None, None, Some(k)) => AuthConfig::Key {
                path: k.clone(),
                algorithm: self.jwt_algorithm,
                lifetime: self.jwt_lifetime,
            },
            (None, None, None) => {
                bail!(
                    "no token: set --token-file (SLURMSCALE_JWT_FILE), SLURMSCALE_JWT, or --jwt-key-file (SLURM_JWT_KEY_FILE)"
                )
            }
            _ => bail!("set only one of --token-file, SLURMSCALE_JWT and --jwt-key-file"),
        };
        let cluster = ClusterConfig {
            name: self.cluster.clone(),
            url,
            user: self.slurm_user.clone(),
            auth,
            api_version: config::parse_api_version(Some(&self.api_version))?,
            ca_file: self.ca_file.clone(),
            timeout: self.timeout,
            max_requests_per_second: self
                .max_requests_per_second
                .map(|r| {
                    std::num::NonZeroU32::new(r)
                        .context("--max-requests-per-second must be at least 1")
                })
                .transpose()?,
            kubernetes_jobs: config::origin_rules(&self.kubernetes_jobs)?,
        };
        Ok((vec![cluster], None))
    }

    /// The token file and token, from the flags or their variables, else from the names
    /// read before (SLURM_JWT_FILE, SLURM_JWT), with a warning.
    fn token_sources(&self) -> (Option<PathBuf>, Option<String>) {
        if self.token_file.is_some() || self.token.is_some() || self.jwt_key_file.is_some() {
            return (self.token_file.clone(), self.token.clone());
        }
        let old = |name: &str, new: &str| {
            let value = std::env::var_os(name).filter(|v| !v.is_empty())?;
            tracing::warn!(
                "{name} is deprecated: set {new} instead (SLURM_JWT also switches Slurm's own commands to JWT auth)"
            );
            Some(value)
        };
        let file = old("SLURM_JWT_FILE", "SLURMSCALE_JWT_FILE").map(PathBuf::from);
        let token = old("SLURM_JWT", "SLURMSCALE_JWT").map(|t| t.to_string_lossy().into_owned());
        (file, token)
    }
}

/// How to reach Kubernetes.
#[derive(Args, Clone)]
#[command(next_help_heading = "Kubernetes")]
pub struct KubeArgs {
    /// kubeconfig file, or several separated as PATH separates them (as kubectl merges
    /// them: the first to set a value wins); without it, the in-cluster service account is
    /// used.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<std::ffi::OsString>,
    /// Do not read Kubernetes at all (no NodeSet or GenericNode metrics).
    #[arg(long, env = "SLURMSCALE_NO_KUBERNETES")]
    pub no_kubernetes: bool,
}

impl KubeArgs {
    /// A client, or `None` with --no-kubernetes.
    pub async fn client(&self) -> Result<Option<kube::Client>> {
        if self.no_kubernetes {
            return Ok(None);
        }
        let config = match &self.kubeconfig {
            Some(paths) => {
                let kubeconfig = read_kubeconfigs(paths)?;
                kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?
            }
            None => kube::Config::incluster().context(
                "no kubeconfig and not running in a pod: set --kubeconfig (KUBECONFIG) or --no-kubernetes",
            )?,
        };
        Ok(Some(slurmscale_exporter::k8s::client::client(config)?))
    }
}

/// The kubeconfig files of a `KUBECONFIG`-style list, merged in order; as kubectl does, a
/// list skips empty entries and files that do not exist (one path alone must exist).
fn read_kubeconfigs(paths: &std::ffi::OsStr) -> Result<kube::config::Kubeconfig> {
    let listed: Vec<PathBuf> = std::env::split_paths(paths)
        .filter(|p| !p.as_os_str().is_empty())
        .collect();
    let several = listed.len() > 1;
    let mut merged: Option<kube::config::Kubeconfig> = None;
    for path in listed.into_iter().filter(|p| !several || p.exists()) {
        let next = kube::config::Kubeconfig::read_from(&path)
            .with_context(|| format!("reading kubeconfig {}", path.display()))?;
        merged = Some(match merged {
            Some(m) => m
                .merge(next)
                .with_context(|| format!("merging kubeconfig {}", path.display()))?,
            None => next,
        });
    }
    merged.with_context(|| format!("no kubeconfig file in the list {}", paths.to_string_lossy()))
}

/// Where the GenericNode ledger lives (ACK's defaults; Alibaba publishes no schema).
#[derive(Args, Clone)]
#[command(next_help_heading = "GenericNode ledger (ACK colocation)")]
pub struct LedgerArgs {
    /// GenericNode API group.
    #[arg(
        long,
        env = "SLURMSCALE_GENERICNODE_GROUP",
        default_value = "kai.alibabacloud.com"
    )]
    pub genericnode_group: String,
    /// GenericNode API version.
    #[arg(
        long,
        env = "SLURMSCALE_GENERICNODE_VERSION",
        default_value = "v1alpha1"
    )]
    pub genericnode_version: String,
    /// GenericNode kind.
    #[arg(
        long,
        env = "SLURMSCALE_GENERICNODE_KIND",
        default_value = "GenericNode"
    )]
    pub genericnode_kind: String,
    /// GenericNode resource (plural).
    #[arg(
        long,
        env = "SLURMSCALE_GENERICNODE_PLURAL",
        default_value = "genericnodes"
    )]
    pub genericnode_plural: String,
    /// Dotted path to the Slurm node name in a GenericNode.
    #[arg(
        long,
        env = "SLURMSCALE_GENERICNODE_ALIAS_PATH",
        default_value = "spec.alias"
    )]
    pub genericnode_alias_path: String,
    /// Dotted path to the list of {type, allocated} shares.
    #[arg(
        long,
        env = "SLURMSCALE_GENERICNODE_ALLOCATIONS_PATH",
        default_value = "status.allocatedResources"
    )]
    pub genericnode_allocations_path: String,
    /// Dotted path to the admission checks.
    #[arg(
        long,
        env = "SLURMSCALE_GENERICNODE_CHECKS_PATH",
        default_value = "status.admissionChecks"
    )]
    pub genericnode_checks_path: String,
    /// Label holding the Slurm cluster name.
    #[arg(
        long,
        env = "SLURMSCALE_GENERICNODE_CLUSTER_LABEL",
        default_value = "kai.alibabacloud.com/cluster-name"
    )]
    pub genericnode_cluster_label: String,
}

impl LedgerArgs {
    pub fn config(&self) -> slurmscale_exporter::k8s::ledger::LedgerConfig {
        slurmscale_exporter::k8s::ledger::LedgerConfig {
            group: self.genericnode_group.clone(),
            version: self.genericnode_version.clone(),
            kind: self.genericnode_kind.clone(),
            plural: self.genericnode_plural.clone(),
            alias_path: self.genericnode_alias_path.clone(),
            allocations_path: self.genericnode_allocations_path.clone(),
            admission_checks_path: self.genericnode_checks_path.clone(),
            cluster_label: self.genericnode_cluster_label.clone(),
        }
    }
}

#[derive(Args)]
pub struct DemoArgs {
    /// Address to serve /metrics on (port 0: any free port; the URL is printed).
    #[arg(long, env = "SLURMSCALE_LISTEN", default_value = "127.0.0.1:9341")]
    pub listen: SocketAddr,
    /// How long to run, in wall-clock time.
    #[arg(long, env = "SLURMSCALE_DEMO_DURATION", default_value = "5m", value_parser = duration)]
    pub duration: Duration,
    /// Seed of the workload: the same seed replays the same jobs and decisions.
    #[arg(long, env = "SLURMSCALE_DEMO_SEED", default_value_t = 1)]
    pub seed: u64,
    /// Simulated seconds per wall-clock second (1: real time).
    #[arg(long, env = "SLURMSCALE_DEMO_SPEED", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=100))]
    pub speed: u64,
}

/// Where and how /metrics is served.
#[derive(Args, Clone)]
#[command(next_help_heading = "Serving")]
pub struct WebArgs {
    /// Path of the metrics page.
    #[arg(
        long = "web.telemetry-path",
        env = "SLURMSCALE_TELEMETRY_PATH",
        default_value = "/metrics",
        value_parser = telemetry_path
    )]
    pub telemetry_path: String,
    /// Lock /metrics down: a web config file in the Prometheus exporter-toolkit's format
    /// (`tls_server_config` with cert_file, key_file and optionally client_ca_file and
    /// client_auth_type; `basic_auth_users` with bcrypt hashes). Certificates are reloaded
    /// when their files change. /healthz and /readyz need no password (probes).
    #[arg(
        long,
        visible_alias = "web.config.file",
        env = "SLURMSCALE_WEB_CONFIG_FILE"
    )]
    pub web_config_file: Option<PathBuf>,
}

fn telemetry_path(s: &str) -> Result<String, String> {
    let reserved = ["/", "/healthz", "/readyz", "/wake"];
    if !s.starts_with('/') || s.len() < 2 || reserved.contains(&s) {
        return Err(format!(
            "{s:?}: a path starting with '/', other than {}",
            reserved.join(", ")
        ));
    }
    Ok(s.to_string())
}

/// Which metric families to render (node_exporter's `--[no-]collector.NAME`): on a large
/// cluster the per-node series are most of the page.
#[derive(Args, Clone)]
#[command(next_help_heading = "Collectors")]
pub struct CollectorArgs {
    /// Jobs per user and account (one series per user and per account).
    #[arg(
        long,
        visible_alias = "collector.jobs-per-user",
        env = "SLURMSCALE_PER_USER_METRICS"
    )]
    pub per_user_metrics: bool,
    /// No per-node series (`slurm_node_*{node}`); the cluster and partition counts stay.
    #[arg(long = "no-collector.node", env = "SLURMSCALE_NO_COLLECTOR_NODE")]
    pub no_node: bool,
    /// No NodeSet series (Slinky).
    #[arg(long = "no-collector.nodeset", env = "SLURMSCALE_NO_COLLECTOR_NODESET")]
    pub no_nodeset: bool,
    /// No GenericNode ledger series (ACK colocation).
    #[arg(
        long = "no-collector.genericnode",
        env = "SLURMSCALE_NO_COLLECTOR_GENERICNODE"
    )]
    pub no_genericnode: bool,
}

impl CollectorArgs {
    /// What pages render, polled every `interval`.
    pub fn metrics(&self, interval: Duration) -> MetricsOptions {
        let mut skip = Vec::new();
        if self.no_nodeset {
            skip.push("nodeset");
        }
        if self.no_genericnode {
            skip.push("genericnode");
        }
        MetricsOptions {
            per_owner: self.per_user_metrics,
            per_node: !self.no_node,
            skip,
            interval,
        }
    }
}

#[derive(Args)]
pub struct ExporterArgs {
    /// Address to serve /metrics, /healthz and /readyz on.
    #[arg(
        long,
        visible_alias = "web.listen-address",
        env = "SLURMSCALE_LISTEN",
        default_value = "0.0.0.0:9341"
    )]
    pub listen: SocketAddr,
    /// How often to poll slurmrestd (scrapes never trigger a poll).
    #[arg(long, env = "SLURMSCALE_INTERVAL", default_value = "30s", value_parser = duration)]
    pub interval: Duration,
    #[command(flatten)]
    pub web: WebArgs,
    #[command(flatten)]
    pub collectors: CollectorArgs,
    #[command(flatten)]
    pub slurm: SlurmArgs,
    #[command(flatten)]
    pub kube: KubeArgs,
    #[command(flatten)]
    pub ledger: LedgerArgs,
}

#[derive(Args)]
pub struct CheckArgs {
    /// A /metrics URL of the exporter or of an autoscaler replica (repeatable).
    #[arg(long)]
    pub metrics: Vec<String>,
    /// The autoscaler's Lease, as NAMESPACE/NAME: it must have a holder that renewed it
    /// within its duration.
    #[arg(long)]
    pub lease: Option<String>,
    /// Accept any certificate from an https /metrics (the check is of the service, not of
    /// its certificate).
    #[arg(long)]
    pub insecure_skip_verify: bool,
    /// How long each request may take.
    #[arg(long, default_value = "10s", value_parser = duration)]
    pub timeout: Duration,
    #[command(flatten)]
    pub kube: KubeArgs,
}

#[derive(Args)]
pub struct AutoscalerArgs {
    /// Address to serve /metrics, /healthz, /readyz and /wake on.
    #[arg(
        long,
        visible_alias = "web.listen-address",
        env = "SLURMSCALE_LISTEN",
        default_value = "0.0.0.0:9342"
    )]
    pub listen: SocketAddr,
    #[command(flatten)]
    pub web: WebArgs,
    /// How often to poll slurmrestd and decide (jobs and partitions use update_time, so
    /// unchanged polls are cheap).
    #[arg(long, env = "SLURMSCALE_INTERVAL", default_value = "2s", value_parser = duration)]
    pub interval: Duration,
    /// Decide and report (status, Events, metrics) but never change a target.
    #[arg(long, env = "SLURMSCALE_DRY_RUN")]
    pub dry_run: bool,
    /// Namespace of the Lease that elects the one replica allowed to act.
    #[arg(
        long,
        env = "SLURMSCALE_LEADER_ELECTION_NAMESPACE",
        default_value = "default"
    )]
    pub leader_election_namespace: String,
    /// Name of that Lease.
    #[arg(
        long,
        env = "SLURMSCALE_LEADER_ELECTION_LEASE",
        default_value = "slurmscale-autoscaler"
    )]
    pub leader_election_lease: String,
    /// How long a leader's lease lasts without renewal (a standby takes over after it).
    #[arg(long, env = "SLURMSCALE_LEADER_ELECTION_DURATION", default_value = "15s", value_parser = duration)]
    pub leader_election_duration: Duration,
    /// This replica's name in the Lease (default: host name and process id).
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,
    /// Deadline of each Kubernetes read and write (watches excepted): a slow API server costs
    /// this, never a hung controller.
    #[arg(long, env = "SLURMSCALE_KUBE_TIMEOUT", default_value = "30s", value_parser = duration)]
    pub kube_timeout: Duration,
    /// `scontrol` used to drain and resume nodes on Slurm 22.05, which has no REST node update
    /// (colocation only; default: `scontrol` on PATH).
    #[arg(long, env = "SLURMSCALE_SCONTROL")]
    pub scontrol: Option<PathBuf>,
    /// `SLURM_CONF` for that `scontrol`.
    #[arg(long, env = "SLURMSCALE_SCONTROL_CONF")]
    pub scontrol_conf: Option<PathBuf>,
    /// Also serve every metric the exporter serves (Slurm, NodeSets, GenericNodes), from
    /// this process's own polling: run instead of the exporter, Slurm is polled once. Only
    /// the leader serves them (a standby's would be stale); its own health it always serves.
    /// The collector switches below apply to them.
    #[arg(long, env = "SLURMSCALE_EXPORTER_METRICS")]
    pub exporter_metrics: bool,
    #[command(flatten)]
    pub collectors: CollectorArgs,
    #[command(flatten)]
    pub slurm: SlurmArgs,
    #[command(flatten)]
    pub kube: KubeArgs,
    #[command(flatten)]
    pub ledger: LedgerArgs,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum PodFormatArg {
    /// openb when the header has cpu_milli and creation_time, else the generic CSV.
    Auto,
    /// Alibaba's GPU-cluster pod list (`openb_pod_list_*.csv`).
    Openb,
    /// name,submit_s,run_s,cpus,memory_mib,gpus[,priority], in any order, with a header.
    Csv,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum KubeScoring {
    /// Spread: the node with the most room left (kube-scheduler's default).
    LeastAllocated,
    /// Pack: the node with the least room left, so nodes empty out for Slurm.
    MostAllocated,
}

impl From<KubeScoring> for slurmscale_sim::kube::Scoring {
    fn from(k: KubeScoring) -> Self {
        match k {
            KubeScoring::LeastAllocated => Self::LeastAllocated,
            KubeScoring::MostAllocated => Self::MostAllocated,
        }
    }
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Workload {
    /// The demo's burst-partition jobs (`--seed`, `--duration`).
    Demo,
}

/// Node memory: `64G`, `512M`, or MiB.
fn memory_mib(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (digits, scale) = match s.char_indices().last() {
        Some((i, 'G' | 'g')) => (&s[..i], 1024),
        Some((i, 'T' | 't')) => (&s[..i], 1024 * 1024),
        Some((i, 'M' | 'm')) => (&s[..i], 1),
        _ => (s, 1),
    };
    digits
        .parse::<u64>()
        .map(|n| n * scale)
        .map_err(|_| format!("{s:?} is not a memory size (64G, 512M, or MiB)"))
}

#[derive(Args)]
pub struct SimulateArgs {
    /// The trace to replay: SWF (`.swf`, `.swf.gz`) or a sacct export (see docs/simulate.md).
    #[arg(long, conflicts_with = "workload")]
    pub trace: Option<PathBuf>,
    /// The trace's format; `auto` tells it from the file's name or first line.
    #[arg(long, default_value = "auto", value_parser = trace_format())]
    pub format: TraceFormat,
    /// Generate the jobs instead of reading them.
    #[arg(long, value_enum)]
    pub workload: Option<Workload>,
    /// Seed of `--workload demo`.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Length of `--workload demo` (simulated time).
    #[arg(long, default_value = "1d", value_parser = duration)]
    pub duration: Duration,
    /// CPUs per node (default: the SWF header's MaxProcs / MaxNodes).
    #[arg(long)]
    pub node_cpus: Option<u32>,
    /// Memory per node (64G, 512M, or MiB); 0 leaves memory out of packing.
    #[arg(long = "node-memory", default_value = "0", value_parser = memory_mib)]
    pub node_memory_mib: u64,
    /// GPUs per node.
    #[arg(long, default_value_t = 0)]
    pub node_gpus: u32,
    /// Nodes the partition may have (default: the SWF header's MaxNodes).
    #[arg(long)]
    pub max_nodes: Option<u32>,
    /// Replay only the jobs that ran in these partitions (sacct's Partition; SWF field 16, by
    /// the name its header gives, else the number), as the NodeSet serving them would see
    /// them. Give --max-nodes and --node-cpus for that partition: an SWF header describes the
    /// whole machine.
    #[arg(long, value_delimiter = ',')]
    pub partition: Vec<String>,
    /// A NodeSet of the replayed partition, `NAME,cpus=N,nodes=N[,gpus=N][,memory=MiB]
    /// [,weight=N][,partition=P]`; repeat it for a partition over several, in the order its
    /// `Nodes=` lists them. Each has a NodeSetAutoscaler of its own, and --policies names how
    /// they choose which NodeSet grows for a job (slurm-order, every-fit, first-fit; default
    /// all three). Jobs of the trace's partition P ask for that NodeSet's shape (the first's
    /// otherwise); with no --partition, the partitions the NodeSets name are replayed.
    #[arg(long, conflicts_with_all = ["pods", "node_cpus", "max_nodes", "node_gpus"])]
    pub nodeset: Vec<slurmscale_sim::nodesets::NodeSetSpec>,
    /// From asking for a node to its slurmd taking jobs (pod start + registration)
    /// [default: 90s; the demo's 8s with --workload demo].
    #[arg(long, value_parser = duration)]
    pub boot_time: Option<Duration>,
    /// Policies to compare: of a NodeSet (default: builtin, keda, keda-desired, power-save,
    /// slurm-planned, static; builtin-just-in-time and slurm-planned-just-in-time when
    /// named), or with --pods, ways of sharing the pool (default: builtin, static,
    /// static-best, slurm-first, first-come, oracle). Comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub policies: Vec<String>,
    /// A Kubernetes pod log to replay with the jobs on one pool shared by Slurm and
    /// Kubernetes (--max-nodes nodes of --node-cpus, --node-memory, --node-gpus): Alibaba's
    /// openb pod list or a CSV of name,submit_s,run_s,cpus,memory_mib,gpus[,priority].
    #[arg(long)]
    pub pods: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "auto")]
    pub pod_format: PodFormatArg,
    /// The moment of the pod log (seconds or an offset such as 100d from its start) laid on
    /// the start of the job replay (default: its first pod).
    #[arg(long)]
    pub pods_from: Option<slurmscale_sim::trace::When>,
    /// Replay each pod this many times (a fraction thins the log), to load the pool's
    /// Kubernetes side as a site's would be.
    #[arg(long, default_value_t = 1.0)]
    pub pods_scale: f64,
    /// With --pods: how the simulated kube-scheduler places pods among the nodes they fit
    /// (its NodeResourcesFit scoring strategy).
    #[arg(long, value_enum, default_value = "least-allocated")]
    pub kube_scoring: KubeScoring,
    /// With --pods: the share of the pool Slurm holds at the start, and always under `static`.
    #[arg(long, default_value_t = 0.5)]
    pub split: f64,
    /// A NodeSetAutoscaler manifest whose spec `builtin` runs (default: the CRD's defaults,
    /// scale to zero, maxReplicas = --max-nodes; with --workload demo, the demo's burst one).
    #[arg(long)]
    pub autoscaler: Option<PathBuf>,
    /// Replay jobs submitted from this date (2012-03-08[T06:00:00], UTC) or offset (30d).
    #[arg(long)]
    pub from: Option<slurmscale_sim::trace::When>,
    /// ... and before this date or offset from the first job.
    #[arg(long)]
    pub until: Option<slurmscale_sim::trace::When>,
    /// At most this many jobs.
    #[arg(long)]
    pub limit_jobs: Option<usize>,
    /// Write the timeline (CSV), the plot (SVG) and the rows (JSON) here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print the rows as JSON (and no progress bar).
    #[arg(long)]
    pub json: bool,
    /// Count and report malformed trace lines instead of stopping at the first.
    #[arg(long)]
    pub skip_bad_lines: bool,
    /// `keda`: pending jobs per replica (the guide's `threshold`).
    #[arg(long, default_value_t = 5.0)]
    pub keda_threshold: f64,
    /// `keda`, `keda-desired`: the HPA's scale-up tolerance (`behavior.scaleUp.tolerance`,
    /// Kubernetes 1.33 on; `examples/keda` sets 0). The default is the HPA's fixed 10 %.
    #[arg(long, default_value_t = slurmscale_sim::rivals::TOLERANCE)]
    pub keda_up_tolerance: f64,
    /// `power-save`: Slurm's SuspendTime.
    #[arg(long, default_value = "600s", value_parser = duration)]
    pub suspend_time: Duration,
}

/// `--format`: one of `simulate::formats`, or `None` for auto (a struct, not an `Option`,
/// which clap would take for an optional flag).
#[derive(Clone, Copy, Debug)]
pub struct TraceFormat(pub Option<Format>);

fn trace_format() -> impl clap::builder::TypedValueParser<Value = TraceFormat> {
    use clap::builder::TypedValueParser;
    let names = Format::ALL.map(Format::name).into_iter().chain(["auto"]);
    clap::builder::PossibleValuesParser::new(names).map(|s| TraceFormat(s.parse().ok()))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    fn exporter(args: &[&str]) -> Box<ExporterArgs> {
        let argv = ["slurmscale", "exporter"].iter().chain(args);
        match Cli::try_parse_from(argv).map(|c| c.command) {
            Ok(Command::Exporter(e)) => e,
            Ok(_) => panic!("not the exporter"),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn the_names_prometheus_exporters_share_work_too() {
        let e = exporter(&[
            "--web.listen-address",
            "127.0.0.1:9999",
            "--web.telemetry-path",
            "/slurm",
            "--web.config.file",
            "web.yml",
            "--collector.jobs-per-user",
            "--no-collector.node",
            "--no-collector.genericnode",
        ]);
        assert_eq!(e.listen.port(), 9999);
        assert_eq!(e.web.telemetry_path, "/slurm");
        assert_eq!(e.web.web_config_file.as_deref(), Some("web.yml".as_ref()));
        let m = e.collectors.metrics(Duration::from_secs(2));
        assert!(m.per_owner && !m.per_node);
        assert_eq!(m.skip, ["genericnode"]);
        let cli = Cli::try_parse_from(["slurmscale", "--log.level", "debug", "demo"]).unwrap();
        assert_eq!(cli.log.log, "debug");
        // The defaults: everything on but per-user series, at /metrics.
        let e = exporter(&[]);
        let m = e.collectors.metrics(Duration::from_secs(2));
        assert!(!m.per_owner && m.per_node && m.skip.is_empty());
        assert_eq!(e.web.telemetry_path, "/metrics");
    }

    #[test]
    fn a_telemetry_path_must_not_hide_the_probes() {
        for bad in ["metrics", "/", "/healthz", "/readyz", "/wake"] {
            let argv = ["slurmscale", "exporter", "--web.telemetry-path", bad];
            assert!(Cli::try_parse_from(argv).is_err(), "{bad}");
        }
    }

    #[test]
    fn help_groups_the_flags_under_headings() {
        let mut cmd = Cli::command();
        // Global flags (logging) reach the subcommands when the command is built.
        cmd.build();
        let help = cmd
            .find_subcommand_mut("exporter")
            .unwrap()
            .render_long_help()
            .to_string();
        // The heading a flag is listed under: the last heading line above it.
        let heading_of = |flag: &str| {
            let mut heading = None;
            for line in help.lines() {
                if !line.starts_with(' ') && line.ends_with(':') {
                    heading = Some(line.trim_end_matches(':').to_string());
                }
                let rest = line.trim_start().strip_prefix(flag);
                if rest.is_some_and(|r| r.is_empty() || r.starts_with([' ', ','])) {
                    return heading;
                }
            }
            panic!("no {flag} in\n{help}")
        };
        for (flag, heading) in [
            ("--web.telemetry-path", "Serving"),
            ("--no-collector.node", "Collectors"),
            ("--token-file", "Slurm"),
            ("--request-max-jobs", "Slurm"),
            ("--kubeconfig", "Kubernetes"),
            ("--genericnode-group", "GenericNode ledger (ACK colocation)"),
            ("--log", "Logging"),
        ] {
            assert_eq!(
                heading_of(flag).as_deref(),
                Some(heading),
                "{flag} in\n{help}"
            );
        }
        // Secrets' values never shown.
        assert!(!help.contains("SLURMSCALE_JWT="));
    }
}
