//! The database goes away under the server (stopped, dropped, deleted) and comes back:
//! probes and reports say so with 503 and Retry-After (no request waits on a dead
//! database), nothing is written, and the server recovers by itself.

use std::time::{Duration, Instant};

use argo_results_tests::fixtures::{NS, UID, WF, outputs, step};
use argo_results_tests::private_postgres::PrivatePostgres;
use argo_results_tests::server::{Raw, postgres_database_url};
use argo_results_tests::{Auth, Backend, TestServer, eventually};

#[tokio::test]
async fn a_database_outage_answers_503_and_recovers() {
    let postgres = PrivatePostgres::start();
    let server = postgres.serve().await;
    let client = server.client(None);
    let report = |i: u32| {
        let s = step(i);
        let body = s.report(Some(1), true, Some(&outputs(i)));
        (s, body)
    };
    let (first, body) = report(1);
    assert_eq!(
        client
            .report(NS, WF, &first.node_id, &body)
            .await
            .expect("report")
            .status,
        201
    );

    postgres.stop();
    let readyz = server.readyz_until(503).await;
    assert_eq!(
        (readyz.status, readyz.json["code"].as_str()),
        (503, Some("unavailable"))
    );
    let (second, body) = report(2);
    let asked = Instant::now();
    let refused = server
        .raw(
            reqwest::Method::PUT,
            &format!(
                "/api/v1/namespaces/{NS}/workflows/{WF}/nodes/{}/result",
                second.node_id
            ),
            None,
            Some("application/json"),
            serde_json::to_string(&body).expect("json"),
        )
        .await;
    let answered_in = asked.elapsed();
    assert_eq!(
        (refused.status, refused.json["code"].as_str()),
        (503, Some("unavailable")),
        "{}",
        refused.text
    );
    assert!(refused.headers.contains_key("retry-after"));
    let metrics = server.get("/metrics", None).await.text;
    assert!(
        metrics.contains("argo_results_store_errors_total{kind=\"unavailable\"}"),
        "{metrics}"
    );

    postgres.resume();
    let stored = eventually(
        "the same report succeeds once the database is back",
        Duration::from_secs(20),
        async || client.report(NS, WF, &second.node_id, &body).await.ok(),
    )
    .await;
    assert_eq!(stored.status, 201);
    server.readyz_until(200).await;
    let listed = server
        .client(None)
        .list_results(NS, WF, &Default::default())
        .await
        .expect("list");
    assert_eq!(
        listed.items.len(),
        2,
        "the refused attempt wrote nothing; the retry wrote once"
    );
    println!(
        "database outage: a report was refused with 503 after {} ms",
        answered_in.as_millis()
    );
}

/// Postgres restarted while the server sat idle: the writer's kept connection is dead, and
/// the first report after it is committed all the same, its batch tried once more on a
/// new connection (where a ping before every write after a pause cost a round trip), not
/// refused with 503.
#[tokio::test]
async fn the_first_report_after_a_quiet_restart_is_committed() {
    let postgres = PrivatePostgres::start();
    let server = postgres.serve().await;
    assert_eq!(put_report(&server, 1).await.status, 201);
    postgres.stop();
    postgres.resume();
    // Idle for longer than the writer trusts its connection without a second try (1 s).
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let first = put_report(&server, 2).await;
    assert_eq!(first.status, 201, "{}", first.text);
}

/// A report with the server's unauthenticated client (`--auth none`) of step `i`.
async fn put_report(server: &TestServer, i: u32) -> Raw {
    let s = step(i);
    let body = serde_json::to_string(&s.report(Some(1), true, Some(&outputs(i)))).expect("json");
    let path = format!(
        "/api/v1/namespaces/{NS}/workflows/{WF}/nodes/{}/result",
        s.node_id
    );
    server
        .raw(
            reqwest::Method::PUT,
            &path,
            None,
            Some("application/json"),
            body,
        )
        .await
}

fn assert_unavailable(answer: &Raw, what: &str) {
    assert_eq!(answer.status, 503, "{what}: {}", answer.text);
    assert_eq!(answer.json["code"], "unavailable", "{what}");
    assert!(answer.headers.contains_key("retry-after"), "{what}");
}

/// The database dropped under a running server (Postgres: `DROP DATABASE ... WITH
/// (FORCE)`, then 3D000 on every new connection; SQLite: the file deleted, which SQLite
/// would go on writing unlinked, losing what it acknowledged at the next restart) is an
/// outage: `503` with `Retry-After`, which pods retry, not `500`, which they take as
/// final, nor `201` for a write that will be lost.
#[tokio::test]
async fn a_dropped_database_answers_503() {
    let admin = postgres_database_url("postgres");
    let name = format!("argo_results_dropped_{}", std::process::id());
    let psql = |sql: &str| {
        let out = std::process::Command::new("psql")
            .args([admin.as_str(), "-q", "-c", sql])
            .output()
            .expect("psql");
        assert!(
            out.status.success(),
            "{sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    psql(&format!("DROP DATABASE IF EXISTS {name}"));
    psql(&format!("CREATE DATABASE {name}"));
    let postgres = TestServer::builder(Backend::Postgres)
        .database_url(&postgres_database_url(&name))
        .auth(Auth::None)
        .start()
        .await;
    assert_eq!(put_report(&postgres, 1).await.status, 201);
    psql(&format!("DROP DATABASE {name} WITH (FORCE)"));
    // The first finds its connection terminated, the next no database to connect to.
    let terminated = put_report(&postgres, 2).await;
    let dropped = put_report(&postgres, 3).await;
    let readyz = postgres.readyz_until(503).await;

    let sqlite = TestServer::builder(Backend::Sqlite)
        .auth(Auth::None)
        .start()
        .await;
    assert_eq!(put_report(&sqlite, 1).await.status, 201);
    let file = sqlite.dir.path().join("results.db");
    std::fs::remove_file(&file).expect("remove the SQLite file");
    let deleted = put_report(&sqlite, 2).await;
    let sqlite_readyz = sqlite.readyz_until(503).await;
    println!(
        "dropped databases: Postgres {} then {} {}; SQLite {} {}",
        terminated.status,
        dropped.status,
        dropped.text.trim(),
        deleted.status,
        deleted.text.trim()
    );
    assert_unavailable(&terminated, "Postgres dropped, a pooled connection");
    assert_unavailable(&dropped, "Postgres dropped");
    assert_unavailable(&readyz, "Postgres dropped, /readyz");
    assert_unavailable(&deleted, "SQLite deleted");
    assert_unavailable(&sqlite_readyz, "SQLite deleted, /readyz");
    assert!(sqlite.log().contains("results.db was deleted or replaced"));
}

/// Every kind of write, not only reports, is refused once the SQLite file is deleted
/// (`store/sql/transaction.rs`, "The door of every write"): a cron tick's claim and its
/// settle, a workflow's deletion and a retention pass. Each would otherwise be
/// acknowledged into the unlinked file and lost at the next restart: a lost claim is a
/// tick that can run twice.
#[tokio::test]
async fn every_write_to_a_deleted_sqlite_file_is_refused() {
    let server = TestServer::builder(Backend::Sqlite)
        .auth(Auth::None)
        .flags(&["--retention-every", "100ms"])
        .start()
        .await;
    let runs = format!("/api/v1/namespaces/{NS}/cronworkflows/nightly/runs");
    let claim = |scheduled: &str| {
        serde_json::json!({
            "cronWorkflowUid": "8e2a6f0c-cron",
            "scheduledTime": scheduled,
            "workflowName": "nightly-1795971600",
        })
        .to_string()
    };
    let post = async |path: &str, body: String| {
        server
            .raw(
                reqwest::Method::POST,
                path,
                None,
                Some("application/json"),
                body,
            )
            .await
    };
    assert_eq!(put_report(&server, 1).await.status, 201);
    let held = post(&runs, claim("2026-11-29T17:00:00Z")).await;
    assert_eq!(held.status, 201, "{}", held.text);

    std::fs::remove_file(server.dir.path().join("results.db")).expect("remove the SQLite file");
    let claimed = post(&runs, claim("2026-11-29T18:00:00Z")).await;
    let settle = serde_json::json!({
        "cronWorkflowUid": "8e2a6f0c-cron",
        "scheduledTime": "2026-11-29T17:00:00Z",
        "claimId": held.json["claimId"],
        "outcome": "submitted",
        "workflowUid": "wf-uid-1",
    });
    let settled = post(&format!("{runs}/settle"), settle.to_string()).await;
    let deleted = server
        .raw(
            reqwest::Method::DELETE,
            &format!("/api/v1/namespaces/{NS}/workflows/{WF}/results?workflowUid={UID}"),
            None,
            None,
            Vec::new(),
        )
        .await;
    println!(
        "writes to a deleted SQLite file: claim {}, settle {}, delete {}",
        claimed.status, settled.status, deleted.status
    );
    assert_unavailable(&claimed, "a claim");
    assert_unavailable(&settled, "a settle");
    assert_unavailable(&deleted, "a deletion");
    eventually(
        "a retention pass refused, in the server's log",
        Duration::from_secs(10),
        async || {
            let log = server.log();
            log.lines()
                .any(|line| {
                    line.contains("retention pass failed") && line.contains("deleted or replaced")
                })
                .then_some(())
        },
    )
    .await;
}
