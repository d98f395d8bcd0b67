//! What the store is asked to read and what it answers: queries and pages.

use argo_results_proto::{Claim, ResultState, Summary, WorkflowSummary};

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
    /// The epoch `revision` belongs to.
    pub epoch: String,
    pub summary: Summary,
    /// The incarnation listed, when the workflow has results.
    pub workflow_uid: Option<String>,
    /// More items follow the last one.
    pub more: bool,
}

/// One page of the workflows that have results.
#[derive(Debug, Clone)]
pub struct WorkflowQuery {
    /// `None`: every namespace.
    pub namespace: Option<String>,
    /// Start after this workflow (namespace, workflow UID).
    pub after: Option<(String, String)>,
    pub limit: u32,
}

#[derive(Debug)]
pub struct WorkflowPage {
    pub items: Vec<WorkflowSummary>,
    pub revision: i64,
    /// The epoch `revision` belongs to.
    pub epoch: String,
    /// Where the next page starts, when more items follow.
    pub next: Option<(String, String)>,
}

/// Changes after a revision, each already serialized as the feed serves it.
#[derive(Debug)]
pub struct FeedChunk {
    pub items: Vec<String>,
    pub revision: i64,
    /// The epoch `revision` belongs to.
    pub epoch: String,
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
