//! Every request gets a request id (taken from `X-Request-Id` or made here, and returned
//! in it), a log span carrying it and, once known, the namespace, workflow and node, one
//! log line when it ends, and its count and duration by route template. Paths, node IDs
//! and tokens never become metric labels, and headers are never logged.

use std::hash::{BuildHasher, RandomState};
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

use super::AppState;

const REQUEST_ID: &str = "x-request-id";

/// When the request arrived, for handlers that time what follows.
#[derive(Debug, Clone, Copy)]
pub struct Arrived(pub Instant);

/// A caller's id if it is a sane one, else a new random one.
fn request_id(request: &Request) -> String {
    request
        .headers()
        .get(REQUEST_ID)
        .and_then(|value| value.to_str().ok())
        .filter(|id| !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_graphic()))
        .map(str::to_owned)
        .unwrap_or_else(|| format!("{:016x}", RandomState::new().hash_one(Instant::now())))
}

pub async fn observe(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let started = Instant::now();
    request.extensions_mut().insert(Arrived(started));
    let id = request_id(&request);
    let method = request.method().clone();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |path| path.as_str())
        .to_owned();
    let span = tracing::info_span!(
        "request",
        request_id = %id,
        method = %method,
        route = %route,
        namespace = tracing::field::Empty,
        workflow = tracing::field::Empty,
        node = tracing::field::Empty,
    );
    let mut response = next.run(request).instrument(span.clone()).await;
    let status = response.status().as_u16();
    let elapsed = started.elapsed();
    state
        .metrics
        .http_request(&route, method.as_str(), status, elapsed);
    span.in_scope(|| {
        tracing::info!(
            status,
            duration_ms = elapsed.as_secs_f64() * 1000.0,
            "request finished"
        );
    });
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    response
}
