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
