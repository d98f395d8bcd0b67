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

#[cfg(test)]
mod tests {
    use argo_results_proto::ResultState;

    use super::*;
    use crate::request::Report;

    const POLICY: ReportPolicy = ReportPolicy {
        require_expectation: false,
        max_outputs_bytes: 1 << 20,
    };

    fn key(node_id: &str) -> ResultKey {
        ResultKey {
            namespace: "argo".into(),
            workflow: "wf".into(),
            workflow_uid: "uid-1".into(),
            node_id: node_id.into(),
        }
    }

    fn report(sequence: i64, is_final: bool, outputs: &str) -> Write {
        Write::Report(Report {
            pod_name: "wf-1".into(),
            pod_uid: "p1".into(),
            instance_id: None,
            sequence: Some(sequence),
            is_final,
            outputs: Some(outputs.into()),
            progress: None,
            phase: None,
            message: None,
        })
    }

    fn plan_of(writes: &[(ResultKey, Write)], head: i64, stored: Vec<Row>) -> Planned {
        let pairs: Vec<(&ResultKey, &Write)> = writes.iter().map(|(k, w)| (k, w)).collect();
        plan(&pairs, head, stored, &POLICY, 1).expect("no corrupt row")
    }

    fn outcome(planned: &Result<Written, Rejected>) -> (Outcome, i64) {
        match planned {
            Ok(written) => (written.outcome, written.result.revision),
            Err(rejected) => panic!("expected a write, got {rejected:?}"),
        }
    }

    fn feed_item(change: &Change) -> FeedItem {
        serde_json::from_str(&change.item).expect("a feed item")
    }

    /// The node and revision of an upsert, and the revision of its result.
    fn upserted(change: &Change) -> (String, i64, i64) {
        match feed_item(change) {
            FeedItem::Upserted { revision, result } => (result.node_id, revision, result.revision),
            other => panic!("expected an upsert, got {other:?}"),
        }
    }

    #[test]
    fn each_change_is_numbered_after_the_head_in_order() {
        let writes = [
            (key("a"), report(1, false, r#"{"x":1}"#)),
            (key("b"), report(1, true, "{}")),
            (key("a"), report(2, true, r#"{"y":2}"#)),
        ];
        let planned = plan_of(&writes, 10, Vec::new());
        let outcomes: Vec<_> = planned.outcomes.iter().map(outcome).collect();
        assert_eq!(
            outcomes,
            [
                (Outcome::Created, 11),
                (Outcome::Created, 12),
                (Outcome::Updated, 13)
            ]
        );
        let batch = planned.batch.expect("something changed");
        assert_eq!(batch.head, 13);
        // Every write is in the feed, the intermediate state of `a` included.
        let changes: Vec<_> = batch.changes.iter().map(upserted).collect();
        assert_eq!(
            changes,
            [
                ("a".into(), 11, 11),
                ("b".into(), 12, 12),
                ("a".into(), 13, 13)
            ]
        );
        assert!(
            batch
                .changes
                .iter()
                .all(|change| change.namespace == "argo")
        );
        // Only each row's last state is stored, in the order of its first write.
        let rows: Vec<_> = batch
            .rows
            .iter()
            .map(|row| {
                (
                    row.node_id.as_str(),
                    row.revision,
                    row.created_revision,
                    row.state,
                    row.outputs.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                (
                    "a",
                    13,
                    11,
                    ResultState::Completed,
                    Some(r#"{"x":1,"y":2}"#)
                ),
                ("b", 12, 12, ResultState::Completed, Some("{}")),
            ]
        );
    }

    #[test]
    fn a_write_is_judged_on_the_row_as_the_writes_before_it_left_it() {
        let writes = [
            (key("a"), report(2, false, r#"{"x":2}"#)),
            (key("a"), report(1, false, r#"{"x":1}"#)),
        ];
        let planned = plan_of(&writes, 0, Vec::new());
        assert!(matches!(
            planned.outcomes[1],
            Err(Rejected::Refused(Refusal::StaleSequence {
                given: 1,
                stored: 2
            }))
        ));
        let batch = planned.batch.expect("the first write changed a row");
        assert_eq!((batch.head, batch.changes.len()), (1, 1));
        assert_eq!(batch.rows[0].outputs.as_deref(), Some(r#"{"x":2}"#));
    }

    #[test]
    fn refused_and_unchanged_writes_number_nothing() {
        let done = plan_of(&[(key("a"), report(2, true, r#"{"x":1}"#))], 3, Vec::new())
            .batch
            .expect("a created row")
            .rows;
        let writes = [
            (key("a"), report(2, true, r#"{"x":1}"#)),
            (key("a"), report(3, false, r#"{"x":2}"#)),
            (key("b"), Write::Abandon("gone".into())),
        ];
        let planned = plan_of(&writes, 7, done);
        assert_eq!(outcome(&planned.outcomes[0]), (Outcome::Unchanged, 4));
        // A frozen row is refused with the row as stored, for the caller's `current`.
        assert!(matches!(
            &planned.outcomes[1],
            Err(Rejected::Refused(Refusal::Frozen { current }))
                if current.revision == 4 && current.state == ResultState::Completed
        ));
        assert!(matches!(
            &planned.outcomes[2],
            Err(Rejected::Refused(Refusal::NotFound { node_id })) if node_id == "b"
        ));
        assert!(planned.batch.is_none(), "nothing to commit");
    }

    #[test]
    fn a_refused_write_between_two_writes_takes_no_revision() {
        let writes = [
            (key("a"), report(2, false, r#"{"x":2}"#)),
            (key("b"), Write::Abandon("gone".into())),
            (key("a"), report(1, false, r#"{"x":1}"#)),
            (key("c"), report(1, true, "{}")),
        ];
        let planned = plan_of(&writes, 10, Vec::new());
        assert_eq!(outcome(&planned.outcomes[0]), (Outcome::Created, 11));
        assert!(matches!(
            &planned.outcomes[1],
            Err(Rejected::Refused(Refusal::NotFound { node_id })) if node_id == "b"
        ));
        assert!(matches!(
            planned.outcomes[2],
            Err(Rejected::Refused(Refusal::StaleSequence {
                given: 1,
                stored: 2
            }))
        ));
        assert_eq!(outcome(&planned.outcomes[3]), (Outcome::Created, 12));
        let batch = planned.batch.expect("two rows changed");
        assert_eq!(batch.head, 12);
        let changes: Vec<_> = batch.changes.iter().map(upserted).collect();
        assert_eq!(changes, [("a".into(), 11, 11), ("c".into(), 12, 12)]);
        let rows: Vec<_> = batch.rows.iter().map(|row| row.node_id.as_str()).collect();
        assert_eq!(rows, ["a", "c"]);
    }

    #[test]
    fn a_stored_row_is_updated_under_its_created_revision_and_an_unchanged_one_is_not_stored() {
        let first = [
            (key("a"), report(1, false, "{}")),
            (key("z"), report(1, false, "{}")),
        ];
        let stored = plan_of(&first, 3, Vec::new()).batch.expect("created").rows;
        let writes = [
            (key("z"), report(1, false, "{}")),
            (key("a"), report(2, true, r#"{"x":1}"#)),
        ];
        let planned = plan_of(&writes, 9, stored);
        assert_eq!(outcome(&planned.outcomes[0]), (Outcome::Unchanged, 5));
        assert_eq!(outcome(&planned.outcomes[1]), (Outcome::Updated, 10));
        let batch = planned.batch.expect("a changed");
        let rows: Vec<_> = batch
            .rows
            .iter()
            .map(|row| (row.node_id.as_str(), row.revision, row.created_revision))
            .collect();
        assert_eq!(rows, [("a", 10, 4)]);
        assert_eq!((batch.head, batch.changes.len()), (10, 1));
    }

    #[test]
    fn a_row_whose_outputs_do_not_merge_rejects_only_its_own_write_as_corrupt() {
        let mut stored = plan_of(&[(key("a"), report(1, false, "{}"))], 0, Vec::new())
            .batch
            .expect("created")
            .rows;
        stored[0].outputs = Some("{not json".into());
        let writes = [
            (key("a"), report(2, false, r#"{"x":1}"#)),
            (key("b"), report(1, false, "{}")),
        ];
        let planned = plan_of(&writes, 5, stored);
        assert!(matches!(
            &planned.outcomes[0],
            Err(Rejected::Corrupt(Corrupt(detail))) if detail.contains("outputs of a")
        ));
        assert_eq!(outcome(&planned.outcomes[1]), (Outcome::Created, 6));
        let batch = planned.batch.expect("b was created");
        let rows: Vec<_> = batch.rows.iter().map(|row| row.node_id.as_str()).collect();
        assert_eq!((batch.head, rows), (6, vec!["b"]));
    }

    fn deleted(node_id: &str) -> Deleted {
        Deleted {
            namespace: "argo".into(),
            workflow: "wf".into(),
            workflow_uid: "uid-1".into(),
            node_id: node_id.into(),
        }
    }

    #[test]
    fn a_tombstone_for_each_deleted_result_follows_the_head_in_order() {
        let changes = tombstones(7, vec![deleted("b"), deleted("a")]).expect("serializes");
        let items: Vec<_> = changes
            .iter()
            .map(|change| match feed_item(change) {
                FeedItem::Deleted {
                    revision,
                    namespace,
                    workflow,
                    workflow_uid,
                    node_id,
                } => {
                    assert_eq!(change.revision, revision);
                    assert_eq!(change.namespace, namespace);
                    (revision, namespace, workflow, workflow_uid, node_id)
                }
                other => panic!("expected a tombstone, got {other:?}"),
            })
            .collect();
        let tombstone = |revision: i64, node: &str| {
            (
                revision,
                "argo".to_owned(),
                "wf".to_owned(),
                "uid-1".to_owned(),
                node.to_owned(),
            )
        };
        assert_eq!(items, [tombstone(8, "b"), tombstone(9, "a")]);
        // The last tombstone's revision is the head they leave: one revision each.
        assert_eq!(changes.last().map(|change| change.revision), Some(7 + 2));
        assert!(tombstones(7, Vec::new()).expect("nothing").is_empty());
    }
}
