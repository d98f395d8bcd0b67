//! What the argo-results store decides, as pure functions over stored rows: what a report,
//! an expectation or an abandon does to a result ([`result`], merging outputs as RFC 7386
//! in [`merge`]), how a transaction of the writer numbers its changes ([`batch`]), what a
//! cron claim or settle does to a tick ([`claim`]), and where a feed reader goes on from
//! ([`feed`]).
//!
//! The server's store runs them inside its transactions on Postgres and SQLite, so both
//! backends decide alike; the protocol's model (`tests/model`) drives the same functions,
//! so the model and the server cannot drift apart. Nothing here does I/O.

pub mod batch;
pub mod claim;
pub mod clock;
pub mod feed;
pub mod merge;
pub mod refusal;
pub mod request;
pub mod result;
pub mod row;

pub use refusal::{Corrupt, Refusal, Rejected, Stale};
pub use request::{
    Expectation, NewClaim, Outcome, Report, ResultKey, Settled, Settlement, Written,
};
pub use result::{Decision, ReportPolicy, Write};
pub use row::Row;
