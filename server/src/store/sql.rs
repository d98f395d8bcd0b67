//! The SQL store, one implementation for Postgres and SQLite through sqlx's `Any` driver.
//!
//! Every writing transaction first writes the single `store_state` row: on Postgres that
//! takes its row lock, on SQLite the database write lock (`BEGIN IMMEDIATE`). Writers
//! therefore run one at a time from that point, and the revisions they assign commit in
//! increasing order, which is what lets a feed reader resume from a revision without ever
//! missing a late commit. Reads of a page and its summary share one snapshot.

use std::future::Future;
use std::sync::Arc;

use argo_results_proto::{Claim, ClaimList, FeedItem, NodeResult, ResultState, Summary};
use sqlx::AnyPool;
use sqlx::any::AnyRow;
use sqlx::{Any, Row as _, Transaction};
use tokio::sync::watch;

use super::row::{Row, result_columns};
use super::rules::{self, Decision};
use super::{
    BoxFuture, Expectation, FeedChunk, ListQuery, NewClaim, Outcome, Pruned, Refusal, Report,
    ResultKey, ResultPage, Store, StoreError, StoreResult, Written, postgres, sqlite,
};
use crate::clock::{format_millis, format_scheduled, now_millis};
use crate::feed::Notifier;
use crate::metrics::Metrics;

/// What differs between the two databases once connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dialect {
    Postgres,
    Sqlite,
}

impl Dialect {
    fn begin_write(self) -> &'static str {
        match self {
            Dialect::Postgres => "BEGIN",
            Dialect::Sqlite => "BEGIN IMMEDIATE",
        }
    }

    fn begin_read(self) -> &'static str {
        match self {
            Dialect::Postgres => "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
            Dialect::Sqlite => "BEGIN",
        }
    }
}

#[derive(Debug)]
pub struct SqlStore {
    pool: AnyPool,
    dialect: Dialect,
    notifier: Arc<Notifier>,
    metrics: Arc<Metrics>,
}

type Tx = Transaction<'static, Any>;

const LOCK_HEAD: &str =
    "UPDATE store_state SET revision = revision WHERE id = 1 RETURNING revision";
const SET_HEAD: &str = "UPDATE store_state SET revision = $1 WHERE id = 1";
const READ_HEAD: &str = "SELECT revision FROM store_state WHERE id = 1";
const PENDING: &str = "SELECT state, COUNT(*) AS n FROM results \
     WHERE state IN ('expected', 'reporting') GROUP BY state";
const READ_PRUNED: &str = "SELECT pruned_revision FROM store_state WHERE id = 1";
/// Retention deletes at most this many rows per transaction.
const RETENTION_BATCH: i64 = 1000;
/// The last revision of the oldest batch of changes recorded before $1.
const PRUNABLE_THROUGH: &str = "SELECT MAX(revision) FROM (SELECT revision FROM changes \
     WHERE recorded_at < $1 ORDER BY revision LIMIT $2) AS oldest";
const DELETE_CHANGES: &str = "DELETE FROM changes WHERE revision <= $1";
const SET_PRUNED: &str =
    "UPDATE store_state SET pruned_revision = $1 WHERE id = 1 AND pruned_revision < $1";
const DELETE_EXPIRED: &str = "DELETE FROM results WHERE (namespace, workflow_uid, node_id) IN \
     (SELECT namespace, workflow_uid, node_id FROM results WHERE updated_at < $1 \
     ORDER BY updated_at LIMIT $2) RETURNING namespace, workflow, workflow_uid, node_id";
const UPSERT: &str = concat!(
    "INSERT INTO results (",
    result_columns!(),
    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19) \
     ON CONFLICT (namespace, workflow_uid, node_id) DO UPDATE SET \
     workflow = excluded.workflow, pod_name = excluded.pod_name, pod_uid = excluded.pod_uid, \
     instance_id = excluded.instance_id, state = excluded.state, phase = excluded.phase, \
     message = excluded.message, progress = excluded.progress, outputs = excluded.outputs, \
     sequence = excluded.sequence, revision = excluded.revision, \
     updated_at = excluded.updated_at, completed_at = excluded.completed_at, \
     abandon_reason = excluded.abandon_reason"
);
const SELECT_BY_KEY: &str = concat!(
    "SELECT ",
    result_columns!(),
    " FROM results WHERE namespace = $1 AND workflow_uid = $2 AND node_id = $3"
);
/// The newest incarnation of a workflow name: the UID whose first result is the newest.
const NEWEST_UID: &str = "SELECT workflow_uid FROM results WHERE namespace = $1 AND workflow = $2 \
     ORDER BY created_revision DESC LIMIT 1";
const SELECT_PAGE: &str = concat!(
    "SELECT ",
    result_columns!(),
    " FROM results WHERE namespace = $1 AND workflow_uid = $2 AND workflow = $3 \
     AND node_id > $4 AND ($5 = '' OR state = $5) ORDER BY node_id LIMIT $6"
);
const SUMMARY: &str = "SELECT state, COUNT(*) AS n FROM results \
     WHERE namespace = $1 AND workflow_uid = $2 AND workflow = $3 GROUP BY state";
const INSERT_CHANGE: &str =
    "INSERT INTO changes (revision, namespace, item, recorded_at) VALUES ($1, $2, $3, $4)";
const SELECT_CHANGES: &str = "SELECT item FROM changes WHERE revision > $1 AND revision <= $2 \
     AND ($3 = '' OR namespace = $3) ORDER BY revision LIMIT $4";
const DELETE_WORKFLOW: &str = "DELETE FROM results WHERE namespace = $1 AND workflow = $2 \
     AND workflow_uid = $3 RETURNING node_id";
const CLAIM_COLUMNS_INSERT: &str = "INSERT INTO cron_claims (cron_workflow_uid, scheduled_time, \
     namespace, cron_workflow, workflow_name, claimed_at) VALUES ($1, $2, $3, $4, $5, $6) \
     ON CONFLICT (cron_workflow_uid, scheduled_time) DO NOTHING RETURNING claimed_at";
const SELECT_CLAIM: &str = "SELECT namespace, cron_workflow, cron_workflow_uid, scheduled_time, \
     workflow_name, claimed_at FROM cron_claims WHERE cron_workflow_uid = $1 AND scheduled_time = $2";
/// The newest claims of a cron workflow; older ones are history nobody pages through.
const SELECT_CLAIMS: &str = "SELECT namespace, cron_workflow, cron_workflow_uid, scheduled_time, \
     workflow_name, claimed_at FROM cron_claims WHERE namespace = $1 AND cron_workflow = $2 \
     AND ($3 = '' OR cron_workflow_uid = $3) ORDER BY scheduled_time DESC LIMIT 1000";

fn decode_claim(row: &AnyRow) -> Result<Claim, sqlx::Error> {
    Ok(Claim {
        namespace: row.try_get("namespace")?,
        cron_workflow: row.try_get("cron_workflow")?,
        cron_workflow_uid: row.try_get("cron_workflow_uid")?,
        scheduled_time: format_scheduled(row.try_get("scheduled_time")?),
        workflow_name: row.try_get("workflow_name")?,
        claimed_at: format_millis(row.try_get("claimed_at")?),
    })
}

/// Reads `state, n` rows (a count per state) into a summary.
fn summarize(counts: &[AnyRow]) -> StoreResult<Summary> {
    let mut summary = Summary::default();
    for count in counts {
        let state: String = count.try_get("state")?;
        let n = u64::try_from(count.try_get::<i64, _>("n")?).unwrap_or_default();
        match ResultState::parse(&state) {
            Some(ResultState::Expected) => summary.expected = n,
            Some(ResultState::Reporting) => summary.reporting = n,
            Some(ResultState::Completed) => summary.completed = n,
            Some(ResultState::Abandoned) => summary.abandoned = n,
            None => return Err(StoreError::Corrupt(format!("unknown state {state:?}"))),
        }
    }
    Ok(summary)
}

async fn load(tx: &mut Tx, key: &ResultKey) -> StoreResult<Option<Row>> {
    let row = sqlx::query(SELECT_BY_KEY)
        .bind(&key.namespace)
        .bind(&key.workflow_uid)
        .bind(&key.node_id)
        .fetch_optional(&mut **tx)
        .await?;
    row.as_ref().map(Row::decode).transpose()
}

async fn upsert(tx: &mut Tx, row: &Row) -> StoreResult<()> {
    sqlx::query(UPSERT)
        .bind(&row.namespace)
        .bind(&row.workflow_uid)
        .bind(&row.node_id)
        .bind(&row.workflow)
        .bind(&row.pod_name)
        .bind(&row.pod_uid)
        .bind(&row.instance_id)
        .bind(row.state.as_str())
        .bind(&row.phase)
        .bind(&row.message)
        .bind(&row.progress)
        .bind(&row.outputs)
        .bind(row.sequence)
        .bind(row.revision)
        .bind(row.created_revision)
        .bind(row.created_at)
        .bind(row.updated_at)
        .bind(row.completed_at)
        .bind(&row.abandon_reason)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

async fn record(tx: &mut Tx, namespace: &str, item: &FeedItem, now: i64) -> StoreResult<()> {
    let text =
        serde_json::to_string(item).map_err(|e| StoreError::Corrupt(format!("feed item: {e}")))?;
    sqlx::query(INSERT_CHANGE)
        .bind(item.revision())
        .bind(namespace)
        .bind(text)
        .bind(now)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

impl SqlStore {
    /// Connects to `postgres://...` or `sqlite://PATH` and applies the migrations.
    pub async fn connect(
        url: &str,
        max_connections: u32,
        metrics: Arc<Metrics>,
    ) -> StoreResult<Self> {
        sqlx::any::install_default_drivers();
        let (pool, dialect) = if url.starts_with("postgres://") || url.starts_with("postgresql://")
        {
            (
                postgres::connect(url, max_connections).await?,
                Dialect::Postgres,
            )
        } else if let Some(path) = url.strip_prefix("sqlite://") {
            (
                sqlite::connect(path, max_connections).await?,
                Dialect::Sqlite,
            )
        } else {
            return Err(StoreError::UnsupportedUrl(url.to_owned()));
        };
        let head: i64 = sqlx::query_scalar(READ_HEAD).fetch_one(&pool).await?;
        let notifier = Arc::new(Notifier::new(head));
        if dialect == Dialect::Postgres {
            postgres::follow_commits(url.to_owned(), pool.clone(), Arc::clone(&notifier)).await?;
        }
        Ok(SqlStore {
            pool,
            dialect,
            notifier,
            metrics,
        })
    }

    async fn begin_write(&self) -> StoreResult<(Tx, i64)> {
        let mut tx = self.pool.begin_with(self.dialect.begin_write()).await?;
        let head: i64 = sqlx::query_scalar(LOCK_HEAD).fetch_one(&mut *tx).await?;
        Ok((tx, head))
    }

    async fn commit(&self, mut tx: Tx, head: i64) -> StoreResult<()> {
        sqlx::query(SET_HEAD).bind(head).execute(&mut *tx).await?;
        if self.dialect == Dialect::Postgres {
            // Delivered at commit: wakes the watchers of the other replicas.
            sqlx::query(postgres::NOTIFY)
                .bind(head.to_string())
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        self.notifier.publish(head);
        Ok(())
    }

    /// Times a store operation and counts its failures, for the store metrics.
    fn measured<'a, T: Send + 'a>(
        &'a self,
        work: impl Future<Output = StoreResult<T>> + Send + 'a,
    ) -> BoxFuture<'a, StoreResult<T>> {
        Box::pin(async move {
            let started = std::time::Instant::now();
            let result = work.await;
            let failure = result.as_ref().err().and_then(StoreError::kind);
            self.metrics.store_operation(started.elapsed(), failure);
            result
        })
    }

    /// Runs one row's decision in a writing transaction and stores its outcome.
    async fn write_one(
        &self,
        key: &ResultKey,
        decide: impl FnOnce(Option<&Row>, i64) -> Decision,
    ) -> StoreResult<Written> {
        let (mut tx, head) = self.begin_write().await?;
        let current = load(&mut tx, key).await?;
        let now = now_millis();
        let mut row = match decide(current.as_ref(), now) {
            Decision::Write(row) => row,
            Decision::Unchanged(row) => {
                tx.rollback().await?;
                return Ok(Written {
                    result: row.to_api()?,
                    outcome: Outcome::Unchanged,
                });
            }
            Decision::Frozen(row) => {
                tx.rollback().await?;
                let current = Box::new(row.to_api()?);
                return Err(Refusal::Frozen { current }.into());
            }
            Decision::Refuse(refusal) => {
                tx.rollback().await?;
                return Err(refusal.into());
            }
        };
        let revision = head + 1;
        row.revision = revision;
        if current.is_none() {
            row.created_revision = revision;
        }
        upsert(&mut tx, &row).await?;
        let result = row.to_api()?;
        let item = FeedItem::Upserted {
            revision,
            result: Box::new(result.clone()),
        };
        record(&mut tx, &row.namespace, &item, now).await?;
        self.commit(tx, revision).await?;
        let outcome = if current.is_some() {
            Outcome::Updated
        } else {
            Outcome::Created
        };
        Ok(Written { result, outcome })
    }

    async fn newest_uid(
        &self,
        executor: &mut sqlx::AnyConnection,
        namespace: &str,
        workflow: &str,
    ) -> StoreResult<Option<String>> {
        Ok(sqlx::query_scalar(NEWEST_UID)
            .bind(namespace)
            .bind(workflow)
            .fetch_optional(executor)
            .await?)
    }

    async fn list_page(&self, query: ListQuery) -> StoreResult<ResultPage> {
        let mut tx = self.pool.begin_with(self.dialect.begin_read()).await?;
        let revision: i64 = sqlx::query_scalar(READ_HEAD).fetch_one(&mut *tx).await?;
        let uid = match query.workflow_uid {
            Some(uid) => Some(uid),
            None => {
                self.newest_uid(&mut tx, &query.namespace, &query.workflow)
                    .await?
            }
        };
        let mut page = ResultPage {
            items: Vec::new(),
            revision,
            summary: Summary::default(),
            workflow_uid: uid.clone(),
            more: false,
        };
        let Some(uid) = uid else {
            tx.rollback().await?;
            return Ok(page);
        };
        let counts = sqlx::query(SUMMARY)
            .bind(&query.namespace)
            .bind(&uid)
            .bind(&query.workflow)
            .fetch_all(&mut *tx)
            .await?;
        page.summary = summarize(&counts)?;
        let rows = sqlx::query(SELECT_PAGE)
            .bind(&query.namespace)
            .bind(&uid)
            .bind(&query.workflow)
            .bind(query.after.unwrap_or_default())
            .bind(query.state.map(ResultState::as_str).unwrap_or_default())
            .bind(i64::from(query.limit) + 1)
            .fetch_all(&mut *tx)
            .await?;
        tx.rollback().await?;
        page.more = rows.len() > query.limit as usize;
        page.items = rows
            .iter()
            .take(query.limit as usize)
            .map(|row| Row::decode(row)?.to_api())
            .collect::<StoreResult<_>>()?;
        Ok(page)
    }

    async fn get_one(
        &self,
        namespace: String,
        workflow: String,
        node_id: String,
        workflow_uid: Option<String>,
    ) -> StoreResult<Option<NodeResult>> {
        let mut conn = self.pool.acquire().await?;
        let uid = match workflow_uid {
            Some(uid) => uid,
            None => match self.newest_uid(&mut conn, &namespace, &workflow).await? {
                Some(uid) => uid,
                None => return Ok(None),
            },
        };
        let row = sqlx::query(SELECT_BY_KEY)
            .bind(&namespace)
            .bind(&uid)
            .bind(&node_id)
            .fetch_optional(&mut *conn)
            .await?;
        match row {
            Some(row) => {
                let row = Row::decode(&row)?;
                Ok((row.workflow == workflow)
                    .then(|| row.to_api())
                    .transpose()?)
            }
            None => Ok(None),
        }
    }

    async fn delete(&self, namespace: String, workflow: String, uid: String) -> StoreResult<u64> {
        let (mut tx, head) = self.begin_write().await?;
        let mut node_ids: Vec<String> = sqlx::query_scalar(DELETE_WORKFLOW)
            .bind(&namespace)
            .bind(&workflow)
            .bind(&uid)
            .fetch_all(&mut *tx)
            .await?;
        if node_ids.is_empty() {
            tx.rollback().await?;
            return Ok(0);
        }
        node_ids.sort();
        let now = now_millis();
        let mut revision = head;
        for node_id in &node_ids {
            revision += 1;
            let tombstone = FeedItem::Deleted {
                revision,
                namespace: namespace.clone(),
                workflow: workflow.clone(),
                workflow_uid: uid.clone(),
                node_id: node_id.clone(),
            };
            record(&mut tx, &namespace, &tombstone, now).await?;
        }
        self.commit(tx, revision).await?;
        Ok(node_ids.len() as u64)
    }

    async fn read_feed(
        &self,
        since: i64,
        namespace: Option<String>,
        limit: u32,
    ) -> StoreResult<FeedChunk> {
        // The head is read first: every revision up to it has committed, so the changes
        // read next hold all of them, and the head is a safe place to resume from.
        let head: i64 = sqlx::query_scalar(READ_HEAD).fetch_one(&self.pool).await?;
        let items: Vec<String> = sqlx::query_scalar(SELECT_CHANGES)
            .bind(since)
            .bind(head)
            .bind(namespace.unwrap_or_default())
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
        // Read after the changes: history pruned before that read, or during it, shows here.
        let pruned: i64 = sqlx::query_scalar(READ_PRUNED)
            .fetch_one(&self.pool)
            .await?;
        if since < pruned {
            return Err(Refusal::Gone {
                since,
                pruned,
                revision: head,
            }
            .into());
        }
        let revision = if items.len() < limit as usize {
            head.max(since)
        } else {
            let last = items.last().map(String::as_str).unwrap_or_default();
            serde_json::from_str::<FeedItem>(last)
                .map_err(|e| StoreError::Corrupt(format!("feed item: {e}")))?
                .revision()
        };
        Ok(FeedChunk { items, revision })
    }

    /// Drops feed history recorded before `before`, at most a batch per transaction.
    async fn prune_changes(&self, before: i64) -> StoreResult<u64> {
        let mut pruned = 0;
        loop {
            let mut tx = self.pool.begin_with(self.dialect.begin_write()).await?;
            let through: Option<i64> = sqlx::query_scalar(PRUNABLE_THROUGH)
                .bind(before)
                .bind(RETENTION_BATCH)
                .fetch_one(&mut *tx)
                .await?;
            let Some(through) = through else {
                tx.rollback().await?;
                return Ok(pruned);
            };
            let deleted = sqlx::query(DELETE_CHANGES)
                .bind(through)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            sqlx::query(SET_PRUNED)
                .bind(through)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            pruned += deleted;
        }
    }

    /// Deletes results unchanged since `before`, a batch per transaction, leaving
    /// tombstones in the feed.
    async fn expire_results(&self, before: i64) -> StoreResult<u64> {
        let mut expired = 0;
        loop {
            let (mut tx, head) = self.begin_write().await?;
            let rows = sqlx::query(DELETE_EXPIRED)
                .bind(before)
                .bind(RETENTION_BATCH)
                .fetch_all(&mut *tx)
                .await?;
            if rows.is_empty() {
                tx.rollback().await?;
                return Ok(expired);
            }
            let now = now_millis();
            let mut revision = head;
            for row in &rows {
                revision += 1;
                let namespace: String = row.try_get("namespace")?;
                let tombstone = FeedItem::Deleted {
                    revision,
                    namespace: namespace.clone(),
                    workflow: row.try_get("workflow")?,
                    workflow_uid: row.try_get("workflow_uid")?,
                    node_id: row.try_get("node_id")?,
                };
                record(&mut tx, &namespace, &tombstone, now).await?;
            }
            self.commit(tx, revision).await?;
            expired += rows.len() as u64;
        }
    }

    async fn insert_claim(&self, claim: NewClaim) -> StoreResult<Claim> {
        let now = now_millis();
        let inserted: Option<i64> = sqlx::query_scalar(CLAIM_COLUMNS_INSERT)
            .bind(&claim.cron_workflow_uid)
            .bind(claim.scheduled_millis)
            .bind(&claim.namespace)
            .bind(&claim.cron_workflow)
            .bind(&claim.workflow_name)
            .bind(now)
            .fetch_optional(&self.pool)
            .await?;
        let row = sqlx::query(SELECT_CLAIM)
            .bind(&claim.cron_workflow_uid)
            .bind(claim.scheduled_millis)
            .fetch_one(&self.pool)
            .await?;
        let stored = decode_claim(&row)?;
        match inserted {
            Some(_) => Ok(stored),
            None => Err(Refusal::AlreadyClaimed {
                current: Box::new(stored),
            }
            .into()),
        }
    }

    async fn list_claims(
        &self,
        namespace: String,
        name: String,
        uid: Option<String>,
    ) -> StoreResult<ClaimList> {
        let rows = sqlx::query(SELECT_CLAIMS)
            .bind(&namespace)
            .bind(&name)
            .bind(uid.unwrap_or_default())
            .fetch_all(&self.pool)
            .await?;
        let items = rows
            .iter()
            .map(decode_claim)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ClaimList {
            last_scheduled_time: items.first().map(|c| c.scheduled_time.clone()),
            items,
        })
    }
}

impl Store for SqlStore {
    fn report(&self, key: ResultKey, report: Report) -> BoxFuture<'_, StoreResult<Written>> {
        self.measured(async move {
            self.write_one(&key, |current, now| {
                rules::report(current, &key, &report, now)
            })
            .await
        })
    }

    fn expect(
        &self,
        key: ResultKey,
        expectation: Expectation,
    ) -> BoxFuture<'_, StoreResult<Written>> {
        self.measured(async move {
            self.write_one(&key, |current, now| {
                rules::expect(current, &key, &expectation, now)
            })
            .await
        })
    }

    fn abandon(&self, key: ResultKey, reason: String) -> BoxFuture<'_, StoreResult<Written>> {
        self.measured(async move {
            self.write_one(&key, |current, now| {
                rules::abandon(current, &key, &reason, now)
            })
            .await
        })
    }

    fn delete_workflow(
        &self,
        namespace: String,
        workflow: String,
        workflow_uid: String,
    ) -> BoxFuture<'_, StoreResult<u64>> {
        self.measured(self.delete(namespace, workflow, workflow_uid))
    }

    fn get(
        &self,
        namespace: String,
        workflow: String,
        node_id: String,
        workflow_uid: Option<String>,
    ) -> BoxFuture<'_, StoreResult<Option<NodeResult>>> {
        self.measured(self.get_one(namespace, workflow, node_id, workflow_uid))
    }

    fn list(&self, query: ListQuery) -> BoxFuture<'_, StoreResult<ResultPage>> {
        self.measured(self.list_page(query))
    }

    fn feed(
        &self,
        since: i64,
        namespace: Option<String>,
        limit: u32,
    ) -> BoxFuture<'_, StoreResult<FeedChunk>> {
        self.measured(self.read_feed(since, namespace, limit))
    }

    fn claim(&self, claim: NewClaim) -> BoxFuture<'_, StoreResult<Claim>> {
        self.measured(self.insert_claim(claim))
    }

    fn claims(
        &self,
        namespace: String,
        cron_workflow: String,
        cron_workflow_uid: Option<String>,
    ) -> BoxFuture<'_, StoreResult<ClaimList>> {
        self.measured(self.list_claims(namespace, cron_workflow, cron_workflow_uid))
    }

    fn prune(
        &self,
        changes_before: i64,
        results_before: i64,
    ) -> BoxFuture<'_, StoreResult<Pruned>> {
        self.measured(async move {
            Ok(Pruned {
                results: self.expire_results(results_before).await?,
                changes: self.prune_changes(changes_before).await?,
            })
        })
    }

    fn pending(&self) -> BoxFuture<'_, StoreResult<(u64, u64)>> {
        self.measured(async move {
            let counts = sqlx::query(PENDING).fetch_all(&self.pool).await?;
            let summary = summarize(&counts)?;
            Ok((summary.expected, summary.reporting))
        })
    }

    fn revisions(&self) -> watch::Receiver<i64> {
        self.notifier.subscribe()
    }

    fn ping(&self) -> BoxFuture<'_, StoreResult<()>> {
        self.measured(async move {
            sqlx::query(READ_HEAD).fetch_one(&self.pool).await?;
            Ok(())
        })
    }
}
