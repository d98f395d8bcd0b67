//! `argo-results token`: pod tokens from the dev key, verifiable with its public key.

use std::process::{Command, Output};

use argo_results_proto::token::{TokenClaims, es256_public_jwk, generate_es256_key};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};

fn token(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_argo-results"))
        .arg("token")
        .args(args)
        .env_remove("ARGO_RESULTS_DEV_KEY")
        .output()
        .expect("run argo-results")
}

#[test]
fn mints_a_pod_token_signed_by_the_dev_key() {
    let key = std::env::temp_dir().join(format!("dev-key-{}.pem", std::process::id()));
    let pem = generate_es256_key().expect("key");
    std::fs::write(&key, &pem).expect("write key");
    let output = token(&[
        "--key",
        key.to_str().expect("path"),
        "--namespace",
        "argo",
        "--pod-name",
        "wf-main-123",
        "--pod-uid",
        "uid-1",
        "--ttl",
        "10m",
    ]);
    let _ = std::fs::remove_file(&key);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let minted = String::from_utf8(output.stdout).expect("utf-8");

    let jwk = es256_public_jwk(pem.as_bytes(), "k").expect("jwk");
    let mut validation = Validation::new(Algorithm::ES256);
    validation.set_audience(&["argo-results"]);
    let claims = jsonwebtoken::decode::<TokenClaims>(
        minted.trim(),
        &DecodingKey::from_jwk(&jwk).expect("key"),
        &validation,
    )
    .expect("a valid token")
    .claims;
    assert_eq!(claims.sub, "system:serviceaccount:argo:default");
    assert_eq!(claims.exp - claims.iat, 600);
    let pod = claims.kubernetes.and_then(|k| k.pod).expect("pod claim");
    assert_eq!(
        (pod.name.as_str(), pod.uid.as_str()),
        ("wf-main-123", "uid-1")
    );
}

/// A dev key that cannot be read is a file error like any other: exit 2, the file named.
#[test]
fn a_missing_key_says_how_to_get_one() {
    let output = token(&["--key", "/nonexistent/key.pem", "--subject", "me"]);
    assert_eq!(output.status.code(), Some(2));
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(message.contains("/nonexistent/key.pem"), "{message}");
    assert!(message.contains("start argo-results-server"), "{message}");
}

#[test]
fn incomplete_pod_identity_is_a_usage_error() {
    let output = token(&["--pod-name", "wf-main-123"]);
    assert_eq!(output.status.code(), Some(2));
}
