//! What a write does to a stored result row: a report, an expectation or an abandon.

use argo_results_proto::ResultState;
use serde_json::Value;

use crate::merge;
use crate::refusal::Refusal;
use crate::request::{Expectation, Report, ResultKey};
use crate::row::Row;

#[derive(Debug)]
pub enum Decision {
    /// Store this row under a new revision.
    Write(Row),
    /// Nothing changes; answer with the stored row.
    Unchanged(Row),
    /// Refused: the row is completed or abandoned.
    Frozen(Row),
    Refuse(Refusal),
    /// The stored row cannot be read (its outputs are not JSON).
    Corrupt(String),
}

/// Why a report ends before it writes anything.
#[derive(Debug)]
enum Stop {
    Refused(Refusal),
    Corrupt(String),
}

impl From<Refusal> for Stop {
    fn from(refusal: Refusal) -> Self {
        Stop::Refused(refusal)
    }
}

impl From<Stop> for Decision {
    fn from(stop: Stop) -> Self {
        match stop {
            Stop::Refused(refusal) => Decision::Refuse(refusal),
            Stop::Corrupt(detail) => Decision::Corrupt(detail),
        }
    }
}

/// How reports are judged, from the server's flags.
#[derive(Debug, Clone, Copy)]
pub struct ReportPolicy {
    /// `--require-expectation`: a pod may report only a node registered for it.
    pub require_expectation: bool,
    /// The largest merged `outputs` (`--max-body-bytes`).
    pub max_outputs_bytes: usize,
}

/// A write of a result row, as the writer queues it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Write {
    /// A wait container's report (docs/api.md section 2).
    Report(Report),
    /// A controller's expectation (docs/api.md section 3).
    Expect(Expectation),
    /// The controller gives up on the node, for this reason (docs/api.md section 3).
    Abandon(String),
}

impl Write {
    /// What this write does to `current`, the row of `key` as stored, at `now`.
    pub fn decide(
        &self,
        current: Option<&Row>,
        key: &ResultKey,
        policy: &ReportPolicy,
        now: i64,
    ) -> Decision {
        match self {
            Write::Report(report_) => report(current, key, report_, policy, now),
            Write::Expect(expectation) => expect(current, key, expectation, now),
            Write::Abandon(reason) => abandon(current, key, reason, now),
        }
    }
}

/// Two `outputs` texts are the same when they are equal as text or as JSON values, so a
/// replay re-serialized by another client is still recognised.
fn same_json(a: &Option<String>, b: &Option<String>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) if a != b => {
            match (
                serde_json::from_str::<Value>(a),
                serde_json::from_str::<Value>(b),
            ) {
                (Ok(a), Ok(b)) => a == b,
                _ => false,
            }
        }
        _ => a == b,
    }
}

/// What a report carries: the fields that a final replay must repeat.
fn same_content(a: &Row, b: &Row) -> bool {
    a.progress == b.progress
        && a.phase == b.phase
        && a.message == b.message
        && same_json(&a.outputs, &b.outputs)
}

/// Everything a write can change but its timestamps and revision.
fn same_state(a: &Row, b: &Row) -> bool {
    a.state == b.state
        && a.pod_name == b.pod_name
        && a.pod_uid == b.pod_uid
        && a.instance_id == b.instance_id
        && a.sequence == b.sequence
        && same_content(a, b)
}

fn check_workflow(current: &Row, key: &ResultKey) -> Result<(), Refusal> {
    if current.workflow == key.workflow {
        Ok(())
    } else {
        Err(Refusal::WorkflowMismatch {
            workflow_uid: current.workflow_uid.clone(),
            stored: current.workflow.clone(),
            given: key.workflow.clone(),
        })
    }
}

/// The row as it would be once `report` is applied: present fields replace stored ones,
/// and `outputs` is merged into the stored outputs (RFC 7386).
fn apply(mut row: Row, report: &Report, policy: &ReportPolicy, now: i64) -> Result<Row, Stop> {
    row.pod_name = Some(report.pod_name.clone());
    row.pod_uid = Some(report.pod_uid.clone());
    if report.instance_id.is_some() {
        row.instance_id.clone_from(&report.instance_id);
    }
    if report.sequence.is_some() {
        row.sequence = report.sequence;
    }
    if let Some(patch) = &report.outputs {
        let merged = merge::merge(row.outputs.as_deref(), patch)
            .map_err(|e| Stop::Corrupt(format!("outputs of {} do not merge: {e}", row.node_id)))?;
        if merged.len() > policy.max_outputs_bytes {
            return Err(Refusal::OutputsTooLarge {
                size: merged.len(),
                limit: policy.max_outputs_bytes,
            }
            .into());
        }
        row.outputs = Some(merged);
    }
    if report.progress.is_some() {
        row.progress.clone_from(&report.progress);
    }
    if report.phase.is_some() {
        row.phase.clone_from(&report.phase);
    }
    if report.message.is_some() {
        row.message.clone_from(&report.message);
    }
    if report.is_final {
        row.state = ResultState::Completed;
        row.completed_at = Some(now);
    } else {
        row.state = ResultState::Reporting;
    }
    row.updated_at = now;
    Ok(row)
}

fn decide_report(
    current: &Row,
    key: &ResultKey,
    report: &Report,
    policy: &ReportPolicy,
    now: i64,
) -> Result<Decision, Stop> {
    check_workflow(current, key)?;
    if policy.require_expectation && current.pod_name.as_deref() != Some(&report.pod_name) {
        return Err(Refusal::NotExpected {
            node_id: current.node_id.clone(),
            pod: report.pod_name.clone(),
            expected: current.pod_name.clone(),
        }
        .into());
    }
    if policy.require_expectation && current.pod_uid.is_none() {
        return Err(Refusal::NotYetBound {
            node_id: current.node_id.clone(),
        }
        .into());
    }
    if let Some(bound) = &current.pod_uid
        && *bound != report.pod_uid
    {
        return Err(Refusal::PodMismatch {
            node_id: current.node_id.clone(),
            bound: current.pod_name.clone().unwrap_or_else(|| bound.clone()),
            given: report.pod_uid.clone(),
        }
        .into());
    }
    if let (Some(stored), Some(given)) = (&current.instance_id, &report.instance_id)
        && stored != given
    {
        return Err(Refusal::InstanceMismatch {
            stored: stored.clone(),
            given: given.clone(),
        }
        .into());
    }
    let next = apply(current.clone(), report, policy, now)?;
    if current.state.is_frozen() {
        // A write that changes nothing once merged is a replay, whatever its sequence; a
        // final report cannot turn an abandoned result into a completed one.
        let replay = same_content(current, &next)
            && (!report.is_final || current.state == ResultState::Completed);
        return Ok(if replay {
            Decision::Unchanged(current.clone())
        } else {
            Decision::Frozen(current.clone())
        });
    }
    if let (Some(stored), Some(given)) = (current.sequence, report.sequence) {
        if given < stored {
            return Err(Refusal::StaleSequence { given, stored }.into());
        }
        if given == stored && !same_state(current, &next) {
            return Err(Refusal::SequenceReused { given }.into());
        }
    }
    Ok(if same_state(current, &next) {
        Decision::Unchanged(current.clone())
    } else {
        Decision::Write(next)
    })
}

/// A wait container's report (docs/api.md section 2).
pub fn report(
    current: Option<&Row>,
    key: &ResultKey,
    report: &Report,
    policy: &ReportPolicy,
    now: i64,
) -> Decision {
    let decided = match current {
        Some(current) => decide_report(current, key, report, policy, now),
        None if policy.require_expectation => Err(Refusal::NotExpected {
            node_id: key.node_id.clone(),
            pod: report.pod_name.clone(),
            expected: None,
        }
        .into()),
        None => apply(
            Row::new(key, ResultState::Reporting, now),
            report,
            policy,
            now,
        )
        .map(Decision::Write),
    };
    decided.unwrap_or_else(Decision::from)
}

/// A controller's expectation (docs/api.md section 3). A new pod (another name, or another UID)
/// resets a live row for that pod; a frozen row keeps its result.
pub fn expect(
    current: Option<&Row>,
    key: &ResultKey,
    expectation: &Expectation,
    now: i64,
) -> Decision {
    let Some(current) = current else {
        let mut row = Row::new(key, ResultState::Expected, now);
        row.pod_name = Some(expectation.pod_name.clone());
        row.pod_uid.clone_from(&expectation.pod_uid);
        return Decision::Write(row);
    };
    if let Err(refusal) = check_workflow(current, key) {
        return Decision::Refuse(refusal);
    }
    let renamed = current.pod_name.as_deref() != Some(&expectation.pod_name);
    let new_pod = renamed
        || match (&expectation.pod_uid, &current.pod_uid) {
            (Some(given), Some(bound)) => given != bound,
            (Some(_), None) => true,
            // A pod about to be created again under the same name (Argo restarts pods that
            // failed before running): while nothing was reported, the old UID is dropped
            // so that the new pod's first report is not refused before the controller
            // names its UID.
            (None, Some(_)) => current.state == ResultState::Expected,
            (None, None) => false,
        };
    if !new_pod {
        return Decision::Unchanged(current.clone());
    }
    if current.state.is_frozen() {
        return Decision::Frozen(current.clone());
    }
    let mut row = Row::new(key, ResultState::Expected, now);
    row.created_at = current.created_at;
    row.created_revision = current.created_revision;
    row.instance_id.clone_from(&current.instance_id);
    row.pod_name = Some(expectation.pod_name.clone());
    row.pod_uid.clone_from(&expectation.pod_uid);
    Decision::Write(row)
}

/// The controller gives up on a node whose pod is gone. A completed result is kept, and
/// the refusal carries it so the controller can use its outputs.
pub fn abandon(current: Option<&Row>, key: &ResultKey, reason: &str, now: i64) -> Decision {
    let Some(current) = current else {
        return Decision::Refuse(Refusal::NotFound {
            node_id: key.node_id.clone(),
        });
    };
    if let Err(refusal) = check_workflow(current, key) {
        return Decision::Refuse(refusal);
    }
    match current.state {
        ResultState::Abandoned => Decision::Unchanged(current.clone()),
        ResultState::Completed => Decision::Frozen(current.clone()),
        ResultState::Expected | ResultState::Reporting => {
            let mut row = current.clone();
            row.state = ResultState::Abandoned;
            row.abandon_reason = Some(reason.to_owned());
            row.updated_at = now;
            Decision::Write(row)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIRST_WRITER: ReportPolicy = ReportPolicy {
        require_expectation: false,
        max_outputs_bytes: 1 << 20,
    };
    const REQUIRED: ReportPolicy = ReportPolicy {
        require_expectation: true,
        ..FIRST_WRITER
    };

    fn key() -> ResultKey {
        ResultKey {
            namespace: "argo".into(),
            workflow: "wf".into(),
            workflow_uid: "uid-1".into(),
            node_id: "wf-1".into(),
        }
    }

    fn report_from(pod_uid: &str, sequence: Option<i64>, is_final: bool, outputs: &str) -> Report {
        Report {
            pod_name: "wf-1".into(),
            pod_uid: pod_uid.into(),
            instance_id: None,
            sequence,
            is_final,
            outputs: Some(outputs.into()),
            progress: None,
            phase: None,
            message: None,
        }
    }

    fn written(decision: Decision) -> Row {
        match decision {
            Decision::Write(row) => row,
            other => panic!("expected a write, got {other:?}"),
        }
    }

    fn first(report_: &Report) -> Row {
        written(report(None, &key(), report_, &FIRST_WRITER, 1))
    }

    #[test]
    fn a_final_replay_with_other_key_order_is_unchanged() {
        let stored = first(&report_from("p1", Some(1), true, r#"{"a":1,"b":2}"#));
        let replay = report_from("p1", Some(9), true, r#"{ "b": 2, "a": 1 }"#);
        assert!(matches!(
            report(Some(&stored), &key(), &replay, &FIRST_WRITER, 2),
            Decision::Unchanged(_)
        ));
        // A patch whose keys are already stored with these values changes nothing either.
        let part = report_from("p1", Some(9), false, r#"{"a":1}"#);
        assert!(matches!(
            report(Some(&stored), &key(), &part, &FIRST_WRITER, 2),
            Decision::Unchanged(_)
        ));
        let other = report_from("p1", Some(9), true, r#"{"a":2}"#);
        assert!(matches!(
            report(Some(&stored), &key(), &other, &FIRST_WRITER, 2),
            Decision::Frozen(_)
        ));
    }

    #[test]
    fn outputs_merge_and_absent_fields_keep_stored_ones() {
        let first = first(&report_from("p1", Some(1), false, r#"{"x":1}"#));
        let mut progress = report_from("p1", Some(2), false, "");
        progress.outputs = None;
        progress.progress = Some("1/2".into());
        let next = written(report(Some(&first), &key(), &progress, &FIRST_WRITER, 2));
        assert_eq!(next.outputs.as_deref(), Some(r#"{"x":1}"#));
        assert_eq!(next.progress.as_deref(), Some("1/2"));
        assert_eq!(next.sequence, Some(2));
        let more = report_from("p1", Some(3), true, r#"{"y":[2]}"#);
        let done = written(report(Some(&next), &key(), &more, &FIRST_WRITER, 3));
        assert_eq!(done.outputs.as_deref(), Some(r#"{"x":1,"y":[2]}"#));
    }

    #[test]
    fn merged_outputs_are_bounded() {
        let policy = ReportPolicy {
            max_outputs_bytes: 16,
            ..FIRST_WRITER
        };
        let stored = first(&report_from("p1", Some(1), false, r#"{"a":"12345"}"#));
        let more = report_from("p1", Some(2), false, r#"{"b":"12345"}"#);
        assert!(matches!(
            report(Some(&stored), &key(), &more, &policy, 2),
            Decision::Refuse(Refusal::OutputsTooLarge {
                size: 25,
                limit: 16
            })
        ));
    }

    #[test]
    fn a_final_report_cannot_complete_an_abandoned_result() {
        let mut abandoned = first(&report_from("p1", Some(1), false, "{}"));
        abandoned.state = ResultState::Abandoned;
        let late = report_from("p1", Some(2), true, "{}");
        assert!(matches!(
            report(Some(&abandoned), &key(), &late, &FIRST_WRITER, 2),
            Decision::Frozen(row) if row == abandoned
        ));
    }

    #[test]
    fn with_required_expectations_only_the_registered_pod_reports() {
        let mut report_ = report_from("p1", Some(1), true, "{}");
        assert!(matches!(
            report(None, &key(), &report_, &REQUIRED, 1),
            Decision::Refuse(Refusal::NotExpected { node_id, pod, expected: None })
                if node_id == "wf-1" && pod == "wf-1"
        ));
        let expectation = Expectation {
            pod_name: "wf-main-1".into(),
            pod_uid: None,
        };
        let expected = written(expect(None, &key(), &expectation, 1));
        assert!(matches!(
            report(Some(&expected), &key(), &report_, &REQUIRED, 2),
            Decision::Refuse(Refusal::NotExpected { node_id, pod, expected: Some(expected) })
                if node_id == "wf-1" && pod == "wf-1" && expected == "wf-main-1"
        ));
        // The right name, before the controller named the pod's UID: an impostor of that
        // name could be first, so nobody binds the row but the controller.
        report_.pod_name = "wf-main-1".into();
        assert!(matches!(
            report(Some(&expected), &key(), &report_, &REQUIRED, 2),
            Decision::Refuse(Refusal::NotYetBound { node_id }) if node_id == "wf-1"
        ));
        let with_uid = Expectation {
            pod_uid: Some("p1".into()),
            ..expectation
        };
        let registered = written(expect(Some(&expected), &key(), &with_uid, 2));
        let stored = written(report(Some(&registered), &key(), &report_, &REQUIRED, 3));
        assert_eq!(stored.state, ResultState::Completed);
        report_.pod_uid = "p2".into();
        assert!(matches!(
            report(Some(&registered), &key(), &report_, &REQUIRED, 3),
            Decision::Refuse(Refusal::PodMismatch { node_id, bound, given })
                if node_id == "wf-1" && bound == "wf-main-1" && given == "p2"
        ));
    }

    /// A live row bound to pod `p1`, last reported at `sequence` with `outputs`.
    fn live(sequence: i64, outputs: &str) -> Row {
        first(&report_from("p1", Some(sequence), false, outputs))
    }

    #[test]
    fn a_lower_sequence_never_overwrites_a_live_row() {
        let stored = live(3, r#"{"a":3}"#);
        let late = report_from("p1", Some(2), false, r#"{"a":2}"#);
        assert!(matches!(
            report(Some(&stored), &key(), &late, &FIRST_WRITER, 2),
            Decision::Refuse(Refusal::StaleSequence {
                given: 2,
                stored: 3
            })
        ));
        // Even when it would change nothing: its sequence says it was overtaken.
        let late_replay = report_from("p1", Some(2), false, r#"{"a":3}"#);
        assert!(matches!(
            report(Some(&stored), &key(), &late_replay, &FIRST_WRITER, 2),
            Decision::Refuse(Refusal::StaleSequence {
                given: 2,
                stored: 3
            })
        ));
    }

    #[test]
    fn a_sequence_reused_with_other_content_is_refused_on_a_live_row() {
        let stored = live(2, r#"{"a":1}"#);
        let other = report_from("p1", Some(2), false, r#"{"a":2}"#);
        assert!(matches!(
            report(Some(&stored), &key(), &other, &FIRST_WRITER, 2),
            Decision::Refuse(Refusal::SequenceReused { given: 2 })
        ));
        // The same sequence made final is other content too: a retry repeats its report.
        let made_final = report_from("p1", Some(2), true, r#"{"a":1}"#);
        assert!(matches!(
            report(Some(&stored), &key(), &made_final, &FIRST_WRITER, 2),
            Decision::Refuse(Refusal::SequenceReused { given: 2 })
        ));
        let retry = report_from("p1", Some(2), false, r#"{"a":1}"#);
        assert!(matches!(
            report(Some(&stored), &key(), &retry, &FIRST_WRITER, 2),
            Decision::Unchanged(row) if row == stored
        ));
    }

    #[test]
    fn a_frozen_row_answers_any_sequence_with_its_result_never_a_sequence_refusal() {
        let done = first(&report_from("p1", Some(2), true, r#"{"a":1}"#));
        let lower_other = report_from("p1", Some(1), true, r#"{"a":2}"#);
        assert!(matches!(
            report(Some(&done), &key(), &lower_other, &FIRST_WRITER, 2),
            Decision::Frozen(row) if row == done
        ));
        let lower_replay = report_from("p1", Some(1), true, r#"{"a":1}"#);
        assert!(matches!(
            report(Some(&done), &key(), &lower_replay, &FIRST_WRITER, 2),
            Decision::Unchanged(row) if row == done
        ));
    }

    #[test]
    fn without_required_expectations_the_first_pod_to_report_binds_the_row() {
        let stored = live(1, "{}");
        let intruder = report_from("p2", Some(2), false, r#"{"a":1}"#);
        assert!(matches!(
            report(Some(&stored), &key(), &intruder, &FIRST_WRITER, 2),
            Decision::Refuse(Refusal::PodMismatch { node_id, bound, given })
                if node_id == "wf-1" && bound == "wf-1" && given == "p2"
        ));
        // Once an expectation names another pod UID, the pod that reported first is the
        // other one.
        let restart = Expectation {
            pod_name: "wf-1".into(),
            pod_uid: Some("p2".into()),
        };
        let reset = written(expect(Some(&stored), &key(), &restart, 2));
        let old_pod = report_from("p1", Some(2), false, r#"{"a":1}"#);
        assert!(matches!(
            report(Some(&reset), &key(), &old_pod, &FIRST_WRITER, 3),
            Decision::Refuse(Refusal::PodMismatch { given, .. }) if given == "p1"
        ));
    }

    #[test]
    fn stored_outputs_that_are_not_json_make_a_report_corrupt_not_a_write() {
        let mut stored = live(1, "{}");
        stored.outputs = Some("{not json".into());
        let next = report_from("p1", Some(2), false, r#"{"a":1}"#);
        assert!(matches!(
            report(Some(&stored), &key(), &next, &FIRST_WRITER, 2),
            Decision::Corrupt(detail) if detail.contains("outputs of wf-1")
        ));
    }

    #[test]
    fn a_completed_row_refuses_a_later_report() {
        let done = first(&report_from("p1", Some(2), true, r#"{"a":1}"#));
        let progress = report_from("p1", Some(3), false, r#"{"late":1}"#);
        let other_final = report_from("p1", Some(3), true, r#"{"a":2}"#);
        for later in [progress, other_final] {
            assert!(matches!(
                report(Some(&done), &key(), &later, &FIRST_WRITER, 2),
                Decision::Frozen(row) if row == done
            ));
        }
    }

    #[test]
    fn a_replay_with_other_outputs_is_not_unchanged() {
        let done = first(&report_from("p1", Some(2), true, r#"{"a":1,"b":2}"#));
        // Another value, another member, another type: each is other content.
        for outputs in [
            r#"{"a":1,"b":3}"#,
            r#"{"c":null,"a":1,"b":2,"d":0}"#,
            r#"{"b":"2"}"#,
        ] {
            let replay = report_from("p1", Some(2), true, outputs);
            assert!(
                matches!(
                    report(Some(&done), &key(), &replay, &FIRST_WRITER, 2),
                    Decision::Frozen(_)
                ),
                "{outputs}"
            );
        }
    }

    #[test]
    fn another_controller_instance_is_refused() {
        let mut with_instance = report_from("p1", Some(1), false, "{}");
        with_instance.instance_id = Some("ctrl-a".into());
        let stored = first(&with_instance);
        let mut other = report_from("p1", Some(2), false, r#"{"a":1}"#);
        other.instance_id = Some("ctrl-b".into());
        assert!(matches!(
            report(Some(&stored), &key(), &other, &FIRST_WRITER, 2),
            Decision::Refuse(Refusal::InstanceMismatch { stored, given })
                if stored == "ctrl-a" && given == "ctrl-b"
        ));
    }

    #[test]
    fn a_workflow_uid_stored_under_another_name_is_refused() {
        let stored = live(1, "{}");
        let renamed = ResultKey {
            workflow: "wf-other".into(),
            ..key()
        };
        let mismatch = |decision| {
            matches!(
                decision,
                Decision::Refuse(Refusal::WorkflowMismatch { ref workflow_uid, ref stored, ref given })
                    if workflow_uid == "uid-1" && stored == "wf" && given == "wf-other"
            )
        };
        let next = report_from("p1", Some(2), false, "{}");
        assert!(mismatch(report(
            Some(&stored),
            &renamed,
            &next,
            &FIRST_WRITER,
            2
        )));
        let expectation = Expectation {
            pod_name: "wf-1".into(),
            pod_uid: Some("p2".into()),
        };
        assert!(mismatch(expect(Some(&stored), &renamed, &expectation, 2)));
        assert!(mismatch(abandon(Some(&stored), &renamed, "gone", 2)));
    }

    #[test]
    fn abandoning_nothing_is_not_found_and_a_completed_result_stays() {
        assert!(matches!(
            abandon(None, &key(), "gone", 1),
            Decision::Refuse(Refusal::NotFound { node_id }) if node_id == "wf-1"
        ));
        let done = first(&report_from("p1", Some(2), true, r#"{"a":1}"#));
        assert!(matches!(
            abandon(Some(&done), &key(), "gone", 2),
            Decision::Frozen(row) if row == done
        ));
        let abandoned = written(abandon(Some(&live(1, "{}")), &key(), "gone", 2));
        assert_eq!(
            (abandoned.state, abandoned.abandon_reason.as_deref()),
            (ResultState::Abandoned, Some("gone"))
        );
        assert!(matches!(
            abandon(Some(&abandoned), &key(), "again", 3),
            Decision::Unchanged(row) if row == abandoned
        ));
    }

    #[test]
    fn a_frozen_row_refuses_an_expectation_naming_another_pod() {
        let done = first(&report_from("p1", Some(2), true, r#"{"a":1}"#));
        let mut abandoned = done.clone();
        abandoned.state = ResultState::Abandoned;
        let same = Expectation {
            pod_name: "wf-1".into(),
            pod_uid: Some("p1".into()),
        };
        let other_uid = Expectation {
            pod_uid: Some("p2".into()),
            ..same.clone()
        };
        let other_name = Expectation {
            pod_name: "wf-main-1".into(),
            pod_uid: None,
        };
        for frozen in [&done, &abandoned] {
            assert!(matches!(
                expect(Some(frozen), &key(), &same, 3),
                Decision::Unchanged(row) if row == *frozen
            ));
            for other in [&other_uid, &other_name] {
                assert!(
                    matches!(
                        expect(Some(frozen), &key(), other, 3),
                        Decision::Frozen(row) if row == *frozen
                    ),
                    "{:?} {other:?}",
                    frozen.state
                );
            }
        }
    }

    #[test]
    fn an_expectation_for_a_new_pod_resets_a_live_row() {
        let live = first(&report_from("p1", Some(3), false, "{}"));
        let restart = Expectation {
            pod_name: "wf-1".into(),
            pod_uid: Some("p2".into()),
        };
        let reset = written(expect(Some(&live), &key(), &restart, 2));
        assert_eq!(reset.state, ResultState::Expected);
        assert_eq!(reset.pod_uid.as_deref(), Some("p2"));
        assert_eq!(reset.sequence, None);
        assert_eq!(reset.outputs, None);
        assert_eq!(reset.created_at, live.created_at);
        let again = Expectation {
            pod_name: "wf-1".into(),
            pod_uid: None,
        };
        assert!(
            matches!(
                expect(Some(&live), &key(), &again, 2),
                Decision::Unchanged(_)
            ),
            "a reported row keeps its pod"
        );
        let unreported = written(expect(Some(&reset), &key(), &again, 3));
        assert_eq!(unreported.pod_uid, None, "a pod created again may bind");
        let renamed = Expectation {
            pod_name: "wf-main-1".into(),
            pod_uid: None,
        };
        let reset = written(expect(Some(&live), &key(), &renamed, 2));
        assert_eq!(
            (reset.pod_name.as_deref(), reset.pod_uid),
            (Some("wf-main-1"), None)
        );
    }

    #[test]
    fn a_final_replay_with_other_whitespace_or_key_order_in_an_array_is_unchanged() {
        let done = first(&report_from(
            "p1",
            Some(2),
            true,
            r#"{"a":[{"x":1,"y":2}],"b":[1,2]}"#,
        ));
        let replay = report_from(
            "p1",
            Some(2),
            true,
            r#"{"a":[{"y":2, "x":1}],"b":[ 1, 2 ]}"#,
        );
        assert!(matches!(
            report(Some(&done), &key(), &replay, &FIRST_WRITER, 3),
            Decision::Unchanged(row) if row == done
        ));
        let other = report_from(
            "p1",
            Some(2),
            true,
            r#"{"a":[{"y":2, "x":3}],"b":[ 1, 2 ]}"#,
        );
        assert!(matches!(
            report(Some(&done), &key(), &other, &FIRST_WRITER, 3),
            Decision::Frozen(row) if row == done
        ));
    }

    #[test]
    fn a_retry_without_outputs_is_unchanged_even_over_outputs_that_are_not_json() {
        let mut stored = live(2, "{}");
        stored.outputs = Some("{not json".into());
        let mut retry = report_from("p1", Some(2), false, "");
        retry.outputs = None;
        assert!(matches!(
            report(Some(&stored), &key(), &retry, &FIRST_WRITER, 3),
            Decision::Unchanged(row) if row == stored
        ));
    }

    #[test]
    fn merged_outputs_may_reach_the_limit_but_not_pass_it() {
        let stored = first(&report_from("p1", Some(1), false, r#"{"a":"12345"}"#));
        let more = report_from("p1", Some(2), false, r#"{"b":"12345"}"#);
        let at_limit = ReportPolicy {
            max_outputs_bytes: 25,
            ..FIRST_WRITER
        };
        let next = written(report(Some(&stored), &key(), &more, &at_limit, 2));
        assert_eq!(
            next.outputs.as_deref(),
            Some(r#"{"a":"12345","b":"12345"}"#)
        );
        let one_byte_short = ReportPolicy {
            max_outputs_bytes: 24,
            ..FIRST_WRITER
        };
        assert!(matches!(
            report(Some(&stored), &key(), &more, &one_byte_short, 2),
            Decision::Refuse(Refusal::OutputsTooLarge {
                size: 25,
                limit: 24
            })
        ));
    }
}
