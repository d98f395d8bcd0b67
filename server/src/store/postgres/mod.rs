//! Postgres, the production store: many replicas share one database.
//!
//! Batches travel as one array per column (`UNNEST`), so every statement's text is fixed
//! and prepared once per connection, whatever the batch size, and each value is sent as
//! itself (outputs as raw text), so the database parses nothing it stores.

#[path = "../sql/claims.rs"]
#[allow(clippy::duplicate_mod, reason = "one file, both databases")]
mod claims;
#[path = "../sql/delete.rs"]
#[allow(clippy::duplicate_mod, reason = "one file, both databases")]
mod delete;
#[path = "../sql/epoch.rs"]
#[allow(clippy::duplicate_mod, reason = "one file, both databases")]
mod epoch;
mod follow;
#[path = "../sql/read.rs"]
#[allow(clippy::duplicate_mod, reason = "one file, both databases")]
mod read;
#[path = "../sql/transaction.rs"]
#[allow(clippy::duplicate_mod, reason = "one file, both databases")]
mod transaction;
mod wait;
mod write;

use std::str::FromStr;
use std::sync::Arc;
use std::time::Instant;

use sqlx::PgPool;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use super::columns::claim_columns;
use super::dialect::{ACQUIRE_TIMEOUT, Dialect};
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

/// The shared SQL of `sql/` runs on this.
type This = Postgres;

#[derive(Debug)]
pub(super) struct Postgres {
    pool: PgPool,
    options: PgConnectOptions,
    /// The writer's connection and when it was last used (see `sql/transaction.rs`).
    kept: Option<(PoolConnection<sqlx::Postgres>, Instant)>,
}

impl Dialect for Postgres {
    type Driver = sqlx::Postgres;
    const BEGIN_WRITE: &'static str = "BEGIN";
    /// Two statements in one message: the load that follows is a statement of its own, so
    /// it reads a snapshot taken after the lock was granted (under read committed, whatever
    /// the database's default).
    const BEGIN_WRITER: &'static str = "BEGIN ISOLATION LEVEL READ COMMITTED; \
     UPDATE store_state SET revision = revision WHERE id = 1";
    /// A snapshot that writers never wait for.
    const BEGIN_READ: &'static str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";
    const NOW: &'static str = "SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT";
    /// A restore (a new timeline, or a new cluster) or a dump restored into the database
    /// (a new table) changes it.
    const IDENTITY: &'static str = "SELECT s.system_identifier::text || '/' \
     || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) || '/' \
     || 'store_state'::regclass::oid::text FROM pg_control_system() AS s";
    const SELECT_CLAIM_LOCKED: &'static str = concat!(
        "SELECT ",
        claim_columns!(),
        " FROM cron_claims WHERE cron_workflow_uid = $1 AND scheduled_time = $2 FOR UPDATE"
    );

    /// A Postgres database cannot go unseen: a dropped one refuses every connection
    /// (3D000).
    fn in_place(&self) -> StoreResult<()> {
        Ok(())
    }
}

impl Postgres {
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
        let db = Postgres {
            pool: pool(&options, max_connections).await?,
            options,
            kept: None,
        };
        // Replicas starting together serialize here: sqlx holds an advisory lock while
        // migrating.
        let mut migrator = sqlx::migrate!("../migrations/postgres");
        // Migrations only add, so an older release (a rollback) runs on a newer schema.
        migrator.set_ignore_missing(true);
        migrator.run(&db.pool).await?;
        Ok(db)
    }

    /// The same database over a pool of one connection of its own, opened where the
    /// future runs: on the runtime that will use it (the writer's).
    pub(super) fn for_writer(&self) -> impl Future<Output = StoreResult<Self>> + Send + 'static {
        let options = self.options.clone();
        async move {
            Ok(Postgres {
                pool: pool(&options, 1).await?,
                options,
                kept: None,
            })
        }
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
