//! The `argo-results` CLI against the real server: the wait container's `report` with its
//! retries and exit codes, and the admin commands.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use argo_results_client::proto::{NodeResult, ResultList};
use argo_results_tests::fixtures::{NS, Step, UID, WF, outputs, step};
use argo_results_tests::server::{binary, free_port};
use argo_results_tests::tls::TestCa;
use argo_results_tests::tokens::{self, READER};
use argo_results_tests::{Backend, TestServer};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

on_both_backends!(
    report_progress_then_final_then_replays,
    report_waits_for_a_server_that_starts_late,
    report_rereads_the_token_file_before_each_attempt,
    report_trusts_the_ca_file_for_tls,
    watch_json_resumes_after_a_restart_without_gaps_or_repeats,
    get_prints_tables_json_and_yaml,
);

/// `argo-results` with the environment Argo gives the wait container of `step`.
fn wait_container(url: &str, token_file: &Path, step: &Step) -> Command {
    let mut command = Command::new(binary("argo-results"));
    command
        .env_clear()
        .env("ARGO_RESULTS_URL", url)
        .env("ARGO_RESULTS_TOKEN_FILE", token_file)
        .env("ARGO_WORKFLOW_NAME", WF)
        .env("ARGO_WORKFLOW_UID", UID)
        .env("ARGO_NODE_ID", &step.node_id)
        .env("ARGO_POD_NAME", &step.pod_name)
        .env("ARGO_POD_UID", &step.pod_uid)
        .kill_on_drop(true);
    command
}

/// Writes `step`'s pod token (it names the namespace) and returns its path.
fn token_file(dir: &Path, step: &Step) -> std::path::PathBuf {
    let path = dir.join("token");
    std::fs::write(&path, tokens::pod_token(NS, &step.pod_name, &step.pod_uid)).expect("token");
    path
}

/// An admin command with a reader token.
fn admin(server: &TestServer, args: &[&str]) -> Command {
    let mut command = Command::new(binary("argo-results"));
    command
        .env_clear()
        .env("ARGO_RESULTS_URL", server.url())
        .env("ARGO_RESULTS_TOKEN", tokens::user_token(READER))
        .args(args)
        .kill_on_drop(true);
    command
}

async fn run(mut command: Command) -> Output {
    // Bounded so that a hang fails the test rather than the suite.
    tokio::time::timeout(Duration::from_secs(120), command.output())
        .await
        .expect("the command finished")
        .expect("run argo-results")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

async fn report_progress_then_final_then_replays(backend: Backend) {
    let server = TestServer::start(backend).await;
    let s = step(1);
    let token = token_file(&server.dir.0, &s);
    let progress = run({
        let mut c = wait_container(server.url(), &token, &s);
        c.args(["report", "--progress", "3/10"]);
        c
    })
    .await;
    assert_eq!(progress.status.code(), Some(0), "{}", stderr(&progress));

    let file = server.dir.0.join("outputs.json");
    std::fs::write(&file, outputs(1)).expect("outputs file");
    let final_report = || {
        let mut c = wait_container(server.url(), &token, &s);
        c.args(["report", "--final", "--outputs"]).arg(&file);
        c
    };
    let done = run(final_report()).await;
    assert_eq!(done.status.code(), Some(0), "{}", stderr(&done));
    let stored = server
        .reader()
        .get_result(NS, WF, &s.node_id, None)
        .await
        .expect("read");
    assert_eq!(stored.outputs.map(|o| o.get().to_owned()), Some(outputs(1)));
    assert_eq!(stored.progress.as_deref(), Some("3/10"));

    let replay = run(final_report()).await;
    assert_eq!(
        replay.status.code(),
        Some(0),
        "an identical final replay: {}",
        stderr(&replay)
    );

    std::fs::write(&file, outputs(2)).expect("other outputs");
    let other = run(final_report()).await;
    assert_eq!(other.status.code(), Some(3), "{}", stderr(&other));
    assert!(
        stderr(&other).contains("already_completed"),
        "{}",
        stderr(&other)
    );
    assert_eq!(server.count("SELECT COUNT(*) FROM changes").await, 2);
}

async fn report_waits_for_a_server_that_starts_late(backend: Backend) {
    let port = free_port();
    let dir = argo_results_tests::server::ScratchDir::new();
    let s = step(1);
    let token = token_file(&dir.0, &s);
    let mut reporting = wait_container(&format!("http://127.0.0.1:{port}"), &token, &s);
    reporting.args(["report", "--final", "--outputs", "-"]);
    let file = dir.0.join("outputs.json");
    std::fs::write(&file, outputs(1)).expect("outputs file");
    reporting.stdin(std::fs::File::open(&file).expect("open"));
    let reporter = reporting.output();
    let late_server = async {
        tokio::time::sleep(Duration::from_secs(3)).await;
        TestServer::start_with(backend, &["--listen", &format!("127.0.0.1:{port}")]).await
    };
    let (reported, server) = tokio::join!(reporter, late_server);
    let reported = reported.expect("argo-results");
    assert_eq!(reported.status.code(), Some(0), "{}", stderr(&reported));
    assert!(
        stderr(&reported).contains("retrying"),
        "{}",
        stderr(&reported)
    );
    assert_eq!(
        server.count("SELECT COUNT(*) FROM changes").await,
        1,
        "stored once"
    );
    let stored = server
        .reader()
        .get_result(NS, WF, &s.node_id, None)
        .await
        .expect("read");
    assert_eq!(stored.outputs.map(|o| o.get().to_owned()), Some(outputs(1)));
}

#[tokio::test]
async fn report_gives_up_at_the_deadline_with_nothing_listening() {
    let dir = argo_results_tests::server::ScratchDir::new();
    let s = step(1);
    let token = token_file(&dir.0, &s);
    let mut command = wait_container(&format!("http://127.0.0.1:{}", free_port()), &token, &s);
    command.args(["report", "--final", "--timeout", "5s"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(4), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("gave up at the deadline"),
        "{}",
        stderr(&output)
    );
}

#[tokio::test]
async fn report_without_its_identity_is_a_usage_error() {
    let mut command = Command::new(binary("argo-results"));
    command.env_clear().args(["report", "--final"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert_eq!(message.lines().count(), 1, "one line: {message}");
    for variable in [
        "ARGO_RESULTS_URL",
        "ARGO_WORKFLOW_NAME",
        "ARGO_WORKFLOW_UID",
        "ARGO_NODE_ID",
        "ARGO_POD_NAME",
        "ARGO_POD_UID",
    ] {
        assert!(message.contains(variable), "{message}");
    }
}

async fn report_rereads_the_token_file_before_each_attempt(backend: Backend) {
    let port = free_port();
    let dir = argo_results_tests::server::ScratchDir::new();
    let s = step(1);
    let token = dir.0.join("token");
    // The first token would be refused (401, which is final): only a re-read succeeds.
    std::fs::write(&token, "not-a-token").expect("token");
    let mut command = wait_container(&format!("http://127.0.0.1:{port}"), &token, &s);
    command.args(["report", "--final", "--namespace", NS]);
    let reporter = command.output();
    let rotate_then_serve = async {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        std::fs::write(&token, tokens::pod_token(NS, &s.pod_name, &s.pod_uid)).expect("rotate");
        TestServer::start_with(backend, &["--listen", &format!("127.0.0.1:{port}")]).await
    };
    let (reported, server) = tokio::join!(reporter, rotate_then_serve);
    let reported = reported.expect("argo-results");
    assert_eq!(reported.status.code(), Some(0), "{}", stderr(&reported));
    assert_eq!(server.count("SELECT COUNT(*) FROM results").await, 1);
}

async fn report_trusts_the_ca_file_for_tls(backend: Backend) {
    let ca = TestCa::new("argo-results test CA");
    let dir = argo_results_tests::server::ScratchDir::new();
    let cert = ca.server_cert();
    let (cert_file, key_file, ca_file) = (
        dir.0.join("tls.crt"),
        dir.0.join("tls.key"),
        dir.0.join("ca.crt"),
    );
    std::fs::write(&cert_file, &cert.cert_pem).expect("cert");
    std::fs::write(&key_file, &cert.key_pem).expect("key");
    std::fs::write(&ca_file, ca.pem()).expect("ca");
    let server = TestServer::start_with(
        backend,
        &[
            "--tls-cert",
            cert_file.to_str().expect("path"),
            "--tls-key",
            key_file.to_str().expect("path"),
        ],
    )
    .await;
    assert!(server.url().starts_with("https://"), "{}", server.url());
    let s = step(1);
    let token = token_file(&dir.0, &s);

    let mut untrusted = wait_container(server.url(), &token, &s);
    untrusted.args(["report", "--final", "--timeout", "2s"]);
    let refused = run(untrusted).await;
    assert_eq!(
        refused.status.code(),
        Some(4),
        "no CA, no trust: {}",
        stderr(&refused)
    );

    let mut trusted = wait_container(server.url(), &token, &s);
    trusted
        .env("ARGO_RESULTS_CA_FILE", &ca_file)
        .args(["report", "--final", "--timeout", "30s"]);
    let stored = run(trusted).await;
    assert_eq!(stored.status.code(), Some(0), "{}", stderr(&stored));
    assert_eq!(server.count("SELECT COUNT(*) FROM results").await, 1);
}

/// Reads lines from the watch until it has `n` of them.
async fn lines(
    watch: &mut Child,
    reader: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    n: usize,
) -> Vec<serde_json::Value> {
    let mut lines = Vec::new();
    while lines.len() < n {
        let line = tokio::time::timeout(Duration::from_secs(60), reader.next_line())
            .await
            .expect("a change within a minute")
            .expect("read")
            .unwrap_or_else(|| panic!("the watch ended: {:?}", watch.try_wait()));
        lines.push(serde_json::from_str(&line).expect("one JSON change per line"));
    }
    lines
}

async fn watch_json_resumes_after_a_restart_without_gaps_or_repeats(backend: Backend) {
    let server = TestServer::start(backend).await;
    let mut command = admin(&server, &["watch", "-o", "json"]);
    command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut watch = command.spawn().expect("argo-results watch");
    let mut reader = BufReader::new(watch.stdout.take().expect("stdout")).lines();
    for i in 0..3 {
        server.register(&step(i)).await;
    }
    let mut seen = lines(&mut watch, &mut reader, 3).await;
    let server = server.crash_and_restart().await;
    for i in 3..6 {
        server.register(&step(i)).await;
    }
    seen.extend(lines(&mut watch, &mut reader, 3).await);
    let revisions: Vec<i64> = seen
        .iter()
        .map(|change| change["revision"].as_i64().expect("revision"))
        .collect();
    assert_eq!(revisions, [1, 2, 3, 4, 5, 6]);
    let nodes: Vec<&str> = seen
        .iter()
        .map(|c| c["result"]["nodeId"].as_str().expect("node"))
        .collect();
    let expected: Vec<String> = (0..6).map(|i| step(i).node_id).collect();
    assert_eq!(nodes, expected);
}

async fn get_prints_tables_json_and_yaml(backend: Backend) {
    let server = TestServer::start(backend).await;
    server.complete(&step(1), 1).await;
    server.register(&step(2)).await;
    let workflow = format!("{NS}/{WF}");

    let table = run(admin(&server, &["get", &workflow])).await;
    assert_eq!(table.status.code(), Some(0), "{}", stderr(&table));
    let text = String::from_utf8(table.stdout).expect("utf-8");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[0].starts_with("NODE") && lines[0].contains("STATE") && lines[0].contains("OUTPUTS")
    );
    assert!(lines[1].starts_with(&step(1).node_id) && lines[1].contains("completed"));
    assert!(lines[1].contains("1 parameter, 1 artifact"), "{text}");
    assert!(lines[2].starts_with(&step(2).node_id) && lines[2].contains("expected"));
    let column = lines[0].find("STATE").expect("STATE");
    assert_eq!(
        lines[1].find("completed"),
        Some(column),
        "columns line up:\n{text}"
    );
    assert!(
        !text.contains('\x1b'),
        "no colour when stdout is not a terminal"
    );

    let json = run(admin(&server, &["get", &workflow, "-o", "json"])).await;
    let list: ResultList = serde_json::from_slice(&json.stdout).expect("a result list");
    assert_eq!(list.items.len(), 2);
    assert_eq!(list.summary.completed, 1);

    let one = run(admin(
        &server,
        &["get", &workflow, &step(1).node_id, "-o", "json"],
    ))
    .await;
    let result: NodeResult = serde_json::from_slice(&one.stdout).expect("a result");
    assert_eq!(result.outputs.map(|o| o.get().to_owned()), Some(outputs(1)));

    let yaml = run(admin(
        &server,
        &["get", &workflow, &step(1).node_id, "-o", "yaml"],
    ))
    .await;
    let yaml = String::from_utf8(yaml.stdout).expect("utf-8");
    assert!(yaml.contains("state: \"completed\"\n"), "{yaml}");
    assert!(yaml.contains("    - name: \"row-count\"\n"), "{yaml}");

    let missing = run(admin(&server, &["get", &workflow, "no-such-node"])).await;
    assert_eq!(missing.status.code(), Some(3));
    assert!(
        stderr(&missing).contains("not_found"),
        "{}",
        stderr(&missing)
    );
}
