//! Answers the handlers build: JSON, pages whose items are JSON texts already, and the
//! status of a write.

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::error::ApiError;
use crate::store::{Outcome, Written};

pub(super) fn json(status: StatusCode, value: &impl Serialize) -> Response {
    match serde_json::to_vec(value) {
        Ok(body) => json_text(status, body),
        Err(e) => unserializable(e),
    }
}

/// An answer whose body is JSON text already.
pub(super) fn json_text(status: StatusCode, mut body: Vec<u8>) -> Response {
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
    ApiError::new(
        argo_results_proto::ProblemCode::Internal,
        format!("could not serialize the answer: {e}"),
    )
    .into_response()
}

/// A `200` page: `items`, whose members are JSON texts already (written in, not parsed
/// again), then the members of `rest`, an object. The items are sent as they are, one
/// piece each, never copied into one text: a page of 8 MiB takes 8 MiB.
pub(super) fn page(items: Vec<String>, after_items: &impl Serialize) -> Response {
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
pub(super) fn written_answer(written: Written) -> Response {
    let status = match written.outcome {
        Outcome::Created => StatusCode::CREATED,
        Outcome::Updated | Outcome::Unchanged => StatusCode::OK,
    };
    json(status, &written.result)
}
