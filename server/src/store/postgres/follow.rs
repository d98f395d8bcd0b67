//! Hearing the commits of other replicas: every writing transaction notifies the schema's
//! channel with its new head, delivered at commit.

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};

use super::super::error::StoreResult;
use super::super::notify::Notifier;
use super::super::statements::READ_HEAD;
use super::channel;

const CHANNEL: &str = concat!("SELECT ", channel!());
/// Pause before listening again after the connection failed.
const RELISTEN_AFTER: Duration = Duration::from_secs(1);

/// Publishes the commits of every replica to `notifier`, listening for their NOTIFY in the
/// background. Only a hint: watchers read the feed from the database, so a notification
/// lost while reconnecting delays a change but never loses it; after each (re)connection
/// the head is read once to catch up.
pub(super) async fn spawn(
    pool: PgPool,
    options: PgConnectOptions,
    notifier: Arc<Notifier>,
) -> StoreResult<()> {
    let channel: String = sqlx::query_scalar(CHANNEL).fetch_one(&pool).await?;
    tokio::spawn(async move {
        loop {
            if let Err(error) = listen(&channel, &pool, &options, &notifier).await {
                tracing::warn!(%error, "not hearing other replicas' commits; listening again");
            }
            tokio::time::sleep(RELISTEN_AFTER).await;
        }
    });
    Ok(())
}

async fn catch_up(pool: &PgPool, notifier: &Notifier) -> Result<(), sqlx::Error> {
    notifier.publish(sqlx::query_scalar(READ_HEAD).fetch_one(pool).await?);
    Ok(())
}

async fn listen(
    channel: &str,
    pool: &PgPool,
    options: &PgConnectOptions,
    notifier: &Notifier,
) -> Result<(), sqlx::Error> {
    // A connection of its own, never taken from the pool that requests use.
    let own = PgPoolOptions::new()
        .max_connections(1)
        .connect_with(options.clone())
        .await?;
    let mut listener = PgListener::connect_with(&own).await?;
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
