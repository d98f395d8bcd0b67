//! What the store is asked and what it answers: validated requests, pages and outcomes.

use argo_results_proto::{Claim, NodeResult, ResultState, Summary};

/// Identifies a result: one node of one incarnation of a workflow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultKey {
    pub namespace: String,
    /// The workflow's name, as in the URL; stored beside the UID.
    pub workflow: String,
    pub workflow_uid: String,
    pub node_id: String,
}

/// A validated report from a wait container. `None` fields keep the stored value.
#[derive(Debug, Clone)]
pub struct Report {
    pub pod_name: String,
    pub pod_uid: String,
    pub instance_id: Option<String>,
    pub sequence: Option<i64>,
    pub is_final: bool,
    /// The exact JSON text of `outputs`.
    pub outputs: Option<String>,
    pub progress: Option<String>,
    pub phase: Option<String>,
    pub message: Option<String>,
}

/// A controller's registration of a pod whose result it awaits.
#[derive(Debug, Clone)]
pub struct Expectation {
    pub pod_name: String,
    pub pod_uid: Option<String>,
}

/// A validated cron run claim.
#[derive(Debug, Clone)]
pub struct NewClaim {
    pub namespace: String,
    pub cron_workflow: String,
    pub cron_workflow_uid: String,
    pub scheduled_millis: i64,
    pub workflow_name: String,
    pub lease_millis: i64,
}

/// How the holder settles a tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    Submitted { workflow_uid: String },
    Skipped { reason: String },
}

/// A validated settle of a claimed tick by the holder of `claim_id`.
#[derive(Debug, Clone)]
pub struct Settlement {
    pub namespace: String,
    pub cron_workflow: String,
    pub cron_workflow_uid: String,
    pub scheduled_millis: i64,
    pub claim_id: String,
    pub outcome: Settled,
}

/// One page of a cron workflow's claims, newest scheduled time first.
#[derive(Debug, Clone)]
pub struct ClaimQuery {
    pub namespace: String,
    pub cron_workflow: String,
    /// `None`: every incarnation of the name.
    pub cron_workflow_uid: Option<String>,
    /// Start after this claim (scheduled time, cron workflow UID).
    pub after: Option<(i64, String)>,
    pub limit: u32,
}

#[derive(Debug)]
pub struct ClaimPage {
    pub items: Vec<Claim>,
    /// The newest settled tick of the query, in Unix milliseconds.
    pub last_scheduled: Option<i64>,
    /// Where the next page starts, when more items follow.
    pub next: Option<(i64, String)>,
}

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The row did not exist before.
    Created,
    /// The row changed under a new revision.
    Updated,
    /// Nothing changed: an idempotent replay.
    Unchanged,
}

/// The stored result after a write, and what the write did.
#[derive(Debug)]
pub struct Written {
    pub result: NodeResult,
    pub outcome: Outcome,
}

/// One page of a workflow's results.
#[derive(Debug, Clone)]
pub struct ListQuery {
    pub namespace: String,
    pub workflow: String,
    /// `None`: the newest incarnation of the workflow name.
    pub workflow_uid: Option<String>,
    pub state: Option<ResultState>,
    /// Start after this node ID.
    pub after: Option<String>,
    pub limit: u32,
}

#[derive(Debug)]
pub struct ResultPage {
    /// Each item's JSON text as the API serves it: measured against the page's byte
    /// budget as it is read, it is not serialized a second time.
    pub items: Vec<String>,
    /// The node ID of the last item, where the next page starts.
    pub last_node_id: Option<String>,
    pub revision: i64,
    pub summary: Summary,
    /// The incarnation listed, when the workflow has results.
    pub workflow_uid: Option<String>,
    /// More items follow the last one.
    pub more: bool,
}

/// Changes after a revision, each already serialized as the feed serves it.
#[derive(Debug)]
pub struct FeedChunk {
    pub items: Vec<String>,
    pub revision: i64,
}

/// The times before which retention removes each kind of row (Unix milliseconds).
#[derive(Debug, Clone, Copy)]
pub struct PruneBefore {
    pub changes: i64,
    pub results: i64,
    pub claims: i64,
}

/// What one retention pass removed.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pruned {
    pub results: u64,
    pub changes: u64,
    pub claims: u64,
}
