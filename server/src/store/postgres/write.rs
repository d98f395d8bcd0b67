//! How a writing transaction loads and stores a batch on Postgres: one round trip each
//! (the head and the rows of every key at once, then every row, change and the head in one
//! statement that also notifies the other replicas).

use sqlx::{Postgres, Row as _};

use argo_results_rules::Row;
use argo_results_rules::batch::{Batch, RowKey};
use argo_results_rules::clock::now_millis;

use super::super::columns::{self, result_columns, upsert_set};
use super::super::error::{StoreError, StoreResult};
use super::channel;
use super::transaction::WriteTransaction;

/// The stored rows of the keys `$1`, `$2`, `$3` (namespaces, workflow UIDs, node IDs),
/// each followed by the head (column `HEAD`); one row of nulls and the head when none is
/// stored.
const LOAD: &str = concat!(
    "SELECT r.*, h.revision FROM store_state AS h LEFT JOIN (SELECT ",
    result_columns!(),
    " FROM results WHERE (namespace, workflow_uid, node_id) IN \
     (SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[]))) AS r ON TRUE WHERE h.id = 1"
);
/// The head's column in `LOAD`, after the result's.
const HEAD: usize = 19;

/// A whole batch in one statement: upserts the rows `$6`-`$24` (one array per column of
/// `result_columns!`), records changes `$2`-`$4` (revisions, namespaces, items) at `$5`,
/// sets the head to `$1` and notifies the other replicas (delivered at commit) with
/// `<head> <namespace>...`, or the head alone when the namespaces would not fit a
/// notification (8,000 bytes).
const STORE: &str = concat!(
    "WITH upserted AS (INSERT INTO results (",
    result_columns!(),
    ") SELECT * FROM UNNEST($6::text[], $7::text[], $8::text[], $9::text[], $10::text[], \
     $11::text[], $12::text[], $13::text[], $14::text[], $15::text[], $16::text[], \
     $17::text[], $18::int8[], $19::int8[], $20::int8[], $21::int8[], $22::int8[], \
     $23::int8[], $24::text[])",
    upsert_set!(),
    "), recorded AS (INSERT INTO changes (revision, namespace, item, recorded_at) \
     SELECT revision, namespace, item, $5::int8 \
     FROM UNNEST($2::int8[], $3::text[], $4::text[]) AS c(revision, namespace, item)), \
     head AS (UPDATE store_state SET revision = $1 WHERE id = 1) \
     SELECT pg_notify(",
    channel!(),
    ", $1::text || COALESCE((SELECT ' ' || string_agg(n, ' ') \
     FROM (SELECT DISTINCT n FROM UNNEST($3::text[]) AS n) AS d \
     HAVING sum(length(n) + 1) < 7900), ''))"
);

impl WriteTransaction<'_> {
    /// The head and the stored rows of `keys`.
    pub(in crate::store) async fn load(
        &mut self,
        keys: &[RowKey<'_>],
    ) -> StoreResult<(i64, Vec<Row>)> {
        let namespaces: Vec<&str> = keys.iter().map(|key| key.namespace).collect();
        let uids: Vec<&str> = keys.iter().map(|key| key.workflow_uid).collect();
        let nodes: Vec<&str> = keys.iter().map(|key| key.node_id).collect();
        // Planned afresh for every batch: a generic plan cached while `results` was small
        // would scan it whole for every batch until autovacuum analyzes it (and the
        // writer's long-lived connection would keep that plan).
        let loaded = sqlx::query(LOAD)
            .persistent(false)
            .bind(namespaces)
            .bind(uids)
            .bind(nodes)
            .fetch_all(&mut *self.tx)
            .await?;
        let head = match loaded.first() {
            Some(row) => row.try_get(HEAD)?,
            None => return Err(StoreError::Corrupt("the store has no head".into())),
        };
        let mut stored = Vec::with_capacity(loaded.len());
        for row in &loaded {
            if row.try_get::<Option<&str>, _>(0)?.is_some() {
                stored.push(columns::result(row)?);
            }
        }
        Ok((head, stored))
    }

    /// Stores `batch`: its rows, its changes and its head.
    pub(in crate::store) async fn store(&mut self, batch: &Batch) -> StoreResult<()> {
        let rows = &batch.rows;
        let text = |column: fn(&Row) -> &str| rows.iter().map(column).collect::<Vec<_>>();
        let optional =
            |column: fn(&Row) -> Option<&str>| rows.iter().map(column).collect::<Vec<_>>();
        let number = |column: fn(&Row) -> i64| rows.iter().map(column).collect::<Vec<_>>();
        let changes = &batch.changes;
        sqlx::query::<Postgres>(STORE)
            .bind(batch.head)
            .bind(changes.iter().map(|c| c.revision).collect::<Vec<_>>())
            .bind(
                changes
                    .iter()
                    .map(|c| c.namespace.as_str())
                    .collect::<Vec<_>>(),
            )
            .bind(changes.iter().map(|c| c.item.as_str()).collect::<Vec<_>>())
            .bind(now_millis())
            .bind(text(|row| row.namespace.as_str()))
            .bind(text(|row| row.workflow_uid.as_str()))
            .bind(text(|row| row.node_id.as_str()))
            .bind(text(|row| row.workflow.as_str()))
            .bind(optional(|row| row.pod_name.as_deref()))
            .bind(optional(|row| row.pod_uid.as_deref()))
            .bind(optional(|row| row.instance_id.as_deref()))
            .bind(text(|row| row.state.as_str()))
            .bind(optional(|row| row.phase.as_deref()))
            .bind(optional(|row| row.message.as_deref()))
            .bind(optional(|row| row.progress.as_deref()))
            .bind(optional(|row| row.outputs.as_deref()))
            .bind(rows.iter().map(|row| row.sequence).collect::<Vec<_>>())
            .bind(number(|row| row.revision))
            .bind(number(|row| row.created_revision))
            .bind(number(|row| row.created_at))
            .bind(number(|row| row.updated_at))
            .bind(rows.iter().map(|row| row.completed_at).collect::<Vec<_>>())
            .bind(optional(|row| row.abandon_reason.as_deref()))
            .execute(&mut *self.tx)
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{HEAD, STORE, result_columns};

    /// `LOAD`'s head follows the result's columns, and `STORE` upserts one array per
    /// column, from `$6` on: both positional, tied here to `result_columns!`.
    #[test]
    fn the_statements_take_one_place_per_result_column() {
        let columns = result_columns!().split(',').count();
        assert_eq!(HEAD, columns);
        let arrays = STORE
            .split_once("SELECT * FROM UNNEST(")
            .expect("the upserted rows")
            .1
            .split_once(')')
            .expect("their arrays")
            .0;
        let places: Vec<String> = arrays
            .split(',')
            .map(|array| array.trim().split("::").next().expect("a place").to_owned())
            .collect();
        let expected: Vec<String> = (6..6 + columns).map(|n| format!("${n}")).collect();
        assert_eq!(places, expected);
    }
}
