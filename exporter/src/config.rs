//! Which Slurm clusters to read and how to authenticate, from a YAML file (several clusters)
//! or built by the CLI from flags and environment variables (one cluster: a URL and a token
//! are enough). Unknown keys in the file are errors: a typo must not silently fall back to a
//! default.

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::slurm::{ApiVersion, ClientOptions, SigningAlgorithm, TokenSource};

/// How one cluster's token is obtained.
#[derive(Clone, Debug, PartialEq)]
pub enum AuthConfig {
    /// A fixed token (e.g. from `SLURM_JWT`). Never printed.
    Token(crate::slurm::Secret),
    /// A file holding the token, re-read when it changes.
    TokenFile(PathBuf),
    /// Tokens we sign with a key: HS256 with slurmctld's key, RS256/ES256 with a private key.
    Key {
        path: PathBuf,
        algorithm: SigningAlgorithm,
        lifetime: Duration,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct ClusterConfig {
    /// The `cluster` label of every series.
    pub name: String,
    pub url: String,
    /// `X-SLURM-USER-NAME`, and the `sun` claim of tokens we sign.
    pub user: String,
    pub auth: AuthConfig,
    /// `None`: the newest version slurmrestd serves.
    pub api_version: Option<ApiVersion>,
    pub ca_file: Option<PathBuf>,
    pub timeout: Duration,
    /// `None`: what one collection needs at the poll interval ([`crate::collect`]).
    pub max_requests_per_second: Option<NonZeroU32>,
    /// How to recognise Kubernetes placeholder jobs besides slurm-bridge's own mark.
    pub kubernetes_jobs: crate::model::origin::OriginRules,
}

impl ClusterConfig {
    /// How every client of this cluster talks to slurmrestd: its URL, user, CA, timeout and,
    /// when the user set one, the request limit (a poller then spreads one collection's
    /// requests over the interval within it). One constructor, so no client forgets a
    /// setting.
    pub fn client_options(&self) -> ClientOptions {
        let mut opts = ClientOptions::new(&self.url, &self.user);
        opts.timeout = self.timeout;
        opts.ca_file = self.ca_file.clone();
        if let Some(limit) = self.max_requests_per_second {
            opts.max_requests_per_second = limit;
            opts.burst = opts.burst.min(limit);
        }
        opts.limit_start = self.max_requests_per_second.is_some();
        opts
    }

    pub fn token_source(&self) -> Result<Arc<TokenSource>> {
        Ok(Arc::new(match &self.auth {
            AuthConfig::Token(t) => TokenSource::fixed(t.expose()),
            AuthConfig::TokenFile(p) => TokenSource::file(p),
            AuthConfig::Key {
                path,
                algorithm,
                lifetime,
            } => TokenSource::signed(path, *algorithm, &self.user, *lifetime)?,
        }))
    }
}

/// `30s`, `5m`, `1h`, `250ms`, or plain seconds.
pub fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("invalid duration {s:?} (e.g. 30s, 5m, 1h, 2d)"))?;
    let secs = match unit.trim() {
        "" | "s" => n,
        "ms" => n / 1000.0,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        "d" => n * 86400.0,
        _ => return Err(format!("invalid duration unit in {s:?} (ms, s, m, h or d)")),
    };
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("invalid duration {s:?}"));
    }
    Ok(Duration::from_secs_f64(secs))
}

fn duration<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<Duration>, D::Error> {
    let s: Option<String> = Option::deserialize(d)?;
    s.map(|s| parse_duration(&s).map_err(serde::de::Error::custom))
        .transpose()
}

/// The `clusters.yaml` file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConfigFile {
    #[serde(default, deserialize_with = "duration")]
    pub interval: Option<Duration>,
    pub clusters: Vec<ClusterEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClusterEntry {
    pub name: String,
    pub url: String,
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// Name of an environment variable holding the token (never the token itself).
    #[serde(default)]
    pub token_env: Option<String>,
    #[serde(default)]
    pub jwt_key_file: Option<PathBuf>,
    #[serde(default)]
    pub jwt_algorithm: Option<String>,
    #[serde(default, deserialize_with = "duration")]
    pub jwt_lifetime: Option<Duration>,
    #[serde(default)]
    pub api_version: Option<String>,
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    #[serde(default, deserialize_with = "duration")]
    pub timeout: Option<Duration>,
    #[serde(default)]
    pub max_requests_per_second: Option<u32>,
    /// `FIELD:PATTERN` rules for Kubernetes placeholder jobs ([`crate::model::origin`]).
    #[serde(default)]
    pub kubernetes_jobs: Vec<String>,
}

/// Parses `FIELD:PATTERN` rules ([`crate::model::origin::Rule`]).
pub fn origin_rules(rules: &[String]) -> Result<crate::model::origin::OriginRules> {
    rules
        .iter()
        .map(|r| r.parse().map_err(Error::Config))
        .collect::<Result<Vec<_>>>()
        .map(crate::model::origin::OriginRules)
}

pub const DEFAULT_USER: &str = "slurm";
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
pub const DEFAULT_JWT_LIFETIME: Duration = Duration::from_secs(600);

/// `auto` (or nothing) means probe; anything else must be a version we know.
pub fn parse_api_version(s: Option<&str>) -> Result<Option<ApiVersion>> {
    match s.map(str::trim) {
        None | Some("") | Some("auto") => Ok(None),
        Some(v) => v.parse().map(Some).map_err(Error::Config),
    }
}

impl ClusterEntry {
    pub fn resolve(self) -> Result<ClusterConfig> {
        let name = self.name.clone();
        let bad = |m: String| Error::Config(format!("cluster {name:?}: {m}"));
        let sources = [
            self.token_file.is_some(),
            self.token_env.is_some(),
            self.jwt_key_file.is_some(),
        ];
        let auth = match (self.token_file, self.token_env, self.jwt_key_file) {
            _ if sources.iter().filter(|s| **s).count() > 1 => {
                return Err(bad("set only one of tokenFile, tokenEnv, jwtKeyFile".into()));
            }
            (Some(p), _, _) => AuthConfig::TokenFile(p),
            (_, Some(var), _) => {
                let token = std::env::var(&var)
                    .map_err(|_| bad(format!("environment variable {var} is not set")))?;
                AuthConfig::Token(crate::slurm::Secret::new(token.trim()))
            }
            (_, _, Some(path)) => AuthConfig::Key {
                path,
                algorithm: self
                    .jwt_algorithm
                    .as_deref()
                    .unwrap_or("HS256")
                    .parse()
                    .map_err(bad)?,
                lifetime: self.jwt_lifetime.unwrap_or(DEFAULT_JWT_LIFETIME),
            },
            _ => return Err(bad("no token: set tokenFile, tokenEnv or jwtKeyFile".into())),
        };
        Ok(ClusterConfig {
            api_version: parse_api_version(self.api_version.as_deref())
                .map_err(|e| bad(e.to_string()))?,
            user: self.user.unwrap_or_else(|| DEFAULT_USER.into()),
            auth,
            ca_file: self.ca_file,
            timeout: self.timeout.unwrap_or(DEFAULT_TIMEOUT),
            max_requests_per_second: self
                .max_requests_per_second
                .map(|r| {
                    NonZeroU32::new(r)
                        .ok_or_else(|| bad("maxRequestsPerSecond must be at least 1".into()))
                })
                .transpose()?,
            kubernetes_jobs: origin_rules(&self.kubernetes_jobs).map_err(|e| bad(e.to_string()))?,
            name: self.name,
            url: self.url,
        })
    }
}

/// Reads `clusters.yaml`: the clusters and, if set, the poll interval.
pub fn load(path: &Path) -> Result<(Vec<ClusterConfig>, Option<Duration>)> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::Config(format!("cannot read {}: {e}", path.display())))?;
    let file: ConfigFile = serde_saphyr::from_str(&text)
        .map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
    if file.clusters.is_empty() {
        return Err(Error::Config(format!("{}: no clusters", path.display())));
    }
    let clusters = file
        .clusters
        .into_iter()
        .map(ClusterEntry::resolve)
        .collect::<Result<Vec<_>>>()?;
    let mut names: Vec<&str> = clusters.iter().map(|c| c.name.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(Error::Config(format!(
            "{}: cluster {:?} appears twice",
            path.display(),
            w[0]
        )));
    }
    Ok((clusters, file.interval))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
        assert!(parse_duration("soon").is_err());
        assert_eq!(parse_duration("2d").unwrap(), Duration::from_secs(172_800));
        assert!(parse_duration("5w").is_err());
    }

    #[test]
    fn client_options_carry_every_setting() {
        let mut c = ClusterEntry {
            name: "a".into(),
            url: "https://a:6820".into(),
            user: Some("op".into()),
            token_file: Some("/t".into()),
            token_env: None,
            jwt_key_file: None,
            jwt_algorithm: None,
            jwt_lifetime: None,
            api_version: None,
            ca_file: Some("/ca.pem".into()),
            timeout: Some(Duration::from_secs(7)),
            max_requests_per_second: None,
            kubernetes_jobs: vec!["comment:sunk-*".into()],
        }
        .resolve()
        .unwrap();
        let o = c.client_options();
        assert_eq!((o.url.as_str(), o.user.as_str()), ("https://a:6820", "op"));
        assert_eq!(o.timeout, Duration::from_secs(7));
        assert_eq!(o.ca_file.as_deref(), Some(Path::new("/ca.pem")));
        let default = ClientOptions::new("", "");
        assert_eq!(o.max_requests_per_second, default.max_requests_per_second);
        c.max_requests_per_second = NonZeroU32::new(1);
        let o = c.client_options();
        assert_eq!((o.max_requests_per_second.get(), o.burst.get()), (1, 1));
    }

    /// The example in the repo loads: three clusters, each with its own credentials.
    #[test]
    fn the_example_config_loads() {
        // The checkout this `cargo test` runs in (a shared target dir may hold a build from another).
        let dir = std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(
            || env!("CARGO_MANIFEST_DIR").into(),
            std::path::PathBuf::from,
        );
        let path = dir.join("../examples/config/clusters.yaml");
        let (clusters, interval) = load(&path).unwrap();
        assert_eq!(interval, Some(Duration::from_secs(30)));
        let names: Vec<&str> = clusters.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["prod", "legacy", "cloud"]);
        assert!(matches!(clusters[1].auth, AuthConfig::TokenFile(_)));
        assert!(matches!(clusters[2].auth, AuthConfig::Key { .. }));
    }

    #[test]
    fn a_config_file_with_two_clusters() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("clusters.yaml");
        std::fs::write(
            &path,
            "interval: 15s\nclusters:\n- name: a\n  url: http://a:6820\n  tokenFile: /t\n- name: b\n  url: https://b:6820\n  jwtKeyFile: /k\n  apiVersion: v0.0.42\n",
        )
        .unwrap();
        let (clusters, interval) = load(&path).unwrap();
        assert_eq!(interval, Some(Duration::from_secs(15)));
        assert_eq!(clusters[0].auth, AuthConfig::TokenFile("/t".into()));
        assert_eq!(clusters[1].api_version, Some(ApiVersion::V0042));
        assert!(matches!(
            clusters[1].auth,
            AuthConfig::Key {
                algorithm: SigningAlgorithm::Hs256,
                ..
            }
        ));

        std::fs::write(
            &path,
            "clusters:\n- name: a\n  url: http://a\n  tokenFiel: /t\n",
        )
        .unwrap();
        let err = load(&path).unwrap_err().to_string();
        assert!(err.contains("tokenFiel"), "a typo is named: {err}");
    }
}
