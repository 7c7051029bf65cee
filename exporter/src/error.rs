//! The one error type of this crate. Each variant says what failed in words an operator can
//! act on and maps to a bounded `kind` for the `slurm_exporter_errors_total` counter. None of
//! them ever carries a token or a key: tokens travel in headers, never in URLs, and token
//! errors describe the file, not its content.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    #[error("{endpoint}: cannot connect to slurmrestd: {message}")]
    Connect { endpoint: String, message: String },

    #[error("{endpoint}: slurmrestd did not answer in time ({message})")]
    Timeout { endpoint: String, message: String },

    #[error("{endpoint}: transfer from slurmrestd failed: {message}")]
    Transport { endpoint: String, message: String },

    #[error("{endpoint}: slurmrestd rejected the token (HTTP {status}): {detail}")]
    Auth {
        endpoint: String,
        status: u16,
        detail: String,
    },

    #[error("{endpoint}: slurmrestd answered HTTP {status}: {detail}")]
    Http {
        endpoint: String,
        status: u16,
        detail: String,
    },

    /// A 2xx answer whose `errors[]` is not empty: it must not be trusted (slurm-operator
    /// PR #79 deleted pods that ran jobs by treating this as success).
    #[error("{endpoint}: slurmrestd answered HTTP {status} but reported errors: {detail}")]
    SlurmErrors {
        endpoint: String,
        status: u16,
        detail: String,
    },

    #[error("{endpoint}: cannot decode the {version} answer: {message}")]
    Decode {
        endpoint: String,
        version: String,
        message: String,
    },

    #[error("no slurmrestd API version we support answers at {url} (tried {tried})")]
    NoVersion { url: String, tried: String },

    #[error("token: {0}")]
    Token(String),

    #[error("configuration: {0}")]
    Config(String),

    #[error("cannot render CRD {name}: {message}")]
    CrdRender { name: String, message: String },

    #[error("Kubernetes: {0}")]
    Kube(#[from] kube::Error),

    #[error("HTTP server: {0}")]
    Serve(#[from] std::io::Error),
}

impl Error {
    /// Whether slurmrestd turned the request away before doing its work: it could not be
    /// reached, answered an HTTP error (as it does at once, or after its own connect retries,
    /// while slurmctld is down) or refused the token. Trying again costs it nothing, so such
    /// a failure does not stretch the poll cadence the way a slow answer does.
    pub fn turned_away(&self) -> bool {
        matches!(
            self,
            Self::Connect { .. }
                | Self::Http { .. }
                | Self::Auth { .. }
                | Self::Token(_)
                | Self::NoVersion { .. }
        )
    }

    /// slurmrestd does not serve the path asked (404): its plugin for it is not loaded.
    pub fn not_served(&self) -> bool {
        matches!(self, Self::Http { status: 404, .. })
    }

    /// A path every slurmrestd of the API version in use serves is not served: evidence the
    /// server changed (upgraded, or restarted with other plugins), so the version is probed
    /// again. Accounting (`/slurmdb/…`, endpoints named `slurmdb_*`) is optional — many sites
    /// run slurmrestd without its slurmdbd plugin — so its 404 is no such evidence.
    pub fn version_gone(&self) -> bool {
        matches!(self, Self::Http { status: 404, endpoint, .. } if !endpoint.starts_with("slurmdb"))
    }

    /// A bounded label value for error counters.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Connect { .. } => "connect",
            Self::Timeout { .. } => "timeout",
            Self::Transport { .. } => "transport",
            Self::Auth { .. } | Self::Token(_) => "auth",
            Self::Http { .. } => "http",
            Self::SlurmErrors { .. } => "slurm_errors",
            Self::Decode { .. } => "decode",
            Self::NoVersion { .. } => "version",
            Self::Config(_) | Self::CrdRender { .. } => "config",
            Self::Kube(_) => "kubernetes",
            Self::Serve(_) => "server",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
