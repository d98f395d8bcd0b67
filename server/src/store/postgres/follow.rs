//! Hearing the commits of other replicas: every writing transaction notifies the schema's
//! channel with its new head and the namespaces it changed (`<revision> <namespace>...`),
//! delivered at commit.

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};

use super::super::error::StoreResult;
use super::super::notify::{Changed, Notifier};
use super::channel;
use super::read::READ_HEAD;

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
    let head = sqlx::query_scalar(READ_HEAD).fetch_one(pool).await?;
    notifier.publish(head, Changed::Anywhere);
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
                publish(notification.payload(), notifier);
            }
            // The connection dropped and came back: commits in between sent nothing.
            None => catch_up(pool, notifier).await?,
        }
    }
}

/// Publishes a notification's `<revision>[ <namespace>...]`; without namespaces (a batch
/// whose list did not fit the payload) the commit may have changed any.
fn publish(payload: &str, notifier: &Notifier) {
    let mut words = payload.split(' ');
    let Some(Ok(revision)) = words.next().map(str::parse) else {
        return;
    };
    let namespaces: Vec<&str> = words.filter(|word| !word.is_empty()).collect();
    let changed = if namespaces.is_empty() {
        Changed::Anywhere
    } else {
        Changed::In(&namespaces)
    };
    notifier.publish(revision, changed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_names_its_revision_and_namespaces() {
        let notifier = Notifier::new(0);
        let mut named = notifier.subscribe(Some("b"));
        let mut other = notifier.subscribe(Some("c"));
        publish("7 a b", &notifier);
        assert_eq!(*named.borrow_and_update(), 7);
        assert!(!other.has_changed().expect("open"));
        publish("8", &notifier);
        assert_eq!(*other.borrow_and_update(), 8, "no namespaces: any");
        publish("not a revision", &notifier);
        assert_eq!(notifier.latest(), 8);
    }
}
