//! API sections 2 and 8: with `--require-expectation` a pod may report only a node whose
//! expectation names it, so it can neither win the race for a node whose name it fits nor
//! invent a workflow incarnation. The default follows how tokens are checked: on with the
//! cluster's keys, a JWKS file or TokenReview; off with dev auth (`embedded.rs`). With the cluster's own tokens: `cluster.rs`.

use argo_results_client::proto::{ExpectationRequest, NodeResult, ProblemCode, ReportRequest};
use argo_results_client::{Answer, ClientError};
use argo_results_tests::fixtures::{NS, UID, WF, outputs, step};
use argo_results_tests::{Backend, TestServer};

on_both_backends!(
    a_pod_reports_only_a_node_registered_for_it,
    an_impostor_whose_name_fits_cannot_take_the_node,
    an_invented_incarnation_creates_nothing,
    a_registered_pod_uid_refuses_another_pod,
);

const REQUIRED: &[&str] = &["--require-expectation"];

async fn nothing_stored(server: &TestServer) {
    assert_eq!(server.count("SELECT COUNT(*) FROM results").await, 0);
    assert_eq!(server.count("SELECT COUNT(*) FROM changes").await, 0);
}

fn not_expected(answer: Result<Answer<NodeResult>, ClientError>) -> String {
    let error = answer.expect_err("refused");
    assert_eq!(error.code(), Some(ProblemCode::NotExpected), "{error}");
    let problem = error.problem().expect("problem");
    assert_eq!(problem.status, 409);
    assert_eq!(problem.field.as_deref(), Some("podName"));
    problem.detail.clone()
}

async fn a_pod_reports_only_a_node_registered_for_it(backend: Backend) {
    let server = TestServer::builder(backend).flags(REQUIRED).start().await;
    let s = step(1);
    let final_report = s.report(Some(1), true, Some(&outputs(1)));
    let detail = not_expected(server.send(&s, &final_report).await);
    assert!(detail.contains(&s.pod_name), "{detail}");
    nothing_stored(&server).await;

    assert_eq!(server.register(&s).await.status, 201);
    let stored = server.send(&s, &final_report).await.expect("registered");
    assert_eq!(stored.status, 200, "the expectation created the row");
    assert_eq!(
        stored.body.outputs.map(|o| o.get().to_owned()),
        Some(outputs(1))
    );
}

async fn an_impostor_whose_name_fits_cannot_take_the_node(backend: Backend) {
    let server = &TestServer::builder(backend).flags(REQUIRED).start().await;
    let (workflow, node) = ("race", "race-31337");
    // The controller registers the pod before creating it, so without its UID yet.
    let mut expectation = ExpectationRequest {
        workflow_uid: UID.into(),
        pod_name: "race-main-31337".into(),
        pod_uid: None,
    };
    let register = |expectation: ExpectationRequest| async move {
        server
            .controller()
            .expect(NS, workflow, node, &expectation)
            .await
            .expect("expectation")
    };
    register(expectation.clone()).await;
    let report = |pod_name: &'static str, pod_uid: &'static str| async move {
        let body = ReportRequest {
            pod_name: pod_name.into(),
            pod_uid: pod_uid.into(),
            ..step(1).report(
                Some(1),
                true,
                Some(r#"{"parameters":[{"name":"won","value":"yes"}]}"#),
            )
        };
        server
            .pod(NS, pod_name, pod_uid)
            .report(NS, workflow, node, &body)
            .await
    };
    // `race-anything-31337` has the shape of a pod of that node, and reports first.
    let detail = not_expected(report("race-anything-31337", "impostor-uid").await);
    assert!(
        detail.contains("race-anything-31337") && !detail.contains("race-main-31337"),
        "names the pod that asked, not the one expected: {detail}"
    );
    // A pod of the very name expected but another UID (one created before the
    // controller's): until the controller names the UID it created, nobody may write, and
    // each is told to retry.
    for (pod, uid) in [
        ("race-main-31337", "impostor-uid"),
        ("race-main-31337", "real-uid"),
    ] {
        let error = report(pod, uid).await.expect_err("not yet");
        assert_eq!(
            error.code(),
            Some(ProblemCode::Unavailable),
            "{uid}: {error}"
        );
        let problem = error.problem().expect("problem");
        assert_eq!(
            (problem.status, problem.field.as_deref()),
            (503, Some("podUid"))
        );
    }
    let before = server
        .reader()
        .get_result(NS, workflow, node, None)
        .await
        .expect("read");
    assert_eq!(before.state.as_str(), "expected", "nothing written");
    expectation.pod_uid = Some("real-uid".into());
    register(expectation).await;
    let stored = report("race-main-31337", "real-uid")
        .await
        .expect("the registered pod reports");
    assert_eq!(stored.body.pod_uid.as_deref(), Some("real-uid"));
    let late = report("race-main-31337", "impostor-uid")
        .await
        .expect_err("the impostor");
    assert_eq!(late.code(), Some(ProblemCode::PodMismatch));
    not_expected(report("race-anything-31337", "impostor-uid").await);
}

async fn an_invented_incarnation_creates_nothing(backend: Backend) {
    let server = TestServer::builder(backend).flags(REQUIRED).start().await;
    let s = step(1);
    server.register(&s).await;
    // One pod, many made-up workflow UIDs: each would be a row, and the newest a new
    // incarnation hiding the real results from reads by name.
    for i in 0..20 {
        let invented = ReportRequest {
            workflow_uid: format!("invented-{i}"),
            ..s.report(Some(1), true, Some(&outputs(9)))
        };
        not_expected(server.send(&s, &invented).await);
    }
    assert_eq!(server.count("SELECT COUNT(*) FROM results").await, 1);
    let read = server
        .reader()
        .get_result(NS, WF, &s.node_id, None)
        .await
        .expect("read by name");
    assert_eq!(read.workflow_uid, UID);
    assert!(read.outputs.is_none());
}

async fn a_registered_pod_uid_refuses_another_pod(backend: Backend) {
    let server = TestServer::builder(backend).flags(REQUIRED).start().await;
    let restarted = step(1).restarted();
    server.register(&restarted).await;
    let first = step(1);
    let late = server
        .send(&first, &first.report(Some(1), true, Some(&outputs(1))))
        .await
        .expect_err("the pod the controller replaced");
    assert_eq!(late.code(), Some(ProblemCode::PodMismatch));
    let detail = late.problem().map(|p| p.detail.clone()).unwrap_or_default();
    assert!(detail.contains("another pod"), "{detail}");
    for other in [&restarted.pod_name, &restarted.pod_uid] {
        assert!(
            !detail.contains(other.as_str()),
            "names the bound pod: {detail}"
        );
    }
    server.complete(&restarted, 2).await;
}
