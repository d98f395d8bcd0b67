//! The columns of `results` and `cron_claims`, and how their rows decode: by position, the
//! same on both databases.

use argo_results_proto::{ClaimState, ResultState};
use argo_results_rules::Row;
use argo_results_rules::batch::Deleted;
use argo_results_rules::claim::ClaimRow;
use sqlx::{ColumnIndex, Decode, Type};

/// The columns of `results`, in the order [`result`] reads them and the upserts bind them.
macro_rules! result_columns {
    () => {
        "namespace, workflow_uid, node_id, workflow, pod_name, pod_uid, instance_id, state, \
         phase, message, progress, outputs, sequence, revision, created_revision, created_at, \
         updated_at, completed_at, abandon_reason"
    };
}
pub(super) use result_columns;

/// What an upsert of `results` changes in a row that exists: every column but the key,
/// `created_revision` and `created_at`.
macro_rules! upsert_set {
    () => {
        " ON CONFLICT (namespace, workflow_uid, node_id) DO UPDATE SET \
         workflow = excluded.workflow, pod_name = excluded.pod_name, \
         pod_uid = excluded.pod_uid, instance_id = excluded.instance_id, \
         state = excluded.state, phase = excluded.phase, message = excluded.message, \
         progress = excluded.progress, outputs = excluded.outputs, \
         sequence = excluded.sequence, revision = excluded.revision, \
         updated_at = excluded.updated_at, completed_at = excluded.completed_at, \
         abandon_reason = excluded.abandon_reason"
    };
}
pub(super) use upsert_set;

/// The columns of `cron_claims`, in the order [`claim`] reads them and the insert binds them.
macro_rules! claim_columns {
    () => {
        "cron_workflow_uid, scheduled_time, namespace, cron_workflow, workflow_name, state, \
         claim_id, claimed_at, lease_expires_at, takeovers, settled_at, workflow_uid, reason"
    };
}
pub(super) use claim_columns;

/// A row selected as `result_columns!`.
pub(super) fn result<'r, R>(row: &'r R) -> Result<Row, sqlx::Error>
where
    R: sqlx::Row,
    usize: ColumnIndex<R>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    &'r str: Decode<'r, R::Database> + Type<R::Database>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
{
    let state: &str = row.try_get(7)?;
    Ok(Row {
        namespace: row.try_get(0)?,
        workflow_uid: row.try_get(1)?,
        node_id: row.try_get(2)?,
        workflow: row.try_get(3)?,
        pod_name: row.try_get(4)?,
        pod_uid: row.try_get(5)?,
        instance_id: row.try_get(6)?,
        state: ResultState::parse(state).ok_or_else(|| sqlx::Error::ColumnDecode {
            index: "state".into(),
            source: format!("unknown state {state:?}").into(),
        })?,
        phase: row.try_get(8)?,
        message: row.try_get(9)?,
        progress: row.try_get(10)?,
        outputs: row.try_get(11)?,
        sequence: row.try_get(12)?,
        revision: row.try_get(13)?,
        created_revision: row.try_get(14)?,
        created_at: row.try_get(15)?,
        updated_at: row.try_get(16)?,
        completed_at: row.try_get(17)?,
        abandon_reason: row.try_get(18)?,
    })
}

/// A row selected as `claim_columns!`.
pub(super) fn claim<'r, R>(row: &'r R) -> Result<ClaimRow, sqlx::Error>
where
    R: sqlx::Row,
    usize: ColumnIndex<R>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    &'r str: Decode<'r, R::Database> + Type<R::Database>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
{
    let state: &str = row.try_get(5)?;
    Ok(ClaimRow {
        cron_workflow_uid: row.try_get(0)?,
        scheduled_time: row.try_get(1)?,
        namespace: row.try_get(2)?,
        cron_workflow: row.try_get(3)?,
        workflow_name: row.try_get(4)?,
        state: ClaimState::parse(state).ok_or_else(|| sqlx::Error::ColumnDecode {
            index: "state".into(),
            source: format!("unknown claim state {state:?}").into(),
        })?,
        claim_id: row.try_get(6)?,
        claimed_at: row.try_get(7)?,
        lease_expires_at: row.try_get(8)?,
        takeovers: row.try_get(9)?,
        settled_at: row.try_get(10)?,
        workflow_uid: row.try_get(11)?,
        reason: row.try_get(12)?,
    })
}

/// A deleted result's identity, as the deletions return it (`namespace, workflow,
/// workflow_uid, node_id`).
pub(super) fn deleted<'r, R>(row: &'r R) -> Result<Deleted, sqlx::Error>
where
    R: sqlx::Row,
    usize: ColumnIndex<R>,
    String: Decode<'r, R::Database> + Type<R::Database>,
{
    Ok(Deleted {
        namespace: row.try_get(0)?,
        workflow: row.try_get(1)?,
        workflow_uid: row.try_get(2)?,
        node_id: row.try_get(3)?,
    })
}

/// The column lists and the decoder are positional: these tests tie every list to
/// `result_columns!`, so that a column added to one and forgotten in another fails here
/// rather than only in the end-to-end tests.
#[cfg(test)]
mod tests {
    use argo_results_proto::ResultState;
    use argo_results_rules::Row;
    use argo_results_rules::batch::{Batch, RowKey};

    use super::super::sqlite::Sqlite;

    fn columns() -> Vec<&'static str> {
        result_columns!().split(',').map(str::trim).collect()
    }

    #[test]
    fn an_upsert_sets_every_column_but_the_key_and_the_creation() {
        let set: Vec<&str> = upsert_set!()
            .split_once("DO UPDATE SET")
            .expect("an update")
            .1
            .split(',')
            .map(|assignment| {
                let (column, value) = assignment.split_once('=').expect("column = value");
                let column = column.trim();
                assert_eq!(value.trim(), format!("excluded.{column}"));
                column
            })
            .collect();
        let kept = [
            "namespace",
            "workflow_uid",
            "node_id",
            "created_revision",
            "created_at",
        ];
        let expected: Vec<&str> = columns()
            .into_iter()
            .filter(|column| !kept.contains(column))
            .collect();
        assert_eq!(set, expected);
    }

    /// A row whose every field differs from every other, stored on SQLite and read back
    /// through the writer's own transactions (`UPSERT`, then `SELECT_BY_KEY` and
    /// [`super::result`]).
    #[tokio::test]
    async fn a_row_stored_on_sqlite_reads_back_field_for_field() {
        let path =
            std::env::temp_dir().join(format!("argo-results-columns-{}.db", std::process::id()));
        let path = path.to_str().expect("a UTF-8 path").to_owned();
        let mut db = Sqlite::connect(&path, 1).await.expect("open");
        let row = Row {
            namespace: "namespace".into(),
            workflow_uid: "workflow_uid".into(),
            node_id: "node_id".into(),
            workflow: "workflow".into(),
            pod_name: Some("pod_name".into()),
            pod_uid: Some("pod_uid".into()),
            instance_id: Some("instance_id".into()),
            state: ResultState::Completed,
            phase: Some("phase".into()),
            message: Some("message".into()),
            progress: Some("progress".into()),
            outputs: Some(r#"{"outputs":1}"#.into()),
            sequence: Some(1),
            revision: 2,
            created_revision: 3,
            created_at: 4,
            updated_at: 5,
            completed_at: Some(6),
            abandon_reason: Some("abandon_reason".into()),
        };
        let mut tx = db.begin_kept().await.expect("begin");
        let batch = Batch {
            head: 2,
            rows: vec![row.clone()],
            changes: Vec::new(),
        };
        tx.store(&batch).await.expect("store");
        tx.commit().await.expect("commit");
        let key = RowKey {
            namespace: "namespace",
            workflow_uid: "workflow_uid",
            node_id: "node_id",
        };
        let mut tx = db.begin_kept().await.expect("begin");
        let read = tx.load(&[key]).await;
        tx.rollback().await.expect("rollback");
        db.drop_kept();
        drop(db);
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{path}{suffix}"));
        }
        assert_eq!(read.expect("read back"), (2, vec![row]));
        assert_eq!(columns().len(), 19, "Row's fields, one per column");
    }
}
