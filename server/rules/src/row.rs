//! A stored result row and its API form.

use argo_results_proto::{NodeResult, ResultState};
use serde_json::value::RawValue;

use crate::clock::format_millis;
use crate::refusal::Corrupt;
use crate::request::ResultKey;

/// A row of `results`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Row {
    pub namespace: String,
    pub workflow_uid: String,
    pub node_id: String,
    pub workflow: String,
    pub pod_name: Option<String>,
    pub pod_uid: Option<String>,
    pub instance_id: Option<String>,
    pub state: ResultState,
    pub phase: Option<String>,
    pub message: Option<String>,
    pub progress: Option<String>,
    pub outputs: Option<String>,
    pub sequence: Option<i64>,
    pub revision: i64,
    pub created_revision: i64,
    pub created_at: i64,
    pub updated_at: i64,
    pub completed_at: Option<i64>,
    pub abandon_reason: Option<String>,
}

impl Row {
    /// A row that does not exist yet; the writer assigns its revisions.
    pub fn new(key: &ResultKey, state: ResultState, now: i64) -> Self {
        Row {
            namespace: key.namespace.clone(),
            workflow_uid: key.workflow_uid.clone(),
            node_id: key.node_id.clone(),
            workflow: key.workflow.clone(),
            pod_name: None,
            pod_uid: None,
            instance_id: None,
            state,
            phase: None,
            message: None,
            progress: None,
            outputs: None,
            sequence: None,
            revision: 0,
            created_revision: 0,
            created_at: now,
            updated_at: now,
            completed_at: None,
            abandon_reason: None,
        }
    }

    /// The API form. Reads convert rows they are done with, so nothing is copied twice.
    pub fn into_api(self) -> Result<NodeResult, Corrupt> {
        let outputs = match self.outputs {
            Some(text) => Some(
                RawValue::from_string(text)
                    .map_err(|e| Corrupt(format!("outputs of {}: {e}", self.node_id)))?,
            ),
            None => None,
        };
        Ok(NodeResult {
            namespace: self.namespace,
            workflow: self.workflow,
            workflow_uid: self.workflow_uid,
            node_id: self.node_id,
            pod_name: self.pod_name,
            pod_uid: self.pod_uid,
            instance_id: self.instance_id,
            state: self.state,
            phase: self.phase,
            message: self.message,
            progress: self.progress,
            outputs,
            sequence: self.sequence,
            revision: self.revision,
            created_at: format_millis(self.created_at),
            updated_at: format_millis(self.updated_at),
            completed_at: self.completed_at.map(format_millis),
            abandon_reason: self.abandon_reason,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_outputs_that_are_not_json_are_corrupt_not_served() {
        let key = ResultKey {
            namespace: "argo".into(),
            workflow: "wf".into(),
            workflow_uid: "uid-1".into(),
            node_id: "wf-1".into(),
        };
        let mut row = Row::new(&key, ResultState::Reporting, 1);
        row.outputs = Some(r#"{"a": 1}"#.into());
        let served = row.clone().into_api().expect("JSON outputs are served");
        assert_eq!(
            served.outputs.map(|o| o.get().to_owned()).as_deref(),
            Some(r#"{"a": 1}"#)
        );
        row.outputs = Some("{not json".into());
        assert!(matches!(
            row.into_api(),
            Err(Corrupt(detail)) if detail.starts_with("outputs of wf-1")
        ));
    }
}
