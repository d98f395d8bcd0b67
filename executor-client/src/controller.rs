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
//! 4. A pod that ended or vanished without a completed result seen is settled at once
//!    ([`Reconciler::settle`], which [`decide`] asks for with [`Decision::Settle`]): the
//!    server keeps a completed result and abandons anything else, in one transaction, and
//!    the node takes its phase from the answer. No node waits for a timer, or forever.
//!
//! The cron controller's side, one tick run the safe way (claim, create, settle), is
//! [`cron::run_tick`].

pub mod known;

use argo_results_proto::{
    AbandonRequest, ExpectationRequest, NodeResult, ProblemCode, ResultList, ResultState,
};
use serde::Deserialize;

use crate::{Client, ClientError, FeedOptions, ListOptions};
use known::Known;

pub use crate::cron;

/// What the pod informer says of a node's pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Decision {
    /// Not decided yet: the pod still runs. Keep the node as it is and look again on the
    /// next change.
    Wait,
    /// The pod ended or vanished and no completed result was seen: settle the node now
    /// ([`Reconciler::settle`]), abandoning its result for `reason` unless it completed.
    Settle {
        reason: String,
    },
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
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
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

/// Why a pod's result is abandoned when it ended, or vanished, without completing.
fn settle_reason(pod: PodPhase) -> String {
    match pod {
        PodPhase::Gone => "the pod is gone (deleted, evicted or its node drained) without a \
                           completed result"
            .into(),
        phase => format!("the pod ended {phase:?} without a completed result"),
    }
}

/// A node's fate from its pod and its stored result, and nothing else (the same table is
/// `testdata/reconciler-decisions.json`).
///
/// - An abandoned result is lost, whatever the pod.
/// - A completed result decides a pod that ended: Succeeded or Failed as the pod says,
///   with the result's outputs; for a vanished pod, as the result says ([`Decision`]).
/// - A pod that ended or vanished with no completed result seen is to be settled
///   ([`Decision::Settle`]): its wait container is done, so whatever it committed is all
///   there will be, and the server's answer to the settle is the node's fate.
/// - A pod still pending or running waits.
pub fn decide(pod: PodPhase, result: Option<&NodeResult>) -> Decision {
    let state = result.map(|result| result.state);
    match (state, pod, result) {
        (Some(ResultState::Abandoned), _, Some(result)) => Decision::Lost {
            reason: result.abandon_reason.clone().unwrap_or_default(),
        },
        (_, PodPhase::Pending | PodPhase::Running, _) => Decision::Wait,
        (Some(ResultState::Completed), PodPhase::Succeeded, Some(result)) => Decision::Succeeded {
            outputs: outputs(result),
        },
        (Some(ResultState::Completed), PodPhase::Failed, Some(result)) => Decision::Failed {
            outputs: outputs(result),
            message: failure_message(result),
        },
        (Some(ResultState::Completed), PodPhase::Gone, Some(result)) => ended(result),
        _ => Decision::Settle {
            reason: settle_reason(pod),
        },
    }
}

#[derive(Debug)]
pub struct Reconciler {
    client: Client,
    known: Known,
}

impl Reconciler {
    /// A reconciler that follows the feed from `since` (0: the oldest retained change) for
    /// the workflows whose pods it creates from now on.
    pub fn new(client: Client, since: i64) -> Self {
        Reconciler {
            client,
            known: Known::new(since),
        }
    }

    /// A reconciler started with no memory, told the workflows in flight (the controller's
    /// Workflow informer lists them): each is listed, and the feed is followed on from the
    /// lowest revision listed, so it reaches the decisions a reconciler that never stopped
    /// reaches. With no workflow in flight it starts at the store's head: there is nothing
    /// behind it to replay.
    pub async fn resume(
        client: Client,
        workflows: impl IntoIterator<Item = WorkflowRef>,
    ) -> Result<Self, ClientError> {
        let mut listings = Vec::new();
        for workflow in workflows {
            let pages = list(&client, &workflow).await?;
            listings.push((workflow, pages));
        }
        let mut known = Known::resumed(listings);
        if known.followed().is_empty() {
            (known.since, known.epoch) = head(&client).await?;
        }
        Ok(Reconciler { client, known })
    }

    /// Follows a workflow that was already running when this reconciler started and that
    /// [`Reconciler::resume`] was not told of: lists it, and reads the feed from there on.
    pub async fn track(&mut self, workflow: WorkflowRef) -> Result<(), ClientError> {
        let pages = list(&self.client, &workflow).await?;
        self.known.tracked(workflow, pages);
        Ok(())
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
        self.known.follow(WorkflowRef {
            namespace: namespace.to_owned(),
            name: workflow.to_owned(),
            uid: workflow_uid.to_owned(),
        });
        let stored = self
            .client
            .expect(namespace, workflow, node_id, &expectation)
            .await?
            .body;
        self.known.remember(stored);
        Ok(())
    }

    /// Step 2: applies the changes committed since the last call, in every namespace
    /// (waiting up to `wait_seconds` for one). Returns how many changes arrived. When the
    /// position is not in the store's history any more (`410 gone`: pruned, or the
    /// database was restored or replaced), the workflows followed are listed again, and
    /// the count is of the results listed.
    pub async fn follow(&mut self, wait_seconds: u64) -> Result<usize, ClientError> {
        let feed = self
            .client
            .feed(&FeedOptions {
                since: self.known.since,
                epoch: self.known.epoch.clone(),
                watch: wait_seconds > 0,
                timeout_seconds: Some(wait_seconds.max(1)),
                ..FeedOptions::default()
            })
            .await;
        match feed {
            Err(error) if error.code() == Some(ProblemCode::Gone) => {
                let problem = error.problem();
                let current = problem.and_then(|p| p.revision).unwrap_or(0);
                let epoch = problem.and_then(|p| p.epoch.clone());
                let mut listings = Vec::new();
                for workflow in self.known.followed() {
                    let pages = list(&self.client, &workflow).await?;
                    listings.push((workflow, pages));
                }
                Ok(self.known.relisted(current, epoch, listings))
            }
            page => Ok(self.known.advance(page?)),
        }
    }

    /// The result of a node as last seen.
    pub fn result(&self, workflow_uid: &str, node_id: &str) -> Option<&NodeResult> {
        self.known.result(workflow_uid, node_id)
    }

    /// Step 3: [`decide`] with the result as last seen.
    pub fn decide(&self, workflow_uid: &str, node_id: &str, pod: PodPhase) -> Decision {
        decide(pod, self.result(workflow_uid, node_id))
    }

    /// Steps 3 and 4 in one call: [`decide`] the node from its pod as the informer shows
    /// it, and when that asks for a settle (the pod ended or vanished without a completed
    /// result seen), abandon its result (`POST .../abandon`). The abandon's answer is
    /// frozen and final: the wait container gets its 2xx only after the commit and exits
    /// after it, so once the pod is terminal what is committed is all there will be.
    /// `200`: the result is abandoned now (or was), and the node is lost;
    /// `409 already_completed`: the node takes its phase and outputs from the completed
    /// result in the answer; `404`: nothing is stored for the node any more, and it is
    /// lost. Never [`Decision::Settle`]; [`Decision::Wait`] only while the pod runs.
    pub async fn settle(
        &mut self,
        workflow: &WorkflowRef,
        node_id: &str,
        pod: PodPhase,
    ) -> Result<Decision, ClientError> {
        let reason = match self.decide(&workflow.uid, node_id, pod) {
            Decision::Settle { reason } => reason,
            decision => return Ok(decision),
        };
        let abandon = AbandonRequest {
            workflow_uid: workflow.uid.clone(),
            reason,
        };
        let answer = self
            .client
            .abandon(&workflow.namespace, &workflow.name, node_id, &abandon)
            .await;
        self.known.settled(answer, pod)
    }

    /// The workflow was deleted, or garbage collected once Fulfilled: its results are
    /// deleted (`DELETE .../results`) and it is no longer followed. Returns how many
    /// results were deleted.
    pub async fn forget(&mut self, workflow: &WorkflowRef) -> Result<u64, ClientError> {
        let deleted = self
            .client
            .delete_results(&workflow.namespace, &workflow.name, &workflow.uid)
            .await?;
        self.known.forget(&workflow.uid);
        Ok(deleted.deleted)
    }
}

/// The store's newest revision and its epoch: a position past any revision is answered
/// `410 gone` with them (docs/api.md section 4).
async fn head(client: &Client) -> Result<(i64, Option<String>), ClientError> {
    let past = client
        .feed(&FeedOptions {
            since: i64::MAX,
            limit: Some(1),
            ..FeedOptions::default()
        })
        .await;
    match past {
        Err(error) if error.code() == Some(ProblemCode::Gone) => {
            let problem = error.problem();
            match problem.and_then(|p| p.revision) {
                Some(revision) => Ok((revision, problem.and_then(|p| p.epoch.clone()))),
                None => Err(error),
            }
        }
        Err(error) => Err(error),
        // A server older than that rule answers a page: read from the oldest change.
        Ok(_) => Ok((0, None)),
    }
}

/// Every page of `workflow`'s results.
async fn list(client: &Client, workflow: &WorkflowRef) -> Result<Vec<ResultList>, ClientError> {
    let mut options = ListOptions {
        workflow_uid: Some(workflow.uid.clone()),
        ..ListOptions::default()
    };
    let mut pages = Vec::new();
    loop {
        let page = client
            .list_results(&workflow.namespace, &workflow.name, &options)
            .await?;
        options.continue_token = page.continue_token.clone();
        pages.push(page);
        if options.continue_token.is_none() {
            return Ok(pages);
        }
    }
}

#[cfg(test)]
mod tests {
    //! The two files of `testdata/` that the Go package's tests (`executor-client/go`) run
    //! too, so that the two reconcilers cannot drift apart.
    //!
    //! `reconciler-decisions.json`, the decision table, run by
    //! [`decisions_follow_the_shared_table`], is one JSON object:
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
    //!   "expect": DECISION
    //! }]}
    //!
    //! DECISION: {
    //!   "decision": "Wait" | "Settle" | "Succeeded" | "Failed" | "Error" | "Lost",
    //!   "outputs":  null or the outputs the node takes (compared as JSON values),
    //!   "message":  null (no message) or a fragment of the message (Lost, Settle: of the
    //!               reason)
    //! }
    //! ```
    //!
    //! `reconciler-events.json`, run by [`events_follow_the_shared_scenarios`]: sequences of
    //! what a reconciler hears from the server, in order, and what it knows and decides
    //! after them. Each step is an object with one key: an event (the answer of the call
    //! that [`Reconciler`] makes, applied by its pure part `Known`) or an `expect`.
    //!
    //! ```text
    //! {"defaults": {"result": a NodeResult, "page": members of a ResultList page},
    //!  "scenarios": [{"name": ..., "since": where the reconciler starts reading the feed,
    //!                 "steps": [STEP]}]}
    //!
    //! STEP:
    //!   {"podCreated": {"workflow": WORKFLOW, "answer": RESULT}}  pod_created: the workflow
    //!                                  is followed from now on; the expectation's answer
    //!   {"feed": a FeedPage, its upserted items' `result` RESULTs}      follow: a page
    //!   {"gone": {"revision": N, "epoch": E (optional), "listings": [LISTING]}}  follow:
    //!                                  410 gone at revision N of epoch E, then the listing
    //!                                  of each workflow followed (exactly)
    //!   {"restart": {"listings": [LISTING]}}   Reconciler::resume with these workflows
    //!   {"track": LISTING}                     Reconciler::track
    //!   {"settle": {"pod": as above, "answer": {"status": 200, "body": RESULT}
    //!                        | {"status": 409 or 404, "problem": a Problem, `current` a RESULT},
    //!               "expect": DECISION}}       settle: the abandon's answer, the decision
    //!   {"expect": {"since": N (optional), "epoch": E (optional), "decisions":
    //!               [{"workflowUid": ..., "nodeId": ..., "pod": as above,
    //!                 "expect": DECISION}]}}   what it knows now
    //!
    //! WORKFLOW: {"namespace": ..., "name": ..., "uid": ...}
    //! LISTING:  {"workflow": WORKFLOW, "pages": [a ResultList: `defaults.page` members,
    //!            then these; its `items` RESULTs]}
    //! RESULT:   the members of `defaults.result`, then these (a NodeResult on the wire)
    //! ```
    use serde_json::{Map, Value};

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

    /// Asserts that `decision` is the one `expect` writes: kind, outputs, message.
    fn check(name: &str, decision: Decision, expect: &Expect) {
        let (kind, outputs, message) = match decision {
            Decision::Wait => ("Wait", None, None),
            Decision::Settle { reason } => ("Settle", None, Some(reason)),
            Decision::Succeeded { outputs } => ("Succeeded", outputs, None),
            Decision::Failed { outputs, message } => ("Failed", outputs, message),
            Decision::Error { outputs, message } => ("Error", outputs, Some(message)),
            Decision::Lost { reason } => ("Lost", None, Some(reason)),
        };
        assert_eq!(kind, expect.decision, "{name}");
        let outputs: Option<serde_json::Value> =
            outputs.map(|text| serde_json::from_str(&text).expect("outputs JSON"));
        assert_eq!(outputs, expect.outputs, "{name}");
        match (message, &expect.message) {
            (None, None) => {}
            (Some(message), Some(fragment)) => {
                assert!(message.contains(fragment.as_str()), "{name}: {message:?}");
            }
            (message, fragment) => panic!("{name}: message {message:?}, expected {fragment:?}"),
        }
    }

    fn testdata(file: &str) -> String {
        let path = format!("{}/testdata/{file}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn decisions_follow_the_shared_table() {
        let table: Table = serde_json::from_str(&testdata("reconciler-decisions.json"))
            .expect("the table's shape");
        assert!(!table.cases.is_empty());
        for case in table.cases {
            let result = case.result.map(stored);
            check(
                &case.name,
                decide(pod(&case.pod), result.as_ref()),
                &case.expect,
            );
        }
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Events {
        defaults: Defaults,
        scenarios: Vec<Scenario>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Defaults {
        result: Map<String, Value>,
        page: Map<String, Value>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Scenario {
        name: String,
        since: i64,
        steps: Vec<Step>,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    enum Step {
        PodCreated {
            workflow: Workflow,
            answer: Value,
        },
        Feed(Value),
        Gone {
            revision: i64,
            epoch: Option<String>,
            listings: Vec<Listed>,
        },
        Restart {
            listings: Vec<Listed>,
        },
        Track(Listed),
        Settle {
            pod: String,
            answer: Answer,
            expect: Expect,
        },
        Expect {
            since: Option<i64>,
            epoch: Option<String>,
            decisions: Vec<Decided>,
        },
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Workflow {
        namespace: String,
        name: String,
        uid: String,
    }

    impl From<Workflow> for WorkflowRef {
        fn from(
            Workflow {
                namespace,
                name,
                uid,
            }: Workflow,
        ) -> Self {
            WorkflowRef {
                namespace,
                name,
                uid,
            }
        }
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Listed {
        workflow: Workflow,
        pages: Vec<Value>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Answer {
        status: u16,
        body: Option<Value>,
        problem: Option<Value>,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Decided {
        workflow_uid: String,
        node_id: String,
        pod: String,
        expect: Expect,
    }

    impl Defaults {
        /// `defaults` with the members of `value` over them.
        fn over(defaults: &Map<String, Value>, value: Value) -> Value {
            let Value::Object(members) = value else {
                panic!("not an object: {value}")
            };
            let mut merged = defaults.clone();
            merged.extend(members);
            Value::Object(merged)
        }

        /// Decodes `value` as the client does, from its JSON text.
        fn decode<T: serde::de::DeserializeOwned>(value: &Value) -> T {
            serde_json::from_str(&value.to_string()).unwrap_or_else(|e| panic!("{e}: {value}"))
        }

        fn result(&self, value: Value) -> NodeResult {
            Self::decode(&Self::over(&self.result, value))
        }

        /// Completes the RESULTs at `key` of `value`: one object, or each of an array.
        fn complete(&self, value: &mut Value, key: &str) {
            match value.get_mut(key) {
                Some(Value::Array(items)) => {
                    for item in items {
                        *item = Self::over(&self.result, item.take());
                    }
                }
                Some(item @ Value::Object(_)) => *item = Self::over(&self.result, item.take()),
                _ => {}
            }
        }

        fn feed(&self, mut page: Value) -> argo_results_proto::FeedPage {
            if let Some(Value::Array(items)) = page.get_mut("items") {
                for item in items {
                    self.complete(item, "result");
                }
            }
            Self::decode(&page)
        }

        fn listing(&self, listed: Listed) -> known::Listing {
            let pages = listed
                .pages
                .into_iter()
                .map(|page| {
                    let mut page = Self::over(&self.page, page);
                    self.complete(&mut page, "items");
                    Self::decode(&page)
                })
                .collect();
            (listed.workflow.into(), pages)
        }

        fn answer(&self, answer: Answer) -> Result<NodeResult, ClientError> {
            match (answer.status, answer.body, answer.problem) {
                (200, Some(body), None) => Ok(self.result(body)),
                (_, None, Some(mut problem)) => {
                    self.complete(&mut problem, "current");
                    let problem: argo_results_proto::Problem = Self::decode(&problem);
                    assert_eq!(problem.status, answer.status);
                    Err(ClientError::Api(Box::new(problem)))
                }
                _ => panic!("an answer is a 200 with a body or a problem"),
            }
        }
    }

    #[test]
    fn events_follow_the_shared_scenarios() {
        let events: Events =
            serde_json::from_str(&testdata("reconciler-events.json")).expect("the file's shape");
        assert!(!events.scenarios.is_empty());
        let defaults = &events.defaults;
        for scenario in events.scenarios {
            let mut known = Known::new(scenario.since);
            for (i, step) in scenario.steps.into_iter().enumerate() {
                let name = format!("{} (step {})", scenario.name, i + 1);
                match step {
                    Step::PodCreated { workflow, answer } => {
                        known.follow(workflow.into());
                        known.remember(defaults.result(answer));
                    }
                    Step::Feed(page) => {
                        known.advance(defaults.feed(page));
                    }
                    Step::Gone {
                        revision,
                        epoch,
                        listings,
                    } => {
                        let listings: Vec<known::Listing> =
                            listings.into_iter().map(|l| defaults.listing(l)).collect();
                        let mut followed: Vec<String> =
                            known.followed().into_iter().map(|w| w.uid).collect();
                        let mut listed: Vec<String> =
                            listings.iter().map(|(w, _)| w.uid.clone()).collect();
                        followed.sort();
                        listed.sort();
                        assert_eq!(listed, followed, "{name}: the workflows listed again");
                        known.relisted(revision, epoch, listings);
                    }
                    Step::Restart { listings } => {
                        known = Known::resumed(
                            listings.into_iter().map(|l| defaults.listing(l)).collect(),
                        );
                    }
                    Step::Track(listed) => {
                        let (workflow, pages) = defaults.listing(listed);
                        known.tracked(workflow, pages);
                    }
                    Step::Settle {
                        pod: phase,
                        answer,
                        expect,
                    } => {
                        let decision = known
                            .settled(defaults.answer(answer), pod(&phase))
                            .expect("the answer decides");
                        check(&name, decision, &expect);
                    }
                    Step::Expect {
                        since,
                        epoch,
                        decisions,
                    } => {
                        if let Some(since) = since {
                            assert_eq!(known.since, since, "{name}: since");
                        }
                        if epoch.is_some() {
                            assert_eq!(known.epoch, epoch, "{name}: epoch");
                        }
                        for d in decisions {
                            let result = known.result(&d.workflow_uid, &d.node_id);
                            let what =
                                format!("{name}: {} {} {}", d.workflow_uid, d.node_id, d.pod);
                            check(&what, decide(pod(&d.pod), result), &d.expect);
                        }
                    }
                }
            }
        }
    }
}
