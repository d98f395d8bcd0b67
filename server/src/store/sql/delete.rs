//! Deletions, each leaving tombstones in the feed where it needs them: a workflow's
//! results on request, and retention's batches.
//!
//! Compiled once per database (see [`Dialect`](super::super::dialect::Dialect)).

use argo_results_rules::batch::{self, Batch, Deleted};

use super::super::columns;
use super::super::error::StoreResult;
use super::This;
use super::transaction::WriteTransaction;

/// Retention deletes at most this many rows per transaction.
const RETENTION_BATCH: i64 = 1000;

/// The last revision of the oldest batch of changes recorded before $1.
const PRUNABLE_THROUGH: &str = "SELECT MAX(revision) FROM (SELECT revision FROM changes \
     WHERE recorded_at < $1 ORDER BY revision LIMIT $2) AS oldest";
const DELETE_CHANGES: &str = "DELETE FROM changes WHERE revision <= $1";
const SET_PRUNED: &str =
    "UPDATE store_state SET pruned_revision = $1 WHERE id = 1 AND pruned_revision < $1";
const DELETE_EXPIRED: &str = "DELETE FROM results WHERE (namespace, workflow_uid, node_id) IN \
     (SELECT namespace, workflow_uid, node_id FROM results WHERE updated_at < $1 \
     ORDER BY updated_at LIMIT $2) RETURNING namespace, workflow, workflow_uid, node_id";
const DELETE_WORKFLOW: &str = "DELETE FROM results WHERE namespace = $1 AND workflow = $2 \
     AND workflow_uid = $3 RETURNING namespace, workflow, workflow_uid, node_id";
/// Claims (as `c`) that retention removes: taken before $1, and either settled with a newer
/// settled tick of the same cron workflow, or unsettled with a lease that expired before $1.
macro_rules! prunable_claim {
    ($c:literal) => {
        concat!(
            $c,
            ".claimed_at < $1 AND ((",
            $c,
            ".state = 'claimed' AND ",
            $c,
            ".lease_expires_at < $1) OR (",
            $c,
            ".state <> 'claimed' AND EXISTS \
             (SELECT 1 FROM cron_claims AS newer WHERE newer.namespace = ",
            $c,
            ".namespace AND newer.cron_workflow = ",
            $c,
            ".cron_workflow \
             AND newer.state <> 'claimed' AND newer.scheduled_time > ",
            $c,
            ".scheduled_time)))"
        )
    };
}
/// At most $2 prunable claims, oldest first. The condition is checked again on the rows
/// deleted: a claim taken over meanwhile (its row locked, then changed) is no longer old.
const DELETE_OLD_CLAIMS: &str = concat!(
    "DELETE FROM cron_claims WHERE ",
    prunable_claim!("cron_claims"),
    " AND (cron_workflow_uid, scheduled_time) IN (SELECT old.cron_workflow_uid, \
     old.scheduled_time FROM cron_claims AS old WHERE ",
    prunable_claim!("old"),
    " ORDER BY old.claimed_at LIMIT $2)"
);

impl This {
    /// Deletes every result of a workflow incarnation, leaving tombstones: how many, and
    /// the new head.
    pub(in crate::store) async fn delete_workflow(
        &self,
        namespace: &str,
        workflow: &str,
        workflow_uid: &str,
    ) -> StoreResult<Option<(u64, i64)>> {
        let mut tx = self.begin_write().await?;
        let head = tx.lock_head().await?;
        let mut deleted = sqlx::query(DELETE_WORKFLOW)
            .bind(namespace)
            .bind(workflow)
            .bind(workflow_uid)
            .try_map(|row| columns::deleted(&row))
            .fetch_all(&mut *tx.tx)
            .await?;
        deleted.sort_by(|a, b| a.node_id.cmp(&b.node_id));
        commit_tombstones(tx, head, deleted).await
    }

    /// Deletes up to [`RETENTION_BATCH`] results unchanged since `before`, leaving
    /// tombstones: how many, and the new head.
    pub(in crate::store) async fn expire_results(
        &self,
        before: i64,
    ) -> StoreResult<Option<(u64, i64)>> {
        let mut tx = self.begin_write().await?;
        let head = tx.lock_head().await?;
        let deleted = sqlx::query(DELETE_EXPIRED)
            .bind(before)
            .bind(RETENTION_BATCH)
            .try_map(|row| columns::deleted(&row))
            .fetch_all(&mut *tx.tx)
            .await?;
        commit_tombstones(tx, head, deleted).await
    }

    /// Drops up to [`RETENTION_BATCH`] changes recorded before `before`; `None` when none
    /// is that old.
    pub(in crate::store) async fn prune_changes(&self, before: i64) -> StoreResult<Option<u64>> {
        let mut tx = self.begin_write().await?;
        let through: Option<i64> = sqlx::query_scalar(PRUNABLE_THROUGH)
            .bind(before)
            .bind(RETENTION_BATCH)
            .fetch_one(&mut *tx.tx)
            .await?;
        let Some(through) = through else {
            tx.rollback().await?;
            return Ok(None);
        };
        let deleted = sqlx::query(DELETE_CHANGES)
            .bind(through)
            .execute(&mut *tx.tx)
            .await?
            .rows_affected();
        sqlx::query(SET_PRUNED)
            .bind(through)
            .execute(&mut *tx.tx)
            .await?;
        tx.commit().await?;
        Ok(Some(deleted))
    }

    /// Deletes up to [`RETENTION_BATCH`] claims that retention removes (see
    /// `prunable_claim!`).
    pub(in crate::store) async fn prune_claims(&self, before: i64) -> StoreResult<u64> {
        let mut tx = self.begin_write().await?;
        let deleted = sqlx::query(DELETE_OLD_CLAIMS)
            .bind(before)
            .bind(RETENTION_BATCH)
            .execute(&mut *tx.tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(deleted)
    }
}

/// Stores `deleted` as tombstones after `head` and commits: how many, and the new head.
async fn commit_tombstones(
    mut tx: WriteTransaction<'_>,
    head: i64,
    deleted: Vec<Deleted>,
) -> StoreResult<Option<(u64, i64)>> {
    if deleted.is_empty() {
        tx.rollback().await?;
        return Ok(None);
    }
    let changes = batch::tombstones(head, deleted)?;
    let count = changes.len() as i64;
    let tombstones = Batch {
        head: head + count,
        rows: Vec::new(),
        changes,
    };
    tx.store(&tombstones).await?;
    tx.commit().await?;
    Ok(Some((count as u64, tombstones.head)))
}
