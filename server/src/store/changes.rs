//! The feed's records: each change as the feed serves it, under its revision.

use argo_results_proto::FeedItem;

use super::error::{StoreError, StoreResult};

/// A row of `changes`.
#[derive(Debug)]
pub(super) struct Change {
    pub revision: i64,
    pub namespace: String,
    /// The feed item's JSON text.
    pub item: String,
}

impl Change {
    pub fn of(item: &FeedItem) -> StoreResult<Change> {
        Ok(Change {
            revision: item.revision(),
            namespace: item.namespace().to_owned(),
            item: serde_json::to_string(item)
                .map_err(|e| StoreError::Corrupt(format!("feed item: {e}")))?,
        })
    }
}

/// The identity of a deleted result, for its tombstone.
#[derive(Debug, sqlx::FromRow)]
pub(super) struct Deleted {
    pub namespace: String,
    pub workflow: String,
    pub workflow_uid: String,
    pub node_id: String,
}

/// The tombstones of `deleted`, under the revisions after `head`.
pub(super) fn tombstones(head: i64, deleted: Vec<Deleted>) -> StoreResult<Vec<Change>> {
    (head + 1..)
        .zip(deleted)
        .map(|(revision, row)| {
            Change::of(&FeedItem::Deleted {
                revision,
                namespace: row.namespace,
                workflow: row.workflow,
                workflow_uid: row.workflow_uid,
                node_id: row.node_id,
            })
        })
        .collect()
}
