//! The one error type of this crate. Each variant says what failed in words an operator can
//! act on; none of them ever carries a token or a key.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    #[error("cannot render CRD {name}: {message}")]
    CrdRender { name: String, message: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
