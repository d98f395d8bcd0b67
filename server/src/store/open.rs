//! Opening the store a database URL names: its database, its migrations, its epoch, its
//! writer and, on Postgres, the follower of other replicas' commits.

use std::sync::Arc;
use std::time::Duration;

use argo_results_proto::redacted;
use argo_results_rules::ReportPolicy;

use super::Store;
use super::db::{Db, on_db};
use super::error::{FailureKind, StoreError, StoreResult};
use super::notify::Notifier;
use super::postgres::Postgres;
use super::sqlite::Sqlite;
use super::writer::{Batching, Queue};
use crate::metrics::Metrics;

/// How the store is opened.
#[derive(Debug, Clone, Copy)]
pub struct Opening {
    pub max_connections: u32,
    /// How long to wait for a Postgres database to take a connection.
    pub wait: Duration,
    pub batching: Batching,
    pub policy: ReportPolicy,
    /// Start a new epoch (`--new-epoch`).
    pub new_epoch: bool,
}

/// Connects to `postgres://...` (waiting for it, see [`Opening::wait`]) or
/// `sqlite://PATH`, applies the migrations, settles the store's epoch and starts the
/// writer, which judges reports by the policy.
pub async fn open(url: &str, opening: Opening, metrics: Arc<Metrics>) -> StoreResult<Arc<Store>> {
    let Opening {
        max_connections,
        wait,
        batching,
        policy,
        new_epoch,
    } = opening;
    // Every failure the store can count is exported at zero before it can happen.
    metrics.seed_store_failures(FailureKind::ALL.map(FailureKind::as_str));
    let db = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Db::from(Postgres::connect(url, max_connections, wait).await?)
    } else if let Some(path) = url.strip_prefix("sqlite://") {
        Db::from(Sqlite::connect(path, max_connections).await?)
    } else {
        return Err(StoreError::UnsupportedUrl(redacted(url)));
    };
    let renewal = new_epoch.then_some("--new-epoch");
    on_db!(&db, |db| db.settle_epoch(renewal).await)?;
    let notifier = Arc::new(Notifier::new(on_db!(&db, |db| db.head().await)?));
    if let Db::Postgres(db) = &db {
        db.follow_commits(Arc::clone(&notifier)).await?;
    }
    let writes = on_db!(&db, |db| Queue::start(
        db.for_writer(),
        batching,
        policy,
        Arc::clone(&notifier),
        Arc::clone(&metrics),
    )
    .await)?;
    Ok(Arc::new(Store {
        db,
        writes,
        notifier,
        metrics,
    }))
}
