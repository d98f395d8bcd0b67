//! One transaction of the writer, decided: each write judged in order on its row as the
//! writes before it left it, revisions assigned after the head, and the feed's records.
//! The backends load the rows, store what is planned and commit; nothing here waits.

use std::collections::{HashMap, HashSet};

use argo_results_proto::FeedItem;

use crate::refusal::{Corrupt, Refusal, Rejected};
use crate::request::{Outcome, ResultKey, Written};
use crate::result::{Decision, ReportPolicy, Write};
use crate::row::Row;

/// A result's primary key in the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RowKey<'a> {
    pub namespace: &'a str,
    pub workflow_uid: &'a str,
    pub node_id: &'a str,
}

impl ResultKey {
    pub fn row_key(&self) -> RowKey<'_> {
        RowKey {
            namespace: &self.namespace,
            workflow_uid: &self.workflow_uid,
            node_id: &self.node_id,
        }
    }
}

impl Row {
    pub fn row_key(&self) -> RowKey<'_> {
        RowKey {
            namespace: &self.namespace,
            workflow_uid: &self.workflow_uid,
            node_id: &self.node_id,
        }
    }
}

/// A row of `changes`: a feed item as the feed serves it, under its revision.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Change {
    pub revision: i64,
    pub namespace: String,
    /// The feed item's JSON text.
    pub item: String,
}

impl Change {
    pub fn of(item: &FeedItem) -> Result<Change, Corrupt> {
        Ok(Change {
            revision: item.revision(),
            namespace: item.namespace().to_owned(),
            item: serde_json::to_string(item).map_err(|e| Corrupt(format!("feed item: {e}")))?,
        })
    }
}

/// What one transaction of the writer stores: each row's last state and every change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// The revision of the last change, the new head.
    pub head: i64,
    /// At most one per key: a statement cannot touch a row twice.
    pub rows: Vec<Row>,
    pub changes: Vec<Change>,
}

/// A batch decided: each write's outcome, in order, and what to store if anything changed.
#[derive(Debug)]
pub struct Planned {
    pub outcomes: Vec<Result<Written, Rejected>>,
    pub batch: Option<Batch>,
}

/// Decides `writes` in order, each on its row as the writes before it left it (`stored`
/// are the rows as the transaction found them), under revisions after `head`.
pub fn plan(
    writes: &[(&ResultKey, &Write)],
    mut head: i64,
    stored: Vec<Row>,
    policy: &ReportPolicy,
    now: i64,
) -> Result<Planned, Corrupt> {
    // Where each write's stored row is, if it has one.
    let found: Vec<Option<usize>> = {
        let index: HashMap<RowKey<'_>, usize> = stored
            .iter()
            .enumerate()
            .map(|(at, row)| (row.row_key(), at))
            .collect();
        writes
            .iter()
            .map(|(key, _)| index.get(&key.row_key()).copied())
            .collect()
    };
    let mut stored: Vec<Option<Row>> = stored.into_iter().map(Some).collect();
    let mut rows: HashMap<RowKey<'_>, Option<Row>> = HashMap::with_capacity(writes.len());
    for ((key, _), found) in writes.iter().zip(found) {
        rows.entry(key.row_key())
            .or_insert_with(|| found.and_then(|at| stored[at].take()));
    }
    let mut outcomes = Vec::with_capacity(writes.len());
    let mut changes = Vec::new();
    // The rows written, in the order of their first write.
    let mut written: Vec<RowKey<'_>> = Vec::new();
    let mut seen = HashSet::new();
    for (key, write) in writes {
        let id = key.row_key();
        let current = rows
            .get_mut(&id)
            .ok_or_else(|| Corrupt(format!("batch lost the row of {key:?}")))?;
        let outcome = match write.decide(current.as_ref(), key, policy, now) {
            Decision::Write(mut row) => {
                head += 1;
                row.revision = head;
                let outcome = if current.is_some() {
                    Outcome::Updated
                } else {
                    row.created_revision = head;
                    Outcome::Created
                };
                let result = row.clone().into_api()?;
                changes.push(Change::of(&FeedItem::Upserted {
                    revision: head,
                    result: Box::new(result.clone()),
                })?);
                *current = Some(row);
                if seen.insert(id) {
                    written.push(id);
                }
                Ok(Written { result, outcome })
            }
            Decision::Unchanged(row) => Ok(Written {
                result: row.into_api()?,
                outcome: Outcome::Unchanged,
            }),
            Decision::Frozen(row) => Err(Refusal::Frozen {
                current: Box::new(row.into_api()?),
            }
            .into()),
            Decision::Refuse(refusal) => Err(refusal.into()),
            Decision::Corrupt(detail) => Err(Corrupt(detail).into()),
        };
        outcomes.push(outcome);
    }
    if changes.is_empty() {
        return Ok(Planned {
            outcomes,
            batch: None,
        });
    }
    // Only a row's last state is stored; each of its writes is in the feed.
    let rows = written
        .iter()
        .filter_map(|id| rows.remove(id).flatten())
        .collect();
    Ok(Planned {
        outcomes,
        batch: Some(Batch {
            head,
            rows,
            changes,
        }),
    })
}

/// The identity of a deleted result, for its tombstone.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Deleted {
    pub namespace: String,
    pub workflow: String,
    pub workflow_uid: String,
    pub node_id: String,
}

/// The tombstones of `deleted`, under the revisions after `head`.
pub fn tombstones(head: i64, deleted: Vec<Deleted>) -> Result<Vec<Change>, Corrupt> {
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
