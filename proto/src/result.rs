use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// Where a node's result stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum ResultState {
    /// The controller registered the node; nothing reported yet.
    Expected,
    /// At least one non-final report arrived.
    Reporting,
    /// The final report arrived; frozen from then on.
    Completed,
    /// The controller gave up on the node; frozen from then on.
    Abandoned,
}

impl ResultState {
    pub const ALL: [ResultState; 4] = [
        ResultState::Expected,
        ResultState::Reporting,
        ResultState::Completed,
        ResultState::Abandoned,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ResultState::Expected => "expected",
            ResultState::Reporting => "reporting",
            ResultState::Completed => "completed",
            ResultState::Abandoned => "abandoned",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.as_str() == s)
    }

    /// Completed and abandoned results accept no further change.
    pub fn is_frozen(self) -> bool {
        matches!(self, ResultState::Completed | ResultState::Abandoned)
    }
}

/// One node's result (API section 1).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct NodeResult {
    pub namespace: String,
    pub workflow: String,
    pub workflow_uid: String,
    pub node_id: String,
    pub pod_name: Option<String>,
    pub pod_uid: Option<String>,
    pub instance_id: Option<String>,
    pub state: ResultState,
    pub phase: Option<String>,
    pub message: Option<String>,
    pub progress: Option<String>,
    /// Argo's `Outputs`, exactly as the wait container sent it.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub outputs: Option<Box<RawValue>>,
    pub sequence: Option<i64>,
    pub revision: i64,
    pub created_at: String,
    pub updated_at: String,
    pub completed_at: Option<String>,
    pub abandon_reason: Option<String>,
}

/// Count of a workflow's results in each state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Summary {
    pub expected: u64,
    pub reporting: u64,
    pub completed: u64,
    pub abandoned: u64,
}

/// One page of a workflow's results, ordered by `nodeId`, with the summary taken in the same
/// snapshot at `revision`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ResultList {
    pub items: Vec<NodeResult>,
    pub revision: i64,
    pub summary: Summary,
    /// Pass as `continue` to read the next page; `null` on the last page.
    #[serde(rename = "continue")]
    pub continue_token: Option<String>,
}

/// Answer to a workflow's garbage collection.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeleteResponse {
    pub deleted: u64,
}
