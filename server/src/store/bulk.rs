//! Statements that write many rows at once: a multi-row `VALUES` with one parameter per
//! column. Each value travels as itself (outputs as raw text, numbers as numbers), so the
//! database parses nothing; packing the rows into one JSON parameter made Postgres unescape
//! every byte of every result twice (the row's outputs and the feed item), a fifth of its
//! time under load. A statement's text is fixed by its numbers of rows, so a connection
//! prepares each common batch size once.

use std::fmt::Write as _;

use sqlx::Any;
use sqlx::any::AnyArguments;
use sqlx::query::Query;

use super::postgres;
use super::row::{Row, result_columns};

/// Parameters of one `results` row and of one `changes` row.
const ROW_WIDTH: usize = 19;
const CHANGE_WIDTH: usize = 4;

/// Changes per statement when a deletion records many: 4,000 parameters, well within both
/// databases' limits (32,766 on SQLite, 65,535 on Postgres). A batch of writes has at most
/// `--batch-max` (1,000) rows and changes: 19,000 parameters for SQLite's upsert, 23,001
/// for Postgres' one statement.
pub(super) const CHANGES_PER_STATEMENT: usize = 1000;

/// Statements of up to this many rows are prepared once and kept by the connection. A
/// prepared 128-row upsert holds 713 KiB of Postgres' memory, about 5.6 KiB per row, so
/// keeping every size up to `--batch-max` (1,000) could hold hundreds of MB; larger
/// batches (more than 64 writes queued at once) are planned afresh instead, at the cost of
/// a Parse round trip. The upserts of every size up to 64 hold about 12 MB; sqlx keeps at
/// most 100 statements per connection.
const PREPARED_ROWS_MAX: usize = 64;

/// Whether a statement of `rows` rows is worth keeping prepared.
pub(super) fn prepared(rows: usize) -> bool {
    rows <= PREPARED_ROWS_MAX
}

pub(super) type BulkQuery<'q> = Query<'q, Any, AnyArguments<'q>>;

/// A row of `changes`.
pub(super) struct Change<'a> {
    pub revision: i64,
    pub namespace: &'a str,
    /// The feed item's JSON text.
    pub item: String,
    pub recorded_at: i64,
}

/// `($first, ...), (...)`: `rows` tuples of `width` numbered parameters.
fn values(sql: &mut String, rows: usize, width: usize, first: usize) {
    for row in 0..rows {
        sql.push_str(if row == 0 { "(" } else { ", (" });
        for column in 0..width {
            let separator = if column == 0 { "" } else { ", " };
            let _ = write!(sql, "{separator}${}", first + row * width + column);
        }
        sql.push(')');
    }
}

/// The upsert of `rows` results, parameters from `$first`.
fn upsert_results(sql: &mut String, rows: usize, first: usize) {
    sql.push_str(concat!(
        "INSERT INTO results (",
        result_columns!(),
        ") VALUES "
    ));
    values(sql, rows, ROW_WIDTH, first);
    sql.push_str(
        " ON CONFLICT (namespace, workflow_uid, node_id) DO UPDATE SET \
         workflow = excluded.workflow, pod_name = excluded.pod_name, \
         pod_uid = excluded.pod_uid, instance_id = excluded.instance_id, \
         state = excluded.state, phase = excluded.phase, message = excluded.message, \
         progress = excluded.progress, outputs = excluded.outputs, \
         sequence = excluded.sequence, revision = excluded.revision, \
         updated_at = excluded.updated_at, completed_at = excluded.completed_at, \
         abandon_reason = excluded.abandon_reason",
    );
}

/// The insert of `changes` rows, parameters from `$first`.
fn insert_changes(sql: &mut String, changes: usize, first: usize) {
    sql.push_str("INSERT INTO changes (revision, namespace, item, recorded_at) VALUES ");
    values(sql, changes, CHANGE_WIDTH, first);
}

/// Upserts `rows` (each key at most once: a statement cannot touch a row twice).
pub(super) fn upsert_statement(rows: usize) -> String {
    let mut sql = String::new();
    upsert_results(&mut sql, rows, 1);
    sql
}

/// Records `changes` in the feed.
pub(super) fn record_statement(changes: usize) -> String {
    let mut sql = String::new();
    insert_changes(&mut sql, changes, 1);
    sql
}

/// A whole batch on Postgres in one round trip: sets the head to `$1`, upserts `rows`,
/// records `changes` and notifies the other replicas (delivered at commit).
pub(super) fn write_postgres_statement(rows: usize, changes: usize) -> String {
    let mut sql = String::from("WITH upserted AS (");
    upsert_results(&mut sql, rows, 2);
    sql.push_str("), recorded AS (");
    insert_changes(&mut sql, changes, 2 + rows * ROW_WIDTH);
    sql.push_str(concat!(
        "), head AS (UPDATE store_state SET revision = $1 WHERE id = 1) SELECT pg_notify(",
        postgres::channel!(),
        ", $1::text)"
    ));
    sql
}

/// Binds a row's columns in `result_columns!` order.
pub(super) fn bind_row<'q>(query: BulkQuery<'q>, row: &'q Row) -> BulkQuery<'q> {
    query
        .bind(row.namespace.as_str())
        .bind(row.workflow_uid.as_str())
        .bind(row.node_id.as_str())
        .bind(row.workflow.as_str())
        .bind(row.pod_name.as_deref())
        .bind(row.pod_uid.as_deref())
        .bind(row.instance_id.as_deref())
        .bind(row.state.as_str())
        .bind(row.phase.as_deref())
        .bind(row.message.as_deref())
        .bind(row.progress.as_deref())
        .bind(row.outputs.as_deref())
        .bind(row.sequence)
        .bind(row.revision)
        .bind(row.created_revision)
        .bind(row.created_at)
        .bind(row.updated_at)
        .bind(row.completed_at)
        .bind(row.abandon_reason.as_deref())
}

/// Binds a change's columns in `insert_changes` order.
pub(super) fn bind_change<'q>(query: BulkQuery<'q>, change: &'q Change<'q>) -> BulkQuery<'q> {
    query
        .bind(change.revision)
        .bind(change.namespace)
        .bind(change.item.as_str())
        .bind(change.recorded_at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_numbered_across_both_inserts() {
        let sql = write_postgres_statement(2, 1);
        assert!(sql.contains("VALUES ($2, $3, "), "{sql}");
        assert!(sql.contains(", $20), ($21, "), "{sql}");
        assert!(sql.contains(", $39) ON CONFLICT"), "{sql}");
        assert!(sql.contains("VALUES ($40, $41, $42, $43))"), "{sql}");
        assert!(
            sql.contains("SET revision = $1 ") && sql.ends_with(", $1::text)"),
            "{sql}"
        );
        assert_eq!(sql.matches('$').count(), 2 * ROW_WIDTH + CHANGE_WIDTH + 2);
    }
}
