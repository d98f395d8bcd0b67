//! Every `/api/v1` handler that takes a [`Caller`] gets the one admission authenticated.

use argo_results_proto::ProblemCode;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use super::error::ApiError;
use super::state::AppState;
use crate::auth::Caller;

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &AppState) -> Result<Self, ApiError> {
        parts.extensions.remove::<Caller>().ok_or_else(|| {
            ApiError::new(
                ProblemCode::Internal,
                "the route is outside the API's admission, which authenticates callers",
            )
        })
    }
}
