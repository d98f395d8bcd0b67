//! docs/api.md section 4: the store's epoch. Every list and feed page names it; a feed reader
//! whose position is not in the store's history (ahead of its head, or read in another
//! epoch) gets `410 gone` with the revision and epoch to resume from, never a page that
//! would silently skip changes. `--new-epoch` starts a new one (the runbook's step after a
//! restore).

use argo_results_client::FeedOptions;
use argo_results_client::proto::ProblemCode;
use argo_results_tests::fixtures::{NS, WF, step};
use argo_results_tests::{Backend, TestServer};

on_both_backends!(
    pages_and_lists_name_the_store_epoch,
    a_reader_ahead_of_the_head_is_gone,
    a_reader_of_another_epoch_is_gone,
    a_new_epoch_at_start_sends_every_reader_to_list_again,
);

/// The epoch a list of the fixtures' workflow names.
async fn listed_epoch(server: &TestServer) -> String {
    let list = server
        .reader()
        .list_results(NS, WF, &Default::default())
        .await
        .expect("list");
    list.epoch.expect("a list names the epoch")
}

async fn pages_and_lists_name_the_store_epoch(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let epoch = listed_epoch(&server).await;
    assert_eq!(epoch.len(), 36, "a UUID: {epoch}");
    server.register(&step(1)).await;
    server.complete(&step(1), 1).await;
    let page = server
        .reader()
        .feed(&FeedOptions {
            epoch: Some(epoch.clone()),
            ..Default::default()
        })
        .await
        .expect("feed");
    assert_eq!(page.epoch.as_deref(), Some(epoch.as_str()));
    assert_eq!(page.revision, 2);
    assert_eq!(listed_epoch(&server).await, epoch, "commits keep the epoch");
}

async fn a_reader_ahead_of_the_head_is_gone(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    server.register(&step(1)).await;
    let epoch = listed_epoch(&server).await;
    // A controller whose position is past the head: the database was restored behind it.
    for watch in [false, true] {
        let gone = server
            .reader()
            .feed(&FeedOptions {
                since: 5,
                watch,
                ..Default::default()
            })
            .await
            .expect_err("410");
        let problem = gone.problem().expect("a problem");
        assert_eq!((problem.status, problem.code), (410, ProblemCode::Gone));
        assert_eq!(problem.revision, Some(1), "the head to resume from");
        assert_eq!(problem.epoch.as_deref(), Some(epoch.as_str()));
        assert_eq!(problem.field.as_deref(), Some("since"));
        assert!(problem.detail.contains("ahead"), "{}", problem.detail);
    }
    let at_head = server
        .reader()
        .feed(&FeedOptions {
            since: 1,
            ..Default::default()
        })
        .await
        .expect("at the head");
    assert!(at_head.items.is_empty());
    assert_eq!(at_head.revision, 1);
}

async fn a_reader_of_another_epoch_is_gone(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    server.register(&step(1)).await;
    let epoch = listed_epoch(&server).await;
    let gone = server
        .reader()
        .feed(&FeedOptions {
            since: 1,
            epoch: Some("another-history".into()),
            ..Default::default()
        })
        .await
        .expect_err("410");
    let problem = gone.problem().expect("a problem");
    assert_eq!((problem.status, problem.code), (410, ProblemCode::Gone));
    assert_eq!(problem.revision, Some(1));
    assert_eq!(problem.epoch.as_deref(), Some(epoch.as_str()));
    assert_eq!(problem.field.as_deref(), Some("epoch"));
    assert!(
        problem.detail.contains("another-history") && problem.detail.contains(&epoch),
        "{}",
        problem.detail
    );
}

async fn a_new_epoch_at_start_sends_every_reader_to_list_again(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    server.register(&step(1)).await;
    let first = listed_epoch(&server).await;
    let server = server.crash_and_restart().await;
    assert_eq!(
        listed_epoch(&server).await,
        first,
        "a restart keeps the epoch"
    );
    let server = server.restart_with(&["--new-epoch"]).await;
    let second = listed_epoch(&server).await;
    assert_ne!(second, first);
    assert!(
        server.log().contains("the store begins a new epoch"),
        "{}",
        server.log()
    );
    let gone = server
        .reader()
        .feed(&FeedOptions {
            since: 1,
            epoch: Some(first),
            ..Default::default()
        })
        .await
        .expect_err("410");
    let problem = gone.problem().expect("a problem");
    assert_eq!(problem.code, ProblemCode::Gone);
    assert_eq!(problem.epoch, Some(second));
}
