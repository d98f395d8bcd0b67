//! Negative controls: the product with one rule broken on purpose, here and nowhere else.
//! The checker must reject each with a counterexample; one that could not fail would
//! prove nothing. Each prints `control <name>: caught <property>, counterexample of <K>
//! steps`, then the counterexample.

use argo_results_client::controller::{Decision, PodPhase, decide};
use argo_results_model::check::control;
use argo_results_model::cron::{self, Cron, EVERY_DUE_TICK_RUNS, ONE_LIVE_HOLDER};
use argo_results_model::results::{
    ACKNOWLEDGED_CONTENT_SHOWN, ACKNOWLEDGED_NEVER_LOST, Config, FAILED_NEVER_SUCCEEDED, Hooks,
    NO_HANG_AFTER_POD_ENDS, POD_WRITES_ONLY_ITS_NODE, PodView, RESTORE_NOTICED, Results,
    STALE_NEVER_OVERWRITES, SUCCEEDED_HAS_ITS_OUTPUTS, Template,
};
use argo_results_model::trace::{DECISIONS_FILE, Narrate, render};
use argo_results_proto::{ClaimState, NodeResult, ResultState};
use argo_results_rules::claim::{ClaimDecision, ClaimRow};
use argo_results_rules::feed::FeedBounds;
use argo_results_rules::{NewClaim, Refusal};
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
