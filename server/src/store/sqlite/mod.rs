//! SQLite, the embedded default: one replica, in-process, one file.
//!
//! SQLite lets one transaction write at a time: every writing transaction begins
//! `IMMEDIATE`, taking the database's write lock at once rather than failing when it
//! upgrades a read. Statements run a row at a time, prepared once per connection: there
//! is no network round trip to save.

mod claims;
mod read;
mod retention;
mod write;

use std::os::unix::fs::OpenOptionsExt;
use std::time::Duration;

use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use super::backend::ACQUIRE_TIMEOUT;
use super::backend::{Backend, Batch, FeedRead, Identity};
use super::claim::{ClaimDecision, ClaimRow, SettleDecision};
use super::error::{StoreError, StoreResult};
use super::model::{ClaimQuery, ListQuery, ResultPage};
use super::row::Row;
use super::statements::READ_HEAD;

/// Takes the write lock at once.
const BEGIN_WRITE: &str = "BEGIN IMMEDIATE";

#[derive(Debug, Clone)]
pub(super) struct SqliteBackend {
    pool: SqlitePool,
    options: SqliteConnectOptions,
}

/// Creates the database file, if there is none, readable and writable by its owner only:
/// SQLite gives its `-wal`, `-shm` and journal files the database file's permissions.
fn create_private(path: &str) -> StoreResult<()> {
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path);
    match created {
        Err(error) if error.kind() != std::io::ErrorKind::AlreadyExists => {
            Err(StoreError::Database(sqlx::Error::Io(error)))
        }
        _ => Ok(()),
    }
}

async fn pool(options: &SqliteConnectOptions, max_connections: u32) -> StoreResult<SqlitePool> {
    Ok(SqlitePoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .connect_with(options.clone())
        .await?)
}

impl SqliteBackend {
    /// Opens the file at `path` (created if missing) and applies the migrations.
    pub(super) async fn connect(path: &str, max_connections: u32) -> StoreResult<Self> {
        create_private(path)?;
        // WAL lets readers go on beside the one writer; FULL makes every commit durable
        // before the client hears of it; writers queue for up to 10 s.
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(10));
        let backend = SqliteBackend {
            pool: pool(&options, max_connections).await?,
            options,
        };
        let mut migrator = sqlx::migrate!("../migrations/sqlite");
        // Migrations only add, so an older release (a rollback) runs on a newer schema.
        migrator.set_ignore_missing(true);
        migrator.run(&backend.pool).await?;
        Ok(backend)
    }
}

impl Backend for SqliteBackend {
    type Db = sqlx::Sqlite;

    fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    async fn own_connection(&self) -> StoreResult<Self> {
        Ok(SqliteBackend {
            pool: pool(&self.options, 1).await?,
            options: self.options.clone(),
        })
    }

    async fn write_batch<'a, P>(
        &'a self,
        connection: &'a mut sqlx::SqliteConnection,
        keys: &'a [Identity<'a>],
        plan: P,
    ) -> StoreResult<Option<i64>>
    where
        P: FnOnce(i64, Vec<Row>) -> StoreResult<Option<Batch>> + Send + 'a,
    {
        write::batch(connection, keys, plan).await
    }

    async fn delete_workflow<'a>(
        &'a self,
        namespace: &'a str,
        workflow: &'a str,
        workflow_uid: &'a str,
    ) -> StoreResult<Option<(u64, i64)>> {
        write::delete_workflow(&self.pool, namespace, workflow, workflow_uid).await
    }

    async fn expire_results(&self, before: i64) -> StoreResult<Option<(u64, i64)>> {
        retention::expire_results(&self.pool, before).await
    }

    async fn prune_changes(&self, before: i64) -> StoreResult<Option<u64>> {
        retention::prune_changes(&self.pool, before).await
    }

    async fn prune_claims(&self, before: i64) -> StoreResult<u64> {
        retention::prune_claims(&self.pool, before).await
    }

    async fn get<'a>(
        &'a self,
        namespace: &'a str,
        workflow: &'a str,
        node_id: &'a str,
        workflow_uid: Option<&'a str>,
    ) -> StoreResult<Option<Row>> {
        read::get(&self.pool, namespace, workflow, node_id, workflow_uid).await
    }

    async fn list(&self, query: ListQuery) -> StoreResult<ResultPage> {
        read::list(&self.pool, query).await
    }

    async fn feed<'a>(
        &'a self,
        since: i64,
        namespace: &'a str,
        limit: u32,
    ) -> StoreResult<FeedRead> {
        read::feed(&self.pool, since, namespace, limit).await
    }

    async fn claim<'a, D>(
        &'a self,
        cron_workflow_uid: &'a str,
        scheduled_millis: i64,
        decide: D,
    ) -> StoreResult<Option<ClaimRow>>
    where
        D: FnOnce(Option<&ClaimRow>, i64) -> ClaimDecision + Send + 'a,
    {
        claims::claim(&self.pool, cron_workflow_uid, scheduled_millis, decide).await
    }

    async fn settle<'a, D>(
        &'a self,
        cron_workflow_uid: &'a str,
        scheduled_millis: i64,
        decide: D,
    ) -> StoreResult<ClaimRow>
    where
        D: FnOnce(Option<ClaimRow>, i64) -> SettleDecision + Send + 'a,
    {
        claims::settle(&self.pool, cron_workflow_uid, scheduled_millis, decide).await
    }

    async fn claims(&self, query: ClaimQuery) -> StoreResult<(Vec<ClaimRow>, Option<i64>)> {
        claims::page(&self.pool, query).await
    }

    async fn pending(&self) -> StoreResult<Vec<(String, i64)>> {
        read::pending(&self.pool).await
    }

    async fn head(&self) -> StoreResult<i64> {
        Ok(sqlx::query_scalar(READ_HEAD).fetch_one(&self.pool).await?)
    }
}
