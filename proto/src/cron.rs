use serde::{Deserialize, Serialize};

/// `POST .../cronworkflows/{name}/runs`: claim one scheduled tick before submitting its workflow.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimRequest {
    pub cron_workflow_uid: String,
    /// RFC 3339; stored and returned in UTC.
    pub scheduled_time: String,
    pub workflow_name: String,
}

/// A claimed tick of a cron workflow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Claim {
    pub namespace: String,
    pub cron_workflow: String,
    pub cron_workflow_uid: String,
    pub scheduled_time: String,
    pub workflow_name: String,
    pub claimed_at: String,
}

/// A cron workflow's claims, newest scheduled time first.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ClaimList {
    pub items: Vec<Claim>,
    pub last_scheduled_time: Option<String>,
}
