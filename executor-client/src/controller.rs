//! The reference reconciler: how Argo's controller should decide a node from argo-results
//! instead of `taskResultReconciliation` over an informer cache (docs/controller-integration.md).
//!
//! 1. Before creating a node's pod, register the expected result ([`Reconciler::pod_created`]),
//!    and again with the new pod UID when a pod is restarted: "not reported yet" then reads
//!    `expected`, never "done".
//! 2. Follow the change feed ([`Reconciler::follow`]) rather than polling every workflow.
//! 3. Mark a node Succeeded only when its result is `completed`, taking the outputs from it
//!    ([`Reconciler::decide`]); a pod that finished first simply waits for its result.
//! 4. When a pod vanished, abandon its result ([`Reconciler::pod_gone`]); if the answer is
//!    `already_completed`, the node succeeded after all and its outputs are in the answer.

use std::collections::HashMap;
use std::pin::pin;

use argo_results_proto::{
    AbandonRequest, ExpectationRequest, FeedItem, NodeResult, ProblemCode, ResultState,
};

use futures_util::StreamExt;

use crate::{Client, ClientError, FeedOptions, ListOptions};

/// What the pod informer says of a node's pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
}

/// What the controller may conclude about a node now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Not decided yet: keep the node as it is and look again on the next change.
    Wait,
    /// The node succeeded with these outputs (Argo's `Outputs` JSON).
    Succeeded { outputs: Option<String> },
    /// The node failed; its result, if the executor sent one, is kept for the record.
    Failed { outputs: Option<String> },
    /// The pod is gone without a final report; the result is abandoned.
    Lost { reason: String },
}

/// One workflow incarnation's node, as the store knows it.
type Key = (String, String);

#[derive(Debug)]
pub struct Reconciler {
    client: Client,
    namespace: String,
    since: i64,
    results: HashMap<Key, NodeResult>,
    /// The workflows in flight, by UID, to re-list when the feed's history is gone.
    workflows: HashMap<String, String>,
}

fn outputs(result: &NodeResult) -> Option<String> {
    result.outputs.as_ref().map(|raw| raw.get().to_owned())
}

impl Reconciler {
    /// A reconciler for one namespace, following the feed from `since`.
    pub fn new(client: Client, namespace: &str, since: i64) -> Self {
        Reconciler {
            client,
            namespace: namespace.to_owned(),
            since,
            results: HashMap::new(),
            workflows: HashMap::new(),
        }
    }

    /// Step 1: the controller is about to create (or re-create) the pod of a node.
    pub async fn pod_created(
        &mut self,
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
            .insert(workflow_uid.to_owned(), workflow.to_owned());
        let stored = self
            .client
            .expect(&self.namespace, workflow, node_id, &expectation)
            .await?
            .body;
        self.remember(stored);
        Ok(())
    }

    fn remember(&mut self, result: NodeResult) {
        let key = (result.workflow_uid.clone(), result.node_id.clone());
        match self.results.get(&key) {
            Some(known) if known.revision >= result.revision => {}
            _ => {
                self.results.insert(key, result);
            }
        }
    }

    /// Step 2: applies every change committed since the last call (waiting up to
    /// `wait_seconds` for one). Returns how many changes arrived. When the history since
    /// the last call was pruned (`410 gone`), the workflows in flight are listed again
    /// and the feed is followed on from the current revision.
    pub async fn follow(&mut self, wait_seconds: u64) -> Result<usize, ClientError> {
        let feed = self
            .client
            .feed(&FeedOptions {
                since: self.since,
                namespace: Some(self.namespace.clone()),
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
            match item {
                FeedItem::Upserted { result, .. } => self.remember(*result),
                FeedItem::Deleted {
                    workflow_uid,
                    node_id,
                    ..
                } => {
                    self.results.remove(&(workflow_uid, node_id));
                }
            }
        }
        Ok(changes)
    }

    async fn relist(&mut self, revision: i64) -> Result<usize, ClientError> {
        let mut listed = 0;
        for (uid, workflow) in self.workflows.clone() {
            let options = ListOptions {
                workflow_uid: Some(uid.clone()),
                ..ListOptions::default()
            };
            self.results.retain(|(known_uid, _), _| *known_uid != uid);
            let mut pages = pin!(self.client.list_all(&self.namespace, &workflow, options));
            while let Some(result) = pages.next().await {
                self.remember(result?);
                listed += 1;
            }
        }
        self.since = revision;
        Ok(listed)
    }

    /// The result of a node as last seen on the feed.
    pub fn result(&self, workflow_uid: &str, node_id: &str) -> Option<&NodeResult> {
        self.results
            .get(&(workflow_uid.to_owned(), node_id.to_owned()))
    }

    /// Step 3: a node's fate from its pod's phase and its committed result.
    pub fn decide(&self, workflow_uid: &str, node_id: &str, pod: PodPhase) -> Decision {
        let result = self.result(workflow_uid, node_id);
        match (pod, result.map(|r| r.state)) {
            // The outputs and `completed` commit together: this is the only way to success.
            (PodPhase::Succeeded, Some(ResultState::Completed)) => Decision::Succeeded {
                outputs: result.and_then(outputs),
            },
            // The pod finished before its result arrived: wait for it, never guess.
            (PodPhase::Succeeded, _) => Decision::Wait,
            (PodPhase::Failed, _) => Decision::Failed {
                outputs: result.and_then(outputs),
            },
            (PodPhase::Pending | PodPhase::Running, _) => Decision::Wait,
        }
    }

    /// Step 4: the node's pod is gone (deleted, evicted, its node drained).
    pub async fn pod_gone(
        &mut self,
        workflow: &str,
        workflow_uid: &str,
        node_id: &str,
        reason: &str,
    ) -> Result<Decision, ClientError> {
        let abandon = AbandonRequest {
            workflow_uid: workflow_uid.to_owned(),
            reason: reason.to_owned(),
        };
        match self
            .client
            .abandon(&self.namespace, workflow, node_id, &abandon)
            .await
        {
            Ok(abandoned) => {
                self.remember(abandoned);
                Ok(Decision::Lost {
                    reason: reason.to_owned(),
                })
            }
            // Completed before the pod went: the node succeeded, with these outputs.
            Err(error) if error.code() == Some(ProblemCode::AlreadyCompleted) => {
                let current = error
                    .problem()
                    .and_then(|p| p.current.as_ref())
                    .and_then(|raw| serde_json::from_str::<NodeResult>(raw.get()).ok());
                let outputs = current.as_ref().and_then(outputs);
                if let Some(current) = current {
                    self.remember(current);
                }
                Ok(Decision::Succeeded { outputs })
            }
            Err(error) => Err(error),
        }
    }
}
