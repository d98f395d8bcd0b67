//! docs/api.md section 6: cron run claims under a lease, settled by their holder, taken over when
//! their holder dies, listed in pages, and pruned.
//!
//! Leases are expired by moving `lease_expires_at` back in the database, except in
//! `an_expired_lease_is_taken_over_on_the_databases_clock`, which waits out a real 5 s
//! lease with a bounded poll.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use argo_results_client::cron::{Submission, Tick, TickError, finish, run_tick};
use argo_results_client::proto::{
    Claim, ClaimRequest, ClaimState, ProblemCode, SettleOutcome, SettleRequest,
};
use argo_results_client::{Client, ClientError, RunsOptions};
use argo_results_tests::tokens::{self, CONTROLLER};
use argo_results_tests::{Backend, TestServer, eventually};
use reqwest::Method;

use super::retention::PRUNED_WITHIN;

on_both_backends!(
    a_claim_holds_its_tick_under_a_lease_until_settled_once,
    a_holder_that_dies_before_settling_is_taken_over_under_the_first_name,
    an_expired_lease_is_taken_over_on_the_databases_clock,
    last_scheduled_time_moves_only_when_a_tick_is_settled,
    pages_cover_every_claim_once_newest_first,
    retention_keeps_each_cron_workflows_newest_settled_claim,
    bad_claims_and_settles_name_the_field_and_change_nothing,
    the_tick_helper_creates_once_and_stops_when_its_lease_is_lost,
);

const NS: &str = "argo";
const CRON: &str = "nightly";
const CRON_UID: &str = "8e2a6f0c-cron";
const TICK: &str = "2026-11-29T17:00:00Z";

/// The claim of `scheduled_time` with the default lease, as Argo names its workflow.
pub fn claim(scheduled_time: &str) -> ClaimRequest {
    ClaimRequest {
        cron_workflow_uid: CRON_UID.into(),
        scheduled_time: scheduled_time.into(),
        workflow_name: "nightly-1795971600".into(),
        lease_seconds: None,
    }
}

fn submitted(holder: &Claim, workflow_uid: &str) -> SettleRequest {
    SettleRequest {
        cron_workflow_uid: holder.cron_workflow_uid.clone(),
        scheduled_time: holder.scheduled_time.clone(),
        claim_id: holder.claim_id.clone().expect("the holder's claimId"),
        outcome: SettleOutcome::Submitted,
        workflow_uid: Some(workflow_uid.into()),
        reason: None,
    }
}

fn skipped(holder: &Claim, reason: &str) -> SettleRequest {
    SettleRequest {
        outcome: SettleOutcome::Skipped,
        workflow_uid: None,
        reason: Some(reason.into()),
        ..submitted(holder, "-")
    }
}

/// The refusal's code and the claim in its `current`.
fn refusal(error: ClientError) -> (ProblemCode, Claim) {
    let problem = error.problem().expect("a problem");
    let current = problem.current.as_ref().expect("current");
    let current = serde_json::from_str(current.get()).expect("a claim in current");
    (problem.code, current)
}

/// Moves the leases of `cron_workflow_uid`'s claims an hour into the past, as if their
/// holders had died an hour ago.
async fn expire_leases(server: &TestServer, cron_workflow_uid: &str) {
    let db = server.db().await;
    argo_results_tests::on_db!(&db, |pool| sqlx::query(
        "UPDATE cron_claims SET lease_expires_at = lease_expires_at - 3600000 \
         WHERE cron_workflow_uid = $1",
    )
    .bind(cron_workflow_uid)
    .execute(pool)
    .await
    .map(drop))
    .expect("expire leases");
    db.close().await;
}

async fn list(server: &TestServer, options: &RunsOptions) -> argo_results_client::proto::ClaimList {
    server.reader().runs(NS, CRON, options).await.expect("runs")
}

async fn a_claim_holds_its_tick_under_a_lease_until_settled_once(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let controller = server.controller();
    let holder = controller
        .claim(
            NS,
            CRON,
            &ClaimRequest {
                lease_seconds: Some(90),
                ..claim(TICK)
            },
        )
        .await
        .expect("claim");
    assert_eq!(
        (
            holder.state,
            holder.taken_over,
            holder.scheduled_time.as_str()
        ),
        (ClaimState::Claimed, false, TICK)
    );
    let claim_id = holder.claim_id.clone().expect("a claimId in the 201");
    assert_eq!(claim_id.len(), 36, "a UUID: {claim_id}");
    assert_eq!(
        server
            .count("SELECT lease_expires_at - claimed_at FROM cron_claims")
            .await,
        90_000
    );

    // The same instant with an offset is the same tick; the holder's proof is not shown.
    let (code, current) = refusal(
        controller
            .claim(NS, CRON, &claim("2026-11-29T18:00:00+01:00"))
            .await
            .expect_err("claimed twice"),
    );
    assert_eq!(code, ProblemCode::AlreadyClaimed);
    assert_eq!(current.claim_id, None);
    assert_eq!(
        Claim {
            claim_id: holder.claim_id.clone(),
            ..current
        },
        holder
    );

    let settled = controller
        .settle(NS, CRON, &submitted(&holder, "wf-uid-1"))
        .await
        .expect("settle");
    assert_eq!(settled.state, ClaimState::Submitted);
    assert_eq!(settled.workflow_uid.as_deref(), Some("wf-uid-1"));
    assert_eq!(settled.claim_id.as_deref(), Some(claim_id.as_str()));
    let replay = controller
        .settle(NS, CRON, &submitted(&holder, "wf-uid-1"))
        .await
        .expect("a replay of the same outcome");
    assert_eq!(replay, settled, "the replay changes nothing");
    for other in [
        submitted(&holder, "wf-uid-2"),
        skipped(&holder, "concurrencyPolicy Forbid"),
    ] {
        let (code, current) = refusal(
            controller
                .settle(NS, CRON, &other)
                .await
                .expect_err("another outcome"),
        );
        assert_eq!(code, ProblemCode::AlreadyCompleted);
        assert_eq!(current.workflow_uid.as_deref(), Some("wf-uid-1"));
    }

    // A settled tick stays settled, however long ago its lease ended.
    expire_leases(&server, CRON_UID).await;
    let (code, current) = refusal(
        controller
            .claim(NS, CRON, &claim(TICK))
            .await
            .expect_err("a settled tick is final"),
    );
    assert_eq!(
        (code, current.state, current.taken_over),
        (ProblemCode::AlreadyClaimed, ClaimState::Submitted, false)
    );
    assert_eq!(server.count("SELECT COUNT(*) FROM cron_claims").await, 1);
}

async fn a_holder_that_dies_before_settling_is_taken_over_under_the_first_name(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let first = server
        .controller()
        .claim(NS, CRON, &claim(TICK))
        .await
        .expect("first claim");
    // The first holder dies without settling; the server crashes too, and keeps the lease.
    let server = server.crash_and_restart().await;
    let renamed = ClaimRequest {
        workflow_name: "nightly-other-name".into(),
        ..claim(TICK)
    };
    let next = server.controller();
    let (code, current) = refusal(
        next.claim(NS, CRON, &renamed)
            .await
            .expect_err("the lease still holds"),
    );
    assert_eq!(
        (code, current.state),
        (ProblemCode::AlreadyClaimed, ClaimState::Claimed)
    );

    expire_leases(&server, CRON_UID).await;
    let second = next.claim(NS, CRON, &renamed).await.expect("takeover");
    assert!(second.taken_over);
    assert_eq!(second.state, ClaimState::Claimed);
    assert_eq!(
        second.workflow_name, first.workflow_name,
        "the first name, which the dead holder may have created"
    );
    assert_ne!(second.claim_id, first.claim_id);

    let (code, current) = refusal(
        server
            .controller()
            .settle(NS, CRON, &submitted(&first, "wf-of-the-first"))
            .await
            .expect_err("the old holder lost its lease"),
    );
    assert_eq!(code, ProblemCode::LeaseLost);
    assert_eq!(
        (current.state, current.claim_id),
        (ClaimState::Claimed, None)
    );

    next.settle(NS, CRON, &submitted(&second, "wf-uid-1"))
        .await
        .expect("the new holder settles");
    let runs = list(&server, &RunsOptions::default()).await;
    assert_eq!(runs.items.len(), 1);
    let run = &runs.items[0];
    assert_eq!(
        (run.state, run.taken_over, run.workflow_name.as_str()),
        (ClaimState::Submitted, true, "nightly-1795971600")
    );
    assert_eq!(runs.last_scheduled_time.as_deref(), Some(TICK));
}

async fn an_expired_lease_is_taken_over_on_the_databases_clock(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let controller = server.controller();
    let short = ClaimRequest {
        lease_seconds: Some(5),
        ..claim(TICK)
    };
    let first = controller.claim(NS, CRON, &short).await.expect("claim");
    // Another claimant polls; every answer until the lease ends is `already_claimed`.
    let mut refused = 0;
    let expired = async || match controller.claim(NS, CRON, &short).await {
        Ok(taken) => Some(taken),
        Err(error) => {
            let (code, current) = refusal(error);
            assert_eq!(
                (code, current.state),
                (ProblemCode::AlreadyClaimed, ClaimState::Claimed)
            );
            refused += 1;
            None
        }
    };
    let taken = eventually("the 5 s lease expires", Duration::from_secs(60), expired).await;
    assert!(refused > 0, "the lease held at first");
    assert!(taken.taken_over);
    // Both times are the database's, in one fixed format: as text they sort as times.
    assert!(
        taken.claimed_at >= first.lease_expires_at,
        "taken over only once the lease ended"
    );
}

async fn last_scheduled_time_moves_only_when_a_tick_is_settled(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let controller = server.controller();
    let last = async || {
        list(&server, &RunsOptions::default())
            .await
            .last_scheduled_time
    };
    assert_eq!(last().await, None);

    let five = controller
        .claim(NS, CRON, &claim("2026-11-29T17:00:00Z"))
        .await
        .expect("claim");
    assert_eq!(last().await, None, "a live claim has not run");
    controller
        .settle(NS, CRON, &submitted(&five, "wf-17"))
        .await
        .expect("settle");
    assert_eq!(last().await.as_deref(), Some("2026-11-29T17:00:00Z"));

    let six = controller
        .claim(NS, CRON, &claim("2026-11-29T18:00:00Z"))
        .await
        .expect("claim");
    expire_leases(&server, CRON_UID).await;
    assert_eq!(
        last().await.as_deref(),
        Some("2026-11-29T17:00:00Z"),
        "nor has a claim whose lease expired unsettled"
    );
    controller
        .settle(NS, CRON, &skipped(&six, "concurrencyPolicy Forbid"))
        .await
        .expect("a holder whose lease expired, not taken over, still settles");
    assert_eq!(last().await.as_deref(), Some("2026-11-29T18:00:00Z"));

    controller
        .claim(NS, CRON, &claim("2026-11-29T19:00:00Z"))
        .await
        .expect("claim");
    assert_eq!(last().await.as_deref(), Some("2026-11-29T18:00:00Z"));
}

async fn pages_cover_every_claim_once_newest_first(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let controller = server.controller();
    // Two incarnations of the name, sharing some ticks: order is (time, UID) descending.
    let mut expected = Vec::new();
    for minute in 0..17 {
        let time = format!("2026-11-29T17:{minute:02}:00Z");
        let uids: &[&str] = if minute % 3 == 0 {
            &["uid-a", "uid-b"]
        } else {
            &["uid-a"]
        };
        for uid in uids {
            let request = ClaimRequest {
                cron_workflow_uid: (*uid).into(),
                ..claim(&time)
            };
            controller.claim(NS, CRON, &request).await.expect("claim");
            expected.push((time.clone(), uid.to_string()));
        }
    }
    expected.sort();
    expected.reverse();

    let pages = async |uid: Option<&str>| {
        let mut options = RunsOptions {
            cron_workflow_uid: uid.map(Into::into),
            limit: Some(4),
            ..Default::default()
        };
        let mut seen = Vec::new();
        loop {
            let page = list(&server, &options).await;
            assert!(page.items.len() <= 4);
            seen.extend(
                page.items
                    .iter()
                    .map(|c| (c.scheduled_time.clone(), c.cron_workflow_uid.clone())),
            );
            match page.continue_token {
                Some(token) => options.continue_token = Some(token),
                None => return (seen, options.continue_token),
            }
        }
    };
    let (all, token) = pages(None).await;
    assert_eq!(all, expected, "every claim once, newest first");
    let (only_b, _) = pages(Some("uid-b")).await;
    let expected_b: Vec<_> = expected
        .iter()
        .filter(|(_, uid)| uid == "uid-b")
        .cloned()
        .collect();
    assert_eq!(only_b, expected_b);

    // A token is bound to its query, and a page size to 1..1000.
    let token = token.expect("more than one page");
    let foreign = RunsOptions {
        cron_workflow_uid: Some("uid-b".into()),
        continue_token: Some(token),
        ..Default::default()
    };
    for (options, field) in [
        (foreign, "continue"),
        (
            RunsOptions {
                limit: Some(0),
                ..Default::default()
            },
            "limit",
        ),
    ] {
        let error = server
            .reader()
            .runs(NS, CRON, &options)
            .await
            .expect_err("refused");
        let problem = error.problem().expect("problem");
        assert_eq!(
            (problem.code, problem.field.as_deref()),
            (ProblemCode::InvalidParameter, Some(field))
        );
    }
}

async fn retention_keeps_each_cron_workflows_newest_settled_claim(backend: Backend) {
    let server = TestServer::builder(backend)
        .flags(&["--retention-every", "100ms"])
        .start()
        .await;
    let controller = server.controller();
    let tick = |hour: u32| format!("2026-11-29T{hour:02}:00:00Z");
    let settle_at = async |cron: &str, uid: &str, hour: u32, settle: bool| {
        let request = ClaimRequest {
            cron_workflow_uid: uid.into(),
            ..claim(&tick(hour))
        };
        let holder = controller.claim(NS, cron, &request).await.expect("claim");
        if settle {
            controller
                .settle(NS, cron, &submitted(&holder, "wf"))
                .await
                .expect("settle");
        }
    };
    // nightly: three settled ticks and one whose holder died, all taken 31 days ago; then a
    // live claim. weekly: one settled tick, 31 days ago.
    settle_at(CRON, CRON_UID, 10, false).await;
    for hour in [11, 12, 13] {
        settle_at(CRON, CRON_UID, hour, true).await;
    }
    settle_at("weekly", "weekly-uid", 10, true).await;
    let db = server.db().await;
    let month = 31 * 86_400_000_i64;
    argo_results_tests::on_db!(&db, |pool| sqlx::query(
        "UPDATE cron_claims SET claimed_at = claimed_at - $1, \
         lease_expires_at = lease_expires_at - $1, settled_at = settled_at - $1",
    )
    .bind(month)
    .execute(pool)
    .await
    .map(drop))
    .expect("age the claims");
    db.close().await;
    settle_at(CRON, CRON_UID, 14, false).await;

    eventually("the old claims are pruned", PRUNED_WITHIN, async || {
        (server.count("SELECT COUNT(*) FROM cron_claims").await == 3).then_some(())
    })
    .await;
    let left: Vec<(String, ClaimState)> = list(&server, &RunsOptions::default())
        .await
        .items
        .into_iter()
        .map(|c| (c.scheduled_time, c.state))
        .collect();
    assert_eq!(
        left,
        [
            (tick(14), ClaimState::Claimed),
            (tick(13), ClaimState::Submitted)
        ],
        "the live claim and the newest settled one stay"
    );
    let weekly = server
        .reader()
        .runs(NS, "weekly", &RunsOptions::default())
        .await
        .expect("weekly");
    assert_eq!(
        weekly.items.len(),
        1,
        "a cron workflow's only settled claim stays"
    );
    assert_eq!(weekly.last_scheduled_time, Some(tick(10)));
    let metrics = server.get("/metrics", None).await.text;
    assert!(
        metrics.contains("argo_results_retention_deleted_total{kind=\"claims\"} 3"),
        "{metrics}"
    );
}

async fn bad_claims_and_settles_name_the_field_and_change_nothing(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let token = tokens::user_token(CONTROLLER);
    let post = async |path: &str, body: serde_json::Value| {
        let answer = server
            .raw(
                Method::POST,
                &format!("/api/v1/namespaces/{NS}/cronworkflows/{CRON}/{path}"),
                Some(&token),
                Some("application/json"),
                body.to_string(),
            )
            .await;
        (
            answer.status,
            answer.json["code"].clone(),
            answer.json["field"].clone(),
        )
    };
    let claim_body = |lease: serde_json::Value| {
        serde_json::json!({"cronWorkflowUid": CRON_UID, "scheduledTime": TICK,
            "workflowName": "nightly-1795971600", "leaseSeconds": lease})
    };
    for lease in [
        serde_json::json!(4),
        serde_json::json!(3601),
        serde_json::json!("60"),
    ] {
        assert_eq!(
            post("runs", claim_body(lease.clone())).await,
            (422, "invalid_field".into(), "leaseSeconds".into()),
            "{lease}"
        );
    }
    let settle = |extra: serde_json::Value| {
        let mut body = serde_json::json!({"cronWorkflowUid": CRON_UID, "scheduledTime": TICK,
            "claimId": "a-claim-id"});
        body.as_object_mut()
            .expect("object")
            .extend(extra.as_object().expect("object").clone());
        body
    };
    for (extra, field) in [
        (serde_json::json!({"outcome": "submitted"}), "workflowUid"),
        (serde_json::json!({"outcome": "skipped"}), "reason"),
        (
            serde_json::json!({"outcome": "skipped", "reason": "x", "workflowUid": "w"}),
            "workflowUid",
        ),
        (
            serde_json::json!({"outcome": "claimed", "workflowUid": "w"}),
            "outcome",
        ),
        (serde_json::json!({}), "outcome"),
    ] {
        assert_eq!(
            post("runs/settle", settle(extra.clone())).await,
            (422, "invalid_field".into(), field.into()),
            "{extra}"
        );
    }
    assert_eq!(
        post(
            "runs/settle",
            settle(serde_json::json!({"outcome": "skipped", "reason": "x", "why": 1}))
        )
        .await,
        (400, "unknown_field".into(), "why".into())
    );
    assert_eq!(
        post(
            "runs/settle",
            settle(serde_json::json!({"outcome": "submitted", "workflowUid": "w"}))
        )
        .await
        .0,
        404,
        "a tick never claimed"
    );
    assert_eq!(server.count("SELECT COUNT(*) FROM cron_claims").await, 0);

    // A UID belongs to one cron workflow: another namespace may not claim or settle it.
    let holder = server
        .controller()
        .claim(NS, CRON, &claim(TICK))
        .await
        .expect("claim");
    let elsewhere = server.controller();
    for error in [
        elsewhere.claim("other", CRON, &claim(TICK)).await.map(drop),
        elsewhere
            .settle("other", CRON, &submitted(&holder, "w"))
            .await
            .map(drop),
    ] {
        let problem = error.expect_err("refused");
        let problem = problem.problem().expect("problem");
        assert_eq!(
            (problem.code, problem.field.as_deref()),
            (ProblemCode::InvalidField, Some("cronWorkflowUid"))
        );
    }
    let stored = list(&server, &RunsOptions::default()).await.items;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].state, ClaimState::Claimed, "nothing changed");
}

/// The workflows Kubernetes holds, by name: a create of an existing name is `AlreadyExists`.
#[derive(Debug, Default, Clone)]
struct FakeWorkflows(Arc<Mutex<HashMap<String, String>>>);

impl FakeWorkflows {
    /// Creates the claimed workflow as a controller does, counting `AlreadyExists` as created.
    fn create(&self, claim: &Claim) -> Submission {
        let mut workflows = self.0.lock().expect("workflows");
        match workflows.get(&claim.workflow_name) {
            Some(uid) => Submission::AlreadyExists { uid: uid.clone() },
            None => {
                let uid = format!("uid-{}", workflows.len() + 1);
                workflows.insert(claim.workflow_name.clone(), uid.clone());
                Submission::Created { uid }
            }
        }
    }

    fn count(&self) -> usize {
        self.0.lock().expect("workflows").len()
    }
}

async fn the_tick_helper_creates_once_and_stops_when_its_lease_is_lost(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let kube = FakeWorkflows::default();
    let (dying, next): (Client, Client) = (server.controller(), server.controller());

    // The first controller creates the workflow and dies before it settles.
    let crashed = run_tick(&dying, NS, CRON, &claim(TICK), async |claim| {
        kube.create(claim);
        Err("killed")
    })
    .await;
    let Err(TickError::Submit { claim: held, .. }) = crashed else {
        panic!("expected the step's failure, got {crashed:?}");
    };
    // While its lease lasts, others are told to come back after it.
    match run_tick(&next, NS, CRON, &claim(TICK), async |claim| {
        Ok::<_, ()>(kube.create(claim))
    })
    .await
    {
        Ok(Tick::Held {
            current,
            retry_after,
        }) => {
            assert_eq!(current.state, ClaimState::Claimed);
            assert_eq!(retry_after, Some(Duration::from_secs(60)));
        }
        other => panic!("expected the tick held, got {other:?}"),
    }

    expire_leases(&server, CRON_UID).await;
    let settled = run_tick(&next, NS, CRON, &claim(TICK), async |claim| {
        Ok::<_, ()>(kube.create(claim))
    })
    .await;
    let Ok(Tick::Settled(settled)) = settled else {
        panic!("expected the takeover to settle, got {settled:?}");
    };
    assert!(settled.taken_over);
    assert_eq!(settled.state, ClaimState::Submitted);
    assert_eq!(
        settled.workflow_uid.as_deref(),
        Some("uid-1"),
        "the dead holder's workflow, found by name"
    );
    assert_eq!(kube.count(), 1, "created once");

    // The first controller comes back and retries: it is told to stop.
    let retried = finish(&dying, NS, CRON, *held, async |claim| {
        Ok::<_, ()>(kube.create(claim))
    })
    .await;
    match retried {
        Ok(Tick::LeaseLost { current }) => assert_eq!(current.state, ClaimState::Submitted),
        other => panic!("expected the lease lost, got {other:?}"),
    }
    match run_tick(
        &dying,
        NS,
        CRON,
        &claim(TICK),
        async |_| -> Result<Submission, ()> { panic!("a settled tick is not run again") },
    )
    .await
    {
        Ok(Tick::Held {
            current,
            retry_after: None,
        }) => assert_eq!(current.state, ClaimState::Submitted),
        other => panic!("expected the settled tick, got {other:?}"),
    }
    assert_eq!(kube.count(), 1);
}

/// Twelve claimants over two replicas on one Postgres race for each of 20 ticks whose
/// holder died: one takes each over, the others are refused, and the dead holder's settle
/// is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twelve_claimants_over_two_replicas_take_an_expired_tick_over_exactly_once() {
    let a = TestServer::builder(Backend::Postgres).start().await;
    let b = a.replica().await;
    let ticks: Vec<String> = (0..20)
        .map(|minute| format!("2026-11-29T17:{minute:02}:00Z"))
        .collect();
    let mut dead = Vec::new();
    for tick in &ticks {
        dead.push(
            a.controller()
                .claim(NS, CRON, &claim(tick))
                .await
                .expect("claim"),
        );
    }
    expire_leases(&a, CRON_UID).await;

    for (tick, dead) in ticks.iter().zip(&dead) {
        let racers: Vec<_> = (0..12)
            .map(|r| {
                let controller = if r % 2 == 0 {
                    a.controller()
                } else {
                    b.controller()
                };
                let request = ClaimRequest {
                    workflow_name: format!("racer-{r}"),
                    ..claim(tick)
                };
                tokio::spawn(async move { controller.claim(NS, CRON, &request).await })
            })
            .collect();
        let mut winners = Vec::new();
        for racer in racers {
            match racer.await.expect("racer") {
                Ok(won) => winners.push(won),
                Err(error) => {
                    let (code, current) = refusal(error);
                    assert_eq!(code, ProblemCode::AlreadyClaimed, "{tick}");
                    assert!(current.taken_over, "refused by the winner's claim: {tick}");
                }
            }
        }
        assert_eq!(winners.len(), 1, "{tick}");
        let winner = &winners[0];
        assert!(winner.taken_over);
        assert_eq!(winner.workflow_name, dead.workflow_name);

        let (code, _) = refusal(
            b.controller()
                .settle(NS, CRON, &submitted(dead, "late"))
                .await
                .expect_err("the dead holder's settle"),
        );
        assert_eq!(code, ProblemCode::LeaseLost);
        a.controller()
            .settle(NS, CRON, &submitted(winner, "wf"))
            .await
            .expect("the winner settles");
    }
    let runs = b
        .reader()
        .runs(NS, CRON, &RunsOptions::default())
        .await
        .expect("runs");
    assert_eq!(runs.items.len(), ticks.len());
    assert!(
        runs.items
            .iter()
            .all(|c| c.state == ClaimState::Submitted && c.taken_over)
    );
}
