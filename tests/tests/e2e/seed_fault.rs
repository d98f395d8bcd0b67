//! The fault that started the project, replayed: a pod's status reaches the controller at
//! once while its result arrives up to a second later, in random order (the result
//! informer lags behind the pod informer: PR #12537, PR #14026, #14497, #15253). One
//! controller follows all the workflows of a case at once, decided once by the reference
//! reconciler and once by a model of Argo's own rule under the same fault; each model is
//! asserted to lose outputs, which shows the test can fail.
//!
//! 1. A 16-node fan-out/fan-in DAG against Argo v3.5.4 and earlier, where the pod's phase
//!    alone decides a node: a result not in the cache reads as synced, and nothing tracks
//!    completion (PR #12537, released in v3.5.5 and v3.6.0, made a Succeeded node wait
//!    for a result seen incomplete).
//! 2. Workflows of sixteen parallel steps against Argo v4.1.2, whose remaining hole is the
//!    default: a node's `TaskResultSynced` starts true (`workflow/controller/operator.go`,
//!    `initializeNode`), so a result never seen in the cache counts as synced, and PR
//!    #14625's "required outputs are not yet set" guard (`assessNodeStatus`) holds only
//!    declared outputs that are required. Logs (`main-logs`, which the executor adds,
//!    `workflow/executor/executor.go` `saveContainerLogs`), optional artifacts and failed
//!    nodes' outputs are lost.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use argo_results_client::controller::{Decision, PodPhase, Reconciler, WorkflowRef};
use argo_results_client::proto::{PROTOCOL_VERSION, ReportRequest, ResultState};
use argo_results_tests::fixtures::NS;
use argo_results_tests::tokens::{self, CONTROLLER};
use argo_results_tests::{Backend, TestServer, eventually};
use futures_util::future::join_all;
use serde_json::value::RawValue;

on_both_backends!(
    the_reconciler_never_loses_outputs_when_results_lag,
    argo_v4_loses_logs_optional_artifacts_and_failed_outputs_that_the_reconciler_keeps,
);

const RUNS: u32 = 50;
const NODES: usize = 16;
/// Runs of the second case, half of each shape ([`Kind::of`]): a workflow without a step
/// the guard holds completes as soon as its pods end, so few runs show what is lost.
const PARALLEL_RUNS: u32 = 10;
/// The longest a result may lag behind its pod's status.
const MAX_DELIVERY_DELAY_MS: u64 = 1000;
/// How often the controller looks again (its requeue).
const TICK: Duration = Duration::from_millis(20);
/// Every run of a case ends within this (bounded so that a hang fails the test).
const RUNS_TIMEOUT: Duration = Duration::from_secs(300);

fn random_below(n: u64) -> u64 {
    RandomState::new().hash_one(std::time::Instant::now()) % n.max(1)
}

/// A client that retries transient answers (429, 503) as the executor and the controller
/// do: 50 workflows at once on a debug build keep the server busy.
fn retrying(url: &str, token: String) -> argo_results_client::Client {
    let deadline = tokio::time::Instant::now() + RUNS_TIMEOUT;
    argo_results_client::Client::builder(url)
        .token(argo_results_client::TokenSource::Value(token))
        .retry(argo_results_client::RetryPolicy {
            deadline: Some(deadline),
            ..argo_results_client::RetryPolicy::default()
        })
        .build()
        .expect("client")
}

/// One workflow run: its nodes' pods, and their phases as the pod informer sees them.
struct Workflow {
    reference: WorkflowRef,
    phases: Arc<Mutex<HashMap<usize, PodPhase>>>,
    /// Each node's pod's client, built before the run: a build costs tens of milliseconds
    /// of CPU on a debug build, which would starve the controller during the run.
    pods: Vec<argo_results_client::Client>,
}

impl Workflow {
    async fn new(server_url: &str, name: String) -> Self {
        let mut workflow = Workflow {
            reference: WorkflowRef {
                namespace: NS.into(),
                uid: format!("uid-{name}"),
                name,
            },
            phases: Arc::new(Mutex::new(HashMap::new())),
            pods: Vec::new(),
        };
        let builds = (0..NODES).map(|node| {
            let token = tokens::pod_token(NS, &workflow.pod_name(node), &workflow.pod_uid(node));
            let url = server_url.to_owned();
            tokio::task::spawn_blocking(move || retrying(&url, token))
        });
        for built in join_all(builds).await {
            workflow.pods.push(built.expect("a pod's client"));
        }
        workflow
    }

    /// `runs` workflows named after `case`, `rule` and their number.
    async fn runs(
        server_url: &str,
        runs: u32,
        case: &str,
        rule: impl std::fmt::Debug,
    ) -> Vec<Self> {
        let names = (0..runs).map(|run| format!("seed-{case}-{rule:?}-{run}").to_lowercase());
        join_all(names.map(|name| Workflow::new(server_url, name))).await
    }

    fn node_id(&self, node: usize) -> String {
        format!("{}-{}", self.reference.name, 2_000_000 + node)
    }

    fn pod_name(&self, node: usize) -> String {
        format!("{}-step-{}", self.reference.name, 2_000_000 + node)
    }

    fn pod_uid(&self, node: usize) -> String {
        format!("{}-pod-{node}", self.reference.uid)
    }

    fn phases(&self) -> HashMap<usize, PodPhase> {
        self.phases.lock().expect("phases").clone()
    }

    /// The pod runs briefly and ends as `pod`; its wait container's final report, with
    /// `outputs` and how the step ended, reaches the server up to a second later. With
    /// `committed_first`, as a pod really ends, the report is committed first (the wait
    /// container exits after its 2xx) and what lags is the feed: the reconciler then sees
    /// the pod end before the result, and settles.
    fn start_pod(&self, node: usize, pod: PodPhase, outputs: String, committed_first: bool) {
        let phases = Arc::clone(&self.phases);
        let client = self.pods[node].clone();
        let (workflow, node_id) = (self.reference.name.clone(), self.node_id(node));
        let report = ReportRequest {
            protocol_version: PROTOCOL_VERSION,
            workflow_uid: self.reference.uid.clone(),
            pod_name: self.pod_name(node),
            pod_uid: self.pod_uid(node),
            instance_id: None,
            sequence: Some(1),
            is_final: true,
            outputs: Some(RawValue::from_string(outputs).expect("json")),
            progress: None,
            phase: Some(format!("{pod:?}")),
            message: None,
        };
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(random_below(30))).await;
            let report = async || {
                client
                    .report(NS, &workflow, &node_id, &report)
                    .await
                    .expect("report");
            };
            if committed_first {
                report().await;
                phases.lock().expect("phases").insert(node, pod);
            } else {
                phases.lock().expect("phases").insert(node, pod);
                let delay = random_below(MAX_DELIVERY_DELAY_MS);
                tokio::time::sleep(Duration::from_millis(delay)).await;
                report().await;
            }
        });
    }
}

/// One controller for every run: one feed, as one informer, from the workflows' start.
async fn controller<'a>(
    server: &TestServer,
    workflows: impl Iterator<Item = &'a Workflow>,
) -> Reconciler {
    let client = retrying(server.url(), tokens::user_token(CONTROLLER));
    let references = workflows.map(|w| w.reference.clone());
    Reconciler::resume(client, references)
        .await
        .expect("list the workflows")
}

/// Every report lands in the end, however late (bounded so that a hang fails the test).
async fn every_report_lands(server: &TestServer, reports: i64) {
    let completed = "SELECT COUNT(*) FROM results WHERE state = 'completed'";
    let landed = async || (server.count(completed).await == reports).then_some(());
    eventually("every report is stored", Duration::from_secs(30), landed).await;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DagRule {
    /// The reference reconciler: Succeeded only with a completed result.
    Reconciler,
    /// Argo v3.5.4 and earlier: the outputs of a completed result in the cache, if any; the
    /// pod's phase alone decides.
    ArgoUpToV354,
}

/// What went wrong in the DAG runs.
#[derive(Debug, Default)]
struct Violations {
    succeeded_without_outputs: u32,
    started_without_inputs: u32,
}

/// Node 0 fans out to nodes 1-14, which fan in to node 15.
fn dependencies(node: usize) -> Vec<usize> {
    match node {
        0 => vec![],
        15 => (1..15).collect(),
        _ => vec![0],
    }
}

/// A DAG run: the outputs each decided node took, and the nodes started.
struct DagRun {
    workflow: Workflow,
    outputs: HashMap<usize, Option<String>>,
    started: HashSet<usize>,
}

/// Runs every DAG to the end under `rule`, returning what went wrong.
async fn dag_runs(server: &TestServer, rule: DagRule) -> Violations {
    let mut runs: Vec<DagRun> = Workflow::runs(server.url(), RUNS, "dag", rule)
        .await
        .into_iter()
        .map(|workflow| DagRun {
            workflow,
            outputs: HashMap::new(),
            started: HashSet::new(),
        })
        .collect();
    let mut reconciler = controller(server, runs.iter().map(|r| &r.workflow)).await;
    let mut violations = Violations::default();
    while runs.iter().any(|run| run.outputs.len() < NODES) {
        for run in &mut runs {
            // Start every node whose dependencies all succeeded, with their outputs as inputs.
            for node in 0..NODES {
                let deps = dependencies(node);
                if run.started.contains(&node) || !deps.iter().all(|d| run.outputs.contains_key(d))
                {
                    continue;
                }
                if deps.iter().any(|d| run.outputs[d].is_none()) {
                    violations.started_without_inputs += 1;
                }
                let w = &run.workflow;
                if rule == DagRule::Reconciler {
                    reconciler
                        .pod_created(
                            NS,
                            &w.reference.name,
                            &w.reference.uid,
                            &w.node_id(node),
                            &w.pod_name(node),
                            &w.pod_uid(node),
                        )
                        .await
                        .expect("expectation");
                }
                run.started.insert(node);
                let outputs = format!(
                    r#"{{"parameters":[{{"name":"out","value":"{}"}}]}}"#,
                    w.node_id(node)
                );
                w.start_pod(node, PodPhase::Succeeded, outputs, false);
            }
        }
        tokio::time::sleep(TICK).await;
        reconciler.follow(0).await.expect("feed");
        for run in &mut runs {
            let w = &run.workflow;
            for (node, phase) in w.phases() {
                if run.outputs.contains_key(&node) {
                    continue;
                }
                let node_id = w.node_id(node);
                let decided = match rule {
                    DagRule::Reconciler => {
                        match reconciler.decide(&w.reference.uid, &node_id, phase) {
                            Decision::Succeeded { outputs } => Some(outputs),
                            _ => None,
                        }
                    }
                    DagRule::ArgoUpToV354 => (phase == PodPhase::Succeeded).then(|| {
                        reconciler
                            .result(&w.reference.uid, &node_id)
                            .filter(|r| r.state == ResultState::Completed)
                            .and_then(|r| r.outputs.as_ref().map(|o| o.get().to_owned()))
                    }),
                };
                if let Some(node_outputs) = decided {
                    if node_outputs.is_none() {
                        violations.succeeded_without_outputs += 1;
                    }
                    run.outputs.insert(node, node_outputs);
                }
            }
        }
    }
    violations
}

async fn the_reconciler_never_loses_outputs_when_results_lag(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let ours = tokio::time::timeout(RUNS_TIMEOUT, dag_runs(&server, DagRule::Reconciler))
        .await
        .expect("the runs finished");
    let old = tokio::time::timeout(RUNS_TIMEOUT, dag_runs(&server, DagRule::ArgoUpToV354))
        .await
        .expect("the runs finished");
    println!(
        "seed fault, {backend:?}, {RUNS} DAGs of {NODES} nodes: reconciler {ours:?}; Argo up to v3.5.4 {old:?}"
    );
    assert_eq!(
        (ours.succeeded_without_outputs, ours.started_without_inputs),
        (0, 0),
        "the reconciler lost outputs"
    );
    assert!(
        old.succeeded_without_outputs > 0 && old.started_without_inputs > 0,
        "Argo's rule up to v3.5.4 should lose outputs under the same fault: {old:?}"
    );
    every_report_lands(&server, i64::from(2 * RUNS) * NODES as i64).await;
}

/// What a node's template declares, and how its pod ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Declares an output parameter: PR #14625's guard holds it until the parameter is set.
    Parameter,
    /// Declares nothing: only its archived logs.
    Logs,
    /// Declares an optional artifact, which `hasRequiredArtifacts` (operator.go) skips.
    OptionalArtifact,
    /// Its main container fails; its wait container still uploads the logs.
    Fails,
}

impl Kind {
    /// Odd runs fan out steps that each declare a parameter; even runs mix steps that
    /// declare nothing, steps with an optional artifact and steps that fail. Mixed in one
    /// workflow, a step held by the guard holds the workflow open, and whether the others'
    /// late results land before it completes is left to chance.
    fn of(run: usize, node: usize) -> Kind {
        match run % 2 {
            1 => Kind::Parameter,
            _ => [Kind::Logs, Kind::OptionalArtifact, Kind::Fails][node % 3],
        }
    }

    fn pod(self) -> PodPhase {
        match self {
            Kind::Fails => PodPhase::Failed,
            _ => PodPhase::Succeeded,
        }
    }

    /// What the wait container reports: every node archives its logs (`main-logs`).
    fn outputs(self, workflow: &Workflow, node: usize) -> String {
        let pod = workflow.pod_name(node);
        let logs = format!(
            r#"{{"name":"main-logs","s3":{{"key":"{}/{pod}/main.log"}}}}"#,
            workflow.reference.name
        );
        match self {
            Kind::Parameter => format!(
                r#"{{"exitCode":"0","parameters":[{{"name":"out","value":"{pod}"}}],"artifacts":[{logs}]}}"#
            ),
            Kind::Logs => format!(r#"{{"exitCode":"0","artifacts":[{logs}]}}"#),
            Kind::OptionalArtifact => format!(
                r#"{{"exitCode":"0","artifacts":[{{"name":"report","path":"/tmp/report.csv","optional":true,"s3":{{"key":"{}/{pod}/report.tgz"}}}},{logs}]}}"#,
                workflow.reference.name
            ),
            Kind::Fails => format!(r#"{{"exitCode":"1","artifacts":[{logs}]}}"#),
        }
    }

    /// `assessNodeStatus` keeps a Succeeded pod's node in its old phase while "required
    /// outputs are not yet set": declared parameters (all required) the node lacks, required
    /// artifacts, a result. Only `Parameter` declares any; logs are never declared.
    fn required_outputs_not_yet_set(self, merged: Option<&str>) -> bool {
        let has_parameters = || {
            merged
                .and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok())
                .is_some_and(|outputs| outputs.get("parameters").is_some())
        };
        self == Kind::Parameter && !has_parameters()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FlatRule {
    /// The reference reconciler: a pod that ended waits for its completed result.
    Reconciler,
    /// Argo v4.1.2's `taskResultReconciliation` and `podReconciliation`.
    ArgoV4,
}

/// A node of a parallel run, as the controller records it.
#[derive(Debug)]
struct FlatNode {
    kind: Kind,
    /// Argo v4: the node's `TaskResultSynced`, true from `initializeNode` on.
    synced: bool,
    decided: bool,
    /// The outputs the node holds.
    outputs: Option<String>,
}

/// Outputs the controller recorded short of what each kind of node reported.
#[derive(Debug, Default, PartialEq, Eq)]
struct Losses {
    parameter: u32,
    logs: u32,
    optional_artifact: u32,
    failed: u32,
}

impl Losses {
    fn count(&mut self, kind: Kind) {
        match kind {
            Kind::Parameter => self.parameter += 1,
            Kind::Logs => self.logs += 1,
            Kind::OptionalArtifact => self.optional_artifact += 1,
            Kind::Fails => self.failed += 1,
        }
    }
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).expect("outputs JSON")
}

/// Runs every parallel workflow under `rule` until the controller completes it, and counts
/// the nodes whose recorded outputs then lack what their pod reported. Argo deletes a
/// completed workflow's results (`operator.go`, `persistUpdates` → `deleteTaskResults`)
/// and no longer operates it (`controller.go`, `reconciliationNeeded`): what a node holds
/// then is what it keeps.
async fn flat_runs(server: &TestServer, rule: FlatRule) -> Losses {
    let workflows = Workflow::runs(server.url(), PARALLEL_RUNS, "flat", rule).await;
    let mut reconciler = controller(server, workflows.iter()).await;
    let mut runs: Vec<Vec<FlatNode>> = Vec::new();
    for (run, w) in workflows.iter().enumerate() {
        for node in 0..NODES {
            if rule == FlatRule::Reconciler {
                reconciler
                    .pod_created(
                        NS,
                        &w.reference.name,
                        &w.reference.uid,
                        &w.node_id(node),
                        &w.pod_name(node),
                        &w.pod_uid(node),
                    )
                    .await
                    .expect("expectation");
            }
            let kind = Kind::of(run, node);
            w.start_pod(
                node,
                kind.pod(),
                kind.outputs(w, node),
                rule == FlatRule::Reconciler,
            );
        }
        runs.push(
            (0..NODES)
                .map(|node| FlatNode {
                    kind: Kind::of(run, node),
                    synced: true,
                    decided: false,
                    outputs: None,
                })
                .collect(),
        );
    }
    let mut completed = vec![false; workflows.len()];
    while completed.iter().any(|done| !done) {
        tokio::time::sleep(TICK).await;
        reconciler.follow(0).await.expect("feed");
        for ((w, nodes), done) in workflows.iter().zip(&mut runs).zip(&mut completed) {
            if *done {
                continue;
            }
            let uid = &w.reference.uid;
            if rule == FlatRule::ArgoV4 {
                // taskResultReconciliation (taskresult.go): every cached result's outputs
                // replace the node's, whatever its phase; the completed label marks it
                // synced, a result seen incomplete unsynced.
                for (node, state) in nodes.iter_mut().enumerate() {
                    if let Some(result) = reconciler.result(uid, &w.node_id(node)) {
                        if let Some(outputs) = &result.outputs {
                            state.outputs = Some(outputs.get().to_owned());
                        }
                        state.synced = result.state == ResultState::Completed;
                    }
                }
            }
            for (node, phase) in w.phases() {
                let state = &mut nodes[node];
                if state.decided {
                    continue;
                }
                state.decided = match rule {
                    // A pod that ended with its result not seen yet is settled: the
                    // server's answer carries the result the feed has not shown.
                    FlatRule::Reconciler => match reconciler
                        .settle(&w.reference, &w.node_id(node), phase)
                        .await
                        .expect("settle")
                    {
                        Decision::Succeeded { outputs } | Decision::Failed { outputs, .. } => {
                            state.outputs = outputs;
                            true
                        }
                        Decision::Wait => false,
                        other => panic!("{other:?} under the lagging-result fault"),
                    },
                    // podReconciliation: a Succeeded node waits only for a result seen
                    // incomplete (IsTaskResultIncomplete) or for declared required outputs;
                    // a Failed pod fails its node at once (assessNodeStatus).
                    FlatRule::ArgoV4 => match phase {
                        PodPhase::Succeeded => {
                            state.synced
                                && !state
                                    .kind
                                    .required_outputs_not_yet_set(state.outputs.as_deref())
                        }
                        PodPhase::Failed => true,
                        _ => false,
                    },
                };
            }
            // markWorkflowPhase completes the workflow once every node is fulfilled
            // (`NodePhase.Fulfilled` needs it synced) and no result is in progress.
            *done = nodes.iter().all(|n| n.decided && n.synced);
        }
    }
    let mut losses = Losses::default();
    for (w, nodes) in workflows.iter().zip(&runs) {
        for (node, state) in nodes.iter().enumerate() {
            let reported = json(&state.kind.outputs(w, node));
            if state.outputs.as_deref().map(json) != Some(reported) {
                losses.count(state.kind);
            }
        }
    }
    losses
}

async fn argo_v4_loses_logs_optional_artifacts_and_failed_outputs_that_the_reconciler_keeps(
    backend: Backend,
) {
    let server = TestServer::builder(backend).start().await;
    let ours = tokio::time::timeout(RUNS_TIMEOUT, flat_runs(&server, FlatRule::Reconciler))
        .await
        .expect("the runs finished");
    let v4 = tokio::time::timeout(RUNS_TIMEOUT, flat_runs(&server, FlatRule::ArgoV4))
        .await
        .expect("the runs finished");
    println!(
        "seed fault, {backend:?}, {PARALLEL_RUNS} runs of {NODES} parallel nodes, outputs lost: reconciler {ours:?}; Argo v4.1.2 {v4:?}"
    );
    assert_eq!(ours, Losses::default(), "the reconciler lost outputs");
    assert_eq!(
        v4.parameter, 0,
        "PR #14625's guard holds a declared parameter until its result arrives"
    );
    assert!(
        v4.logs > 0 && v4.optional_artifact > 0 && v4.failed > 0,
        "Argo v4.1.2 should lose logs, optional artifacts and failed nodes' outputs: {v4:?}"
    );
    every_report_lands(&server, i64::from(2 * PARALLEL_RUNS) * NODES as i64).await;
}
