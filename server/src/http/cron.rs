//! Cron run claims: each scheduled tick of a cron workflow is claimed under a lease, run
//! once, and settled; a tick whose holder died is taken over, never lost.

use argo_results_proto::schema::Uid;
use argo_results_proto::{Claim, ClaimList, ClaimRequest, Problem, SettleRequest};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use utoipa::IntoParams;

use super::answer::json;
use super::audit;
use super::body::JsonBody;
use super::cursor;
use super::error::ApiResult;
use super::params::{CronPath, Names, QueryParams, invalid_parameter, limit};
use super::state::AppState;
use crate::auth::{Caller, Verb};
use crate::store::{ClaimQuery, NewClaim, Settlement};
use crate::validate;
use argo_results_rules::clock::format_scheduled;

const RUNS_DEFAULT_LIMIT: u32 = 500;
const RUNS_MAX_LIMIT: u32 = 1000;

#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ClaimsParams {
    /// Only this incarnation's claims.
    #[param(value_type = Option<Uid>)]
    cron_workflow_uid: Option<String>,
    /// Page size, 1 to 1000 (default 500).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
    /// The `continue` of the previous page.
    #[serde(rename = "continue")]
    #[param(rename = "continue")]
    continue_token: Option<String>,
}

/// Where a page of claims continues: after this tick, in this query.
#[derive(Debug, Serialize, Deserialize)]
struct Position {
    namespace: String,
    cron_workflow: String,
    cron_workflow_uid: Option<String>,
    scheduled_time: i64,
    after_uid: String,
}

impl cursor::Untrusted for Position {
    fn valid(&self) -> bool {
        validate::uid("cronWorkflowUid", &self.after_uid).is_ok()
    }
}

/// Claim a scheduled tick under a lease before creating its workflow; concurrent claims
/// of one tick, through any replicas, yield exactly one `201`.
#[utoipa::path(
    post,
    path = "/api/v1/namespaces/{namespace}/cronworkflows/{name}/runs",
    tag = "cron",
    params(CronPath),
    request_body = ClaimRequest,
    responses(
        (status = 201, description = "Claimed (takenOver when an expired, unsettled claim was taken over): create workflowName, then settle with claimId", body = Claim),
        (status = 400, description = "invalid_json, unknown_field, invalid_parameter", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "forbidden: not a controller", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "already_claimed: a live or settled claim, in current", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "invalid_field", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn claim(
    State(state): State<AppState>,
    caller: Caller,
    Names(path): Names<CronPath>,
    JsonBody(body): JsonBody<ClaimRequest>,
) -> ApiResult<Response> {
    state
        .authorize(&caller, Verb::Create, Some(&path.namespace))
        .await?;
    let scheduled_millis = validate::claim(&body)?;
    let lease_seconds = body
        .lease_seconds
        .unwrap_or(validate::DEFAULT_LEASE_SECONDS);
    let claim = state
        .store
        .claim(NewClaim {
            namespace: path.namespace,
            cron_workflow: path.name,
            cron_workflow_uid: body.cron_workflow_uid,
            scheduled_millis,
            workflow_name: body.workflow_name,
            lease_millis: lease_seconds * 1000,
        })
        .await?;
    audit::tick("claimed a cron tick", &claim);
    Ok(json(StatusCode::CREATED, &claim))
}

/// Record what the holder of a claim did: `submitted` with the workflow's UID (created, or
/// `AlreadyExists`), or `skipped` with a reason.
#[utoipa::path(
    post,
    path = "/api/v1/namespaces/{namespace}/cronworkflows/{name}/runs/settle",
    tag = "cron",
    params(CronPath),
    request_body = SettleRequest,
    responses(
        (status = 200, description = "Settled, or a replay of the same outcome", body = Claim),
        (status = 400, description = "invalid_json, unknown_field, invalid_parameter", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "forbidden: not a controller", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "not_found: the tick was never claimed", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "lease_lost: claimId is not the holder (the tick was taken over), in current; already_completed: settled with another outcome, in current", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "invalid_field", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn settle(
    State(state): State<AppState>,
    caller: Caller,
    Names(path): Names<CronPath>,
    JsonBody(body): JsonBody<SettleRequest>,
) -> ApiResult<Response> {
    state
        .authorize(&caller, Verb::Create, Some(&path.namespace))
        .await?;
    let (scheduled_millis, outcome) = validate::settle(&body)?;
    let claim = state
        .store
        .settle(Settlement {
            namespace: path.namespace,
            cron_workflow: path.name,
            cron_workflow_uid: body.cron_workflow_uid,
            scheduled_millis,
            claim_id: body.claim_id,
            outcome,
        })
        .await?;
    audit::tick("settled a cron tick", &claim);
    Ok(json(StatusCode::OK, &claim))
}

/// A cron workflow's claims, newest first, and its newest settled tick.
#[utoipa::path(
    get,
    path = "/api/v1/namespaces/{namespace}/cronworkflows/{name}/runs",
    tag = "cron",
    params(CronPath, ClaimsParams),
    responses(
        (status = 200, description = "A page of claims, newest scheduled time first", body = ClaimList),
        (status = 400, description = "invalid_parameter", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "forbidden: not a reader", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn claims(
    State(state): State<AppState>,
    caller: Caller,
    Names(path): Names<CronPath>,
    QueryParams(params): QueryParams<ClaimsParams>,
) -> ApiResult<Response> {
    state
        .authorize(&caller, Verb::List, Some(&path.namespace))
        .await?;
    if let Some(uid) = &params.cron_workflow_uid {
        validate::uid("cronWorkflowUid", uid).map_err(invalid_parameter)?;
    }
    let after = match &params.continue_token {
        Some(token) => {
            let position: Position = cursor::open(token)?;
            let same_query = position.namespace == path.namespace
                && position.cron_workflow == path.name
                && position.cron_workflow_uid == params.cron_workflow_uid;
            if !same_query {
                return Err(cursor::foreign());
            }
            Some((position.scheduled_time, position.after_uid))
        }
        None => None,
    };
    let page = state
        .store
        .claims(ClaimQuery {
            namespace: path.namespace.clone(),
            cron_workflow: path.name.clone(),
            cron_workflow_uid: params.cron_workflow_uid.clone(),
            after,
            limit: limit(params.limit, RUNS_DEFAULT_LIMIT, RUNS_MAX_LIMIT)?,
        })
        .await?;
    let continue_token = page.next.map(|(scheduled_time, after_uid)| {
        cursor::seal(&Position {
            namespace: path.namespace,
            cron_workflow: path.name,
            cron_workflow_uid: params.cron_workflow_uid,
            scheduled_time,
            after_uid,
        })
    });
    let list = ClaimList {
        items: page.items,
        last_scheduled_time: page.last_scheduled.map(format_scheduled),
        continue_token,
    };
    Ok(json(StatusCode::OK, &list))
}
