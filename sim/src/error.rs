//! The simulated world's error type: what a trace, a pod log or a replay's options can get
//! wrong, said with the file, line and field, and what the real controller running inside it
//! reports.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    #[error("{}: {source}", path.display())]
    Io {
        path: std::path::PathBuf,
        source: std::io::Error,
    },

    /// A trace line `simulate` cannot read: the file, the 1-based line and the field.
    #[error("{}:{line}: {field}: {message}", file.display())]
    Trace {
        file: std::path::PathBuf,
        line: usize,
        field: &'static str,
        message: String,
    },

    /// A simulation that cannot run as asked (an empty trace, a bad option).
    #[error("simulate: {0}")]
    Simulate(String),

    /// The controller (run on the in-memory seam) refused or failed.
    #[error(transparent)]
    Autoscaler(#[from] slurmscale_autoscaler::error::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
