//! docs/api.md section 4: reading one result and a workflow's results.

use argo_results_client::ListOptions;
use argo_results_client::proto::{AbandonRequest, ProblemCode, ResultState};
use argo_results_tests::fixtures::{NS, UID, WF, outputs, step};
use argo_results_tests::{Backend, TestServer};
use futures_util::StreamExt;

on_both_backends!(
    list_orders_by_node_with_a_summary_and_a_state_filter,
    list_pages_with_continue_tokens_bound_to_their_query,
    reads_without_a_uid_see_the_newest_incarnation,
    a_missing_result_is_not_found,
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
