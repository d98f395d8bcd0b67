//! The store over one native backend: writes of results go through the writer (group
//! commit); reads, deletes, retention and claims are single transactions of the backend,
//! around the shared decisions.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use argo_results_proto::{Claim, NodeResult};
use argo_results_rules::claim::{self, ClaimRow};
use argo_results_rules::feed;
use argo_results_rules::{
    Expectation, NewClaim, Report, ReportPolicy, ResultKey, Row, Settlement, Write, Written,
};
use tokio::sync::watch;

use super::api::{BoxFuture, Store};
use super::backend::Backend;
use super::error::{StoreError, StoreResult};
use super::model::{ClaimPage, ClaimQuery, FeedChunk, ListQuery, PruneBefore, Pruned, ResultPage};
use super::notify::{Changed, Notifier};
use super::page::summarize;
use super::random::uuid;
use super::writer::{Batching, Queue};
use crate::metrics::Metrics;

#[derive(Debug)]
pub(super) struct NativeStore<B: Backend> {
    backend: B,
    writes: Queue,
    notifier: Arc<Notifier>,
    metrics: Arc<Metrics>,
}

impl<B: Backend> NativeStore<B> {
    /// Starts the writer over `backend`, which judges reports by `policy`. `notifier`
    /// starts at the committed head.
    pub(super) async fn start(
        backend: B,
        batching: Batching,
        policy: ReportPolicy,
        notifier: Arc<Notifier>,
        metrics: Arc<Metrics>,
    ) -> StoreResult<Self> {
        let writes = Queue::start(
            &backend,
            batching,
            policy,
            Arc::clone(&notifier),
            Arc::clone(&metrics),
        )
        .await?;
        Ok(NativeStore {
            backend,
            writes,
            notifier,
            metrics,
        })
    }

    /// Times a store operation and counts its failures, for the store metrics.
    fn measured<'a, T: Send + 'a>(
        &'a self,
        work: impl Future<Output = StoreResult<T>> + Send + 'a,
    ) -> BoxFuture<'a, StoreResult<T>> {
        Box::pin(async move {
            let started = Instant::now();
            let result = work.await;
            let failure = result.as_ref().err().and_then(StoreError::failure);
            self.metrics
                .store_operation(started.elapsed(), failure.map(|kind| kind.as_str()));
            result
        })
    }

    /// A commit of this replica moved the head to `head`, changing `changed`.
    fn committed(&self, head: Option<i64>, changed: Changed<'_>) {
        if let Some(head) = head {
            self.notifier.publish(head, changed);
        }
    }

    async fn take_claim(&self, claim: NewClaim) -> StoreResult<Claim> {
        let claim_id = uuid()?;
        // On Postgres, a first claim racing this one can insert the row between the read
        // and the insert; the second pass then reads that row, locked, and decides on it.
        for _ in 0..2 {
            let decide =
                |current: Option<&ClaimRow>, now| claim::claim(current, &claim, &claim_id, now);
            if let Some(row) = self
                .backend
                .claim(&claim.cron_workflow_uid, claim.scheduled_millis, decide)
                .await?
            {
                return Ok(row.for_holder());
            }
        }
        // Cannot happen: a row inserted by a racer holds a live lease, which retention keeps.
        Err(StoreError::Corrupt(format!(
            "the claim of tick {} of {} vanished while it was decided",
            claim.scheduled_millis, claim.cron_workflow_uid
        )))
    }

    async fn list_claims(&self, query: ClaimQuery) -> StoreResult<ClaimPage> {
        let limit = query.limit as usize;
        let (mut rows, last_scheduled) = self.backend.claims(query).await?;
        let next = if rows.len() > limit {
            rows.truncate(limit);
            rows.last()
                .map(|row| (row.scheduled_time, row.cron_workflow_uid.clone()))
        } else {
            None
        };
        Ok(ClaimPage {
            items: rows.into_iter().map(ClaimRow::public).collect(),
            last_scheduled,
            next,
        })
    }

    async fn read_feed(
        &self,
        since: i64,
        epoch: Option<String>,
        namespace: Option<String>,
        limit: u32,
    ) -> StoreResult<FeedChunk> {
        let read = self
            .backend
            .feed(since, namespace.as_deref().unwrap_or_default(), limit)
            .await?;
        let revision = feed::next_since(since, epoch.as_deref(), &read.bounds)?;
        Ok(FeedChunk {
            items: read.items,
            revision,
            epoch: read.bounds.epoch,
        })
    }

    async fn prune_all(&self, before: PruneBefore) -> StoreResult<Pruned> {
        let mut pruned = Pruned::default();
        while let Some((expired, head)) = self.backend.expire_results(before.results).await? {
            self.committed(Some(head), Changed::Anywhere);
            pruned.results += expired;
        }
        while let Some(deleted) = self.backend.prune_changes(before.changes).await? {
            pruned.changes += deleted;
        }
        loop {
            let deleted = self.backend.prune_claims(before.claims).await?;
            if deleted == 0 {
                return Ok(pruned);
            }
            pruned.claims += deleted;
        }
    }

    fn submit(&self, key: ResultKey, write: Write) -> BoxFuture<'_, StoreResult<Written>> {
        self.measured(self.writes.submit(key, write))
    }
}

impl<B: Backend> Store for NativeStore<B> {
    fn report(&self, key: ResultKey, report: Report) -> BoxFuture<'_, StoreResult<Written>> {
        self.submit(key, Write::Report(report))
    }

    fn expect(
        &self,
        key: ResultKey,
        expectation: Expectation,
    ) -> BoxFuture<'_, StoreResult<Written>> {
        self.submit(key, Write::Expect(expectation))
    }

    fn abandon(&self, key: ResultKey, reason: String) -> BoxFuture<'_, StoreResult<Written>> {
        self.submit(key, Write::Abandon(reason))
    }

    fn delete_workflow(
        &self,
        namespace: String,
        workflow: String,
        workflow_uid: String,
    ) -> BoxFuture<'_, StoreResult<u64>> {
        self.measured(async move {
            let deleted = self
                .backend
                .delete_workflow(&namespace, &workflow, &workflow_uid)
                .await?;
            self.committed(
                deleted.map(|(_, head)| head),
                Changed::In(&[namespace.as_str()]),
            );
            Ok(deleted.map_or(0, |(deleted, _)| deleted))
        })
    }

    fn get(
        &self,
        namespace: String,
        workflow: String,
        node_id: String,
        workflow_uid: Option<String>,
    ) -> BoxFuture<'_, StoreResult<Option<NodeResult>>> {
        self.measured(async move {
            let row = self
                .backend
                .get(&namespace, &workflow, &node_id, workflow_uid.as_deref())
                .await?;
            // A UID names one incarnation of one workflow name.
            Ok(row
                .filter(|row| row.workflow == workflow)
                .map(Row::into_api)
                .transpose()?)
        })
    }

    fn list(&self, query: ListQuery) -> BoxFuture<'_, StoreResult<ResultPage>> {
        self.measured(self.backend.list(query))
    }

    fn feed(
        &self,
        since: i64,
        epoch: Option<String>,
        namespace: Option<String>,
        limit: u32,
    ) -> BoxFuture<'_, StoreResult<FeedChunk>> {
        self.measured(self.read_feed(since, epoch, namespace, limit))
    }

    fn claim(&self, claim: NewClaim) -> BoxFuture<'_, StoreResult<Claim>> {
        self.measured(self.take_claim(claim))
    }

    fn settle(&self, settlement: Settlement) -> BoxFuture<'_, StoreResult<Claim>> {
        self.measured(async move {
            let decide = |current, now| claim::settle(current, &settlement, now);
            let row = self
                .backend
                .settle(
                    &settlement.cron_workflow_uid,
                    settlement.scheduled_millis,
                    decide,
                )
                .await?;
            Ok(row.for_holder())
        })
    }

    fn claims(&self, query: ClaimQuery) -> BoxFuture<'_, StoreResult<ClaimPage>> {
        self.measured(self.list_claims(query))
    }

    fn prune(&self, before: PruneBefore) -> BoxFuture<'_, StoreResult<Pruned>> {
        self.measured(self.prune_all(before))
    }

    fn pending(&self) -> BoxFuture<'_, StoreResult<(u64, u64)>> {
        self.measured(async move {
            let summary = summarize(self.backend.pending().await?)?;
            Ok((summary.expected, summary.reporting))
        })
    }

    fn revisions(&self, namespace: Option<&str>) -> watch::Receiver<i64> {
        self.notifier.subscribe(namespace)
    }

    fn ping(&self) -> BoxFuture<'_, StoreResult<()>> {
        self.measured(async move {
            if self.writes.stopped() {
                return Err(StoreError::Stopped);
            }
            self.backend.head().await?;
            Ok(())
        })
    }
}
