use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use crate::schema::{ObjectName, Uid};

/// `POST .../cronworkflows/{name}/runs`: claim one scheduled tick, with a lease, before
/// creating its workflow.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimRequest {
    #[cfg_attr(feature = "openapi", schema(value_type = Uid))]
    pub cron_workflow_uid: String,
    /// RFC 3339; stored and returned in UTC.
    #[cfg_attr(feature = "openapi", schema(format = DateTime))]
    pub scheduled_time: String,
    /// The workflow to create (Argo: `<cron>-<unix scheduled time>`). A claim taken over
    /// keeps the first claimant's name.
    #[cfg_attr(feature = "openapi", schema(value_type = ObjectName))]
    pub workflow_name: String,
    /// How long the claim is held without being settled before another claimant may take
    /// it over: 5 to 3600, default 60.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 5, maximum = 3600))]
    pub lease_seconds: Option<i64>,
}

/// Where a tick stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum ClaimState {
    /// Held under a lease; not run yet as far as anyone knows.
    Claimed,
    /// Settled: the workflow exists.
    Submitted,
    /// Settled: the holder decided not to run the tick.
    Skipped,
}

impl ClaimState {
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimState::Claimed => "claimed",
            ClaimState::Submitted => "submitted",
            ClaimState::Skipped => "skipped",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "claimed" => Some(ClaimState::Claimed),
            "submitted" => Some(ClaimState::Submitted),
            "skipped" => Some(ClaimState::Skipped),
            _ => None,
        }
    }
}

/// What the holder of a claim did with its tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum SettleOutcome {
    /// The workflow was created, or Kubernetes answered `AlreadyExists`: `workflowUid`.
    Submitted,
    /// The tick is not run (e.g. `concurrencyPolicy: Forbid`): `reason`.
    Skipped,
}

/// `POST .../cronworkflows/{name}/runs/settle`: the holder records what it did. Its
/// OpenAPI schema is `schema.rs`'s: one shape per outcome.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SettleRequest {
    pub cron_workflow_uid: String,
    pub scheduled_time: String,
    /// The `claimId` of the holder's `201`.
    pub claim_id: String,
    pub outcome: SettleOutcome,
    /// Required with `submitted`, refused with `skipped`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_uid: Option<String>,
    /// Required with `skipped`, refused with `submitted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A claimed tick of a cron workflow. Times are the database's clock, shared by every
/// replica.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Claim {
    pub namespace: String,
    pub cron_workflow: String,
    pub cron_workflow_uid: String,
    pub scheduled_time: String,
    pub workflow_name: String,
    pub state: ClaimState,
    /// The holder's proof, handed out only in the claim's `201` and the holder's settle
    /// answers; never in lists or in another claimant's `409`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_id: Option<String>,
    /// When the current holder claimed (a takeover starts a new lease).
    pub claimed_at: String,
    pub lease_expires_at: String,
    /// An earlier holder's lease expired unsettled and this tick was taken over.
    pub taken_over: bool,
    #[serde(default)]
    pub settled_at: Option<String>,
    /// The workflow that ran the tick (`submitted`).
    #[serde(default)]
    pub workflow_uid: Option<String>,
    /// Why the tick was not run (`skipped`).
    #[serde(default)]
    pub reason: Option<String>,
}

/// A page of a cron workflow's claims, newest scheduled time first.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ClaimList {
    pub items: Vec<Claim>,
    /// The newest settled tick (`submitted` or `skipped`); a claim still held, or whose
    /// lease expired unsettled, has not run yet.
    pub last_scheduled_time: Option<String>,
    /// Pass as `continue` to read the next page; `null` on the last page.
    #[serde(rename = "continue", default)]
    pub continue_token: Option<String>,
}
