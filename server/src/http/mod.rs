//! The HTTP API: one module per resource, errors turned into problem+json in [`error`].

mod admission;
mod answers;
mod body;
mod caller;
mod cron;
mod cursor;
pub mod error;
mod expectations;
mod feed;
mod observe;
mod openapi;
mod params;
mod pod_writes;

pub use admission::Admission;
pub use pod_writes::PodWrites;
mod probes;
mod results;
pub mod starting;
mod whoami;

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Serialize;
use tokio::sync::watch;
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::{AuthError, Authenticator, Caller, Verb};
use crate::metrics::Metrics;
use crate::store::{Outcome, Store, Written};
use crate::validate::Limits;

/// What the handlers share. Axum clones it for each request and each middleware, so it
/// is one `Arc` to clone.
#[derive(Debug, Clone)]
pub struct AppState(Arc<Shared>);

impl AppState {
    pub fn new(shared: Shared) -> Self {
        AppState(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

#[derive(Debug)]
pub struct Shared {
    pub store: Arc<Store>,
    pub auth: Authenticator,
    pub metrics: Arc<Metrics>,
    pub limits: Limits,
    /// Turns `true` when the server starts shutting down; long polls end early then.
    pub stopping: watch::Receiver<bool>,
    /// What API requests may hold: slots in flight, watches, body memory.
    pub admission: Admission,
    /// What each pod may still change (`--pod-write-budget`).
    pub pod_writes: PodWrites,
    /// The API listener's connections: readiness fails while they are all in use.
    pub api_connections: crate::listener::Guard,
}

impl AppState {
    /// Counts a refusal by its reason on the way out.
    fn counted<T>(&self, decided: Result<T, AuthError>) -> Result<T, AuthError> {
        if let Err(error) = &decided {
            self.metrics.auth_failure(error.reason());
        }
        decided
    }

    /// Allows `verb` on results in `namespace` (`None`: all namespaces) or refuses.
    async fn authorize(
        &self,
        caller: &Caller,
        verb: Verb,
        namespace: Option<&str>,
    ) -> Result<(), AuthError> {
        self.counted(self.auth.authorize(caller, verb, namespace).await)
    }
}

fn json(status: StatusCode, value: &impl Serialize) -> Response {
    match serde_json::to_vec(value) {
        Ok(body) => json_text(status, body),
        Err(e) => unserializable(e),
    }
}

/// An answer whose body is JSON text already.
fn json_text(status: StatusCode, mut body: Vec<u8>) -> Response {
    // A final newline keeps curl output readable; JSON readers ignore it.
    body.push(b'\n');
    let mut response = (status, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn unserializable(e: serde_json::Error) -> Response {
    error::ApiError::new(
        argo_results_proto::ProblemCode::Internal,
        format!("could not serialize the answer: {e}"),
    )
    .into_response()
}

/// A `200` page: `items`, whose members are JSON texts already (written in, not parsed
/// again), then the members of `rest`, an object. The items are sent as they are, one
/// piece each, never copied into one text: a page of 8 MiB takes 8 MiB.
fn page(items: Vec<String>, after_items: &impl Serialize) -> Response {
    let rest = match serde_json::to_string(after_items) {
        Ok(rest) => rest,
        Err(e) => return unserializable(e),
    };
    // `rest` is `{...}`: its members follow the items'.
    let tail = match rest.strip_prefix('{') {
        Some("}") | None => "]}\n".to_owned(),
        Some(members) => format!("],{members}\n"),
    };
    let mut pieces = Vec::with_capacity(2 * items.len() + 2);
    pieces.push(Bytes::from_static(b"{\"items\":["));
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            pieces.push(Bytes::from_static(b","));
        }
        pieces.push(Bytes::from(item));
    }
    pieces.push(Bytes::from(tail));
    let stream =
        futures_util::stream::iter(pieces.into_iter().map(Ok::<_, std::convert::Infallible>));
    let mut response = (StatusCode::OK, Body::from_stream(stream)).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// `201` for a row's first write, `200` otherwise, with the stored result.
fn written_answer(written: Written) -> Response {
    let status = match written.outcome {
        Outcome::Created => StatusCode::CREATED,
        Outcome::Updated | Outcome::Unchanged => StatusCode::OK,
    };
    json(status, &written.result)
}

/// The API's routes and the OpenAPI document generated from them.
fn api() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    let api = OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .routes(routes!(results::report, results::get))
        .routes(routes!(results::abandon))
        .routes(routes!(results::list, results::delete))
        .routes(routes!(expectations::expect))
        .routes(routes!(feed::feed))
        .routes(routes!(cron::claim, cron::claims))
        .routes(routes!(cron::settle))
        .routes(routes!(whoami::whoami));
    let (router, mut document) = api.split_for_parts();
    openapi::CommonResponses.modify(&mut document);
    (router, document)
}

/// The OpenAPI 3.1 document, as served at `/api/v1/openapi.json` and committed as
/// `proto/openapi.json`.
pub fn openapi_json() -> String {
    api().1.to_pretty_json().unwrap_or_default() + "\n"
}

/// Every route, the OpenAPI document included; `/metrics` only when it has no listener of
/// its own (`--metrics-listen`), which workflow pods cannot reach.
pub fn router(state: AppState, with_metrics: bool) -> Router {
    let (api, _) = api();
    let document = Arc::new(openapi_json());
    let operations = if with_metrics { operations() } else { probes() };
    api.route_layer(axum::middleware::from_fn_with_state(
        state.clone(),
        admission::admit,
    ))
    .route(
        "/api/v1/openapi.json",
        get(move || {
            let document = Arc::clone(&document);
            async move {
                (
                    [(header::CONTENT_TYPE, "application/json")],
                    document.to_string(),
                )
            }
        }),
    )
    .merge(operations)
    .route_layer(axum::middleware::from_fn_with_state(
        state.clone(),
        observe::observe,
    ))
    .fallback(not_found)
    .layer(axum::middleware::from_fn(observe::known_method))
    .with_state(state)
}

/// Probes and metrics alone, for `--metrics-listen`.
pub fn operations_router(state: AppState) -> Router {
    operations()
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            observe::observe,
        ))
        .fallback(not_found)
        .layer(axum::middleware::from_fn(observe::known_method))
        .with_state(state)
}

fn probes() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(probes::healthz))
        .route("/readyz", get(probes::readyz))
}

fn operations() -> Router<AppState> {
    probes().route("/metrics", get(probes::metrics))
}

async fn not_found() -> error::ApiError {
    error::ApiError::new(
        argo_results_proto::ProblemCode::NotFound,
        "no such route; see /api/v1/openapi.json",
    )
}
