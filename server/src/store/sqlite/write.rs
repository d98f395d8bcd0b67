//! How a writing transaction loads and stores a batch on SQLite: a statement per row,
//! each prepared once per connection (in-process, there is no round trip to save).

use argo_results_rules::Row;
use argo_results_rules::batch::{Batch, RowKey};
use argo_results_rules::clock::now_millis;

use super::super::columns::{self, result_columns, upsert_set};
use super::super::error::StoreResult;
use super::read::{READ_HEAD, SELECT_BY_KEY};
use super::transaction::WriteTransaction;

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

impl WriteTransaction<'_> {
    /// The head and the stored rows of `keys`.
    pub(in crate::store) async fn load(
        &mut self,
        keys: &[RowKey<'_>],
    ) -> StoreResult<(i64, Vec<Row>)> {
        let head = sqlx::query_scalar(READ_HEAD)
            .fetch_one(&mut *self.tx)
            .await?;
        let mut stored = Vec::with_capacity(keys.len());
        for key in keys {
            let row = sqlx::query(SELECT_BY_KEY)
                .bind(key.namespace)
                .bind(key.workflow_uid)
                .bind(key.node_id)
                .try_map(|row| columns::result(&row))
                .fetch_optional(&mut *self.tx)
                .await?;
            stored.extend(row);
        }
        Ok((head, stored))
    }

    /// Stores `batch`: its rows, its changes and its head.
    pub(in crate::store) async fn store(&mut self, batch: &Batch) -> StoreResult<()> {
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
                .execute(&mut *self.tx)
                .await?;
        }
        let now = now_millis();
        for change in &batch.changes {
            sqlx::query(RECORD)
                .bind(change.revision)
                .bind(&change.namespace)
                .bind(&change.item)
                .bind(now)
                .execute(&mut *self.tx)
                .await?;
        }
        sqlx::query(SET_HEAD)
            .bind(batch.head)
            .execute(&mut *self.tx)
            .await?;
        Ok(())
    }
}
