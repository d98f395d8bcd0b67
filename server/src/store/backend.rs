//! What each database does natively, below the rules and group commit that both share.
//!
//! A backend runs whole transactions; what they write is decided above it: a batch's rows
//! and feed changes by the writer ([`super::writer`]) from the rules, a claim's fate by
//! `argo_results_rules::claim`.
//!
//! # Revisions in commit order: the serial section
//!
//! Every writing transaction first locks the single `store_state` row (`LOCK_HEAD`),
//! assigns revisions after the head it read, sets the new head and commits; the lock is
//! released only when the commit is durable. Writing transactions therefore commit one at
//! a time, in revision order, and that is what lets a feed reader resume from revision R
//! without ever missing a later commit numbered R or lower (API section 5, guarantee 2):
//! the feed reads the head first, and every revision up to it has committed.
//!
//! The lock stays. A write's answer carries its revision (API section 2), so revisions are
//! fixed before the commit; two transactions in flight at once could then commit in the
//! opposite order of their revisions, and Postgres offers nothing but a lock held to the
//! end of a transaction to order commits. The known ways around it change the contract:
//! a sequence read back through a `pg_snapshot_xmin` horizon orders the feed by
//! transaction, not by the revision a writer was answered, and a list page would no
//! longer be a snapshot at its revision; numbering changes after they commit costs every
//! write a second transaction (and fsync) before its answer. Two batches in flight would
//! also have to lock the rows they share, since each decides on what the other writes.
//!
//! What it costs is bounded: one replica has one writer, which commits one batch at a time
//! with or without the lock, and the writes that arrive during a commit's fsync form the
//! next batch. The measurements are in docs/performance.md, "Why writes commit one at a
//! time".

use std::future::Future;

use sqlx::{Database, Pool};

use argo_results_rules::Row;
use argo_results_rules::batch::{Batch, RowKey};
use argo_results_rules::claim::{ClaimDecision, ClaimRow, SettleDecision};
use argo_results_rules::feed::FeedBounds;

use super::error::StoreResult;
use super::model::{ClaimQuery, ListQuery, ResultPage};

/// Changes read from the feed, and where the read stood.
#[derive(Debug)]
pub(super) struct FeedRead {
    pub items: Vec<String>,
    pub bounds: FeedBounds,
}

/// How long a request may wait for a database connection before it is answered
/// `503 unavailable`: an outage or an exhausted pool is reported within 5 s, never queued.
pub(super) const ACQUIRE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// Retention deletes at most this many rows per transaction.
pub(super) const RETENTION_BATCH: i64 = 1000;

pub(super) trait Backend: std::fmt::Debug + Clone + Send + Sync + Sized + 'static {
    type Db: Database;

    fn pool(&self) -> &Pool<Self::Db>;

    /// The same backend over a pool of one connection of its own, opened on the runtime
    /// that will use it (the writer's).
    fn own_connection(&self) -> impl Future<Output = StoreResult<Self>> + Send;

    /// One transaction of the writer on `connection`: locks the head, loads the stored
    /// rows of `keys` and lets `plan` decide on them; stores what it planned and commits,
    /// or rolls back when it planned nothing. Answers the new head, if any.
    fn write_batch<'a, P>(
        &'a self,
        connection: &'a mut <Self::Db as Database>::Connection,
        keys: &'a [RowKey<'a>],
        plan: P,
    ) -> impl Future<Output = StoreResult<Option<i64>>> + Send + 'a
    where
        P: FnOnce(i64, Vec<Row>) -> StoreResult<Option<Batch>> + Send + 'a;

    /// Deletes every result of a workflow incarnation, leaving tombstones: how many, and
    /// the new head.
    fn delete_workflow<'a>(
        &'a self,
        namespace: &'a str,
        workflow: &'a str,
        workflow_uid: &'a str,
    ) -> impl Future<Output = StoreResult<Option<(u64, i64)>>> + Send + 'a;

    /// Deletes up to [`RETENTION_BATCH`] results unchanged since `before`, leaving
    /// tombstones: how many, and the new head.
    fn expire_results(
        &self,
        before: i64,
    ) -> impl Future<Output = StoreResult<Option<(u64, i64)>>> + Send + '_;

    /// Drops up to [`RETENTION_BATCH`] changes recorded before `before`; `None` when none
    /// is that old.
    fn prune_changes(
        &self,
        before: i64,
    ) -> impl Future<Output = StoreResult<Option<u64>>> + Send + '_;

    /// Deletes up to [`RETENTION_BATCH`] claims that retention removes (see
    /// `prunable_claim!` in [`super::statements`]).
    fn prune_claims(&self, before: i64) -> impl Future<Output = StoreResult<u64>> + Send + '_;

    /// One result by its key, with no regard to the workflow name; by the newest
    /// incarnation of the name when `workflow_uid` is `None`.
    fn get<'a>(
        &'a self,
        namespace: &'a str,
        workflow: &'a str,
        node_id: &'a str,
        workflow_uid: Option<&'a str>,
    ) -> impl Future<Output = StoreResult<Option<Row>>> + Send + 'a;

    /// A page and its summary, in one snapshot.
    fn list(&self, query: ListQuery) -> impl Future<Output = StoreResult<ResultPage>> + Send + '_;

    /// Changes after `since` in revision order, up to the committed head.
    fn feed<'a>(
        &'a self,
        since: i64,
        namespace: &'a str,
        limit: u32,
    ) -> impl Future<Output = StoreResult<FeedRead>> + Send + 'a;

    /// Decides a tick's claim on its locked row at the database's time, and stores the
    /// decision. `None` when a racing first claim inserted the row meanwhile.
    fn claim<'a, D>(
        &'a self,
        cron_workflow_uid: &'a str,
        scheduled_millis: i64,
        decide: D,
    ) -> impl Future<Output = StoreResult<Option<ClaimRow>>> + Send + 'a
    where
        D: FnOnce(Option<&ClaimRow>, i64) -> ClaimDecision + Send + 'a;

    /// Decides a settle on the tick's locked row at the database's time, and stores it.
    fn settle<'a, D>(
        &'a self,
        cron_workflow_uid: &'a str,
        scheduled_millis: i64,
        decide: D,
    ) -> impl Future<Output = StoreResult<ClaimRow>> + Send + 'a
    where
        D: FnOnce(Option<ClaimRow>, i64) -> SettleDecision + Send + 'a;

    /// Up to `query.limit + 1` claims of a page and the newest settled tick, in one
    /// snapshot.
    fn claims(
        &self,
        query: ClaimQuery,
    ) -> impl Future<Output = StoreResult<(Vec<ClaimRow>, Option<i64>)>> + Send + '_;

    /// A count per state of the results not finished.
    fn pending(&self) -> impl Future<Output = StoreResult<Vec<(String, i64)>>> + Send + '_;

    /// The newest committed revision.
    fn head(&self) -> impl Future<Output = StoreResult<i64>> + Send + '_;

    /// The store's epoch from now on: a new one when `renew` gives a reason, or when the
    /// database was restored or replaced (see `sql/epoch.rs`).
    fn settle_epoch<'a>(
        &'a self,
        renew: Option<&'a str>,
    ) -> impl Future<Output = StoreResult<String>> + Send + 'a;
}
