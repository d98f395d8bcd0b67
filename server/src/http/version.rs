//! `GET /version`, without a token, as kube-apiserver serves it: what `argo-results
//! version` shows beside its own release, so that a client and a server of different
//! releases are told apart before anything else is tried.

use argo_results_proto::{PROTOCOL_VERSION, Version};
use axum::http::StatusCode;
use axum::response::Response;

use super::answer::json;

pub async fn version() -> Response {
    json(
        StatusCode::OK,
        &Version {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            protocol_version: PROTOCOL_VERSION,
        },
    )
}
