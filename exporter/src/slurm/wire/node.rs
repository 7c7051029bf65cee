//! A node as every API version sends it, read with one struct: its state is one string with
//! the flags apart in `state_flags` (v0.0.38) or an array of words (v0.0.40 on), numbers are
//! plain or `{set, infinite, number}`, and free memory is `free_memory` (v0.0.38) or
//! `free_mem`. What a version lacks reads as absent. The wire modules of each version
//! re-export [`decode_nodes`].

use super::{Decoded, Num, Str, Words, decode_list, mib, wire_struct};
use crate::model::text::parse_gres;
use crate::model::{Node, NodeState};

wire_struct! {
    struct WireNode<'a> {
        name: Str<'a>,
        state: Words<'a>,
        state_flags: Words<'a>,
        partitions: Words<'a>,
        cpus: Num,
        alloc_cpus: Num,
        real_memory: Num,
        alloc_memory: Num,
        free_mem: Num,
        free_memory: Num,
        gres: Str<'a>,
        gres_used: Str<'a>,
        reason: Str<'a>,
        reason_set_by_user: Str<'a>,
    }
}

pub fn decode_nodes(bytes: &[u8]) -> serde_json::Result<Decoded<Vec<Node>>> {
    decode_list(bytes, "nodes", |n: WireNode| {
        let name = n.name.0.into_owned();
        (!name.is_empty()).then(|| Node {
            name,
            state: NodeState::from_words(n.state.iter().chain(n.state_flags.iter())),
            partitions: n.partitions.iter().map(Into::into).collect(),
            cpus: n.cpus.unsigned().unwrap_or(0),
            alloc_cpus: n.alloc_cpus.unsigned().unwrap_or(0),
            memory_bytes: mib(n.real_memory.unsigned()).unwrap_or(0),
            alloc_memory_bytes: mib(n.alloc_memory.unsigned()).unwrap_or(0),
            free_memory_bytes: mib(n.free_mem.unsigned().or(n.free_memory.unsigned())),
            gres: parse_gres(n.gres.as_str()),
            gres_used: parse_gres(n.gres_used.as_str()),
            reason: n.reason.0.into_owned(),
            reason_set_by: n.reason_set_by_user.0.into_owned(),
        })
    })
}
