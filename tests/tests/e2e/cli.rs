//! The `argo-results` CLI against the real server: the wait container's `report` with its
//! retries and exit codes, and the admin commands.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use argo_results_client::proto::{ExpectationRequest, NodeResult, ResultList};
use argo_results_tests::fixtures::{NS, Step, UID, WF, outputs, step};
use argo_results_tests::server::{binary, free_port, now_millis};
use argo_results_tests::tls::TestCa;
use argo_results_tests::tokens::{self, READER};
use argo_results_tests::{Backend, TestServer};
use futures_util::future::join_all;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

on_both_backends!(
    report_progress_then_final_then_replays,
    report_waits_for_a_server_that_starts_late,
    report_pays_argo_deadline_no_heed_and_retries_until_stored,
    a_progress_tick_refused_as_completed_exits_0_and_other_refusals_exit_3,
    concurrent_reports_sharing_a_sequence_file_never_share_a_sequence,
    an_explicit_sequence_wins_over_the_sequence_file,
    a_final_report_carries_phase_and_exit_code_and_keeps_outputs_byte_exact,
    long_names_the_root_node_and_a_template_less_node_report_and_read_back,
    report_rereads_the_token_file_before_each_attempt,
    report_trusts_the_ca_file_for_tls,
    report_from_a_pod_created_again_is_stored_once_the_controller_binds_it,
    watch_json_resumes_after_a_restart_without_gaps_or_repeats,
    get_prints_tables_json_and_yaml,
    list_shows_each_workflow_with_its_phase_and_summary,
);

/// `argo-results` with the environment Argo gives the wait container of `step` of [`WF`].
fn wait_container(url: &str, token_file: &Path, step: &Step) -> Command {
    wait_container_of(url, token_file, WF, step)
}

/// [`wait_container`] of a step of `workflow`.
fn wait_container_of(url: &str, token_file: &Path, workflow: &str, step: &Step) -> Command {
    let mut command = Command::new(binary("argo-results"));
    command
        .env_clear()
        .env("ARGO_RESULTS_URL", url)
        .env("ARGO_RESULTS_TOKEN_FILE", token_file)
        .env("ARGO_WORKFLOW_NAME", workflow)
        .env("ARGO_WORKFLOW_UID", UID)
        .env("ARGO_NODE_ID", &step.node_id)
        .env("ARGO_POD_NAME", &step.pod_name)
        .env("ARGO_POD_UID", &step.pod_uid)
        .kill_on_drop(true);
    command
}

/// Writes `step`'s pod token (it names the namespace) and returns its path.
fn token_file(dir: &Path, step: &Step) -> PathBuf {
    let path = dir.join(format!("{}.token", step.pod_name));
    std::fs::write(&path, tokens::pod_token(NS, &step.pod_name, &step.pod_uid)).expect("token");
    path
}

/// `report` with `args` from `step`'s wait container, its token written to `dir`.
fn report(url: &str, dir: &Path, step: &Step, args: &[&str]) -> Command {
    let mut command = wait_container(url, &token_file(dir, step), step);
    command.arg("report").args(args);
    command
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

/// The command exited with `code` and said `what` on stderr.
fn exits_saying(out: &Output, code: i32, what: &str) {
    assert_eq!(out.status.code(), Some(code), "{}", stderr(out));
    assert!(stderr(out).contains(what), "{what} in: {}", stderr(out));
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

async fn report_progress_then_final_then_replays(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let s = step(1);
    let token = token_file(server.dir.path(), &s);
    let progress = run({
        let mut c = wait_container(server.url(), &token, &s);
        c.args(["report", "--progress", "3/10"]);
        c
    })
    .await;
    assert_eq!(progress.status.code(), Some(0), "{}", stderr(&progress));

    let file = server.dir.path().join("outputs.json");
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
    exits_saying(&other, 3, "already_completed");
    assert_eq!(server.count("SELECT COUNT(*) FROM changes").await, 2);
}

async fn report_waits_for_a_server_that_starts_late(backend: Backend) {
    let port = free_port();
    let dir = tempfile::tempdir().expect("scratch directory");
    let s = step(1);
    let token = token_file(dir.path(), &s);
    let mut reporting = wait_container(&format!("http://127.0.0.1:{port}"), &token, &s);
    reporting.args(["report", "--final", "--outputs", "-"]);
    let file = dir.path().join("outputs.json");
    std::fs::write(&file, outputs(1)).expect("outputs file");
    reporting.stdin(std::fs::File::open(&file).expect("open"));
    let reporter = reporting.output();
    let late_server = async {
        tokio::time::sleep(Duration::from_secs(3)).await;
        TestServer::builder(backend)
            .flags(&["--listen", &format!("127.0.0.1:{port}")])
            .start()
            .await
    };
    let (reported, server) = tokio::join!(reporter, late_server);
    let reported = reported.expect("argo-results");
    exits_saying(&reported, 0, "retrying");
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

/// A pod created again under its name (the first was deleted before the workflow recorded
/// it, and the controller died before binding the new one's UID) reports into a row still
/// bound to the deleted pod: `pod_mismatch` is retried until the controller binds it, then
/// the final report is stored. The model loses that final report without the retry (#39).
async fn report_from_a_pod_created_again_is_stored_once_the_controller_binds_it(backend: Backend) {
    let server = TestServer::builder(backend)
        .flags(&["--require-expectation"])
        .start()
        .await;
    let dir = tempfile::tempdir().expect("scratch directory");
    let deleted = step(1);
    let again = deleted.restarted();
    server.register(&deleted).await;
    let started = run(report(server.url(), dir.path(), &deleted, &[])).await;
    exits_saying(&started, 0, "");
    // The controller, run again, registers the node by name and creates the pod again.
    let by_name = ExpectationRequest {
        pod_uid: None,
        ..deleted.expectation()
    };
    let controller = server.controller();
    controller
        .expect(NS, WF, &deleted.node_id, &by_name)
        .await
        .expect("registered by name");
    let mut reporting = report(server.url(), dir.path(), &again, &["--final"]);
    let mut child = reporting
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("argo-results");
    let mut said = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let first = tokio::time::timeout(Duration::from_secs(30), said.next_line())
        .await
        .expect("a retry within 30 s")
        .expect("stderr")
        .expect("a line");
    assert!(
        first.contains("409 pod_mismatch") && first.contains("retrying"),
        "{first}"
    );
    server.register(&again).await;
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("stored within 60 s of the binding")
        .expect("argo-results");
    assert_eq!(status.code(), Some(0));
    let stored = server
        .reader()
        .get_result(NS, WF, &deleted.node_id, None)
        .await
        .expect("read");
    assert_eq!(
        (stored.state.as_str(), stored.pod_uid.as_deref()),
        ("completed", Some(again.pod_uid.as_str()))
    );
}

#[tokio::test]
async fn report_gives_up_at_the_deadline_with_nothing_listening() {
    let dir = tempfile::tempdir().expect("scratch directory");
    let s = step(1);
    let token = token_file(dir.path(), &s);
    let mut command = wait_container(&format!("http://127.0.0.1:{}", free_port()), &token, &s);
    command.args(["report", "--final", "--timeout", "5s"]);
    let output = run(command).await;
    exits_saying(&output, 4, "gave up at the deadline");
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

/// `ARGO_DEADLINE` is when Argo kills `main`; argoexec reports the outputs after it, on a
/// context nothing cancels (`auxiliary.go`, `bgCtx`). So `report` pays it no heed: past,
/// Go's zero time (Argo's "none", `workflowpod.go` `getDeadline`) and empty all retry until
/// the server, started late, stores them.
async fn report_pays_argo_deadline_no_heed_and_retries_until_stored(backend: Backend) {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let dir = tempfile::tempdir().expect("scratch directory");
    let with_deadline = |s: &Step, deadline: &str| {
        let mut command = report(&url, dir.path(), s, &["--final"]);
        command.env("ARGO_DEADLINE", deadline);
        command
    };
    let deadlines = ["2001-02-03T04:05:06Z", "0001-01-01T00:00:00Z", ""];
    let reports = join_all(
        deadlines
            .iter()
            .enumerate()
            .map(|(i, deadline)| run(with_deadline(&step(i as u32 + 1), deadline))),
    );
    let late_server = async {
        tokio::time::sleep(Duration::from_secs(3)).await;
        TestServer::builder(backend)
            .flags(&["--listen", &format!("127.0.0.1:{port}")])
            .start()
            .await
    };
    let (outputs, server) = tokio::join!(reports, late_server);
    for (deadline, output) in deadlines.iter().zip(&outputs) {
        assert_eq!(
            output.status.code(),
            Some(0),
            "ARGO_DEADLINE={deadline:?}: {}",
            stderr(output)
        );
        assert!(stderr(output).contains("retrying"), "{}", stderr(output));
    }
    let reader = server.reader();
    for i in 1..=3 {
        let stored = reader.get_result(NS, WF, &step(i).node_id, None).await;
        assert_eq!(stored.expect("stored").state.as_str(), "completed");
    }
    assert_eq!(server.count("SELECT COUNT(*) FROM results").await, 3);
}

/// With neither `--namespace` nor a token that names one (nor, off a cluster, the
/// service account's namespace file), `report` says where it looked; Argo sets no
/// namespace variable, so `ARGO_NAMESPACE` is not read.
#[tokio::test]
async fn report_without_a_namespace_says_where_it_looked() {
    let dir = tempfile::tempdir().expect("scratch directory");
    let token = dir.path().join("token");
    std::fs::write(&token, "not-a-jwt").expect("token");
    let mut command = wait_container("http://127.0.0.1:1", &token, &step(1));
    command
        .env("ARGO_NAMESPACE", NS)
        .args(["report", "--final"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(message.contains("no namespace"), "{message}");
    assert!(message.contains("--namespace"), "{message}");
    assert!(message.contains(&token.display().to_string()), "{message}");
}

/// A progress tick that lands after the node completed is only noted, as Argo's executor
/// only logs a failed progress update (`executor.go`, `monitorProgress`).
async fn a_progress_tick_refused_as_completed_exits_0_and_other_refusals_exit_3(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let dir = server.dir.path();
    let s = step(1);
    let completed = server.complete(&s, 1).await.body;

    let tick = run(report(server.url(), dir, &s, &["--progress", "5/10"])).await;
    assert_eq!(tick.status.code(), Some(0), "{}", stderr(&tick));
    let note = stderr(&tick);
    assert_eq!(note.lines().count(), 1, "one note: {note}");
    assert!(note.contains("already completed"), "{note}");

    let with_message = run(report(
        server.url(),
        dir,
        &s,
        &["--progress", "6/10", "--message", "late"],
    ))
    .await;
    assert_eq!(
        with_message.status.code(),
        Some(3),
        "not progress alone: {}",
        stderr(&with_message)
    );
    let late_final = run(report(
        server.url(),
        dir,
        &s,
        &["--final", "--phase", "Failed"],
    ))
    .await;
    assert_eq!(late_final.status.code(), Some(3), "{}", stderr(&late_final));
    assert!(stderr(&late_final).contains("already_completed"));
    let stored = server
        .reader()
        .get_result(NS, WF, &s.node_id, None)
        .await
        .expect("read");
    assert_eq!(stored.revision, completed.revision, "nothing changed");
    assert_eq!(stored.progress, None);

    // A tick refused for another reason still fails.
    let other = step(2);
    let newer = run(report(
        server.url(),
        dir,
        &other,
        &["--progress", "2/4", "--sequence", "5"],
    ))
    .await;
    assert_eq!(newer.status.code(), Some(0), "{}", stderr(&newer));
    let older = run(report(
        server.url(),
        dir,
        &other,
        &["--progress", "1/4", "--sequence", "4"],
    ))
    .await;
    exits_saying(&older, 3, "stale_sequence");
}

/// The next value of a sequence file seeded far ahead of the clock.
fn seeded_sequence_file(dir: &Path) -> (PathBuf, i64) {
    let path = dir.join("argo-results-sequence");
    let ahead = now_millis() * 1000 + 1_000_000_000_000;
    std::fs::write(&path, ahead.to_string()).expect("seed");
    (path, ahead + 1)
}

/// The processes of one pod that report (main of a resource template, and wait) share
/// `/var/run/argo`; sixteen processes at once, each reporting its own node so that the
/// value each took can be read back, take every value once.
async fn concurrent_reports_sharing_a_sequence_file_never_share_a_sequence(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let dir = server.dir.path();
    let (file, first) = seeded_sequence_file(dir);
    let steps: Vec<Step> = (0..16).map(step).collect();
    let outputs = join_all(steps.iter().map(|s| {
        let mut command = report(server.url(), dir, s, &["--progress", "1/2"]);
        command.env("ARGO_RESULTS_SEQUENCE_FILE", &file);
        run(command)
    }))
    .await;
    for output in &outputs {
        assert_eq!(output.status.code(), Some(0), "{}", stderr(output));
    }
    let reader = server.reader();
    let mut sequences = Vec::new();
    for s in &steps {
        let stored = reader.get_result(NS, WF, &s.node_id, None).await;
        sequences.push(stored.expect("stored").sequence.expect("a sequence"));
    }
    sequences.sort_unstable();
    let expected: Vec<i64> = (0..16).map(|i| first + i).collect();
    assert_eq!(sequences, expected, "each value taken once");
    assert_eq!(
        std::fs::read_to_string(&file).expect("read"),
        (first + 15).to_string()
    );
}

async fn an_explicit_sequence_wins_over_the_sequence_file(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let dir = server.dir.path();
    let (file, first) = seeded_sequence_file(dir);
    let s = step(1);
    let mut explicit = report(
        server.url(),
        dir,
        &s,
        &["--progress", "1/2", "--sequence", "7"],
    );
    explicit.env("ARGO_RESULTS_SEQUENCE_FILE", &file);
    let output = run(explicit).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let stored = server.reader().get_result(NS, WF, &s.node_id, None).await;
    assert_eq!(stored.expect("stored").sequence, Some(7));
    assert_eq!(
        std::fs::read_to_string(&file).expect("read"),
        (first - 1).to_string(),
        "the file was not taken from"
    );
}

/// The stored outputs' members, each as its exact text.
fn members(result: &NodeResult) -> BTreeMap<String, String> {
    let outputs = result.outputs.as_ref().expect("outputs");
    let members: BTreeMap<String, Box<RawValue>> =
        serde_json::from_str(outputs.get()).expect("an object");
    members
        .into_iter()
        .map(|(key, value)| (key, value.get().to_owned()))
        .collect()
}

async fn a_final_report_carries_phase_and_exit_code_and_keeps_outputs_byte_exact(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let dir = server.dir.path();
    let parameters = r#"[{"name":"ratio", "value":"1.50","valueFrom":{"path":"/tmp/r"}}]"#;
    let artifacts = r#"[ {"name":"main-logs","s3":{"key":"wf/pod/main.log"}} ]"#;
    let file = dir.join("outputs.json");
    std::fs::write(
        &file,
        format!(r#"{{ "parameters" : {parameters}, "artifacts":{artifacts} }}"#),
    )
    .expect("outputs");
    let file = file.to_str().expect("path");

    let s = step(1);
    let args = [
        "--final",
        "--phase",
        "Failed",
        "--exit-code",
        "3",
        "--outputs",
        file,
    ];
    let failed = run(report(server.url(), dir, &s, &args)).await;
    assert_eq!(failed.status.code(), Some(0), "{}", stderr(&failed));
    let stored = server
        .reader()
        .get_result(NS, WF, &s.node_id, None)
        .await
        .expect("read");
    assert_eq!(stored.phase.as_deref(), Some("Failed"));
    let expected: BTreeMap<String, String> = [
        ("exitCode", r#""3""#),
        ("parameters", parameters),
        ("artifacts", artifacts),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), value.to_owned()))
    .collect();
    assert_eq!(members(&stored), expected);

    let alone = step(2);
    let succeeded = run(report(
        server.url(),
        dir,
        &alone,
        &["--final", "--phase", "Succeeded", "--exit-code", "0"],
    ))
    .await;
    assert_eq!(succeeded.status.code(), Some(0), "{}", stderr(&succeeded));
    let stored = server
        .reader()
        .get_result(NS, WF, &alone.node_id, None)
        .await
        .expect("read");
    assert_eq!(
        stored.outputs.map(|o| o.get().to_owned()).as_deref(),
        Some(r#"{"exitCode":"0"}"#)
    );

    // Usage errors, nothing sent: an exit code before the end, or a second exitCode.
    let refused = step(3);
    let not_final = run(report(server.url(), dir, &refused, &["--exit-code", "1"])).await;
    assert_eq!(not_final.status.code(), Some(2), "{}", stderr(&not_final));
    let twice = dir.join("twice.json");
    std::fs::write(&twice, r#"{"exitCode":"1"}"#).expect("outputs");
    let twice = twice.to_str().expect("path");
    let doubled = run(report(
        server.url(),
        dir,
        &refused,
        &["--final", "--exit-code", "1", "--outputs", twice],
    ))
    .await;
    exits_saying(&doubled, 2, "exitCode");
    assert_eq!(server.count("SELECT COUNT(*) FROM results").await, 2);
}

/// Argo's longest names: a 63-character workflow (`workflow/validate/validate.go`,
/// `maxCharsInObjectName`) and a 128-character template (`workflowFieldMaxLength`) make a
/// 74-character node ID and a 203-character v2 pod name (`workflow/util/pod_name.go`,
/// `GeneratePodName`); the root node's pod is the workflow's name, and a node without a
/// template has the node ID as its pod name.
pub(crate) fn long_named_steps() -> (String, [Step; 3]) {
    let workflow = format!("{:w<63}", "long-workflow-");
    let template = format!("{:t<128}", "long-template-");
    let node_id = format!("{workflow}-4294967295");
    let v2 = Step {
        pod_name: format!("{workflow}-{template}-4294967295"),
        node_id,
        pod_uid: "0b6f7c1e-0000-4000-8000-000000000001".into(),
    };
    let root = Step {
        node_id: workflow.clone(),
        pod_name: workflow.clone(),
        pod_uid: "0b6f7c1e-0000-4000-8000-000000000002".into(),
    };
    let template_less = Step {
        node_id: format!("{workflow}-1234567890"),
        pod_name: format!("{workflow}-1234567890"),
        pod_uid: "0b6f7c1e-0000-4000-8000-000000000003".into(),
    };
    assert_eq!(
        (workflow.len(), v2.node_id.len(), v2.pod_name.len()),
        (63, 74, 203)
    );
    (workflow, [v2, root, template_less])
}

async fn long_names_the_root_node_and_a_template_less_node_report_and_read_back(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let dir = server.dir.path();
    let (workflow, steps) = long_named_steps();
    let file = dir.join("outputs.json");
    for (i, s) in (1..).zip(&steps) {
        std::fs::write(&file, outputs(i)).expect("outputs");
        let mut command = wait_container_of(server.url(), &token_file(dir, s), &workflow, s);
        command.args(["report", "--final", "--outputs"]).arg(&file);
        let output = run(command).await;
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}: {}",
            s.pod_name,
            stderr(&output)
        );
        let stored = server
            .reader()
            .get_result(NS, &workflow, &s.node_id, None)
            .await
            .expect("read back");
        assert_eq!(stored.pod_name.as_deref(), Some(s.pod_name.as_str()));
        assert_eq!(stored.outputs.map(|o| o.get().to_owned()), Some(outputs(i)));
    }
}

async fn report_rereads_the_token_file_before_each_attempt(backend: Backend) {
    let port = free_port();
    let dir = tempfile::tempdir().expect("scratch directory");
    let s = step(1);
    let token = dir.path().join("token");
    // The first token would be refused (401, which is final): only a re-read succeeds.
    std::fs::write(&token, "not-a-token").expect("token");
    let mut command = wait_container(&format!("http://127.0.0.1:{port}"), &token, &s);
    command.args(["report", "--final", "--namespace", NS]);
    let reporter = command.output();
    let rotate_then_serve = async {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        std::fs::write(&token, tokens::pod_token(NS, &s.pod_name, &s.pod_uid)).expect("rotate");
        TestServer::builder(backend)
            .flags(&["--listen", &format!("127.0.0.1:{port}")])
            .start()
            .await
    };
    let (reported, server) = tokio::join!(reporter, rotate_then_serve);
    let reported = reported.expect("argo-results");
    assert_eq!(reported.status.code(), Some(0), "{}", stderr(&reported));
    assert_eq!(server.count("SELECT COUNT(*) FROM results").await, 1);
}

/// A server on `backend` serving HTTPS with a certificate of a CA made here, and that
/// CA's file (in `dir`).
async fn tls_server(backend: Backend, dir: &Path) -> (TestServer, PathBuf) {
    let ca = TestCa::new("argo-results CLI test CA");
    let cert = ca.server_cert();
    serve_tls(backend, dir, &ca.pem(), &cert.cert_pem, &cert.key_pem).await
}

/// A server on `backend` serving HTTPS with `cert_pem` and `key_pem`, and the file of the
/// CA `ca_pem` (in `dir`).
async fn serve_tls(
    backend: Backend,
    dir: &Path,
    ca_pem: &str,
    cert_pem: &str,
    key_pem: &str,
) -> (TestServer, PathBuf) {
    let (cert_file, key_file, ca_file) =
        (dir.join("tls.crt"), dir.join("tls.key"), dir.join("ca.crt"));
    std::fs::write(&cert_file, cert_pem).expect("cert");
    std::fs::write(&key_file, key_pem).expect("key");
    std::fs::write(&ca_file, ca_pem).expect("ca");
    let server = TestServer::builder(backend)
        .flags(&[
            "--tls-cert",
            cert_file.to_str().expect("path"),
            "--tls-key",
            key_file.to_str().expect("path"),
        ])
        .start()
        .await;
    (server, ca_file)
}

/// A CA and a certificate it issued for the DNS name `name` alone, no address (as a
/// Service's certificate), in PEM: the CA's, the certificate's and its key's.
fn certificate_for(name: &str) -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().expect("CA key"))
        .expect("CA certificate");
    let key = KeyPair::generate().expect("server key");
    let cert = CertificateParams::new(vec![name.to_owned()])
        .expect("server params")
        .signed_by(&key, &issuer)
        .expect("server certificate");
    (issuer.pem(), cert.pem(), key.serialize_pem())
}

async fn report_trusts_the_ca_file_for_tls(backend: Backend) {
    let dir = tempfile::tempdir().expect("scratch directory");
    let (server, ca_file) = tls_server(backend, dir.path()).await;
    assert!(server.url().starts_with("https://"), "{}", server.url());
    let s = step(1);
    let token = token_file(dir.path(), &s);

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
    let server = TestServer::builder(backend).start().await;
    let mut command = admin(&server, &["watch", "-n", NS, "-o", "json"]);
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

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The controller registers node `<workflow>-1` of `workflow` (incarnation `uid`) in
/// `namespace`, so that the workflow has one `expected` result there.
async fn register_in(server: &TestServer, namespace: &str, workflow: &str, uid: &str) {
    let expectation = ExpectationRequest {
        workflow_uid: uid.into(),
        pod_name: format!("{workflow}-main-1"),
        pod_uid: Some(format!("{uid}-pod")),
    };
    server
        .controller()
        .expect(namespace, workflow, &format!("{workflow}-1"), &expectation)
        .await
        .expect("expectation");
}

/// The table line that starts with `first`.
fn line_of<'a>(text: &'a str, first: &str) -> &'a str {
    text.lines()
        .find(|line| line.split_whitespace().next() == Some(first))
        .unwrap_or_else(|| panic!("no line of {first}:\n{text}"))
}

async fn get_prints_tables_json_and_yaml(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let dir = server.dir.path();
    // One node in each phase: a final report that says nothing of how the step ended
    // (Error, as the controller reads it), registered only (Pending), a final report with
    // exit code 0 (Succeeded), progress only (Running).
    server.complete(&step(1), 1).await;
    server.register(&step(2)).await;
    let succeeded = run(report(
        server.url(),
        dir,
        &step(3),
        &["--final", "--exit-code", "0"],
    ))
    .await;
    assert_eq!(succeeded.status.code(), Some(0), "{}", stderr(&succeeded));
    let running = run(report(server.url(), dir, &step(4), &["--progress", "1/2"])).await;
    assert_eq!(running.status.code(), Some(0), "{}", stderr(&running));

    let table = run(admin(&server, &["get", WF, "-n", NS])).await;
    assert_eq!(table.status.code(), Some(0), "{}", stderr(&table));
    let text = stdout(&table);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    assert!(
        lines[0].starts_with("NODE   ")
            && lines[0].contains("PHASE")
            && lines[0].contains("STATE")
            && lines[0].contains("OUTPUTS"),
        "{text}"
    );
    for (i, phase, state) in [
        (1, "Error", "completed"),
        (2, "Pending", "expected"),
        (3, "Succeeded", "completed"),
        (4, "Running", "reporting"),
    ] {
        let line = lines[i as usize];
        let cells: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(
            cells[..3],
            [step(i).node_id.as_str(), phase, state],
            "{text}"
        );
    }
    assert!(lines[1].contains("1 parameter, 1 artifact"), "{text}");
    for (column, cell) in [("PHASE", "Error"), ("STATE", "completed")] {
        assert_eq!(
            lines[1].find(cell),
            lines[0].find(column),
            "columns line up:\n{text}"
        );
    }
    assert!(
        !text.contains('\x1b'),
        "no colour when stdout is not a terminal"
    );

    let wide = stdout(&run(admin(&server, &["get", WF, "-n", NS, "-o", "wide"])).await);
    for column in ["POD UID", "REVISION", "MESSAGE"] {
        assert!(
            wide.lines().next().is_some_and(|h| h.contains(column)),
            "{wide}"
        );
    }
    assert!(
        line_of(&wide, &step(1).node_id).contains(&step(1).pod_uid),
        "{wide}"
    );

    let names = run(admin(&server, &["get", WF, "-n", NS, "-o", "name"])).await;
    let expected: String = (1..=4)
        .map(|i| format!("result/{}\n", step(i).node_id))
        .collect();
    assert_eq!(stdout(&names), expected);
    let one_name = run(admin(
        &server,
        &["get", WF, &step(2).node_id, "-n", NS, "-o", "name"],
    ))
    .await;
    assert_eq!(stdout(&one_name), format!("result/{}\n", step(2).node_id));

    let json = run(admin(&server, &["get", WF, "-n", NS, "-o", "json"])).await;
    let list: ResultList = serde_json::from_slice(&json.stdout).expect("a result list");
    assert_eq!(list.items.len(), 4);
    assert_eq!(list.summary.completed, 2);

    let one = run(admin(
        &server,
        &["get", WF, &step(1).node_id, "-n", NS, "-o", "json"],
    ))
    .await;
    let result: NodeResult = serde_json::from_slice(&one.stdout).expect("a result");
    assert_eq!(result.outputs.map(|o| o.get().to_owned()), Some(outputs(1)));

    let yaml = run(admin(
        &server,
        &["get", WF, &step(1).node_id, "-n", NS, "-o", "yaml"],
    ))
    .await;
    let yaml = String::from_utf8(yaml.stdout).expect("utf-8");
    assert!(yaml.contains("state: \"completed\"\n"), "{yaml}");
    assert!(yaml.contains("    - name: \"row-count\"\n"), "{yaml}");

    let fields = stdout(&run(admin(&server, &["get", WF, &step(3).node_id, "-n", NS])).await);
    assert!(line_of(&fields, "phase").ends_with("Succeeded"), "{fields}");

    let missing = run(admin(&server, &["get", WF, "no-such-node", "-n", NS])).await;
    exits_saying(&missing, 3, "not_found");

    // The old form NAMESPACE/NAME still works, and says what to type instead.
    let old = run(admin(
        &server,
        &["get", &format!("{NS}/{WF}"), "-o", "name"],
    ))
    .await;
    assert_eq!(old.status.code(), Some(0), "{}", stderr(&old));
    assert_eq!(stdout(&old), expected);
    assert!(
        stderr(&old).contains("old form; use: argo-results get etl-x7k2p -n argo"),
        "{}",
        stderr(&old)
    );
    let clash = run(admin(
        &server,
        &["get", &format!("{NS}/{WF}"), "-n", "prod"],
    ))
    .await;
    exits_saying(&clash, 2, "-n says prod");

    // A workflow with no results in the namespace is not found, as a node is (exit 3).
    let elsewhere = run(admin(&server, &["get", WF, "-n", "prod"])).await;
    assert_eq!(elsewhere.status.code(), Some(3), "{}", stderr(&elsewhere));
    assert_eq!(stdout(&elsewhere), "");
    assert!(
        stderr(&elsewhere).contains("no results found for workflow etl-x7k2p in namespace prod"),
        "{}",
        stderr(&elsewhere)
    );
    let nameless = run(admin(&server, &["get", "-n", NS])).await;
    exits_saying(&nameless, 2, "argo-results list");
}

async fn list_shows_each_workflow_with_its_phase_and_summary(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    server.complete(&step(1), 1).await;
    server.register(&step(2)).await;
    register_in(&server, NS, "other-wf", "uid-other").await;
    register_in(&server, "prod", "prod-wf", "uid-prod").await;
    // Collected as Argo's controller collects a finished workflow: not listed.
    register_in(&server, NS, "done-wf", "uid-done").await;
    let deleted = server
        .controller()
        .delete_results(NS, "done-wf", "uid-done")
        .await
        .expect("collected");
    assert_eq!(deleted.deleted, 1);

    let table = run(admin(&server, &["list", "-n", NS])).await;
    assert_eq!(table.status.code(), Some(0), "{}", stderr(&table));
    assert_eq!(stderr(&table), "");
    let text = stdout(&table);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(header, ["NAME", "PHASE", "RESULTS", "AGE"], "{text}");
    let row = |line: &str| {
        line.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(row(lines[1]), format!("{WF} Running 1/2"), "{text}");
    assert_eq!(row(lines[2]), "other-wf Pending 0/1", "{text}");
    assert_eq!(lines[1].find("Running"), lines[0].find("PHASE"), "{text}");

    let wide = stdout(&run(admin(&server, &["list", "-n", NS, "-o", "wide"])).await);
    for column in [
        "UID",
        "EXPECTED",
        "REPORTING",
        "COMPLETED",
        "ABANDONED",
        "UPDATED",
    ] {
        assert!(
            wide.lines().next().is_some_and(|h| h.contains(column)),
            "{wide}"
        );
    }
    assert!(line_of(&wide, WF).contains(UID), "{wide}");

    let names = run(admin(&server, &["list", "-n", NS, "-o", "name"])).await;
    assert_eq!(
        stdout(&names),
        format!("workflow/{WF}\nworkflow/other-wf\n")
    );

    let json = run(admin(&server, &["list", "-n", NS, "-o", "json"])).await;
    let list: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    let items = list["items"].as_array().expect("items");
    assert_eq!(items.len(), 2, "{list}");
    let first = &items[0];
    assert_eq!(
        (&first["workflow"], &first["workflowUid"], &first["phase"]),
        (&WF.into(), &UID.into(), &"Running".into()),
        "{list}"
    );
    assert_eq!(first["results"], 2);
    assert_eq!(
        first["summary"],
        serde_json::json!({"expected": 1, "reporting": 0, "completed": 1, "abandoned": 0})
    );

    let yaml = stdout(&run(admin(&server, &["list", "-n", NS, "-o", "yaml"])).await);
    assert!(yaml.starts_with("items:\n"), "{yaml}");
    assert!(yaml.contains("    workflow: \"other-wf\"\n"), "{yaml}");
    assert!(yaml.contains("    phase: \"Pending\"\n"), "{yaml}");

    let all = stdout(&run(admin(&server, &["list", "-A"])).await);
    assert!(all.starts_with("NAMESPACE "), "{all}");
    assert!(line_of(&all, "prod").contains("prod-wf"), "{all}");
    assert_eq!(all.lines().count(), 4, "argo's two, prod's one:\n{all}");
    assert!(!all.contains("done-wf"), "{all}");

    // An empty namespace: kubectl's words on stderr, exit 0; documents stay documents.
    let empty = run(admin(&server, &["list", "-n", "empty"])).await;
    assert_eq!(empty.status.code(), Some(0), "{}", stderr(&empty));
    assert_eq!(stdout(&empty), "");
    assert_eq!(stderr(&empty), "No results found in namespace empty.\n");
    let empty_json = run(admin(&server, &["list", "-n", "empty", "-o", "json"])).await;
    assert_eq!(empty_json.status.code(), Some(0));
    let list: serde_json::Value = serde_json::from_slice(&empty_json.stdout).expect("JSON");
    assert_eq!(list, serde_json::json!({"items": []}));
    assert_eq!(stderr(&empty_json), "");
}

/// `list` shows every workflow that has results, whatever the change feed kept: one whose
/// changes were all pruned is listed beside one that changed since.
#[tokio::test]
async fn list_shows_workflows_whose_history_was_pruned() {
    let server = TestServer::builder(Backend::Sqlite)
        .flags(&["--feed-retention", "3s", "--retention-every", "100ms"])
        .start()
        .await;
    for i in 0..20 {
        server.register(&step(i)).await;
    }
    argo_results_tests::eventually(
        "the history is pruned",
        Duration::from_secs(30),
        async || (server.count("SELECT COUNT(*) FROM changes").await == 0).then_some(()),
    )
    .await;
    register_in(&server, NS, "new-wf", "uid-new").await;
    let listed = run(admin(&server, &["list", "-n", NS, "-o", "name"])).await;
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    assert_eq!(stdout(&listed), format!("workflow/{WF}\nworkflow/new-wf\n"));
    let old = run(admin(&server, &["get", WF, "-n", NS, "-o", "name"])).await;
    assert_eq!(old.status.code(), Some(0), "{}", stderr(&old));
    assert_eq!(stdout(&old).lines().count(), 20);
}

/// `-n` defaults as kubectl's does: `ARGO_RESULTS_NAMESPACE`, else the namespace of the
/// current kubeconfig context (the files of `KUBECONFIG`, a missing one skipped, else
/// `~/.kube/config`), else `default`. A malformed kubeconfig is named (exit 2), and not
/// read at all when `-n` is given.
#[tokio::test]
async fn the_namespace_defaults_to_the_current_kubeconfig_context() {
    let server = TestServer::builder(Backend::Sqlite).start().await;
    server.register(&step(1)).await;
    let dir = server.dir.path();
    let context = |namespace: &str| {
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: dev\ncontexts:\n- name: other\n  \
             context: {{cluster: dev, namespace: elsewhere}}\n- name: dev\n  context:\n    \
             cluster: dev\n    namespace: {namespace}\n"
        )
    };
    let argo = dir.join("argo.yaml");
    std::fs::write(&argo, context(NS)).expect("kubeconfig");
    let home = dir.join("home");
    std::fs::create_dir_all(home.join(".kube")).expect("~/.kube");
    std::fs::write(home.join(".kube/config"), context(NS)).expect("~/.kube/config");
    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, "contexts: [name: dev\n  - : :\n").expect("kubeconfig");
    let missing = dir.join("missing.yaml");
    let list = format!("{}:{}", missing.display(), argo.display());

    let get = async |envs: &[(&str, &str)], more: &[&str]| {
        let mut command = admin(&server, &[&["get", WF], more].concat());
        for (key, value) in envs {
            command.env(key, value);
        }
        run(command).await
    };
    let found = |output: &Output| {
        assert_eq!(output.status.code(), Some(0), "{}", stderr(output));
        assert!(stdout(output).contains(&step(1).node_id));
    };
    let not_found_in = |output: &Output, namespace: &str| {
        assert_eq!(output.status.code(), Some(3), "{}", stderr(output));
        assert!(
            stderr(output).contains(&format!("in namespace {namespace} ")),
            "{}",
            stderr(output)
        );
    };

    not_found_in(&get(&[], &[]).await, "default");
    found(&get(&[("HOME", home.to_str().expect("path"))], &[]).await);
    found(&get(&[("KUBECONFIG", &list)], &[]).await);
    let argo_path = argo.to_str().expect("path");
    not_found_in(
        &get(
            &[
                ("KUBECONFIG", argo_path),
                ("ARGO_RESULTS_NAMESPACE", "prod"),
            ],
            &[],
        )
        .await,
        "prod",
    );
    found(&get(&[("ARGO_RESULTS_NAMESPACE", "prod")], &["-n", NS]).await);

    let bad_path = bad.to_str().expect("path");
    for command in [vec!["get", WF], vec!["list"], vec!["watch"]] {
        let mut malformed = admin(&server, &command);
        malformed.env("KUBECONFIG", bad_path);
        let output = run(malformed).await;
        assert_eq!(
            output.status.code(),
            Some(2),
            "{command:?}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains(&format!("cannot read the kubeconfig {bad_path}: ")),
            "{}",
            stderr(&output)
        );
    }
    found(&get(&[("KUBECONFIG", bad_path)], &["-n", NS]).await);

    let mut listed = admin(&server, &["list", "-o", "name"]);
    listed.env("KUBECONFIG", argo_path);
    assert_eq!(stdout(&run(listed).await), format!("workflow/{WF}\n"));
}

/// `command`'s output, checked: its exit code, each of `needles` on stderr, and that it
/// ended at once (each of these mistakes was retried for up to --timeout, 30 s, before).
async fn fails_at_once(command: Command, code: i32, needles: &[&str]) {
    let started = Instant::now();
    let output = run(command).await;
    let took = started.elapsed();
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(code), "{message}");
    for needle in needles {
        assert!(message.contains(needle), "{needle:?} in {message}");
    }
    assert!(!message.contains("retrying"), "{message}");
    assert!(took < Duration::from_secs(5), "{took:?}: {message}");
}

/// The mistakes of someone at a terminal fail at once, say what to do, and exit as
/// `--help` documents: a URL without a scheme, nothing listening, a missing token file,
/// https:// to a plain server.
#[tokio::test]
async fn interactive_commands_fail_at_once_on_mistakes_and_say_what_to_do() {
    let server = TestServer::builder(Backend::Sqlite).start().await;
    let address = server.url().trim_start_matches("http://").to_owned();
    let closed = format!("http://127.0.0.1:{}", free_port());

    let whoami = |more: &[&str]| admin(&server, &[&["whoami"], more].concat());
    fails_at_once(
        whoami(&["--server", &address]),
        2,
        &["has no scheme", &format!("use http://{address} ")],
    )
    .await;
    let commands: [&[&str]; 6] = [
        &["whoami"],
        &["get", WF, "-n", NS],
        &["list", "-n", NS],
        &["list", "-A"],
        &["watch", "-n", NS],
        &["runs", "nightly", "-n", NS],
    ];
    for command in commands {
        let mut refused = admin(&server, command);
        refused.env("ARGO_RESULTS_URL", &closed);
        fails_at_once(
            refused,
            4,
            &["connection refused", &format!("connect to {closed}")],
        )
        .await;
    }
    let token = server.dir.path().join("no-such-token");
    fails_at_once(
        whoami(&["--token-file", token.to_str().expect("path")]),
        2,
        &[
            &format!("the token file {}", token.display()),
            "--token-file",
        ],
    )
    .await;
    fails_at_once(
        whoami(&["--server", &format!("https://{address}")]),
        4,
        &[
            "answered in plain HTTP, not TLS",
            &format!("use http://{address},"),
        ],
    )
    .await;
}

/// TLS mistakes at a terminal: http:// to a TLS server, an untrusted certificate and a CA
/// file that cannot be read each fail at once and say what to use.
#[tokio::test]
async fn tls_mistakes_fail_at_once_and_say_which_scheme_or_ca_to_use() {
    let dir = tempfile::tempdir().expect("scratch directory");
    let (server, ca_file) = tls_server(Backend::Sqlite, dir.path()).await;
    let address = server.url().trim_start_matches("https://").to_owned();
    let whoami = |more: &[&str]| admin(&server, &[&["whoami"], more].concat());

    fails_at_once(
        whoami(&["--server", &format!("http://{address}")]),
        4,
        &["the server speaks TLS", &format!("use https://{address} ")],
    )
    .await;
    fails_at_once(whoami(&[]), 4, &["is not trusted", "--ca-file"]).await;
    let missing = dir.path().join("no-such-ca.crt");
    fails_at_once(
        whoami(&["--ca-file", missing.to_str().expect("path")]),
        2,
        &[&format!("the CA file {}", missing.display())],
    )
    .await;
    let trusted = run(whoami(&["--ca-file", ca_file.to_str().expect("path")])).await;
    assert_eq!(trusted.status.code(), Some(0), "{}", stderr(&trusted));
}

/// `report` still retries whatever may mend (its server may be starting), and says what a
/// TLS mismatch means while it does; a URL without a scheme never mends: refused before
/// anything is sent.
#[tokio::test]
async fn report_refuses_a_url_without_a_scheme_and_explains_a_tls_mismatch_it_retries() {
    let server = TestServer::builder(Backend::Sqlite).start().await;
    let address = server.url().trim_start_matches("http://").to_owned();
    let s = step(1);
    let token = token_file(server.dir.path(), &s);
    let mut schemeless = wait_container(&address, &token, &s);
    schemeless.args(["report", "--final"]);
    fails_at_once(
        schemeless,
        2,
        &[
            "has no scheme",
            "ARGO_RESULTS_URL",
            &format!("use http://{address} "),
        ],
    )
    .await;

    let mut mismatch = wait_container(&format!("https://{address}"), &token, &s);
    mismatch.args(["report", "--final", "--timeout", "3s"]);
    let output = run(mismatch).await;
    assert_eq!(output.status.code(), Some(4), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(message.contains("retrying"), "{message}");
    assert!(message.contains("gave up at the deadline"), "{message}");
    assert!(
        message.contains(&format!(
            "answered in plain HTTP, not TLS: use http://{address},"
        )),
        "{message}"
    );
    assert_eq!(server.count("SELECT COUNT(*) FROM results").await, 0);
}

/// Reads the watch's stdout until `done` says the text read so far is enough.
async fn read_until(
    reader: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    done: impl Fn(&str) -> bool,
) -> String {
    let mut text = String::new();
    while !done(&text) {
        let line = tokio::time::timeout(Duration::from_secs(60), reader.next_line())
            .await
            .expect("output within a minute")
            .expect("read")
            .unwrap_or_else(|| panic!("the watch ended after:\n{text}"));
        text.push_str(&line);
        text.push('\n');
    }
    text
}

/// `watch -o yaml` prints each change as a YAML document, `---` between them as kubectl's
/// watch does; `-n` keeps to one namespace and `-A` adds a NAMESPACE column; a watch whose
/// reader went away (`| head`) ends quietly with 0.
#[tokio::test]
async fn watch_prints_yaml_documents_and_keeps_to_its_namespace() {
    let server = TestServer::builder(Backend::Sqlite).start().await;
    server.register(&step(0)).await;
    register_in(&server, "prod", "prod-wf", "uid-prod").await;
    server.register(&step(1)).await;
    let spawn = |args: &[&str]| {
        let mut command = admin(&server, args);
        command
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = command.spawn().expect("argo-results watch");
        let reader = BufReader::new(child.stdout.take().expect("stdout")).lines();
        (child, reader)
    };

    let (mut yaml, mut reader) = spawn(&["watch", "-n", NS, "-o", "yaml"]);
    // Keys are sorted: `type` ends each document.
    let text = read_until(&mut reader, |text| text.matches("\ntype: ").count() == 2).await;
    yaml.kill().await.expect("kill");
    assert!(text.starts_with("result:\n"), "no separator first:\n{text}");
    assert_eq!(text.lines().filter(|l| *l == "---").count(), 1, "{text}");
    let (first, second) = text.split_once("\n---\n").expect("two documents");
    assert!(
        first.contains(&format!("  nodeId: \"{}\"\n", step(0).node_id)),
        "{text}"
    );
    assert!(
        second.contains(&format!("  nodeId: \"{}\"\n", step(1).node_id)),
        "{text}"
    );
    assert!(
        second.ends_with("revision: 3\ntype: \"upserted\"\n"),
        "{text}"
    );
    assert!(!text.contains("prod"), "{text}");

    let (mut table, mut reader) = spawn(&["watch", "-A"]);
    let text = read_until(&mut reader, |text| text.lines().count() == 4).await;
    table.kill().await.expect("kill");
    let header: Vec<&str> = text
        .lines()
        .next()
        .expect("header")
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "NAMESPACE",
            "REVISION",
            "TYPE",
            "WORKFLOW",
            "NODE",
            "PHASE",
            "STATE"
        ]
    );
    let prod: Vec<&str> = line_of(&text, "prod").split_whitespace().collect();
    assert_eq!(
        prod,
        [
            "prod",
            "2",
            "upserted",
            "prod-wf",
            "prod-wf-1",
            "Pending",
            "expected"
        ]
    );

    // Wide adds the workflow's UID and the pod; --no-headers drops the header line.
    let (mut wide, mut reader) = spawn(&["watch", "-A", "-o", "wide", "--no-headers"]);
    let text = read_until(&mut reader, |text| text.lines().count() == 3).await;
    wide.kill().await.expect("kill");
    assert!(!text.contains("NAMESPACE"), "{text}");
    let prod: Vec<&str> = line_of(&text, "prod").split_whitespace().collect();
    assert_eq!(
        prod[5..],
        ["Pending", "expected", "uid-prod", "prod-wf-main-1"],
        "{text}"
    );

    // -o name: result/NODE of each change, as kubectl's watch -o name.
    let (mut names, mut reader) = spawn(&["watch", "-n", NS, "-o", "name"]);
    let text = read_until(&mut reader, |text| text.lines().count() == 2).await;
    names.kill().await.expect("kill");
    assert_eq!(
        text,
        format!("result/{}\nresult/{}\n", step(0).node_id, step(1).node_id)
    );

    // The reader goes away after the first change; the next change ends the watch.
    let (mut closed, mut reader) = spawn(&["watch", "-n", NS, "-o", "json"]);
    read_until(&mut reader, |text| !text.is_empty()).await;
    drop(reader);
    server.register(&step(2)).await;
    let status = tokio::time::timeout(Duration::from_secs(60), closed.wait())
        .await
        .expect("the watch ended")
        .expect("wait");
    let mut message = String::new();
    if let Some(mut err) = closed.stderr.take() {
        tokio::io::AsyncReadExt::read_to_string(&mut err, &mut message)
            .await
            .expect("stderr");
    }
    assert_eq!(status.code(), Some(0), "{message}");
    assert!(!message.contains("panicked"), "{message}");
}

/// `argo-results --help` says where the namespace comes from and what every exit code
/// means, the empty namespace's too.
#[tokio::test]
async fn the_top_level_help_documents_the_namespace_and_every_exit_code() {
    let mut command = Command::new(binary("argo-results"));
    command.env_clear().arg("--help");
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0));
    let help = stdout(&output);
    let codes = help.split_once("\nExit codes:\n").expect("exit codes").1;
    for code in 0..=4 {
        assert!(
            codes.contains(&format!("\n  {code}  ")) || codes.starts_with(&format!("  {code}  ")),
            "{help}"
        );
    }
    for needle in [
        "No results found in namespace NS.",
        "-n/--namespace, else ARGO_RESULTS_NAMESPACE",
        "current kubeconfig context (KUBECONFIG, else ~/.kube/config), else\ndefault",
        "  list ",
        "-A/--all-namespaces",
        "NAMESPACE/NAME",
        "-o wide|name|json|yaml",
        "--no-headers",
        "--tls-server-name NAME",
        "--insecure-skip-tls-verify",
        "  version ",
        "  completion ",
    ] {
        assert!(help.contains(needle), "{needle:?} in\n{help}");
    }
    // Each command that calls the server takes kubectl's TLS flags and their variables.
    for command in [
        "get", "list", "watch", "runs", "whoami", "version", "report",
    ] {
        let output = run(bare(&[command, "--help"])).await;
        let help = stdout(&output);
        for needle in [
            "--tls-server-name <NAME>",
            "ARGO_RESULTS_TLS_SERVER_NAME",
            "--insecure-skip-tls-verify",
            "ARGO_RESULTS_INSECURE_SKIP_TLS_VERIFY",
        ] {
            assert!(
                help.contains(needle),
                "{needle:?} in {command} --help:\n{help}"
            );
        }
    }
}

/// kubectl's `--tls-server-name` and `--insecure-skip-tls-verify`, against a server dialled
/// by address (as through `kubectl port-forward`) whose certificate names one DNS name.
/// Without the name the certificate is refused at once (exit 4), the message naming the
/// flag; with it (or its variable) the server is trusted, the wait container's `report`
/// too; a name it was not issued for, or no CA, still fails. Skipping verification needs
/// no CA and says once on stderr that the connection is not verified.
#[tokio::test]
async fn tls_server_name_and_insecure_skip_tls_verify_as_kubectl() {
    let dir = tempfile::tempdir().expect("scratch directory");
    let name = "argo-results.argo.svc";
    let (ca, cert, key) = certificate_for(name);
    let (server, ca_file) = serve_tls(Backend::Sqlite, dir.path(), &ca, &cert, &key).await;
    let url = server.url().to_owned();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    let ca_path = ca_file.to_str().expect("path");
    let whoami = |more: &[&str]| admin(&server, &[&["whoami"], more].concat());

    let other_name = format!("the TLS certificate of {url} was issued for another name");
    fails_at_once(
        whoami(&["--ca-file", ca_path]),
        4,
        &[&other_name, "--tls-server-name NAME"],
    )
    .await;
    let named = run(whoami(&["--ca-file", ca_path, "--tls-server-name", name])).await;
    assert_eq!(named.status.code(), Some(0), "{}", stderr(&named));
    assert!(stdout(&named).contains(READER), "{}", stdout(&named));
    assert_eq!(stderr(&named), "");

    let mut by_env = admin(&server, &["list", "-n", NS]);
    by_env
        .env("ARGO_RESULTS_CA_FILE", &ca_file)
        .env("ARGO_RESULTS_TLS_SERVER_NAME", name);
    let listed = run(by_env).await;
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));

    let s = step(1);
    let mut reporting = wait_container(&url, &token_file(dir.path(), &s), &s);
    reporting
        .env("ARGO_RESULTS_CA_FILE", &ca_file)
        .env("ARGO_RESULTS_TLS_SERVER_NAME", name)
        .args(["report", "--final", "--timeout", "30s"]);
    let reported = run(reporting).await;
    assert_eq!(reported.status.code(), Some(0), "{}", stderr(&reported));
    assert_eq!(server.count("SELECT COUNT(*) FROM results").await, 1);

    fails_at_once(
        whoami(&["--ca-file", ca_path, "--tls-server-name", "other.argo.svc"]),
        4,
        &[&other_name],
    )
    .await;
    fails_at_once(
        whoami(&["--tls-server-name", name]),
        4,
        &["is not trusted", "--ca-file"],
    )
    .await;
    let plain = format!("http://{}", server.address());
    fails_at_once(
        whoami(&["--server", &plain, "--tls-server-name", name]),
        2,
        &["--tls-server-name", "https:// server URL only"],
    )
    .await;
    fails_at_once(
        whoami(&["--tls-server-name", "127.0.0.1"]),
        2,
        &["is an IP address"],
    )
    .await;

    let warning = "--insecure-skip-tls-verify: the server's certificate is not verified";
    let insecure = run(whoami(&["--insecure-skip-tls-verify"])).await;
    assert_eq!(insecure.status.code(), Some(0), "{}", stderr(&insecure));
    assert!(stdout(&insecure).contains(READER), "{}", stdout(&insecure));
    assert_eq!(
        stderr(&insecure).matches(warning).count(),
        1,
        "{}",
        stderr(&insecure)
    );
    assert!(
        stderr(&insecure).contains("not secure"),
        "{}",
        stderr(&insecure)
    );
    for (value, code) in [("true", 0), ("false", 4), ("maybe", 2)] {
        let mut by_env = admin(&server, &["get", WF, "-n", NS]);
        by_env.env("ARGO_RESULTS_INSECURE_SKIP_TLS_VERIFY", value);
        let output = run(by_env).await;
        assert_eq!(
            output.status.code(),
            Some(code),
            "{value}: {}",
            stderr(&output)
        );
        assert_eq!(
            stderr(&output).contains(warning),
            code == 0,
            "{}",
            stderr(&output)
        );
    }
}

/// `argo-results` alone, with no environment.
fn bare(args: &[&str]) -> Command {
    let mut command = Command::new(binary("argo-results"));
    command.env_clear().args(args).kill_on_drop(true);
    command
}

/// `completion` prints a script for bash, zsh and fish that names the commands and
/// flags; bash reads its own without a syntax error.
#[tokio::test]
async fn completion_prints_a_script_for_each_shell() {
    let dir = tempfile::tempdir().expect("scratch directory");
    for shell in ["bash", "zsh", "fish"] {
        let output = run(bare(&["completion", shell])).await;
        assert_eq!(
            output.status.code(),
            Some(0),
            "{shell}: {}",
            stderr(&output)
        );
        let script = stdout(&output);
        // Fish names a long flag without its dashes (`-l no-headers`).
        for needle in ["argo-results", "whoami", "tls-server-name", "no-headers"] {
            assert!(script.contains(needle), "{needle} in the {shell} script");
        }
        if shell == "bash" {
            let file = dir.path().join("argo-results.bash");
            std::fs::write(&file, &script).expect("script");
            let checked = run({
                let mut bash = Command::new("bash");
                bash.arg("-n").arg(&file);
                bash
            })
            .await;
            assert!(checked.status.success(), "bash -n: {}", stderr(&checked));
        }
    }
    let unknown = run(bare(&["completion", "tcsh"])).await;
    assert_eq!(unknown.status.code(), Some(2), "{}", stderr(&unknown));
}

/// `version` prints the client's version, then the server's from `GET /version`, which
/// needs no token, as `kubectl version` does; `--client` asks no server; `-o json|yaml`
/// prints both as one object. A server that cannot be reached still gets the client's
/// line, then fails at once with exit 4.
#[tokio::test]
async fn version_prints_the_client_and_the_server() {
    use argo_results_client::proto::PROTOCOL_VERSION;
    let release = env!("CARGO_PKG_VERSION");
    let server = TestServer::builder(Backend::Sqlite).start().await;
    let version = |more: &[&str]| admin(&server, &[&["version"], more].concat());
    let client_line = format!("Client Version: {release}\n");

    // A token file that cannot be read: no token is needed, none is read.
    let missing = server.dir.path().join("no-such-token");
    let both = run(version(&["--token-file", missing.to_str().expect("path")])).await;
    assert_eq!(both.status.code(), Some(0), "{}", stderr(&both));
    assert_eq!(
        stdout(&both),
        format!("{client_line}Server Version: {release} (protocol {PROTOCOL_VERSION})\n")
    );
    assert_eq!(stderr(&both), "");

    let one = serde_json::json!({"version": release, "protocolVersion": PROTOCOL_VERSION});
    let json = run(version(&["-o", "json"])).await;
    assert_eq!(json.status.code(), Some(0), "{}", stderr(&json));
    let object: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(
        object,
        serde_json::json!({"clientVersion": one, "serverVersion": one})
    );
    let yaml = stdout(&run(version(&["-o", "yaml"])).await);
    let document = format!("  protocolVersion: {PROTOCOL_VERSION}\n  version: \"{release}\"\n");
    assert_eq!(
        yaml,
        format!("clientVersion:\n{document}serverVersion:\n{document}")
    );

    let closed = format!("http://127.0.0.1:{}", free_port());
    let mut client_only = version(&["--client"]);
    client_only.env("ARGO_RESULTS_URL", &closed);
    let client_only = run(client_only).await;
    assert_eq!(
        client_only.status.code(),
        Some(0),
        "{}",
        stderr(&client_only)
    );
    assert_eq!(stdout(&client_only), client_line);
    let mut client_json = version(&["--client", "-o", "json"]);
    client_json.env("ARGO_RESULTS_URL", &closed);
    let client_json: serde_json::Value =
        serde_json::from_slice(&run(client_json).await.stdout).expect("JSON");
    assert_eq!(client_json, serde_json::json!({"clientVersion": one}));

    let unreachable = || {
        let mut command = version(&[]);
        command.env("ARGO_RESULTS_URL", &closed);
        command
    };
    fails_at_once(
        unreachable(),
        4,
        &["connection refused", &format!("connect to {closed}")],
    )
    .await;
    assert_eq!(stdout(&run(unreachable()).await), client_line);
    let mut unreachable_json = unreachable();
    unreachable_json.args(["-o", "json"]);
    let unreachable_json = run(unreachable_json).await;
    assert_eq!(unreachable_json.status.code(), Some(4));
    let partial: serde_json::Value =
        serde_json::from_slice(&unreachable_json.stdout).expect("JSON");
    assert_eq!(partial, serde_json::json!({"clientVersion": one}));
}

/// `--no-headers` leaves out the header line of every table, the FIELD/VALUE tables of
/// one object too, as kubectl's; the rows stay aligned among themselves.
#[tokio::test]
async fn no_headers_prints_only_the_rows() {
    let server = TestServer::builder(Backend::Sqlite).start().await;
    server.complete(&step(1), 1).await;
    server.register(&step(2)).await;

    let get = run(admin(&server, &["get", WF, "-n", NS, "--no-headers"])).await;
    assert_eq!(get.status.code(), Some(0), "{}", stderr(&get));
    let text = stdout(&get);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].starts_with(&format!("{}   Error", step(1).node_id)),
        "{text}"
    );
    assert!(!text.contains("NODE"), "{text}");
    let wide = stdout(
        &run(admin(
            &server,
            &["get", WF, "-n", NS, "-o", "wide", "--no-headers"],
        ))
        .await,
    );
    assert_eq!(wide.lines().count(), 2, "{wide}");
    assert!(
        line_of(&wide, &step(2).node_id).contains(&step(2).pod_uid),
        "{wide}"
    );

    let one = stdout(
        &run(admin(
            &server,
            &["get", WF, &step(1).node_id, "-n", NS, "--no-headers"],
        ))
        .await,
    );
    assert!(one.starts_with("node "), "{one}");
    assert!(!one.contains("FIELD"), "{one}");

    let list = stdout(&run(admin(&server, &["list", "-A", "--no-headers"])).await);
    assert_eq!(list.lines().count(), 1, "{list}");
    assert!(list.starts_with(&format!("{NS} ")), "{list}");

    let whoami = stdout(&run(admin(&server, &["whoami", "--no-headers"])).await);
    assert!(whoami.starts_with("subject "), "{whoami}");
    assert!(!whoami.contains("FIELD"), "{whoami}");
}

/// `list -A` over 1,050 workflows in 3 namespaces: two requests (pages of 1,000), no
/// `429`, and no request per workflow or to the feed, within the default answer budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_all_namespaces_over_a_thousand_workflows_takes_two_requests() {
    let server = TestServer::builder(Backend::Sqlite).start().await;
    for i in 0..1050 {
        let namespace = ["argo", "team-a", "team-b"][i % 3];
        register_in(
            &server,
            namespace,
            &format!("wf-{i:04}"),
            &format!("uid-{i:04}"),
        )
        .await;
    }
    let listed = run(admin(&server, &["list", "-A", "-o", "name"])).await;
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    assert_eq!(stdout(&listed).lines().count(), 1050);
    let metrics = server.get("/metrics", None).await.text;
    let requests = |route: &str, status: &str| -> u64 {
        metrics
            .lines()
            .filter(|line| {
                line.starts_with("argo_results_http_requests_total{")
                    && line.contains(&format!("route=\"{route}\""))
                    && line.contains(&format!("status=\"{status}\""))
            })
            .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    };
    println!(
        "list -A over 1050 workflows: {} requests to /api/v1/workflows, {} answered 429",
        requests("/api/v1/workflows", "200"),
        metrics
            .lines()
            .filter(|line| line.contains("status=\"429\""))
            .count()
    );
    assert_eq!(requests("/api/v1/workflows", "200"), 2, "{metrics}");
    assert!(!metrics.contains("status=\"429\""), "{metrics}");
    assert_eq!(requests("/api/v1/results", "200"), 0, "no feed scan");
    let per_workflow = "/api/v1/namespaces/{namespace}/workflows/{workflow}/results";
    assert_eq!(requests(per_workflow, "200"), 0, "no request per workflow");
}
