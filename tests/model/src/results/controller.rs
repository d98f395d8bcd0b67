//! The workflow controller as the change set for Argo runs it (`docs/argo-upstream.md`,
//! "The controller"): it registers each node before and after creating its pod, follows
//! the feed with the reference reconciler's own cache (`Known`, `executor-client`), resumes
//! from the workflows in flight after a crash, and decides each node with the real
//! `decide`. Its calls to the server are one transaction each, answered as the HTTP layer
//! answers them.

use argo_results_client::ClientError;
use argo_results_client::controller::known::Known;
use argo_results_client::controller::{Decision, PodPhase, WorkflowRef};
use argo_results_proto::{NodeResult, Problem, ProblemCode};
use argo_results_rules::{Expectation, Refusal, Rejected, Write, Written};
use serde_json::value::RawValue;

use super::pod::{Ending, NAMESPACE, WORKFLOW, WORKFLOW_UID};
use super::properties::contains;
use super::{Action, Pod, Results, World};

/// What the pod informer shows of a pod: its phase, and what the change set's settle
/// sites read besides (`wait` exited non-zero; evicted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PodView {
    pub phase: PodPhase,
    pub wait_failed: bool,
    pub evicted: bool,
}

/// How far the controller got with a node's pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Registration {
    None,
    /// Registered by name, then created (`submitPod`): nothing can report in between.
    Created,
    /// Registered again with the created pod's UID.
    Bound,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Controller {
    pub known: Known,
    pub pods: Vec<Option<PodView>>,
    pub registered: Vec<Registration>,
    /// Kept in the Workflow's status, so a restart keeps it.
    pub decided: Vec<Option<Decision>>,
    /// The workflow's results were deleted.
    pub collected: bool,
}

pub(super) fn workflow() -> WorkflowRef {
    WorkflowRef {
        namespace: NAMESPACE.into(),
        name: WORKFLOW.into(),
        uid: WORKFLOW_UID.into(),
    }
}

/// A write's outcome as the client sees it: the stored result, or the problem the server's
/// HTTP layer makes of the refusal (`409 already_completed` carries the frozen row).
fn answer(outcome: Result<Written, Rejected>) -> Result<NodeResult, ClientError> {
    let problem = |status: u16, code: ProblemCode, current: Option<Box<RawValue>>| {
        Err(ClientError::Api(Box::new(Problem {
            problem_type: "about:blank".into(),
            title: String::new(),
            status,
            code,
            detail: String::new(),
            field: None,
            current,
            revision: None,
            epoch: None,
        })))
    };
    match outcome {
        Ok(written) => Ok(written.result),
        Err(Rejected::Refused(Refusal::Frozen { current })) => {
            let text = serde_json::to_string(&current).expect("a result serializes");
            let raw = RawValue::from_string(text).expect("JSON");
            problem(409, ProblemCode::AlreadyCompleted, Some(raw))
        }
        Err(Rejected::Refused(Refusal::NotFound { .. })) => {
            problem(404, ProblemCode::NotFound, None)
        }
        // What a pod's report can be refused with, as far as the controller cares.
        Err(other) => panic!("the controller's write was refused: {other:?}"),
    }
}

impl Controller {
    pub fn new(nodes: usize) -> Self {
        Controller {
            known: Known::new(0),
            pods: vec![None; nodes],
            registered: vec![Registration::None; nodes],
            decided: vec![None; nodes],
            collected: false,
        }
    }

    /// Every node is decided and the results are still there; the deletion needs the
    /// server up.
    pub fn collectable(&self, world: &World) -> bool {
        !self.collected && !world.server.down && self.decided.iter().all(Option::is_some)
    }
}

impl Results {
    pub(super) fn controller_actions(&self, world: &World, i: usize, actions: &mut Vec<Action>) {
        let controller = &world.controller;
        let ready = !world.server.down
            && (!self.config.in_sequence || i == 0 || controller.decided[i - 1].is_some());
        match controller.registered[i] {
            Registration::None if ready => actions.push(Action::CreatePod(i)),
            Registration::None => {}
            // Argo binds the UID on the passes that run the node (`expectedTaskResult`,
            // after `createWorkflowPod`): none once the node is decided.
            Registration::Created if controller.decided[i].is_none() && !world.server.down => {
                actions.push(Action::RegisterUid(i));
            }
            Registration::Created => {}
            Registration::Bound => {}
        }
        // Only an ended pod can decide a node, so only its ending is worth observing;
        // the informer may deliver it late, or deliver the pod gone after it.
        let pod = &world.pods[i];
        if pod.over() && controller.pods[i].map(|view| view.phase) != pod.phase {
            actions.push(Action::Observe(i));
        }
    }

    /// `PUT .../expectation` for node `i`, with the pod's UID once it is `bound`.
    fn register(&self, world: &mut World, i: usize, bound: bool) -> bool {
        let node = self.nodes[i];
        let mut expectation = Expectation {
            pod_name: node.pod_name(),
            pod_uid: bound.then(|| node.pod_uid(world.pods[i].generation)),
        };
        let before = world.server.store.rows.clone();
        if let Some(row) = world.server.store.rows.get_mut(&node.node_id()) {
            (self.hooks.before_expect)(row, &mut expectation);
        }
        let mut outcomes = world.server.store.commit(
            &[(node.key(), Write::Expect(expectation))],
            &self.hooks.policy,
        );
        self.after_commit(world, &before);
        let Ok(stored) = answer(outcomes.remove(0)) else {
            return false;
        };
        let controller = &mut world.controller;
        controller.known.follow(workflow());
        controller.known.remember(stored);
        true
    }

    /// One step of the controller about node `i`; false when it changes nothing.
    pub(super) fn controller_step(&self, world: &mut World, action: Action, i: usize) -> bool {
        match action {
            Action::CreatePod(_) => {
                if !self.register(world, i, false) {
                    return false;
                }
                // A pod created before a crash is found, and none created (Argo's
                // `createWorkflowPod` on `AlreadyExists`); one deleted since is created
                // again under its name, with another UID, unless the node's result is
                // final already (`expectTaskResult`: the node ends as it says).
                let live = world
                    .server
                    .store
                    .rows
                    .get(&self.nodes[i].node_id())
                    .is_some_and(|row| !row.state.is_frozen());
                if self.config.pods_created_again
                    && world.pods[i].phase == Some(PodPhase::Gone)
                    && live
                {
                    self.create_again(world, i);
                }
                world.pods[i].phase.get_or_insert(PodPhase::Pending);
                world.controller.registered[i] = Registration::Created;
                true
            }
            Action::RegisterUid(_) => {
                if !self.register(world, i, true) {
                    return false;
                }
                world.controller.registered[i] = Registration::Bound;
                true
            }
            Action::Observe(_) => {
                let pod = &world.pods[i];
                let Some(phase) = pod.phase else { return false };
                world.controller.pods[i] = Some(PodView {
                    phase,
                    wait_failed: pod.wait_failed && pod.ended.is_some(),
                    evicted: pod.ended == Some(Ending::Evicted),
                });
                self.reconcile(world);
                true
            }
            _ => unreachable!("not a step of the controller about a node"),
        }
    }

    /// Node `i`'s pod, deleted after the controller created it and before the workflow
    /// recorded it, is created again: the node runs anew in the new pod, and what the
    /// deleted one sent and was acknowledged no longer counts for it.
    fn create_again(&self, world: &mut World, i: usize) {
        let generation = world.pods[i].generation + 1;
        let deleted = std::mem::replace(
            &mut world.pods[i],
            Pod {
                generation,
                ..Pod::default()
            },
        );
        world.replaced[i] = Some(deleted);
        world.controller.pods[i] = None;
        world.ghost.acked[i].clear();
        world.ghost.final_acked[i] = false;
    }

    /// The controller's reconciliation, after anything it learns: every node not decided
    /// yet is decided if it can be.
    pub(super) fn reconcile(&self, world: &mut World) {
        for i in 0..self.nodes.len() {
            // A node the workflow does not record a pod for is run again before it is
            // decided (after a crash before the status was persisted).
            if world.controller.decided[i].is_none()
                && world.controller.registered[i] != Registration::None
            {
                self.decide(world, i);
            }
        }
    }

    /// `decide` with the pod as the informer shows it and the result as `Known` has it,
    /// and the settle it asks for (`Reconciler::settle`): false when the node waits.
    fn decide(&self, world: &mut World, i: usize) -> bool {
        let node = self.nodes[i];
        let Some(view) = world.controller.pods[i] else {
            return false;
        };
        let known = world.controller.known.result(WORKFLOW_UID, &node.node_id());
        let decision = match (self.hooks.decide)(view.phase, known) {
            // The abandon meets `503`: the reconciler returns the error, and the node waits
            // for the next pass.
            Decision::Settle { .. } if world.server.down => return false,
            Decision::Settle { reason } if (self.hooks.settles)(&view) => {
                let mut outcomes = world
                    .server
                    .store
                    .commit(&[(node.key(), Write::Abandon(reason))], &self.hooks.policy);
                let answer = answer(outcomes.remove(0));
                match world.controller.known.settled(answer, view.phase) {
                    Ok(decision) => decision,
                    // The reconciler returns the error; the controller retries the node.
                    Err(_) => return false,
                }
            }
            Decision::Settle { .. } | Decision::Wait => return false,
            decision => decision,
        };
        if let Decision::Succeeded { outputs } = &decision
            && let Some(report) = world.ghost.acked[i]
                .iter()
                .find(|report| !contains(outputs.as_deref(), report.outputs.as_deref()))
        {
            world.ghost.missing_outputs.get_or_insert_with(|| {
                format!(
                    "{}: decided Succeeded without the outputs {:?}",
                    node.node_id(),
                    report.outputs
                )
            });
        }
        world.ghost.final_acked[i] = world.ghost.acked[i].iter().any(|r| r.is_final);
        world.ghost.decided_from[i] = Some(view.phase);
        world.controller.decided[i] = Some(decision);
        true
    }

    /// One read of the feed, or the re-list that `410 gone` asks for.
    pub(super) fn follow(&self, world: &mut World) -> bool {
        if !self.read_feed(&world.server.store, &mut world.controller.known) {
            return false;
        }
        self.reconcile(world);
        true
    }

    /// One read of the feed into `known` (`Reconciler::follow`); false when it changed
    /// nothing.
    pub(super) fn read_feed(&self, store: &super::Store, known: &mut Known) -> bool {
        if known.since == store.head
            && known.since >= store.pruned
            && known.epoch.as_deref() == Some(store.epoch_name().as_str())
        {
            // Nothing new to read, nothing gone: the read would change nothing.
            return false;
        }
        let before = known.clone();
        let epoch = known.epoch.clone();
        match store.feed(
            known.since,
            epoch.as_deref(),
            self.config.feed_limit,
            self.hooks.feed_rule,
        ) {
            Ok(page) => {
                known.advance(page);
            }
            Err(gone) => {
                let listings = known
                    .followed()
                    .into_iter()
                    .map(|workflow| (workflow, vec![store.list()]))
                    .collect();
                known.relisted(gone.revision, Some(gone.epoch), listings);
            }
        }
        *known != before
    }

    /// The controller restarted: `Reconciler::resume` with the workflow in flight.
    pub(super) fn resume(&self, world: &mut World) {
        let in_flight = !world.controller.collected
            && world
                .controller
                .registered
                .iter()
                .any(|r| *r != Registration::None);
        let listings = if in_flight {
            vec![(workflow(), vec![world.server.store.list()])]
        } else {
            Vec::new()
        };
        world.controller.known = Known::resumed(listings);
        self.reconcile(world);
    }

    /// Every node is decided: the workflow's results are deleted (`persistUpdates` →
    /// `DELETE .../results`) and no longer followed.
    pub(super) fn collect(&self, world: &mut World) -> bool {
        world.server.store.delete_workflow(self.hooks.tombstones);
        world.controller.known.forget(WORKFLOW_UID);
        world.controller.collected = true;
        true
    }
}
