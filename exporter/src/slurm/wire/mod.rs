//! Wire formats of slurmrestd, one module per API version, and the tolerant pieces they share.
//!
//! Each version module declares the structs of its JSON and converts them into the
//! version-free [`crate::model`]; nothing past this module knows which version answered.
//! Decoding is lenient on purpose: a field that is missing, `null`, of an unexpected type or
//! an enum value we have never seen must not lose the rest of the answer. Numbers may be
//! plain or `{set, infinite, number}`; states may be a string or an array; strings may be
//! `null`. Large answers are decoded straight from the response bytes, borrowing strings,
//! and `/jobs` is aggregated while it is parsed, so no per-job tree is ever built.

pub mod v0038;
pub mod v0040;
pub mod v0041;
pub mod v0042;
pub mod v0043;
pub mod v0044;
pub mod v0045;

mod envelope;
mod lenient;

pub use envelope::{
    Decoded, Message, Meta, decode_envelope, decode_errors, decode_list, decode_object, describe,
};
pub(crate) use lenient::wire_struct;

wire_struct! {
    /// A job record of slurmdbd's `/slurmdb/…/jobs`, of which only the id is read: the same
    /// name in every version.
    struct AccountedJob {
        job_id: Num,
    }
}

/// The job ids of a `/slurmdb/…/jobs` answer (any version).
pub fn decode_accounted_ids(bytes: &[u8]) -> serde_json::Result<Decoded<Vec<u64>>> {
    decode_list(bytes, "jobs", |j: AccountedJob| j.job_id.unsigned())
}
pub use lenient::{
    EachSeed, FirstWord, Flag, GresDetailGpus, Lenient, List, Num, RawKey, Str, Words,
    key_signature, mib, micros,
};
