//! docs/api.md section 4: reading one result and a workflow's results.

use argo_results_client::proto::{AbandonRequest, ProblemCode, ResultState};
use argo_results_client::{ListOptions, WorkflowsOptions};
use argo_results_tests::fixtures::{NS, UID, WF, outputs, step};
use argo_results_tests::{Backend, TestServer};
use futures_util::StreamExt;

on_both_backends!(
    list_orders_by_node_with_a_summary_and_a_state_filter,
    list_pages_with_continue_tokens_bound_to_their_query,
    reads_without_a_uid_see_the_newest_incarnation,
    a_missing_result_is_not_found,
    workflows_are_listed_with_their_results_added_up,
);

/// Steps 0-1 expected, 2 reporting, 3-4 completed, 5 abandoned.
async fn seed(server: &TestServer) {
    let controller = server.controller();
    for i in 0..6 {
        let s = step(i);
        server.register(&s).await;
        let pod = server.pod_of(&s);
        match i {
            2 => {
                pod.report(NS, WF, &s.node_id, &s.report(Some(1), false, None))
                    .await
                    .expect("tick");
            }
            3 | 4 => {
                pod.report(
                    NS,
                    WF,
                    &s.node_id,
                    &s.report(Some(1), true, Some(&outputs(i))),
                )
                .await
                .expect("final");
            }
            5 => {
                let abandon = AbandonRequest {
                    workflow_uid: UID.into(),
                    reason: "pod deleted".into(),
                };
                controller
                    .abandon(NS, WF, &s.node_id, &abandon)
                    .await
                    .expect("abandon");
            }
            _ => {}
        }
    }
}

async fn list_orders_by_node_with_a_summary_and_a_state_filter(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    seed(&server).await;
    let reader = server.reader();
    let all = reader
        .list_results(NS, WF, &ListOptions::default())
        .await
        .expect("list");
    let nodes: Vec<String> = all.items.iter().map(|r| r.node_id.clone()).collect();
    let expected: Vec<String> = (0..6).map(|i| step(i).node_id).collect();
    assert_eq!(nodes, expected);
    assert_eq!(
        (
            all.summary.expected,
            all.summary.reporting,
            all.summary.completed,
            all.summary.abandoned
        ),
        (2, 1, 2, 1)
    );
    assert_eq!(
        all.revision,
        all.items.iter().map(|r| r.revision).max().expect("items")
    );
    assert!(all.continue_token.is_none());

    let completed = reader
        .list_results(
            NS,
            WF,
            &ListOptions {
                state: Some("completed".into()),
                ..Default::default()
            },
        )
        .await
        .expect("completed only");
    assert_eq!(completed.items.len(), 2);
    assert!(
        completed
            .items
            .iter()
            .all(|r| r.state == ResultState::Completed)
    );
    assert_eq!(
        completed.summary, all.summary,
        "the summary covers the whole workflow"
    );
}

async fn list_pages_with_continue_tokens_bound_to_their_query(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    for i in 0..7 {
        let s = step(i);
        server.register(&s).await;
    }
    let reader = server.reader();
    let mut seen = Vec::new();
    let mut options = ListOptions {
        limit: Some(3),
        ..Default::default()
    };
    loop {
        let page = reader.list_results(NS, WF, &options).await.expect("page");
        assert!(page.items.len() <= 3);
        seen.extend(page.items.iter().map(|r| r.node_id.clone()));
        match page.continue_token {
            Some(token) => options.continue_token = Some(token),
            None => break,
        }
    }
    let expected: Vec<String> = (0..7).map(|i| step(i).node_id).collect();
    assert_eq!(seen, expected);

    // The client's stream follows the same tokens.
    let streamed: Vec<String> = reader
        .list_all(
            NS,
            WF,
            ListOptions {
                limit: Some(2),
                ..Default::default()
            },
        )
        .map(|item| item.expect("item").node_id)
        .collect()
        .await;
    assert_eq!(streamed, expected);

    let first = reader
        .list_results(
            NS,
            WF,
            &ListOptions {
                limit: Some(3),
                ..Default::default()
            },
        )
        .await
        .expect("first page");
    let other_filter = ListOptions {
        state: Some("completed".into()),
        continue_token: first.continue_token,
        ..Default::default()
    };
    let error = reader
        .list_results(NS, WF, &other_filter)
        .await
        .expect_err("other query");
    assert_eq!(error.code(), Some(ProblemCode::InvalidParameter));
    assert_eq!(
        error.problem().and_then(|p| p.field.clone()).as_deref(),
        Some("continue")
    );
}

async fn reads_without_a_uid_see_the_newest_incarnation(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let controller = server.controller();
    let s = step(1);
    server.register(&s).await;
    let mut second = step(2).expectation();
    second.workflow_uid = "second-uid".into();
    controller
        .expect(NS, WF, &step(2).node_id, &second)
        .await
        .expect("second incarnation");

    let reader = server.reader();
    let newest = reader
        .list_results(NS, WF, &ListOptions::default())
        .await
        .expect("newest");
    assert_eq!(newest.items.len(), 1);
    assert_eq!(newest.items[0].workflow_uid, "second-uid");
    let error = reader
        .get_result(NS, WF, &s.node_id, None)
        .await
        .expect_err("not in the newest");
    assert_eq!(error.code(), Some(ProblemCode::NotFound));
    let old = reader
        .get_result(NS, WF, &s.node_id, Some(UID))
        .await
        .expect("by uid");
    assert_eq!(old.workflow_uid, UID);
    let old_list = reader
        .list_results(
            NS,
            WF,
            &ListOptions {
                workflow_uid: Some(UID.into()),
                ..Default::default()
            },
        )
        .await
        .expect("old list");
    assert_eq!(old_list.items.len(), 1);
    assert_eq!(old_list.items[0].node_id, s.node_id);
}

async fn a_missing_result_is_not_found(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let error = server
        .reader()
        .get_result(NS, WF, &step(1).node_id, None)
        .await
        .expect_err("missing");
    assert_eq!(error.code(), Some(ProblemCode::NotFound));
    assert_eq!(error.problem().map(|p| p.status), Some(404));
    let empty = server
        .reader()
        .list_results(NS, "nothing-here", &ListOptions::default())
        .await
        .expect("empty");
    assert!(empty.items.is_empty());
    assert_eq!(empty.summary.expected + empty.summary.completed, 0);
}

/// `GET /api/v1/workflows`: each incarnation's results counted by state, and the ended
/// ones by how they ended as the controller decides (phase, else exitCode, else Error;
/// abandoned is Error), in pages bound to their namespace.
async fn workflows_are_listed_with_their_results_added_up(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let controller = server.controller();
    // 0 expected, 1 reporting; completed: 2 Succeeded by phase, 3 by exitCode "0",
    // 4 Failed by exitCode "1", 5 Error (neither); 6 abandoned.
    for i in 0..7 {
        let s = step(i);
        server.register(&s).await;
        let mut report = s.report(Some(1), i != 1, None);
        match i {
            0 | 6 => continue,
            2 => report.phase = Some("Succeeded".into()),
            3 | 4 => {
                let outputs = format!(r#"{{"exitCode":"{}"}}"#, i - 3);
                report.outputs =
                    Some(serde_json::value::RawValue::from_string(outputs).expect("JSON"));
            }
            _ => {}
        }
        server.send(&s, &report).await.expect("report");
    }
    let abandon = AbandonRequest {
        workflow_uid: UID.into(),
        reason: "pod deleted".into(),
    };
    controller
        .abandon(NS, WF, &step(6).node_id, &abandon)
        .await
        .expect("abandon");
    let reader = server.reader();
    let in_namespace = WorkflowsOptions {
        namespace: Some(NS.into()),
        ..Default::default()
    };
    let list = reader.workflows(&in_namespace).await.expect("workflows");
    assert_eq!(list.items.len(), 1, "{list:?}");
    let workflow = &list.items[0];
    assert_eq!(
        (workflow.workflow.as_str(), workflow.workflow_uid.as_str()),
        (WF, UID)
    );
    let s = workflow.summary;
    assert_eq!(
        (s.expected, s.reporting, s.completed, s.abandoned),
        (1, 1, 4, 1)
    );
    let e = workflow.ended;
    assert_eq!((e.succeeded, e.failed, e.error), (2, 1, 2), "{workflow:?}");
    assert_eq!(workflow.revision, list.revision);
    assert!(list.continue_token.is_none());
    let elsewhere = WorkflowsOptions {
        namespace: Some("other".into()),
        ..Default::default()
    };
    assert!(
        reader
            .workflows(&elsewhere)
            .await
            .expect("other")
            .items
            .is_empty()
    );

    // Pages: a second incarnation of the name, one workflow a page.
    let again = step(0).restarted();
    let mut second = again.expectation();
    second.workflow_uid = "5d0c9f5e-ffff-4c1e-9d0a-8b3c2f1e7a10".into();
    controller
        .expect(NS, WF, &again.node_id, &second)
        .await
        .expect("second incarnation");
    let one = WorkflowsOptions {
        limit: Some(1),
        ..in_namespace.clone()
    };
    let first = reader.workflows(&one).await.expect("page 1");
    let token = first.continue_token.clone().expect("a second page");
    let next = WorkflowsOptions {
        continue_token: Some(token.clone()),
        ..one.clone()
    };
    let last = reader.workflows(&next).await.expect("page 2");
    assert_eq!(first.items.len() + last.items.len(), 2);
    assert_ne!(first.items[0].workflow_uid, last.items[0].workflow_uid);
    assert!(last.continue_token.is_none());
    // A token is bound to the namespace it lists.
    let foreign = WorkflowsOptions {
        namespace: None,
        continue_token: Some(token),
        ..Default::default()
    };
    let refused = reader.workflows(&foreign).await.expect_err("foreign token");
    assert_eq!(refused.code(), Some(ProblemCode::InvalidParameter));
    // A pod is no reader.
    let pod = server.pod_of(&step(1));
    let forbidden = pod.workflows(&in_namespace).await.expect_err("a pod lists");
    assert_eq!(forbidden.code(), Some(ProblemCode::Forbidden));
}
