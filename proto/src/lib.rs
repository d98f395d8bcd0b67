//! Wire types of the argo-results HTTP API (`docs/api.md`), shared by the server and the client.
//!
//! Argo's `outputs` travel as [`serde_json::value::RawValue`]: the exact JSON text received is
//! stored and returned, so unknown fields, key order, unicode and `\u0000` round-trip unchanged.

mod cron;
mod feed;
mod problem;
mod redact;
mod requests;
mod result;
#[cfg(feature = "openapi")]
pub mod schema;
#[cfg(feature = "token")]
pub mod token;
mod version;
mod whoami;

pub use cron::{Claim, ClaimList, ClaimRequest, ClaimState, SettleOutcome, SettleRequest};
pub use feed::{FeedItem, FeedPage};
pub use problem::{Problem, ProblemCode};
pub use redact::redacted;
pub use requests::{AbandonRequest, ExpectationRequest, ReportRequest};
pub use result::{
    DeleteResponse, Ended, NodeResult, ResultList, ResultState, Summary, WorkflowList,
    WorkflowSummary,
};
pub use version::Version;
pub use whoami::{PodRef, Role, Whoami};

/// The only report protocol version this release understands.
pub const PROTOCOL_VERSION: u32 = 1;
