//! What the rest of the server may ask of the store.

use std::future::Future;
use std::pin::Pin;

use argo_results_proto::{Claim, NodeResult};
use tokio::sync::watch;

use argo_results_rules::{Expectation, NewClaim, Report, ResultKey, Settlement, Written};

use super::error::StoreResult;
use super::model::{ClaimPage, ClaimQuery, FeedChunk, ListQuery, PruneBefore, Pruned, ResultPage};

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Committed state of results and cron claims.
pub trait Store: std::fmt::Debug + Send + Sync + 'static {
    /// Applies a wait container's report (API section 2).
    fn report(&self, key: ResultKey, report: Report) -> BoxFuture<'_, StoreResult<Written>>;
    /// Registers or resets an expected result (API section 3).
    fn expect(
        &self,
        key: ResultKey,
        expectation: Expectation,
    ) -> BoxFuture<'_, StoreResult<Written>>;
    /// Marks a result that will never complete as abandoned.
    fn abandon(&self, key: ResultKey, reason: String) -> BoxFuture<'_, StoreResult<Written>>;
    /// Deletes every result of one workflow incarnation, leaving tombstones in the feed.
    fn delete_workflow(
        &self,
        namespace: String,
        workflow: String,
        workflow_uid: String,
    ) -> BoxFuture<'_, StoreResult<u64>>;
    /// One result; the newest incarnation of the workflow name when `workflow_uid` is `None`.
    fn get(
        &self,
        namespace: String,
        workflow: String,
        node_id: String,
        workflow_uid: Option<String>,
    ) -> BoxFuture<'_, StoreResult<Option<NodeResult>>>;
    fn list(&self, query: ListQuery) -> BoxFuture<'_, StoreResult<ResultPage>>;
    /// Changes with a revision above `since`, oldest first; `410 gone` unless `since` is
    /// in the retained history of the store's epoch (`epoch`, when the reader says).
    fn feed(
        &self,
        since: i64,
        epoch: Option<String>,
        namespace: Option<String>,
        limit: u32,
    ) -> BoxFuture<'_, StoreResult<FeedChunk>>;
    /// Claims one tick of a cron workflow for a new holder, or takes it over from one whose
    /// lease expired unsettled; one holder at a time, on any replica.
    fn claim(&self, claim: NewClaim) -> BoxFuture<'_, StoreResult<Claim>>;
    /// Records what the holder of a claim did with its tick.
    fn settle(&self, settlement: Settlement) -> BoxFuture<'_, StoreResult<Claim>>;
    fn claims(&self, query: ClaimQuery) -> BoxFuture<'_, StoreResult<ClaimPage>>;
    /// Removes, in batches, feed history recorded before `before.changes`, results
    /// unchanged since `before.results`, and claims taken before `before.claims` that are
    /// settled and not their cron workflow's newest settled one, or whose lease expired
    /// unsettled before it (Unix milliseconds).
    fn prune(&self, before: PruneBefore) -> BoxFuture<'_, StoreResult<Pruned>>;
    /// How many results are `expected` and `reporting` (not finished) across the store.
    fn pending(&self) -> BoxFuture<'_, StoreResult<(u64, u64)>>;
    /// The newest committed revision, updated after every commit of any replica that
    /// changed `namespace` (`None`: any namespace).
    fn revisions(&self, namespace: Option<&str>) -> watch::Receiver<i64>;
    /// Checks that the database answers.
    fn ping(&self) -> BoxFuture<'_, StoreResult<()>>;
}
