//! The result store: the one place that decides what a write does.
//!
//! Handlers validate and authorize; the store decides create / replay / stale / frozen / pod
//! mismatch / expectation reset / abandon / delete / claim / settle, each in one transaction.
//! The decisions are pure functions over the stored row, in the crate `argo-results-rules`
//! (`server/rules`), shared by both backends, so both behave identically. Writes of many requests share a
//! transaction ([`writer`]) without changing what any of them decides. Below the shared
//! code, a [`backend::Backend`] runs the transactions on its native driver: [`postgres`]
//! (production, many replicas) or [`sqlite`] (the embedded default, one replica).
//!
//! A write, top to bottom: [`NativeStore`](native::NativeStore) hands the rule to the
//! [`writer`], whose batch the backend's `write_batch` runs (`postgres/write.rs`,
//! `sqlite/write.rs`); [`notify`] then wakes the feed's watchers.
//!
//! Reads, claims and deletions run the same SQL on both databases, so they are written
//! once, in `sql/`, and compiled into each backend as its `read`, `claims`, `delete` and
//! `backend_impl` (the [`backend::Backend`] impl) modules. There `super` is `postgres` or
//! `sqlite`, whose `ThisBackend`, `Db`, `Pool`, `Connection`, `BEGIN_READ`, `BEGIN_WRITE`,
//! `NOW` and `SELECT_CLAIM_LOCKED` say what differs.

mod api;
mod backend;
mod columns;
mod error;
mod model;
mod native;
mod notify;
mod open;
mod page;
mod postgres;
mod random;
mod sqlite;
mod statements;
mod writer;

pub use api::Store;
pub use argo_results_rules::Stale;
pub use argo_results_rules::merge::is_object;
pub use argo_results_rules::{
    Expectation, NewClaim, Outcome, Report, ReportPolicy, ResultKey, Settled, Settlement, Written,
};
pub use error::{FailureKind, Refusal, StoreError};
pub use model::{ClaimQuery, FeedChunk, ListQuery, PruneBefore};
pub use open::{Opening, open};
pub use writer::Batching;
