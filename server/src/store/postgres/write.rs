//! The writing transactions on Postgres: a batch of the writer in three round trips
//! (lock the head, load the rows, store everything and notify), and the recording of
//! deletions' tombstones.

use sqlx::{Connection as _, PgConnection, Postgres, Transaction};

use argo_results_rules::Row;
use argo_results_rules::batch::{Batch, Change, RowKey};
use argo_results_rules::clock::now_millis;

use super::super::columns::{self, result_columns};
use super::super::error::StoreResult;
use super::super::statements::{LOCK_HEAD, upsert_set};
use super::channel;

/// The stored rows of the keys `$1`, `$2`, `$3` (namespaces, workflow UIDs, node IDs).
const LOAD: &str = concat!(
    "SELECT ",
    result_columns!(),
    " FROM results WHERE (namespace, workflow_uid, node_id) IN \
     (SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[]))"
);

/// Records changes `$2`-`$4` (revisions, namespaces, items) at `$5`, sets the head to
/// `$1` and notifies the other replicas (delivered at commit) with `<head> <namespace>...`,
/// or the head alone when the namespaces would not fit a notification (8,000 bytes).
macro_rules! record_and_notify {
    () => {
        concat!(
            "recorded AS (INSERT INTO changes (revision, namespace, item, recorded_at) \
             SELECT revision, namespace, item, $5::int8 \
             FROM UNNEST($2::int8[], $3::text[], $4::text[]) AS c(revision, namespace, item)), \
             head AS (UPDATE store_state SET revision = $1 WHERE id = 1) \
             SELECT pg_notify(",
            channel!(),
            ", $1::text || COALESCE((SELECT ' ' || string_agg(n, ' ') \
             FROM (SELECT DISTINCT n FROM UNNEST($3::text[]) AS n) AS d \
             HAVING sum(length(n) + 1) < 7900), ''))"
        )
    };
}

/// A whole batch in one statement: upserts the rows `$6`-`$24` (one array per column of
/// `result_columns!`) and records and notifies as [`record_and_notify!`].
const WRITE: &str = concat!(
    "WITH upserted AS (INSERT INTO results (",
    result_columns!(),
    ") SELECT * FROM UNNEST($6::text[], $7::text[], $8::text[], $9::text[], $10::text[], \
     $11::text[], $12::text[], $13::text[], $14::text[], $15::text[], $16::text[], \
     $17::text[], $18::int8[], $19::int8[], $20::int8[], $21::int8[], $22::int8[], \
     $23::int8[], $24::text[])",
    upsert_set!(),
    "), ",
    record_and_notify!()
);

/// Records tombstones, sets the head and notifies, as [`record_and_notify!`].
const RECORD: &str = concat!("WITH ", record_and_notify!());

/// Runs one batch of the writer (see `Backend::write_batch`).
pub(super) async fn batch<P>(
    connection: &mut PgConnection,
    keys: &[RowKey<'_>],
    plan: P,
) -> StoreResult<Option<i64>>
where
    P: FnOnce(i64, Vec<Row>) -> StoreResult<Option<Batch>>,
{
    let mut tx = connection.begin().await?;
    let head: i64 = sqlx::query_scalar(LOCK_HEAD).fetch_one(&mut *tx).await?;
    let namespaces: Vec<&str> = keys.iter().map(|key| key.namespace).collect();
    let uids: Vec<&str> = keys.iter().map(|key| key.workflow_uid).collect();
    let nodes: Vec<&str> = keys.iter().map(|key| key.node_id).collect();
    // Planned afresh for every batch: a generic plan cached while `results` was small
    // would scan it whole for every batch until autovacuum analyzes it (and the writer's
    // long-lived connection would keep that plan).
    let stored = sqlx::query(LOAD)
        .persistent(false)
        .bind(namespaces)
        .bind(uids)
        .bind(nodes)
        .try_map(|row| columns::result(&row))
        .fetch_all(&mut *tx)
        .await?;
    let Some(batch) = plan(head, stored)? else {
        tx.rollback().await?;
        return Ok(None);
    };
    let rows = &batch.rows;
    let text = |column: fn(&Row) -> &str| rows.iter().map(column).collect::<Vec<_>>();
    let optional = |column: fn(&Row) -> Option<&str>| rows.iter().map(column).collect::<Vec<_>>();
    let number = |column: fn(&Row) -> i64| rows.iter().map(column).collect::<Vec<_>>();
    let query = bind_changes(sqlx::query(WRITE), batch.head, &batch.changes)
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
        .bind(optional(|row| row.abandon_reason.as_deref()));
    query.execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(Some(batch.head))
}

type Query<'q> = sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments>;

/// Binds `$1`-`$5` of [`record_and_notify!`].
fn bind_changes<'q>(query: Query<'q>, head: i64, changes: &'q [Change]) -> Query<'q> {
    query
        .bind(head)
        .bind(changes.iter().map(|c| c.revision).collect::<Vec<_>>())
        .bind(
            changes
                .iter()
                .map(|c| c.namespace.as_str())
                .collect::<Vec<_>>(),
        )
        .bind(changes.iter().map(|c| c.item.as_str()).collect::<Vec<_>>())
        .bind(now_millis())
}

/// Records `changes`, sets the head to `head`, notifies the other replicas and commits.
pub(super) async fn record_and_commit(
    mut tx: Transaction<'_, Postgres>,
    head: i64,
    changes: &[Change],
) -> StoreResult<()> {
    bind_changes(sqlx::query(RECORD), head, changes)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}
