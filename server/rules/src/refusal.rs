//! Why the rules said no, and the one way a stored row can be unusable.

use argo_results_proto::{Claim, ClaimState, NodeResult};

/// Why the store refused a request. Nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("no result for node {node_id}")]
    NotFound { node_id: String },
    #[error("node {node_id} is {state}; its result is frozen", state = current.state.as_str(), node_id = current.node_id)]
    Frozen { current: Box<NodeResult> },
    #[error("sequence {given} is lower than the stored sequence {stored}")]
    StaleSequence { given: i64, stored: i64 },
    #[error("sequence {given} was already stored with different content")]
    SequenceReused { given: i64 },
    /// The refusal names the pod that asked, never the one the node is bound to: that is
    /// another pod's identity, and the log has it.
    #[error("node {node_id} is bound to another pod; pod UID {given} may not write it")]
    PodMismatch {
        node_id: String,
        bound: String,
        given: String,
    },
    #[error(
        "node {node_id} expects no report from pod {pod}: pods may report only the nodes the \
         controller registered for them (--require-expectation)"
    )]
    NotExpected {
        node_id: String,
        pod: String,
        expected: Option<String>,
    },
    /// Under `--require-expectation`, the pod reports only once the controller named its
    /// UID (right after creating it): a pod of the expected name alone may be an impostor.
    #[error(
        "node {node_id}'s pod UID is not registered yet (the controller registers it right \
         after creating the pod); retry"
    )]
    NotYetBound { node_id: String },
    #[error(
        "outputs merged with the stored ones would be {size} bytes; the limit is {limit} (--max-body-bytes)"
    )]
    OutputsTooLarge { size: usize, limit: usize },
    #[error("the result belongs to controller instance {stored:?}, not {given:?}")]
    InstanceMismatch { stored: String, given: String },
    #[error("workflow UID {workflow_uid} belongs to workflow {stored:?}, not {given:?}")]
    WorkflowMismatch {
        workflow_uid: String,
        stored: String,
        given: String,
    },
    #[error(
        "tick {} of cron workflow {} is {}{}", current.scheduled_time, current.cron_workflow,
        current.state.as_str(),
        match current.state {
            ClaimState::Claimed => format!(" for workflow {} until {}", current.workflow_name, current.lease_expires_at),
            _ => format!(" (workflow {})", current.workflow_name),
        }
    )]
    AlreadyClaimed { current: Box<Claim> },
    #[error(
        "tick {} of cron workflow {} was taken over after this claim's lease expired; its \
         holder now creates workflow {}: stop", current.scheduled_time, current.cron_workflow,
        current.workflow_name
    )]
    LeaseLost { current: Box<Claim> },
    #[error(
        "tick {} of cron workflow {} is already settled as {}; its outcome is final",
        current.scheduled_time, current.cron_workflow, current.state.as_str()
    )]
    AlreadySettled { current: Box<Claim> },
    #[error("tick {scheduled_time} of cron workflow {cron_workflow} was never claimed")]
    NotClaimed {
        cron_workflow: String,
        scheduled_time: String,
    },
    #[error("cron workflow UID {cron_workflow_uid} belongs to another cron workflow")]
    OtherCronWorkflow { cron_workflow_uid: String },
    #[error("{}", gone(*since, stale, *revision, epoch))]
    Gone {
        since: i64,
        stale: Stale,
        /// The store's head, where a reader that listed again goes on.
        revision: i64,
        epoch: String,
    },
}

/// Why a feed reader's position is not in the store's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stale {
    /// Behind what retention kept: history was pruned through `through`.
    Pruned { through: i64 },
    /// Past the store's newest revision.
    Ahead,
    /// Read in another epoch, `given`: the database was restored or replaced since.
    OtherEpoch { given: String },
}

fn gone(since: i64, stale: &Stale, revision: i64, epoch: &str) -> String {
    let why = match stale {
        Stale::Pruned { through } => format!(
            "revision {since} is older than the retained history (pruned through {through})"
        ),
        Stale::Ahead => format!(
            "revision {since} is ahead of the store's newest revision, {revision}: the \
             database was restored or replaced, or the reader is wrong"
        ),
        Stale::OtherEpoch { given } => format!(
            "revision {since} was read in epoch {given}, and the store is in epoch {epoch}: \
             the database was restored or replaced since"
        ),
    };
    format!("{why}; re-list what you keep and resume from revision {revision} of epoch {epoch}")
}

/// A stored row that cannot be read or served (its outputs are not JSON): bad data, not a
/// refusal and not an outage.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Corrupt(pub String);

/// Why one write of a batch wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum Rejected {
    #[error(transparent)]
    Refused(#[from] Refusal),
    #[error(transparent)]
    Corrupt(#[from] Corrupt),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gone_after(since: i64, stale: Stale) -> String {
        Refusal::Gone {
            since,
            stale,
            revision: 7,
            epoch: "e1".into(),
        }
        .to_string()
    }

    #[test]
    fn gone_says_why_and_where_to_resume() {
        assert_eq!(
            gone_after(1, Stale::Pruned { through: 2 }),
            "revision 1 is older than the retained history (pruned through 2); re-list what \
             you keep and resume from revision 7 of epoch e1"
        );
        assert_eq!(
            gone_after(8, Stale::Ahead),
            "revision 8 is ahead of the store's newest revision, 7: the database was restored \
             or replaced, or the reader is wrong; re-list what you keep and resume from \
             revision 7 of epoch e1"
        );
        assert_eq!(
            gone_after(5, Stale::OtherEpoch { given: "e0".into() }),
            "revision 5 was read in epoch e0, and the store is in epoch e1: the database was \
             restored or replaced since; re-list what you keep and resume from revision 7 of \
             epoch e1"
        );
    }
}
