//! Backpressure: at most `--max-in-flight` API requests are served at once; the excess is
//! answered at once with `429 overloaded` and `Retry-After`, and writes nothing, rather
//! than queueing behind the database. A watch waiting for a change holds no database
//! connection and is not counted.

use argo_results_proto::ProblemCode;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::error::ApiError;

fn is_watch(request: &Request) -> bool {
    request
        .uri()
        .query()
        .is_some_and(|query| query.split('&').any(|pair| pair == "watch=true"))
}

pub async fn limit(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if is_watch(&request) {
        return next.run(request).await;
    }
    let Ok(_permit) = state.in_flight.clone().try_acquire_owned() else {
        return ApiError::new(
            ProblemCode::Overloaded,
            "too many requests in flight (--max-in-flight); retry after Retry-After seconds",
        )
        .into_response();
    };
    next.run(request).await
}
