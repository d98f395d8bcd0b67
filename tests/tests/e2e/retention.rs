//! Feed and result retention: a reader behind the kept history gets 410 and resumes; old
//! results go, with tombstones, in batches.

use std::pin::pin;
use std::time::Duration;

use argo_results_client::controller::{Decision, PodPhase, Reconciler};
use argo_results_client::proto::{FeedItem, ProblemCode};
use argo_results_client::{FeedOptions, RetryPolicy, WatchEvent};
use argo_results_tests::fixtures::{NS, UID, WF, outputs, step};
use argo_results_tests::tokens::{self, READER};
use argo_results_tests::{Backend, TestServer, eventually};
use futures_util::StreamExt;

on_both_backends!(
    a_reader_behind_the_history_gets_410_and_resumes,
    the_reconciler_relists_when_its_history_is_gone,
    results_unchanged_past_retention_are_removed_with_tombstones,
);

/// How long the retention task, run every 100 ms by these servers, may take to prune.
pub(crate) const PRUNED_WITHIN: Duration = Duration::from_secs(30);

async fn a_reader_behind_the_history_gets_410_and_resumes(backend: Backend) {
    let server = TestServer::builder(backend)
        .flags(&["--feed-retention", "1s", "--retention-every", "100ms"])
        .start()
        .await;
    for i in 0..3 {
        server.register(&step(i)).await;
    }
    let reader = server.reader();
    eventually("the whole history is pruned", PRUNED_WITHIN, async || {
        (server.count("SELECT COUNT(*) FROM changes").await == 0).then_some(())
    })
    .await;
    let gone = reader.feed(&FeedOptions::default()).await.expect_err("410");
    let problem = gone.problem().expect("problem");
    assert_eq!((problem.status, problem.code), (410, ProblemCode::Gone));
    assert_eq!(
        problem.revision,
        Some(3),
        "the current revision to resume from"
    );
    assert_eq!(problem.field.as_deref(), Some("since"));
    let caught_up = reader
        .feed(&FeedOptions {
            since: 3,
            ..Default::default()
        })
        .await
        .expect("from the head");
    assert!(caught_up.items.is_empty());

    // The client's watch says so, then goes on from the current revision without loss.
    let watcher = argo_results_client::Client::builder(server.url())
        .token(argo_results_client::TokenSource::Value(tokens::user_token(
            READER,
        )))
        .retry(RetryPolicy::default())
        .build()
        .expect("client");
    let mut events = pin!(watcher.watch(FeedOptions::default()));
    match events.next().await.expect("an event").expect("no error") {
        WatchEvent::Reset { revision } => assert_eq!(revision, 3),
        other => panic!("expected a reset, got {other:?}"),
    }
    server.register(&step(3)).await;
    match events.next().await.expect("an event").expect("no error") {
        WatchEvent::Change(item) => assert_eq!(item.revision(), 4),
        other => panic!("expected the next change, got {other:?}"),
    }
}

async fn results_unchanged_past_retention_are_removed_with_tombstones(backend: Backend) {
    let server = TestServer::builder(backend)
        .flags(&["--retention-every", "100ms"])
        .start()
        .await;
    for i in 0..3 {
        server.register(&step(i)).await;
    }
    // Steps 0 and 1 last changed eight days ago; step 2 just now.
    let eight_days_ago = argo_results_tests::server::now_millis() - 8 * 86_400_000;
    let db = server.db().await;
    argo_results_tests::on_db!(&db, |pool| sqlx::query(
        "UPDATE results SET updated_at = $1 WHERE node_id <> $2"
    )
    .bind(eight_days_ago)
    .bind(step(2).node_id)
    .execute(pool)
    .await
    .map(drop))
    .expect("age two results");
    eventually("old results are removed", PRUNED_WITHIN, async || {
        (server.count("SELECT COUNT(*) FROM results").await == 1).then_some(())
    })
    .await;
    let left = server
        .reader()
        .get_result(NS, WF, &step(2).node_id, None)
        .await
        .expect("the young one stays");
    assert_eq!(left.node_id, step(2).node_id);
    let feed = server
        .reader()
        .feed(&FeedOptions {
            since: 3,
            ..Default::default()
        })
        .await
        .expect("feed");
    let deleted: Vec<(i64, String)> = feed
        .items
        .iter()
        .map(|item| match item {
            FeedItem::Deleted {
                revision, node_id, ..
            } => (*revision, node_id.clone()),
            other => panic!("expected tombstones, got {other:?}"),
        })
        .collect();
    assert_eq!(deleted, [(4, step(0).node_id), (5, step(1).node_id)]);
    let metrics = server.get("/metrics", None).await.text;
    assert!(
        metrics.contains("argo_results_retention_deleted_total{kind=\"results\"} 2"),
        "{metrics}"
    );
}

async fn the_reconciler_relists_when_its_history_is_gone(backend: Backend) {
    let server = TestServer::builder(backend)
        .flags(&["--feed-retention", "1s", "--retention-every", "100ms"])
        .start()
        .await;
    let mut controller = Reconciler::new(server.controller(), 0);
    let s = step(1);
    controller
        .pod_created(NS, WF, UID, &s.node_id, &s.pod_name, &s.pod_uid)
        .await
        .expect("expect");
    controller.follow(0).await.expect("feed");
    server.complete(&s, 1).await;
    eventually("the history is pruned", PRUNED_WITHIN, async || {
        (server.count("SELECT COUNT(*) FROM changes").await == 0).then_some(())
    })
    .await;
    // The completion's change is gone from the feed: only a re-list can show it.
    controller
        .follow(0)
        .await
        .expect("re-list instead of an error");
    assert_eq!(
        controller.decide(UID, &s.node_id, PodPhase::Succeeded),
        Decision::Succeeded {
            outputs: Some(outputs(1))
        }
    );
    server.register(&step(2)).await;
    assert_eq!(
        controller.follow(0).await.expect("feed"),
        1,
        "and the feed goes on"
    );
}
