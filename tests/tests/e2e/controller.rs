//! docs/api.md section 3: expectations, abandon and garbage collection.

use argo_results_client::proto::{AbandonRequest, FeedItem, ProblemCode, ResultState};
use argo_results_client::{FeedOptions, ListOptions};
use argo_results_tests::fixtures::{NS, UID, WF, outputs, step};
use argo_results_tests::{Backend, TestServer};

on_both_backends!(
    expectation_registers_an_expected_result,
    expectation_binds_the_pod,
    expectation_for_a_new_pod_resets_a_live_result,
    expectation_cannot_move_a_frozen_result,
    abandon_freezes_a_pending_result,
    abandon_of_a_completed_result_returns_its_outputs,
    abandon_of_an_unknown_result_is_not_found,
    delete_removes_one_incarnation_and_leaves_tombstones,
);

fn abandon_body() -> AbandonRequest {
    AbandonRequest {
        workflow_uid: UID.into(),
        reason: "pod deleted".into(),
    }
}

async fn expectation_registers_an_expected_result(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let controller = server.controller();
    let s = step(1);
    let mut expectation = s.expectation();
    expectation.pod_uid = None;
    let first = controller
        .expect(NS, WF, &s.node_id, &expectation)
        .await
        .expect("expect");
    assert_eq!(first.status, 201);
    assert_eq!(first.body.state, ResultState::Expected);
    assert_eq!(first.body.pod_name.as_deref(), Some(s.pod_name.as_str()));
    let again = controller
        .expect(NS, WF, &s.node_id, &expectation)
        .await
        .expect("again");
    assert_eq!(again.status, 200);
    assert_eq!(again.body.revision, first.body.revision);
    let list = controller
        .list_results(NS, WF, &ListOptions::default())
        .await
        .expect("list");
    assert_eq!(list.summary.expected, 1);
    assert_eq!(list.summary.completed, 0);
}

async fn expectation_binds_the_pod(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let s = step(1);
    server.register(&s).await;
    let other = s.restarted();
    let error = server
        .pod_of(&other)
        .report(
            NS,
            WF,
            &s.node_id,
            &other.report(Some(1), true, Some(&outputs(1))),
        )
        .await
        .expect_err("unregistered pod");
    assert_eq!(error.code(), Some(ProblemCode::PodMismatch));
    let answer = server.complete(&s, 1).await;
    assert_eq!(answer.status, 200, "the row existed since the expectation");
    assert_eq!(answer.body.state, ResultState::Completed);
}

async fn expectation_for_a_new_pod_resets_a_live_result(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let s = step(1);
    let old_pod = server.pod_of(&s);
    old_pod
        .report(
            NS,
            WF,
            &s.node_id,
            &s.report(Some(3), false, Some(&outputs(1))),
        )
        .await
        .expect("old pod");
    let restarted = s.restarted();
    let reset = server
        .controller()
        .expect(NS, WF, &s.node_id, &restarted.expectation())
        .await
        .expect("reset");
    assert_eq!(reset.status, 200);
    assert_eq!(reset.body.state, ResultState::Expected);
    assert_eq!(
        reset.body.pod_uid.as_deref(),
        Some(restarted.pod_uid.as_str())
    );
    assert!(reset.body.outputs.is_none());
    assert_eq!(reset.body.sequence, None);

    let late = old_pod
        .report(
            NS,
            WF,
            &s.node_id,
            &s.report(Some(4), true, Some(&outputs(1))),
        )
        .await
        .expect_err("the old pod's late write");
    assert_eq!(late.code(), Some(ProblemCode::PodMismatch));
    let answer = server
        .pod_of(&restarted)
        .report(
            NS,
            WF,
            &s.node_id,
            &restarted.report(Some(1), true, Some(&outputs(2))),
        )
        .await
        .expect("the new pod");
    assert_eq!(
        answer.body.outputs.map(|o| o.get().to_owned()),
        Some(outputs(2))
    );
}

async fn expectation_cannot_move_a_frozen_result(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let s = step(1);
    let done = server.complete(&s, 1).await;
    let controller = server.controller();
    let error = controller
        .expect(NS, WF, &s.node_id, &s.restarted().expectation())
        .await
        .expect_err("frozen");
    assert_eq!(error.code(), Some(ProblemCode::AlreadyCompleted));
    let same = server.register(&s).await;
    assert_eq!(same.status, 200);
    assert_eq!(same.body.revision, done.body.revision);
    assert_eq!(same.body.state, ResultState::Completed);
}

async fn abandon_freezes_a_pending_result(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let controller = server.controller();
    let s = step(1);
    server.register(&s).await;
    let abandoned = controller
        .abandon(NS, WF, &s.node_id, &abandon_body())
        .await
        .expect("abandon");
    assert_eq!(abandoned.state, ResultState::Abandoned);
    assert_eq!(abandoned.abandon_reason.as_deref(), Some("pod deleted"));
    let again = controller
        .abandon(NS, WF, &s.node_id, &abandon_body())
        .await
        .expect("again");
    assert_eq!(again.revision, abandoned.revision);
    let late = server
        .send(&s, &s.report(Some(1), true, Some(&outputs(1))))
        .await
        .expect_err("late report");
    assert_eq!(late.code(), Some(ProblemCode::AlreadyCompleted));
    assert_eq!(
        server
            .count("SELECT COUNT(*) FROM results WHERE state = 'abandoned'")
            .await,
        1
    );
}

async fn abandon_of_a_completed_result_returns_its_outputs(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let s = step(1);
    server.complete(&s, 1).await;
    let error = server
        .controller()
        .abandon(NS, WF, &s.node_id, &abandon_body())
        .await
        .expect_err("completed");
    assert_eq!(error.code(), Some(ProblemCode::AlreadyCompleted));
    let current = error
        .problem()
        .and_then(|p| p.current.as_ref())
        .expect("current");
    let current: serde_json::Value = serde_json::from_str(current.get()).expect("json");
    let expected: serde_json::Value = serde_json::from_str(&outputs(1)).expect("json");
    assert_eq!(current["outputs"], expected);
    assert_eq!(
        server
            .count("SELECT COUNT(*) FROM results WHERE state = 'completed'")
            .await,
        1
    );
}

async fn abandon_of_an_unknown_result_is_not_found(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let error = server
        .controller()
        .abandon(NS, WF, &step(1).node_id, &abandon_body())
        .await
        .expect_err("unknown");
    assert_eq!(error.code(), Some(ProblemCode::NotFound));
    assert_eq!(server.count("SELECT COUNT(*) FROM results").await, 0);
}

async fn delete_removes_one_incarnation_and_leaves_tombstones(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let controller = server.controller();
    for i in 0..3 {
        let s = step(i);
        server.register(&s).await;
    }
    let mut other_incarnation = step(0).expectation();
    other_incarnation.workflow_uid = "another-uid".into();
    controller
        .expect(NS, WF, &step(0).node_id, &other_incarnation)
        .await
        .expect("other incarnation");
    let before = controller
        .feed(&FeedOptions::default())
        .await
        .expect("feed")
        .revision;

    let deleted = controller
        .delete_results(NS, WF, UID)
        .await
        .expect("delete");
    assert_eq!(deleted.deleted, 3);
    let error = controller
        .get_result(NS, WF, &step(1).node_id, Some(UID))
        .await
        .expect_err("gone");
    assert_eq!(error.code(), Some(ProblemCode::NotFound));
    assert_eq!(server.count("SELECT COUNT(*) FROM results").await, 1);

    let feed = controller
        .feed(&FeedOptions {
            since: before,
            ..Default::default()
        })
        .await
        .expect("feed");
    let tombstones: Vec<(i64, String)> = feed
        .items
        .iter()
        .map(|item| match item {
            FeedItem::Deleted {
                revision,
                node_id,
                workflow_uid,
                ..
            } => {
                assert_eq!(workflow_uid, UID);
                (*revision, node_id.clone())
            }
            other => panic!("expected tombstones, got {other:?}"),
        })
        .collect();
    let expected: Vec<(i64, String)> = (0..3)
        .map(|i| (before + 1 + i as i64, step(i).node_id))
        .collect();
    assert_eq!(tombstones, expected);
    assert_eq!(
        controller
            .delete_results(NS, WF, UID)
            .await
            .expect("again")
            .deleted,
        0
    );

    let missing_uid = server
        .raw(
            reqwest::Method::DELETE,
            &format!("/api/v1/namespaces/{NS}/workflows/{WF}/results"),
            Some(&argo_results_tests::tokens::user_token(
                argo_results_tests::tokens::CONTROLLER,
            )),
            None,
            Vec::new(),
        )
        .await;
    assert_eq!(missing_uid.status, 400);
    assert_eq!(missing_uid.json["code"], "invalid_parameter");
    assert_eq!(server.count("SELECT COUNT(*) FROM results").await, 1);
}
