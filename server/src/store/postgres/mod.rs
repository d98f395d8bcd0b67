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
    // `json`, not `jsonb`: outputs may hold `\u0000`, which only `jsonb` refuses.
    const EXIT_CODE: &'static str = "(outputs::json ->> 'exitCode')";

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
        let pod = std::env::var("HOSTNAME").ok();
        let options = named(PgConnectOptions::from_str(url)?, pod.as_deref());
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
        // Migrations keep what an older release reads (docs/operations.md, "Rules for a new
        // migration"), so an older release (a rollback) runs on a newer schema.
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

/// What `pg_stat_activity` calls every connection of this replica, unless the URL names it
/// (`application_name=`): the server and its `pod` (`HOSTNAME`, which Kubernetes sets to
/// the pod's name), so that a DBA tells the replicas' sessions from others and from each
/// other.
fn named(options: PgConnectOptions, pod: Option<&str>) -> PgConnectOptions {
    if options.get_application_name().is_some() {
        return options;
    }
    let mut name = match pod {
        Some(pod) if !pod.is_empty() => format!("argo-results-server/{pod}"),
        _ => "argo-results-server".to_owned(),
    };
    // Postgres keeps 63 bytes of it (NAMEDATALEN - 1).
    while name.len() > 63 {
        name.pop();
    }
    options.application_name(&name)
}

async fn pool(options: &PgConnectOptions, max_connections: u32) -> StoreResult<PgPool> {
    Ok(PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .connect_with(options.clone())
        .await?)
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use sqlx::postgres::PgConnectOptions;

    use super::named;

    fn name(url: &str, pod: Option<&str>) -> Option<String> {
        let options = PgConnectOptions::from_str(url).expect("URL");
        named(options, pod)
            .get_application_name()
            .map(str::to_owned)
    }

    #[test]
    fn sessions_are_named_for_the_server_and_its_pod_unless_the_url_names_them() {
        let url = "postgres://argo@db/argo";
        assert_eq!(
            name(url, Some("argo-results-5d9f7-x2k4q")).as_deref(),
            Some("argo-results-server/argo-results-5d9f7-x2k4q")
        );
        assert_eq!(name(url, None).as_deref(), Some("argo-results-server"));
        let given = "postgres://argo@db/argo?application_name=mine";
        assert_eq!(name(given, Some("pod")).as_deref(), Some("mine"));
        // Postgres keeps 63 bytes: what it would cut is cut here, where it shows.
        let long = name(url, Some(&"p".repeat(80))).expect("named");
        assert_eq!(long.len(), 63);
    }
}
