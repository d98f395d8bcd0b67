//! docs/api.md section 4 and guarantee 2: the change feed.

use std::time::{Duration, Instant};

use argo_results_client::FeedOptions;
use argo_results_client::proto::FeedItem;
use argo_results_tests::fixtures::{NS, WF, outputs, step};
use argo_results_tests::{Backend, TestServer};

on_both_backends!(
    feed_lists_every_change_in_revision_order_and_resumes,
    feed_filters_by_namespace,
    feed_pages_by_limit_without_gaps,
    watch_wakes_on_a_commit_and_times_out_without_one,
);

fn revisions(items: &[FeedItem]) -> Vec<i64> {
    items.iter().map(FeedItem::revision).collect()
}

async fn feed_lists_every_change_in_revision_order_and_resumes(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let s = step(1);
    let pod = server.pod_of(&s);
    server.register(&s).await;
    pod.report(NS, WF, &s.node_id, &s.report(Some(1), false, None))
        .await
        .expect("tick");
    pod.report(
        NS,
        WF,
        &s.node_id,
        &s.report(Some(2), true, Some(&outputs(1))),
    )
    .await
    .expect("final");

    let reader = server.reader();
    let all = reader.feed(&FeedOptions::default()).await.expect("feed");
    assert_eq!(
        revisions(&all.items),
        vec![1, 2, 3],
        "each change once, in order"
    );
    assert_eq!(all.revision, 3);
    let states: Vec<String> = all
        .items
        .iter()
        .map(|item| match item {
            FeedItem::Upserted { result, .. } => result.state.as_str().to_owned(),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(states, ["expected", "reporting", "completed"]);

    let rest = reader
        .feed(&FeedOptions {
            since: 1,
            ..Default::default()
        })
        .await
        .expect("resume");
    assert_eq!(revisions(&rest.items), vec![2, 3]);
    let none = reader
        .feed(&FeedOptions {
            since: 3,
            ..Default::default()
        })
        .await
        .expect("caught up");
    assert!(none.items.is_empty());
    assert_eq!(none.revision, 3);
}

async fn feed_filters_by_namespace(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let controller = server.controller();
    let s = step(1);
    server.register(&s).await;
    controller
        .expect("team-b", WF, &s.node_id, &s.expectation())
        .await
        .expect("team-b");
    let feed = server
        .reader()
        .feed(&FeedOptions {
            namespace: Some("team-b".into()),
            ..Default::default()
        })
        .await
        .expect("feed");
    assert_eq!(revisions(&feed.items), vec![2]);
    assert_eq!(feed.revision, 2);
}

async fn feed_pages_by_limit_without_gaps(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    for i in 0..5 {
        let s = step(i);
        server.register(&s).await;
    }
    let reader = server.reader();
    let mut since = 0;
    let mut seen = Vec::new();
    loop {
        let page = reader
            .feed(&FeedOptions {
                since,
                limit: Some(2),
                ..Default::default()
            })
            .await
            .expect("page");
        if page.items.is_empty() {
            break;
        }
        seen.extend(revisions(&page.items));
        assert_eq!(page.revision, *seen.last().expect("items"));
        since = page.revision;
    }
    assert_eq!(seen, vec![1, 2, 3, 4, 5]);
}

async fn watch_wakes_on_a_commit_and_times_out_without_one(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let reader = server.reader();
    let quiet = reader
        .feed(&FeedOptions {
            watch: true,
            timeout_seconds: Some(1),
            ..Default::default()
        })
        .await
        .expect("quiet watch");
    assert!(quiet.items.is_empty());
    assert_eq!(quiet.revision, 0);

    let watching = {
        let reader = reader.clone();
        tokio::spawn(async move {
            let asked = Instant::now();
            let page = reader
                .feed(&FeedOptions {
                    watch: true,
                    timeout_seconds: Some(60),
                    ..Default::default()
                })
                .await
                .expect("watch");
            (page, asked.elapsed())
        })
    };
    server.wait_for_watchers(1).await;
    let s = step(1);
    server.register(&s).await;
    let (page, waited) = watching.await.expect("watcher");
    assert_eq!(revisions(&page.items), vec![1]);
    // Woken by the commit, not by the 60 s timeout (speed itself is the benchmark's job).
    assert!(
        waited < Duration::from_secs(60),
        "the watch was not woken by the commit"
    );
}
