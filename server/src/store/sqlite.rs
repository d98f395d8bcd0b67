//! Opening the SQLite file of the embedded default (one replica only).

use std::os::unix::fs::OpenOptionsExt;

use sqlx::AnyPool;
use sqlx::Executor;
use sqlx::any::AnyPoolOptions;

use super::{ACQUIRE_TIMEOUT, StoreError, StoreResult};

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

pub(super) async fn connect(path: &str, max_connections: u32) -> StoreResult<AnyPool> {
    create_private(path)?;
    let pool = AnyPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .after_connect(|conn, _| {
            Box::pin(async move {
                // WAL lets readers go on beside the one writer; FULL makes every commit
                // durable before the client hears of it; writers queue for up to 10 s.
                conn.execute("PRAGMA journal_mode = WAL").await?;
                conn.execute("PRAGMA synchronous = FULL").await?;
                conn.execute("PRAGMA busy_timeout = 10000").await?;
                Ok(())
            })
        })
        .connect(&format!("sqlite://{path}?mode=rwc"))
        .await?;
    Ok(pool)
}

pub(super) async fn migrate(pool: &AnyPool) -> StoreResult<()> {
    let mut migrator = sqlx::migrate!("../migrations/sqlite");
    // Migrations only add, so an older release (a rollback) runs on a newer schema.
    migrator.set_ignore_missing(true);
    migrator.run(pool).await?;
    Ok(())
}
