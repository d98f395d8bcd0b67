//! The audit trail of the controller's writes: one INFO line for each registration,
//! abandonment, deletion, claim and settle that the store took, under the target
//! `argo_results::audit` (kept apart with `RUST_LOG=warn,argo_results::audit=info`). Who
//! and where are the request's span: `subject`, `peer`, `route`, `namespace`,
//! `workflow`, `node`; the line says what was done and how many rows it changed, as
//! kube-apiserver's audit log records each `WorkflowTaskResult` write today.

use argo_results_proto::Claim;

use crate::store::{Outcome, Written};

/// A write of one result's row: `rows` is 0 when it changed nothing (a replay).
pub(super) fn result(what: &'static str, written: &Written) {
    let rows = match written.outcome {
        Outcome::Created | Outcome::Updated => 1,
        Outcome::Unchanged => 0,
    };
    tracing::info!(
        target: "argo_results::audit",
        rows,
        revision = written.result.revision,
        "{what}"
    );
}

/// A workflow incarnation's results deleted.
pub(super) fn deleted(rows: u64) {
    tracing::info!(target: "argo_results::audit", rows, "deleted a workflow's results");
}

/// A cron tick claimed or settled; `state` is where the tick stands now.
pub(super) fn tick(what: &'static str, claim: &Claim) {
    tracing::info!(
        target: "argo_results::audit",
        rows = 1,
        scheduled_time = %claim.scheduled_time,
        state = claim.state.as_str(),
        taken_over = claim.taken_over,
        "{what}"
    );
}
