//! API section 6: cron run claims.

use argo_results_client::proto::{ClaimRequest, ProblemCode};
use argo_results_tests::{Backend, TestServer};

on_both_backends!(a_tick_is_claimed_once_and_listed_newest_first);

pub fn claim(scheduled_time: &str) -> ClaimRequest {
    ClaimRequest {
        cron_workflow_uid: "8e2a6f0c-cron".into(),
        scheduled_time: scheduled_time.into(),
        workflow_name: "nightly-1764435600".into(),
    }
}

async fn a_tick_is_claimed_once_and_listed_newest_first(backend: Backend) {
    let server = TestServer::start(backend).await;
    let controller = server.controller();
    let first = controller
        .claim("argo", "nightly", &claim("2026-11-29T17:00:00Z"))
        .await
        .expect("claim");
    assert_eq!(first.scheduled_time, "2026-11-29T17:00:00Z");
    assert_eq!(first.cron_workflow, "nightly");

    // The same instant written with an offset is the same tick.
    let error = controller
        .claim("argo", "nightly", &claim("2026-11-29T18:00:00+01:00"))
        .await
        .expect_err("claimed twice");
    assert_eq!(error.code(), Some(ProblemCode::AlreadyClaimed));
    let current = error
        .problem()
        .and_then(|p| p.current.as_ref())
        .expect("current");
    let current: serde_json::Value = serde_json::from_str(current.get()).expect("json");
    assert_eq!(current["claimedAt"], first.claimed_at);

    controller
        .claim("argo", "nightly", &claim("2026-11-29T18:00:00Z"))
        .await
        .expect("next tick");
    let list = server
        .reader()
        .claims("argo", "nightly", None)
        .await
        .expect("claims");
    let times: Vec<&str> = list
        .items
        .iter()
        .map(|c| c.scheduled_time.as_str())
        .collect();
    assert_eq!(times, ["2026-11-29T18:00:00Z", "2026-11-29T17:00:00Z"]);
    assert_eq!(
        list.last_scheduled_time.as_deref(),
        Some("2026-11-29T18:00:00Z")
    );
    assert_eq!(server.count("SELECT COUNT(*) FROM cron_claims").await, 2);
}
