//! docs/api.md section 9: the embedded default and its dev auth, and `--auth none`.

use argo_results_tests::fixtures::{NS, WF, outputs, step};
use argo_results_tests::server::binary;
use argo_results_tests::{Auth, Backend, TestServer};

/// The server started with no flags at all (only the port, through its environment
/// variable, so tests never collide on 8080).
async fn embedded_default() -> TestServer {
    TestServer::builder(Backend::Sqlite)
        .bare()
        .env("ARGO_RESULTS_LISTEN", "127.0.0.1:0")
        .start()
        .await
}

/// The value after `prefix` on a line of the server's banner.
fn banner_line(server: &TestServer, prefix: &str) -> String {
    server
        .stdout()
        .lines()
        .find_map(|line| line.trim().strip_prefix(prefix).map(str::to_owned))
        .unwrap_or_else(|| panic!("no {prefix:?} in:\n{}", server.stdout()))
}

#[tokio::test]
async fn the_embedded_default_serves_sqlite_with_dev_auth() {
    let server = embedded_default().await;
    assert_eq!(server.get("/healthz", None).await.status, 200);
    assert!(server.dir.path().join("argo-results.db").exists());
    assert!(server.dir.path().join("argo-results-dev-key.pem").exists());

    let refused = server.get("/api/v1/whoami", None).await;
    assert_eq!(
        (refused.status, refused.json["code"].as_str()),
        (401, Some("unauthenticated"))
    );

    // The printed curl line works as printed.
    let curl = banner_line(&server, "curl ");
    let output = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("curl -sS -f {curl}"))
        .output()
        .expect("curl");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let whoami: serde_json::Value = serde_json::from_slice(&output.stdout).expect("whoami JSON");
    assert_eq!(whoami["roles"], serde_json::json!(["reader", "controller"]));

    // The printed mint line works as printed too: it names the CLI built beside the server.
    let mint = server
        .stdout()
        .lines()
        .find(|line| line.contains(" token --key "))
        .map(str::trim)
        .unwrap_or_else(|| panic!("a mint line in:\n{}", server.stdout()))
        .to_owned();
    assert!(
        mint.starts_with(&binary("argo-results").display().to_string()),
        "{mint}"
    );
    let printed = std::process::Command::new("sh")
        .arg("-c")
        .arg(&mint)
        .current_dir(server.dir.path())
        .output()
        .expect("the mint line");
    assert!(
        printed.status.success(),
        "{mint}: {}",
        String::from_utf8_lossy(&printed.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&printed.stdout).split('.').count(),
        3,
        "a JWT"
    );

    // A pod token from `argo-results token` plays the wait container.
    let token = banner_line(&server, "export ARGO_RESULTS_TOKEN=");
    let s = step(1);
    let minted = std::process::Command::new(binary("argo-results"))
        .current_dir(server.dir.path())
        .args([
            "token",
            "--namespace",
            NS,
            "--pod-name",
            &s.pod_name,
            "--pod-uid",
            &s.pod_uid,
        ])
        .output()
        .expect("argo-results token");
    assert!(
        minted.status.success(),
        "{}",
        String::from_utf8_lossy(&minted.stderr)
    );
    let pod_token = String::from_utf8(minted.stdout)
        .expect("token")
        .trim()
        .to_owned();
    let pod = server.client(Some(pod_token));
    let stored = pod
        .report(
            NS,
            WF,
            &s.node_id,
            &s.report(Some(1), true, Some(&outputs(1))),
        )
        .await
        .expect("report");
    assert_eq!(stored.status, 201);
    let read = server
        .client(Some(token))
        .get_result(NS, WF, &s.node_id, None)
        .await
        .expect("read");
    assert_eq!(read.outputs.map(|o| o.get().to_owned()), Some(outputs(1)));
}

#[tokio::test]
async fn the_dev_key_survives_a_restart() {
    let first = embedded_default().await;
    let token = banner_line(&first, "export ARGO_RESULTS_TOKEN=");
    let second = first.crash_and_restart().await;
    assert_eq!(second.get("/api/v1/whoami", Some(&token)).await.status, 200);
}

#[tokio::test]
async fn auth_none_on_loopback_allows_everything_and_says_so() {
    let server = TestServer::builder(Backend::Sqlite)
        .auth(Auth::None)
        .start()
        .await;
    let whoami = server.get("/api/v1/whoami", None).await;
    assert_eq!(whoami.status, 200);
    assert_eq!(
        whoami.json["roles"],
        serde_json::json!(["reader", "controller"])
    );
    let s = step(1);
    let stored = server
        .client(None)
        .report(
            NS,
            WF,
            &s.node_id,
            &s.report(Some(1), true, Some(&outputs(1))),
        )
        .await
        .expect("report");
    assert_eq!(stored.status, 201);
    assert!(
        server.log().contains("AUTHENTICATION IS OFF"),
        "{}",
        server.log()
    );
}
