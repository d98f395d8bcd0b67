//! Postgres over TLS with the server's certificate checked (`sslmode=verify-full` and
//! `sslrootcert`, as docs/operations.md configures it), against a Postgres that takes TLS
//! connections only, with a certificate authority made here.

use argo_results_tests::fixtures::step;
use argo_results_tests::private_postgres::PrivatePostgres;
use argo_results_tests::server::run_to_exit;
use argo_results_tests::tls::TestCa;
use argo_results_tests::{Auth, Backend, TestServer};

fn url(postgres: &PrivatePostgres, query: &str) -> String {
    format!(
        "postgres://postgres@localhost:{}/postgres?{query}",
        postgres.port()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_with_the_ca_file_connects_and_a_wrong_ca_fails_at_once() {
    let ca = TestCa::new("argo-results test Postgres CA");
    let postgres = PrivatePostgres::start_with_tls(&ca.server_cert());
    let dir = tempfile::tempdir().expect("scratch directory");
    let ca_file = dir.path().join("ca.crt");
    std::fs::write(&ca_file, ca.pem()).expect("write CA");
    let verified = url(
        &postgres,
        &format!("sslmode=verify-full&sslrootcert={}", ca_file.display()),
    );
    let server = TestServer::builder(Backend::Postgres)
        .database_url(&verified)
        .auth(Auth::None)
        .start()
        .await;
    let stored = server.complete(&step(1), 1).await;
    assert_eq!(stored.status, 201, "stored over a verified TLS connection");
    drop(server);

    let run = |database_url: &str| {
        let args = ["--auth", "none", "--database-wait", "30s"];
        let (out, stderr) = run_to_exit(&[&args[..], &["--database-url", database_url]].concat());
        println!("{stderr}");
        (out.status.code(), stderr)
    };
    // Another authority's certificate: refused at once, not waited on for 30 s.
    let other = dir.path().join("other-ca.crt");
    std::fs::write(&other, TestCa::new("another CA").pem()).expect("write CA");
    let started = std::time::Instant::now();
    let (code, stderr) = run(&url(
        &postgres,
        &format!("sslmode=verify-full&sslrootcert={}", other.display()),
    ));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("certificate"), "{stderr}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "failed at once"
    );
    // This Postgres takes no plain connection: TLS above was real.
    let (code, stderr) = run(&url(&postgres, "sslmode=disable"));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("no encryption"), "{stderr}");
}
