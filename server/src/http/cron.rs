//! Cron run claims: each scheduled tick of a cron workflow runs exactly once.

use argo_results_proto::{Claim, ClaimList, ClaimRequest, Problem};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use utoipa::IntoParams;

use super::AppState;
use super::body::JsonBody;
use super::error::ApiResult;
use super::json;
use super::params::{CronPath, Names, QueryParams, invalid_parameter};
use crate::auth::{Caller, Verb};
use crate::store::NewClaim;
use crate::validate;

#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ClaimsParams {
    /// Only this incarnation's claims.
    cron_workflow_uid: Option<String>,
}

/// Claim a scheduled tick before submitting its workflow; concurrent claims of one tick
/// yield exactly one `201`.
#[utoipa::path(
    post,
    path = "/api/v1/namespaces/{namespace}/cronworkflows/{name}/runs",
    tag = "cron",
    params(CronPath),
    request_body = ClaimRequest,
    responses(
        (status = 201, description = "Claimed: submit the workflow", body = Claim),
        (status = 400, description = "invalid_json, unknown_field, invalid_parameter", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "unauthenticated", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "forbidden: not a controller", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "already_claimed: the existing claim is in current", body = Problem, content_type = "application/problem+json"),
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
    let claim = state
        .store
        .claim(NewClaim {
            namespace: path.namespace,
            cron_workflow: path.name,
            cron_workflow_uid: body.cron_workflow_uid,
            scheduled_millis,
            workflow_name: body.workflow_name,
        })
        .await?;
    Ok(json(StatusCode::CREATED, &claim))
}

/// A cron workflow's claims, newest first.
#[utoipa::path(
    get,
    path = "/api/v1/namespaces/{namespace}/cronworkflows/{name}/runs",
    tag = "cron",
    params(CronPath, ClaimsParams),
    responses(
        (status = 200, description = "Claims, newest scheduled time first", body = ClaimList),
        (status = 400, description = "invalid_parameter", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "unauthenticated", body = Problem, content_type = "application/problem+json"),
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
    let list = state
        .store
        .claims(path.namespace, path.name, params.cron_workflow_uid)
        .await?;
    Ok(json(StatusCode::OK, &list))
}
