//! The HTTP side of talking to slurmrestd: one client per cluster, every request through a
//! governor rate limiter (each call takes slurmctld locks; a 20k-job `/jobs` costs seconds of
//! controller time), timeouts, TLS verified by default with an optional extra CA, and the
//! token attached from its [`TokenSource`]. It returns raw bytes; decoding and the
//! "2xx *and* empty `errors[]`" rule live in [`super::fetch`].

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use reqwest::StatusCode;

use super::auth::TokenSource;
use super::versions::{ApiVersion, Endpoint};
use super::wire;
use crate::error::{Error, Result};
use crate::histogram::Histogram;

#[derive(Clone, Debug)]
pub struct ClientOptions {
    pub url: String,
    pub user: String,
    /// Whole-request timeout; generous, since 20k jobs take 10-20 s before the first byte.
    pub timeout: Duration,
    pub connect_timeout: Duration,
    /// An extra CA certificate (PEM) to trust for an https slurmrestd.
    pub ca_file: Option<PathBuf>,
    /// Upstream requests per second, averaged; bursts of `burst` are allowed.
    pub max_requests_per_second: NonZeroU32,
    pub burst: NonZeroU32,
    /// Whether the reads of a job list's start ([`SlurmClient::get_job_reading_through`])
    /// wait for the rate limit too: only when a site set the limit itself.
    pub limit_start: bool,
}

impl ClientOptions {
    pub fn new(url: impl Into<String>, user: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            user: user.into(),
            timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(5),
            ca_file: None,
            max_requests_per_second: NonZeroU32::new(2).unwrap_or(NonZeroU32::MIN),
            burst: NonZeroU32::new(Endpoint::ALL.len() as u32).unwrap_or(NonZeroU32::MIN),
            limit_start: true,
        }
    }
}

/// What a GET brought back.
#[derive(Debug)]
pub enum Fetched {
    /// A 2xx body, still to be decoded and checked for `errors[]`.
    Body { status: u16, bytes: Bytes },
    /// 304: nothing changed since the `update_time` we sent.
    NotModified,
}

/// How much longer than other requests a full `/jobs` may take.
pub const JOBS_TIMEOUT_FACTOR: u32 = 5;

pub struct SlurmClient {
    http: reqwest::Client,
    timeout: Duration,
    base: String,
    user: String,
    token: Arc<TokenSource>,
    limiter: DefaultDirectRateLimiter,
    limit_start: bool,
    /// Time slurmrestd took for each request we made, by endpoint: what we cost it.
    stats: Mutex<BTreeMap<&'static str, Histogram>>,
}

/// Request durations, from a few milliseconds (ping, one job) to minutes (a 100,000-job
/// `/jobs`).
pub const REQUEST_SECONDS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

impl std::fmt::Debug for SlurmClient {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.debug_struct("SlurmClient")
            .field("base", &self.base)
            .field("user", &self.user)
            .finish()
    }
}

impl SlurmClient {
    pub fn new(opts: &ClientOptions, token: Arc<TokenSource>) -> Result<Self> {
        let mut builder = reqwest::Client::builder()
            .timeout(opts.timeout)
            .connect_timeout(opts.connect_timeout)
            .user_agent(concat!("slurmscale/", env!("CARGO_PKG_VERSION")));
        if let Some(ca) = &opts.ca_file {
            let pem = std::fs::read(ca)
                .map_err(|e| Error::Config(format!("cannot read CA file {}: {e}", ca.display())))?;
            let cert = reqwest::Certificate::from_pem(&pem).map_err(|e| {
                Error::Config(format!(
                    "CA file {} is not a PEM certificate: {e}",
                    ca.display()
                ))
            })?;
            builder = builder.add_root_certificate(cert);
        }
        let http = builder
            .build()
            .map_err(|e| Error::Config(format!("HTTP client: {e}")))?;
        let base = opts.url.trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(Error::Config(format!(
                "slurmrestd URL {base:?} must start with http:// or https://"
            )));
        }
        let quota = Quota::per_second(opts.max_requests_per_second).allow_burst(opts.burst);
        Ok(Self {
            http,
            timeout: opts.timeout,
            base,
            user: opts.user.clone(),
            token,
            limiter: RateLimiter::direct(quota),
            limit_start: opts.limit_start,
            stats: Mutex::default(),
        })
    }

    /// Request durations so far, by endpoint (`job` for single jobs, `node` for updates).
    pub fn request_stats(&self) -> BTreeMap<&'static str, Histogram> {
        self.stats.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn record(&self, endpoint: &'static str, took: Duration) {
        self.stats
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(endpoint)
            .or_insert_with(|| Histogram::new(REQUEST_SECONDS))
            .observe(took.as_secs_f64());
    }

    pub fn url(&self) -> &str {
        &self.base
    }

    /// GET `/slurm/<version>/<endpoint>`, optionally `?update_time=<unix seconds>`, after
    /// waiting for the rate limiter.
    pub async fn get(
        &self,
        version: ApiVersion,
        endpoint: Endpoint,
        update_time: Option<i64>,
    ) -> Result<Fetched> {
        self.limiter.until_ready().await;
        let started = Instant::now();
        let result = self.get_now(version, endpoint, update_time).await;
        self.record(endpoint.as_str(), started.elapsed());
        result
    }

    /// GET `/slurm/<version>/<path>` (an endpoint that is not one of [`Endpoint::ALL`],
    /// e.g. `jobs/state/`), after waiting for the rate limiter; `name` labels its errors and
    /// its request timings.
    pub async fn get_path(
        &self,
        version: ApiVersion,
        path: &str,
        name: &'static str,
    ) -> Result<Fetched> {
        self.get_url(format!("{}/slurm/{version}/{path}", self.base), name)
            .await
    }

    /// GET `/slurmdb/<version>/<path>` (slurmdbd's accounting, through slurmrestd), as
    /// [`Self::get_path`].
    pub async fn get_accounting(
        &self,
        version: ApiVersion,
        path: &str,
        name: &'static str,
    ) -> Result<Fetched> {
        self.get_url(format!("{}/slurmdb/{version}/{path}", self.base), name)
            .await
    }

    async fn get_url(&self, url: String, name: &'static str) -> Result<Fetched> {
        self.limiter.until_ready().await;
        let started = Instant::now();
        let result = self.send(self.http.get(&url), name).await;
        self.record(name, started.elapsed());
        result
    }

    /// GET `/slurm/<version>/job/<id>` after waiting for the rate limiter. Any HTTP status
    /// comes back with its body (an unknown job is an error *inside* the answer, with a 500
    /// on some versions), except auth failures, which are errors as everywhere.
    pub async fn get_job(&self, version: ApiVersion, id: u64) -> Result<(u16, Bytes)> {
        self.limiter.until_ready().await;
        let started = Instant::now();
        let result = self.get_job_now(version, id).await;
        self.record("job", started.elapsed());
        result
    }

    /// [`Self::get_job`] for a job list's start, read id by id back to back (one request at
    /// a time): the default rate limit, sized for a collection's few requests, would stretch
    /// a 100,000-job start to hours, so only a limit the site set applies.
    pub async fn get_job_reading_through(
        &self,
        version: ApiVersion,
        id: u64,
    ) -> Result<(u16, Bytes)> {
        if self.limit_start {
            self.limiter.until_ready().await;
        }
        let started = Instant::now();
        let result = self.get_job_now(version, id).await;
        self.record("job", started.elapsed());
        result
    }

    async fn get_job_now(&self, version: ApiVersion, id: u64) -> Result<(u16, Bytes)> {
        let url = format!("{}/slurm/{version}/job/{id}", self.base);
        let token = self.token.token()?;
        let resp = self
            .http
            .get(&url)
            .header("X-SLURM-USER-NAME", &self.user)
            .header("X-SLURM-USER-TOKEN", token.expose())
            .header("Accept", "application/json")
            .send()
            .await
            .map_err(|e| transport_error("job", &e))?;
        let status = resp.status().as_u16();
        let bytes = read_body(resp)
            .await
            .map_err(|e| transport_error("job", &e))?;
        if !(200..300).contains(&status) {
            let messages = wire::decode_errors(&bytes);
            if is_auth_failure(status, &messages) {
                self.token.invalidate();
                return Err(Error::Auth {
                    endpoint: "job".into(),
                    status,
                    detail: wire::describe(&messages),
                });
            }
        }
        Ok((status, bytes))
    }

    /// GET without waiting for the rate limiter: only for version probes, whose misses are
    /// 404s slurmrestd answers without asking slurmctld.
    pub async fn get_now(
        &self,
        version: ApiVersion,
        endpoint: Endpoint,
        update_time: Option<i64>,
    ) -> Result<Fetched> {
        let mut url = format!("{}/slurm/{version}/{endpoint}", self.base);
        if let Some(t) = update_time {
            url.push_str(&format!("?update_time={t}"));
        }
        let mut request = self.http.get(&url);
        if endpoint == Endpoint::Jobs {
            // A full /jobs of 100,000 jobs takes slurmrestd minutes before the first byte;
            // the poller only asks for one when its budget allows, so let it finish.
            request = request.timeout(self.timeout * JOBS_TIMEOUT_FACTOR);
        }
        self.send(request, endpoint.as_str()).await
    }

    /// POSTs a JSON body to `/slurm/<version>/<path>` (node updates); succeeds only on 2xx
    /// with no `errors[]`. The autoscaler's Slurm node writes (`slurm_nodes`) use it; the
    /// exporter never does.
    pub async fn post_json(
        &self,
        version: ApiVersion,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<()> {
        let url = format!("{}/slurm/{version}/{path}", self.base);
        self.command(self.http.post(&url).json(body), path, "node")
            .await
    }

    /// GETs `/slurm/<version>/<path>` for what it does, not for data (`reconfigure/`, v0.0.40
    /// on); succeeds as [`Self::post_json`] does.
    pub async fn get_command(&self, version: ApiVersion, path: &str) -> Result<()> {
        let url = format!("{}/slurm/{version}/{path}", self.base);
        self.command(self.http.get(&url), path, "command").await
    }

    /// Sends a command after waiting for the rate limiter, its time recorded as `name`: done
    /// on 2xx (or 304) with no `errors[]`, else what Slurm said.
    async fn command(
        &self,
        request: reqwest::RequestBuilder,
        path: &str,
        name: &'static str,
    ) -> Result<()> {
        self.limiter.until_ready().await;
        let started = Instant::now();
        let sent = self.send(request, path).await;
        self.record(name, started.elapsed());
        match sent? {
            Fetched::NotModified => Ok(()),
            Fetched::Body { status, bytes } => {
                let messages = wire::decode_errors(&bytes);
                if messages.is_empty() {
                    Ok(())
                } else {
                    Err(Error::SlurmErrors {
                        endpoint: path.into(),
                        status,
                        detail: wire::describe(&messages),
                    })
                }
            }
        }
    }

    /// Sends with the credentials and sorts the answer: 2xx body, 304, or an error.
    async fn send(&self, request: reqwest::RequestBuilder, name: &str) -> Result<Fetched> {
        let token = self.token.token()?;
        let resp = request
            .header("X-SLURM-USER-NAME", &self.user)
            .header("X-SLURM-USER-TOKEN", token.expose())
            .header("Accept", "application/json")
            .send()
            .await
            .map_err(|e| transport_error(name, &e))?;
        let status = resp.status();
        if status == StatusCode::NOT_MODIFIED {
            return Ok(Fetched::NotModified);
        }
        let bytes = read_body(resp)
            .await
            .map_err(|e| transport_error(name, &e))?;
        if status.is_success() {
            return Ok(Fetched::Body {
                status: status.as_u16(),
                bytes,
            });
        }
        let messages = wire::decode_errors(&bytes);
        let detail = if messages.is_empty() {
            String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
                .trim()
                .to_string()
        } else {
            wire::describe(&messages)
        };
        let code = status.as_u16();
        // Any refusal may mean a rotated or expired token (22.05 answers a bad token with a
        // bare 500): read or sign a fresh one next time; it costs a stat or a signature.
        self.token.invalidate();
        if is_auth_failure(code, &messages) {
            return Err(Error::Auth {
                endpoint: name.into(),
                status: code,
                detail,
            });
        }
        Err(Error::Http {
            endpoint: name.into(),
            status: code,
            detail,
        })
    }

    /// The token was refused inside a 2xx answer: sign or read a fresh one next time.
    pub fn invalidate_token(&self) {
        self.token.invalidate();
    }
}

/// 401/403/511, or 500 carrying Slurm's "Protocol authentication error" (1007) as 22.05
/// answers an expired or forged token.
pub fn is_auth_failure(status: u16, messages: &[wire::Message]) -> bool {
    matches!(status, 401 | 403 | 511) || messages.iter().any(|m| m.error_number == Some(1007))
}

/// Reads the whole body into one buffer sized from Content-Length when the server sends it,
/// so a 500 MB `/jobs` is not copied while growing.
async fn read_body(mut resp: reqwest::Response) -> reqwest::Result<Bytes> {
    // Cap the pre-allocation: Content-Length is the server's claim, not a fact.
    let hint = resp.content_length().unwrap_or(0).min(4 << 30) as usize;
    let mut buf = BytesMut::with_capacity(hint);
    while let Some(chunk) = resp.chunk().await? {
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.freeze())
}

fn transport_error(endpoint: &str, e: &reqwest::Error) -> Error {
    // reqwest's Display includes the URL, which holds no secret (the token is a header).
    let message = error_chain(e);
    if e.is_timeout() {
        Error::Timeout {
            endpoint: endpoint.into(),
            message,
        }
    } else if e.is_connect() {
        Error::Connect {
            endpoint: endpoint.into(),
            message,
        }
    } else {
        Error::Transport {
            endpoint: endpoint.into(),
            message,
        }
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}
