//! The change feed: every change after a revision, in commit order, optionally long-polled.

use std::time::Duration;

use argo_results_proto::schema::Namespace;
use argo_results_proto::{FeedPage, Problem, ProblemCode};
use axum::Extension;
use axum::extract::State;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use utoipa::IntoParams;

use super::admission::Slot;
use super::error::{ApiError, ApiResult};
use super::params::{QueryParams, invalid_parameter, limit};
use super::places;
use super::state::AppState;
use crate::auth::{Caller, Verb};
use crate::store::FeedChunk;
use crate::validate::dns_label;

const FEED_DEFAULT_LIMIT: u32 = 500;
const FEED_MAX_LIMIT: u32 = 1000;
const DEFAULT_WAIT_SECONDS: u64 = 30;
const MAX_WAIT_SECONDS: u64 = 300;

#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct FeedParams {
    /// Changes with a revision above this one (default 0: from the start).
    #[param(minimum = 0)]
    since: Option<i64>,
    /// Only this namespace's changes.
    #[param(value_type = Option<Namespace>)]
    namespace: Option<String>,
    /// At most this many changes, 1 to 1000 (default 500).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
    /// Wait for the next change when there is none yet.
    watch: Option<bool>,
    /// How long `watch` waits, 1 to 300 seconds (default 30).
    #[param(minimum = 1, maximum = 300)]
    timeout_seconds: Option<u64>,
    /// The epoch `since` was read in (the `epoch` of the page or list it came from): when
    /// it is not the store's, the database was restored or replaced since, and the answer
    /// is `410 gone`.
    #[param(max_length = 64)]
    epoch: Option<String>,
}

/// FeedPage's members after its items.
#[derive(Serialize)]
struct AfterItems {
    revision: i64,
    epoch: String,
}

/// The answer, noted in the controller's read metrics when the caller may act as the
/// controller (the alert "a controller is not reading" watches them).
fn answer(state: &AppState, controller: bool, chunk: FeedChunk) -> Response {
    if controller {
        state.metrics.controller_read(chunk.revision);
    }
    page(chunk)
}

fn page(chunk: FeedChunk) -> Response {
    super::answer::page(
        chunk.items,
        &AfterItems {
            revision: chunk.revision,
            epoch: chunk.epoch,
        },
    )
}

/// Every change with a revision above `since`, oldest first, then the revision to resume from.
#[utoipa::path(
    get,
    path = "/api/v1/results",
    tag = "results",
    params(FeedParams),
    responses(
        (status = 200, description = "Changes in revision order", body = FeedPage),
        (status = 400, description = "invalid_parameter", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "forbidden: not a reader", body = Problem, content_type = "application/problem+json"),
        (status = 410, description = "gone: since is not in the retained history of the store's epoch (pruned, ahead of the head, or read in another epoch); re-list and resume from revision and epoch", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "overloaded: too many requests in flight, or too many watches waiting (--max-watches); retry after Retry-After seconds", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn feed(
    State(state): State<AppState>,
    Extension(slot): Extension<Slot>,
    caller: Caller,
    QueryParams(params): QueryParams<FeedParams>,
) -> ApiResult<Response> {
    // Checked first: a name that cannot be a namespace is nothing to ask RBAC about.
    if let Some(namespace) = &params.namespace {
        dns_label("namespace", namespace).map_err(invalid_parameter)?;
    }
    state
        .authorize(&caller, Verb::List, params.namespace.as_deref())
        .await?;
    let since = params.since.unwrap_or(0);
    if since < 0 {
        return Err(
            ApiError::new(ProblemCode::InvalidParameter, "since must be 0 or more")
                .with_field("since"),
        );
    }
    let wait = match params.timeout_seconds {
        None => DEFAULT_WAIT_SECONDS,
        Some(seconds) if (1..=MAX_WAIT_SECONDS).contains(&seconds) => seconds,
        Some(seconds) => {
            return Err(ApiError::new(
                ProblemCode::InvalidParameter,
                format!("timeoutSeconds {seconds} is not between 1 and {MAX_WAIT_SECONDS}"),
            )
            .with_field("timeoutSeconds"));
        }
    };
    let limit = limit(params.limit, FEED_DEFAULT_LIMIT, FEED_MAX_LIMIT)?;
    let namespace = params.namespace.as_deref();
    let controller = slot.begin_page(&state, &caller, namespace).await;
    let deadline = Instant::now() + Duration::from_secs(wait);
    let mut revisions = state.store.revisions(params.namespace.as_deref());
    let mut stopping = state.stopping.clone();
    let mut watch = None;
    loop {
        // Marked seen before reading, so a commit landing after the read still wakes us.
        revisions.borrow_and_update();
        let chunk = state
            .store
            .feed(
                since,
                params.epoch.clone(),
                params.namespace.clone(),
                limit,
                &slot,
            )
            .await?;
        if !chunk.items.is_empty() || !params.watch.unwrap_or(false) {
            return Ok(answer(&state, controller, chunk));
        }
        if watch.is_none() {
            let watches = state.admission.watches();
            watch = Some(places::take(watches, &state, &caller, namespace).await?);
        }
        // Waiting holds no database connection, so it holds no slot in flight either.
        slot.release();
        let _waiting = state.metrics.watching();
        let woke = tokio::select! {
            woke = tokio::time::timeout_at(deadline, revisions.changed()) => {
                matches!(woke, Ok(Ok(())))
            }
            _ = stopping.wait_for(|stopping| *stopping) => false,
        };
        if !woke {
            return Ok(answer(&state, controller, chunk));
        }
        // Overloaded: nothing new is a true answer, and the reader asks again.
        if !slot.retake() {
            return Ok(answer(&state, controller, chunk));
        }
    }
}
