//! Races: one node's final report sent 16 times at once, one cron tick claimed 16 ways.

use argo_results_client::proto::ProblemCode;
use argo_results_tests::fixtures::{NS, WF, outputs, step};
use argo_results_tests::{Backend, TestServer};

on_both_backends!(
    sixteen_identical_final_reports_store_once,
    sixteen_claims_of_one_tick_yield_one_run,
);

async fn sixteen_identical_final_reports_store_once(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let s = step(1);
    let pod = server.pod_of(&s);
    let report = s.report(Some(1), true, Some(&outputs(1)));
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let (pod, report, node) = (pod.clone(), report.clone(), s.node_id.clone());
            tokio::spawn(async move { pod.report(NS, WF, &node, &report).await.expect("report") })
        })
        .collect();
    let mut statuses = Vec::new();
    let mut revisions = Vec::new();
    for task in tasks {
        let answer = task.await.expect("task");
        statuses.push(answer.status);
        revisions.push(answer.body.revision);
    }
    statuses.sort();
    assert_eq!(statuses, [vec![200; 15], vec![201]].concat());
    revisions.dedup();
    assert_eq!(revisions.len(), 1, "one revision for all: {revisions:?}");
    assert_eq!(server.count("SELECT COUNT(*) FROM changes").await, 1);
}

async fn sixteen_claims_of_one_tick_yield_one_run(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let controller = server.controller();
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let controller = controller.clone();
            tokio::spawn(async move {
                controller
                    .claim(
                        "argo",
                        "nightly",
                        &super::cron::claim("2026-11-29T17:00:00Z"),
                    )
                    .await
            })
        })
        .collect();
    let mut created = 0;
    for task in tasks {
        match task.await.expect("task") {
            Ok(_) => created += 1,
            Err(error) => assert_eq!(error.code(), Some(ProblemCode::AlreadyClaimed)),
        }
    }
    assert_eq!(created, 1);
    assert_eq!(server.count("SELECT COUNT(*) FROM cron_claims").await, 1);
}
