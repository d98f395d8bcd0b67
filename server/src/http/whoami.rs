//! The first thing an admin runs when a call is refused.

use argo_results_proto::Whoami;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::answer::json;
use super::error::ApiResult;
use super::state::AppState;
use crate::auth::Caller;

/// Who the server thinks the caller is: subject, namespace, pod and roles.
#[utoipa::path(
    get,
    path = "/api/v1/whoami",
    tag = "auth",
    responses(
        (status = 200, description = "The caller", body = Whoami),
    ),
    security(("bearer" = []))
)]
pub async fn whoami(State(state): State<AppState>, caller: Caller) -> ApiResult<Response> {
    Ok(json(StatusCode::OK, &state.auth.whoami(&caller).await?))
}
