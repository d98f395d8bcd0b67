//! `continue` tokens of the lists: opaque to clients, bound to the query they came from, and
//! keyed on the last item (a workflow's node ID here; a claim's tick in `cron`), so pages
//! stay stable while writes go on.

use argo_results_proto::ProblemCode;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use crate::validate;

/// A position in a list as an opaque token.
pub fn seal(position: &impl Serialize) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(position).unwrap_or_default())
}

/// A position read from a token, which a client may have forged: the parts that reach the
/// database without being compared to the query are checked like parameters (Postgres
/// answers NUL in text with an error, SQLite would take it).
pub trait Untrusted: DeserializeOwned {
    fn valid(&self) -> bool;
}

/// The position a token of [`seal`] holds, or `invalid_parameter` naming `continue`.
pub fn open<T: Untrusted>(token: &str) -> Result<T, ApiError> {
    URL_SAFE_NO_PAD
        .decode(token)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<T>(&bytes).ok())
        .filter(T::valid)
        .ok_or_else(|| invalid("not a continue token of this server"))
}

/// A token of another query than the one it is sent with.
pub fn foreign() -> ApiError {
    invalid("the continue token belongs to another query; repeat that query's parameters")
}

fn invalid(detail: &str) -> ApiError {
    ApiError::new(ProblemCode::InvalidParameter, detail).with_field("continue")
}

#[derive(Debug, Serialize, Deserialize)]
struct Cursor {
    namespace: String,
    workflow: String,
    workflow_uid: String,
    state: Option<String>,
    after: String,
}

impl Untrusted for Cursor {
    fn valid(&self) -> bool {
        validate::uid("workflowUid", &self.workflow_uid).is_ok()
            && validate::dns_subdomain("nodeId", &self.after).is_ok()
    }
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
    seal(&cursor)
}

/// Returns the incarnation and node ID to continue after, refusing a token of another query.
pub fn decode(
    token: &str,
    query: &PageQuery<'_>,
    workflow_uid: Option<&str>,
) -> Result<(String, String), ApiError> {
    let cursor: Cursor = open(token)?;
    let same_query = cursor.namespace == query.namespace
        && cursor.workflow == query.workflow
        && cursor.state.as_deref() == query.state
        && workflow_uid.is_none_or(|uid| uid == cursor.workflow_uid);
    if !same_query {
        return Err(foreign());
    }
    Ok((cursor.workflow_uid, cursor.after))
}
