use serde::{Deserialize, Serialize};

use crate::NodeResult;

/// One change of the feed, in revision order. Its OpenAPI schema is `schema.rs`'s: the
/// variants named, with a discriminator on `type`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", try_from = "WireItem")]
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

    /// The namespace of the result the change is about.
    pub fn namespace(&self) -> &str {
        match self {
            FeedItem::Upserted { result, .. } => &result.namespace,
            FeedItem::Deleted { namespace, .. } => namespace,
        }
    }
}

/// Every change after `since`, then the revision to pass as the next `since`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FeedPage {
    pub items: Vec<FeedItem>,
    pub revision: i64,
    /// The store's epoch, which `revision` belongs to: pass it with the next `since`
    /// (absent from servers that predate epochs).
    #[serde(default)]
    pub epoch: Option<String>,
}

/// A feed item as read. Serde cannot read `outputs` (raw JSON text) through an internally
/// tagged enum, which buffers its content, so items are read flat and then checked.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireItem {
    #[serde(rename = "type")]
    kind: String,
    revision: i64,
    result: Option<Box<NodeResult>>,
    namespace: Option<String>,
    workflow: Option<String>,
    workflow_uid: Option<String>,
    node_id: Option<String>,
}

impl TryFrom<WireItem> for FeedItem {
    type Error = String;

    fn try_from(item: WireItem) -> Result<Self, String> {
        let kind = item.kind.clone();
        match (kind.as_str(), item) {
            (
                "upserted",
                WireItem {
                    revision,
                    result: Some(result),
                    ..
                },
            ) => Ok(FeedItem::Upserted { revision, result }),
            (
                "deleted",
                WireItem {
                    revision,
                    namespace: Some(namespace),
                    workflow: Some(workflow),
                    workflow_uid: Some(workflow_uid),
                    node_id: Some(node_id),
                    ..
                },
            ) => Ok(FeedItem::Deleted {
                revision,
                namespace,
                workflow,
                workflow_uid,
                node_id,
            }),
            (kind, _) => Err(format!("feed item of type {kind:?} lacks its fields")),
        }
    }
}
