//! Every `/api/v1` handler that takes a [`Caller`] authenticates its request first.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use super::AppState;
use super::error::ApiError;
use crate::auth::Caller;

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        Ok(state.counted(state.auth.authenticate(&parts.headers).await)?)
    }
}
