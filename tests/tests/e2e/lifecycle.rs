//! The process: SIGTERM ends long polls and exits cleanly.

use std::time::Duration;

use argo_results_client::FeedOptions;
use argo_results_tests::fixtures::{NS, WF, outputs, step};
use argo_results_tests::{Backend, TestServer};

on_both_backends!(
    sigterm_ends_long_polls_and_exits_zero,
    acknowledged_reports_survive_a_crash,
    probes_and_metrics_answer_without_a_token,
);

async fn sigterm_ends_long_polls_and_exits_zero(backend: Backend) {
    let mut server = TestServer::start(backend).await;
    let reader = server.reader();
    let watching = tokio::spawn(async move {
        reader
            .feed(&FeedOptions {
                watch: true,
                timeout_seconds: Some(300),
                ..Default::default()
            })
            .await
    });
    // SIGTERM only once the long poll is waiting inside the server.
    server.wait_for_watchers(1).await;
    // Bounded only so that a hang fails the test instead of stalling the suite.
    let status = tokio::time::timeout(Duration::from_secs(60), server.terminate())
        .await
        .expect("the server kept waiting for the long poll instead of exiting");
    assert!(status.success(), "exit status {status}");
    let page = watching
        .await
        .expect("watcher")
        .expect("the long poll was answered");
    assert!(page.items.is_empty());
}

/// Guarantee 4: a crash after a 2xx loses nothing.
async fn acknowledged_reports_survive_a_crash(backend: Backend) {
    let server = TestServer::start(backend).await;
    for i in 0..10 {
        server.complete(&step(i), i).await;
    }
    let server = server.crash_and_restart().await;
    let list = server
        .reader()
        .list_results(NS, WF, &Default::default())
        .await
        .expect("list after restart");
    assert_eq!(list.summary.completed, 10);
    for (i, item) in list.items.iter().enumerate() {
        assert_eq!(
            item.outputs.as_ref().map(|o| o.get()),
            Some(outputs(i as u32).as_str())
        );
    }
    // The revision counter carries on where it was.
    let next = server.register(&step(10)).await;
    assert_eq!(next.body.revision, 11);
}

async fn probes_and_metrics_answer_without_a_token(backend: Backend) {
    let server = TestServer::start(backend).await;
    assert_eq!(server.get("/healthz", None).await.status, 200);
    assert_eq!(server.get("/readyz", None).await.status, 200);
    let s = step(1);
    server.complete(&s, 1).await;
    let metrics = server.get("/metrics", None).await;
    assert_eq!(metrics.status, 200);
    assert!(
        metrics.text.contains("argo_results_build_info{version="),
        "{}",
        metrics.text
    );
    assert!(
        metrics
            .text
            .contains("argo_results_reports_total{outcome=\"created\"} 1"),
        "{}",
        metrics.text
    );
    assert!(
        !metrics.text.contains(&s.node_id),
        "node IDs never become labels"
    );
}
