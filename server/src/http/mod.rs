//! The HTTP API's router: the routes, their middleware and the OpenAPI document. One
//! module per resource; what the handlers share is in [`state`], the answers they build in
//! [`answer`], errors turned into problem+json in [`error`].

pub mod admission;
mod answer;
mod answer_memory;
mod audit;
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
mod places;
mod pod_writes;
mod probes;
mod results;
pub mod starting;
mod state;
mod version;
mod whoami;
mod workflows;

pub use admission::Admission;
pub use observe::RefusalLog;
pub use pod_writes::PodWrites;
pub use probes::Readiness;
pub use state::{AppState, Shared};

use std::sync::Arc;

use axum::Router;
use axum::http::header;
use axum::routing::get;
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The API's routes and the OpenAPI document generated from them.
fn api() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    let api = OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .routes(routes!(results::report, results::get))
        .routes(routes!(results::abandon))
        .routes(routes!(results::list, results::delete))
        .routes(routes!(expectations::expect))
        .routes(routes!(workflows::workflows))
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
    .route("/version", get(version::version))
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
