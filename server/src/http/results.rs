//! A node's result: the wait container's report, the controller's abandon and garbage
//! collection, and reads.

use argo_results_proto::schema::Uid;
use argo_results_proto::{
    AbandonRequest, DeleteResponse, NodeResult, PROTOCOL_VERSION, Problem, ProblemCode,
    ReportRequest, ResultList, ResultState, Summary,
};
use axum::Extension;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use utoipa::IntoParams;

use super::admission::Slot;
use super::answer::{self, json, written_answer};
use super::audit;
use super::body::JsonBody;
use super::cursor::{self, PageQuery};
use super::error::{ApiError, ApiResult};
use super::observe::Arrived;
use super::params::{Names, NodePath, QueryParams, WorkflowPath, invalid_parameter, limit};
use super::places;
use super::state::AppState;
use crate::auth::{Caller, Verb, pod};
use crate::metrics::ReportOutcome;
use crate::store::{ListQuery, Report, ResultKey};
use crate::store::{Outcome, Refusal, StoreError, Written};
use crate::validate;

const LIST_DEFAULT_LIMIT: u32 = 500;
const LIST_MAX_LIMIT: u32 = 1000;

#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct UidQuery {
    /// The workflow incarnation; the newest one of the name when absent.
    #[param(value_type = Option<Uid>)]
    workflow_uid: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// The workflow incarnation; the newest one of the name when absent.
    #[param(value_type = Option<Uid>)]
    workflow_uid: Option<String>,
    /// Only results in this state.
    #[param(value_type = Option<ResultState>)]
    state: Option<String>,
    /// Page size, 1 to 1000 (default 500).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
    /// The `continue` of the previous page.
    #[serde(rename = "continue")]
    #[param(rename = "continue")]
    continue_token: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct DeleteParams {
    /// The incarnation whose results are deleted.
    #[param(value_type = Uid)]
    workflow_uid: Option<String>,
}

fn key(path: NodePath, workflow_uid: String) -> ResultKey {
    ResultKey {
        namespace: path.namespace,
        workflow: path.workflow,
        workflow_uid,
        node_id: path.node_id,
    }
}

fn report_outcome(stored: &Result<Written, StoreError>) -> ReportOutcome {
    match stored {
        Ok(written) => match written.outcome {
            Outcome::Created => ReportOutcome::created,
            Outcome::Updated => ReportOutcome::updated,
            Outcome::Unchanged => ReportOutcome::replayed,
        },
        Err(StoreError::Refused(
            Refusal::StaleSequence { .. } | Refusal::SequenceReused { .. },
        )) => ReportOutcome::stale,
        Err(StoreError::Refused(Refusal::Frozen { .. })) => ReportOutcome::conflict,
        Err(StoreError::Refused(Refusal::PodMismatch { .. })) => ReportOutcome::pod_mismatch,
        Err(StoreError::Refused(Refusal::NotExpected { .. } | Refusal::NotYetBound { .. })) => {
            ReportOutcome::not_expected
        }
        Err(_) => ReportOutcome::refused,
    }
}

fn optional_uid(uid: Option<String>) -> ApiResult<Option<String>> {
    if let Some(uid) = &uid {
        validate::uid("workflowUid", uid).map_err(invalid_parameter)?;
    }
    Ok(uid)
}

/// Store a wait container's report of its node's result.
#[utoipa::path(
    put,
    path = "/api/v1/namespaces/{namespace}/workflows/{workflow}/nodes/{nodeId}/result",
    tag = "results",
    params(NodePath),
    request_body = ReportRequest,
    responses(
        (status = 201, description = "First write of the row, committed", body = NodeResult),
        (status = 200, description = "Stored, or an idempotent replay (revision unchanged)", body = NodeResult),
        (status = 400, description = "invalid_json, unknown_field, unsupported_protocol_version, invalid_parameter", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "forbidden: not this node's pod", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "already_completed (with current), stale_sequence, pod_mismatch, not_expected (no expectation names this pod)", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "invalid_field", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn report(
    State(state): State<AppState>,
    caller: Caller,
    Names(path): Names<NodePath>,
    Extension(Arrived(arrived)): Extension<Arrived>,
    Extension(slot): Extension<Slot>,
    JsonBody(body): JsonBody<ReportRequest>,
) -> ApiResult<Response> {
    if body.protocol_version != PROTOCOL_VERSION {
        return Err(ApiError::new(
            ProblemCode::UnsupportedProtocolVersion,
            format!(
                "protocolVersion {} is not supported; this server speaks {PROTOCOL_VERSION}",
                body.protocol_version
            ),
        )
        .with_field("protocolVersion"));
    }
    validate::report(&body, &state.limits)?;
    state.counted(pod::authorize_report(&state.auth, &caller, &path, &body).await)?;
    let _waiting = places::wait_for_writer(&state, &caller, &slot, &path.namespace).await?;
    let outputs = body
        .outputs
        .as_deref()
        .map(serde_json::value::RawValue::get);
    let Some(reserved) = state
        .pod_writes
        .reserve(&body.pod_uid, outputs, body.message.as_deref())
    else {
        return Err(ApiError::overloaded(&format!(
            "pod {} changed more than {} bytes of results in the last hour \
             (--pod-write-budget)",
            body.pod_uid,
            state.pod_writes.per_hour()
        )));
    };
    let report = Report {
        pod_name: body.pod_name,
        pod_uid: body.pod_uid,
        instance_id: body.instance_id,
        sequence: body.sequence,
        is_final: body.is_final,
        outputs: body.outputs.map(|raw| Box::<str>::from(raw).into_string()),
        progress: body.progress,
        phase: body.phase,
        message: body.message,
    };
    let stored = state
        .store
        .report(key(path, body.workflow_uid), report)
        .await;
    // A write costs the pod what it stored. A replay, or a refusal of what the merge gave,
    // cost the writer a merge of the report: they keep what was reserved, so that sending
    // the same report without end runs out of budget too. A refusal decided before the
    // merge, or a store that did nothing, gives it back.
    match &stored {
        Ok(written) if written.outcome != Outcome::Unchanged => {
            state.metrics.report_committed(arrived.elapsed());
            reserved.settle(&written.result);
        }
        _ if merged(&stored) => reserved.keep(),
        _ => {}
    }
    state.metrics.report(report_outcome(&stored));
    Ok(written_answer(stored?))
}

/// Whether the writer merged the report into the stored row before it decided: a replay,
/// or a refusal of the merged row (frozen, its sequence, its size).
fn merged(stored: &Result<Written, StoreError>) -> bool {
    matches!(
        stored,
        Ok(_)
            | Err(StoreError::Refused(
                Refusal::Frozen { .. }
                    | Refusal::StaleSequence { .. }
                    | Refusal::SequenceReused { .. }
                    | Refusal::OutputsTooLarge { .. }
            ))
    )
}

/// Give up on a node whose pod is gone; a completed result is kept and returned in `current`.
#[utoipa::path(
    post,
    path = "/api/v1/namespaces/{namespace}/workflows/{workflow}/nodes/{nodeId}/result/abandon",
    tag = "controller",
    params(NodePath),
    request_body = AbandonRequest,
    responses(
        (status = 200, description = "Abandoned (or already abandoned)", body = NodeResult),
        (status = 400, description = "invalid_json, unknown_field, invalid_parameter", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "forbidden: not a controller", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "not_found", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "already_completed: use the outputs in current", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "invalid_field", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn abandon(
    State(state): State<AppState>,
    caller: Caller,
    Names(path): Names<NodePath>,
    Extension(slot): Extension<Slot>,
    JsonBody(body): JsonBody<AbandonRequest>,
) -> ApiResult<Response> {
    state
        .authorize(&caller, Verb::Delete, Some(&path.namespace))
        .await?;
    validate::abandon(&body)?;
    let _waiting = places::wait_for_writer(&state, &caller, &slot, &path.namespace).await?;
    let stored = state
        .store
        .abandon(key(path, body.workflow_uid), body.reason)
        .await?;
    audit::result("abandoned a node's result", &stored);
    Ok(written_answer(stored))
}

/// One node's result.
#[utoipa::path(
    get,
    path = "/api/v1/namespaces/{namespace}/workflows/{workflow}/nodes/{nodeId}/result",
    tag = "results",
    params(NodePath, UidQuery),
    responses(
        (status = 200, description = "The committed result", body = NodeResult),
        (status = 400, description = "invalid_parameter", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "forbidden: not a reader", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "not_found", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Names(path): Names<NodePath>,
    QueryParams(query): QueryParams<UidQuery>,
) -> ApiResult<Response> {
    state
        .authorize(&caller, Verb::Get, Some(&path.namespace))
        .await?;
    let uid = optional_uid(query.workflow_uid)?;
    let node_id = path.node_id.clone();
    match state
        .store
        .get(path.namespace, path.workflow, path.node_id, uid)
        .await?
    {
        Some(result) => Ok(json(StatusCode::OK, &result)),
        None => Err(ApiError::new(
            ProblemCode::NotFound,
            format!("no result for node {node_id}"),
        )),
    }
}

/// A workflow's results ordered by node ID, with a summary from the same snapshot.
#[utoipa::path(
    get,
    path = "/api/v1/namespaces/{namespace}/workflows/{workflow}/results",
    tag = "results",
    params(WorkflowPath, ListParams),
    responses(
        (status = 200, description = "One page and the summary at `revision`", body = ResultList),
        (status = 400, description = "invalid_parameter", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "forbidden: not a reader", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn list(
    State(state): State<AppState>,
    Extension(slot): Extension<Slot>,
    caller: Caller,
    Names(path): Names<WorkflowPath>,
    QueryParams(params): QueryParams<ListParams>,
) -> ApiResult<Response> {
    state
        .authorize(&caller, Verb::List, Some(&path.namespace))
        .await?;
    let state_filter = match params.state.as_deref() {
        None => None,
        Some(text) => Some(ResultState::parse(text).ok_or_else(|| {
            ApiError::new(
                ProblemCode::InvalidParameter,
                format!("state {text:?} is not expected, reporting, completed or abandoned"),
            )
            .with_field("state")
        })?),
    };
    let page_query = PageQuery {
        namespace: &path.namespace,
        workflow: &path.workflow,
        state: state_filter.map(ResultState::as_str),
    };
    let uid = optional_uid(params.workflow_uid)?;
    let (workflow_uid, after) = match &params.continue_token {
        Some(token) => {
            let (uid, after) = cursor::decode(token, &page_query, uid.as_deref())?;
            (Some(uid), Some(after))
        }
        None => (uid, None),
    };
    let limit = limit(params.limit, LIST_DEFAULT_LIMIT, LIST_MAX_LIMIT)?;
    slot.begin_page(&state, &caller, Some(&path.namespace))
        .await;
    let query = ListQuery {
        namespace: path.namespace.clone(),
        workflow: path.workflow.clone(),
        workflow_uid,
        state: state_filter,
        after,
        limit,
    };
    let page = state.store.list(query, &slot).await?;
    let continue_token = match (&page.workflow_uid, &page.last_node_id) {
        (Some(uid), Some(last)) if page.more => Some(cursor::encode(&page_query, uid, last)),
        _ => None,
    };
    // ResultList's members after its items, in its order.
    #[derive(Serialize)]
    struct AfterItems {
        revision: i64,
        epoch: String,
        summary: Summary,
        #[serde(rename = "continue")]
        continue_token: Option<String>,
    }
    let after_items = AfterItems {
        revision: page.revision,
        epoch: page.epoch,
        summary: page.summary,
        continue_token,
    };
    Ok(answer::page(page.items, &after_items))
}

/// Delete every result of one workflow incarnation (garbage collection); the feed keeps
/// a tombstone for each.
#[utoipa::path(
    delete,
    path = "/api/v1/namespaces/{namespace}/workflows/{workflow}/results",
    tag = "controller",
    params(WorkflowPath, DeleteParams),
    responses(
        (status = 200, description = "How many results were deleted", body = DeleteResponse),
        (status = 400, description = "invalid_parameter: workflowUid is required", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "forbidden: not a controller", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Names(path): Names<WorkflowPath>,
    QueryParams(params): QueryParams<DeleteParams>,
) -> ApiResult<Response> {
    state
        .authorize(&caller, Verb::Delete, Some(&path.namespace))
        .await?;
    let Some(uid) = optional_uid(params.workflow_uid)? else {
        return Err(ApiError::new(
            ProblemCode::InvalidParameter,
            "workflowUid is required: results are deleted per workflow incarnation",
        )
        .with_field("workflowUid"));
    };
    let deleted = state
        .store
        .delete_workflow(path.namespace, path.workflow, uid)
        .await?;
    audit::deleted(deleted);
    Ok(json(StatusCode::OK, &DeleteResponse { deleted }))
}
