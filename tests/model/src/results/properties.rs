//! What must hold of the results protocol in every state the checker reaches (`always`),
//! and at the end of every run (`eventually`: every run of this world ends, so a hang is a
//! final state in which a node whose pod ended has no decision).

use std::collections::BTreeMap;

use argo_results_client::controller::{Decision, PodPhase};
use argo_results_proto::ResultState;
use argo_results_rules::{Report, Row};
use serde_json::value::RawValue;
use stateright::Property;

use super::pod::WORKFLOW_UID;
use super::{Results, World};

pub const ACKNOWLEDGED_NEVER_LOST: &str = "acknowledged-never-lost";
pub const SUCCEEDED_HAS_ITS_OUTPUTS: &str = "succeeded-has-its-outputs";
pub const STALE_NEVER_OVERWRITES: &str = "stale-never-overwrites";
pub const POD_WRITES_ONLY_ITS_NODE: &str = "pod-writes-only-its-node";
pub const DECIDES_ONLY_ON_COMMITTED: &str = "decides-only-on-committed";
pub const RESTORE_NOTICED: &str = "restore-noticed-never-skipped";
pub const NO_HANG_AFTER_POD_ENDS: &str = "no-hang-after-pod-ends";
pub const FINAL_REACHES_CONTROLLER: &str = "acknowledged-final-reaches-controller";
pub const FAILED_NEVER_SUCCEEDED: &str = "failed-pod-never-succeeded";
pub const ACKNOWLEDGED_CONTENT_SHOWN: &str = "acknowledged-content-shown";
pub const FROZEN_NEVER_CHANGES: &str = "frozen-row-never-changes";
pub const SUCCEEDED_NEVER_FAILED: &str = "succeeded-pod-never-failed";
pub const FINAL_REFUSED_ONLY_WHEN_FROZEN: &str = "final-refused-only-by-a-frozen-row";
pub const DELETION_REACHES_FOLLOWERS: &str = "deletion-reaches-every-follower";
pub const DELETED_STAYS_DELETED: &str = "deleted-row-never-comes-back";

pub fn all() -> Vec<Property<Results>> {
    vec![
        Property::always(ACKNOWLEDGED_NEVER_LOST, |model: &Results, world: &World| {
            model.nodes.iter().enumerate().all(|(i, node)| {
                world.controller.collected
                    || reflects(
                        world.server.store.rows.get(&node.node_id()),
                        &world.ghost.acked[i],
                    )
            })
        }),
        Property::always(
            ACKNOWLEDGED_CONTENT_SHOWN,
            |model: &Results, world: &World| {
                model.nodes.iter().enumerate().all(|(i, node)| {
                    world.controller.collected
                        || world.ghost.acked[i].last().is_none_or(|last| {
                            shows(world.server.store.rows.get(&node.node_id()), last)
                        })
                })
            },
        ),
        // Checked when the node is decided: a restore may later take the row back to
        // before a final report, and another final of the pod be stored then.
        Property::always(SUCCEEDED_HAS_ITS_OUTPUTS, |_: &Results, world: &World| {
            world.ghost.missing_outputs.is_none()
        }),
        Property::always(STALE_NEVER_OVERWRITES, |_: &Results, world: &World| {
            world.ghost.sequence_lowered.is_none()
        }),
        Property::always(FROZEN_NEVER_CHANGES, |_: &Results, world: &World| {
            world.ghost.frozen_changed.is_none()
        }),
        // A pod's final report is refused only where it can no longer matter: the row
        // completed already (a replay, or other content) or was abandoned once the pod
        // ended. Refused on a live row, the step's outputs are lost.
        Property::always(
            FINAL_REFUSED_ONLY_WHEN_FROZEN,
            |_: &Results, world: &World| world.ghost.final_refused.is_none(),
        ),
        Property::always(
            POD_WRITES_ONLY_ITS_NODE,
            |model: &Results, world: &World| {
                model.nodes.iter().zip(&world.pods).all(|(node, pod)| {
                    world
                        .server
                        .store
                        .rows
                        .get(&node.node_id())
                        .and_then(|row| row.pod_uid.as_deref())
                        .is_none_or(|uid| {
                            (0..=pod.generation).any(|generation| uid == node.pod_uid(generation))
                        })
                })
            },
        ),
        // Argo fails a node whose pod failed (evicted, say) whatever its `wait` reported.
        Property::always(FAILED_NEVER_SUCCEEDED, |_: &Results, world: &World| {
            world
                .controller
                .decided
                .iter()
                .zip(&world.ghost.decided_from)
                .all(|(decided, from)| {
                    !(*from == Some(PodPhase::Failed)
                        && matches!(decided, Some(Decision::Succeeded { .. })))
                })
        }),
        // Argo succeeds a node whose pod succeeded, unless its result says it failed.
        Property::always(SUCCEEDED_NEVER_FAILED, |_: &Results, world: &World| {
            world
                .controller
                .decided
                .iter()
                .zip(&world.ghost.decided_from)
                .all(|(decided, from)| match decided {
                    Some(Decision::Failed { outputs, .. } | Decision::Error { outputs, .. })
                        if *from == Some(PodPhase::Succeeded) =>
                    {
                        says_failed(outputs.as_deref())
                    }
                    _ => true,
                })
        }),
        // Once the workflow's results are deleted, no write brings one back (a restore
        // from a backup taken before does: that is what restoring means).
        Property::always(DELETED_STAYS_DELETED, |_: &Results, world: &World| {
            !world.controller.collected
                || world.ghost.restored_after_deletion
                || world.server.store.rows.is_empty()
        }),
        // After the deletion, a follower that has read the whole feed knows no deleted
        // result: the feed has a tombstone for each.
        Property::always(
            DELETION_REACHES_FOLLOWERS,
            |model: &Results, world: &World| {
                let Some(watcher) = &world.watcher else {
                    return true;
                };
                let mut read_on = watcher.clone();
                let caught_up = !model.read_feed(&world.server.store, &mut read_on);
                !(world.controller.collected && caught_up)
                    || model
                        .nodes
                        .iter()
                        .all(|node| watcher.result(WORKFLOW_UID, &node.node_id()).is_none())
            },
        ),
        Property::always(DECIDES_ONLY_ON_COMMITTED, |_: &Results, world: &World| {
            world
                .controller
                .decided
                .iter()
                .enumerate()
                .all(|(i, decided)| match outputs_of(decided) {
                    Some(outputs) => world.ghost.completed[i].contains(outputs),
                    None => true,
                })
        }),
        Property::always(RESTORE_NOTICED, |model: &Results, world: &World| {
            !caught_up(model, world)
                || model
                    .nodes
                    .iter()
                    .all(|node| agrees(world, &node.node_id()))
        }),
        Property::eventually(NO_HANG_AFTER_POD_ENDS, |_: &Results, world: &World| {
            finished(world)
        }),
        Property::eventually(FINAL_REACHES_CONTROLLER, |_: &Results, world: &World| {
            finished(world)
                && (0..world.pods.len()).all(|i| {
                    !world.ghost.final_acked[i]
                        || outputs_of(&world.controller.decided[i]).is_some()
                })
        }),
    ]
}

/// Every pod ended and every node is decided: the run is over. Once true, it stays true.
fn finished(world: &World) -> bool {
    world.pods.iter().all(|pod| pod.over()) && world.controller.decided.iter().all(Option::is_some)
}

/// The outputs carry a non-zero `exitCode`: the result says the step failed.
fn says_failed(outputs: Option<&str>) -> bool {
    let Some(text) = outputs else { return false };
    let outputs: serde_json::Value = serde_json::from_str(text).expect("outputs are JSON");
    outputs["exitCode"].as_str().is_some_and(|code| code != "0")
}

/// The outputs a decision takes from a completed result.
fn outputs_of(decision: &Option<Decision>) -> Option<&Option<String>> {
    match decision {
        Some(
            Decision::Succeeded { outputs }
            | Decision::Failed { outputs, .. }
            | Decision::Error { outputs, .. },
        ) => Some(outputs),
        _ => None,
    }
}

/// The stored row still carries every acknowledged report: the same pod, a sequence no
/// lower, `completed` once a final one was, and each output the reports sent.
pub fn reflects(row: Option<&Row>, acked: &[Report]) -> bool {
    acked.iter().all(|report| {
        row.is_some_and(|row| {
            row.pod_uid.as_deref() == Some(report.pod_uid.as_str())
                && row.sequence >= report.sequence
                && (!report.is_final || row.state == ResultState::Completed)
                && contains(row.outputs.as_deref(), report.outputs.as_deref())
        })
    })
}

/// The row shows what `report` set, or it holds a later report of the same pod (a higher
/// sequence): a pod's reports are acknowledged in the order it sends them, so the last one
/// acknowledged is what the row shows until a later one replaces it.
fn shows(row: Option<&Row>, report: &Report) -> bool {
    row.is_some_and(|row| {
        let set = |sent: &Option<String>, shown: &Option<String>| sent.is_none() || sent == shown;
        row.pod_uid.as_deref() == Some(report.pod_uid.as_str())
            && (row.sequence > report.sequence
                || row.sequence == report.sequence
                    && set(&report.progress, &row.progress)
                    && set(&report.phase, &row.phase)
                    && set(&report.message, &row.message)
                    && contains(row.outputs.as_deref(), report.outputs.as_deref()))
    })
}

/// Every top-level output `patch` sets is in `outputs` with the same text: the store keeps
/// each top-level value byte-exact, so a merged value is the value sent.
pub(super) fn contains(outputs: Option<&str>, patch: Option<&str>) -> bool {
    let Some(patch) = patch else { return true };
    let have: BTreeMap<String, &RawValue> = match outputs {
        Some(text) => serde_json::from_str(text).expect("outputs are a JSON object"),
        None => BTreeMap::new(),
    };
    let sent: BTreeMap<String, &RawValue> =
        serde_json::from_str(patch).expect("outputs are a JSON object");
    sent.iter()
        .all(|(key, value)| have.get(key).is_some_and(|v| v.get() == value.get()))
}

/// The controller has read all there is, as far as the feed tells it: a read now would
/// change nothing it knows.
fn caught_up(model: &Results, world: &World) -> bool {
    let mut known = world.controller.known.clone();
    !model.read_feed(&world.server.store, &mut known)
}

/// What the controller knows of a node is what the store holds of it.
fn agrees(world: &World, node_id: &str) -> bool {
    // Not followed: deleted, or the controller resumed without it (it died before the
    // workflow recorded its pod) and has not registered it again yet.
    let followed = world
        .controller
        .known
        .followed()
        .iter()
        .any(|workflow| workflow.uid == WORKFLOW_UID);
    if world.controller.collected || !followed {
        return true;
    }
    let known = world.controller.known.result(WORKFLOW_UID, node_id);
    let stored = world.server.store.rows.get(node_id);
    match (known, stored) {
        (None, None) => true,
        (Some(known), Some(row)) => {
            known.revision == row.revision
                && known.state == row.state
                && known.outputs.as_ref().map(|raw| raw.get()) == row.outputs.as_deref()
        }
        // A row the controller has not heard of yet: it was registered elsewhere, which
        // this model's controller never does.
        _ => false,
    }
}
