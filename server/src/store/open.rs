//! Opening the store a database URL names: its backend, its migrations, its writer and,
//! on Postgres, the follower of other replicas' commits.

use std::sync::Arc;
use std::time::Duration;

use argo_results_proto::redacted;
use argo_results_rules::ReportPolicy;

use super::api::Store;
use super::backend::Backend;
use super::error::{StoreError, StoreResult};
use super::native::NativeStore;
use super::notify::Notifier;
use super::postgres::PgBackend;
use super::sqlite::SqliteBackend;
use super::writer::Batching;
use crate::metrics::Metrics;

/// Why the epoch is renewed at start, if it is.
fn renewal(new_epoch: bool) -> Option<&'static str> {
    new_epoch.then_some("--new-epoch")
}

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
pub async fn open(
    url: &str,
    opening: Opening,
    metrics: Arc<Metrics>,
) -> StoreResult<Arc<dyn Store>> {
    let Opening {
        max_connections,
        wait,
        batching,
        policy,
        new_epoch,
    } = opening;
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let backend = PgBackend::connect(url, max_connections, wait).await?;
        backend.settle_epoch(renewal(new_epoch)).await?;
        let notifier = Arc::new(Notifier::new(backend.head().await?));
        backend.follow_commits(Arc::clone(&notifier)).await?;
        let store = NativeStore::start(backend, batching, policy, notifier, metrics).await?;
        Ok(Arc::new(store))
    } else if let Some(path) = url.strip_prefix("sqlite://") {
        let backend = SqliteBackend::connect(path, max_connections).await?;
        backend.settle_epoch(renewal(new_epoch)).await?;
        let notifier = Arc::new(Notifier::new(backend.head().await?));
        let store = NativeStore::start(backend, batching, policy, notifier, metrics).await?;
        Ok(Arc::new(store))
    } else {
        Err(StoreError::UnsupportedUrl(redacted(url)))
    }
}
