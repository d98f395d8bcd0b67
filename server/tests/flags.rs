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

/// A zero, a negative and an absurd value, for a duration flag and for a count (or size).
const DURATION: [&str; 3] = ["0s", "-1s", "100000d"];
const COUNT: [&str; 3] = ["0", "-1", "99999999999999"];

/// Every numeric flag, its values, and whether zero is one it takes (a wait or a grace of
/// none, no leeway, no handshake limit); every other zero, as every negative or absurd
/// value, stops the server at start.
const NUMERIC_FLAGS: &[(&str, [&str; 3], bool)] = &[
    ("database-wait", DURATION, true),
    ("header-timeout", DURATION, false),
    ("idle-timeout", DURATION, false),
    ("max-open-connections", COUNT, false),
    ("max-connections-per-peer", COUNT, false),
    ("max-tls-handshakes-per-peer", COUNT, true),
    ("kube-api-qps", COUNT, false),
    ("max-token-lifetime", DURATION, false),
    ("clock-leeway", DURATION, true),
    ("feed-retention", DURATION, false),
    ("result-retention", DURATION, false),
    ("claim-retention", DURATION, false),
    ("retention-every", DURATION, false),
    ("shutdown-grace", DURATION, true),
    ("shutdown-delay", DURATION, true),
    ("max-body-bytes", COUNT, false),
    ("body-timeout", DURATION, false),
    ("max-body-memory", COUNT, false),
    ("max-answer-memory", COUNT, false),
    ("max-result-bytes", COUNT, false),
    ("pod-write-budget", COUNT, false),
    ("max-connections", COUNT, false),
    ("batch-max", COUNT, false),
    ("batch-wait", DURATION, true),
    ("max-in-flight", COUNT, false),
    ("max-watches", COUNT, false),
];

/// The flags of `--help` whose default is a number or a duration.
fn flags_with_numeric_defaults(help: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut flag = None;
    for line in help.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("--")
            && rest.contains(" <")
        {
            flag = rest.split_whitespace().next().map(str::to_owned);
        }
        if let (Some(name), Some(default)) = (&flag, line.split("[default: ").nth(1)) {
            let default = default.trim_end_matches(']');
            let digits = default.trim_end_matches(|c: char| c.is_ascii_alphabetic());
            if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                found.push(name.clone());
            }
            flag = None;
        }
    }
    found
}

/// Zero (where it means nothing), a negative and an absurd value of every numeric flag
/// exit 2 naming the flag, before anything starts; a value a flag takes still starts
/// (`--openapi` then prints the document and exits 0).
#[test]
fn every_numeric_flag_refuses_zero_negative_and_absurd_values() {
    let help = String::from_utf8_lossy(&server(&["--help"]).stdout).into_owned();
    let numeric = flags_with_numeric_defaults(&help);
    assert!(numeric.len() > 15, "{numeric:?}");
    for flag in numeric {
        assert!(
            NUMERIC_FLAGS.iter().any(|(name, _, _)| *name == flag),
            "--{flag} has a numeric default but no row here, so no range is tested"
        );
    }
    for (flag, [zero, negative, absurd], zero_taken) in NUMERIC_FLAGS {
        for (value, taken) in [(zero, *zero_taken), (negative, false), (absurd, false)] {
            let output = server(&[&format!("--{flag}={value}"), "--openapi"]);
            if taken {
                assert_eq!(
                    output.status.code(),
                    Some(0),
                    "--{flag}={value}: {}",
                    stderr(&output)
                );
            } else {
                assert_eq!(output.status.code(), Some(2), "--{flag}={value} was taken");
                assert!(
                    stderr(&output).contains(&format!("--{flag}")),
                    "--{flag}={value}: {}",
                    stderr(&output)
                );
            }
        }
    }
}

/// `--help` is what operators and the README read: a change to a flag's text or place is
/// made on purpose, here and in `help.txt` together (`cargo run -q -p argo-results-server
/// -- --help > server/tests/help.txt`), never by moving code.
#[test]
fn help_is_the_text_in_help_txt() {
    // Without the environment: clap shows a set `ARGO_RESULTS_*` variable's value.
    let output = Command::new(env!("CARGO_BIN_EXE_argo-results-server"))
        .arg("--help")
        .env_clear()
        .output()
        .expect("run argo-results-server");
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    let expected = include_str!("help.txt");
    for (line, (got, want)) in help.lines().zip(expected.lines()).enumerate() {
        assert_eq!(got, want, "--help line {} differs from help.txt", line + 1);
    }
    assert_eq!(
        help.lines().count(),
        expected.lines().count(),
        "--help's length"
    );
}
