//! argo-results-client: a typed async client for every operation of the argo-results API
//! (`docs/api.md`), used by the `argo-results` CLI and the tests.

mod client;
mod error;

pub use argo_results_proto as proto;
pub use client::{Answer, Client, FeedOptions, ListOptions};
pub use error::ClientError;
