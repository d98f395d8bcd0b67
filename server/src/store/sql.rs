//! The SQL store, one implementation for Postgres and SQLite through sqlx's `Any` driver.
//!
//! Every writing transaction first writes the single `store_state` row: on Postgres that
//! takes its row lock, on SQLite the database write lock (`BEGIN IMMEDIATE`). Writers
//! therefore run one at a time from that point, and the revisions they assign commit in
//! increasing order, which is what lets a feed reader resume from a revision without ever
//! missing a late commit. Reads of a page and its summary share one snapshot.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use argo_results_proto::{Claim, FeedItem, NodeResult, ResultState, Summary};
use futures_util::TryStreamExt;
use sqlx::AnyPool;
use sqlx::any::AnyRow;
use sqlx::pool::PoolConnection;
use sqlx::{Any, AnyConnection, Connection as _, Row as _, Transaction};
use tokio::sync::watch;

use super::bulk::{self, Change};
use super::claim::{self, ClaimDecision, ClaimRow, SettleDecision, claim_columns};
use super::group_commit::{Batching, Queue, Write};
use super::row::{Row, result_columns};
use super::rules::{self, Decision, ReportPolicy};
use super::{
    ACQUIRE_TIMEOUT, BoxFuture, ClaimPage, ClaimQuery, Expectation, FeedChunk, ListQuery, NewClaim,
    Outcome, PruneBefore, Pruned, Refusal, Report, ResultKey, ResultPage, Settlement, Store,
    StoreError, StoreResult, Written, postgres, sqlite,
};
use crate::clock::now_millis;
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

    /// The database's clock in Unix milliseconds: leases are decided on it, so that every
    /// replica agrees whose lease has expired whatever its own clock says.
    fn now(self) -> &'static str {
        match self {
            Dialect::Postgres => "SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT",
            Dialect::Sqlite => "SELECT CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER)",
        }
    }

    /// A tick's claim, locked until the transaction ends (SQLite's `BEGIN IMMEDIATE`
    /// already holds the database's write lock).
    fn select_claim(self) -> &'static str {
        match self {
            Dialect::Postgres => SELECT_CLAIM_FOR_UPDATE,
            Dialect::Sqlite => SELECT_CLAIM,
        }
    }
}

/// The store: reads go straight to the database; writes of results (reports,
/// expectations, abandons) go through group commit.
#[derive(Debug)]
pub struct SqlStore {
    db: Db,
    writes: Queue,
    policy: ReportPolicy,
}

/// The group-commit writer's own connection, kept between batches so that a batch does
/// not wait for the pool, and when it was last used.
#[derive(Debug, Default)]
pub(super) struct WriterConnection(Option<(PoolConnection<Any>, Instant)>);

/// The least time a batch is given, however long its writes waited for the one before.
const MIN_BATCH_TIME: std::time::Duration = std::time::Duration::from_secs(1);

/// A writer's connection idle longer than this is pinged before use.
const IDLE_BEFORE_CHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// The connection pool and what every transaction needs besides it.
#[derive(Debug, Clone)]
pub(super) struct Db {
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
const LOAD_POSTGRES: &str = concat!(
    "SELECT ",
    result_columns!(),
    " FROM results WHERE (namespace, workflow_uid, node_id) IN \
     (SELECT k ->> 0, k ->> 1, k ->> 2 FROM json_array_elements($1::json) AS k)"
);
const LOAD_SQLITE: &str = concat!(
    "SELECT ",
    result_columns!(),
    " FROM results WHERE (namespace, workflow_uid, node_id) IN \
     (SELECT value ->> 0, value ->> 1, value ->> 2 FROM json_each($1))"
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
const SELECT_CHANGES: &str = "SELECT revision, item FROM changes WHERE revision > $1 AND revision <= $2 \
     AND ($3 = '' OR namespace = $3) ORDER BY revision LIMIT $4";
const DELETE_WORKFLOW: &str = "DELETE FROM results WHERE namespace = $1 AND workflow = $2 \
     AND workflow_uid = $3 RETURNING node_id";
const INSERT_CLAIM: &str = concat!(
    "INSERT INTO cron_claims (",
    claim_columns!(),
    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) \
     ON CONFLICT (cron_workflow_uid, scheduled_time) DO NOTHING"
);
/// Writes what a takeover or a settle changes.
const UPDATE_CLAIM: &str = "UPDATE cron_claims SET state = $3, claim_id = $4, claimed_at = $5, \
     lease_expires_at = $6, takeovers = $7, settled_at = $8, workflow_uid = $9, reason = $10 \
     WHERE cron_workflow_uid = $1 AND scheduled_time = $2";
const SELECT_CLAIM: &str = concat!(
    "SELECT ",
    claim_columns!(),
    " FROM cron_claims WHERE cron_workflow_uid = $1 AND scheduled_time = $2"
);
const SELECT_CLAIM_FOR_UPDATE: &str = concat!(
    "SELECT ",
    claim_columns!(),
    " FROM cron_claims WHERE cron_workflow_uid = $1 AND scheduled_time = $2 FOR UPDATE"
);
/// A page of a cron workflow's claims, newest first, after ($4, $5).
const SELECT_CLAIMS: &str = concat!(
    "SELECT ",
    claim_columns!(),
    " FROM cron_claims WHERE namespace = $1 AND cron_workflow = $2 \
     AND ($3 = '' OR cron_workflow_uid = $3) AND (scheduled_time, cron_workflow_uid) < ($4, $5) \
     ORDER BY scheduled_time DESC, cron_workflow_uid DESC LIMIT $6"
);
const LAST_SETTLED: &str = "SELECT MAX(scheduled_time) FROM cron_claims \
     WHERE namespace = $1 AND cron_workflow = $2 AND ($3 = '' OR cron_workflow_uid = $3) \
     AND state <> 'claimed'";
/// Claims (as `c`) that retention removes: taken before $1, and either settled with a newer
/// settled tick of the same cron workflow, or unsettled with a lease that expired before $1.
macro_rules! prunable_claim {
    ($c:literal) => {
        concat!(
            $c,
            ".claimed_at < $1 AND ((",
            $c,
            ".state = 'claimed' AND ",
            $c,
            ".lease_expires_at < $1) OR (",
            $c,
            ".state <> 'claimed' AND EXISTS \
             (SELECT 1 FROM cron_claims AS newer WHERE newer.namespace = ",
            $c,
            ".namespace AND newer.cron_workflow = ",
            $c,
            ".cron_workflow \
             AND newer.state <> 'claimed' AND newer.scheduled_time > ",
            $c,
            ".scheduled_time)))"
        )
    };
}
/// At most $2 prunable claims, oldest first. The condition is checked again on the rows
/// deleted: a claim taken over meanwhile (its row locked, then changed) is no longer old.
const DELETE_OLD_CLAIMS: &str = concat!(
    "DELETE FROM cron_claims WHERE ",
    prunable_claim!("cron_claims"),
    " AND (cron_workflow_uid, scheduled_time) IN (SELECT old.cron_workflow_uid, \
     old.scheduled_time FROM cron_claims AS old WHERE ",
    prunable_claim!("old"),
    " ORDER BY old.claimed_at LIMIT $2)"
);

/// A fresh `claimId`: a random UUID (version 4), like the UIDs Kubernetes hands out.
fn new_claim_id() -> StoreResult<String> {
    let mut bytes = [0u8; 16];
    aws_lc_rs::rand::fill(&mut bytes).map_err(|_| StoreError::Random)?;
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    ))
}

/// Binds what a takeover or a settle can change (`state` to `reason`, in the order of
/// `claim_columns!`), after the key columns.
fn bind_claim_changes<'q>(
    query: sqlx::query::Query<'q, Any, sqlx::any::AnyArguments<'q>>,
    row: &'q ClaimRow,
) -> sqlx::query::Query<'q, Any, sqlx::any::AnyArguments<'q>> {
    query
        .bind(row.state.as_str())
        .bind(&row.claim_id)
        .bind(row.claimed_at)
        .bind(row.lease_expires_at)
        .bind(row.takeovers)
        .bind(row.settled_at)
        .bind(&row.workflow_uid)
        .bind(&row.reason)
}

/// What a page's items may weigh: API section 4 allows 8 MiB of JSON in a page, of which
/// 4 KiB are kept for the page's envelope (summary, revision, continue token).
const PAGE_ITEMS_BYTES: usize = (8 << 20) - 4096;
/// Pages are read in rounds of rows, growing from the first to the last size: Postgres
/// sends every row a query asks for, so a page of large rows reads few rows past its
/// budget, and a page of small ones takes few rounds.
const FIRST_ROUND: usize = 16;
const LAST_ROUND: usize = 256;

/// The items of a page being read in rounds, within its limit and byte budget; the first
/// item is always taken, however large.
struct Filling<T> {
    items: Vec<T>,
    bytes: usize,
    limit: usize,
    /// An item was left out: more follow.
    more: bool,
    /// The rows the next round asks for, at most.
    round: usize,
    /// The rows the last round asked for, and how many it offered.
    asked: usize,
    offered: usize,
}

impl<T> Filling<T> {
    fn new(limit: u32) -> Self {
        Filling {
            items: Vec::new(),
            bytes: 0,
            limit: limit as usize,
            more: false,
            round: FIRST_ROUND,
            asked: 0,
            offered: 0,
        }
    }

    /// How many rows the next round reads (no more than fill the page, plus one that
    /// tells whether more follow), or `None` when the page is full or the rows ran out.
    fn next_round(&mut self) -> Option<usize> {
        if self.more || self.offered < self.asked {
            return None;
        }
        self.asked = self.round.min(self.limit + 1 - self.items.len());
        self.offered = 0;
        self.round = (self.round * 2).min(LAST_ROUND);
        Some(self.asked)
    }

    /// Takes `item`, which weighs `size` bytes of JSON, unless the page is full.
    fn offer(&mut self, item: T, size: usize) -> bool {
        self.offered += 1;
        // Each item after the first costs its separating comma too.
        let full = self.items.len() == self.limit
            || (!self.items.is_empty() && self.bytes + 1 + size > PAGE_ITEMS_BYTES);
        if full {
            self.more = true;
            return false;
        }
        self.bytes += size + usize::from(!self.items.is_empty());
        self.items.push(item);
        true
    }
}

/// The length of `value` as JSON, without writing it anywhere.
fn json_len(value: &impl serde::Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Serializing the API's types into a counter cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
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

/// A result's primary key in the database.
fn identity(key: &ResultKey) -> (&str, &str, &str) {
    (&key.namespace, &key.workflow_uid, &key.node_id)
}

fn to_json(value: &impl serde::Serialize) -> StoreResult<String> {
    serde_json::to_string(value).map_err(|e| StoreError::Corrupt(format!("batch: {e}")))
}

async fn load_many(
    tx: &mut AnyConnection,
    dialect: Dialect,
    identities: &[(&str, &str, &str)],
) -> StoreResult<Vec<Row>> {
    let sql = match dialect {
        Dialect::Postgres => LOAD_POSTGRES,
        Dialect::Sqlite => LOAD_SQLITE,
    };
    // On Postgres, planned afresh for every batch: a plan cached while `results` was small
    // would scan it whole for every batch until autovacuum analyzes it (and the writer's
    // long-lived connection would keep that plan).
    let rows = sqlx::query(sql)
        .persistent(dialect == Dialect::Sqlite)
        .bind(to_json(&identities)?)
        .fetch_all(tx)
        .await?;
    rows.iter().map(Row::decode).collect()
}

/// The rows of `changes` that record `items`.
fn change_rows(items: &[FeedItem], now: i64) -> StoreResult<Vec<Change<'_>>> {
    items
        .iter()
        .map(|item| {
            Ok(Change {
                revision: item.revision(),
                namespace: item.namespace(),
                item: to_json(item)?,
                recorded_at: now,
            })
        })
        .collect()
}

/// Records `items` in the feed, in statements of at most 1,000 changes.
async fn record_many(tx: &mut AnyConnection, items: &[FeedItem], now: i64) -> StoreResult<()> {
    let records = change_rows(items, now)?;
    for chunk in records.chunks(bulk::CHANGES_PER_STATEMENT) {
        let sql = bulk::record_statement(chunk.len());
        let query = sqlx::query(&sql).persistent(bulk::prepared(chunk.len()));
        chunk
            .iter()
            .fold(query, bulk::bind_change)
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

impl SqlStore {
    /// Connects to `postgres://...` or `sqlite://PATH`, applies the migrations and starts
    /// the group-commit writer, which judges reports by `policy`.
    pub async fn connect(
        url: &str,
        max_connections: u32,
        batching: Batching,
        policy: ReportPolicy,
        metrics: Arc<Metrics>,
    ) -> StoreResult<Self> {
        sqlx::any::install_default_drivers();
        let (pool, dialect) = open(url, max_connections).await?;
        match dialect {
            Dialect::Postgres => postgres::migrate(&pool).await?,
            Dialect::Sqlite => sqlite::migrate(&pool).await?,
        }
        let head: i64 = sqlx::query_scalar(READ_HEAD).fetch_one(&pool).await?;
        let notifier = Arc::new(Notifier::new(head));
        if dialect == Dialect::Postgres {
            postgres::follow_commits(url.to_owned(), pool.clone(), Arc::clone(&notifier)).await?;
        }
        let db = Db {
            pool,
            dialect,
            notifier,
            metrics,
        };
        Ok(SqlStore {
            writes: Queue::start(db.clone(), url.to_owned(), batching).await?,
            db,
            policy,
        })
    }
}

/// A pool of `postgres://...` or `sqlite://PATH`.
async fn open(url: &str, max_connections: u32) -> StoreResult<(AnyPool, Dialect)> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok((
            postgres::connect(url, max_connections).await?,
            Dialect::Postgres,
        ))
    } else if let Some(path) = url.strip_prefix("sqlite://") {
        Ok((
            sqlite::connect(path, max_connections).await?,
            Dialect::Sqlite,
        ))
    } else {
        Err(StoreError::UnsupportedUrl(url.to_owned()))
    }
}

impl Db {
    /// The same store through a pool of one connection of its own, opened on the runtime
    /// that will use it.
    pub(super) async fn with_own_connection(&self, url: &str) -> StoreResult<Db> {
        let (pool, _) = open(url, 1).await?;
        Ok(Db {
            pool,
            ..self.clone()
        })
    }
    async fn begin_write(&self) -> StoreResult<(Tx, i64)> {
        let mut tx = self.pool.begin_with(self.dialect.begin_write()).await?;
        let head: i64 = sqlx::query_scalar(LOCK_HEAD).fetch_one(&mut *tx).await?;
        Ok((tx, head))
    }

    async fn commit(&self, mut tx: Transaction<'_, Any>, head: i64) -> StoreResult<()> {
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

    /// Runs the decisions of a batch of writes in one transaction, in order, each seeing
    /// the rows as the writes before it left them, and commits what they wrote. Answers
    /// each write's outcome, or fails the whole batch when the transaction fails.
    pub(super) async fn write_batch(
        &self,
        connection: &mut WriterConnection,
        writes: &[&Write],
    ) -> StoreResult<Vec<StoreResult<Written>>> {
        // A database that hangs instead of refusing must still be answered with 503
        // within 5 s: the whole batch, connecting included, ends 3 s after its oldest
        // write arrived (and has at least a second). A batch cut off at its commit may
        // have committed; its writers hear 503, and their retries replay.
        let arrived = writes.iter().map(|w| w.arrived).min();
        let deadline = (arrived.unwrap_or_else(Instant::now) + ACQUIRE_TIMEOUT)
            .max(Instant::now() + MIN_BATCH_TIME);
        let outcomes = match tokio::time::timeout_at(
            deadline.into(),
            self.run_batch(connection, writes),
        )
        .await
        {
            Ok(outcomes) => outcomes,
            Err(_) => Err(StoreError::TimedOut),
        };
        if let Err(error) = &outcomes
            && let Some((held, _)) = connection.0.take()
        {
            // Broken, mid-statement or in a failed transaction: closed without a
            // goodbye (which could hang too), never handed back to the pool.
            tracing::debug!(%error, "the writer's connection is replaced");
            drop(held.detach());
        }
        outcomes
    }

    /// The writer's connection, checked when it sat idle (the database may have restarted
    /// since), or a new one.
    async fn writer_connection<'c>(
        &self,
        connection: &'c mut WriterConnection,
    ) -> StoreResult<&'c mut AnyConnection> {
        if let Some((held, used)) = &mut connection.0
            && used.elapsed() > IDLE_BEFORE_CHECK
            && let Err(error) = held.ping().await
        {
            tracing::info!(%error, "the writer's idle connection is replaced");
            if let Some((held, _)) = connection.0.take() {
                drop(held.detach());
            }
        }
        if connection.0.is_none() {
            connection.0 = Some((self.pool.acquire().await?, Instant::now()));
        }
        let (held, used) = connection
            .0
            .as_mut()
            .ok_or_else(|| StoreError::Corrupt("the writer lost its connection".into()))?;
        *used = Instant::now();
        Ok(&mut **held)
    }

    async fn run_batch(
        &self,
        connection: &mut WriterConnection,
        writes: &[&Write],
    ) -> StoreResult<Vec<StoreResult<Written>>> {
        let connection = self.writer_connection(connection).await?;
        let mut tx = connection.begin_with(self.dialect.begin_write()).await?;
        let mut head: i64 = sqlx::query_scalar(LOCK_HEAD).fetch_one(&mut *tx).await?;

        let mut rows: HashMap<(&str, &str, &str), Option<Row>> =
            writes.iter().map(|w| (identity(&w.key), None)).collect();
        let keys: Vec<_> = rows.keys().copied().collect();
        for row in load_many(&mut tx, self.dialect, &keys).await? {
            let id = keys.iter().copied().find(|&(namespace, uid, node)| {
                namespace == row.namespace && uid == row.workflow_uid && node == row.node_id
            });
            if let Some(id) = id {
                rows.insert(id, Some(row));
            }
        }

        let now = now_millis();
        let mut outcomes = Vec::with_capacity(writes.len());
        let mut changes = Vec::new();
        let mut written = Vec::new();
        for write in writes {
            let id = identity(&write.key);
            let current = rows.get_mut(&id).ok_or_else(|| {
                StoreError::Corrupt(format!("batch lost the row of {:?}", write.key))
            })?;
            let outcome = match (write.decide)(current.as_ref(), now) {
                Decision::Write(mut row) => {
                    head += 1;
                    row.revision = head;
                    let outcome = if current.is_some() {
                        Outcome::Updated
                    } else {
                        row.created_revision = head;
                        Outcome::Created
                    };
                    let result = row.clone().into_api()?;
                    changes.push(FeedItem::Upserted {
                        revision: head,
                        result: Box::new(result.clone()),
                    });
                    *current = Some(row);
                    if !written.contains(&id) {
                        written.push(id);
                    }
                    Ok(Written { result, outcome })
                }
                Decision::Unchanged(row) => Ok(Written {
                    result: row.into_api()?,
                    outcome: Outcome::Unchanged,
                }),
                Decision::Frozen(row) => Err(Refusal::Frozen {
                    current: Box::new(row.into_api()?),
                }
                .into()),
                Decision::Refuse(refusal) => Err(refusal.into()),
                Decision::Corrupt(detail) => Err(StoreError::Corrupt(detail)),
            };
            outcomes.push(outcome);
        }
        self.metrics.batch_decided(writes.len());
        if changes.is_empty() {
            tx.rollback().await?;
            return Ok(outcomes);
        }
        // Only a row's last state is stored; each of its writes is in the feed.
        let last: Vec<&Row> = written
            .iter()
            .filter_map(|id| rows.get(id).and_then(Option::as_ref))
            .collect();
        match self.dialect {
            Dialect::Postgres => {
                let records = change_rows(&changes, now)?;
                let sql = bulk::write_postgres_statement(last.len(), records.len());
                let query = sqlx::query(&sql).persistent(bulk::prepared(records.len()));
                let query = last
                    .iter()
                    .fold(query.bind(head), |query, row| bulk::bind_row(query, row));
                records
                    .iter()
                    .fold(query, bulk::bind_change)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                self.notifier.publish(head);
            }
            Dialect::Sqlite => {
                let sql = bulk::upsert_statement(last.len());
                let query = sqlx::query(&sql).persistent(bulk::prepared(last.len()));
                last.iter()
                    .fold(query, |query, row| bulk::bind_row(query, row))
                    .execute(&mut *tx)
                    .await?;
                record_many(&mut tx, &changes, now).await?;
                self.commit(tx, head).await?;
            }
        }
        Ok(outcomes)
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
        let state = query.state.map(ResultState::as_str).unwrap_or_default();
        let mut filling = Filling::new(query.limit);
        let mut after = query.after.unwrap_or_default();
        while let Some(rows) = filling.next_round() {
            let mut rows = sqlx::query(SELECT_PAGE)
                .bind(&query.namespace)
                .bind(&uid)
                .bind(&query.workflow)
                .bind(after.clone())
                .bind(state)
                .bind(rows as i64)
                .fetch(&mut *tx);
            while let Some(row) = rows.try_next().await? {
                let item = Row::decode(&row)?.into_api()?;
                let node_id = item.node_id.clone();
                let size = json_len(&item);
                if !filling.offer(item, size) {
                    break;
                }
                after = node_id;
            }
        }
        tx.rollback().await?;
        page.more = filling.more;
        page.items = filling.items;
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
                    .then(|| row.into_api())
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
        let tombstones: Vec<FeedItem> = (head + 1..)
            .zip(node_ids)
            .map(|(revision, node_id)| FeedItem::Deleted {
                revision,
                namespace: namespace.clone(),
                workflow: workflow.clone(),
                workflow_uid: uid.clone(),
                node_id,
            })
            .collect();
        record_many(&mut tx, &tombstones, now_millis()).await?;
        let deleted = tombstones.len() as u64;
        self.commit(tx, head + deleted as i64).await?;
        Ok(deleted)
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
        let namespace = namespace.unwrap_or_default();
        let mut filling = Filling::new(limit);
        let mut after = since;
        while let Some(rows) = filling.next_round() {
            let mut rows = sqlx::query(SELECT_CHANGES)
                .bind(after)
                .bind(head)
                .bind(&namespace)
                .bind(rows as i64)
                .fetch(&self.pool);
            while let Some(row) = rows.try_next().await? {
                let revision: i64 = row.try_get("revision")?;
                let item: String = row.try_get("item")?;
                let size = item.len();
                if !filling.offer(item, size) {
                    break;
                }
                after = revision;
            }
        }
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
        // A full page resumes after its last change; one that read everything, at the head.
        let revision = if filling.more { after } else { head.max(since) };
        Ok(FeedChunk {
            items: filling.items,
            revision,
        })
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
            let tombstones = (head + 1..)
                .zip(&rows)
                .map(|(revision, row)| {
                    Ok(FeedItem::Deleted {
                        revision,
                        namespace: row.try_get("namespace")?,
                        workflow: row.try_get("workflow")?,
                        workflow_uid: row.try_get("workflow_uid")?,
                        node_id: row.try_get("node_id")?,
                    })
                })
                .collect::<Result<Vec<_>, sqlx::Error>>()?;
            record_many(&mut tx, &tombstones, now_millis()).await?;
            self.commit(tx, head + tombstones.len() as i64).await?;
            expired += tombstones.len() as u64;
        }
    }

    /// A tick's claim, locked until `tx` ends, and the database's time once it is.
    async fn locked_claim(
        &self,
        tx: &mut AnyConnection,
        cron_workflow_uid: &str,
        scheduled_millis: i64,
    ) -> StoreResult<(Option<ClaimRow>, i64)> {
        let row = sqlx::query(self.dialect.select_claim())
            .bind(cron_workflow_uid)
            .bind(scheduled_millis)
            .fetch_optional(&mut *tx)
            .await?;
        let now: i64 = sqlx::query_scalar(self.dialect.now())
            .fetch_one(&mut *tx)
            .await?;
        Ok((row.as_ref().map(ClaimRow::decode).transpose()?, now))
    }

    async fn take_claim(&self, claim: NewClaim) -> StoreResult<Claim> {
        let claim_id = new_claim_id()?;
        // On Postgres, a first claim racing this one can insert the row between this read
        // and this insert; the second pass then reads that row, locked, and decides on it.
        for _ in 0..2 {
            let mut tx = self.pool.begin_with(self.dialect.begin_write()).await?;
            let (current, now) = self
                .locked_claim(&mut tx, &claim.cron_workflow_uid, claim.scheduled_millis)
                .await?;
            let row = match claim::claim(current.as_ref(), &claim, &claim_id, now) {
                ClaimDecision::Insert(row) => {
                    let insert = sqlx::query(INSERT_CLAIM)
                        .bind(&row.cron_workflow_uid)
                        .bind(row.scheduled_time)
                        .bind(&row.namespace)
                        .bind(&row.cron_workflow)
                        .bind(&row.workflow_name);
                    let inserted = bind_claim_changes(insert, &row)
                        .execute(&mut *tx)
                        .await?
                        .rows_affected();
                    if inserted == 0 {
                        tx.rollback().await?;
                        continue;
                    }
                    row
                }
                ClaimDecision::TakeOver(row) => {
                    update_claim(&mut tx, &row).await?;
                    row
                }
                ClaimDecision::Refuse(refusal) => {
                    tx.rollback().await?;
                    return Err(refusal.into());
                }
            };
            tx.commit().await?;
            return Ok(row.for_holder());
        }
        // Cannot happen: a row inserted by a racer holds a live lease, which retention keeps.
        Err(StoreError::Corrupt(format!(
            "the claim of tick {} of {} vanished while it was decided",
            claim.scheduled_millis, claim.cron_workflow_uid
        )))
    }

    async fn settle_claim(&self, settlement: Settlement) -> StoreResult<Claim> {
        let mut tx = self.pool.begin_with(self.dialect.begin_write()).await?;
        let (current, now) = self
            .locked_claim(
                &mut tx,
                &settlement.cron_workflow_uid,
                settlement.scheduled_millis,
            )
            .await?;
        match claim::settle(current, &settlement, now) {
            SettleDecision::Update(row) => {
                update_claim(&mut tx, &row).await?;
                tx.commit().await?;
                Ok(row.for_holder())
            }
            SettleDecision::Unchanged(row) => {
                tx.rollback().await?;
                Ok(row.for_holder())
            }
            SettleDecision::Refuse(refusal) => {
                tx.rollback().await?;
                Err(refusal.into())
            }
        }
    }

    /// A page of claims and the newest settled tick, in one snapshot.
    async fn list_claims(&self, query: ClaimQuery) -> StoreResult<ClaimPage> {
        let uid = query.cron_workflow_uid.unwrap_or_default();
        let (after_time, after_uid) = query.after.unwrap_or((i64::MAX, String::new()));
        let limit = query.limit as usize;
        let mut tx = self.pool.begin_with(self.dialect.begin_read()).await?;
        let rows = sqlx::query(SELECT_CLAIMS)
            .bind(&query.namespace)
            .bind(&query.cron_workflow)
            .bind(&uid)
            .bind(after_time)
            .bind(after_uid)
            .bind(i64::from(query.limit) + 1)
            .fetch_all(&mut *tx)
            .await?;
        let last_scheduled: Option<i64> = sqlx::query_scalar(LAST_SETTLED)
            .bind(&query.namespace)
            .bind(&query.cron_workflow)
            .bind(&uid)
            .fetch_one(&mut *tx)
            .await?;
        tx.rollback().await?;
        let mut rows = rows
            .iter()
            .map(ClaimRow::decode)
            .collect::<StoreResult<Vec<_>>>()?;
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

    /// Deletes old claims (see `prunable_claim!`), a batch per statement.
    async fn prune_claims(&self, before: i64) -> StoreResult<u64> {
        let mut pruned = 0;
        loop {
            let deleted = sqlx::query(DELETE_OLD_CLAIMS)
                .bind(before)
                .bind(RETENTION_BATCH)
                .execute(&self.pool)
                .await?
                .rows_affected();
            if deleted == 0 {
                return Ok(pruned);
            }
            pruned += deleted;
        }
    }
}

/// Writes a taken-over or settled claim.
async fn update_claim(tx: &mut AnyConnection, row: &ClaimRow) -> StoreResult<()> {
    let update = sqlx::query(UPDATE_CLAIM)
        .bind(&row.cron_workflow_uid)
        .bind(row.scheduled_time);
    bind_claim_changes(update, row).execute(tx).await?;
    Ok(())
}

impl Store for SqlStore {
    fn report(&self, key: ResultKey, report: Report) -> BoxFuture<'_, StoreResult<Written>> {
        self.db.measured(async move {
            let rule_key = key.clone();
            let policy = self.policy;
            let decide = move |current: Option<&Row>, now| {
                rules::report(current, &rule_key, &report, &policy, now)
            };
            self.writes.submit(key, Box::new(decide)).await
        })
    }

    fn expect(
        &self,
        key: ResultKey,
        expectation: Expectation,
    ) -> BoxFuture<'_, StoreResult<Written>> {
        self.db.measured(async move {
            let rule_key = key.clone();
            let decide = move |current: Option<&Row>, now| {
                rules::expect(current, &rule_key, &expectation, now)
            };
            self.writes.submit(key, Box::new(decide)).await
        })
    }

    fn abandon(&self, key: ResultKey, reason: String) -> BoxFuture<'_, StoreResult<Written>> {
        self.db.measured(async move {
            let rule_key = key.clone();
            let decide =
                move |current: Option<&Row>, now| rules::abandon(current, &rule_key, &reason, now);
            self.writes.submit(key, Box::new(decide)).await
        })
    }

    fn delete_workflow(
        &self,
        namespace: String,
        workflow: String,
        workflow_uid: String,
    ) -> BoxFuture<'_, StoreResult<u64>> {
        self.db
            .measured(self.db.delete(namespace, workflow, workflow_uid))
    }

    fn get(
        &self,
        namespace: String,
        workflow: String,
        node_id: String,
        workflow_uid: Option<String>,
    ) -> BoxFuture<'_, StoreResult<Option<NodeResult>>> {
        self.db
            .measured(self.db.get_one(namespace, workflow, node_id, workflow_uid))
    }

    fn list(&self, query: ListQuery) -> BoxFuture<'_, StoreResult<ResultPage>> {
        self.db.measured(self.db.list_page(query))
    }

    fn feed(
        &self,
        since: i64,
        namespace: Option<String>,
        limit: u32,
    ) -> BoxFuture<'_, StoreResult<FeedChunk>> {
        self.db.measured(self.db.read_feed(since, namespace, limit))
    }

    fn claim(&self, claim: NewClaim) -> BoxFuture<'_, StoreResult<Claim>> {
        self.db.measured(self.db.take_claim(claim))
    }

    fn settle(&self, settlement: Settlement) -> BoxFuture<'_, StoreResult<Claim>> {
        self.db.measured(self.db.settle_claim(settlement))
    }

    fn claims(&self, query: ClaimQuery) -> BoxFuture<'_, StoreResult<ClaimPage>> {
        self.db.measured(self.db.list_claims(query))
    }

    fn prune(&self, before: PruneBefore) -> BoxFuture<'_, StoreResult<Pruned>> {
        self.db.measured(async move {
            Ok(Pruned {
                results: self.db.expire_results(before.results).await?,
                changes: self.db.prune_changes(before.changes).await?,
                claims: self.db.prune_claims(before.claims).await?,
            })
        })
    }

    fn pending(&self) -> BoxFuture<'_, StoreResult<(u64, u64)>> {
        self.db.measured(async move {
            let counts = sqlx::query(PENDING).fetch_all(&self.db.pool).await?;
            let summary = summarize(&counts)?;
            Ok((summary.expected, summary.reporting))
        })
    }

    fn revisions(&self) -> watch::Receiver<i64> {
        self.db.notifier.subscribe()
    }

    fn ping(&self) -> BoxFuture<'_, StoreResult<()>> {
        self.db.measured(async move {
            if self.writes.stopped() {
                return Err(StoreError::Stopped);
            }
            sqlx::query(READ_HEAD).fetch_one(&self.db.pool).await?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Offers rows of `sizes` as the store reads them, round by round; the page's sizes
    /// and whether more follow.
    fn fill(limit: u32, sizes: &[usize]) -> (Vec<usize>, bool, Vec<usize>) {
        let mut filling = Filling::new(limit);
        let mut rows = sizes.iter();
        let mut rounds = Vec::new();
        while let Some(asked) = filling.next_round() {
            rounds.push(asked);
            for &size in rows.by_ref().take(asked) {
                if !filling.offer(size, size) {
                    break;
                }
            }
        }
        (filling.items, filling.more, rounds)
    }

    #[test]
    fn pages_stop_at_their_limit_or_their_bytes() {
        let mb = 1_000_000;
        // Nine rows of a megabyte: eight fit in 8 MiB, the ninth says more follow.
        let (items, more, rounds) = fill(1000, &[mb; 9]);
        assert_eq!((items.len(), more, rounds), (8, true, vec![16]));
        // Larger than a page: alone on its page.
        let (items, more, _) = fill(1000, &[9 * mb, 10]);
        assert_eq!((items, more), (vec![9 * mb], true));
        // Small rows: rounds grow until the rows run out.
        let (items, more, rounds) = fill(1000, &[10; 40]);
        assert_eq!((items.len(), more, rounds), (40, false, vec![16, 32]));
        // The limit, then one row more tells that more follow.
        let (items, more, rounds) = fill(20, &[10; 21]);
        assert_eq!((items.len(), more, rounds), (20, true, vec![16, 5]));
        let (items, more, _) = fill(20, &[10; 20]);
        assert_eq!((items.len(), more), (20, false));
    }
}
