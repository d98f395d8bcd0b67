//! The results protocol: the pods of one workflow reporting through a lossy network to a
//! server that may crash or be restored from a backup, and a controller that registers
//! expectations, follows the feed with any lag, may crash and resume, and decides each
//! node. Every choice of the environment is an action the checker takes in every order.

mod config;
mod controller;
mod hooks;
mod narrate;
mod pod;
mod properties;
mod server;

use argo_results_client::controller::PodPhase;
use argo_results_client::controller::known::Known;
use argo_results_rules::Write;
use stateright::{Model, Property};

pub use config::Config;
pub use controller::{Controller, PodView, Registration};
pub use hooks::Hooks;
pub use pod::{Ending, Node, Pod, Step, Template};
pub use properties::{
    ACKNOWLEDGED_CONTENT_SHOWN, ACKNOWLEDGED_NEVER_LOST, DECIDES_ONLY_ON_COMMITTED,
    DELETED_STAYS_DELETED, DELETION_REACHES_FOLLOWERS, FAILED_NEVER_SUCCEEDED,
    FINAL_REACHES_CONTROLLER, FINAL_REFUSED_ONLY_WHEN_FROZEN, FROZEN_NEVER_CHANGES,
    NO_HANG_AFTER_POD_ENDS, POD_WRITES_ONLY_ITS_NODE, RESTORE_NOTICED, STALE_NEVER_OVERWRITES,
    SUCCEEDED_HAS_ITS_OUTPUTS, SUCCEEDED_NEVER_FAILED,
};
pub use server::{Gone, NOW, POLICY, Store};

use argo_results_rules::{Refusal, Rejected, Report, Row};

/// The sender of the impostor's report: no node's pod.
pub const IMPOSTOR: u8 = u8::MAX;
/// The impostor's UID: not the one the controller created.
const IMPOSTOR_UID: &str = "impostor-uid";

/// A message in the network between the pods and the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Msg {
    /// The report of pod `from` at `step`, to the URL of node `to` (its own, unless
    /// hostile); `pod` tells which of node `from`'s pods sent it (`Pod::generation`).
    Request {
        from: u8,
        pod: u8,
        step: Step,
        to: u8,
    },
    /// The server's answer to pod `to`'s report at `step`: 2xx or a refusal.
    Answer { to: u8, step: Step, ok: bool },
}

impl Msg {
    /// A request's sender, which of its node's pods sent it, its step and the node whose
    /// URL it went to.
    fn request(self) -> Option<(u8, u8, Step, u8)> {
        match self {
            Msg::Request {
                from,
                pod,
                step,
                to,
            } => Some((from, pod, step, to)),
            Msg::Answer { .. } => None,
        }
    }
}

/// The server process: the database's committed state, a backup of it, and the writes
/// received but not yet committed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Server {
    pub store: Store,
    pub backup: Option<Store>,
    pub staged: Vec<Msg>,
    /// Every request meets `503` (a rollout, or its database away): nothing is read or
    /// written until it is back.
    pub down: bool,
}

/// What the environment may still do.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Budget {
    pub outages: u8,
    pub pod_faults: u8,
    pub sequence_repeats: u8,
    pub other_finals: u8,
    pub server_crashes: u8,
    pub controller_crashes: u8,
    pub duplicates: u8,
    pub restores: u8,
    pub prunes: u8,
    pub hostile: bool,
    pub impostor: bool,
}

/// What the properties need to remember of the past.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Ghost {
    /// Per node, the reports of its own pod the server answered 2xx, in the order it
    /// committed them, heard or not, but those a restore from a backup took back.
    pub acked: Vec<Vec<Report>>,
    /// Per node: its final report was acknowledged when the controller decided it.
    pub final_acked: Vec<bool>,
    /// The first commit that changed a frozen row.
    pub frozen_changed: Option<String>,
    /// The first commit that lowered a row's sequence under the same pod.
    pub sequence_lowered: Option<String>,
    /// The first decision Succeeded without an output its pod's acknowledged reports sent.
    pub missing_outputs: Option<String>,
    /// The first final report of a node's own pod refused while its row was live.
    pub final_refused: Option<String>,
    /// The database was restored after the workflow's results were deleted: a backup
    /// taken before brings them back, as restoring means.
    pub restored_after_deletion: bool,
    /// Per node, the outputs of each `completed` row committed: one, unless a restore
    /// took a completion back and another followed.
    pub completed: Vec<Vec<Option<String>>>,
    /// Per node, the pod's phase as the informer showed it when the node was decided: the
    /// view may move on after (a failed pod collected shows as gone), the decision does not.
    pub decided_from: Vec<Option<PodPhase>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct World {
    pub pods: Vec<Pod>,
    /// Per node, the pod that the current one replaced, if the controller created it
    /// again: its requests may still be in the network.
    pub replaced: Vec<Option<Pod>>,
    /// A multiset, kept sorted so that equal worlds are equal.
    pub net: Vec<Msg>,
    pub server: Server,
    pub controller: Controller,
    /// The feed as a second reader knows it (`Config::watcher`).
    pub watcher: Option<Known>,
    pub budget: Budget,
    pub ghost: Ghost,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Action {
    // The controller, which decides every node it can after each step that tells it
    // something (its reconciliation).
    /// `PUT .../expectation` with the pod's name, then the pod is created; the workflow is
    /// followed from then on.
    CreatePod(usize),
    /// `PUT .../expectation` again with the created pod's UID.
    RegisterUid(usize),
    /// The pod informer delivers the pod as it is now.
    Observe(usize),
    /// One read of the feed; after `410 gone`, every workflow followed is listed again.
    Follow,
    /// The controller restarts with no memory and resumes from the workflows in flight.
    CrashController,
    /// The controller dies after creating node `i`'s pod, before the workflow's status
    /// recorded it: it resumes, and runs the node again (Argo finds the pod and creates
    /// none).
    CrashBeforePersist(usize),
    /// The controller passes over the workflow again (a requeue after an error).
    Requeue,
    /// Every node decided: the workflow's results are deleted.
    Collect,
    /// One read of the feed by the watcher (`Config::watcher`).
    Watch,
    // The pods.
    Start(usize),
    FailInit(usize),
    FailPending(usize),
    Evict(usize),
    /// Deleted while it runs (by a person or a drain).
    Delete(usize),
    /// Deleted by pod GC once it ended.
    Collected(usize),
    /// The container at a report crashes (out of memory).
    Crash(usize),
    /// An attempt at the current report.
    Send(usize),
    /// Every attempt went unanswered: the container gives up on the report.
    GiveUp(usize),
    /// The clock gives the second progress report the first one's sequence.
    RepeatSequence(usize),
    /// The final report is sent again with other outputs (`Step::OtherFinal`).
    OtherFinal(usize),
    /// Progress is sent after the final report (`Step::LateProgress`).
    LateProgress(usize),
    MainExits(usize, i32),
    WaitExits(usize, i32),
    /// Pod `from` sends its first report to node `to`'s URL with its own token.
    Hostile {
        from: usize,
        to: usize,
    },
    /// A pod of node 0's name and another UID sends a final report for it.
    Impostor,
    // The network.
    /// The server receives a request. With one write per transaction it commits it at
    /// once, and its answer reaches the pod (`heard`) or not: the pod then gives up, or
    /// hears it after it stopped waiting, which is the same.
    Deliver {
        msg: Msg,
        heard: bool,
    },
    Hear(Msg),
    Lose(Msg),
    Duplicate(Msg),
    // The server and its database.
    Commit,
    CrashServer,
    /// The server goes down: every request meets `503` until it is back.
    ServerDown,
    ServerUp,
    Backup,
    Restore,
    Prune,
}

/// The results protocol under `config`, with the product's behaviour or a broken one.
#[derive(Debug, Clone)]
pub struct Results {
    pub config: Config,
    pub hooks: Hooks,
    pub nodes: Vec<Node>,
}

impl Results {
    pub fn new(config: Config, hooks: Hooks) -> Self {
        let nodes = config
            .templates
            .iter()
            .enumerate()
            .map(|(index, &template)| Node {
                template,
                index,
                second_progress: config.second_progress && template == Template::Container,
            })
            .collect();
        Results {
            config,
            hooks,
            nodes,
        }
    }

    fn initial(&self) -> World {
        let n = self.nodes.len();
        let c = &self.config;
        World {
            pods: vec![Pod::default(); n],
            replaced: vec![None; n],
            net: Vec::new(),
            server: Server {
                store: Store::default(),
                backup: None,
                staged: Vec::new(),
                down: false,
            },
            controller: Controller::new(n),
            watcher: c.watcher.then(|| {
                let mut known = Known::new(0);
                known.follow(controller::workflow());
                known
            }),
            budget: Budget {
                outages: c.outages,
                pod_faults: c.pod_faults,
                sequence_repeats: c.sequence_repeats,
                other_finals: c.other_finals,
                server_crashes: c.server_crashes,
                controller_crashes: c.controller_crashes,
                duplicates: c.duplicates,
                restores: c.restores,
                prunes: c.prunes,
                hostile: c.hostile,
                impostor: c.impostor,
            },
            ghost: Ghost {
                acked: vec![Vec::new(); n],
                final_acked: vec![false; n],
                frozen_changed: None,
                sequence_lowered: None,
                missing_outputs: None,
                final_refused: None,
                restored_after_deletion: false,
                completed: vec![Vec::new(); n],
                decided_from: vec![None; n],
            },
        }
    }

    /// The write a request makes.
    fn write_of(&self, world: &World, request: Msg) -> (argo_results_rules::ResultKey, Report) {
        let (from, pod, step, to) = request.request().expect("only requests are written");
        let node = self.nodes[to as usize];
        if from == IMPOSTOR {
            let report = Report {
                pod_uid: IMPOSTOR_UID.into(),
                ..node.report(
                    step,
                    &Pod {
                        main_code: Some(0),
                        ..Pod::default()
                    },
                )
            };
            return (node.key(), report);
        }
        let sender = self.nodes[from as usize];
        let report = sender.report(step, world.sender(from, pod));
        (node.key(), report)
    }

    /// Commits `requests` as one transaction and answers each (a hostile one's answer
    /// goes nowhere that matters: its pod is at another step). A report the Reporter
    /// retries (`503`: the controller has not named the pod's UID yet; `pod_mismatch`) gets
    /// no answer here: to the pod it is an attempt without a 2xx, as a lost answer is.
    fn commit(&self, world: &mut World, requests: &[Msg]) -> Vec<Msg> {
        let before = world.server.store.rows.clone();
        let mut writes = Vec::new();
        let mut reports = Vec::new();
        for &request in requests {
            let (key, report) = self.write_of(world, request);
            if let Some(row) = world.server.store.rows.get_mut(&key.node_id) {
                (self.hooks.before_report)(row, &report);
            }
            reports.push(report.clone());
            writes.push((key, Write::Report(report)));
        }
        let outcomes = world.server.store.commit(&writes, &self.hooks.policy);
        self.after_commit(world, &before);
        let mut answers = Vec::new();
        for ((&request, report), outcome) in requests.iter().zip(reports).zip(outcomes) {
            let (from, pod, step, to) = request.request().expect("only requests are committed");
            // A pod the controller replaced hears nothing, and its reports count for no
            // property but the row's: the node runs again in its successor.
            if from != IMPOSTOR && pod != world.pods[from as usize].generation {
                continue;
            }
            // The Reporter retries both: the controller is about to name the pod's UID, or
            // to name it instead of a deleted pod's of the same name (a pod created again).
            if matches!(
                outcome,
                Err(Rejected::Refused(
                    Refusal::NotYetBound { .. } | Refusal::PodMismatch { .. }
                ))
            ) {
                continue;
            }
            let ok = (self.hooks.answers_ok)(&report, &outcome);
            if from == to {
                self.answered(world, to as usize, report, ok);
            }
            if from != IMPOSTOR {
                answers.push(Msg::Answer { to: from, step, ok });
            }
        }
        answers
    }

    /// Records what the properties watch in the answer to node `i`'s own pod: a 2xx
    /// acknowledges `report`, whether the pod hears it or not; a final report refused
    /// while the row is still live lost the step's outputs.
    fn answered(&self, world: &mut World, i: usize, report: Report, ok: bool) {
        if ok {
            // A replay acknowledged again adds nothing the properties read.
            if !world.ghost.acked[i].contains(&report) {
                world.ghost.acked[i].push(report);
            }
            return;
        }
        let row = world.server.store.rows.get(&self.nodes[i].node_id());
        if report.is_final
            && row.is_some_and(|row| !row.state.is_frozen())
            && world.ghost.final_refused.is_none()
        {
            world.ghost.final_refused = Some(format!(
                "{}: final report of sequence {:?} refused on a live row of sequence {:?}",
                self.nodes[i].node_id(),
                report.sequence,
                row.and_then(|row| row.sequence)
            ));
        }
    }

    /// Records what the properties watch in a commit: completions, and any change to a
    /// frozen row or to a lower sequence.
    pub(super) fn after_commit(
        &self,
        world: &mut World,
        before: &std::collections::BTreeMap<String, Row>,
    ) {
        for (i, node) in self.nodes.iter().enumerate() {
            let id = node.node_id();
            let (Some(after), old) = (world.server.store.rows.get(&id), before.get(&id)) else {
                continue;
            };
            if let Some(old) = old
                && old.revision != after.revision
            {
                let same_pod = old.pod_uid.is_some() && old.pod_uid == after.pod_uid;
                if old.state.is_frozen() && world.ghost.frozen_changed.is_none() {
                    world.ghost.frozen_changed =
                        Some(format!("{id}: a {} row changed", old.state.as_str()));
                }
                if same_pod
                    && after.sequence < old.sequence
                    && world.ghost.sequence_lowered.is_none()
                {
                    world.ghost.sequence_lowered = Some(format!(
                        "{id}: sequence {:?} replaced {:?}",
                        after.sequence, old.sequence
                    ));
                }
            }
            let completed = &mut world.ghost.completed[i];
            if after.state == argo_results_proto::ResultState::Completed
                && !completed.contains(&after.outputs)
            {
                completed.push(after.outputs.clone());
            }
        }
    }
}

/// Puts a request of node `from`'s pod `pod` at `step`, to node `to`'s URL, in the
/// network.
fn send(net: &mut Vec<Msg>, from: u8, pod: u8, step: Step, to: u8) {
    insert(
        net,
        Msg::Request {
            from,
            pod,
            step,
            to,
        },
    );
}

fn insert(net: &mut Vec<Msg>, msg: Msg) {
    let at = net.partition_point(|m| *m <= msg);
    net.insert(at, msg);
}

fn remove(net: &mut Vec<Msg>, msg: Msg) -> bool {
    match net.iter().position(|m| *m == msg) {
        Some(at) => {
            net.remove(at);
            true
        }
        None => false,
    }
}

impl Model for Results {
    type State = World;
    type Action = Action;

    fn init_states(&self) -> Vec<World> {
        vec![self.initial()]
    }

    fn actions(&self, world: &World, actions: &mut Vec<Action>) {
        let budget = &world.budget;
        for (i, pod) in world.pods.iter().enumerate() {
            self.controller_actions(world, i, actions);
            let Some(phase) = pod.phase else { continue };
            match phase {
                PodPhase::Pending => {
                    actions.push(Action::Start(i));
                    if budget.pod_faults > 0 {
                        actions.push(Action::FailInit(i));
                        actions.push(Action::FailPending(i));
                    }
                }
                PodPhase::Running => {
                    if pod.step == Step::Progress
                        && pod.attempts == 0
                        && !pod.sequence_repeated
                        && budget.sequence_repeats > 0
                    {
                        actions.push(Action::RepeatSequence(i));
                    }
                    // The final report was sent (and acknowledged or not).
                    let final_sent =
                        pod.step == Step::WaitExits || pod.step == Step::Final && pod.attempts > 0;
                    if final_sent && budget.other_finals > 0 {
                        actions.push(Action::OtherFinal(i));
                    }
                    if final_sent
                        && self.hooks.progress_after_final
                        && self.nodes[i].template == Template::Container
                        && !pod.late_progress
                    {
                        actions.push(Action::LateProgress(i));
                    }
                    if pod.reporting() {
                        if pod.attempts < self.config.attempts {
                            actions.push(Action::Send(i));
                        } else {
                            actions.push(Action::GiveUp(i));
                        }
                        if budget.pod_faults > 0 {
                            actions.push(Action::Crash(i));
                        }
                    }
                    match pod.step {
                        Step::MainExits => {
                            actions.push(Action::MainExits(i, 0));
                            // A failing `main` matters where a report then says so.
                            if self.nodes[i].template != Template::Resource {
                                actions.push(Action::MainExits(i, 1));
                            }
                        }
                        Step::WaitExits => {
                            actions.push(Action::WaitExits(i, 0));
                            if pod.final_failed {
                                actions.push(Action::WaitExits(i, 1));
                            }
                        }
                        _ => {}
                    }
                    if budget.pod_faults > 0 {
                        actions.push(Action::Evict(i));
                    }
                    if budget.impostor && i == 0 {
                        actions.push(Action::Impostor);
                    }
                    if budget.hostile && pod.step == Step::First {
                        for to in 0..self.nodes.len() {
                            if to != i {
                                actions.push(Action::Hostile { from: i, to });
                            }
                        }
                    }
                }
                PodPhase::Succeeded | PodPhase::Failed | PodPhase::Gone => {}
            }
            if !pod.over() && budget.pod_faults > 0 {
                actions.push(Action::Delete(i));
            }
            if pod.over() && phase != PodPhase::Gone && self.config.pod_gc {
                actions.push(Action::Collected(i));
            }
        }
        if world.controller.collectable(world) {
            actions.push(Action::Collect);
        }
        // While the server is down, nothing reads or writes it: pods and the network go on,
        // and the informer (a settle it asks for meets `503`).
        let up = !world.server.down;
        if up {
            actions.push(Action::Follow);
            if world.watcher.is_some() {
                actions.push(Action::Watch);
            }
            if budget.controller_crashes > 0 {
                actions.push(Action::CrashController);
            }
            if budget.controller_crashes > 0 && self.config.crash_before_persist {
                for (i, registered) in world.controller.registered.iter().enumerate() {
                    if *registered != Registration::None && world.controller.decided[i].is_none() {
                        actions.push(Action::CrashBeforePersist(i));
                    }
                }
            }
            if self.hooks.requeues {
                actions.push(Action::Requeue);
            }
            if budget.outages > 0 && world.server.staged.is_empty() {
                actions.push(Action::ServerDown);
            }
        } else {
            actions.push(Action::ServerUp);
        }
        let mut last = None;
        for &msg in &world.net {
            if last == Some(msg) {
                continue;
            }
            last = Some(msg);
            match msg {
                Msg::Request { .. } => {
                    if up && world.server.staged.len() < self.config.batch_max {
                        actions.push(Action::Deliver { msg, heard: false });
                        if !self.staging() && self.waits_for(world, msg) {
                            actions.push(Action::Deliver { msg, heard: true });
                        }
                    }
                    if budget.duplicates > 0 {
                        actions.push(Action::Duplicate(msg));
                    }
                    actions.push(Action::Lose(msg));
                }
                // An answer lost is one that arrives after the container gave up on it.
                Msg::Answer { .. } => actions.push(Action::Hear(msg)),
            }
        }
        if !up {
            return;
        }
        if !world.server.staged.is_empty() {
            actions.push(Action::Commit);
            if budget.server_crashes > 0 {
                actions.push(Action::CrashServer);
            }
        }
        let since = world.controller.known.since;
        if budget.restores > 0 {
            match &world.server.backup {
                None => actions.push(Action::Backup),
                // The case that matters: the controller holds a position past the backup.
                Some(backup) if since > backup.head => actions.push(Action::Restore),
                Some(_) => {}
            }
        }
        // Pruning matters to a reader behind it; the controller reads on from `since`.
        if budget.prunes > 0 && since < world.server.store.head {
            actions.push(Action::Prune);
        }
    }

    fn next_state(&self, world: &World, action: Action) -> Option<World> {
        let mut next = world.clone();
        let changed = self.apply(&mut next, action);
        // Messages that can change nothing any more are gone: an answer nobody waits for
        // (it would be ignored on arrival), and a request of an ended pod to a frozen row
        // that no restore can take back (refused or a replay, heard by nobody).
        let pods = &next.pods;
        let rows = &next.server.store.rows;
        let settled = self.config.drop_dead_requests
            && (next.budget.restores == 0 || next.server.backup.is_none());
        next.net.retain(|msg| match *msg {
            Msg::Answer { to, step, .. } => {
                let pod = &pods[to as usize];
                pod.running() && pod.step == step
            }
            Msg::Request { from, pod, to, .. } => {
                let frozen = rows
                    .get(&self.nodes[to as usize].node_id())
                    .is_some_and(|row| row.state.is_frozen());
                let ended = pods
                    .get(from as usize)
                    .is_none_or(|sender| sender.over() || sender.generation != pod);
                !(settled && frozen && ended)
            }
        });
        (changed && next != *world).then_some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        properties::all()
    }
}

impl World {
    /// Node `from`'s pod `generation`: the current one, or the one it replaced.
    fn sender(&self, from: u8, generation: u8) -> &Pod {
        let current = &self.pods[from as usize];
        if current.generation == generation {
            return current;
        }
        self.replaced[from as usize]
            .as_ref()
            .filter(|pod| pod.generation == generation)
            .expect("a request's pod is its node's current one or the one it replaced")
    }
}

impl Results {
    /// Applies `action` to `world`; false when it does nothing there.
    fn apply(&self, world: &mut World, action: Action) -> bool {
        match action {
            Action::CreatePod(i) | Action::RegisterUid(i) | Action::Observe(i) => {
                self.controller_step(world, action, i)
            }
            Action::Follow => self.follow(world),
            Action::CrashController => {
                world.budget.controller_crashes -= 1;
                self.resume(world);
                true
            }
            Action::CrashBeforePersist(i) => {
                world.budget.controller_crashes -= 1;
                world.controller.registered[i] = Registration::None;
                self.resume(world);
                true
            }
            Action::Requeue => {
                let before = world.controller.decided.clone();
                self.reconcile(world);
                world.controller.decided != before
            }
            Action::ServerDown => {
                world.budget.outages -= 1;
                world.server.down = true;
                true
            }
            Action::ServerUp => {
                world.server.down = false;
                true
            }
            Action::Collect => self.collect(world),
            Action::Watch => {
                let Some(mut known) = world.watcher.take() else {
                    return false;
                };
                let changed = self.read_feed(&world.server.store, &mut known);
                world.watcher = Some(known);
                changed
            }
            Action::Start(i) => {
                let pod = &mut world.pods[i];
                pod.phase = Some(PodPhase::Running);
                // Its `main` reports nothing before its action ends.
                if self.nodes[i].template == Template::MainFinalizes {
                    pod.step = Step::MainExits;
                }
                true
            }
            Action::FailInit(i) | Action::FailPending(i) => {
                world.budget.pod_faults -= 1;
                let ending = if matches!(action, Action::FailInit(_)) {
                    Ending::InitFailed
                } else {
                    Ending::FailedPending
                };
                world.pods[i].kill(PodPhase::Failed, ending);
                true
            }
            Action::Evict(i) => {
                world.budget.pod_faults -= 1;
                world.pods[i].kill(PodPhase::Failed, Ending::Evicted);
                true
            }
            Action::Delete(i) => {
                world.budget.pod_faults -= 1;
                world.pods[i].kill(PodPhase::Gone, Ending::Deleted);
                true
            }
            Action::Collected(i) => {
                world.pods[i].phase = Some(PodPhase::Gone);
                true
            }
            Action::Crash(i) => {
                world.budget.pod_faults -= 1;
                let template = self.nodes[i].template;
                let pod = &mut world.pods[i];
                match (pod.step, template) {
                    // `main` crashes before reporting its parameters; `wait` goes on.
                    (Step::First, Template::Resource) => {
                        pod.attempts = 0;
                        pod.main_code = Some(137);
                        pod.step = Step::Final;
                    }
                    // `main` crashes as it finalizes: nothing more is reported; `wait`
                    // exits 0 and the pod fails with `main`.
                    (_, Template::MainFinalizes) => {
                        pod.attempts = 0;
                        pod.main_code = Some(137);
                        pod.final_failed = true;
                        pod.step = Step::WaitExits;
                    }
                    // `wait` crashes: nothing more is reported; the pod fails when `main`
                    // is done, which the model takes to be at once.
                    _ => {
                        pod.main_code.get_or_insert(0);
                        pod.final_failed = true;
                        pod.wait_exits(137);
                    }
                }
                true
            }
            Action::Send(i) => {
                let pod = &mut world.pods[i];
                pod.attempts += 1;
                send(&mut world.net, i as u8, pod.generation, pod.step, i as u8);
                true
            }
            Action::GiveUp(i) => {
                world.pods[i].failed_report(self.nodes[i]);
                true
            }
            Action::OtherFinal(i) => {
                world.budget.other_finals -= 1;
                let pod = world.pods[i].generation;
                send(&mut world.net, i as u8, pod, Step::OtherFinal, i as u8);
                true
            }
            Action::LateProgress(i) => {
                let pod = &mut world.pods[i];
                pod.late_progress = true;
                send(
                    &mut world.net,
                    i as u8,
                    pod.generation,
                    Step::LateProgress,
                    i as u8,
                );
                true
            }
            Action::RepeatSequence(i) => {
                world.budget.sequence_repeats -= 1;
                world.pods[i].sequence_repeated = true;
                true
            }
            Action::MainExits(i, code) => {
                let pod = &mut world.pods[i];
                pod.main_code = Some(code);
                pod.step = Step::Final;
                true
            }
            Action::WaitExits(i, code) => {
                world.pods[i].wait_exits(code);
                true
            }
            Action::Impostor => {
                world.budget.impostor = false;
                send(&mut world.net, IMPOSTOR, 0, Step::Final, 0);
                true
            }
            Action::Hostile { from, to } => {
                world.budget.hostile = false;
                let pod = world.pods[from].generation;
                send(&mut world.net, from as u8, pod, Step::First, to as u8);
                true
            }
            Action::Deliver { msg, heard } => {
                remove(&mut world.net, msg);
                if !self.staging() {
                    // A transaction of one write: received and committed are one step (a
                    // crash before the commit is the request lost).
                    for answer in self.commit(world, &[msg]) {
                        if heard {
                            self.hear(world, answer);
                        }
                    }
                    return true;
                }
                if self.hooks.ack_before_commit {
                    // The broken server: the answer its write would get, sent at once, and
                    // acknowledged with it.
                    let mut speculative = world.clone();
                    let staged = std::mem::take(&mut speculative.server.staged);
                    self.commit(&mut speculative, &staged);
                    for answer in self.commit(&mut speculative, &[msg]) {
                        insert(&mut world.net, answer);
                    }
                    world.ghost.acked = speculative.ghost.acked;
                }
                world.server.staged.push(msg);
                true
            }
            Action::Commit => {
                let staged = std::mem::take(&mut world.server.staged);
                let answers = self.commit(world, &staged);
                if !self.hooks.ack_before_commit {
                    for answer in answers {
                        insert(&mut world.net, answer);
                    }
                }
                true
            }
            Action::Hear(msg) => {
                remove(&mut world.net, msg);
                self.hear(world, msg);
                true
            }
            Action::Lose(msg) => remove(&mut world.net, msg),
            Action::Duplicate(msg) => {
                world.budget.duplicates -= 1;
                insert(&mut world.net, msg);
                true
            }
            Action::CrashServer => {
                world.budget.server_crashes -= 1;
                world.server.staged.clear();
                true
            }
            Action::Backup => {
                world.server.backup = Some(world.server.store.clone());
                true
            }
            Action::Restore => {
                world.budget.restores -= 1;
                let Some(backup) = world.server.backup.take() else {
                    return false;
                };
                self.restore(world, backup);
                true
            }
            Action::Prune => {
                world.budget.prunes -= 1;
                world.server.store.prune();
                true
            }
        }
    }

    /// Whether writes wait in a batch for their commit (and answers travel on their own).
    fn staging(&self) -> bool {
        self.config.batch_max > 1 || self.hooks.ack_before_commit
    }

    /// Whether the pod that sent `request` still waits for its answer.
    fn waits_for(&self, world: &World, request: Msg) -> bool {
        let Some((from, pod, step, to)) = request.request() else {
            return false;
        };
        from == to && {
            let sender = &world.pods[from as usize];
            pod == sender.generation && sender.running() && sender.step == step
        }
    }

    /// A pod hears the server's answer to one of its reports.
    fn hear(&self, world: &mut World, msg: Msg) {
        let Msg::Answer { to, step, ok } = msg else {
            return;
        };
        let i = to as usize;
        let pod = &mut world.pods[i];
        // An answer to an attempt the container no longer waits for goes unheard.
        if !pod.running() || pod.step != step {
            return;
        }
        if ok {
            pod.acknowledged(self.nodes[i]);
        } else {
            pod.failed_report(self.nodes[i]);
        }
    }

    /// The database is restored from `backup`: every write after it is gone, and the
    /// acknowledgements of those writes with them.
    fn restore(&self, world: &mut World, backup: Store) {
        world.ghost.restored_after_deletion |= world.controller.collected;
        let epoch = world.server.store.epoch;
        for (i, node) in self.nodes.iter().enumerate() {
            let row = backup.rows.get(&node.node_id());
            world.ghost.acked[i]
                .retain(|report| properties::reflects(row, std::slice::from_ref(report)));
        }
        world.server.store = backup;
        world.server.store.epoch = epoch + 1;
    }
}
