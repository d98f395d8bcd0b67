//! Deletions, each leaving tombstones in the feed where it needs them: a workflow's
//! results on request, and retention's batches.
//!
//! Compiled once per backend (see `sql/` in the store's module doc): `super` is
//! `postgres` or `sqlite`, which name the pool and statements used here.

use sqlx::Transaction;

use argo_results_rules::batch::{self, Deleted};

use super::super::backend::RETENTION_BATCH;
use super::super::columns;
use super::super::error::StoreResult;
use super::super::statements::{
    DELETE_CHANGES, DELETE_EXPIRED, DELETE_OLD_CLAIMS, DELETE_WORKFLOW, LOCK_HEAD,
    PRUNABLE_THROUGH, SET_PRUNED,
};
use super::write::record_and_commit;
use super::{BEGIN_WRITE, Db, Pool};

pub(super) async fn expire_results(pool: &Pool, before: i64) -> StoreResult<Option<(u64, i64)>> {
    let mut tx = pool.begin_with(BEGIN_WRITE).await?;
    let head: i64 = sqlx::query_scalar(LOCK_HEAD).fetch_one(&mut *tx).await?;
    let deleted = sqlx::query(DELETE_EXPIRED)
        .bind(before)
        .bind(RETENTION_BATCH)
        .try_map(|row| columns::deleted(&row))
        .fetch_all(&mut *tx)
        .await?;
    commit_tombstones(tx, head, deleted).await
}

pub(super) async fn prune_changes(pool: &Pool, before: i64) -> StoreResult<Option<u64>> {
    let mut tx = pool.begin_with(BEGIN_WRITE).await?;
    let through: Option<i64> = sqlx::query_scalar(PRUNABLE_THROUGH)
        .bind(before)
        .bind(RETENTION_BATCH)
        .fetch_one(&mut *tx)
        .await?;
    let Some(through) = through else {
        tx.rollback().await?;
        return Ok(None);
    };
    let deleted = sqlx::query(DELETE_CHANGES)
        .bind(through)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    sqlx::query(SET_PRUNED)
        .bind(through)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(Some(deleted))
}

pub(super) async fn prune_claims(pool: &Pool, before: i64) -> StoreResult<u64> {
    Ok(sqlx::query(DELETE_OLD_CLAIMS)
        .bind(before)
        .bind(RETENTION_BATCH)
        .execute(pool)
        .await?
        .rows_affected())
}

pub(super) async fn delete_workflow(
    pool: &Pool,
    namespace: &str,
    workflow: &str,
    workflow_uid: &str,
) -> StoreResult<Option<(u64, i64)>> {
    let mut tx = pool.begin_with(BEGIN_WRITE).await?;
    let head: i64 = sqlx::query_scalar(LOCK_HEAD).fetch_one(&mut *tx).await?;
    let mut deleted = sqlx::query(DELETE_WORKFLOW)
        .bind(namespace)
        .bind(workflow)
        .bind(workflow_uid)
        .try_map(|row| columns::deleted(&row))
        .fetch_all(&mut *tx)
        .await?;
    deleted.sort_by(|a, b| a.node_id.cmp(&b.node_id));
    commit_tombstones(tx, head, deleted).await
}

/// Records `deleted` as tombstones after `head` and commits: how many, and the new head.
async fn commit_tombstones(
    tx: Transaction<'_, Db>,
    head: i64,
    deleted: Vec<Deleted>,
) -> StoreResult<Option<(u64, i64)>> {
    if deleted.is_empty() {
        tx.rollback().await?;
        return Ok(None);
    }
    let tombstones = batch::tombstones(head, deleted)?;
    let count = tombstones.len() as i64;
    record_and_commit(tx, head + count, &tombstones).await?;
    Ok(Some((count as u64, head + count)))
}
