//! The autoscaler library's error type. Kubernetes answers are classified so the controller
//! can tell what to retry at once (409: re-read and decide again), what to back off from
//! (429, 5xx, transport, timeouts) and what to report and leave (404, 403, invalid targets).
//! A write refused for want of a valid lease is `not_leader`: nothing to report, a standby
//! acts by then.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    #[error("Kubernetes: {0}")]
    Kube(#[from] kube::Error),

    /// A Kubernetes request not answered within `--kube-timeout` (abandoned).
    #[error("Kubernetes: {0} not answered within {1:?}")]
    KubeTimeout(&'static str, std::time::Duration),

    /// A write not sent, or abandoned unanswered, because the lease may no longer be ours:
    /// a standby may be acting by then.
    #[error("{0} not sent: this replica's lease may have run out")]
    NotLeader(&'static str),

    #[error("scale target {0}: {1}")]
    Target(String, String),

    #[error("Slurm cluster {0:?} is not one this autoscaler reads")]
    UnknownCluster(String),

    /// What Slurm is needed for cannot be read (yet): the reason, as a sentence.
    #[error("no Slurm data to act on: {0}")]
    NoSlurm(String),

    #[error(transparent)]
    Exporter(#[from] slurmscale_exporter::Error),
}

impl Error {
    /// A bounded label value for error counters.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Kube(kube::Error::Api(e)) => match e.code {
                409 => "conflict",
                429 => "throttled",
                404 => "not_found",
                403 => "forbidden",
                c if c >= 500 => "server",
                _ => "rejected",
            },
            Self::Kube(_) => "transport",
            Self::KubeTimeout(..) => "timeout",
            Self::NotLeader(_) => "not_leader",
            Self::Target(..) => "target",
            Self::UnknownCluster(_) => "config",
            Self::NoSlurm(_) => "slurm",
            Self::Exporter(e) => e.kind(),
        }
    }

    /// Worth retrying after a pause (the server was busy or unreachable).
    pub fn is_transient(&self) -> bool {
        matches!(
            self.kind(),
            "throttled" | "server" | "transport" | "timeout"
        )
    }

    pub fn is_conflict(&self) -> bool {
        self.kind() == "conflict"
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
