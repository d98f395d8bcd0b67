//! Negative controls: the product with one rule broken on purpose, here and nowhere else.
//! The checker must reject each with a counterexample; one that could not fail would
//! prove nothing. Each prints `control <name>: caught <property>, counterexample of <K>
//! steps`, then the counterexample.

use argo_results_client::controller::{Decision, PodPhase, decide};
use argo_results_model::check::control;
use argo_results_model::cron::{
    self, Cron, EVERY_DUE_TICK_RUNS, ONE_LIVE_HOLDER, SETTLED_NAMES_ITS_RUN,
};
use argo_results_model::results::{
    ACKNOWLEDGED_CONTENT_SHOWN, ACKNOWLEDGED_NEVER_LOST, Config, DELETED_STAYS_DELETED,
    DELETION_REACHES_FOLLOWERS, FAILED_NEVER_SUCCEEDED, FINAL_REFUSED_ONLY_WHEN_FROZEN,
    FROZEN_NEVER_CHANGES, Hooks, NO_HANG_AFTER_POD_ENDS, POD_WRITES_ONLY_ITS_NODE, POLICY, PodView,
    RESTORE_NOTICED, Results, STALE_NEVER_OVERWRITES, SUCCEEDED_HAS_ITS_OUTPUTS,
    SUCCEEDED_NEVER_FAILED, Template,
};
use argo_results_model::trace::{DECISIONS_FILE, Narrate, render};
use argo_results_proto::{ClaimState, NodeResult, ResultState};
use argo_results_rules::claim::{ClaimDecision, ClaimRow, SettleDecision};
use argo_results_rules::feed::FeedBounds;
use argo_results_rules::{NewClaim, Refusal, Rejected, Report, ReportPolicy, Settlement, Written};
use serde_json::Value;
use stateright::Model;

/// Checks `model` until `property` fails, and prints the counterexample. The rows the
/// counterexample gives must be in the shared decision table already: the regression test
/// that Rust and Go run for the bug the control puts back.
fn caught<M>(name: &str, model: M, property: &'static str)
where
    M: Model + Narrate + Clone + Send + Sync + 'static,
    M::State: Clone + std::fmt::Debug + std::hash::Hash + PartialEq + Send + Sync,
    M::Action: Clone + std::fmt::Debug + PartialEq,
{
    let path = control(name, model.clone(), property)
        .unwrap_or_else(|| panic!("control {name}: {property} was never broken"));
    println!("{}", render(&model, &path));
    let table = decision_table();
    for row in model.rows(path.last_state()) {
        assert!(
            table.iter().any(|case| same_case(case, &row)),
            "control {name}: not in {DECISIONS_FILE}: {row}"
        );
    }
}

fn decision_table() -> Vec<Value> {
    let path = format!("{}/../../{DECISIONS_FILE}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let table: Value = serde_json::from_str(&text).expect("the table is JSON");
    table["cases"].as_array().expect("a list of cases").clone()
}

/// `case` of the table asserts what `row` says, its name aside: the same pod and result,
/// the same decision and outputs, and a message the table gives as a fragment of the
/// decision's.
fn same_case(case: &Value, row: &Value) -> bool {
    let (want, got) = (&case["expect"], &row["expect"]);
    let message = match (want["message"].as_str(), got["message"].as_str()) {
        (None, None) => true,
        (Some(fragment), Some(message)) => message.contains(fragment),
        _ => false,
    };
    case["pod"] == row["pod"]
        && case["result"] == row["result"]
        && want["decision"] == got["decision"]
        && want["outputs"] == got["outputs"]
        && message
}

fn results(config: Config, hooks: Hooks) -> Results {
    Results::new(config, hooks)
}

/// The change set as first written settled a node only where v4.1.2 gives up on a task
/// result: the pod is gone (the missing-pod loop), or `wait` exited non-zero or the pod
/// was evicted (`assessNodeStatus`). A pod that ended otherwise waited forever.
#[test]
fn hang_terminal_pod_unsettled() {
    let hooks = Hooks {
        settles: |view: &PodView| view.phase == PodPhase::Gone || view.wait_failed || view.evicted,
        ..Hooks::product()
    };
    caught(
        "hang-terminal-pod-unsettled",
        results(Config::every_fault(Template::Container), hooks),
        NO_HANG_AFTER_POD_ENDS,
    );
}

/// The binding rule before the model had an impostor: the first report of the expected
/// pod name binds the row to its UID, whoever sent it, before the controller named the
/// UID it created.
#[test]
fn name_only_binding() {
    let hooks = Hooks {
        before_report: |row, report| {
            if row.pod_uid.is_none() && row.pod_name.as_deref() == Some(&report.pod_name) {
                row.pod_uid = Some(report.pod_uid.clone());
            }
        },
        ..Hooks::product()
    };
    caught(
        "name-only-binding",
        results(Config::two_nodes(), hooks),
        POD_WRITES_ONLY_ITS_NODE,
    );
}

/// A server that answers a report when it receives it, before its transaction commits.
#[test]
fn ack_before_commit() {
    let hooks = Hooks {
        ack_before_commit: true,
        ..Hooks::product()
    };
    caught(
        "ack-before-commit",
        results(Config::every_fault(Template::Container), hooks),
        ACKNOWLEDGED_NEVER_LOST,
    );
}

/// A merge that replaces the stored outputs with the patch instead of merging into them.
#[test]
fn merge_replaces_outputs() {
    let hooks = Hooks {
        before_report: |row, report| {
            if report.outputs.is_some() {
                row.outputs = None;
            }
        },
        ..Hooks::product()
    };
    caught(
        "merge-replaces-outputs",
        results(Config::every_fault(Template::Resource), hooks),
        SUCCEEDED_HAS_ITS_OUTPUTS,
    );
}

/// The report rule without `StaleSequence`: a live row's sequence is not compared with a
/// lower one, which is then written over it.
#[test]
fn stale_progress_written() {
    let hooks = Hooks {
        before_report: |row, report| {
            if !row.state.is_frozen() && report.sequence < row.sequence {
                row.sequence = None;
            }
        },
        ..Hooks::product()
    };
    caught(
        "stale-progress-written",
        results(Config::progress(), hooks),
        STALE_NEVER_OVERWRITES,
    );
}

/// The report rule without `SequenceReused`: a live row's sequence is not compared with an
/// equal one, so a report under it with other content is written.
#[test]
fn reused_sequence_written() {
    let hooks = Hooks {
        before_report: |row, report| {
            if !row.state.is_frozen() && report.sequence == row.sequence {
                row.sequence = None;
            }
        },
        ..Hooks::product()
    };
    caught(
        "reused-sequence-written",
        results(Config::progress(), hooks),
        ACKNOWLEDGED_CONTENT_SHOWN,
    );
}

/// A failed pod's completed result decides the node as a vanished pod's does, by the phase
/// `wait` reported: a pod evicted after its final report said Succeeded then succeeds.
fn by_report_when_failed(pod: PodPhase, result: Option<&NodeResult>) -> Decision {
    match result {
        Some(result) if pod == PodPhase::Failed && result.state == ResultState::Completed => {
            decide(PodPhase::Gone, Some(result))
        }
        _ => decide(pod, result),
    }
}

#[test]
fn failed_pod_decided_by_its_report() {
    let hooks = Hooks {
        decide: by_report_when_failed,
        ..Hooks::product()
    };
    caught(
        "failed-pod-decided-by-its-report",
        results(Config::every_fault(Template::Container), hooks),
        FAILED_NEVER_SUCCEEDED,
    );
}

/// A succeeded pod's completed result decides the node as a failed pod's does.
fn failed_when_succeeded(pod: PodPhase, result: Option<&NodeResult>) -> Decision {
    match pod {
        PodPhase::Succeeded => decide(PodPhase::Failed, result),
        _ => decide(pod, result),
    }
}

#[test]
fn succeeded_pod_decided_failed() {
    let hooks = Hooks {
        decide: failed_when_succeeded,
        ..Hooks::product()
    };
    caught(
        "succeeded-pod-decided-failed",
        results(Config::every_fault(Template::Container), hooks),
        SUCCEEDED_NEVER_FAILED,
    );
}

/// The frozen rule without its last clause: a final report that merges to nothing new is
/// a replay on an abandoned row too, and answered 2xx.
fn abandoned_final_answered_ok(report: &Report, outcome: &Result<Written, Rejected>) -> bool {
    let abandoned = matches!(
        outcome,
        Err(Rejected::Refused(Refusal::Frozen { current }))
            if current.state == ResultState::Abandoned
    );
    outcome.is_ok() || report.is_final && abandoned
}

#[test]
fn final_on_abandoned_row_answered_ok() {
    let hooks = Hooks {
        answers_ok: abandoned_final_answered_ok,
        ..Hooks::product()
    };
    caught(
        "final-on-abandoned-row-answered-ok",
        results(Config::late_requests(), hooks),
        ACKNOWLEDGED_NEVER_LOST,
    );
}

/// A replay judged by its sequence alone: a final report under the completed row's
/// sequence is answered as a replay whatever its outputs.
fn replay_by_sequence(report: &Report, outcome: &Result<Written, Rejected>) -> bool {
    let same_sequence = matches!(
        outcome,
        Err(Rejected::Refused(Refusal::Frozen { current }))
            if current.state == ResultState::Completed && current.sequence == report.sequence
    );
    outcome.is_ok() || same_sequence
}

#[test]
fn other_final_answered_as_replay() {
    let hooks = Hooks {
        answers_ok: replay_by_sequence,
        ..Hooks::product()
    };
    caught(
        "other-final-answered-as-replay",
        results(Config::late_requests(), hooks),
        ACKNOWLEDGED_CONTENT_SHOWN,
    );
}

/// An abandoned row judged as a live one: a final report arriving after the controller
/// settled the node is written.
#[test]
fn abandoned_row_takes_a_final() {
    let hooks = Hooks {
        before_report: |row, report| {
            if row.state == ResultState::Abandoned && report.is_final {
                row.state = ResultState::Reporting;
            }
        },
        ..Hooks::product()
    };
    caught(
        "abandoned-row-takes-a-final",
        results(Config::late_requests(), hooks),
        FROZEN_NEVER_CHANGES,
    );
}

/// The Go package's reporter as it was: `monitorProgress` goes on while `wait` sends its
/// final report, and its progress takes a later sequence.
#[test]
fn progress_after_final() {
    let hooks = Hooks {
        progress_after_final: true,
        ..Hooks::product()
    };
    caught(
        "progress-after-final",
        results(Config::every_fault(Template::Container), hooks),
        FINAL_REFUSED_ONLY_WHEN_FROZEN,
    );
}

/// The settle sites as the change set first wrote them: run once, on the pod's change, so
/// a settle that met `503` is never tried again.
#[test]
fn settle_503_not_retried() {
    let hooks = Hooks {
        requeues: false,
        ..Hooks::product()
    };
    caught(
        "settle-503-not-retried",
        results(Config::outage(), hooks),
        NO_HANG_AFTER_POD_ENDS,
    );
}

/// An expectation naming another pod's UID judged as if the row were live: a completed
/// result, written by a deleted pod's late final report while its node's pod was being
/// created again, is reset for the new pod, and the step's outputs with it.
#[test]
fn new_pod_resets_a_completed_row() {
    let hooks = Hooks {
        before_expect: |row, expectation| {
            if row.state == ResultState::Completed
                && expectation.pod_uid.is_some()
                && expectation.pod_uid != row.pod_uid
            {
                row.state = ResultState::Reporting;
            }
        },
        ..Hooks::product()
    };
    caught(
        "new-pod-resets-a-completed-row",
        results(Config::outage(), hooks),
        FROZEN_NEVER_CHANGES,
    );
}

/// A deletion that writes the rows' deletion but no tombstone in the feed.
#[test]
fn deletion_without_tombstones() {
    let hooks = Hooks {
        tombstones: false,
        ..Hooks::product()
    };
    caught(
        "deletion-without-tombstones",
        results(Config::deletion(Template::Container, 1), hooks),
        DELETION_REACHES_FOLLOWERS,
    );
}

/// Reports taken for nodes nobody registered: what keeps a deleted result deleted is that
/// its expectation went with it.
#[test]
fn late_report_recreates_a_deleted_row() {
    let hooks = Hooks {
        policy: ReportPolicy {
            require_expectation: false,
            ..POLICY
        },
        ..Hooks::product()
    };
    caught(
        "late-report-recreates-a-deleted-row",
        results(Config::deletion(Template::Container, 1), hooks),
        DELETED_STAYS_DELETED,
    );
}

/// A full page answered with the head as where to go on: the changes past the page are
/// never read.
fn full_page_skips_to_head(
    since: i64,
    epoch: Option<&str>,
    read: &FeedBounds,
) -> Result<i64, Refusal> {
    let next = argo_results_rules::feed::next_since(since, epoch, read)?;
    Ok(if read.more { read.head } else { next })
}

#[test]
fn full_page_skips_unread_changes() {
    let hooks = Hooks {
        feed_rule: full_page_skips_to_head,
        ..Hooks::product()
    };
    caught(
        "full-page-skips-unread-changes",
        results(Config::deletion(Template::Container, 1), hooks),
        RESTORE_NOTICED,
    );
}

/// The feed's rule before the model found it wanting: a reader ahead of the head is
/// answered as if it were at the head, and no epoch is compared.
fn trusts_position_ahead(
    since: i64,
    _epoch: Option<&str>,
    read: &FeedBounds,
) -> Result<i64, Refusal> {
    let mut kept = read.clone();
    kept.head = kept.head.max(since);
    argo_results_rules::feed::next_since(since, None, &kept)
}

#[test]
fn follower_trusts_position_ahead() {
    let hooks = Hooks {
        feed_rule: trusts_position_ahead,
        ..Hooks::product()
    };
    caught(
        "follower-trusts-position-ahead",
        results(Config::every_fault(Template::Container), hooks),
        RESTORE_NOTICED,
    );
}

/// A claim that takes a tick over while its holder's lease still runs.
fn claim_ignoring_lease(
    current: Option<&ClaimRow>,
    new: &NewClaim,
    claim_id: &str,
    now: i64,
) -> ClaimDecision {
    match current {
        Some(row) if row.state == ClaimState::Claimed => ClaimDecision::TakeOver(ClaimRow {
            claim_id: claim_id.to_owned(),
            claimed_at: now,
            lease_expires_at: now + new.lease_millis,
            takeovers: row.takeovers + 1,
            ..row.clone()
        }),
        _ => argo_results_rules::claim::claim(current, new, claim_id, now),
    }
}

#[test]
fn claim_ignores_lease() {
    let hooks = cron::Hooks {
        claim: claim_ignoring_lease,
        ..cron::Hooks::product()
    };
    caught(
        "claim-ignores-lease",
        Cron::new(cron::Config::ci(), hooks),
        ONE_LIVE_HOLDER,
    );
}

/// A settle compared by claim and state alone: one naming another run of the tick than
/// the one recorded is answered as a replay, and its claimant believes its run recorded.
fn settle_ignoring_the_run(
    current: Option<ClaimRow>,
    settlement: &Settlement,
    now: i64,
) -> SettleDecision {
    match current {
        Some(row) if row.claim_id == settlement.claim_id && row.state == ClaimState::Submitted => {
            SettleDecision::Unchanged(row)
        }
        _ => argo_results_rules::claim::settle(current, settlement, now),
    }
}

#[test]
fn settle_of_another_run_answered_as_replay() {
    let hooks = cron::Hooks {
        settle: settle_ignoring_the_run,
        ..cron::Hooks::product()
    };
    caught(
        "settle-of-another-run-answered-as-replay",
        Cron::new(cron::Config::another_run(), hooks),
        SETTLED_NAMES_ITS_RUN,
    );
}

/// Argo's cron scheduler as it is: a tick refused as held (`Tick::Held`) is never tried
/// again, so a holder that died inside its lease drops it.
#[test]
fn held_tick_dropped() {
    let hooks = cron::Hooks {
        retry_held: false,
        ..cron::Hooks::product()
    };
    caught(
        "held-tick-dropped",
        Cron::new(cron::Config::ci(), hooks),
        EVERY_DUE_TICK_RUNS,
    );
}
