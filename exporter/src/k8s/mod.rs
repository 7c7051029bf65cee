//! Kubernetes-side types: the Slinky NodeSet (both served versions) and the GenericNode
//! colocation ledger, as Rust types deriving `CustomResource`.
//!
//! We only model the fields we read or write. The CRDs generated from these types are the
//! ones the test kube-apiserver serves (`tests/crds/`); a conformance test checks the same
//! types against the official CRDs, so a field we rely on cannot silently drift.

// `#[kube(printcolumn(type_ = "integer", ...))]` repeated per column looks like a duplicated
// attribute to clippy; it is not.
#![allow(clippy::duplicated_attributes)]

pub mod client;
pub mod crd;
pub mod genericnode;
pub mod ledger;
pub mod nodeset;
pub mod watch;
