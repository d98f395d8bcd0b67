//! The result store: the one place that decides what a write does.
//!
//! Handlers validate and authorize; the store decides create / replay / stale / frozen / pod
//! mismatch / expectation reset / abandon / delete / claim / settle, each in one transaction.
//! The decisions are pure functions over the stored row, in the crate `argo-results-rules`
//! (`server/rules`), shared by both databases, so both behave identically.
//!
//! [`Store`] runs on one of two databases ([`db::Db`]): [`postgres`] (production, many
//! replicas) or [`sqlite`] (the embedded default, one replica). Most of their SQL is the
//! same, so it is written once, in `sql/`, as inherent methods that each database's module
//! compiles for its own type; [`dialect::Dialect`] lists what differs. A read goes from a
//! [`Store`] method straight to its SQL there (`sql/read.rs`, `sql/claims.rs`).
//!
//! A write of a result goes through the [`writer`], which gathers the writes that arrive
//! together into one transaction (group commit) and runs it top to bottom
//! (`Writer::transaction`); [`notify`] then wakes the feed's watchers.

mod columns;
mod db;
mod dialect;
mod error;
mod model;
mod notify;
mod open;
mod page;
mod postgres;
mod random;
mod sqlite;
mod writer;

use std::sync::Arc;
use std::time::Instant;

use argo_results_proto::{Claim, NodeResult};
use tokio::sync::watch;

pub use argo_results_rules::Stale;
use argo_results_rules::Write;
pub use argo_results_rules::merge::{MAX_MEMBERS, is_object, most_members};
pub use argo_results_rules::{
    Expectation, NewClaim, Outcome, Report, ReportPolicy, ResultKey, Settled, Settlement, Written,
};
pub use error::{FailureKind, Refusal, StoreError};
pub use model::{ClaimQuery, FeedChunk, ListQuery, PruneBefore, WorkflowPage, WorkflowQuery};
pub use open::{Opening, open};
pub use page::PageMemory;
pub use writer::Batching;

use crate::metrics::Metrics;
use db::{Db, on_db};
use error::StoreResult;
use model::{ClaimPage, Pruned, ResultPage};
use notify::{Changed, Notifier};
use writer::Queue;

/// Committed state of results and cron claims.
#[derive(Debug)]
pub struct Store {
    db: Db,
    /// The writer's inbox: reports, expectations and abandons.
    writes: Queue,
    notifier: Arc<Notifier>,
    metrics: Arc<Metrics>,
}

impl Store {
    /// Applies a wait container's report (docs/api.md, "2. Reporting a result").
    pub async fn report(&self, key: ResultKey, report: Report) -> StoreResult<Written> {
        self.measured(self.writes.submit(key, Write::Report(report)))
            .await
    }

    /// Registers or resets an expected result (docs/api.md, "3. Controller operations").
    pub async fn expect(&self, key: ResultKey, expectation: Expectation) -> StoreResult<Written> {
        self.measured(self.writes.submit(key, Write::Expect(expectation)))
            .await
    }

    /// Marks a result that will never complete as abandoned.
    pub async fn abandon(&self, key: ResultKey, reason: String) -> StoreResult<Written> {
        self.measured(self.writes.submit(key, Write::Abandon(reason)))
            .await
    }

    /// Deletes every result of one workflow incarnation, leaving tombstones in the feed.
    pub async fn delete_workflow(
        &self,
        namespace: String,
        workflow: String,
        workflow_uid: String,
    ) -> StoreResult<u64> {
        self.measured(async {
            let deleted = on_db!(&self.db, |db| db
                .delete_workflow(&namespace, &workflow, &workflow_uid)
                .await)?;
            let Some((deleted, head)) = deleted else {
                return Ok(0);
            };
            self.notifier
                .publish(head, Changed::In(&[namespace.as_str()]));
            Ok(deleted)
        })
        .await
    }

    /// One result; the newest incarnation of the workflow name when `workflow_uid` is `None`.
    pub async fn get(
        &self,
        namespace: String,
        workflow: String,
        node_id: String,
        workflow_uid: Option<String>,
    ) -> StoreResult<Option<NodeResult>> {
        self.measured(async {
            on_db!(&self.db, |db| db
                .get(&namespace, &workflow, &node_id, workflow_uid.as_deref())
                .await)
        })
        .await
    }

    /// A page of a workflow's results, each item held against `memory` as it is read.
    pub async fn list(&self, query: ListQuery, memory: &dyn PageMemory) -> StoreResult<ResultPage> {
        self.measured(async { on_db!(&self.db, |db| db.list(query, memory).await) })
            .await
    }

    /// A page of the workflows that have results, with what their results add up to.
    pub async fn workflows(&self, query: WorkflowQuery) -> StoreResult<WorkflowPage> {
        self.measured(async { on_db!(&self.db, |db| db.workflows(query).await) })
            .await
    }

    /// Changes with a revision above `since`, oldest first, each held against `memory` as
    /// it is read; `410 gone` unless `since` is in the retained history of the store's
    /// epoch (`epoch`, when the reader says).
    pub async fn feed(
        &self,
        since: i64,
        epoch: Option<String>,
        namespace: Option<String>,
        limit: u32,
        memory: &dyn PageMemory,
    ) -> StoreResult<FeedChunk> {
        let namespace = namespace.unwrap_or_default();
        self.measured(async {
            on_db!(&self.db, |db| db
                .feed(since, epoch.as_deref(), &namespace, limit, memory)
                .await)
        })
        .await
    }

    /// Claims one tick of a cron workflow for a new holder, or takes it over from one whose
    /// lease expired unsettled; one holder at a time, on any replica.
    pub async fn claim(&self, claim: NewClaim) -> StoreResult<Claim> {
        self.measured(async { on_db!(&self.db, |db| db.claim(&claim).await) })
            .await
    }

    /// Records what the holder of a claim did with its tick.
    pub async fn settle(&self, settlement: Settlement) -> StoreResult<Claim> {
        self.measured(async { on_db!(&self.db, |db| db.settle(&settlement).await) })
            .await
    }

    pub async fn claims(&self, query: ClaimQuery) -> StoreResult<ClaimPage> {
        self.measured(async { on_db!(&self.db, |db| db.claims(query).await) })
            .await
    }

    /// Removes, in batches, feed history recorded before `before.changes`, results
    /// unchanged since `before.results`, and claims taken before `before.claims` that are
    /// settled and not their cron workflow's newest settled one, or whose lease expired
    /// unsettled before it (Unix milliseconds).
    pub async fn prune(&self, before: PruneBefore) -> StoreResult<Pruned> {
        self.measured(async {
            let mut pruned = Pruned::default();
            on_db!(&self.db, |db| {
                while let Some((expired, head)) = db.expire_results(before.results).await? {
                    self.notifier.publish(head, Changed::Anywhere);
                    pruned.results += expired;
                }
                while let Some(deleted) = db.prune_changes(before.changes).await? {
                    pruned.changes += deleted;
                }
                loop {
                    let deleted = db.prune_claims(before.claims).await?;
                    if deleted == 0 {
                        break;
                    }
                    pruned.claims += deleted;
                }
            });
            Ok(pruned)
        })
        .await
    }

    /// How many results are `expected` and `reporting` (not finished) across the store.
    pub async fn pending(&self) -> StoreResult<(u64, u64)> {
        self.measured(async { on_db!(&self.db, |db| db.pending().await) })
            .await
    }

    /// The newest committed revision, updated after every commit of any replica that
    /// changed `namespace` (`None`: any namespace).
    pub fn revisions(&self, namespace: Option<&str>) -> watch::Receiver<i64> {
        self.notifier.subscribe(namespace)
    }

    /// The requests' pool: connections open, of those idle, and the most it may open.
    pub fn pool_usage(&self) -> (u32, usize, u32) {
        on_db!(&self.db, |db| db.pool_usage())
    }

    /// Checks that the database answers and the writer runs.
    pub async fn ping(&self) -> StoreResult<()> {
        self.measured(async {
            if self.writes.stopped() {
                return Err(StoreError::Stopped);
            }
            on_db!(&self.db, |db| db.head().await)?;
            Ok(())
        })
        .await
    }

    /// Times a store operation and counts its failures, for the store metrics.
    async fn measured<T>(&self, work: impl Future<Output = StoreResult<T>>) -> StoreResult<T> {
        let started = Instant::now();
        let result = work.await;
        let failure = result.as_ref().err().and_then(StoreError::failure);
        self.metrics
            .store_operation(started.elapsed(), failure.map(|kind| kind.as_str()));
        result
    }
}
