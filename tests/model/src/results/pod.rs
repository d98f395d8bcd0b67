//! A node's pod and the containers in it that report: what each sends, in what order, and
//! every way the pod can end (Argo's `wait` and `main`, `workflow/executor/executor.go`
//! and `cmd/argoexec/commands/{wait.go,resource.go}`).

use argo_results_client::controller::PodPhase;
use argo_results_rules::{Report, ResultKey};

/// Every node belongs to this one workflow.
pub const NAMESPACE: &str = "argo";
pub const WORKFLOW: &str = "wf";
pub const WORKFLOW_UID: &str = "wf-uid";

/// How a node's template reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Template {
    /// A container or script template: `wait` reports progress while `main` runs (once,
    /// or twice: `Node::second_progress`), then the final report with the outputs and the
    /// exit code.
    Container,
    /// A resource template whose logs are archived: `main` (`argoexec resource`) reports the
    /// resource's parameters, then `wait` the final report with the log artifact, which the
    /// server merges onto them.
    Resource,
    /// A resource template without outputs (`action: delete`) or a data template: `main`
    /// (`argoexec resource` or `argoexec data`) sends the only report, the final one, as
    /// its action ended (Succeeded, or Error when it failed, as a data source that cannot
    /// be listed), then exits; `wait` reports nothing (`argo/backend/pod.go` has main
    /// finalize). A final report it cannot make fails `main`.
    MainFinalizes,
}

/// Where a pod's containers are in their work. `First`, `Progress` and `Final` send a
/// report, each under a sequence higher than the one before unless the clock repeats one
/// (`Pod::sequence_repeated`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Step {
    /// `wait`'s first progress (container) or `main`'s parameters (resource), sequence 1.
    #[default]
    First,
    /// `wait`'s second progress (a container node with `second_progress`), sequence 2:
    /// with a copy of the first still in the network, a stale report can reach a row
    /// that is still live.
    Progress,
    /// `main` exits.
    MainExits,
    /// `wait`'s final report, sequence 3.
    Final,
    /// `wait` exits; the pod ends with it.
    WaitExits,
    /// Nothing runs any more.
    Done,
    /// Not a step a pod is at: its final report sent once more under the final's sequence
    /// with other outputs (a `wait` that collected them again), after the final was sent.
    /// The row took the first final it was sent, or will refuse it; this one it must
    /// refuse, never answer as a replay.
    OtherFinal,
    /// Not a step a pod is at: progress that argoexec's `monitorProgress`, which runs on
    /// until `wait` exits, sends after the final report took its sequence, under a later
    /// one (4). The Go package's `Reporter` sends none (`Reporter.Progress`); a negative
    /// control lets a pod send it.
    LateProgress,
}

/// How a pod ended, as Argo can see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ending {
    /// Every container exited 0.
    Succeeded,
    /// `main` or `wait` exited non-zero.
    Failed,
    /// An init container failed (an input artifact, say): nothing else ran.
    InitFailed,
    /// Failed while Pending (its deadline passed, say): nothing ran.
    FailedPending,
    /// Evicted while running: its containers were killed.
    Evicted,
    /// Deleted (by a person, a drain, or pod GC once it ended).
    Deleted,
}

/// A pod not created yet, by default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Pod {
    /// As the API server has it; `None` until the controller creates it.
    pub phase: Option<PodPhase>,
    pub ended: Option<Ending>,
    pub step: Step,
    /// Attempts sent of the current report.
    pub attempts: u8,
    /// `main`'s exit code, once it exited.
    pub main_code: Option<i32>,
    /// The final report was refused or given up on.
    pub final_failed: bool,
    /// `wait` exited non-zero (or was killed).
    pub wait_failed: bool,
    /// The second progress report drew the first one's sequence: without a counter file
    /// the sequences are the clock's (`ClockSequence`), which may repeat.
    pub sequence_repeated: bool,
    /// Progress was sent after the final report (`Step::LateProgress`).
    pub late_progress: bool,
    /// Which of its node's pods this is: 0, or 1 once the controller created the pod
    /// again under the same name (another UID).
    pub generation: u8,
}

impl Pod {
    /// Its containers run (and may report).
    pub fn running(&self) -> bool {
        self.phase == Some(PodPhase::Running)
    }

    /// Ended or gone: it will never report again.
    pub fn over(&self) -> bool {
        matches!(
            self.phase,
            Some(PodPhase::Succeeded | PodPhase::Failed | PodPhase::Gone)
        )
    }

    /// The step being reported, if the pod is at one.
    pub fn reporting(&self) -> bool {
        self.running() && matches!(self.step, Step::First | Step::Progress | Step::Final)
    }

    /// The step after the current report, acknowledged or, for progress, failed.
    fn after_report(&self, node: Node) -> Step {
        match self.step {
            Step::First if node.second_progress => Step::Progress,
            Step::First | Step::Progress => Step::MainExits,
            _ => Step::WaitExits,
        }
    }

    /// Stops every container: the pod ends as `ending`, in `phase`. A `wait` that was
    /// running is killed (it terminates non-zero); one that never started is not.
    pub fn kill(&mut self, phase: PodPhase, ending: Ending) {
        self.wait_failed = self.phase == Some(PodPhase::Running);
        self.phase = Some(phase);
        self.ended = Some(ending);
        self.step = Step::Done;
    }

    /// The current report did not get through (refused, or every attempt unanswered).
    pub fn failed_report(&mut self, node: Node) {
        self.attempts = 0;
        match (self.step, node.template) {
            // Progress that fails is only logged (`monitorProgress`).
            (Step::First | Step::Progress, Template::Container) => {
                self.step = self.after_report(node);
            }
            // `argoexec resource` fails when it cannot report its parameters.
            (Step::First, Template::Resource) => {
                self.main_code = Some(1);
                self.step = Step::Final;
            }
            // `argoexec` exits 64 when its final report fails (`AddError`).
            (Step::Final, Template::MainFinalizes) => {
                self.main_code = Some(64);
                self.final_failed = true;
                self.step = Step::WaitExits;
            }
            _ => {
                self.final_failed = true;
                self.step = Step::WaitExits;
            }
        }
    }

    /// The current report was acknowledged (2xx).
    pub fn acknowledged(&mut self, node: Node) {
        self.attempts = 0;
        self.step = self.after_report(node);
    }

    /// `wait` exits with `code`; the pod ends with it.
    pub fn wait_exits(&mut self, code: i32) {
        self.wait_failed = code != 0;
        let succeeded = self.main_code == Some(0) && code == 0;
        let (phase, ending) = if succeeded {
            (PodPhase::Succeeded, Ending::Succeeded)
        } else {
            (PodPhase::Failed, Ending::Failed)
        };
        self.phase = Some(phase);
        self.ended = Some(ending);
        self.step = Step::Done;
    }
}

/// A node of the workflow and its pod's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Node {
    pub template: Template,
    pub index: usize,
    /// A container's `wait` reports progress a second time, under sequence 2.
    pub second_progress: bool,
}

impl Node {
    pub fn node_id(&self) -> String {
        format!("{WORKFLOW}-{}", 100 * (self.index + 1))
    }

    pub fn pod_name(&self) -> String {
        let template = match self.template {
            Template::Container => "main",
            Template::Resource => "apply",
            Template::MainFinalizes => "delete",
        };
        format!("{WORKFLOW}-{template}-{}", 100 * (self.index + 1))
    }

    /// The UID of the node's pod `generation` (`Pod::generation`).
    pub fn pod_uid(&self, generation: u8) -> String {
        match generation {
            0 => format!("pod-uid-{}", self.index + 1),
            again => format!("pod-uid-{}-{}", self.index + 1, again + 1),
        }
    }

    pub fn key(&self) -> ResultKey {
        ResultKey {
            namespace: NAMESPACE.into(),
            workflow: WORKFLOW.into(),
            workflow_uid: WORKFLOW_UID.into(),
            node_id: self.node_id(),
        }
    }

    /// The report this node's `pod` sends at `step`, given `main`'s exit code by then.
    pub fn report(&self, step: Step, pod: &Pod) -> Report {
        let mut report = Report {
            pod_name: self.pod_name(),
            pod_uid: self.pod_uid(pod.generation),
            instance_id: None,
            sequence: Some(1),
            is_final: false,
            outputs: None,
            progress: None,
            phase: None,
            message: None,
        };
        match (step, self.template) {
            (Step::First, Template::Container) => report.progress = Some("1/3".into()),
            (Step::Progress, _) => {
                report.sequence = Some(if pod.sequence_repeated { 1 } else { 2 });
                report.progress = Some("2/3".into());
            }
            (Step::LateProgress, _) => {
                report.sequence = Some(4);
                report.progress = Some("3/3".into());
            }
            (Step::First, Template::Resource) => {
                report.outputs =
                    Some(r#"{"parameters":[{"name":"job-uid","value":"8a7c"}]}"#.into());
            }
            // `main` reports how its action ended before it exits: no exit code yet.
            (_, Template::MainFinalizes) => {
                let ok = pod.main_code == Some(0);
                report.is_final = true;
                report.outputs = (step == Step::OtherFinal).then(|| "{}".into());
                report.phase = Some(if ok { "Succeeded" } else { "Error" }.into());
                report.message = (!ok).then(|| "the data source cannot be listed".into());
            }
            _ => {
                let code = pod.main_code.unwrap_or(1);
                let again = if step == Step::OtherFinal {
                    "-again"
                } else {
                    ""
                };
                let outputs = match self.template {
                    Template::Container => format!(
                        r#"{{"parameters":[{{"name":"rows","value":"42{again}"}}],"exitCode":"{code}"}}"#
                    ),
                    // (A node whose main finalizes reports in its own arm, above.)
                    Template::Resource | Template::MainFinalizes => format!(
                        r#"{{"artifacts":[{{"name":"main-logs","s3":{{"key":"wf/main{again}.log"}}}}],"exitCode":"{code}"}}"#
                    ),
                };
                report.sequence = Some(3);
                report.is_final = true;
                report.outputs = Some(outputs);
                report.phase = Some(if code == 0 { "Succeeded" } else { "Failed" }.into());
            }
        }
        report
    }
}
