use serde::{Deserialize, Serialize};

/// What a caller may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// A step's pod: may report its own node's result.
    Pod,
    /// May read every result, the feed and the claims.
    Reader,
    /// A reader that may also register expectations, abandon, delete and claim cron runs.
    Controller,
}

/// The pod a token is bound to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PodRef {
    pub name: String,
    pub uid: String,
}

/// `GET /api/v1/whoami`: who the server thinks the caller is.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Whoami {
    pub subject: String,
    pub namespace: Option<String>,
    pub pod: Option<PodRef>,
    pub roles: Vec<Role>,
}
