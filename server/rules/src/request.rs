//! What the store is asked to decide: validated requests, and what a write did.

use argo_results_proto::NodeResult;

/// Identifies a result: one node of one incarnation of a workflow.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResultKey {
    pub namespace: String,
    /// The workflow's name, as in the URL; stored beside the UID.
    pub workflow: String,
    pub workflow_uid: String,
    pub node_id: String,
}

/// A validated report from a wait container. `None` fields keep the stored value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
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
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Expectation {
    pub pod_name: String,
    pub pod_uid: Option<String>,
}

/// A validated cron run claim.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NewClaim {
    pub namespace: String,
    pub cron_workflow: String,
    pub cron_workflow_uid: String,
    pub scheduled_millis: i64,
    pub workflow_name: String,
    pub lease_millis: i64,
}

/// How the holder settles a tick.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Settled {
    Submitted { workflow_uid: String },
    Skipped { reason: String },
}

/// A validated settle of a claimed tick by the holder of `claim_id`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Settlement {
    pub namespace: String,
    pub cron_workflow: String,
    pub cron_workflow_uid: String,
    pub scheduled_millis: i64,
    pub claim_id: String,
    pub outcome: Settled,
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
