//! argo-results-client: a typed async client for every operation of the argo-results API
//! (`docs/api.md`), with the retries a wait container needs, and the `argo-results` CLI.

mod client;
pub mod controller;
pub mod cron;
mod error;
mod retry;
mod stream;
mod token;

pub use argo_results_proto as proto;
pub use client::{
    Answer, Client, ClientBuilder, FeedOptions, ListOptions, RunsOptions, WorkflowsOptions,
};
pub use error::ClientError;
pub use retry::RetryPolicy;
pub use stream::WatchEvent;
pub use token::{TokenSource, token_namespace};
