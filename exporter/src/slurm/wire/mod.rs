//! Wire formats of slurmrestd, one module per API version, and the tolerant pieces they share.
//!
//! Each version module declares the structs of its JSON and converts them into the
//! version-free [`crate::model`]; nothing past this module knows which version answered.
//! Decoding is lenient on purpose: a field that is missing, `null`, of an unexpected type or
//! an enum value we have never seen must not lose the rest of the answer. Numbers may be
//! plain or `{set, infinite, number}`; states may be a string or an array; strings may be
//! `null`. Large answers are decoded straight from the response bytes, borrowing strings,
//! and `/jobs` is aggregated while it is parsed, so no per-job tree is ever built.

use crate::model::JobState;
use crate::model::job_table::StateEntry;

mod job;
mod node;
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
    /// A job record of slurmdbd's `/slurmdb/…/jobs`, of which only the id and the state are
    /// read: the same names in every version (the state a string in v0.0.38, a list later).
    struct AccountedJob<'a> {
        job_id: Num,
        state: AccountedState<'a>,
    }
}

wire_struct! {
    struct AccountedState<'a> {
        current: Words<'a>,
    }
}

/// The jobs of a `/slurmdb/…/jobs` answer (any version), each with its state: the first word,
/// or [`JobState::Other`] when flags follow it (a requeued job's record is not an end).
pub fn decode_accounted(bytes: &[u8]) -> serde_json::Result<Decoded<Vec<StateEntry>>> {
    decode_list(bytes, "jobs", |j: AccountedJob| {
        let words = &j.state.current;
        Some(StateEntry {
            id: j.job_id.unsigned()?,
            task: None,
            state: match words.0.len() {
                1 => JobState::parse(words.first()),
                _ => JobState::Other,
            },
        })
    })
}

pub use lenient::{
    EachSeed, FirstWord, Flag, GresDetailGpus, Lenient, List, Num, RawKey, Str, Words,
    key_signature, mib, micros,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::NodeSets;

    /// Records as 22.05 (v0.0.38: a state string) and 24.11 (v0.0.42: a list) answered for a
    /// job that ran and was requeued — its ended run beside its new wait — and for ended ones.
    #[test]
    fn accounting_records_keep_a_requeue_apart_from_an_end() {
        let v0038 = br#"{"jobs": [
            {"job_id": 74, "state": {"current": "REQUEUED", "reason": "None"}},
            {"job_id": 74, "state": {"current": "PENDING", "reason": "None"}},
            {"job_id": 76, "state": {"current": "CANCELLED", "reason": "None"}}]}"#;
        let v0042 = br#"{"jobs": [
            {"job_id": 74, "state": {"current": ["PENDING", "REQUEUED"], "reason": "None"}},
            {"job_id": 74, "state": {"current": ["PENDING"], "reason": "None"}},
            {"job_id": 76, "state": {"current": ["CANCELLED"], "reason": "None"}}]}"#;
        for body in [&v0038[..], &v0042[..]] {
            let states: Vec<(u64, JobState)> = decode_accounted(body)
                .unwrap()
                .data
                .iter()
                .map(|e| (e.id, e.state))
                .collect();
            assert_eq!(
                states,
                [
                    (74, JobState::Other),
                    (74, JobState::Pending),
                    (76, JobState::Cancelled)
                ]
            );
        }
    }

    /// `SuspendTime=INFINITE` on a partition, as 24.11 shows it; unset is the global value.
    #[test]
    fn a_partition_that_never_suspends_is_told_from_one_left_to_the_global_setting() {
        let body = br#"{"partitions": [
            {"name": "gpu", "suspend_time": {"set": false, "infinite": true, "number": 0}},
            {"name": "cpu", "suspend_time": {"set": false, "infinite": false, "number": 0}},
            {"name": "planned", "suspend_time": {"set": true, "infinite": false, "number": 10}}]}"#;
        let never: Vec<bool> = v0042::decode_partitions(body)
            .unwrap()
            .data
            .iter()
            .map(|p| p.never_suspends)
            .collect();
        assert_eq!(never, [true, false, false]);
    }

    /// The forms 24.11 and 26.05 were seen to send (`scontrol create` of each, read back):
    /// a NodeSet's own partition, one over two NodeSets, `Nodes=ALL`, named nodes only; v0.0.38
    /// has no such field.
    #[test]
    fn a_partition_says_which_nodesets_join_it() {
        let body = br#"{"partitions": [
            {"name": "slinky", "node_sets": "slinky"},
            {"name": "two", "node_sets": "slinky,planned"},
            {"name": "all", "node_sets": "ALL"},
            {"name": "cpu", "node_sets": ""}]}"#;
        let sets: Vec<NodeSets> = v0044::decode_partitions(body)
            .unwrap()
            .data
            .into_iter()
            .map(|p| p.node_sets)
            .collect();
        let named = |n: &[&str]| NodeSets::Named(n.iter().map(|s| s.to_string()).collect());
        assert_eq!(
            sets,
            [
                named(&["slinky"]),
                named(&["slinky", "planned"]),
                NodeSets::All,
                named(&[])
            ]
        );
        assert_eq!(sets[1].includes("planned"), Some(true));
        assert_eq!(sets[1].includes("plan"), Some(false));
        assert_eq!(sets[2].includes("gpu-a100"), Some(true));
        assert_eq!(sets[3].includes("slinky"), Some(false));
        let old = v0038::decode_partitions(br#"{"partitions": [{"name": "slinky"}]}"#).unwrap();
        assert_eq!(old.data[0].node_sets.includes("slinky"), None);
    }
}
