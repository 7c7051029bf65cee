//! Everything about slurmrestd: auth, the HTTP client, API versions and their wire formats,
//! and [`fetch`], which turns one GET into checked, version-free data.

pub mod auth;
pub mod client;
pub mod fetch;
pub mod versions;
pub mod wire;

pub use auth::{Secret, SigningAlgorithm, TokenSource};
pub use client::{ClientOptions, SlurmClient};
pub use versions::{ApiVersion, Endpoint};
