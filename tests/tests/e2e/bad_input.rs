//! docs/api.md section 7: each applicable error code, and that nothing was written.

use argo_results_tests::fixtures::{NS, UID, WF, step};
use argo_results_tests::server::Raw;
use argo_results_tests::tokens::{self, CONTROLLER};
use argo_results_tests::{Backend, TestServer};
use reqwest::Method;

on_both_backends!(
    bad_parameters_are_400,
    nul_and_oversized_text_are_422_on_both_backends,
);
// These two reach the store, or keep from it what Postgres cannot take (NUL in text). The
// other cases are refused by the handler before any store access, so they run once, on
// SQLite, the embedded default.

const JSON: Option<&str> = Some("application/json");

fn result_path(node_id: &str) -> String {
    format!("/api/v1/namespaces/{NS}/workflows/{WF}/nodes/{node_id}/result")
}

/// A valid report body of step 1, as JSON, for tests to break.
fn valid_report() -> serde_json::Value {
    serde_json::to_value(step(1).report(Some(1), true, Some(r#"{"parameters":[]}"#))).expect("json")
}

fn pod_token() -> String {
    let s = step(1);
    tokens::pod_token(NS, &s.pod_name, &s.pod_uid)
}

/// Sends `body` as step 1's report by its pod, with `content_type`.
async fn put_report(server: &TestServer, content_type: Option<&str>, body: String) -> Raw {
    server
        .raw(
            Method::PUT,
            &result_path(&step(1).node_id),
            Some(&pod_token()),
            content_type,
            body,
        )
        .await
}

/// Sends `body` as step 1's report and checks status, code and `field`.
async fn refused(server: &TestServer, body: &str, status: u16, code: &str, field: Option<&str>) {
    let answer = put_report(server, JSON, body.to_owned()).await;
    assert_eq!(answer.status, status, "{body:.200}: {:.500}", answer.text);
    assert_eq!(answer.json["code"], code, "{body:.200}");
    assert_eq!(answer.json["field"].as_str(), field, "{body:.200}");
    assert_eq!(
        answer
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("application/problem+json")
    );
    assert_nothing_written(server).await;
}

async fn assert_nothing_written(server: &TestServer) {
    assert_eq!(server.count("SELECT COUNT(*) FROM results").await, 0);
    assert_eq!(server.count("SELECT COUNT(*) FROM changes").await, 0);
    assert_eq!(server.count("SELECT revision FROM store_state").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_bodies_are_400() {
    let server = TestServer::builder(Backend::Sqlite).start().await;
    for body in ["", "{", "[1,2]", "\"text\"", "{\"protocolVersion\":1,}"] {
        refused(&server, body, 400, "invalid_json", None).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_fields_and_protocol_versions_are_400() {
    let server = TestServer::builder(Backend::Sqlite).start().await;
    let mut body = valid_report();
    body["completed"] = true.into();
    refused(
        &server,
        &body.to_string(),
        400,
        "unknown_field",
        Some("completed"),
    )
    .await;
    let mut body = valid_report();
    body["protocolVersion"] = 2.into();
    refused(
        &server,
        &body.to_string(),
        400,
        "unsupported_protocol_version",
        Some("protocolVersion"),
    )
    .await;
}

/// A `continue` token shaped like the server's, holding `position`.
fn forged_token(position: serde_json::Value) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(position.to_string())
}

async fn bad_parameters_are_400(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let answer = server
        .raw(
            Method::PUT,
            &format!(
                "/api/v1/namespaces/Not_A_Namespace/workflows/{WF}/nodes/{}/result",
                step(1).node_id
            ),
            Some(&pod_token()),
            JSON,
            valid_report().to_string(),
        )
        .await;
    assert_eq!(
        (answer.status, answer.json["code"].as_str()),
        (400, Some("invalid_parameter"))
    );
    assert_eq!(answer.json["field"], "namespace");
    let reader = tokens::user_token(tokens::READER);
    // Tokens forged for this query with a NUL in their incarnation are refused like any bad
    // parameter, on both backends: Postgres cannot take NUL in text, so it must never reach
    // the database.
    let forged = forged_token(serde_json::json!({
        "namespace": NS, "workflow": WF, "workflow_uid": "uid\u{0}", "state": null, "after": "x",
    }));
    let forged = format!("continue={forged}");
    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=many", ""),
        ("state=done", "state"),
        ("continue=not-a-token", "continue"),
        (forged.as_str(), "continue"),
    ] {
        let path = format!("/api/v1/namespaces/{NS}/workflows/{WF}/results?{query}");
        let answer = server.get(&path, Some(&reader)).await;
        assert_eq!(
            (answer.status, answer.json["code"].as_str()),
            (400, Some("invalid_parameter")),
            "{query}"
        );
        if !field.is_empty() {
            assert_eq!(answer.json["field"], field, "{query}");
        }
    }
    let forged = forged_token(serde_json::json!({
        "namespace": NS, "cron_workflow": "nightly", "cron_workflow_uid": null,
        "scheduled_time": 0, "after_uid": "uid\u{0}",
    }));
    let path = format!("/api/v1/namespaces/{NS}/cronworkflows/nightly/runs?continue={forged}");
    let answer = server.get(&path, Some(&reader)).await;
    assert_eq!(
        (answer.status, answer.json["field"].as_str()),
        (400, Some("continue")),
        "{}",
        answer.text
    );
    let answer = server.get("/api/v1/results?since=-1", Some(&reader)).await;
    assert_eq!(answer.status, 400);
    let answer = server
        .get(
            "/api/v1/results?timeoutSeconds=100000&watch=true",
            Some(&reader),
        )
        .await;
    assert_eq!(answer.status, 400);
    assert_nothing_written(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_field_rules_are_422_naming_the_field() {
    let server = TestServer::builder(Backend::Sqlite).start().await;
    let cases: Vec<(&str, serde_json::Value, &str)> = vec![
        ("progress", "11/10".into(), "progress"),
        ("progress", "3".into(), "progress"),
        ("sequence", 0.into(), "sequence"),
        ("sequence", "one".into(), "sequence"),
        ("phase", "succeeded".into(), "phase"),
        ("final", "yes".into(), "final"),
        ("podUid", "".into(), "podUid"),
        ("instanceId", "Not a label".into(), "instanceId"),
        ("workflowUid", serde_json::Value::Null, "workflowUid"),
        ("outputs", serde_json::json!([1]), "outputs"),
        (
            "outputs",
            serde_json::json!({"parameters": [{"name": "ok"}, {"name": "not ok"}]}),
            "outputs.parameters[1].name",
        ),
        (
            "outputs",
            serde_json::json!({"artifacts": [{"path": "/tmp/x"}]}),
            "outputs.artifacts[0].name",
        ),
        (
            "outputs",
            serde_json::json!({"result": "x".repeat(256 * 1024 + 1)}),
            "outputs.result",
        ),
    ];
    for (key, value, field) in cases {
        let mut body = valid_report();
        body[key] = value;
        refused(
            &server,
            &body.to_string(),
            422,
            "invalid_field",
            Some(field),
        )
        .await;
    }
    let mut missing = valid_report();
    missing.as_object_mut().expect("object").remove("podUid");
    refused(
        &server,
        &missing.to_string(),
        422,
        "invalid_field",
        Some("podUid"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_bodies_are_413() {
    let server = TestServer::builder(Backend::Sqlite)
        .flags(&["--max-body-bytes", "2048"])
        .start()
        .await;
    let mut body = valid_report();
    body["message"] = "m".repeat(4096).into();
    refused(&server, &body.to_string(), 413, "payload_too_large", None).await;
    // A chunked body declares no length; it is cut at the limit all the same.
    let answer = chunked_put(&server, &result_path(&step(1).node_id), &body.to_string()).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("payload_too_large"), "{answer}");
    assert_nothing_written(&server).await;
}

/// The default limit is 2 MiB: outputs as large as a `WorkflowTaskResult` holds today
/// (etcd's 1.5 MiB) are stored; a body past 2 MiB is refused.
#[tokio::test]
async fn the_default_limit_takes_what_etcd_holds() {
    let server = TestServer::builder(Backend::Sqlite).start().await;
    let large = |bytes: usize| {
        let value = "v".repeat(bytes);
        let outputs = format!(r#"{{"parameters":[{{"name":"big","value":"{value}"}}]}}"#);
        serde_json::to_string(&step(1).report(Some(1), true, Some(&outputs))).expect("json")
    };
    let token = pod_token();
    let path = result_path(&step(1).node_id);
    let stored = server.put_json(&path, &token, large(1_500_000)).await;
    assert_eq!(stored.status, 201, "{}", stored.text);
    let too_large = server.put_json(&path, &token, large(2 << 20)).await;
    assert_eq!(too_large.status, 413, "{}", too_large.text);
    assert_eq!(too_large.json["code"], "payload_too_large");
}

/// A PUT with `Transfer-Encoding: chunked`, written by hand; returns the raw answer.
async fn chunked_put(server: &TestServer, path: &str, body: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = server.url().trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!(
        "PUT {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n\
         {:x}\r\n{body}\r\n0\r\n\r\n",
        pod_token(),
        body.len()
    );
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer).await;
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_json_bodies_are_415() {
    let server = TestServer::builder(Backend::Sqlite).start().await;
    for content_type in [
        None,
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
    ] {
        let answer = put_report(&server, content_type, valid_report().to_string()).await;
        assert_eq!(answer.status, 415, "{content_type:?}");
        assert_eq!(answer.json["code"], "unsupported_media_type");
    }
    let controller = tokens::user_token(CONTROLLER);
    let answer = server
        .raw(
            Method::POST,
            &format!("/api/v1/namespaces/{NS}/cronworkflows/nightly/runs"),
            Some(&controller),
            Some("text/xml"),
            format!(r#"{{"cronWorkflowUid":"{UID}","scheduledTime":"2026-11-29T17:00:00Z","workflowName":"n"}}"#),
        )
        .await;
    assert_eq!(answer.status, 415);
    assert_nothing_written(&server).await;
    assert_eq!(server.count("SELECT COUNT(*) FROM cron_claims").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_routes_are_404_problems() {
    let server = TestServer::builder(Backend::Sqlite).start().await;
    let answer = server
        .get("/api/v1/nothing", Some(&tokens::user_token(CONTROLLER)))
        .await;
    assert_eq!(answer.status, 404);
    assert_eq!(answer.json["code"], "not_found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_twice_anywhere_is_400_naming_where() {
    let server = TestServer::builder(Backend::Sqlite).start().await;
    let s = step(1);
    let head = format!(
        r#"{{"protocolVersion":1,"workflowUid":"{UID}","podName":"{}","podUid":"{}","final":true"#,
        s.pod_name, s.pod_uid
    );
    // The last `result` fits the limit and the first does not: a parser keeping either one
    // would validate one value and store the other.
    let big = "x".repeat(256 * 1024 + 1);
    let cases = [
        (format!(r#"{head},"podUid":"someone-else"}}"#), "podUid"),
        (
            format!(r#"{head},"outputs":{{"result":"{big}","result":"ok"}}}}"#),
            "outputs.result",
        ),
        (
            format!(r#"{head},"outputs":{{"parameters":[{{"name":"ok","name":"not ok"}}]}}}}"#),
            "outputs.parameters[0].name",
        ),
    ];
    for (body, field) in cases {
        refused(&server, &body, 400, "invalid_json", Some(field)).await;
    }
}

async fn nul_and_oversized_text_are_422_on_both_backends(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    for message in ["before\u{0}after".to_owned(), "m".repeat(16 * 1024 + 1)] {
        let mut body = valid_report();
        body["message"] = message.into();
        refused(
            &server,
            &body.to_string(),
            422,
            "invalid_field",
            Some("message"),
        )
        .await;
    }
    // `\u0000` inside outputs is data, kept exactly (docs/api.md section 1).
    let mut body = valid_report();
    body["outputs"] = serde_json::json!({"result": "a\u{0}b"});
    let stored = put_report(&server, JSON, body.to_string()).await;
    assert_eq!(stored.status, 201, "{}", stored.text);
    assert_eq!(stored.json["outputs"]["result"], "a\u{0}b");
    let controller = tokens::user_token(CONTROLLER);
    let abandon = server
        .raw(
            Method::POST,
            &format!("{}/abandon", result_path(&step(2).node_id)),
            Some(&controller),
            JSON,
            format!(r#"{{"workflowUid":"{UID}","reason":"gone\u0000"}}"#),
        )
        .await;
    assert_eq!(
        (abandon.status, abandon.json["field"].as_str()),
        (422, Some("reason")),
        "{}",
        abandon.text
    );
}

/// An `outputs` patch is bounded in members per object and in depth (docs/api.md section
/// 2), so that no report can make the writer's merge match hundreds of thousands of
/// members (one of 180,000, sent twice, held the writer 32 s): `422` past 1,000 members,
/// `400` past the 127 levels the body's JSON reader takes; nothing written. At the limits,
/// stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outputs_too_wide_or_too_deep_are_refused() {
    let server = TestServer::builder(Backend::Sqlite).start().await;
    // Spliced as text: a JSON library would refuse to build the deepest.
    let with_outputs = |outputs: &str, sequence: u32| {
        let mut body = valid_report();
        body["outputs"] = "OUTPUTS".into();
        body["final"] = false.into();
        body["sequence"] = sequence.into();
        body.to_string().replace(r#""OUTPUTS""#, outputs)
    };
    let members = |n: usize| {
        let members: Vec<String> = (0..n).map(|i| format!(r#""m{i}":0"#)).collect();
        format!("{{{}}}", members.join(","))
    };
    let nested = |depth: usize| format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth));
    for outputs in [members(150_000), members(1001)] {
        let body = with_outputs(&outputs, 1);
        assert!(body.len() < 2 << 20, "within the body limit");
        refused(&server, &body, 422, "invalid_field", Some("outputs")).await;
    }
    // With the report's own object around them: 128 levels, then 127.
    refused(
        &server,
        &with_outputs(&nested(127), 1),
        400,
        "invalid_json",
        None,
    )
    .await;
    for (sequence, outputs) in [(1, members(1000)), (2, nested(126))] {
        let stored = put_report(&server, JSON, with_outputs(&outputs, sequence)).await;
        assert_eq!(
            stored.status,
            [201, 200][sequence as usize - 1],
            "{:.300}",
            stored.text
        );
    }
}

/// A body sent with a `Content-Encoding` (`br`, `gzip`) is not read as if it were plain:
/// `415`, and nothing stored. `identity` is no encoding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encoded_bodies_are_415() {
    let server = TestServer::builder(Backend::Sqlite).start().await;
    let path = result_path(&step(1).node_id);
    let send = |encoding: &'static str| {
        let request = reqwest::Client::new()
            .put(format!("{}{path}", server.url()))
            .bearer_auth(pod_token())
            .header("content-type", "application/json")
            .header("content-encoding", encoding)
            .body(valid_report().to_string());
        async move { argo_results_tests::server::Raw::read(request.send().await.expect("send")).await }
    };
    for encoding in ["br", "gzip", "identity, gzip"] {
        let answer = send(encoding).await;
        assert_eq!(answer.status, 415, "{encoding}: {}", answer.text);
        assert_eq!(answer.json["code"], "unsupported_media_type");
        assert!(
            answer.json["detail"]
                .as_str()
                .unwrap_or_default()
                .contains(encoding)
        );
        assert_nothing_written(&server).await;
    }
    assert_eq!(send("identity").await.status, 201);
}
