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

/// One node's result (docs/api.md section 1).
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

/// The fields of a [`NodeResult`], `outputs` as its exact text.
type Fields<'a> = (
    (
        &'a str,
        &'a str,
        &'a str,
        &'a str,
        Option<&'a str>,
        Option<&'a str>,
    ),
    (
        Option<&'a str>,
        ResultState,
        Option<&'a str>,
        Option<&'a str>,
        Option<&'a str>,
    ),
    (
        Option<&'a str>,
        Option<i64>,
        i64,
        &'a str,
        &'a str,
        Option<&'a str>,
        Option<&'a str>,
    ),
);

impl NodeResult {
    fn fields(&self) -> Fields<'_> {
        (
            (
                &self.namespace,
                &self.workflow,
                &self.workflow_uid,
                &self.node_id,
                self.pod_name.as_deref(),
                self.pod_uid.as_deref(),
            ),
            (
                self.instance_id.as_deref(),
                self.state,
                self.phase.as_deref(),
                self.message.as_deref(),
                self.progress.as_deref(),
            ),
            (
                self.outputs.as_deref().map(RawValue::get),
                self.sequence,
                self.revision,
                &self.created_at,
                &self.updated_at,
                self.completed_at.as_deref(),
                self.abandon_reason.as_deref(),
            ),
        )
    }
}

/// Equal when every field is, `outputs` compared as the exact text the store keeps.
impl PartialEq for NodeResult {
    fn eq(&self, other: &Self) -> bool {
        self.fields() == other.fields()
    }
}

impl Eq for NodeResult {}

impl std::hash::Hash for NodeResult {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.fields().hash(state);
    }
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
    /// The store's epoch, which `revision` belongs to (absent from servers that predate
    /// epochs).
    #[serde(default)]
    pub epoch: Option<String>,
    pub summary: Summary,
    /// Pass as `continue` to read the next page; `null` on the last page.
    #[serde(rename = "continue")]
    pub continue_token: Option<String>,
}

/// How a workflow's ended results ended: a completed result by its `phase`, else by its
/// outputs' `exitCode` (`"0"` Succeeded, another Failed), else Error, as the controller
/// decides when the pod is gone; an abandoned result counts as Error.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Ended {
    pub succeeded: u64,
    pub failed: u64,
    pub error: u64,
}

/// One incarnation of a workflow that has results: what they add up to.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct WorkflowSummary {
    pub namespace: String,
    pub workflow: String,
    pub workflow_uid: String,
    pub summary: Summary,
    pub ended: Ended,
    /// The oldest result's creation and the newest change, RFC 3339.
    pub created_at: String,
    pub updated_at: String,
    /// The newest revision among its results.
    pub revision: i64,
}

/// One page of the workflows that have results, ordered by namespace and workflow UID,
/// read in one snapshot at `revision`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WorkflowList {
    pub items: Vec<WorkflowSummary>,
    pub revision: i64,
    /// The store's epoch, which `revision` belongs to.
    pub epoch: String,
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
