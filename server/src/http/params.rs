//! Path and query parameters, checked against Kubernetes naming before any handler runs.

use argo_results_proto::ProblemCode;
use axum::extract::{FromRequestParts, Path, Query};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::ApiError;
pub use crate::paths::{CronPath, NodePath, WorkflowPath};
use crate::validate::{FieldError, dns_label, dns_subdomain};

/// A path or query parameter that breaks a naming rule.
pub fn invalid_parameter(error: FieldError) -> ApiError {
    ApiError::new(ProblemCode::InvalidParameter, error.detail).with_field(error.field)
}

pub trait CheckNames {
    fn check(&self) -> Result<(), FieldError>;
    /// Adds the names to the request's log span.
    fn record(&self);
}

impl CheckNames for WorkflowPath {
    fn check(&self) -> Result<(), FieldError> {
        dns_label("namespace", &self.namespace)?;
        dns_subdomain("workflow", &self.workflow)
    }

    fn record(&self) {
        let span = tracing::Span::current();
        span.record("namespace", self.namespace.as_str());
        span.record("workflow", self.workflow.as_str());
    }
}

impl CheckNames for NodePath {
    fn check(&self) -> Result<(), FieldError> {
        dns_label("namespace", &self.namespace)?;
        dns_subdomain("workflow", &self.workflow)?;
        dns_subdomain("nodeId", &self.node_id)
    }

    fn record(&self) {
        let span = tracing::Span::current();
        span.record("namespace", self.namespace.as_str());
        span.record("workflow", self.workflow.as_str());
        span.record("node", self.node_id.as_str());
    }
}

impl CheckNames for CronPath {
    fn check(&self) -> Result<(), FieldError> {
        dns_label("namespace", &self.namespace)?;
        dns_subdomain("name", &self.name)
    }

    fn record(&self) {
        let span = tracing::Span::current();
        span.record("namespace", self.namespace.as_str());
        span.record("workflow", self.name.as_str());
    }
}

/// A path whose names were checked.
#[derive(Debug)]
pub struct Names<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + CheckNames + Send> FromRequestParts<S> for Names<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Path(path) = Path::<T>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::new(ProblemCode::InvalidParameter, e.body_text()))?;
        path.check().map_err(invalid_parameter)?;
        path.record();
        Ok(Names(path))
    }
}

/// Query parameters; a malformed one is `400 invalid_parameter`.
#[derive(Debug)]
pub struct QueryParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(query)| QueryParams(query))
            .map_err(|e| ApiError::new(ProblemCode::InvalidParameter, e.body_text()))
    }
}

/// A page size: `default` when absent, at most `max`.
pub fn limit(given: Option<u32>, default: u32, max: u32) -> Result<u32, ApiError> {
    match given {
        None => Ok(default),
        Some(n) if (1..=max).contains(&n) => Ok(n),
        Some(n) => Err(ApiError::new(
            ProblemCode::InvalidParameter,
            format!("limit {n} is not between 1 and {max}"),
        )
        .with_field("limit")),
    }
}
