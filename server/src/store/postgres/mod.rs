//! Postgres, the production store: many replicas share one database.
//!
//! Batches travel as one array per column (`UNNEST`), so every statement's text is fixed
//! and prepared once per connection, whatever the batch size, and each value is sent as
//! itself (outputs as raw text), so the database parses nothing it stores.

mod claims;
mod follow;
mod read;
mod retention;
mod write;

use std::str::FromStr;
use std::sync::Arc;

use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use super::backend::ACQUIRE_TIMEOUT;
use super::backend::{Backend, Batch, FeedRead, Identity};
use super::claim::{ClaimDecision, ClaimRow, SettleDecision};
use super::error::StoreResult;
use super::model::{ClaimQuery, ListQuery, ResultPage};
use super::notify::Notifier;
use super::row::Row;
use super::statements::READ_HEAD;

/// The channel every writing transaction notifies, named after the schema, so that stores
/// sharing a database do not wake each other.
macro_rules! channel {
    () => {
        "'argo_results.' || current_schema()"
    };
}
use channel;

#[derive(Debug, Clone)]
pub(super) struct PgBackend {
    pool: PgPool,
    options: PgConnectOptions,
}

impl PgBackend {
    /// Connects to `url` and applies the migrations.
    pub(super) async fn connect(url: &str, max_connections: u32) -> StoreResult<Self> {
        let options = PgConnectOptions::from_str(url)?;
        let backend = PgBackend {
            pool: pool(&options, max_connections).await?,
            options,
        };
        // Replicas starting together serialize here: sqlx holds an advisory lock while
        // migrating.
        let mut migrator = sqlx::migrate!("../migrations/postgres");
        // Migrations only add, so an older release (a rollback) runs on a newer schema.
        migrator.set_ignore_missing(true);
        migrator.run(&backend.pool).await?;
        Ok(backend)
    }

    /// Publishes the commits of every replica to `notifier` (see [`follow`]).
    pub(super) async fn follow_commits(&self, notifier: Arc<Notifier>) -> StoreResult<()> {
        follow::spawn(self.pool.clone(), self.options.clone(), notifier).await
    }
}

async fn pool(options: &PgConnectOptions, max_connections: u32) -> StoreResult<PgPool> {
    Ok(PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .connect_with(options.clone())
        .await?)
}

impl Backend for PgBackend {
    type Db = sqlx::Postgres;

    fn pool(&self) -> &PgPool {
        &self.pool
    }

    async fn own_connection(&self) -> StoreResult<Self> {
        Ok(PgBackend {
            pool: pool(&self.options, 1).await?,
            options: self.options.clone(),
        })
    }

    async fn write_batch<'a, P>(
        &'a self,
        connection: &'a mut sqlx::PgConnection,
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
