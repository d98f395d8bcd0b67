//! The workflows that have results, each with what its results add up to: a namespace's,
//! or every namespace's for a reader of all, in pages, so that `argo-results list` is a
//! request or a few, not one per workflow.

use argo_results_proto::schema::Namespace;
use argo_results_proto::{Problem, WorkflowList};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use utoipa::IntoParams;

use super::answer::json;
use super::cursor::{self, Untrusted};
use super::error::ApiResult;
use super::params::{QueryParams, invalid_parameter, limit};
use super::state::AppState;
use crate::auth::{Caller, Verb};
use crate::store::WorkflowQuery;
use crate::validate::{self, dns_label};

const DEFAULT_LIMIT: u32 = 500;
const MAX_LIMIT: u32 = 1000;

#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct WorkflowsParams {
    /// Only this namespace's workflows (every namespace's needs a reader of all).
    #[param(value_type = Option<Namespace>)]
    namespace: Option<String>,
    /// Page size, 1 to 1000 (default 500).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
    /// The `continue` of the previous page.
    #[serde(rename = "continue")]
    #[param(rename = "continue")]
    continue_token: Option<String>,
}

/// Where a page of workflows ends, bound to the namespace it lists.
#[derive(Debug, Serialize, Deserialize)]
struct Cursor {
    namespace: Option<String>,
    after_namespace: String,
    after_uid: String,
}

impl Untrusted for Cursor {
    fn valid(&self) -> bool {
        dns_label("namespace", &self.after_namespace).is_ok()
            && validate::uid("workflowUid", &self.after_uid).is_ok()
    }
}

/// The workflows that have results, ordered by namespace and workflow UID, each
/// incarnation with its results counted by state and by how the ended ones ended.
#[utoipa::path(
    get,
    path = "/api/v1/workflows",
    tag = "results",
    params(WorkflowsParams),
    responses(
        (status = 200, description = "One page, read at `revision`", body = WorkflowList),
        (status = 400, description = "invalid_parameter", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "forbidden: not a reader (of the namespace, or of all without one)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn workflows(
    State(state): State<AppState>,
    caller: Caller,
    QueryParams(params): QueryParams<WorkflowsParams>,
) -> ApiResult<Response> {
    // Checked first: a name that cannot be a namespace is nothing to ask RBAC about.
    if let Some(namespace) = &params.namespace {
        dns_label("namespace", namespace).map_err(invalid_parameter)?;
    }
    state
        .authorize(&caller, Verb::List, params.namespace.as_deref())
        .await?;
    let limit = limit(params.limit, DEFAULT_LIMIT, MAX_LIMIT)?;
    let after = match &params.continue_token {
        Some(token) => {
            let cursor: Cursor = cursor::open(token)?;
            if cursor.namespace != params.namespace {
                return Err(cursor::foreign());
            }
            Some((cursor.after_namespace, cursor.after_uid))
        }
        None => None,
    };
    let page = state
        .store
        .workflows(WorkflowQuery {
            namespace: params.namespace.clone(),
            after,
            limit,
        })
        .await?;
    let continue_token = page.next.map(|(after_namespace, after_uid)| {
        cursor::seal(&Cursor {
            namespace: params.namespace,
            after_namespace,
            after_uid,
        })
    });
    Ok(json(
        StatusCode::OK,
        &WorkflowList {
            items: page.items,
            revision: page.revision,
            epoch: page.epoch,
            continue_token,
        },
    ))
}
