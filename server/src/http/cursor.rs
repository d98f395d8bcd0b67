//! `continue` tokens of the workflow list: opaque to clients, bound to the query they came
//! from, and keyed on the last node ID so pages stay stable while writes go on.

use argo_results_proto::ProblemCode;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

use super::error::ApiError;

#[derive(Debug, Serialize, Deserialize)]
struct Cursor {
    namespace: String,
    workflow: String,
    workflow_uid: String,
    state: Option<String>,
    after: String,
}

/// The query a page answers.
#[derive(Debug)]
pub struct PageQuery<'a> {
    pub namespace: &'a str,
    pub workflow: &'a str,
    pub state: Option<&'a str>,
}

pub fn encode(query: &PageQuery<'_>, workflow_uid: &str, after: &str) -> String {
    let cursor = Cursor {
        namespace: query.namespace.to_owned(),
        workflow: query.workflow.to_owned(),
        workflow_uid: workflow_uid.to_owned(),
        state: query.state.map(str::to_owned),
        after: after.to_owned(),
    };
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(&cursor).unwrap_or_default())
}

/// Returns the incarnation and node ID to continue after, refusing a token of another query.
pub fn decode(
    token: &str,
    query: &PageQuery<'_>,
    workflow_uid: Option<&str>,
) -> Result<(String, String), ApiError> {
    let invalid = |detail: &str| {
        Err(ApiError::new(ProblemCode::InvalidParameter, detail).with_field("continue"))
    };
    let Some(cursor) = URL_SAFE_NO_PAD
        .decode(token)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Cursor>(&bytes).ok())
    else {
        return invalid("not a continue token of this server");
    };
    let same_query = cursor.namespace == query.namespace
        && cursor.workflow == query.workflow
        && cursor.state.as_deref() == query.state
        && workflow_uid.is_none_or(|uid| uid == cursor.workflow_uid);
    if !same_query {
        return invalid(
            "the continue token belongs to another query; repeat that query's parameters",
        );
    }
    Ok((cursor.workflow_uid, cursor.after))
}
