//! The server's committed state and what it does with it, through the store's own rules
//! (`argo_results_rules`): the writer's `plan` decides every write and numbers its changes,
//! `feed::next_since` says where a reader goes on. What the model adds is only what the
//! database does: keep the rows, the changes and the head.

use std::collections::BTreeMap;
use std::sync::Arc;

use argo_results_proto::{FeedItem, FeedPage, NodeResult, ResultList, ResultState, Summary};
use argo_results_rules::batch::{self, Deleted, Planned};
use argo_results_rules::feed::FeedBounds;
use argo_results_rules::{Refusal, Rejected, ReportPolicy, ResultKey, Row, Write, Written};

/// The server's clock: one instant, so that times never tell two states apart.
pub const NOW: i64 = 1_764_435_600_000;

/// How the model's server judges reports: as deployed, pods report only registered nodes.
pub const POLICY: ReportPolicy = ReportPolicy {
    require_expectation: true,
    max_outputs_bytes: 2 << 20,
};

/// What the database holds, committed; empty by default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Store {
    /// By node ID: the model has one workflow.
    pub rows: BTreeMap<String, Row>,
    pub head: i64,
    /// Shared between the states that hold them: most of a world's bytes.
    pub changes: Vec<Arc<batch::Change>>,
    /// The feed's history was pruned through this revision.
    pub pruned: i64,
    /// Changes when the database is restored from a backup.
    pub epoch: u8,
}

/// The feed's answer when the reader must list again (`410 gone`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gone {
    pub revision: i64,
    pub epoch: String,
}

impl Store {
    /// One transaction of the writer over `writes`, as `plan` decides it under `policy`:
    /// the outcome of each, and the store after the commit.
    pub fn commit(
        &mut self,
        writes: &[(ResultKey, Write)],
        policy: &ReportPolicy,
    ) -> Vec<Result<Written, Rejected>> {
        let pairs: Vec<(&ResultKey, &Write)> = writes.iter().map(|(k, w)| (k, w)).collect();
        let stored = writes
            .iter()
            .filter_map(|(key, _)| self.rows.get(&key.node_id).cloned())
            .collect();
        let Planned { outcomes, batch } = batch::plan(&pairs, self.head, stored, policy, NOW)
            .expect("the model's rows are never corrupt");
        if let Some(batch) = batch {
            for row in batch.rows {
                self.rows.insert(row.node_id.clone(), row);
            }
            self.changes.extend(batch.changes.into_iter().map(Arc::new));
            self.head = batch.head;
        }
        outcomes
    }

    /// Deletes every result of the workflow, leaving a tombstone for each in the feed (the
    /// controller's garbage collection), or none where a negative control says so; how
    /// many.
    pub fn delete_workflow(&mut self, tombstones: bool) -> usize {
        let deleted: Vec<Deleted> = std::mem::take(&mut self.rows)
            .into_values()
            .map(|row| Deleted {
                namespace: row.namespace,
                workflow: row.workflow,
                workflow_uid: row.workflow_uid,
                node_id: row.node_id,
            })
            .collect();
        let count = deleted.len();
        if tombstones {
            let changes = batch::tombstones(self.head, deleted).expect("tombstones serialize");
            self.head += count as i64;
            self.changes.extend(changes.into_iter().map(Arc::new));
        }
        count
    }

    /// Retention of the feed's history: everything recorded so far.
    pub fn prune(&mut self) {
        self.pruned = self.head;
        self.changes.clear();
    }

    /// The epoch as the API names it.
    pub fn epoch_name(&self) -> String {
        format!("epoch-{}", self.epoch)
    }

    /// A page of the feed after `since` (read in `epoch`), at most `limit` changes, and
    /// where to go on, as `rule` says (the real rule is `feed::next_since`).
    pub fn feed(
        &self,
        since: i64,
        epoch: Option<&str>,
        limit: usize,
        rule: fn(i64, Option<&str>, &FeedBounds) -> Result<i64, Refusal>,
    ) -> Result<FeedPage, Gone> {
        let after: Vec<&Arc<batch::Change>> = self
            .changes
            .iter()
            .filter(|change| change.revision > since && change.revision <= self.head)
            .collect();
        let more = after.len() > limit;
        let taken = &after[..after.len().min(limit)];
        let bounds = FeedBounds {
            head: self.head,
            epoch: self.epoch_name(),
            last: taken.last().map_or(since, |change| change.revision),
            more,
            pruned: self.pruned,
        };
        match rule(since, epoch, &bounds) {
            Ok(revision) => Ok(FeedPage {
                epoch: Some(bounds.epoch.clone()),
                items: taken
                    .iter()
                    .map(|change| {
                        serde_json::from_str::<FeedItem>(&change.item).expect("a feed item")
                    })
                    .collect(),
                revision,
            }),
            Err(Refusal::Gone {
                revision, epoch, ..
            }) => Err(Gone { revision, epoch }),
            Err(other) => panic!("the feed refused with {other:?}"),
        }
    }

    /// The workflow's results, one snapshot at the head.
    pub fn list(&self) -> ResultList {
        let mut summary = Summary::default();
        let items: Vec<NodeResult> = self
            .rows
            .values()
            .map(|row| {
                match row.state {
                    ResultState::Expected => summary.expected += 1,
                    ResultState::Reporting => summary.reporting += 1,
                    ResultState::Completed => summary.completed += 1,
                    ResultState::Abandoned => summary.abandoned += 1,
                }
                row.clone().into_api().expect("a stored row")
            })
            .collect();
        ResultList {
            items,
            revision: self.head,
            epoch: Some(self.epoch_name()),
            summary,
            continue_token: None,
        }
    }
}
