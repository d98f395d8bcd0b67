//! Every request gets a request id (taken from `X-Request-Id` or made here, and returned
//! in it), a log span carrying it and, once known, the namespace, workflow and node, one
//! log line when it ends, and its count and duration by route template. Paths, node IDs,
//! tokens and method names a caller makes up never become metric labels, and headers are
//! never logged.

use std::hash::{BuildHasher, RandomState};
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::{HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tracing::Instrument;

use super::state::AppState;

const REQUEST_ID: &str = "x-request-id";

/// Probes and scrapes: every few seconds from kubelet and Prometheus, logged at DEBUG so
/// that the INFO log is the API's traffic.
const OPERATIONS: [&str; 3] = ["/healthz", "/readyz", "/metrics"];

/// Requests refused `401` given an INFO line in one second, at most.
const REFUSED_LINES_PER_SECOND: u64 = 10;

/// The INFO lines of requests refused `401`, sampled: a stranger without a token must not
/// turn the log over (49,943 such requests a second wrote 9.2 MB/s). Past
/// [`REFUSED_LINES_PER_SECOND`] they go to DEBUG, and their count is logged once the
/// second is over. Callers with a token are logged in full (the audit trail); every
/// refusal is counted in `argo_results_auth_failures_total` either way.
#[derive(Debug, Default)]
pub struct RefusalLog(Mutex<RefusalWindow>);

#[derive(Debug, Default)]
struct RefusalWindow {
    /// The Unix second the counts are of.
    second: u64,
    logged: u64,
    unlogged: u64,
}

impl RefusalLog {
    /// Whether a request's line goes to INFO (`refused`: it was refused `401`); says, once
    /// a second is over, how many refusals of it went to DEBUG.
    fn line(&self, refused: bool) -> bool {
        let second = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let mut window = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if window.second != second {
            if window.unlogged > 0 {
                tracing::info!(
                    unlogged = window.unlogged,
                    "requests refused 401 in a second past the first {REFUSED_LINES_PER_SECOND} \
                     were logged at DEBUG only"
                );
            }
            *window = RefusalWindow {
                second,
                ..RefusalWindow::default()
            };
        }
        if !refused {
            return true;
        }
        if window.logged < REFUSED_LINES_PER_SECOND {
            window.logged += 1;
            true
        } else {
            window.unlogged += 1;
            false
        }
    }
}

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

/// The methods the API serves. hyper accepts any token as a method, so anything else is
/// refused by [`known_method`] before it is counted or logged.
const METHODS: [Method; 5] = [
    Method::GET,
    Method::HEAD,
    Method::PUT,
    Method::POST,
    Method::DELETE,
];

/// The method as a metric label: one of [`METHODS`], else `other` (a known method on a
/// route that does not serve it).
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::PUT => "PUT",
        Method::POST => "POST",
        Method::DELETE => "DELETE",
        _ => "other",
    }
}

/// Refuses a method the API does not serve before anything records it: a caller without
/// a token must not be able to grow the metrics or the log with names it makes up.
pub async fn known_method(request: Request, next: Next) -> Response {
    if METHODS.contains(request.method()) {
        return next.run(request).await;
    }
    super::error::ApiError::new(
        argo_results_proto::ProblemCode::NotFound,
        "no such route: the API serves GET, HEAD, PUT, POST and DELETE; see \
         /api/v1/openapi.json",
    )
    .into_response()
}

pub async fn observe(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let started = Instant::now();
    request.extensions_mut().insert(Arrived(started));
    let id = request_id(&request);
    let method = method_label(request.method());
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
        peer = tracing::field::Empty,
        subject = tracing::field::Empty,
        reason = tracing::field::Empty,
        namespace = tracing::field::Empty,
        workflow = tracing::field::Empty,
        node = tracing::field::Empty,
    );
    let long_poll = request
        .uri()
        .query()
        .is_some_and(|query| query.split('&').any(|pair| pair == "watch=true"));
    if let Some(ConnectInfo(peer)) = request.extensions().get::<ConnectInfo<SocketAddr>>() {
        span.record("peer", tracing::field::display(peer));
    }
    let mut response = next.run(request).instrument(span.clone()).await;
    let status = response.status().as_u16();
    let elapsed = started.elapsed();
    let timed = (!long_poll).then_some(elapsed);
    state.metrics.http_request(&route, method, status, timed);
    // Hundredths of a millisecond: more is noise in a log line.
    let duration_ms = (elapsed.as_secs_f64() * 100_000.0).round() / 100.0;
    let logged = state.refusal_log.line(status == 401);
    span.in_scope(|| {
        if OPERATIONS.contains(&route.as_str()) || !logged {
            tracing::debug!(status, duration_ms, "request finished");
        } else {
            tracing::info!(status, duration_ms, "request finished");
        }
    });
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    response
}
