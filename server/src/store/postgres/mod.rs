//! Postgres, the production store: many replicas share one database.
//!
//! Batches travel as one array per column (`UNNEST`), so every statement's text is fixed
//! and prepared once per connection, whatever the batch size, and each value is sent as
//! itself (outputs as raw text), so the database parses nothing it stores.

#[path = "../sql/backend_impl.rs"]
#[allow(clippy::duplicate_mod, reason = "one file, both backends")]
mod backend_impl;
#[path = "../sql/claims.rs"]
#[allow(clippy::duplicate_mod, reason = "one file, both backends")]
mod claims;
#[path = "../sql/delete.rs"]
#[allow(clippy::duplicate_mod, reason = "one file, both backends")]
mod delete;
#[path = "../sql/epoch.rs"]
#[allow(clippy::duplicate_mod, reason = "one file, both backends")]
mod epoch;
mod follow;
#[path = "../sql/read.rs"]
#[allow(clippy::duplicate_mod, reason = "one file, both backends")]
mod read;
mod wait;
mod write;

use std::str::FromStr;
use std::sync::Arc;

use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use super::backend::ACQUIRE_TIMEOUT;
use super::columns::claim_columns;
use super::error::StoreResult;
use super::notify::Notifier;

/// The channel every writing transaction notifies, named after the schema, so that stores
/// sharing a database do not wake each other.
macro_rules! channel {
    () => {
        "'argo_results.' || current_schema()"
    };
}
use channel;

// What the transactions of `sql/` run on here.
type ThisBackend = PgBackend;
type Db = sqlx::Postgres;
type Pool = PgPool;
type Connection = sqlx::PgConnection;
const BEGIN_WRITE: &str = "BEGIN";
/// A snapshot that writers never wait for.
const BEGIN_READ: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";
/// The database's clock in Unix milliseconds.
const NOW: &str = "SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT";
/// The database as it is now: a restore (a new timeline, or a new cluster) or a dump
/// restored into it (a new table) changes it.
const IDENTITY: &str = "SELECT s.system_identifier::text || '/' \
     || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) || '/' \
     || 'store_state'::regclass::oid::text FROM pg_control_system() AS s";
/// Whether the database is still the one the server opened: a Postgres database cannot go
/// unseen, since a dropped one refuses every connection (3D000).
fn in_place(_: &PgBackend) -> StoreResult<()> {
    Ok(())
}

/// A tick's claim, its row locked until the transaction ends.
const SELECT_CLAIM_LOCKED: &str = concat!(
    "SELECT ",
    claim_columns!(),
    " FROM cron_claims WHERE cron_workflow_uid = $1 AND scheduled_time = $2 FOR UPDATE"
);

#[derive(Debug, Clone)]
pub(super) struct PgBackend {
    pool: PgPool,
    options: PgConnectOptions,
}

impl PgBackend {
    /// Connects to `url`, waiting up to `wait` for it to come up, and applies the
    /// migrations.
    pub(super) async fn connect(
        url: &str,
        max_connections: u32,
        wait: std::time::Duration,
    ) -> StoreResult<Self> {
        let options = PgConnectOptions::from_str(url)?;
        wait::until_reachable(&options, wait).await?;
        tracing::info!(database = %wait::target(&options), "applying migrations");
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
