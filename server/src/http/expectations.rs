//! The controller registers each pod's expected result, so that "not reported yet" can
//! never read as "nothing expected".

use argo_results_proto::{ExpectationRequest, NodeResult, Problem};
use axum::Extension;
use axum::extract::State;
use axum::response::Response;

use super::admission::Slot;
use super::answer::written_answer;
use super::audit;
use super::body::JsonBody;
use super::error::ApiResult;
use super::params::{Names, NodePath};
use super::places;
use super::state::AppState;
use crate::auth::{Caller, Verb};
use crate::store::{Expectation, ResultKey};
use crate::validate;

/// Register that a node's result is expected; a new pod UID resets a live result for the
/// restarted pod.
#[utoipa::path(
    put,
    path = "/api/v1/namespaces/{namespace}/workflows/{workflow}/nodes/{nodeId}/expectation",
    tag = "controller",
    params(NodePath),
    request_body = ExpectationRequest,
    responses(
        (status = 201, description = "Registered", body = NodeResult),
        (status = 200, description = "Already registered, or reset for a new pod UID", body = NodeResult),
        (status = 400, description = "invalid_json, unknown_field, invalid_parameter", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "forbidden: not a controller", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "already_completed: a frozen result cannot move to another pod", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "invalid_field", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn expect(
    State(state): State<AppState>,
    caller: Caller,
    Names(path): Names<NodePath>,
    Extension(slot): Extension<Slot>,
    JsonBody(body): JsonBody<ExpectationRequest>,
) -> ApiResult<Response> {
    state
        .authorize(&caller, Verb::Create, Some(&path.namespace))
        .await?;
    validate::expectation(&body)?;
    let _waiting = places::wait_for_writer(&state, &caller, &slot, &path.namespace).await?;
    let key = ResultKey {
        namespace: path.namespace,
        workflow: path.workflow,
        workflow_uid: body.workflow_uid,
        node_id: path.node_id,
    };
    let expectation = Expectation {
        pod_name: body.pod_name,
        pod_uid: body.pod_uid,
    };
    let written = state.store.expect(key, expectation).await?;
    audit::result("registered a node's expected result", &written);
    Ok(written_answer(written))
}
