//! The process: SIGTERM ends long polls and exits cleanly.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use argo_results_client::FeedOptions;
use argo_results_tests::fixtures::{NS, WF, outputs, step};
use argo_results_tests::server::{Raw, free_port};
use argo_results_tests::{Backend, TestServer, eventually};

on_both_backends!(
    a_rollback_starts_on_a_newer_schema,
    json_logs_carry_request_ids_and_names_but_never_tokens,
    overload_answers_429_and_stores_every_accepted_report,
    sigterm_ends_long_polls_and_exits_zero,
    sigterm_under_load_loses_no_acknowledged_write,
    acknowledged_reports_survive_a_crash,
    probes_and_metrics_answer_without_a_token,
    metrics_listen_serves_probes_and_metrics_alone,
);

/// The `kind` labels of `argo_results_store_errors_total`.
const STORE_ERROR_KINDS: [&str; 6] = [
    "unavailable",
    "database",
    "migrate",
    "corrupt",
    "config",
    "random",
];

async fn sigterm_ends_long_polls_and_exits_zero(backend: Backend) {
    let mut server = TestServer::builder(backend).start().await;
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
    let server = TestServer::builder(backend).start().await;
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
    let server = TestServer::builder(backend)
        .flags(&["--retention-every", "100ms"])
        .start()
        .await;
    assert_eq!(server.get("/healthz", None).await.status, 200);
    assert_eq!(server.get("/readyz", None).await.status, 200);
    let s = step(1);
    server.complete(&s, 1).await;
    server.complete(&s, 1).await;
    let other = s.report(Some(2), true, Some(&outputs(2)));
    assert!(server.send(&s, &other).await.is_err(), "frozen");
    let metrics = server.get("/metrics", None).await;
    assert_eq!(metrics.status, 200);
    assert!(
        metrics.text.contains("argo_results_build_info{version="),
        "{}",
        metrics.text
    );
    for outcome in ["created", "replayed", "conflict"] {
        let line = format!("argo_results_reports_total{{outcome=\"{outcome}\"}} 1");
        assert!(metrics.text.contains(&line), "{line} in:\n{}", metrics.text);
    }
    assert!(
        !metrics.text.contains(&s.node_id),
        "node IDs never become labels"
    );
    for present in [
        "argo_results_report_commit_duration_seconds_count 1",
        "argo_results_store_transaction_duration_seconds_count",
        "argo_results_http_request_duration_seconds_count{",
    ] {
        assert!(
            metrics.text.contains(present),
            "{present} in:\n{}",
            metrics.text
        );
    }
    for kind in STORE_ERROR_KINDS {
        let line = format!("argo_results_store_errors_total{{kind=\"{kind}\"}} 0\n");
        assert!(metrics.text.contains(&line), "no store error yet: {line}");
    }
    server.register(&step(2)).await;
    let counted = async || {
        let text = server.get("/metrics", None).await.text;
        text.contains("argo_results_results_pending{state=\"expected\"} 1")
            .then_some(())
    };
    let what = "the pending gauge counts the expected result";
    eventually(what, Duration::from_secs(10), counted).await;
}

/// 16 writers, then SIGTERM: the process exits 0 and every report that got a 2xx is there
/// after a restart.
async fn sigterm_under_load_loses_no_acknowledged_write(backend: Backend) {
    let mut server = TestServer::builder(backend).start().await;
    let url = server.url().to_owned();
    let written = Arc::new(AtomicUsize::new(0));
    let writers: Vec<_> = (0..16u32)
        .map(|w| {
            let (url, written) = (url.clone(), Arc::clone(&written));
            tokio::spawn(async move {
                let mut acknowledged = Vec::new();
                for i in 0..10_000 {
                    let s = step(w * 10_000 + i);
                    let pod = argo_results_client::Client::new(
                        &url,
                        Some(argo_results_tests::tokens::pod_token(
                            NS,
                            &s.pod_name,
                            &s.pod_uid,
                        )),
                    )
                    .expect("client");
                    match pod
                        .report(
                            NS,
                            WF,
                            &s.node_id,
                            &s.report(Some(1), true, Some(&outputs(i))),
                        )
                        .await
                    {
                        Ok(_) => {
                            acknowledged.push(s.node_id);
                            written.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(_) => break,
                    }
                }
                acknowledged
            })
        })
        .collect();
    // The signal comes under load, once the writers are acknowledged (as many writes as
    // writers), however slow the machine: a fixed pause saw none on a loaded one.
    let writing = async || (written.load(Ordering::SeqCst) >= 16).then_some(());
    eventually(
        "16 writes are acknowledged",
        Duration::from_secs(30),
        writing,
    )
    .await;
    let status = tokio::time::timeout(Duration::from_secs(60), server.terminate())
        .await
        .expect("exited within the grace period");
    assert!(status.success(), "exit status {status}");
    let mut acknowledged = Vec::new();
    for writer in writers {
        acknowledged.extend(writer.await.expect("writer"));
    }
    let server = server.crash_and_restart().await;
    let stored = server.count("SELECT COUNT(*) FROM results").await;
    let mut lost = 0;
    for node_id in &acknowledged {
        if server
            .reader()
            .get_result(NS, WF, node_id, None)
            .await
            .is_err()
        {
            lost += 1;
        }
    }
    println!(
        "SIGTERM under load ({:?}): acknowledged={} stored={stored} lost={lost}",
        server.backend,
        acknowledged.len()
    );
    assert_eq!(lost, 0);
    assert!(stored >= acknowledged.len() as i64);
}

async fn json_logs_carry_request_ids_and_names_but_never_tokens(backend: Backend) {
    let server = TestServer::builder(backend)
        .flags(&["--log-format", "json"])
        .env("RUST_LOG", "info")
        .start()
        .await;
    let s = step(1);
    let token = argo_results_tests::tokens::pod_token(NS, &s.pod_name, &s.pod_uid);
    let answer = reqwest::Client::new()
        .put(format!(
            "{}/api/v1/namespaces/{NS}/workflows/{WF}/nodes/{}/result",
            server.url(),
            s.node_id
        ))
        .bearer_auth(&token)
        .header("x-request-id", "trace-me-42")
        .json(&s.report(Some(1), true, Some(&outputs(1))))
        .send()
        .await
        .expect("report");
    assert_eq!(answer.status(), 201);
    assert_eq!(answer.headers()["x-request-id"], "trace-me-42");
    let generated = server.get("/healthz", None).await;
    assert!(
        generated.headers.contains_key("x-request-id"),
        "an id is made when none is sent"
    );
    server.get("/api/v1/whoami", Some("not-a-token")).await;

    let log = server.log();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect();
    let finished = lines
        .iter()
        .find(|line| line["span"]["request_id"] == "trace-me-42")
        .unwrap_or_else(|| panic!("no line of request trace-me-42:\n{log}"));
    assert_eq!(finished["span"]["namespace"], NS);
    assert_eq!(finished["span"]["workflow"], WF);
    assert_eq!(finished["span"]["node"], s.node_id.as_str());
    assert!(
        finished.get("spans").is_none(),
        "the span twice: {finished}"
    );
    assert_eq!(finished["fields"]["status"], 201);
    assert!(
        !log.contains(&token) && !log.contains("not-a-token"),
        "a token reached the log"
    );
    let metrics = server.get("/metrics", None).await.text;
    assert!(
        metrics.contains("argo_results_http_requests_total{route=\"/api/v1/namespaces/{namespace}/workflows/{workflow}/nodes/{nodeId}/result\",method=\"PUT\",status=\"201\"} 1"),
        "{metrics}"
    );
    assert!(!metrics.contains(&s.node_id));
}

/// Over --max-in-flight the excess gets 429 with Retry-After and writes nothing; every
/// accepted report is stored.
async fn overload_answers_429_and_stores_every_accepted_report(backend: Backend) {
    let server = TestServer::builder(backend)
        .flags(&["--max-in-flight", "1"])
        .start()
        .await;
    let url = server.url().to_owned();
    let senders: Vec<_> = (0..48u32)
        .map(|i| {
            let url = url.clone();
            tokio::spawn(async move {
                let s = step(i);
                let token = argo_results_tests::tokens::pod_token(NS, &s.pod_name, &s.pod_uid);
                let answer = reqwest::Client::new()
                    .put(format!(
                        "{url}/api/v1/namespaces/{NS}/workflows/{WF}/nodes/{}/result",
                        s.node_id
                    ))
                    .bearer_auth(token)
                    .json(&s.report(Some(1), true, Some(&outputs(i))))
                    .send()
                    .await
                    .expect("send");
                let status = answer.status().as_u16();
                let retry_after = answer.headers().contains_key("retry-after");
                let code = answer.json::<serde_json::Value>().await.expect("json")["code"].clone();
                (status, retry_after, code)
            })
        })
        .collect();
    let (mut accepted, mut shed) = (0, 0);
    for sender in senders {
        match sender.await.expect("sender") {
            (201, ..) => accepted += 1,
            (429, retry_after, code) => {
                assert!(retry_after, "429 without Retry-After");
                assert_eq!(code, "overloaded");
                shed += 1;
            }
            other => panic!("unexpected answer {other:?}"),
        }
    }
    assert!(
        shed > 0,
        "48 concurrent reports never exceeded one in flight"
    );
    assert_eq!(server.count("SELECT COUNT(*) FROM results").await, accepted);
}

/// A release started on a schema migrated by a newer one (a rollback) serves as usual.
async fn a_rollback_starts_on_a_newer_schema(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    server.complete(&step(1), 1).await;
    let db = server.db().await;
    argo_results_tests::on_db!(&db, |pool| sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (99990101000000, 'from a newer release', TRUE, $1, 0)",
    )
    .bind(vec![0u8; 48])
    .execute(pool)
    .await
    .map(drop))
    .expect("a migration this release does not know");
    db.close().await;
    let server = server.crash_and_restart().await;
    let read = server
        .reader()
        .get_result(NS, WF, &step(1).node_id, None)
        .await
        .expect("read");
    assert_eq!(read.outputs.map(|o| o.get().to_owned()), Some(outputs(1)));
}

/// `--metrics-listen`: a plain-HTTP address for Prometheus and probes, without the API;
/// `/metrics` is then served there alone.
async fn metrics_listen_serves_probes_and_metrics_alone(backend: Backend) {
    let port = free_port().to_string();
    let listen = format!("127.0.0.1:{port}");
    let server = TestServer::builder(backend)
        .flags(&["--metrics-listen", &listen])
        .start()
        .await;
    assert!(
        server
            .stdout()
            .contains(&format!("serving metrics and probes on http://{listen}")),
        "{}",
        server.stdout()
    );
    server.complete(&step(1), 1).await;
    let get = |path: &str| {
        let url = format!("http://{listen}{path}");
        async move { Raw::read(reqwest::get(url).await.expect("metrics listener")).await }
    };
    assert_eq!(get("/healthz").await.status, 200);
    assert_eq!(get("/readyz").await.status, 200);
    let metrics = get("/metrics").await;
    assert_eq!(metrics.status, 200);
    let created = "argo_results_reports_total{outcome=\"created\"} 1";
    assert!(metrics.text.contains(created), "{}", metrics.text);
    let api = get(&format!("/api/v1/namespaces/{NS}/workflows/{WF}/results")).await;
    assert_eq!(api.status, 404, "the API is not on the metrics address");
    assert_eq!(api.json["code"], "not_found");
    // /metrics leaves the API's address, which every workflow pod can reach; the probes
    // stay on both.
    let api_metrics = server.get("/metrics", None).await;
    assert_eq!(api_metrics.status, 404, "{}", api_metrics.text);
    assert_eq!(api_metrics.json["code"], "not_found");
    assert_eq!(server.get("/healthz", None).await.status, 200);
}

/// Every counter is there from the start, at zero for each of its known labels, so that a
/// healthy server's panels and alerts read 0 rather than "No data".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_server_exports_every_counter_at_zero() {
    let port = free_port();
    let server = TestServer::builder(Backend::Sqlite)
        .flags(&["--metrics-listen", &format!("127.0.0.1:{port}")])
        .start()
        .await;
    let text = reqwest::get(format!("http://127.0.0.1:{port}/metrics"))
        .await
        .expect("scrape")
        .text()
        .await
        .expect("body");
    println!("{text}");
    let mut zeros = vec![
        "argo_results_feed_head_revision 0".to_owned(),
        "argo_results_controller_feed_revision 0".to_owned(),
        "argo_results_controller_last_read_timestamp_seconds 0".to_owned(),
        "argo_results_feed_watchers 0".to_owned(),
    ];
    for reason in [
        "missing",
        "not_bearer",
        "too_large",
        "malformed",
        "unknown_key",
        "algorithm_mismatch",
        "bad_signature",
        "expired",
        "not_yet_valid",
        "too_long",
        "wrong_audience",
        "wrong_issuer",
        "missing_claim",
        "subject_mismatch",
        "review_denied",
        "forbidden",
    ] {
        zeros.push(format!(
            "argo_results_auth_failures_total{{reason=\"{reason}\"}} 0"
        ));
    }
    for kind in STORE_ERROR_KINDS {
        zeros.push(format!(
            "argo_results_store_errors_total{{kind=\"{kind}\"}} 0"
        ));
    }
    for outcome in [
        "created",
        "updated",
        "replayed",
        "stale",
        "conflict",
        "pod_mismatch",
        "not_expected",
        "refused",
    ] {
        zeros.push(format!(
            "argo_results_reports_total{{outcome=\"{outcome}\"}} 0"
        ));
    }
    for kind in ["results", "changes", "claims"] {
        zeros.push(format!(
            "argo_results_retention_deleted_total{{kind=\"{kind}\"}} 0"
        ));
    }
    for state in ["expected", "reporting"] {
        zeros.push(format!(
            "argo_results_results_pending{{state=\"{state}\"}} 0"
        ));
    }
    for listener in ["api", "metrics"] {
        for family in ["refused", "evicted"] {
            zeros.push(format!(
                "argo_results_http_connections_{family}_total{{listener=\"{listener}\"}} 0"
            ));
        }
    }
    for line in zeros {
        assert!(
            text.lines().any(|l| l == line),
            "{line} on a fresh server:\n{text}"
        );
    }
    drop(server);
}

/// A controller's feed reads are what "a controller is not reading" watches: a reader's
/// are not counted, a controller's set the revision and the time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controllers_feed_reads_are_exported() {
    let server = TestServer::builder(Backend::Sqlite).start().await;
    server.complete(&step(1), 1).await;
    let gauge = async |name: &str| -> i64 {
        let text = server.get("/metrics", None).await.text;
        let line = text
            .lines()
            .find(|line| line.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} in:\n{text}"));
        line[name.len() + 1..].parse().expect("an integer")
    };
    assert_eq!(gauge("argo_results_feed_head_revision").await, 1);
    server
        .reader()
        .feed(&FeedOptions::default())
        .await
        .expect("a reader's read");
    assert_eq!(gauge("argo_results_controller_feed_revision").await, 0);
    assert_eq!(
        gauge("argo_results_controller_last_read_timestamp_seconds").await,
        0
    );
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    server
        .controller()
        .feed(&FeedOptions::default())
        .await
        .expect("the controller's read");
    assert_eq!(gauge("argo_results_controller_feed_revision").await, 1);
    let read_at = gauge("argo_results_controller_last_read_timestamp_seconds").await;
    assert!(read_at >= i64::try_from(before).expect("secs"), "{read_at}");
}

/// The INFO log is the API's traffic: probes and scrapes are at DEBUG, durations are
/// rounded, and a log written to a file carries no colour codes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_are_logged_at_debug_and_the_log_file_has_no_colour() {
    let server = TestServer::builder(Backend::Sqlite)
        .env("RUST_LOG", "info")
        .start()
        .await;
    for path in ["/healthz", "/readyz", "/metrics"] {
        assert_eq!(server.get(path, None).await.status, 200, "{path}");
    }
    server.get("/api/v1/whoami", None).await;
    let log = server.log();
    println!("{log}");
    assert!(!log.contains('\u{1b}'), "colour codes in a file:\n{log}");
    let finished: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("request finished"))
        .collect();
    assert_eq!(finished.len(), 1, "only the API request at INFO:\n{log}");
    assert!(finished[0].contains("route=/api/v1/whoami"), "{log}");
    let duration = finished[0]
        .split("duration_ms=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("duration_ms");
    let decimals = duration.split('.').nth(1).map_or(0, str::len);
    assert!(decimals <= 2, "duration_ms={duration} is rounded");
}

/// `GET /version` answers without a token, as kube-apiserver's does: the release a
/// client is talking to is known before any token is tried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_version_is_served_without_a_token() {
    let server = TestServer::builder(Backend::Sqlite).start().await;
    let version = server.get("/version", None).await;
    assert_eq!(version.status, 200, "{}", version.text);
    let body: serde_json::Value = serde_json::from_str(&version.text).expect("JSON");
    assert_eq!(
        body,
        serde_json::json!({"version": env!("CARGO_PKG_VERSION"), "protocolVersion": 1})
    );
    // Only GET: the API's other methods on it are no route.
    let put = server
        .raw(reqwest::Method::PUT, "/version", None, None, Vec::new())
        .await;
    assert_eq!(put.status, 405, "{}", put.text);
}

/// A rollout refuses no connection: with `--shutdown-delay`, a client that connects
/// 0.3 s after SIGTERM (Kubernetes has not yet taken the pod out of its endpoints) is
/// served, `/readyz` answers 503 meanwhile, and the server then exits 0. The control:
/// without the flag, that client's connection is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_connecting_after_sigterm_is_served_during_the_shutdown_delay() {
    let mut plain = TestServer::builder(Backend::Sqlite).start().await;
    plain.send_sigterm();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let refused = plain.reader().whoami().await;
    assert!(
        refused.is_err(),
        "without --shutdown-delay, a connection after SIGTERM was served: {refused:?}"
    );
    assert!(plain.wait_exit().await.success());

    let mut delayed = TestServer::builder(Backend::Sqlite)
        .flags(&["--shutdown-delay", "3s"])
        .env("RUST_LOG", "info")
        .start()
        .await;
    delayed.send_sigterm();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A new client: a new connection, as a request routed here by a stale endpoint opens.
    let served = delayed.reader().whoami().await;
    assert!(
        served.is_ok(),
        "refused during --shutdown-delay: {served:?}"
    );
    assert_eq!(delayed.get("/readyz", None).await.status, 503);
    // Bounded only so that a hang fails the test instead of stalling the suite.
    let status = tokio::time::timeout(Duration::from_secs(60), delayed.wait_exit())
        .await
        .expect("the server did not exit after --shutdown-delay");
    assert!(status.success(), "exit status {status}");
    assert!(
        delayed.log().contains("--shutdown-delay"),
        "the delay is said in the log:\n{}",
        delayed.log()
    );
}

/// The audit trail: every request's line names its caller and peer, and why it was
/// refused; each of the controller's writes logs one line of who, what and how many rows
/// (docs/operations.md, "Audit").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_says_who_did_what_and_how_many_rows() {
    use argo_results_tests::fixtures::UID;
    use argo_results_tests::tokens::{CONTROLLER, READER};

    let server = TestServer::builder(Backend::Sqlite)
        .flags(&["--log-format", "json"])
        .env("RUST_LOG", "info")
        .start()
        .await;
    for i in 1..=3 {
        server.register(&step(i)).await;
    }
    let deleted = server
        .controller()
        .delete_results(NS, WF, UID)
        .await
        .expect("delete");
    assert_eq!(deleted.deleted, 3);
    server.get("/api/v1/whoami", Some("not-a-token")).await;
    let refused = server.reader().delete_results(NS, WF, UID).await;
    assert!(refused.is_err(), "a reader deleted: {refused:?}");

    let log = server.log();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect();
    let audit = |message: &str| -> Vec<&serde_json::Value> {
        lines
            .iter()
            .filter(|line| {
                line["target"] == "argo_results::audit" && line["fields"]["message"] == message
            })
            .collect()
    };
    let delete = audit("deleted a workflow's results");
    assert_eq!(delete.len(), 1, "one line for the DELETE:\n{log}");
    let delete = delete[0];
    assert_eq!(delete["fields"]["rows"], 3, "{delete}");
    assert_eq!(delete["span"]["subject"], CONTROLLER, "{delete}");
    assert_eq!(delete["span"]["namespace"], NS);
    assert_eq!(delete["span"]["workflow"], WF);
    let peer = delete["span"]["peer"].as_str().unwrap_or_default();
    assert!(peer.starts_with("127.0.0.1:"), "the peer: {delete}");
    let registered = audit("registered a node's expected result");
    assert_eq!(registered.len(), 3, "{log}");
    assert!(registered.iter().all(|line| line["fields"]["rows"] == 1));

    // Refusals: the request's line says why, and who when it is known.
    let finished = |status: u64| -> &serde_json::Value {
        lines
            .iter()
            .find(|line| {
                line["fields"]["message"] == "request finished"
                    && line["fields"]["status"] == status
            })
            .unwrap_or_else(|| panic!("no {status} line:\n{log}"))
    };
    let unauthenticated = finished(401);
    assert_eq!(
        unauthenticated["span"]["reason"], "malformed",
        "{unauthenticated}"
    );
    assert!(unauthenticated["span"]["subject"].is_null());
    let forbidden = finished(403);
    assert_eq!(forbidden["span"]["reason"], "forbidden", "{forbidden}");
    assert_eq!(forbidden["span"]["subject"], READER, "{forbidden}");
    assert!(
        audit("deleted a workflow's results").len() == 1,
        "a refused delete is not audited as done"
    );
}

/// A long poll waits for a change by design: it is counted, not timed, so that the
/// latency histogram says how fast the server answers; a plain read of the feed is timed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_polls_are_counted_but_not_timed() {
    let server = TestServer::builder(Backend::Sqlite).start().await;
    let reader = server.reader();
    let watch = FeedOptions {
        watch: true,
        timeout_seconds: Some(1),
        ..Default::default()
    };
    reader.feed(&watch).await.expect("long poll");
    let metrics = server.get("/metrics", None).await.text;
    let feed = "route=\"/api/v1/results\"";
    let count =
        format!("argo_results_http_requests_total{{{feed},method=\"GET\",status=\"200\"}} 1");
    assert!(metrics.contains(&count), "{count} in:\n{metrics}");
    assert!(
        !metrics.contains(&format!(
            "argo_results_http_request_duration_seconds_count{{{feed}}}"
        )),
        "a long poll was timed:\n{metrics}"
    );
    reader.feed(&FeedOptions::default()).await.expect("read");
    let metrics = server.get("/metrics", None).await.text;
    let timed = format!("argo_results_http_request_duration_seconds_count{{{feed}}} 1");
    assert!(metrics.contains(&timed), "{timed} in:\n{metrics}");
}

/// The process's series, named as every Prometheus client library names them, and the
/// requests' database pool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn process_and_pool_series_are_exported() {
    let server = TestServer::builder(Backend::Sqlite)
        .flags(&["--max-connections", "7"])
        .start()
        .await;
    let metrics = server.get("/metrics", None).await.text;
    let value = |series: &str| -> f64 {
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
            .and_then(|value| value.parse().ok())
            .unwrap_or_else(|| panic!("no {series} in:\n{metrics}"))
    };
    assert!(value("process_cpu_seconds_total") > 0.0);
    let rss = value("process_resident_memory_bytes");
    let pid_rss = server.rss_mib() * 1024.0 * 1024.0;
    assert!(
        rss > 0.5 * pid_rss && rss < 2.0 * pid_rss,
        "{rss} against {pid_rss}"
    );
    assert!(value("process_open_fds") >= 3.0);
    assert!(value("process_max_fds") >= value("process_open_fds"));
    assert!(value("process_start_time_seconds") > 1.7e9);
    assert_eq!(value("argo_results_db_pool_max_connections"), 7.0);
    let open = value("argo_results_db_pool_connections{state=\"idle\"}")
        + value("argo_results_db_pool_connections{state=\"in_use\"}");
    assert!((1.0..=7.0).contains(&open), "{open} connections open");
    assert!(
        metrics.ends_with("# EOF\n"),
        "one end, after both registries"
    );
    assert_eq!(metrics.matches("# EOF").count(), 1);
}
