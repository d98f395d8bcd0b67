//! The reference reconciler: how Argo's controller should decide a node from argo-results
//! instead of `taskResultReconciliation` over an informer cache (docs/controller-integration.md).
//!
//! 1. Before creating a node's pod, register the expected result ([`Reconciler::pod_created`]),
//!    and again with the new pod UID when a pod is restarted: "not reported yet" then reads
//!    `expected`, never "done".
//! 2. Follow the change feed of every namespace ([`Reconciler::follow`]) rather than polling
//!    every workflow; after a restart, re-list the workflows in flight and follow on from
//!    there ([`Reconciler::resume`]).
//! 3. Decide a node from its pod and its committed result ([`decide`]): only a `completed`
//!    result decides a node whose pod ended, Succeeded or Failed, and its outputs come along.
//! 4. When a pod vanished, or ended without a completed result, abandon its result
//!    ([`Reconciler::pod_gone`]); the answer is frozen, and the node takes its phase from it.
//!
//! The cron controller's side, one tick run the safe way (claim, create, settle), is
//! [`cron::run_tick`].

use std::collections::HashMap;

use argo_results_proto::{
    AbandonRequest, ExpectationRequest, FeedItem, NodeResult, ProblemCode, ResultState,
};
use serde::Deserialize;

use crate::{Client, ClientError, FeedOptions, ListOptions};

pub use crate::cron;

/// What the pod informer says of a node's pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
    /// Not in the informer any more: deleted, evicted, its node drained.
    Gone,
}

/// What the controller may conclude about a node now. Outputs are Argo's `Outputs` JSON,
/// exactly as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Not decided yet: keep the node as it is and look again on the next change. For a
    /// pod that ended or vanished, [`Reconciler::pod_gone`] settles it at once.
    Wait,
    Succeeded {
        outputs: Option<String>,
    },
    Failed {
        outputs: Option<String>,
        message: Option<String>,
    },
    /// The step ended without saying how, or said `Error`.
    Error {
        outputs: Option<String>,
        message: String,
    },
    /// The controller abandoned the result before it completed.
    Lost {
        reason: String,
    },
}

/// A workflow in flight, as the controller's Workflow informer knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// The only part of Argo's `Outputs` a decision reads.
#[derive(Deserialize)]
struct ExitCode {
    #[serde(rename = "exitCode")]
    exit_code: Option<String>,
}

fn outputs(result: &NodeResult) -> Option<String> {
    result.outputs.as_ref().map(|raw| raw.get().to_owned())
}

fn exit_code(result: &NodeResult) -> Option<String> {
    let outputs = result.outputs.as_ref()?;
    serde_json::from_str::<ExitCode>(outputs.get())
        .ok()?
        .exit_code
}

fn exit_message(code: &str) -> String {
    format!("the main container exited with code {code}")
}

/// Why a step failed: what it said, else its exit code.
fn failure_message(result: &NodeResult) -> Option<String> {
    result
        .message
        .clone()
        .or_else(|| exit_code(result).map(|code| exit_message(&code)))
}

/// How a completed step ended, when its pod is gone: its `phase`, else its exit code, else
/// an error, never success by default.
fn ended(result: &NodeResult) -> Decision {
    let outputs = outputs(result);
    match (result.phase.as_deref(), exit_code(result)) {
        (Some("Succeeded"), _) => Decision::Succeeded { outputs },
        (Some("Failed"), _) => Decision::Failed {
            outputs,
            message: failure_message(result),
        },
        (Some("Error"), _) => Decision::Error {
            outputs,
            message: failure_message(result)
                .unwrap_or_else(|| "the step reported that it ended in Error".into()),
        },
        (_, Some(code)) if code == "0" => Decision::Succeeded { outputs },
        (_, Some(code)) => Decision::Failed {
            outputs,
            message: Some(exit_message(&code)),
        },
        (_, None) => Decision::Error {
            outputs,
            message: "the pod is gone and its final report said nothing of how the step \
                      ended (no phase Succeeded, Failed or Error, no exitCode)"
                .into(),
        },
    }
}

/// A node's fate from its pod and its stored result, and nothing else (the same table is
/// `testdata/reconciler-decisions.json`).
///
/// - An abandoned result is lost, whatever the pod.
/// - A completed result decides a pod that ended: Succeeded or Failed as the pod says,
///   with the result's outputs; for a vanished pod, as the result says ([`Decision`]).
/// - Anything else waits: a pod still running, or one that ended before its final report
///   was seen. Failed nodes wait too, so that the outputs they report (their logs) are kept.
pub fn decide(pod: PodPhase, result: Option<&NodeResult>) -> Decision {
    let Some(result) = result else {
        return Decision::Wait;
    };
    match (result.state, pod) {
        (ResultState::Abandoned, _) => Decision::Lost {
            reason: result.abandon_reason.clone().unwrap_or_default(),
        },
        (ResultState::Completed, PodPhase::Succeeded) => Decision::Succeeded {
            outputs: outputs(result),
        },
        (ResultState::Completed, PodPhase::Failed) => Decision::Failed {
            outputs: outputs(result),
            message: failure_message(result),
        },
        (ResultState::Completed, PodPhase::Gone) => ended(result),
        _ => Decision::Wait,
    }
}

/// One workflow incarnation's node: (workflow UID, node ID).
type Key = (String, String);

#[derive(Debug)]
pub struct Reconciler {
    client: Client,
    since: i64,
    results: HashMap<Key, NodeResult>,
    /// The workflows followed, by UID: the feed's changes to others are not kept, and these
    /// are re-listed when the feed's history is gone.
    workflows: HashMap<String, WorkflowRef>,
}

impl Reconciler {
    /// A reconciler that follows the feed from `since` (0: the oldest retained change) for
    /// the workflows whose pods it creates from now on.
    pub fn new(client: Client, since: i64) -> Self {
        Reconciler {
            client,
            since,
            results: HashMap::new(),
            workflows: HashMap::new(),
        }
    }

    /// A reconciler started with no memory, told the workflows in flight (the controller's
    /// Workflow informer lists them): each is listed, and the feed is followed on from the
    /// lowest revision listed, so it reaches the decisions a reconciler that never stopped
    /// reaches.
    pub async fn resume(
        client: Client,
        workflows: impl IntoIterator<Item = WorkflowRef>,
    ) -> Result<Self, ClientError> {
        let mut reconciler = Self::new(client, 0);
        let mut lowest = None;
        for workflow in workflows {
            let revision = reconciler.list(&workflow).await?;
            reconciler.workflows.insert(workflow.uid.clone(), workflow);
            lowest = Some(lowest.map_or(revision, |low: i64| low.min(revision)));
        }
        reconciler.since = lowest.unwrap_or(0);
        Ok(reconciler)
    }

    /// Follows a workflow that was already running when this reconciler started and that
    /// [`Reconciler::resume`] was not told of: lists it, and reads the feed from there on.
    pub async fn track(&mut self, workflow: WorkflowRef) -> Result<(), ClientError> {
        let revision = self.list(&workflow).await?;
        self.workflows.insert(workflow.uid.clone(), workflow);
        self.since = self.since.min(revision);
        Ok(())
    }

    /// Replaces what is known of `workflow` with its results listed now, every page; returns
    /// the lowest page revision, after which the feed has every change.
    async fn list(&mut self, workflow: &WorkflowRef) -> Result<i64, ClientError> {
        let mut options = ListOptions {
            workflow_uid: Some(workflow.uid.clone()),
            ..ListOptions::default()
        };
        let mut listed = Vec::new();
        let mut lowest = i64::MAX;
        loop {
            let page = self
                .client
                .list_results(&workflow.namespace, &workflow.name, &options)
                .await?;
            lowest = lowest.min(page.revision);
            listed.extend(page.items);
            match page.continue_token {
                Some(token) => options.continue_token = Some(token),
                None => break,
            }
        }
        self.results.retain(|(uid, _), _| *uid != workflow.uid);
        for result in listed {
            self.results.insert(
                (result.workflow_uid.clone(), result.node_id.clone()),
                result,
            );
        }
        Ok(lowest)
    }

    /// Step 1: the controller is about to create (or re-create) the pod of a node. The
    /// workflow is followed from then on.
    pub async fn pod_created(
        &mut self,
        namespace: &str,
        workflow: &str,
        workflow_uid: &str,
        node_id: &str,
        pod_name: &str,
        pod_uid: &str,
    ) -> Result<(), ClientError> {
        let expectation = ExpectationRequest {
            workflow_uid: workflow_uid.to_owned(),
            pod_name: pod_name.to_owned(),
            pod_uid: Some(pod_uid.to_owned()),
        };
        self.workflows
            .entry(workflow_uid.to_owned())
            .or_insert_with(|| WorkflowRef {
                namespace: namespace.to_owned(),
                name: workflow.to_owned(),
                uid: workflow_uid.to_owned(),
            });
        let stored = self
            .client
            .expect(namespace, workflow, node_id, &expectation)
            .await?
            .body;
        self.remember(stored);
        Ok(())
    }

    /// Keeps `result` if its workflow is followed and it is newer than what is known.
    fn remember(&mut self, result: NodeResult) {
        if !self.workflows.contains_key(&result.workflow_uid) {
            return;
        }
        let key = (result.workflow_uid.clone(), result.node_id.clone());
        match self.results.get(&key) {
            Some(known) if known.revision >= result.revision => {}
            _ => {
                self.results.insert(key, result);
            }
        }
    }

    /// Applies one change of the feed. A tombstone removes only what is older than itself:
    /// after a re-list, the feed replays changes the listing already has.
    fn apply(&mut self, item: FeedItem) {
        match item {
            FeedItem::Upserted { result, .. } => self.remember(*result),
            FeedItem::Deleted {
                revision,
                workflow_uid,
                node_id,
                ..
            } => {
                let key = (workflow_uid, node_id);
                if self
                    .results
                    .get(&key)
                    .is_some_and(|known| known.revision < revision)
                {
                    self.results.remove(&key);
                }
            }
        }
    }

    /// Step 2: applies the changes committed since the last call, in every namespace
    /// (waiting up to `wait_seconds` for one). Returns how many changes arrived. When the
    /// history since the last call was pruned (`410 gone`), the workflows followed are
    /// listed again, and the count is of the results listed.
    pub async fn follow(&mut self, wait_seconds: u64) -> Result<usize, ClientError> {
        let feed = self
            .client
            .feed(&FeedOptions {
                since: self.since,
                watch: wait_seconds > 0,
                timeout_seconds: Some(wait_seconds.max(1)),
                ..FeedOptions::default()
            })
            .await;
        let page = match feed {
            Err(error) if error.code() == Some(ProblemCode::Gone) => {
                let revision = error.problem().and_then(|p| p.revision).unwrap_or(0);
                return self.relist(revision).await;
            }
            page => page?,
        };
        self.since = page.revision;
        let changes = page.items.len();
        for item in page.items {
            self.apply(item);
        }
        Ok(changes)
    }

    /// Lists every workflow followed again and goes on from the lowest revision listed, or
    /// from `current` (the 410's) when none is followed.
    async fn relist(&mut self, current: i64) -> Result<usize, ClientError> {
        let mut since = current;
        for workflow in self.workflows.values().cloned().collect::<Vec<_>>() {
            since = since.min(self.list(&workflow).await?);
        }
        self.since = since;
        Ok(self.results.len())
    }

    /// The result of a node as last seen.
    pub fn result(&self, workflow_uid: &str, node_id: &str) -> Option<&NodeResult> {
        self.results
            .get(&(workflow_uid.to_owned(), node_id.to_owned()))
    }

    /// Step 3: [`decide`] with the result as last seen.
    pub fn decide(&self, workflow_uid: &str, node_id: &str, pod: PodPhase) -> Decision {
        decide(pod, self.result(workflow_uid, node_id))
    }

    /// Step 4: the node's pod is gone, or it ended and the controller will not wait for the
    /// feed. The abandon's answer is frozen and final: the wait container gets its 2xx only
    /// after the commit and exits after it, so once the pod is terminal what is committed
    /// is all there will be. `200`: the result is abandoned now (or was), and the node
    /// is lost; `409 already_completed`: the node takes its phase and outputs from the
    /// completed result in the answer ([`decide`] with [`PodPhase::Gone`]).
    pub async fn pod_gone(
        &mut self,
        namespace: &str,
        workflow: &str,
        workflow_uid: &str,
        node_id: &str,
        reason: &str,
    ) -> Result<Decision, ClientError> {
        let abandon = AbandonRequest {
            workflow_uid: workflow_uid.to_owned(),
            reason: reason.to_owned(),
        };
        let frozen = match self
            .client
            .abandon(namespace, workflow, node_id, &abandon)
            .await
        {
            Ok(abandoned) => abandoned,
            Err(error) if error.code() == Some(ProblemCode::AlreadyCompleted) => {
                let current = error
                    .problem()
                    .and_then(|p| p.current.as_ref())
                    .and_then(|raw| serde_json::from_str::<NodeResult>(raw.get()).ok());
                match current {
                    Some(current) => current,
                    None => return Err(error),
                }
            }
            Err(error) => return Err(error),
        };
        let decision = decide(PodPhase::Gone, Some(&frozen));
        self.remember(frozen);
        Ok(decision)
    }
}

#[cfg(test)]
mod tests {
    //! The decision table, from `testdata/reconciler-decisions.json`, which a port of the
    //! reconciler to Go runs too. The file is one JSON object:
    //!
    //! ```text
    //! {"cases": [{
    //!   "name":   what the case shows,
    //!   "pod":    "Pending" | "Running" | "Succeeded" | "Failed" | "Gone",
    //!   "result": null (nothing stored) or {
    //!               "state":         "expected" | "reporting" | "completed" | "abandoned",
    //!               "phase":         null or a NodePhase the final report sent,
    //!               "message":       null or a string,
    //!               "outputs":       null or Argo's Outputs object (with or without exitCode),
    //!               "abandonReason": null or a string },
    //!   "expect": {
    //!     "decision": "Wait" | "Succeeded" | "Failed" | "Error" | "Lost",
    //!     "outputs":  null or the outputs the node takes (compared as JSON values),
    //!     "message":  null (no message) or a fragment of the message (Lost: of the reason)
    //!   }
    //! }]}
    //! ```
    use super::*;

    #[derive(Deserialize)]
    struct Table {
        cases: Vec<Case>,
    }

    #[derive(Deserialize)]
    struct Case {
        name: String,
        pod: String,
        result: Option<Stored>,
        expect: Expect,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Stored {
        state: ResultState,
        phase: Option<String>,
        message: Option<String>,
        outputs: Option<serde_json::Value>,
        abandon_reason: Option<String>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Expect {
        decision: String,
        outputs: Option<serde_json::Value>,
        message: Option<String>,
    }

    fn pod(name: &str) -> PodPhase {
        match name {
            "Pending" => PodPhase::Pending,
            "Running" => PodPhase::Running,
            "Succeeded" => PodPhase::Succeeded,
            "Failed" => PodPhase::Failed,
            "Gone" => PodPhase::Gone,
            other => panic!("unknown pod phase {other:?}"),
        }
    }

    fn stored(stored: Stored) -> NodeResult {
        let outputs = stored.outputs.map(|value| {
            serde_json::value::RawValue::from_string(value.to_string()).expect("JSON")
        });
        NodeResult {
            namespace: "argo".into(),
            workflow: "wf".into(),
            workflow_uid: "uid".into(),
            node_id: "wf-1".into(),
            pod_name: Some("wf-main-1".into()),
            pod_uid: Some("pod-uid".into()),
            instance_id: None,
            state: stored.state,
            phase: stored.phase,
            message: stored.message,
            progress: None,
            outputs,
            sequence: Some(1),
            revision: 1,
            created_at: "2026-01-01T00:00:00Z".into(),
            updated_at: "2026-01-01T00:00:00Z".into(),
            completed_at: None,
            abandon_reason: stored.abandon_reason,
        }
    }

    /// A decision as the table writes it: kind, outputs, message.
    fn shape(decision: Decision) -> (&'static str, Option<String>, Option<String>) {
        match decision {
            Decision::Wait => ("Wait", None, None),
            Decision::Succeeded { outputs } => ("Succeeded", outputs, None),
            Decision::Failed { outputs, message } => ("Failed", outputs, message),
            Decision::Error { outputs, message } => ("Error", outputs, Some(message)),
            Decision::Lost { reason } => ("Lost", None, Some(reason)),
        }
    }

    #[test]
    fn decisions_follow_the_shared_table() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/testdata/reconciler-decisions.json"
        );
        let text = std::fs::read_to_string(path).expect("the decision table");
        let table: Table = serde_json::from_str(&text).expect("the table's shape");
        assert!(!table.cases.is_empty());
        for case in table.cases {
            let result = case.result.map(stored);
            let (kind, outputs, message) = shape(decide(pod(&case.pod), result.as_ref()));
            let name = &case.name;
            assert_eq!(kind, case.expect.decision, "{name}");
            let outputs: Option<serde_json::Value> =
                outputs.map(|text| serde_json::from_str(&text).expect("outputs JSON"));
            assert_eq!(outputs, case.expect.outputs, "{name}");
            match (message, case.expect.message) {
                (None, None) => {}
                (Some(message), Some(fragment)) => {
                    assert!(message.contains(&fragment), "{name}: {message:?}");
                }
                (message, fragment) => panic!("{name}: message {message:?}, expected {fragment:?}"),
            }
        }
    }

    fn upserted(revision: i64) -> FeedItem {
        let mut result = stored(Stored {
            state: ResultState::Expected,
            phase: None,
            message: None,
            outputs: None,
            abandon_reason: None,
        });
        result.revision = revision;
        FeedItem::Upserted {
            revision,
            result: Box::new(result),
        }
    }

    fn deleted(revision: i64) -> FeedItem {
        FeedItem::Deleted {
            revision,
            namespace: "argo".into(),
            workflow: "wf".into(),
            workflow_uid: "uid".into(),
            node_id: "wf-1".into(),
        }
    }

    #[test]
    fn a_tombstone_removes_only_what_is_older_than_itself() {
        let client = Client::new("http://127.0.0.1:9", None).expect("client");
        let mut reconciler = Reconciler::new(client, 0);
        reconciler.workflows.insert(
            "uid".into(),
            WorkflowRef {
                namespace: "argo".into(),
                name: "wf".into(),
                uid: "uid".into(),
            },
        );
        reconciler.apply(upserted(10));
        reconciler.apply(deleted(7));
        assert_eq!(
            reconciler.result("uid", "wf-1").map(|r| r.revision),
            Some(10),
            "a re-created row outlives an older tombstone replayed"
        );
        reconciler.apply(upserted(9));
        assert_eq!(
            reconciler.result("uid", "wf-1").map(|r| r.revision),
            Some(10),
            "nor does an older change replace it"
        );
        reconciler.apply(deleted(11));
        assert!(reconciler.result("uid", "wf-1").is_none());
    }
}
