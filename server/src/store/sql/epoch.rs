//! The store's epoch (`migrations/*/0004_epoch.sql`): set at the first start, and new when
//! the database was restored or replaced, so that no feed reader reads on across it.
//!
//! Compiled once per database (see [`Dialect`]), whose `IDENTITY` names the database as it
//! is now.

use super::super::dialect::Dialect;
use super::super::error::StoreResult;
use super::super::random::uuid;
use super::This;

/// The epoch and the database identity it was recorded in, locked until the transaction
/// ends: replicas starting together agree on one new epoch.
const READ_EPOCH: &str =
    "UPDATE store_state SET epoch = epoch WHERE id = 1 RETURNING epoch, identity";
const SET_EPOCH: &str = "UPDATE store_state SET epoch = $1, identity = $2 WHERE id = 1";

impl This {
    /// The store's epoch from now on: a new one on the first start, when `renew` gives a
    /// reason (`--new-epoch`, or a head found behind a commit), or when the database's
    /// identity is not the one recorded with the epoch.
    pub(in crate::store) async fn settle_epoch(&self, renew: Option<&str>) -> StoreResult<String> {
        let mut tx = self.begin_write().await?.tx;
        let (epoch, recorded): (String, String) =
            sqlx::query_as(READ_EPOCH).fetch_one(&mut *tx).await?;
        let identity: String = sqlx::query_scalar(This::IDENTITY)
            .fetch_one(&mut *tx)
            .await?;
        let reason = if epoch.is_empty() {
            Some("the store's first start")
        } else if renew.is_some() {
            renew
        } else if recorded != identity {
            Some("the database is not the one the epoch was recorded in: restored or replaced")
        } else {
            None
        };
        let Some(reason) = reason else {
            tx.rollback().await?;
            return Ok(epoch);
        };
        let next = uuid()?;
        sqlx::query(SET_EPOCH)
            .bind(&next)
            .bind(&identity)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        if epoch.is_empty() {
            tracing::info!(epoch = %next, reason, "the store begins its first epoch");
        } else {
            // Every feed reader lists again: worth an operator's notice.
            tracing::warn!(epoch = %next, previous = %epoch, reason, "the store begins a new epoch");
        }
        Ok(next)
    }
}
