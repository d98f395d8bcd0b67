//! The writing transactions on SQLite: a batch of the writer, and the recording of
//! changes (the batch's, and deletions' tombstones).

use sqlx::{Connection as _, Sqlite, SqliteConnection, Transaction};

use argo_results_rules::Row;
use argo_results_rules::batch::{Batch, Change, RowKey};
use argo_results_rules::clock::now_millis;

use super::super::columns::{self, result_columns};
use super::super::error::StoreResult;
use super::super::statements::{LOCK_HEAD, SELECT_BY_KEY, upsert_set};
use super::BEGIN_WRITE;

const UPSERT: &str = concat!(
    "INSERT INTO results (",
    result_columns!(),
    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, \
     $18, $19)",
    upsert_set!()
);
const RECORD: &str =
    "INSERT INTO changes (revision, namespace, item, recorded_at) VALUES ($1, $2, $3, $4)";
const SET_HEAD: &str = "UPDATE store_state SET revision = $1 WHERE id = 1";

/// Runs one batch of the writer (see `Backend::write_batch`).
pub(super) async fn batch<P>(
    connection: &mut SqliteConnection,
    keys: &[RowKey<'_>],
    plan: P,
) -> StoreResult<Option<i64>>
where
    P: FnOnce(i64, Vec<Row>) -> StoreResult<Option<Batch>>,
{
    let mut tx = connection.begin_with(BEGIN_WRITE).await?;
    let head: i64 = sqlx::query_scalar(LOCK_HEAD).fetch_one(&mut *tx).await?;
    let mut stored = Vec::with_capacity(keys.len());
    for key in keys {
        let row = sqlx::query(SELECT_BY_KEY)
            .bind(key.namespace)
            .bind(key.workflow_uid)
            .bind(key.node_id)
            .try_map(|row| columns::result(&row))
            .fetch_optional(&mut *tx)
            .await?;
        stored.extend(row);
    }
    let Some(batch) = plan(head, stored)? else {
        tx.rollback().await?;
        return Ok(None);
    };
    for row in &batch.rows {
        sqlx::query(UPSERT)
            .bind(&row.namespace)
            .bind(&row.workflow_uid)
            .bind(&row.node_id)
            .bind(&row.workflow)
            .bind(&row.pod_name)
            .bind(&row.pod_uid)
            .bind(&row.instance_id)
            .bind(row.state.as_str())
            .bind(&row.phase)
            .bind(&row.message)
            .bind(&row.progress)
            .bind(&row.outputs)
            .bind(row.sequence)
            .bind(row.revision)
            .bind(row.created_revision)
            .bind(row.created_at)
            .bind(row.updated_at)
            .bind(row.completed_at)
            .bind(&row.abandon_reason)
            .execute(&mut *tx)
            .await?;
    }
    record_and_commit(tx, batch.head, &batch.changes).await?;
    Ok(Some(batch.head))
}

/// Records `changes`, sets the head to `head` and commits.
pub(super) async fn record_and_commit(
    mut tx: Transaction<'_, Sqlite>,
    head: i64,
    changes: &[Change],
) -> StoreResult<()> {
    let now = now_millis();
    for change in changes {
        sqlx::query(RECORD)
            .bind(change.revision)
            .bind(&change.namespace)
            .bind(&change.item)
            .bind(now)
            .execute(&mut *tx)
            .await?;
    }
    sqlx::query(SET_HEAD).bind(head).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(())
}
