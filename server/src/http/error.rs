//! Every error of the API becomes `application/problem+json` here, and only here.

use argo_results_proto::{Problem, ProblemCode};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::value::RawValue;

use crate::auth::AuthError;
use crate::store::{FailureKind, Refusal, Stale, StoreError};
use crate::validate::FieldError;

/// Seconds a client should wait before retrying a shed or failed request.
const RETRY_AFTER_SECONDS: &str = "1";

pub type ApiResult<T> = Result<T, ApiError>;

#[derive(Debug)]
pub struct ApiError {
    code: ProblemCode,
    detail: String,
    field: Option<String>,
    current: Option<Box<RawValue>>,
    revision: Option<i64>,
    epoch: Option<String>,
}

impl ApiError {
    /// `429 overloaded`: a shared bound is full; the client retries after Retry-After.
    pub fn overloaded(what: &str) -> Self {
        ApiError::new(
            ProblemCode::Overloaded,
            format!("{what}; retry after Retry-After seconds"),
        )
    }

    pub fn new(code: ProblemCode, detail: impl Into<String>) -> Self {
        ApiError {
            code,
            detail: detail.into(),
            field: None,
            current: None,
            revision: None,
            epoch: None,
        }
    }

    pub fn with_field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    fn with_current(mut self, current: &impl Serialize) -> Self {
        self.current = serde_json::value::to_raw_value(current).ok();
        self
    }

    fn internal(error: &dyn std::fmt::Display) -> Self {
        tracing::error!(%error, "request failed");
        ApiError::new(
            ProblemCode::Internal,
            "the server failed to handle the request; its log has the cause",
        )
    }

    pub fn status(&self) -> StatusCode {
        use ProblemCode::*;
        match self.code {
            InvalidJson | UnknownField | UnsupportedProtocolVersion | InvalidParameter => {
                StatusCode::BAD_REQUEST
            }
            Unauthenticated => StatusCode::UNAUTHORIZED,
            Forbidden => StatusCode::FORBIDDEN,
            NotFound => StatusCode::NOT_FOUND,
            AlreadyCompleted | StaleSequence | PodMismatch | NotExpected | AlreadyClaimed
            | LeaseLost => StatusCode::CONFLICT,
            Gone => StatusCode::GONE,
            RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            InvalidField => StatusCode::UNPROCESSABLE_ENTITY,
            Overloaded => StatusCode::TOO_MANY_REQUESTS,
            Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let problem = Problem {
            problem_type: "about:blank".into(),
            title: status.canonical_reason().unwrap_or("Error").into(),
            status: status.as_u16(),
            code: self.code,
            detail: self.detail,
            field: self.field,
            current: self.current,
            revision: self.revision,
            epoch: self.epoch,
        };
        let mut body = serde_json::to_vec(&problem).unwrap_or_default();
        body.push(b'\n');
        let mut response = (status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        match self.code {
            ProblemCode::Unauthenticated => {
                headers.insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"argo-results\""),
                );
            }
            ProblemCode::Overloaded | ProblemCode::Unavailable => {
                headers.insert(
                    header::RETRY_AFTER,
                    HeaderValue::from_static(RETRY_AFTER_SECONDS),
                );
            }
            _ => {}
        }
        response
    }
}

impl From<FieldError> for ApiError {
    fn from(error: FieldError) -> Self {
        ApiError::new(ProblemCode::InvalidField, error.detail).with_field(error.field)
    }
}

impl From<AuthError> for ApiError {
    fn from(error: AuthError) -> Self {
        match error {
            AuthError::Unauthenticated { detail, .. } => {
                ApiError::new(ProblemCode::Unauthenticated, detail)
            }
            AuthError::Forbidden(detail) => ApiError::new(ProblemCode::Forbidden, detail),
            AuthError::Unavailable(detail) => ApiError::new(ProblemCode::Unavailable, detail),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        let refusal = match error {
            StoreError::Refused(refusal) => refusal,
            StoreError::NoMemory => {
                return ApiError::overloaded(
                    "the answers being sent fill their memory (--max-answer-memory)",
                );
            }
            other if other.failure() == Some(FailureKind::Unavailable) => {
                tracing::warn!(error = %other, "database unavailable");
                return ApiError::new(
                    ProblemCode::Unavailable,
                    "the database is unavailable; retry later",
                );
            }
            other => return ApiError::internal(&other),
        };
        let detail = refusal.to_string();
        match refusal {
            Refusal::NotFound { .. } => ApiError::new(ProblemCode::NotFound, detail),
            Refusal::Frozen { current } => {
                ApiError::new(ProblemCode::AlreadyCompleted, detail).with_current(&current)
            }
            Refusal::StaleSequence { .. } | Refusal::SequenceReused { .. } => {
                ApiError::new(ProblemCode::StaleSequence, detail).with_field("sequence")
            }
            Refusal::PodMismatch { ref bound, .. } => {
                tracing::info!(bound, "{detail}");
                ApiError::new(ProblemCode::PodMismatch, detail).with_field("podUid")
            }
            Refusal::NotYetBound { .. } => {
                ApiError::new(ProblemCode::Unavailable, detail).with_field("podUid")
            }
            Refusal::NotExpected { ref expected, .. } => {
                tracing::info!(expected, "{detail}");
                ApiError::new(ProblemCode::NotExpected, detail).with_field("podName")
            }
            Refusal::OutputsTooLarge { .. } => {
                ApiError::new(ProblemCode::InvalidField, detail).with_field("outputs")
            }
            Refusal::InstanceMismatch { .. } => {
                ApiError::new(ProblemCode::InvalidField, detail).with_field("instanceId")
            }
            Refusal::WorkflowMismatch { .. } => {
                ApiError::new(ProblemCode::InvalidField, detail).with_field("workflow")
            }
            Refusal::AlreadyClaimed { current } => {
                ApiError::new(ProblemCode::AlreadyClaimed, detail).with_current(&current)
            }
            Refusal::LeaseLost { current } => {
                ApiError::new(ProblemCode::LeaseLost, detail).with_current(&current)
            }
            // A settled tick is final, as a completed result is frozen.
            Refusal::AlreadySettled { current } => {
                ApiError::new(ProblemCode::AlreadyCompleted, detail).with_current(&current)
            }
            Refusal::NotClaimed { .. } => ApiError::new(ProblemCode::NotFound, detail),
            Refusal::OtherCronWorkflow { .. } => {
                ApiError::new(ProblemCode::InvalidField, detail).with_field("cronWorkflowUid")
            }
            Refusal::Gone {
                revision,
                epoch,
                stale,
                ..
            } => ApiError {
                revision: Some(revision),
                epoch: Some(epoch),
                ..ApiError::new(ProblemCode::Gone, detail).with_field(match stale {
                    Stale::OtherEpoch { .. } => "epoch",
                    Stale::Pruned { .. } | Stale::Ahead => "since",
                })
            },
        }
    }
}
