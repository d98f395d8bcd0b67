//! Probes and metrics, outside `/api/v1` and without a token.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use argo_results_proto::ProblemCode;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::state::AppState;
use crate::metrics::Metrics;
use crate::store::Store;

/// The process is up.
pub async fn healthz() -> &'static str {
    "ok\n"
}

/// Not shutting down, the store answers, the token keys are loaded and the API listener
/// can take a connection (until the store is open, [`super::starting`] answers instead).
/// Anyone may ask, so the answer says only ready or not; why not goes to the log.
pub async fn readyz(State(state): State<AppState>) -> Response {
    let cause = if *state.draining.borrow() {
        "shutting down: Kubernetes should send no more requests here".to_owned()
    } else if state.api_connections.saturated() {
        "every API connection (--max-open-connections) is open and in use: new ones are \
         refused"
            .to_owned()
    } else if state.auth.ready() {
        match state.readiness.store(&state.store).await {
            Ok(()) => return "ready\n".into_response(),
            Err(cause) => cause,
        }
    } else {
        "the token signing keys are not loaded yet".to_owned()
    };
    tracing::warn!(cause, "not ready");
    ApiError::new(ProblemCode::Unavailable, "not ready").into_response()
}

/// How long the store's answer to `/readyz` is kept.
const READINESS_KEPT: Duration = Duration::from_secs(1);

/// The store's answer to `/readyz`, kept for [`READINESS_KEPT`]: anyone may ask, so a flood
/// of probes costs the database a query a second, not one per call (11,787 calls a second
/// cost Postgres 8.3 s of CPU in 11 s).
#[derive(Debug, Default)]
pub struct Readiness(Mutex<Option<(Instant, Result<(), String>)>>);

impl Readiness {
    async fn store(&self, store: &Store) -> Result<(), String> {
        if let Some((asked, answer)) = &*self.0.lock().unwrap_or_else(|e| e.into_inner())
            && asked.elapsed() < READINESS_KEPT
        {
            return answer.clone();
        }
        let answer = store
            .ping()
            .await
            .map_err(|error| format!("the store does not answer: {error}"));
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), answer.clone()));
        answer
    }
}

pub async fn metrics(State(state): State<AppState>) -> Response {
    let head = *state.store.revisions(None).borrow();
    state.metrics.feed_head(head);
    let (open, idle, max) = state.store.pool_usage();
    state.metrics.db_pool(open, idle, max);
    encoded(&state.metrics)
}

/// The metrics in the OpenMetrics text format.
pub fn encoded(metrics: &Metrics) -> Response {
    let mut response = (StatusCode::OK, metrics.encode()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    response
}
