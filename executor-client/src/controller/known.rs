//! What a reconciler knows, and how each answer of the server changes it: the pure part of
//! [`Reconciler`](super::Reconciler), which only adds the calls. The scenarios of
//! `testdata/reconciler-events.json` drive it here and in the Go package's `Follower`, and
//! the protocol's model (`tests/model`) drives it through every interleaving it explores.

use std::collections::BTreeMap;

use argo_results_proto::{FeedItem, FeedPage, NodeResult, ProblemCode, ResultList};

use super::{Decision, PodPhase, WorkflowRef, decide};
use crate::ClientError;

/// One workflow incarnation's node: (workflow UID, node ID).
type Key = (String, String);

/// A workflow's listing: every page of its results.
pub type Listing = (WorkflowRef, Vec<ResultList>);

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Known {
    /// The feed is read from here on.
    pub since: i64,
    /// The store's epoch `since` belongs to, once a page or listing said.
    pub epoch: Option<String>,
    results: BTreeMap<Key, NodeResult>,
    /// The workflows followed, by UID: the feed's changes to others are not kept, and these
    /// are re-listed when the feed's history is gone.
    workflows: BTreeMap<String, WorkflowRef>,
}

impl Known {
    pub fn new(since: i64) -> Self {
        Known {
            since,
            ..Known::default()
        }
    }

    /// A reconciler started with no memory, from the listings of the workflows in flight:
    /// the feed is read on from the lowest revision listed (0 when none was), in the epoch
    /// of the first listing.
    pub fn resumed(listings: Vec<Listing>) -> Self {
        let mut known = Known::new(0);
        let mut lowest = None;
        for (workflow, pages) in listings {
            let revision = known.listed(workflow, pages);
            lowest = Some(lowest.map_or(revision, |low: i64| low.min(revision)));
        }
        known.since = lowest.unwrap_or(0);
        known
    }

    /// The workflow is followed from now on (its pod is about to be created).
    pub fn follow(&mut self, workflow: WorkflowRef) {
        self.workflows
            .entry(workflow.uid.clone())
            .or_insert(workflow);
    }

    /// The workflows followed, to be listed again.
    pub fn followed(&self) -> Vec<WorkflowRef> {
        self.workflows.values().cloned().collect()
    }

    /// A workflow learnt of later, listed now: followed, and the feed is read on from no
    /// later than its listing.
    pub fn tracked(&mut self, workflow: WorkflowRef, pages: Vec<ResultList>) {
        let revision = self.listed(workflow, pages);
        self.since = self.since.min(revision);
    }

    /// After `410 gone` with the current revision `current` of epoch `epoch`: every
    /// workflow followed was listed again; the feed goes on from the lowest revision
    /// listed, or from `current`, in `epoch`. A listing read in a later epoch (another
    /// restore meanwhile) then gets `410 gone` again, and everything is listed anew.
    /// Returns how many results are known.
    pub fn relisted(
        &mut self,
        current: i64,
        epoch: Option<String>,
        listings: Vec<Listing>,
    ) -> usize {
        let mut since = current;
        for (workflow, pages) in listings {
            since = since.min(self.listed(workflow, pages));
        }
        self.since = since;
        self.epoch = epoch;
        self.results.len()
    }

    /// Replaces what is known of `workflow` with its listing, and follows it; returns the
    /// lowest page revision, after which the feed has every change. The first epoch a
    /// listing names is kept when none was known.
    fn listed(&mut self, workflow: WorkflowRef, pages: Vec<ResultList>) -> i64 {
        let mut lowest = i64::MAX;
        self.results.retain(|(uid, _), _| *uid != workflow.uid);
        for page in pages {
            lowest = lowest.min(page.revision);
            if self.epoch.is_none() {
                self.epoch.clone_from(&page.epoch);
            }
            for result in page.items {
                self.results.insert(
                    (result.workflow_uid.clone(), result.node_id.clone()),
                    result,
                );
            }
        }
        self.workflows.insert(workflow.uid.clone(), workflow);
        lowest
    }

    /// Stops following a workflow and drops what is known of it: its results were deleted.
    pub fn forget(&mut self, workflow_uid: &str) {
        self.workflows.remove(workflow_uid);
        self.results.retain(|(uid, _), _| uid != workflow_uid);
    }

    /// Keeps `result` if its workflow is followed and it is newer than what is known.
    pub fn remember(&mut self, result: NodeResult) {
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

    /// Applies a page of the feed and reads on after it; returns how many changes it had.
    pub fn advance(&mut self, page: FeedPage) -> usize {
        self.since = page.revision;
        if page.epoch.is_some() {
            self.epoch = page.epoch;
        }
        let changes = page.items.len();
        for item in page.items {
            self.apply(item);
        }
        changes
    }

    /// The settle's answer (`POST .../abandon`) for a node whose pod ended as `pod`: the
    /// frozen result is remembered and decides the node; nothing stored (`404`, deleted
    /// or lost in a restore) is a node lost.
    pub fn settled(
        &mut self,
        answer: Result<NodeResult, ClientError>,
        pod: PodPhase,
    ) -> Result<Decision, ClientError> {
        match frozen(answer) {
            Ok(frozen) => {
                let decision = decide(pod, Some(&frozen));
                self.remember(frozen);
                Ok(decision)
            }
            Err(error) if error.code() == Some(ProblemCode::NotFound) => Ok(Decision::Lost {
                reason: "no result is stored for the node: it was deleted, or lost when the \
                         database was restored"
                    .into(),
            }),
            Err(error) => Err(error),
        }
    }

    pub fn result(&self, workflow_uid: &str, node_id: &str) -> Option<&NodeResult> {
        self.results
            .get(&(workflow_uid.to_owned(), node_id.to_owned()))
    }
}

/// The frozen result in an abandon's answer: the abandoned result, or the completed one
/// that an `already_completed` refusal carries in `current`.
fn frozen(answer: Result<NodeResult, ClientError>) -> Result<NodeResult, ClientError> {
    match answer {
        Err(error) if error.code() == Some(ProblemCode::AlreadyCompleted) => {
            let current = error
                .problem()
                .and_then(|p| p.current.as_ref())
                .and_then(|raw| serde_json::from_str::<NodeResult>(raw.get()).ok());
            current.ok_or(error)
        }
        answer => answer,
    }
}
