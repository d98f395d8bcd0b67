//! Connecting to Postgres, the production store, and hearing the commits of other replicas.

use std::sync::Arc;
use std::time::Duration;

use sqlx::AnyPool;
use sqlx::any::AnyPoolOptions;
use sqlx::postgres::PgListener;

use super::{ACQUIRE_TIMEOUT, StoreResult};
use crate::feed::Notifier;

/// The channel every writing transaction notifies, named after the schema, so that stores
/// sharing a database do not wake each other.
macro_rules! channel {
    () => {
        "'argo_results.' || current_schema()"
    };
}
pub(super) use channel;

pub(super) const NOTIFY: &str = concat!("SELECT pg_notify(", channel!(), ", $1)");
const CHANNEL: &str = concat!("SELECT ", channel!());
const READ_HEAD: &str = "SELECT revision FROM store_state WHERE id = 1";
/// Pause before listening again after the connection failed.
const RELISTEN_AFTER: Duration = Duration::from_secs(1);

pub(super) async fn connect(url: &str, max_connections: u32) -> StoreResult<AnyPool> {
    Ok(AnyPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .connect(url)
        .await?)
}

pub(super) async fn migrate(pool: &AnyPool) -> StoreResult<()> {
    // Replicas starting together serialize here: sqlx holds an advisory lock while migrating.
    let mut migrator = sqlx::migrate!("../migrations/postgres");
    // Migrations only add, so an older release (a rollback) runs on a newer schema.
    migrator.set_ignore_missing(true);
    migrator.run(pool).await?;
    Ok(())
}

/// Publishes the commits of every replica to `notifier`, listening for their NOTIFY in the
/// background. Only a hint: watchers read the feed from the database, so a notification
/// lost while reconnecting delays a change but never loses it; after each (re)connection
/// the head is read once to catch up.
pub(super) async fn follow_commits(
    url: String,
    pool: AnyPool,
    notifier: Arc<Notifier>,
) -> StoreResult<()> {
    let channel: String = sqlx::query_scalar(CHANNEL).fetch_one(&pool).await?;
    tokio::spawn(async move {
        loop {
            if let Err(error) = listen(&url, &channel, &pool, &notifier).await {
                tracing::warn!(%error, "not hearing other replicas' commits; listening again");
            }
            tokio::time::sleep(RELISTEN_AFTER).await;
        }
    });
    Ok(())
}

async fn catch_up(pool: &AnyPool, notifier: &Notifier) -> Result<(), sqlx::Error> {
    notifier.publish(sqlx::query_scalar(READ_HEAD).fetch_one(pool).await?);
    Ok(())
}

async fn listen(
    url: &str,
    channel: &str,
    pool: &AnyPool,
    notifier: &Notifier,
) -> Result<(), sqlx::Error> {
    let mut listener = PgListener::connect(url).await?;
    listener.listen(channel).await?;
    catch_up(pool, notifier).await?;
    loop {
        match listener.try_recv().await? {
            Some(notification) => {
                if let Ok(revision) = notification.payload().parse() {
                    notifier.publish(revision);
                }
            }
            // The connection dropped and came back: commits in between sent nothing.
            None => catch_up(pool, notifier).await?,
        }
    }
}
