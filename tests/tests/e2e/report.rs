//! docs/api.md section 2: the wait container's report.

use argo_results_client::proto::{ProblemCode, ResultState};
use argo_results_tests::fixtures::{NS, UID, WF, outputs, step};
use argo_results_tests::{Backend, TestServer};

on_both_backends!(
    first_report_is_created_and_read_back,
    replay_keeps_the_revision,
    lower_sequence_is_stale_and_changes_nothing,
    equal_sequence_with_other_content_is_stale,
    absent_fields_keep_stored_ones,
    final_report_completes_with_its_outputs,
    completion_is_never_seen_without_outputs,
    completed_result_is_frozen,
    row_is_bound_to_the_first_pod,
    outputs_round_trip_byte_for_byte,
    instance_and_workflow_name_must_match_the_stored_row,
);

async fn changes(server: &TestServer) -> i64 {
    server.count("SELECT COUNT(*) FROM changes").await
}

async fn first_report_is_created_and_read_back(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let s = step(1);
    let pod = server.pod_of(&s);
    let mut report = s.report(Some(1), false, Some(&outputs(1)));
    report.progress = Some("3/10".into());
    let answer = pod
        .report(NS, WF, &s.node_id, &report)
        .await
        .expect("report");
    assert_eq!(answer.status, 201);
    assert_eq!(answer.body.state, ResultState::Reporting);
    assert_eq!(answer.body.workflow_uid, UID);
    assert_eq!(answer.body.pod_uid.as_deref(), Some(s.pod_uid.as_str()));
    assert_eq!(answer.body.progress.as_deref(), Some("3/10"));
    assert_eq!(answer.body.sequence, Some(1));
    assert!(answer.body.revision > 0);

    let read = server
        .reader()
        .get_result(NS, WF, &s.node_id, None)
        .await
        .expect("read");
    assert_eq!(read.revision, answer.body.revision);
    assert_eq!(read.outputs.map(|o| o.get().to_owned()), Some(outputs(1)));
    assert_eq!(server.count("SELECT COUNT(*) FROM results").await, 1);
    assert_eq!(changes(&server).await, 1);
}

async fn replay_keeps_the_revision(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let s = step(1);
    let pod = server.pod_of(&s);
    let report = s.report(Some(2), false, Some(&outputs(1)));
    let first = pod
        .report(NS, WF, &s.node_id, &report)
        .await
        .expect("first");
    let again = pod
        .report(NS, WF, &s.node_id, &report)
        .await
        .expect("replay");
    assert_eq!(again.status, 200);
    assert_eq!(again.body.revision, first.body.revision);
    assert_eq!(changes(&server).await, 1, "a replay writes nothing");
}

async fn lower_sequence_is_stale_and_changes_nothing(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let s = step(1);
    let pod = server.pod_of(&s);
    let mut newer = s.report(Some(3), false, None);
    newer.progress = Some("5/10".into());
    pod.report(NS, WF, &s.node_id, &newer).await.expect("seq 3");
    let mut older = s.report(Some(2), false, None);
    older.progress = Some("9/10".into());
    let error = pod
        .report(NS, WF, &s.node_id, &older)
        .await
        .expect_err("stale");
    assert_eq!(error.code(), Some(ProblemCode::StaleSequence));
    assert_eq!(error.problem().map(|p| p.status), Some(409));
    let stored = server
        .reader()
        .get_result(NS, WF, &s.node_id, None)
        .await
        .expect("read");
    assert_eq!(stored.progress.as_deref(), Some("5/10"));
    assert_eq!(stored.sequence, Some(3));
    assert_eq!(changes(&server).await, 1);
}

async fn equal_sequence_with_other_content_is_stale(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let s = step(1);
    let pod = server.pod_of(&s);
    pod.report(
        NS,
        WF,
        &s.node_id,
        &s.report(Some(4), false, Some(&outputs(1))),
    )
    .await
    .expect("seq 4");
    let other = s.report(Some(4), false, Some(&outputs(2)));
    let error = pod
        .report(NS, WF, &s.node_id, &other)
        .await
        .expect_err("reused sequence");
    assert_eq!(error.code(), Some(ProblemCode::StaleSequence));
    let stored = server
        .reader()
        .get_result(NS, WF, &s.node_id, None)
        .await
        .expect("read");
    assert_eq!(stored.outputs.map(|o| o.get().to_owned()), Some(outputs(1)));
    assert_eq!(changes(&server).await, 1);
}

async fn absent_fields_keep_stored_ones(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let s = step(1);
    let pod = server.pod_of(&s);
    let mut first = s.report(Some(1), false, Some(&outputs(1)));
    first.message = Some("extracting".into());
    pod.report(NS, WF, &s.node_id, &first).await.expect("first");
    let mut tick = s.report(Some(2), false, None);
    tick.progress = Some("7/10".into());
    let answer = pod
        .report(NS, WF, &s.node_id, &tick)
        .await
        .expect("progress tick");
    assert_eq!(answer.status, 200);
    assert_eq!(
        answer.body.outputs.map(|o| o.get().to_owned()),
        Some(outputs(1))
    );
    assert_eq!(answer.body.message.as_deref(), Some("extracting"));
    assert_eq!(answer.body.progress.as_deref(), Some("7/10"));
    assert_eq!(answer.body.sequence, Some(2));
}

async fn final_report_completes_with_its_outputs(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let s = step(1);
    let pod = server.pod_of(&s);
    pod.report(NS, WF, &s.node_id, &s.report(Some(1), false, None))
        .await
        .expect("start");
    let answer = pod
        .report(
            NS,
            WF,
            &s.node_id,
            &s.report(Some(2), true, Some(&outputs(1))),
        )
        .await
        .expect("final");
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body.state, ResultState::Completed);
    assert!(answer.body.completed_at.is_some());
    assert_eq!(
        answer.body.outputs.map(|o| o.get().to_owned()),
        Some(outputs(1))
    );
    let completed = server
        .count("SELECT COUNT(*) FROM results WHERE state = 'completed' AND outputs IS NOT NULL")
        .await;
    assert_eq!(completed, 1);
}

/// Readers polling while final reports land never see `completed` without outputs.
async fn completion_is_never_seen_without_outputs(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let reader = server.reader();
    let watching = tokio::spawn(async move {
        let mut completed_seen = 0;
        while completed_seen < 20 {
            let list = reader
                .list_results(NS, WF, &Default::default())
                .await
                .expect("list");
            for item in &list.items {
                if item.state == ResultState::Completed {
                    assert!(
                        item.outputs.is_some(),
                        "{} completed without outputs",
                        item.node_id
                    );
                }
            }
            completed_seen = list.summary.completed;
        }
    });
    for i in 0..20 {
        let s = step(i);
        let pod = server.pod_of(&s);
        pod.report(NS, WF, &s.node_id, &s.report(Some(1), false, None))
            .await
            .expect("start");
        pod.report(
            NS,
            WF,
            &s.node_id,
            &s.report(Some(2), true, Some(&outputs(i))),
        )
        .await
        .expect("final");
    }
    // A bound so that a failed write cannot leave the reader polling forever.
    tokio::time::timeout(std::time::Duration::from_secs(120), watching)
        .await
        .expect("the reader saw every completion")
        .expect("reader");
}

async fn completed_result_is_frozen(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let s = step(1);
    let pod = server.pod_of(&s);
    let mut last = s.report(Some(5), true, Some(&outputs(1)));
    last.progress = Some("10/10".into());
    let done = pod.report(NS, WF, &s.node_id, &last).await.expect("final");

    // The final report again, whatever its sequence: 200 and the same revision.
    let mut replay = last.clone();
    replay.sequence = Some(9);
    let again = pod
        .report(NS, WF, &s.node_id, &replay)
        .await
        .expect("replay");
    assert_eq!(again.status, 200);
    assert_eq!(again.body.revision, done.body.revision);

    // Anything that would change it: already_completed with the stored result.
    let mut other = last.clone();
    other.outputs = s.report(None, true, Some(&outputs(2))).outputs;
    let mut tick = s.report(Some(6), false, None);
    tick.progress = Some("9/10".into());
    for attempt in [other, tick] {
        let error = pod
            .report(NS, WF, &s.node_id, &attempt)
            .await
            .expect_err("frozen");
        assert_eq!(error.code(), Some(ProblemCode::AlreadyCompleted));
        let current = error
            .problem()
            .and_then(|p| p.current.as_ref())
            .expect("current");
        let current: serde_json::Value = serde_json::from_str(current.get()).expect("json");
        assert_eq!(current["state"], "completed");
        assert_eq!(current["revision"], done.body.revision);
        assert_eq!(current["outputs"]["parameters"][0]["value"], "1");
    }
    assert_eq!(changes(&server).await, 1);
}

async fn row_is_bound_to_the_first_pod(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let s = step(1);
    let first = server.pod_of(&s);
    first
        .report(NS, WF, &s.node_id, &s.report(Some(1), false, None))
        .await
        .expect("first pod");
    let other = s.restarted();
    let intruder = server.pod_of(&other);
    let error = intruder
        .report(
            NS,
            WF,
            &s.node_id,
            &other.report(Some(2), true, Some(&outputs(9))),
        )
        .await
        .expect_err("another pod");
    assert_eq!(error.code(), Some(ProblemCode::PodMismatch));
    let stored = server
        .reader()
        .get_result(NS, WF, &s.node_id, None)
        .await
        .expect("read");
    assert_eq!(stored.pod_uid.as_deref(), Some(s.pod_uid.as_str()));
    assert_eq!(stored.state, ResultState::Reporting);
    assert_eq!(changes(&server).await, 1);
}

async fn outputs_round_trip_byte_for_byte(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let deep = format!("{}\"bottom\"{}", "[".repeat(100), "]".repeat(100));
    let texts = [
        r#"{"parameters":[{"name":"nul","value":"a\u0000b"}],"result":"\u0000"}"#.to_owned(),
        r#"{"parameters":[{"name":"emoji","value":"🚀 ünïcødé ☃ \ud83d\ude00"}]}"#.to_owned(),
        format!(r#"{{"result":"x","zz":{{"deep":{deep}}},"aa":1,"artifacts":[]}}"#),
        r#"{ "exitCode" : "0",  "unknownField": {"b": 2, "a": [1, 2.50, -0.0, 1e3]} }"#.to_owned(),
    ];
    for (i, text) in texts.iter().enumerate() {
        let s = step(i as u32);
        let pod = server.pod_of(&s);
        pod.report(NS, WF, &s.node_id, &s.report(Some(1), true, Some(text)))
            .await
            .expect("report");
        let read = server
            .reader()
            .get_result(NS, WF, &s.node_id, None)
            .await
            .expect("read");
        assert_eq!(read.outputs.expect("outputs").get(), text.as_str());
        let db = server.db().await;
        let stored: String = argo_results_tests::on_db!(&db, |pool| sqlx::query_scalar(
            "SELECT outputs FROM results WHERE node_id = $1"
        )
        .bind(&s.node_id)
        .fetch_one(pool)
        .await)
        .expect("stored");
        assert_eq!(&stored, text);
    }
}

async fn instance_and_workflow_name_must_match_the_stored_row(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let s = step(1);
    let mut first = s.report(Some(1), false, None);
    first.instance_id = Some("controller-a".into());
    server.send(&s, &first).await.expect("first");

    let mut other_instance = s.report(Some(2), false, None);
    other_instance.instance_id = Some("controller-b".into());
    let error = server
        .send(&s, &other_instance)
        .await
        .expect_err("other instance");
    assert_eq!(error.code(), Some(ProblemCode::InvalidField));
    assert_eq!(error_field(&error), Some("instanceId"));

    // The same workflow UID under another name is a mix-up, not a new workflow.
    let renamed = server
        .controller()
        .expect(NS, "another-name", &s.node_id, &s.expectation())
        .await
        .expect_err("renamed workflow");
    assert_eq!(error_field(&renamed), Some("workflow"));
    let stored = server
        .reader()
        .get_result(NS, WF, &s.node_id, None)
        .await
        .expect("read");
    assert_eq!(stored.instance_id.as_deref(), Some("controller-a"));
    assert_eq!(stored.sequence, Some(1));
    assert_eq!(changes(&server).await, 1);
}

fn error_field(error: &argo_results_client::ClientError) -> Option<&str> {
    error.problem().and_then(|p| p.field.as_deref())
}
