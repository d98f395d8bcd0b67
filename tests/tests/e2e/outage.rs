//! The database goes away under the server and comes back: probes and reports say so with
//! 503 and Retry-After (no request waits on a dead database), nothing is written, and the
//! server recovers by itself.

use std::time::{Duration, Instant};

use argo_results_tests::eventually;
use argo_results_tests::fixtures::{NS, WF, outputs, step};
use argo_results_tests::private_postgres::PrivatePostgres;

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
    let readyz = server.get("/readyz", None).await;
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
    assert_eq!(server.get("/readyz", None).await.status, 200);
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
