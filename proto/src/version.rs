//! `GET /version`: which release a server runs, as kube-apiserver's `/version` says it.

use serde::{Deserialize, Serialize};

/// The server's release and the report protocol it speaks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Version {
    /// The release, as `argo-results-server --version` prints it (e.g. `0.1.0`).
    pub version: String,
    /// The report protocol version it understands ([`crate::PROTOCOL_VERSION`]).
    pub protocol_version: u32,
}
