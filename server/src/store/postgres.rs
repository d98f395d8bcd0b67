//! Connecting to Postgres, the production store.

use std::time::Duration;

use sqlx::AnyPool;
use sqlx::any::AnyPoolOptions;

use super::StoreResult;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/postgres");

pub(super) async fn connect(url: &str, max_connections: u32) -> StoreResult<AnyPool> {
    let pool = AnyPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(5))
        .connect(url)
        .await?;
    // Replicas starting together serialize here: sqlx holds an advisory lock while migrating.
    MIGRATOR.run(&pool).await?;
    Ok(pool)
}
