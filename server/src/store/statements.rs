//! SQL text that both databases run as written; each backend keeps its own statements
//! beside its code.

use super::columns::{claim_columns, result_columns};

/// The head: the newest committed revision.
pub(super) const READ_HEAD: &str = "SELECT revision FROM store_state WHERE id = 1";
/// The head and the epoch its revisions belong to.
pub(super) const READ_HEAD_EPOCH: &str = "SELECT revision, epoch FROM store_state WHERE id = 1";
/// The epoch and the database identity it was recorded in, locked until the transaction
/// ends: replicas starting together agree on one new epoch.
pub(super) const READ_EPOCH: &str =
    "UPDATE store_state SET epoch = epoch WHERE id = 1 RETURNING epoch, identity";
pub(super) const SET_EPOCH: &str = "UPDATE store_state SET epoch = $1, identity = $2 WHERE id = 1";
/// The head, locked until the transaction ends: every writing transaction starts here.
pub(super) const LOCK_HEAD: &str =
    "UPDATE store_state SET revision = revision WHERE id = 1 RETURNING revision";
pub(super) const PENDING: &str = "SELECT state, COUNT(*) FROM results \
     WHERE state IN ('expected', 'reporting') GROUP BY state";
pub(super) const READ_PRUNED: &str = "SELECT pruned_revision FROM store_state WHERE id = 1";
/// The last revision of the oldest batch of changes recorded before $1.
pub(super) const PRUNABLE_THROUGH: &str = "SELECT MAX(revision) FROM (SELECT revision FROM changes \
     WHERE recorded_at < $1 ORDER BY revision LIMIT $2) AS oldest";
pub(super) const DELETE_CHANGES: &str = "DELETE FROM changes WHERE revision <= $1";
pub(super) const SET_PRUNED: &str =
    "UPDATE store_state SET pruned_revision = $1 WHERE id = 1 AND pruned_revision < $1";
pub(super) const DELETE_EXPIRED: &str = "DELETE FROM results WHERE (namespace, workflow_uid, node_id) IN \
     (SELECT namespace, workflow_uid, node_id FROM results WHERE updated_at < $1 \
     ORDER BY updated_at LIMIT $2) RETURNING namespace, workflow, workflow_uid, node_id";
pub(super) const DELETE_WORKFLOW: &str = "DELETE FROM results WHERE namespace = $1 AND workflow = $2 \
     AND workflow_uid = $3 RETURNING namespace, workflow, workflow_uid, node_id";
pub(super) const SELECT_BY_KEY: &str = concat!(
    "SELECT ",
    result_columns!(),
    " FROM results WHERE namespace = $1 AND workflow_uid = $2 AND node_id = $3"
);
/// The newest incarnation of a workflow name: the UID whose first result is the newest.
pub(super) const NEWEST_UID: &str = "SELECT workflow_uid FROM results WHERE namespace = $1 \
     AND workflow = $2 ORDER BY created_revision DESC LIMIT 1";
pub(super) const SELECT_PAGE: &str = concat!(
    "SELECT ",
    result_columns!(),
    " FROM results WHERE namespace = $1 AND workflow_uid = $2 AND workflow = $3 \
     AND node_id > $4 AND ($5 = '' OR state = $5) ORDER BY node_id LIMIT $6"
);
pub(super) const SUMMARY: &str = "SELECT state, COUNT(*) FROM results \
     WHERE namespace = $1 AND workflow_uid = $2 AND workflow = $3 GROUP BY state";
pub(super) const SELECT_CHANGES: &str = "SELECT revision, item FROM changes \
     WHERE revision > $1 AND revision <= $2 AND ($3 = '' OR namespace = $3) \
     ORDER BY revision LIMIT $4";
pub(super) const INSERT_CLAIM: &str = concat!(
    "INSERT INTO cron_claims (",
    claim_columns!(),
    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) \
     ON CONFLICT (cron_workflow_uid, scheduled_time) DO NOTHING"
);
/// Writes what a takeover or a settle changes.
pub(super) const UPDATE_CLAIM: &str = "UPDATE cron_claims SET state = $3, claim_id = $4, \
     claimed_at = $5, lease_expires_at = $6, takeovers = $7, settled_at = $8, \
     workflow_uid = $9, reason = $10 WHERE cron_workflow_uid = $1 AND scheduled_time = $2";
pub(super) const SELECT_CLAIM: &str = concat!(
    "SELECT ",
    claim_columns!(),
    " FROM cron_claims WHERE cron_workflow_uid = $1 AND scheduled_time = $2"
);
/// A page of a cron workflow's claims, newest first, after ($4, $5).
pub(super) const SELECT_CLAIMS: &str = concat!(
    "SELECT ",
    claim_columns!(),
    " FROM cron_claims WHERE namespace = $1 AND cron_workflow = $2 \
     AND ($3 = '' OR cron_workflow_uid = $3) AND (scheduled_time, cron_workflow_uid) < ($4, $5) \
     ORDER BY scheduled_time DESC, cron_workflow_uid DESC LIMIT $6"
);
pub(super) const LAST_SETTLED: &str = "SELECT MAX(scheduled_time) FROM cron_claims \
     WHERE namespace = $1 AND cron_workflow = $2 AND ($3 = '' OR cron_workflow_uid = $3) \
     AND state <> 'claimed'";
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
pub(super) const DELETE_OLD_CLAIMS: &str = concat!(
    "DELETE FROM cron_claims WHERE ",
    prunable_claim!("cron_claims"),
    " AND (cron_workflow_uid, scheduled_time) IN (SELECT old.cron_workflow_uid, \
     old.scheduled_time FROM cron_claims AS old WHERE ",
    prunable_claim!("old"),
    " ORDER BY old.claimed_at LIMIT $2)"
);
/// What an upsert of `results` changes in a row that exists.
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
