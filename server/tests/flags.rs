//! The server's command line: the flags of docs/api.md section 9 and the start-up refusals that
//! keep it from ever serving a network without authentication.

use std::process::{Command, Output};

fn server(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_argo-results-server"))
        .args(args)
        .env_remove("DATABASE_URL")
        .current_dir(std::env::temp_dir())
        .output()
        .expect("run argo-results-server")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn help_documents_the_contract_flags_and_defaults() {
    let output = server(&["--help"]);
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    for flag in [
        "--database-url",
        "--listen",
        "--jwks-file",
        "--issuer",
        "--audience",
        "--reader",
        "--controller",
        "--auth",
        "--max-body-bytes",
        "--claim-retention",
        "DATABASE_URL",
        "ARGO_RESULTS_LISTEN",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}");
    }
    assert!(help.contains("[default: 127.0.0.1:8080]"));
    assert!(help.contains("[default: argo-results]"));
    assert!(
        help.contains("[default: 30d]"),
        "the contract's claim retention"
    );
}

#[test]
fn auth_none_is_refused_off_loopback() {
    let output = server(&["--auth", "none", "--listen", "0.0.0.0:0"]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("loopback"), "{}", stderr(&output));
}

#[test]
fn a_network_listener_needs_token_validation() {
    let output = server(&["--listen", "0.0.0.0:0"]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("--jwks-file"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn symmetric_keys_are_refused() {
    let jwks = std::env::temp_dir().join(format!("oct-{}.json", std::process::id()));
    std::fs::write(
        &jwks,
        r#"{"keys":[{"kty":"oct","kid":"k","k":"c2VjcmV0"}]}"#,
    )
    .expect("write");
    let output = server(&[
        "--listen",
        "127.0.0.1:0",
        "--jwks-file",
        jwks.to_str().expect("path"),
        "--any-issuer",
    ]);
    let _ = std::fs::remove_file(&jwks);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("symmetric"), "{}", stderr(&output));
}
