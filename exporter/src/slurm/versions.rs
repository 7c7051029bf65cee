//! The slurmrestd API versions we speak, newest first, and the one place that maps a version
//! to its wire module ([`ApiVersion::wire`]). Adding v0.0.46 = a `wire/v0046.rs` module; here
//! its variant, its place in `ALL`, its name in `as_str` and its arm in `wire` (plus a
//! capability below if it changes one); golden answers; and the hand-written version lists
//! (`--api-version`'s help, docs/exporter.md, values.yaml, values.schema.json —
//! tests/chart.rs checks them against `ALL`).

use std::fmt;
use std::str::FromStr;

use super::wire::{self, Decoded};
use crate::model::job_table::JobTable;
use crate::model::job_table::StateEntry;
use crate::model::{Diag, Jobs, Node, Partition, Ping};

/// Every job's id and state, from `/jobs/state/`.
pub type JobStates = Vec<StateEntry>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ApiVersion {
    V0038,
    V0040,
    V0041,
    V0042,
    V0043,
    V0044,
    V0045,
}

/// The data endpoints a poller fetches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Endpoint {
    Ping,
    Diag,
    Jobs,
    Nodes,
    Partitions,
}

impl Endpoint {
    pub const ALL: [Endpoint; 5] = [
        Self::Ping,
        Self::Diag,
        Self::Jobs,
        Self::Nodes,
        Self::Partitions,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ping => "ping",
            Self::Diag => "diag",
            Self::Jobs => "jobs",
            Self::Nodes => "nodes",
            Self::Partitions => "partitions",
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ApiVersion {
    /// Newest first: the order auto-detection probes in.
    pub const ALL: [ApiVersion; 7] = [
        Self::V0045,
        Self::V0044,
        Self::V0043,
        Self::V0042,
        Self::V0041,
        Self::V0040,
        Self::V0038,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::V0038 => "v0.0.38",
            Self::V0040 => "v0.0.40",
            Self::V0041 => "v0.0.41",
            Self::V0042 => "v0.0.42",
            Self::V0043 => "v0.0.43",
            Self::V0044 => "v0.0.44",
            Self::V0045 => "v0.0.45",
        }
    }

    /// How `update_time` must be written, if this version accepts it at all. v0.0.40 and
    /// v0.0.41 reject unix seconds and want the controller's local time, which we cannot know,
    /// so they always fetch in full.
    pub fn accepts_unix_update_time(self) -> bool {
        !matches!(self, Self::V0040 | Self::V0041)
    }

    /// `POST node/{name}` (drain, resume) exists: v0.0.40 on. Slurm 22.05 has no node write.
    pub fn updates_nodes(self) -> bool {
        self != Self::V0038
    }

    /// slurmdbd's job query takes several ids as one comma list (`jobs?step=a%2Cb`), not the
    /// key repeated (`jobs/?step=a&step=b`): v0.0.38 only; each version refuses the other form.
    pub fn lists_ids_in_one_value(self) -> bool {
        self == Self::V0038
    }

    /// `GET reconfigure/` makes slurmctld load its configuration again: v0.0.40 on.
    pub fn reconfigures(self) -> bool {
        self >= Self::V0040
    }

    /// `POST new/node/` creates node records: v0.0.44 (Slurm 25.11) on.
    pub fn creates_nodes(self) -> bool {
        self >= Self::V0044
    }

    /// The wire module of this version: the one place a version maps to its decoders.
    fn wire(self) -> &'static Decoders {
        match self {
            Self::V0038 => &decoders!(v0038, None),
            Self::V0040 => &decoders!(v0040),
            Self::V0041 => &decoders!(v0041),
            Self::V0042 => &decoders!(v0042),
            Self::V0043 => &decoders!(v0043),
            Self::V0044 => &decoders!(v0044),
            Self::V0045 => &decoders!(v0045),
        }
    }

    pub fn decode_ping(self, b: &[u8]) -> serde_json::Result<Decoded<Ping>> {
        (self.wire().ping)(b)
    }

    pub fn decode_diag(self, b: &[u8]) -> serde_json::Result<Decoded<Diag>> {
        (self.wire().diag)(b)
    }

    /// Decodes and aggregates `/jobs`; `per_owner` also counts jobs per user and account.
    pub fn decode_jobs(self, b: &[u8], per_owner: bool) -> serde_json::Result<Decoded<Jobs>> {
        (self.wire().jobs)(b, per_owner)
    }

    /// Decodes `/jobs` or `/job/{id}` into records kept between polls.
    pub fn decode_job_table(self, b: &[u8]) -> serde_json::Result<Decoded<JobTable>> {
        (self.wire().job_table)(b)
    }

    /// Decodes `/jobs/state/` (v0.0.40 on); `None` where the API has no such endpoint.
    pub fn decode_job_states(self, b: &[u8]) -> Option<serde_json::Result<Decoded<JobStates>>> {
        self.wire().job_states.map(|decode| decode(b))
    }

    /// Whether slurmrestd serves `/jobs/state/` (job ids and states only) at this version.
    pub fn has_job_states(self) -> bool {
        self.wire().job_states.is_some()
    }

    /// Whether `/jobs/state/` takes `job_id` (repeated) to answer for those jobs only:
    /// v0.0.42 on (v0.0.40 and v0.0.41 ignore it and answer for every job).
    pub fn filters_job_states(self) -> bool {
        self >= Self::V0042
    }

    pub fn decode_nodes(self, b: &[u8]) -> serde_json::Result<Decoded<Vec<Node>>> {
        (self.wire().nodes)(b)
    }

    pub fn decode_partitions(self, b: &[u8]) -> serde_json::Result<Decoded<Vec<Partition>>> {
        (self.wire().partitions)(b)
    }
}

type Decode<T> = fn(&[u8]) -> serde_json::Result<Decoded<T>>;

/// One API version's decoders, each endpoint's answer into the model.
struct Decoders {
    ping: Decode<Ping>,
    diag: Decode<Diag>,
    jobs: fn(&[u8], bool) -> serde_json::Result<Decoded<Jobs>>,
    job_table: Decode<JobTable>,
    /// `None`: the version has no `/jobs/state/`.
    job_states: Option<Decode<JobStates>>,
    nodes: Decode<Vec<Node>>,
    partitions: Decode<Vec<Partition>>,
}

/// The decoders of wire module `$m` (with `/jobs/state/` unless told `None`).
macro_rules! decoders {
    ($m:ident) => {
        decoders!($m, Some(wire::$m::decode_job_states))
    };
    ($m:ident, $states:expr) => {
        Decoders {
            ping: wire::$m::decode_ping,
            diag: wire::$m::decode_diag,
            jobs: wire::$m::decode_jobs,
            job_table: wire::$m::decode_job_table,
            job_states: $states,
            nodes: wire::$m::decode_nodes,
            partitions: wire::$m::decode_partitions,
        }
    };
}
use decoders;

impl fmt::Display for ApiVersion {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ApiVersion {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let want = if s.starts_with('v') {
            s.to_string()
        } else {
            format!("v{s}")
        };
        Self::ALL
            .into_iter()
            .find(|v| v.as_str() == want)
            .ok_or_else(|| {
                let known: Vec<_> = Self::ALL.iter().map(|v| v.as_str()).collect();
                format!(
                    "unknown slurmrestd API version {s:?} (known: {})",
                    known.join(", ")
                )
            })
    }
}
