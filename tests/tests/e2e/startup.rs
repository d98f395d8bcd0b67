//! Start-up, as an operator meets it: a database that comes up after the server, one that
//! never comes, migrations that fail, a URL or file that is wrong. Probes answer while the
//! store opens, every attempt is logged with the host and port and never the password,
//! and each failure ends with its own exit status (listed in `--help`).

use std::time::Duration;

use argo_results_tests::fixtures::{NS, WF, outputs, step};
use argo_results_tests::private_postgres::PrivatePostgres;
use argo_results_tests::server::{Db, free_port, run_to_exit};
use argo_results_tests::{Auth, Backend, TestServer, eventually};

const PASSWORD: &str = "s3cret-pw";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_started_before_its_database_waits_and_then_serves() {
    let postgres = PrivatePostgres::start();
    postgres.stop();
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    // A password in the URL: trust auth ignores it, the log must never show it.
    let url = postgres
        .url()
        .replace("postgres@", &format!("postgres:{PASSWORD}@"));
    let starting = tokio::spawn(
        TestServer::builder(Backend::Postgres)
            .database_url(&url)
            .auth(Auth::None)
            .env("RUST_LOG", "info")
            .flags(&["--listen", &listen])
            .start(),
    );
    let base = format!("http://{listen}");
    let client = reqwest::Client::new();
    let status = async |path: &str| {
        let response = client.get(format!("{base}{path}")).send().await.ok()?;
        Some(response.status().as_u16())
    };
    let what = "the probes answer while the database is down";
    eventually(what, Duration::from_secs(30), async || {
        (status("/healthz").await == Some(200)).then_some(())
    })
    .await;
    assert_eq!(
        status("/readyz").await,
        Some(503),
        "not ready while starting"
    );
    let s = step(1);
    let report = client
        .put(format!(
            "{base}/api/v1/namespaces/{NS}/workflows/{WF}/nodes/{}/result",
            s.node_id
        ))
        .json(&s.report(Some(1), true, Some(&outputs(1))))
        .send()
        .await
        .expect("a report while starting");
    assert_eq!(
        report.status().as_u16(),
        503,
        "a report is told to come back"
    );
    assert!(report.headers().contains_key("retry-after"));
    let problem: serde_json::Value = report.json().await.expect("problem+json");
    assert_eq!(problem["code"], "unavailable", "{problem}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!starting.is_finished(), "the server waits for its database");

    postgres.resume();
    let server = starting
        .await
        .expect("the server starts once Postgres is up");
    server.wait_ready().await;
    assert_eq!(
        server
            .client(None)
            .report(
                NS,
                WF,
                &s.node_id,
                &s.report(Some(1), true, Some(&outputs(1)))
            )
            .await
            .expect("report")
            .status,
        201
    );
    let log = server.log();
    println!("{log}");
    let target = format!(
        "127.0.0.1:{}",
        postgres
            .url()
            .split(':')
            .nth(2)
            .and_then(|p| p.split('/').next())
            .expect("port")
    );
    let waits = log
        .lines()
        .filter(|line| line.contains("waiting for the database"))
        .collect::<Vec<_>>();
    assert!(waits.len() >= 2, "each attempt is logged:\n{log}");
    assert!(waits.iter().all(|line| line.contains(&target)), "{log}");
    assert!(log.contains("the database is up"), "{log}");
    assert!(
        !log.contains(PASSWORD),
        "the password is never logged:\n{log}"
    );
}

#[test]
fn a_database_that_never_comes_ends_the_server_with_exit_3() {
    let port = free_port();
    let url = format!("postgres://u:{PASSWORD}@127.0.0.1:{port}/db");
    let (out, stderr) = run_to_exit(&[
        "--auth",
        "none",
        "--database-url",
        &url,
        "--database-wait",
        "2s",
    ]);
    println!("{stderr}");
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "the database at 127.0.0.1:{port}/db did not take a connection within 2s (--database-wait)"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("waiting for the database"), "{stderr}");
    assert!(!stderr.contains(PASSWORD), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_that_fail_end_the_server_with_exit_4() {
    let mut server = TestServer::builder(Backend::Postgres).start().await;
    // The first migration's recorded checksum no longer matches the binary's.
    let Db::Postgres(pool) = server.db().await else {
        unreachable!("a Postgres server")
    };
    sqlx::query(
        "UPDATE _sqlx_migrations SET checksum = '\\x00'::bytea \
         WHERE version = (SELECT min(version) FROM _sqlx_migrations)",
    )
    .execute(&pool)
    .await
    .expect("alter the recorded checksum");
    pool.close().await;
    server.terminate().await;
    let (out, stderr) = run_to_exit(&["--auth", "none", "--database-url", server.database_url()]);
    println!("{stderr}");
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("migrations: "), "{stderr}");
}

#[test]
fn a_url_of_no_known_scheme_is_refused_without_its_password() {
    let (out, stderr) = run_to_exit(&[
        "--auth",
        "none",
        "--database-url",
        &format!("postgresx://u:{PASSWORD}@h/db"),
    ]);
    println!("{stderr}");
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("unsupported database URL \"postgresx://u:***@h/db\""),
        "{stderr}"
    );
    assert!(!stderr.contains(PASSWORD), "{stderr}");
}

#[test]
fn a_sqlite_file_that_cannot_be_created_is_named() {
    let dir = tempfile::tempdir().expect("scratch directory");
    let not_a_dir = dir.path().join("a-file");
    std::fs::write(&not_a_dir, "").expect("write");
    let path = not_a_dir.join("results.db");
    let (out, stderr) = run_to_exit(&[
        "--auth",
        "none",
        "--database-url",
        &format!("sqlite://{}", path.display()),
    ]);
    println!("{stderr}");
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("SQLite file {}: ", path.display())),
        "{stderr}"
    );
}

#[test]
fn help_lists_the_exit_codes() {
    let (out, _) = run_to_exit(&["--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    for line in [
        "Exit status:",
        "3  the database did not take a connection within --database-wait",
        "4  the database's migrations failed",
    ] {
        assert!(help.contains(line), "{line} in:\n{help}");
    }
}

#[test]
fn a_jwks_file_that_does_not_parse_is_named() {
    let dir = tempfile::tempdir().expect("scratch directory");
    let jwks = dir.path().join("jwks.json");
    std::fs::write(&jwks, "{}").expect("write");
    let jwks_file = jwks.to_str().expect("a UTF-8 path");
    let (out, stderr) = run_to_exit(&["--any-issuer", "--jwks-file", jwks_file]);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "--jwks-file {}: not a JWKS document",
            jwks.display()
        )),
        "{stderr}"
    );
}

/// While the store opens, the listeners keep their limits: a client without a token that
/// opens many silent connections has them closed (3 s of silence), and the probes still
/// answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_while_the_store_opens_keep_the_listeners_limits() {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let unreachable = format!("postgres://u@127.0.0.1:{}/db", free_port());
    let starting = tokio::spawn(
        TestServer::builder(Backend::Postgres)
            .database_url(&unreachable)
            .auth(Auth::None)
            .flags(&[
                "--listen",
                &listen,
                "--database-wait",
                "60s",
                "--max-open-connections",
                "64",
            ])
            .start(),
    );
    let base = format!("http://{listen}");
    let healthz = async || {
        let answer = reqwest::get(format!("{base}/healthz")).await.ok()?;
        (answer.status() == 200).then_some(())
    };
    eventually(
        "the probes answer while the store opens",
        Duration::from_secs(30),
        healthz,
    )
    .await;
    let silent: Vec<std::net::TcpStream> = (0..200)
        .map(|_| std::net::TcpStream::connect(&listen).expect("connect"))
        .collect();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let still_open = silent
        .iter()
        .filter(|socket| {
            socket.set_nonblocking(true).expect("nonblocking");
            let mut byte = [0u8; 1];
            match std::io::Read::read(&mut &**socket, &mut byte) {
                Ok(0) => false,
                Err(error) => error.kind() == std::io::ErrorKind::WouldBlock,
                Ok(_) => true,
            }
        })
        .count();
    println!("200 silent connections while the store opens: {still_open} open after 5 s");
    assert_eq!(
        still_open, 0,
        "silent connections are closed while starting too"
    );
    assert!(healthz().await.is_some(), "the probes still answer");
    starting.abort();
}

/// Every session the server opens on Postgres names it and its pod in
/// `pg_stat_activity` (`application_name`), as Kubernetes gives the pod's name in
/// `HOSTNAME`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sessions_name_the_server_and_its_pod() {
    let pod = format!("argo-results-7c9d5-{}", std::process::id());
    let server = TestServer::builder(Backend::Postgres)
        .env("HOSTNAME", &pod)
        .start()
        .await;
    let sessions = server
        .count(&format!(
            "SELECT COUNT(*) FROM pg_stat_activity \
             WHERE application_name = 'argo-results-server/{pod}'"
        ))
        .await;
    assert!(
        sessions >= 1,
        "no session of the server is named for its pod"
    );
}

/// `--listen [::]:PORT` serves IPv6 and, as Linux binds by default
/// (`net.ipv6.bindv6only=0`), IPv4: the address for a dual-stack cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ipv6_any_address_serves_both_families() {
    let server = TestServer::builder(Backend::Sqlite)
        .flags(&["--listen", "[::]:0"])
        .start()
        .await;
    let port = server
        .address()
        .rsplit(':')
        .next()
        .expect("port")
        .to_owned();
    for host in ["127.0.0.1", "[::1]"] {
        let answer = reqwest::get(format!("http://{host}:{port}/healthz"))
            .await
            .unwrap_or_else(|e| panic!("{host}: {e}"));
        assert_eq!(answer.status(), 200, "{host}");
    }
}
