use serde::{Deserialize, Serialize};

use crate::NodeResult;

/// One change of the feed, in revision order.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum FeedItem {
    /// A result was created or changed; `result` is its state at `revision`.
    Upserted {
        revision: i64,
        result: Box<NodeResult>,
    },
    /// A result was deleted (the tombstone of a workflow's garbage collection).
    #[serde(rename_all = "camelCase")]
    Deleted {
        revision: i64,
        namespace: String,
        workflow: String,
        workflow_uid: String,
        node_id: String,
    },
}

impl FeedItem {
    pub fn revision(&self) -> i64 {
        match self {
            FeedItem::Upserted { revision, .. } | FeedItem::Deleted { revision, .. } => *revision,
        }
    }
}

/// Every change after `since`, then the revision to pass as the next `since`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FeedPage {
    pub items: Vec<FeedItem>,
    pub revision: i64,
}
