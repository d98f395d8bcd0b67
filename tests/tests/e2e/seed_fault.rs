//! The fault that started the project, replayed: a pod's status reaches the controller at
//! once while its result arrives late and out of order. Over a 16-node fan-out/fan-in DAG
//! run 50 times, the reference reconciler never marks a node Succeeded without its
//! outputs and never starts a dependent without its inputs. The same cluster decided by
//! today's informer rule (a result not seen yet reads as synced) loses outputs, which
//! shows the test can fail.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use argo_results_client::controller::{Decision, PodPhase, Reconciler, WorkflowRef};
use argo_results_client::proto::{PROTOCOL_VERSION, ReportRequest, ResultState};
use argo_results_tests::fixtures::NS;
use argo_results_tests::tokens::{self, CONTROLLER};
use argo_results_tests::{Backend, TestServer};
use serde_json::value::RawValue;

on_both_backends!(the_reconciler_never_loses_outputs_when_results_lag);

const RUNS: u32 = 50;
const NODES: usize = 16;
/// The longest a result may lag behind its pod's status.
const MAX_DELIVERY_DELAY_MS: u64 = 1000;

fn random_below(n: u64) -> u64 {
    RandomState::new().hash_one(std::time::Instant::now()) % n.max(1)
}

/// Node 0 fans out to nodes 1-14, which fan in to node 15.
fn dependencies(node: usize) -> Vec<usize> {
    match node {
        0 => vec![],
        15 => (1..15).collect(),
        _ => vec![0],
    }
}

/// A client that retries transient answers (429, 503) as the executor and the controller
/// do: 50 workflows at once on a debug build keep the server busy.
fn retrying(url: &str, token: String) -> argo_results_client::Client {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    argo_results_client::Client::builder(url)
        .token(argo_results_client::TokenSource::Value(token))
        .retry(argo_results_client::RetryPolicy {
            deadline: Some(deadline),
        })
        .build()
        .expect("client")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    /// The reference reconciler: Succeeded only with a completed result.
    Reconciler,
    /// Today's taskResultReconciliation: no result seen yet reads as synced.
    Informer,
}

/// What went wrong in a run.
#[derive(Debug, Default)]
struct Violations {
    succeeded_without_outputs: u32,
    started_without_inputs: u32,
}

struct Run {
    workflow: String,
    uid: String,
    phases: Arc<Mutex<HashMap<usize, PodPhase>>>,
}

impl Run {
    fn node_id(&self, node: usize) -> String {
        format!("{}-{}", self.workflow, 2_000_000 + node)
    }

    fn pod_name(&self, node: usize) -> String {
        format!("{}-step-{}", self.workflow, 2_000_000 + node)
    }

    fn pod_uid(&self, node: usize) -> String {
        format!("{}-pod-{node}", self.uid)
    }

    /// The pod runs briefly and succeeds at once; its wait container's final report
    /// reaches the server up to a second later.
    fn start_pod(&self, server_url: String, node: usize) {
        let phases = Arc::clone(&self.phases);
        let (node_id, pod_name, pod_uid, uid) = (
            self.node_id(node),
            self.pod_name(node),
            self.pod_uid(node),
            self.uid.clone(),
        );
        let workflow = self.workflow.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(random_below(30))).await;
            phases
                .lock()
                .expect("phases")
                .insert(node, PodPhase::Succeeded);
            tokio::time::sleep(Duration::from_millis(random_below(MAX_DELIVERY_DELAY_MS))).await;
            let outputs = format!(r#"{{"parameters":[{{"name":"out","value":"{node_id}"}}]}}"#);
            let report = ReportRequest {
                protocol_version: PROTOCOL_VERSION,
                workflow_uid: uid,
                pod_name: pod_name.clone(),
                pod_uid: pod_uid.clone(),
                instance_id: None,
                sequence: Some(1),
                is_final: true,
                outputs: Some(RawValue::from_string(outputs).expect("json")),
                progress: None,
                phase: None,
                message: None,
            };
            let token = tokens::pod_token(NS, &pod_name, &pod_uid);
            let pod = retrying(&server_url, token);
            pod.report(NS, &workflow, &node_id, &report)
                .await
                .expect("report");
        });
    }
}

/// Runs one workflow to the end under `rule`, returning what went wrong.
async fn run_workflow(server_url: String, run: u32, rule: Rule) -> Violations {
    let controller = retrying(&server_url, tokens::user_token(CONTROLLER));
    let mut reconciler = Reconciler::new(controller, 0);
    let run = Run {
        workflow: format!("seed-{rule:?}-{run}").to_lowercase(),
        uid: format!("uid-{rule:?}-{run}"),
        phases: Arc::new(Mutex::new(HashMap::new())),
    };
    if rule == Rule::Informer {
        // The informer caches every result of the workflow; nothing is registered.
        reconciler
            .track(WorkflowRef {
                namespace: NS.into(),
                name: run.workflow.clone(),
                uid: run.uid.clone(),
            })
            .await
            .expect("list");
    }
    let mut outputs: HashMap<usize, Option<String>> = HashMap::new();
    let mut started = std::collections::HashSet::new();
    let mut violations = Violations::default();
    while outputs.len() < NODES {
        // Start every node whose dependencies all succeeded, with their outputs as inputs.
        for node in 0..NODES {
            let deps = dependencies(node);
            if started.contains(&node) || !deps.iter().all(|d| outputs.contains_key(d)) {
                continue;
            }
            if deps.iter().any(|d| outputs[d].is_none()) {
                violations.started_without_inputs += 1;
            }
            if rule == Rule::Reconciler {
                reconciler
                    .pod_created(
                        NS,
                        &run.workflow,
                        &run.uid,
                        &run.node_id(node),
                        &run.pod_name(node),
                        &run.pod_uid(node),
                    )
                    .await
                    .expect("expectation");
            }
            started.insert(node);
            run.start_pod(server_url.clone(), node);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        reconciler.follow(0).await.expect("feed");
        let phases = run.phases.lock().expect("phases").clone();
        for (node, phase) in phases {
            if outputs.contains_key(&node) {
                continue;
            }
            let decided = match rule {
                Rule::Reconciler => match reconciler.decide(&run.uid, &run.node_id(node), phase) {
                    Decision::Succeeded { outputs } => Some(outputs),
                    _ => None,
                },
                // The informer rule: a completed result in the cache gives outputs; none
                // seen yet reads as synced, and the pod's phase alone decides.
                Rule::Informer => (phase == PodPhase::Succeeded).then(|| {
                    reconciler
                        .result(&run.uid, &run.node_id(node))
                        .filter(|r| r.state == ResultState::Completed)
                        .and_then(|r| r.outputs.as_ref().map(|o| o.get().to_owned()))
                }),
            };
            if let Some(node_outputs) = decided {
                if node_outputs.is_none() {
                    violations.succeeded_without_outputs += 1;
                }
                outputs.insert(node, node_outputs);
            }
        }
    }
    violations
}

async fn all_runs(server: &TestServer, rule: Rule) -> Violations {
    let runs: Vec<_> = (0..RUNS)
        .map(|run| tokio::spawn(run_workflow(server.url().to_owned(), run, rule)))
        .collect();
    let mut total = Violations::default();
    for run in runs {
        let violations = tokio::time::timeout(Duration::from_secs(120), run)
            .await
            .expect("the runs finished")
            .expect("run");
        total.succeeded_without_outputs += violations.succeeded_without_outputs;
        total.started_without_inputs += violations.started_without_inputs;
    }
    total
}

async fn the_reconciler_never_loses_outputs_when_results_lag(backend: Backend) {
    let server = TestServer::start(backend).await;
    let ours = all_runs(&server, Rule::Reconciler).await;
    let today = all_runs(&server, Rule::Informer).await;
    println!(
        "seed fault, {backend:?}, {RUNS} runs of {NODES} nodes: reconciler {ours:?}; informer rule {today:?}"
    );
    assert_eq!(
        (ours.succeeded_without_outputs, ours.started_without_inputs),
        (0, 0),
        "the reconciler lost outputs"
    );
    assert!(
        today.succeeded_without_outputs > 0 && today.started_without_inputs > 0,
        "the informer rule should lose outputs under the same fault: {today:?}"
    );
    // Every report lands in the end, however late (bounded so a hang fails the test).
    let all = i64::from(2 * RUNS) * NODES as i64;
    for _ in 0..100 {
        if server
            .count("SELECT COUNT(*) FROM results WHERE state = 'completed'")
            .await
            == all
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("not every report was stored");
}
