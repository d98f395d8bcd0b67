//! Two server processes on one Postgres: the feed misses nothing and repeats nothing across
//! replicas, writes are read back from the other replica at once, a watch on one wakes on a
//! commit on the other, and a cron tick raced over both is claimed once.

use std::collections::BTreeMap;
use std::pin::pin;
use std::time::Instant;

use argo_results_client::proto::{ClaimRequest, FeedItem};
use argo_results_client::{Client, FeedOptions, RetryPolicy, TokenSource, WatchEvent};
use argo_results_tests::fixtures::{NS, WF, step};
use argo_results_tests::tokens::{self, READER};
use argo_results_tests::{Backend, TestServer};
use futures_util::StreamExt;

const WRITERS: u32 = 8;
const WRITES_EACH: u32 = 25;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_share_one_feed_and_one_claim_per_tick() {
    let a = TestServer::builder(Backend::Postgres).start().await;
    let b = a.replica().await;
    let follower = Client::builder(b.url())
        .token(TokenSource::Value(tokens::user_token(READER)))
        .retry(RetryPolicy::default())
        .build()
        .expect("client");

    // A watch on B wakes on a commit on A.
    let waiting = {
        let follower = follower.clone();
        tokio::spawn(async move {
            let page = follower
                .feed(&FeedOptions {
                    watch: true,
                    timeout_seconds: Some(30),
                    ..Default::default()
                })
                .await
                .expect("watch");
            (page, Instant::now())
        })
    };
    b.wait_for_watchers(1).await;
    let written = Instant::now();
    a.register(&step(99_999)).await;
    let (page, woke) = waiting.await.expect("watcher");
    assert_eq!(
        page.items.len(),
        1,
        "woken by A's commit, not by its timeout"
    );
    let wake_up = woke.duration_since(written);

    // 8 writers over both replicas, each reading its write back from the other one.
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (mine, other) = if w % 2 == 0 {
                (a.controller(), b.reader())
            } else {
                (b.controller(), a.reader())
            };
            tokio::spawn(async move {
                let mut acked = Vec::new();
                for i in 0..WRITES_EACH {
                    let s = step(w * 1000 + i);
                    let answer = mine
                        .expect(NS, WF, &s.node_id, &s.expectation())
                        .await
                        .expect("write");
                    let read = other
                        .get_result(NS, WF, &s.node_id, None)
                        .await
                        .expect("read on the other replica");
                    assert_eq!(
                        read.revision, answer.body.revision,
                        "read-after-write across replicas"
                    );
                    acked.push((answer.body.revision, s.node_id));
                }
                acked
            })
        })
        .collect();
    let mut acked = BTreeMap::new();
    for writer in writers {
        acked.extend(writer.await.expect("writer"));
    }
    assert_eq!(
        acked.len(),
        (WRITERS * WRITES_EACH) as usize,
        "one revision per write"
    );

    // The follower sees every acknowledged write once, in increasing revision order.
    let mut seen = Vec::new();
    let mut events = pin!(follower.watch(FeedOptions {
        since: 1,
        ..Default::default()
    }));
    while seen.len() < acked.len() {
        let event = tokio::time::timeout(std::time::Duration::from_secs(60), events.next())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "no change for a minute after {} of {}",
                    seen.len(),
                    acked.len()
                )
            });
        match event.expect("an event").expect("no error") {
            WatchEvent::Change(FeedItem::Upserted { revision, result }) => {
                seen.push((revision, result.node_id))
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    let revisions: Vec<i64> = seen.iter().map(|(r, _)| *r).collect();
    assert!(
        revisions.windows(2).all(|w| w[0] < w[1]),
        "strictly increasing"
    );
    let missed = acked
        .iter()
        .filter(|entry| !seen.contains(&(*entry.0, entry.1.clone())))
        .count();
    let duplicates = seen.len() - seen.iter().collect::<std::collections::BTreeSet<_>>().len();
    assert_eq!((missed, duplicates), (0, 0));

    // 100 ticks, each claimed 12 ways over both replicas: one 201 per tick.
    let mut winners = 0;
    for tick in 0..100 {
        let racers: Vec<_> = (0..12)
            .map(|r| {
                let controller = if r % 2 == 0 {
                    a.controller()
                } else {
                    b.controller()
                };
                tokio::spawn(async move {
                    let claim = ClaimRequest {
                        cron_workflow_uid: "nightly-uid".into(),
                        scheduled_time: format!("2026-11-29T{:02}:{:02}:00Z", tick / 60, tick % 60),
                        workflow_name: format!("nightly-{tick}"),
                        lease_seconds: None,
                    };
                    controller.claim(NS, "nightly", &claim).await.is_ok()
                })
            })
            .collect();
        let mut created = 0;
        for racer in racers {
            created += u32::from(racer.await.expect("racer"));
        }
        assert_eq!(created, 1, "tick {tick}");
        winners += created;
    }
    println!(
        "two replicas: writes={} changes_seen={} missed={missed} duplicates={duplicates} \
         watch_wake_up_ms={} claims_won={winners}/100",
        acked.len(),
        seen.len(),
        wake_up.as_millis()
    );
}
