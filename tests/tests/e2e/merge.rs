//! docs/api.md section 2: `outputs` merged as an RFC 7386 merge patch until the result is frozen,
//! as Argo's executor patches its task result. In a resource or data template `main`
//! reports the parameters (`argoexec resource`, `ReportOutputs`), then `wait` the
//! `main-logs` artifact (`ReportOutputsLogs`): both must survive.

use argo_results_client::proto::{NodeResult, ProblemCode};
use argo_results_tests::fixtures::{NS, WF, step};
use argo_results_tests::{Backend, TestServer};

on_both_backends!(
    a_resource_templates_parameters_survive_its_log_artifact,
    null_removes_a_key_and_arrays_are_replaced_whole,
    after_completion_a_patch_that_changes_nothing_is_a_replay,
    merged_outputs_are_bounded_and_a_refusal_changes_nothing,
);

const PARAMETERS: &str = r#"{"parameters":[{"name":"job-uid","value":"0b6f7c1e","valueFrom":{"jsonPath":"{.metadata.uid}"}}]}"#;
const LOGS: &str = r#"{"artifacts":[{"name":"main-logs","s3":{"key":"etl-x7k2p/etl-x7k2p-create-1529417053/main.log"}}]}"#;
const BOTH: &str = r#"{"parameters":[{"name":"job-uid","value":"0b6f7c1e","valueFrom":{"jsonPath":"{.metadata.uid}"}}],"artifacts":[{"name":"main-logs","s3":{"key":"etl-x7k2p/etl-x7k2p-create-1529417053/main.log"}}]}"#;

fn outputs_of(result: &NodeResult) -> Option<String> {
    result.outputs.as_ref().map(|raw| raw.get().to_owned())
}

async fn stored(server: &TestServer, node_id: &str) -> NodeResult {
    server
        .reader()
        .get_result(NS, WF, node_id, None)
        .await
        .expect("read")
}

async fn a_resource_templates_parameters_survive_its_log_artifact(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let s = step(1);
    // `main` (argoexec resource) reports the resource's parameters, not final.
    let main = server
        .send(&s, &s.report(Some(1), false, Some(PARAMETERS)))
        .await
        .expect("main's report");
    assert_eq!(outputs_of(&main.body).as_deref(), Some(PARAMETERS));
    // `wait` archives the logs and finalizes with the log artifact alone.
    let wait = server
        .send(&s, &s.report(Some(2), true, Some(LOGS)))
        .await
        .expect("wait's final report");
    assert_eq!(outputs_of(&wait.body).as_deref(), Some(BOTH));
    let read = stored(&server, &s.node_id).await;
    assert_eq!(outputs_of(&read).as_deref(), Some(BOTH));
    // The feed's completion carries both too.
    let feed = server
        .reader()
        .feed(&Default::default())
        .await
        .expect("feed");
    let last = serde_json::to_value(feed.items.last().expect("a change")).expect("json");
    assert_eq!(last["result"]["state"], "completed");
    let both: serde_json::Value = serde_json::from_str(BOTH).expect("json");
    assert_eq!(last["result"]["outputs"], both);
}

async fn null_removes_a_key_and_arrays_are_replaced_whole(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let s = step(1);
    let first = r#"{"parameters":[{"name":"a","value":"1"},{"name":"b","value":"2"}],"result":"hello","custom":{"x":1,"y":2}}"#;
    server
        .send(&s, &s.report(Some(1), false, Some(first)))
        .await
        .expect("first");
    let patch =
        r#"{"parameters":[{"name":"c","value":"3"}],"result":null,"custom":{"y":null,"z":3}}"#;
    let merged = server
        .send(&s, &s.report(Some(2), false, Some(patch)))
        .await
        .expect("patch");
    assert_eq!(
        outputs_of(&merged.body).as_deref(),
        Some(r#"{"parameters":[{"name":"c","value":"3"}],"custom":{"x":1,"z":3}}"#)
    );
}

async fn after_completion_a_patch_that_changes_nothing_is_a_replay(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let s = step(1);
    let mut done = s.report(Some(1), true, Some(BOTH));
    done.progress = Some("10/10".into());
    let completed = server.send(&s, &done).await.expect("final").body;
    // Part of what is stored, sent again (a retried log report): nothing changes.
    let again = server
        .send(&s, &s.report(Some(7), true, Some(LOGS)))
        .await
        .expect("a replay of part of the outputs");
    assert_eq!(again.status, 200);
    assert_eq!(again.body.revision, completed.revision);
    // A progress tick that lands after the final report, equal to what is stored.
    let mut tick = s.report(Some(8), false, None);
    tick.progress = Some("10/10".into());
    let tick = server.send(&s, &tick).await.expect("an equal late tick");
    assert_eq!(tick.body.revision, completed.revision);
    // Anything that would change the frozen result is refused, with the result in `current`.
    let mut later = s.report(Some(9), false, None);
    later.progress = Some("3/10".into());
    let removing = s.report(Some(9), true, Some(r#"{"artifacts":null}"#));
    for refused in [later, removing] {
        let error = server.send(&s, &refused).await.expect_err("frozen");
        assert_eq!(error.code(), Some(ProblemCode::AlreadyCompleted));
        let current = error
            .problem()
            .and_then(|p| p.current.as_ref())
            .expect("current");
        let current: NodeResult = serde_json::from_str(current.get()).expect("result");
        assert_eq!(outputs_of(&current).as_deref(), Some(BOTH));
    }
    let read = stored(&server, &s.node_id).await;
    assert_eq!(
        (
            read.revision,
            outputs_of(&read).as_deref(),
            read.progress.as_deref()
        ),
        (completed.revision, Some(BOTH), Some("10/10"))
    );
    assert_eq!(server.count("SELECT COUNT(*) FROM changes").await, 1);
}

async fn merged_outputs_are_bounded_and_a_refusal_changes_nothing(backend: Backend) {
    let server = TestServer::builder(backend)
        .flags(&["--max-body-bytes", "4096"])
        .start()
        .await;
    let s = step(1);
    let half = |name: &str| format!(r#"{{"{name}":"{}"}}"#, "x".repeat(2500));
    let first = server
        .send(&s, &s.report(Some(1), false, Some(&half("a"))))
        .await
        .expect("first half");
    let error = server
        .send(&s, &s.report(Some(2), true, Some(&half("b"))))
        .await
        .expect_err("the merged outputs exceed the limit");
    assert_eq!(error.code(), Some(ProblemCode::InvalidField));
    let problem = error.problem().expect("problem");
    assert_eq!(problem.field.as_deref(), Some("outputs"));
    assert!(problem.detail.contains("4096"), "{}", problem.detail);
    let read = stored(&server, &s.node_id).await;
    assert_eq!(read.revision, first.body.revision);
    assert_eq!(outputs_of(&read), Some(half("a")));
}
