//! The results world's steps in words, for counterexamples.

use argo_results_client::controller::known::Known;
use argo_results_client::controller::{Decision, PodPhase, decide};
use argo_results_proto::NodeResult;
use argo_results_rules::Row;
use serde_json::{Value, json};

use super::pod::WORKFLOW_UID;
use super::{Action, IMPOSTOR, Msg, Results, Step, World};
use crate::trace::Narrate;

fn report_name(step: Step) -> &'static str {
    match step {
        Step::First => "first",
        Step::Progress => "second",
        Step::OtherFinal => "final (other outputs)",
        Step::LateProgress => "late progress",
        _ => "final",
    }
}

fn row(row: Option<&Row>) -> String {
    match row {
        None => "-".into(),
        Some(row) => format!(
            "{} seq {} r{}",
            row.state.as_str(),
            row.sequence.map_or("-".into(), |s| s.to_string()),
            row.revision
        ),
    }
}

/// What a feed reader knows of a node.
fn known_line(known: &Known, node_id: &str) -> String {
    let result = known.result(WORKFLOW_UID, node_id);
    let state = result.map_or("-".into(), |r| {
        format!("{} r{}", r.state.as_str(), r.revision)
    });
    format!("{node_id} {state}")
}

fn decision(decision: &Option<Decision>) -> String {
    match decision {
        None => "undecided".into(),
        Some(Decision::Succeeded { .. }) => "Succeeded".into(),
        Some(Decision::Failed { .. }) => "Failed".into(),
        Some(Decision::Error { .. }) => "Error".into(),
        Some(Decision::Lost { reason }) => format!("Lost ({reason})"),
        Some(Decision::Wait) => "Wait".into(),
        Some(Decision::Settle { .. }) => "Settle".into(),
    }
}

/// Stored outputs as the JSON value a table row holds.
fn outputs(outputs: Option<&str>) -> Value {
    outputs.map_or(Value::Null, |text| {
        serde_json::from_str(text).expect("stored outputs are JSON")
    })
}

/// A result as the decision table writes it: the members `decide` reads.
fn table_result(result: &NodeResult) -> Value {
    json!({
        "state": result.state.as_str(),
        "phase": result.phase,
        "message": result.message,
        "outputs": outputs(result.outputs.as_deref().map(|raw| raw.get())),
        "abandonReason": result.abandon_reason,
    })
}

/// A decision as the decision table expects it.
fn table_decision(decision: &Decision) -> Value {
    let (name, outputs_text, message) = match decision {
        Decision::Wait => ("Wait", None, None),
        Decision::Settle { reason } => ("Settle", None, Some(reason)),
        Decision::Succeeded { outputs } => ("Succeeded", outputs.as_deref(), None),
        Decision::Failed { outputs, message } => ("Failed", outputs.as_deref(), message.as_ref()),
        Decision::Error { outputs, message } => ("Error", outputs.as_deref(), Some(message)),
        Decision::Lost { reason } => ("Lost", None, Some(reason)),
    };
    json!({"decision": name, "outputs": outputs(outputs_text), "message": message})
}

impl Results {
    fn pod_name(&self, i: usize) -> String {
        self.nodes[i].pod_name()
    }

    fn message(&self, msg: &Msg) -> String {
        match *msg {
            Msg::Request {
                from: IMPOSTOR, to, ..
            } => format!(
                "the impostor's final report to node {}",
                self.nodes[to as usize].node_id()
            ),
            Msg::Request {
                from,
                pod: 0,
                step,
                to,
            } if from == to => format!(
                "{}'s {} report",
                self.pod_name(from as usize),
                report_name(step)
            ),
            Msg::Request {
                from,
                pod,
                step,
                to,
            } if from == to => format!(
                "{}'s {} report from its pod created again ({})",
                self.pod_name(from as usize),
                report_name(step),
                self.nodes[from as usize].pod_uid(pod)
            ),
            Msg::Request { from, to, .. } => format!(
                "{}'s report to node {}",
                self.pod_name(from as usize),
                self.nodes[to as usize].node_id()
            ),
            Msg::Answer { to, step, ok, .. } => format!(
                "the {} to {}'s {} report",
                if ok { "2xx" } else { "refusal" },
                self.pod_name(to as usize),
                report_name(step)
            ),
        }
    }
}

impl Narrate for Results {
    fn said(&self, world: &World, action: &Action) -> String {
        let node = |i: usize| self.nodes[i].node_id();
        let pod = |i: usize| self.pod_name(i);
        match action {
            Action::CreatePod(i) => format!(
                "controller registers {} for pod {} by name, and creates the pod (again, if it was deleted)",
                node(*i),
                pod(*i)
            ),
            Action::RegisterUid(i) => {
                format!("controller registers {} again with the pod's UID", node(*i))
            }
            Action::Observe(i) => format!(
                "controller's pod informer shows {} {}",
                pod(*i),
                world.pods[*i]
                    .phase
                    .map_or("not created".into(), |phase| format!("{phase:?}"))
            ),
            Action::Follow => format!(
                "controller reads the feed after revision {}",
                world.controller.known.since
            ),
            Action::CrashController => {
                "controller crashes and resumes from the workflows in flight".into()
            }
            Action::Collect => "controller deletes the workflow's results".into(),
            Action::CrashBeforePersist(i) => format!(
                "controller crashes after creating pod {}, before the workflow recorded it, and resumes",
                pod(*i)
            ),
            Action::Requeue => "controller passes over the workflow again".into(),
            Action::ServerDown => "the server goes down: every request meets 503".into(),
            Action::ServerUp => "the server is back".into(),
            Action::Watch => format!(
                "the watcher reads the feed after revision {}",
                world.watcher.as_ref().map_or(0, |known| known.since)
            ),
            Action::OtherFinal(i) => format!(
                "{} sends its final report again, with other outputs",
                pod(*i)
            ),
            Action::LateProgress(i) => format!(
                "{} sends progress after its final report, under a later sequence",
                pod(*i)
            ),
            Action::Start(i) => format!("pod {} starts", pod(*i)),
            Action::FailInit(i) => format!("pod {} fails in an init container", pod(*i)),
            Action::FailPending(i) => format!("pod {} fails while Pending", pod(*i)),
            Action::Evict(i) => format!("pod {} is evicted", pod(*i)),
            Action::Delete(i) => format!("pod {} is deleted while it runs", pod(*i)),
            Action::Collected(i) => format!("pod GC deletes pod {}", pod(*i)),
            Action::Crash(i) => format!("the reporting container of {} crashes", pod(*i)),
            Action::Send(i) => format!(
                "pod {} sends its {} report (attempt {})",
                pod(*i),
                report_name(world.pods[*i].step),
                world.pods[*i].attempts + 1
            ),
            Action::GiveUp(i) => format!(
                "pod {} gives up on its {} report",
                pod(*i),
                report_name(world.pods[*i].step)
            ),
            Action::RepeatSequence(i) => format!(
                "the clock gives {}'s second progress report the first one's sequence",
                pod(*i)
            ),
            Action::MainExits(i, code) => format!("main of {} exits {code}", pod(*i)),
            Action::WaitExits(i, code) => format!("wait of {} exits {code}", pod(*i)),
            Action::Impostor => format!(
                "a pod named {} that someone else created, with its own UID, sends a final \
                 report for node {}",
                pod(0),
                node(0)
            ),
            Action::Hostile { from, to } => format!(
                "pod {} reports node {} with its own token",
                pod(*from),
                node(*to)
            ),
            Action::Deliver { msg, heard } => format!(
                "the server receives {}{}",
                self.message(msg),
                match (
                    heard,
                    self.config.batch_max > 1 || self.hooks.ack_before_commit
                ) {
                    (_, true) => "",
                    (true, false) => " and commits it; the pod hears its answer",
                    (false, false) => " and commits it; its answer is lost",
                }
            ),
            Action::Hear(msg) => format!("{} arrives", self.message(msg)),
            Action::Lose(msg) => format!("the network loses {}", self.message(msg)),
            Action::Duplicate(msg) => format!("the network duplicates {}", self.message(msg)),
            Action::Commit => "the server commits what it received".into(),
            Action::CrashServer => "the server crashes; what it had not committed is lost".into(),
            Action::Backup => format!(
                "the database is backed up at revision {}",
                world.server.store.head
            ),
            Action::Restore => "the database is restored from the backup".into(),
            Action::Prune => format!(
                "retention prunes the feed's history through revision {}",
                world.server.store.head
            ),
        }
    }

    fn held(&self, world: &World) -> Vec<String> {
        let store = &world.server.store;
        let stored: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("{} {}", n.node_id(), row(store.rows.get(&n.node_id()))))
            .collect();
        let known = &world.controller.known;
        let knows: Vec<String> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| match &world.controller.decided[i] {
                None => known_line(known, &n.node_id()),
                d => format!("{}, {}", known_line(known, &n.node_id()), decision(d)),
            })
            .collect();
        let pods: Vec<String> = world
            .pods
            .iter()
            .enumerate()
            .map(|(i, p)| match p.phase {
                None => format!("{} not created", self.pod_name(i)),
                Some(phase) => format!("{} {phase:?} at {:?}", self.pod_name(i), p.step),
            })
            .collect();
        let mut held = vec![
            format!(
                "store: head {} epoch {}; {}",
                store.head,
                store.epoch,
                stored.join(", ")
            ),
            format!("controller: since {}; {}", known.since, knows.join("; ")),
            format!("pods: {}", pods.join("; ")),
        ];
        if let Some(watcher) = &world.watcher {
            let sees: Vec<String> = self
                .nodes
                .iter()
                .map(|n| known_line(watcher, &n.node_id()))
                .collect();
            held.push(format!(
                "watcher: since {}; {}",
                watcher.since,
                sees.join("; ")
            ));
        }
        held
    }

    /// Each node whose pod the controller saw end and that it left undecided, with what
    /// the product's `decide` says of it.
    fn rows(&self, world: &World) -> Vec<Value> {
        let controller = &world.controller;
        (0..self.nodes.len())
            .filter(|&i| controller.decided[i].is_none())
            .filter_map(|i| {
                let view = controller.pods[i]?;
                if matches!(view.phase, PodPhase::Pending | PodPhase::Running) {
                    return None;
                }
                let result = controller
                    .known
                    .result(WORKFLOW_UID, &self.nodes[i].node_id());
                let ending = world.pods[i]
                    .ended
                    .map_or("ended".into(), |ending| format!("{ending:?}"));
                Some(json!({
                    "name": format!(
                        "model: the pod {ending}, its result {}",
                        result.map_or("not stored", |r| r.state.as_str())
                    ),
                    "pod": format!("{:?}", view.phase),
                    "result": result.map_or(Value::Null, table_result),
                    "expect": table_decision(&decide(view.phase, result)),
                }))
            })
            .collect()
    }
}
