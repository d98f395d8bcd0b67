//! The security issue's attack suite, against the real binary in each way it can verify
//! tokens (`--jwks-file`, `--kube-jwks`, `--token-review`), plus a failing key endpoint,
//! caching and TLS. The cluster's own tokens, key rotation, TokenReview's refusals,
//! unbound executor tokens and `--rbac`'s decisions run against the real API server in
//! `cluster.rs`; the cases here that use the fake one say why in `cluster.rs`'s header.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use argo_results_client::proto::token::{
    Audience, TokenClaims, es256_public_jwk, generate_es256_key,
};
use argo_results_client::proto::{ProblemCode, ReportRequest};
use argo_results_tests::fake_kube::FakeKube;
use argo_results_tests::fixtures::{NS, WF, outputs, step};
use argo_results_tests::server::Raw;
use argo_results_tests::tls::TestCa;
use argo_results_tests::tokens::{self, AUDIENCE, CONTROLLER, READER};
use argo_results_tests::{Auth, Backend, TestServer, eventually};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::Method;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    JwksFile,
    KubeJwks,
    TokenReview,
}

on_both_backends!(attacks_fail_on_each_backend);

async fn start(mode: Mode, flags: &[&str]) -> (Option<FakeKube>, TestServer) {
    start_on(Backend::Sqlite, mode, flags).await
}

async fn start_on(backend: Backend, mode: Mode, flags: &[&str]) -> (Option<FakeKube>, TestServer) {
    match mode {
        Mode::JwksFile => (
            None,
            TestServer::builder(backend).flags(flags).start().await,
        ),
        Mode::KubeJwks | Mode::TokenReview => {
            let kube = FakeKube::start().await;
            let mode_flag = if mode == Mode::KubeJwks {
                "--kube-jwks"
            } else {
                "--token-review"
            };
            let all: Vec<&str> = [mode_flag]
                .into_iter()
                .chain(flags.iter().copied())
                .collect();
            let server = TestServer::builder(backend)
                .auth(Auth::Kube(&kube.kubeconfig))
                .flags(&all)
                .start()
                .await;
            server.wait_ready().await;
            (Some(kube), server)
        }
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

/// `claims` signed with a key nobody trusts, named `kid`.
fn sign_with_stranger(kid: &str, claims: &impl serde::Serialize) -> String {
    let pem = generate_es256_key().expect("key");
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(kid.into());
    jsonwebtoken::encode(
        &header,
        claims,
        &EncodingKey::from_ec_pem(pem.as_bytes()).expect("key"),
    )
    .expect("sign")
}

fn segment(value: &serde_json::Value) -> String {
    URL_SAFE_NO_PAD.encode(value.to_string())
}

/// Where an attack is aimed.
#[derive(Debug, Clone)]
enum Target {
    /// Step 1's pod reports its own node.
    Report,
    /// Step 1's pod body, sent to step 2's node.
    OtherNode,
    /// A report of step 1 whose body names another pod UID.
    OtherPodUid,
    /// Step 1's report, in namespace team-b.
    OtherNamespace,
    Read,
    Expect,
    Whoami,
    /// A v1 pod writing the node of the same name in another workflow.
    ForeignWorkflow,
    /// Step 1's report under a workflow UID the pod made up.
    InventedIncarnation,
    /// A pod whose name has the shape of step 1's pod (`<workflow>-<any>-<hash>`).
    Impostor,
    /// Step 1's report with a NUL in its message.
    Nul,
    /// Step 1's report with a key twice inside its outputs.
    DuplicateKey,
}

struct Attack {
    name: &'static str,
    authorization: String,
    target: Target,
    status: u16,
    code: &'static str,
}

fn bearer(token: impl AsRef<str>) -> String {
    format!("Bearer {}", token.as_ref())
}

fn attacks() -> Vec<Attack> {
    let s = step(1);
    let pod = || tokens::pod_claims(NS, &s.pod_name, &s.pod_uid);
    let signed = |claims: &TokenClaims| bearer(tokens::sign(&tokens::es256(), claims));
    let t = now();
    let valid = tokens::pod_token(NS, &s.pod_name, &s.pod_uid);
    let tampered = {
        let parts: Vec<&str> = valid.split('.').collect();
        let mut claims = serde_json::to_value(pod()).expect("json");
        claims["kubernetes.io"]["pod"]["uid"] = "someone-else".into();
        format!("{}.{}.{}", parts[0], segment(&claims), parts[2])
    };
    let unsigned = format!(
        "{}.{}.",
        segment(&serde_json::json!({"alg": "none", "typ": "JWT"})),
        segment(&serde_json::to_value(pod()).expect("json"))
    );
    let hs256 = {
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(tokens::RSA_KID.into());
        let secret = EncodingKey::from_secret(tokens::keys().jwks.as_bytes()).expect("secret");
        jsonwebtoken::encode(&header, &pod(), &secret).expect("sign")
    };
    let without = |claim: &str| {
        let mut claims = serde_json::to_value(pod()).expect("json");
        claims.as_object_mut().expect("object").remove(claim);
        bearer(tokens::sign(&tokens::es256(), &claims))
    };
    let mut es256_naming_rsa = tokens::es256();
    es256_naming_rsa.kid = Some(tokens::RSA_KID.into());
    let unbound = tokens::user_token(&format!("system:serviceaccount:{NS}:workflow-executor"));
    let impostor = impostor_name();
    let attack = |name, authorization, target, status| Attack {
        name,
        authorization,
        target,
        status,
        code: match status {
            401 => "unauthenticated",
            403 => "forbidden",
            409 => "not_expected",
            422 => "invalid_field",
            400 => "invalid_json",
            _ => "",
        },
    };
    vec![
        attack(
            "valid pod token (control)",
            bearer(&valid),
            Target::Report,
            200,
        ),
        attack(
            "a v1 pod writing its node's namesake in another workflow",
            bearer(tokens::pod_token(NS, &s.node_id, &s.pod_uid)),
            Target::ForeignWorkflow,
            403,
        ),
        attack(
            "an invented workflow incarnation",
            bearer(&valid),
            Target::InventedIncarnation,
            409,
        ),
        attack(
            "a pod whose name has the node's shape",
            bearer(tokens::pod_token(NS, &impostor, "impostor-uid")),
            Target::Impostor,
            409,
        ),
        attack("NUL in the message", bearer(&valid), Target::Nul, 422),
        attack(
            "a key twice inside outputs",
            bearer(&valid),
            Target::DuplicateKey,
            400,
        ),
        attack(
            "expired",
            signed(&TokenClaims {
                exp: t - 120,
                iat: t - 720,
                nbf: None,
                ..pod()
            }),
            Target::Report,
            401,
        ),
        attack(
            "not yet valid",
            signed(&TokenClaims {
                nbf: Some(t + 120),
                ..pod()
            }),
            Target::Report,
            401,
        ),
        attack(
            "wrong audience",
            signed(&TokenClaims {
                aud: Audience::One("kubernetes".into()),
                ..pod()
            }),
            Target::Report,
            401,
        ),
        attack(
            "wrong issuer",
            signed(&TokenClaims {
                iss: "https://evil.example".into(),
                ..pod()
            }),
            Target::Report,
            401,
        ),
        attack("alg none", bearer(unsigned), Target::Report, 401),
        attack(
            "HS256 with the RSA public key as secret",
            bearer(hs256),
            Target::Report,
            401,
        ),
        attack(
            "unknown key",
            bearer(sign_with_stranger("never-seen", &pod())),
            Target::Report,
            401,
        ),
        attack(
            "foreign key with a known kid",
            bearer(sign_with_stranger(tokens::EC_KID, &pod())),
            Target::Report,
            401,
        ),
        attack(
            "ES256 header naming the RSA key",
            bearer(tokens::sign(&es256_naming_rsa, &pod())),
            Target::Report,
            401,
        ),
        attack("tampered payload", bearer(tampered), Target::Report, 401),
        attack("garbage", bearer("garbage"), Target::Report, 401),
        attack(
            "three garbage segments",
            bearer("a.b.c"),
            Target::Whoami,
            401,
        ),
        attack(
            "64 KiB token",
            bearer("a".repeat(64 * 1024)),
            Target::Whoami,
            401,
        ),
        attack(
            "Basic auth",
            "Basic YWRtaW46c2VjcmV0".into(),
            Target::Whoami,
            401,
        ),
        attack("empty bearer", "Bearer ".into(), Target::Whoami, 401),
        attack("no exp", without("exp"), Target::Report, 401),
        attack("no iat", without("iat"), Target::Report, 401),
        attack("no aud", without("aud"), Target::Report, 401),
        attack("no sub", without("sub"), Target::Report, 401),
        attack(
            "sub disagreeing with the namespace claim",
            signed(&TokenClaims {
                sub: "system:serviceaccount:kube-system:default".into(),
                ..pod()
            }),
            Target::Report,
            401,
        ),
        attack(
            "token without a pod claim",
            bearer(&unbound),
            Target::Report,
            403,
        ),
        attack(
            "another namespace",
            bearer(tokens::pod_token("team-b", &s.pod_name, &s.pod_uid)),
            Target::OtherNamespace,
            403,
        ),
        attack("another node's pod", bearer(&valid), Target::OtherNode, 403),
        attack(
            "pod UID not the body's",
            bearer(&valid),
            Target::OtherPodUid,
            403,
        ),
        attack("a pod reading", bearer(&valid), Target::Read, 403),
        attack(
            "a reader writing an expectation",
            bearer(tokens::user_token(READER)),
            Target::Expect,
            403,
        ),
        attack(
            "a reader reporting",
            bearer(tokens::user_token(READER)),
            Target::Report,
            403,
        ),
        attack(
            "the controller reporting",
            bearer(tokens::user_token(CONTROLLER)),
            Target::Report,
            403,
        ),
        attack(
            "reader (control)",
            bearer(tokens::user_token(READER)),
            Target::Read,
            404,
        ),
        attack(
            "controller (control)",
            bearer(tokens::user_token(CONTROLLER)),
            Target::Expect,
            201,
        ),
    ]
}

/// A name of the shape of step 1's v2 pod, with another template.
fn impostor_name() -> String {
    let s = step(1);
    let hash = s.node_id.rsplit('-').next().expect("hash");
    format!("{WF}-anything-{hash}")
}

async fn send(server: &TestServer, authorization: &str, target: &Target) -> Raw {
    let s = step(1);
    let report = |body: ReportRequest| serde_json::to_string(&body).expect("json");
    let own_node = format!(
        "/api/v1/namespaces/{NS}/workflows/{WF}/nodes/{}/result",
        s.node_id
    );
    let (method, path, body) = match target {
        Target::ForeignWorkflow => (
            Method::PUT,
            format!(
                "/api/v1/namespaces/{NS}/workflows/victim/nodes/{}/result",
                s.node_id
            ),
            report(ReportRequest {
                pod_name: s.node_id.clone(),
                ..s.report(Some(1), true, None)
            }),
        ),
        Target::InventedIncarnation => (
            Method::PUT,
            own_node,
            report(ReportRequest {
                workflow_uid: "invented-incarnation".into(),
                ..s.report(Some(1), true, None)
            }),
        ),
        Target::Impostor => (
            Method::PUT,
            own_node,
            report(ReportRequest {
                pod_name: impostor_name(),
                pod_uid: "impostor-uid".into(),
                ..s.report(Some(1), true, Some(&outputs(1)))
            }),
        ),
        Target::Nul => (
            Method::PUT,
            own_node,
            report(ReportRequest {
                message: Some("done\u{0}".into()),
                ..s.report(Some(2), false, None)
            }),
        ),
        Target::DuplicateKey => {
            let body = report(s.report(Some(2), false, Some(r#"{"result":"a"}"#)));
            (
                Method::PUT,
                own_node,
                body.replace(r#""result":"a""#, r#""result":"a","result":"b""#),
            )
        }
        Target::Report => (
            Method::PUT,
            format!(
                "/api/v1/namespaces/{NS}/workflows/{WF}/nodes/{}/result",
                s.node_id
            ),
            report(s.report(Some(1), true, Some(&outputs(1)))),
        ),
        Target::OtherNode => (
            Method::PUT,
            format!(
                "/api/v1/namespaces/{NS}/workflows/{WF}/nodes/{}/result",
                step(2).node_id
            ),
            report(s.report(Some(1), true, None)),
        ),
        Target::OtherPodUid => (
            Method::PUT,
            format!(
                "/api/v1/namespaces/{NS}/workflows/{WF}/nodes/{}/result",
                s.node_id
            ),
            report(ReportRequest {
                pod_uid: "someone-else".into(),
                ..s.report(Some(1), true, None)
            }),
        ),
        Target::OtherNamespace => (
            Method::PUT,
            format!(
                "/api/v1/namespaces/{NS}/workflows/{WF}/nodes/{}/result",
                s.node_id
            ),
            report(s.report(Some(1), true, None)),
        ),
        Target::Read => (
            Method::GET,
            format!(
                "/api/v1/namespaces/{NS}/workflows/{WF}/nodes/{}/result",
                step(3).node_id
            ),
            String::new(),
        ),
        Target::Expect => (
            Method::PUT,
            format!(
                "/api/v1/namespaces/{NS}/workflows/{WF}/nodes/{}/expectation",
                step(4).node_id
            ),
            serde_json::to_string(&step(4).expectation()).expect("json"),
        ),
        Target::Whoami => (Method::GET, "/api/v1/whoami".into(), String::new()),
    };
    let request = reqwest::Client::new()
        .request(method, format!("{}{path}", server.url()))
        .header("authorization", authorization)
        .header("content-type", "application/json")
        .body(body);
    Raw::read(request.send().await.expect("send")).await
}

async fn attack_suite(backend: Backend, mode: Mode) {
    let (_kube, server) = start_on(backend, mode, &["--require-expectation"]).await;
    let s = step(1);
    server.register(&s).await;
    // One pod trying to create many rows: one made-up incarnation after another.
    for i in 0..20 {
        let invented = ReportRequest {
            workflow_uid: format!("invented-{i}"),
            ..s.report(Some(1), true, None)
        };
        let error = server.send(&s, &invented).await.expect_err("refused");
        assert_eq!(error.code(), Some(ProblemCode::NotExpected), "{error}");
    }
    let mut wrong = Vec::new();
    for attack in attacks() {
        let answer = send(&server, &attack.authorization, &attack.target).await;
        let code_ok = (attack.code.is_empty() || answer.json["code"] == attack.code)
            && (attack.status != 401 || answer.headers.contains_key("www-authenticate"));
        if answer.status != attack.status || !code_ok {
            wrong.push(format!(
                "{}: expected {}, got {} {}",
                attack.name, attack.status, answer.status, answer.text
            ));
        }
    }
    assert!(wrong.is_empty(), "{mode:?}:\n{}", wrong.join("\n"));
    // Only the controls wrote: the expectation and the report of step 1, and the
    // controller's expectation of step 4.
    assert_eq!(server.count("SELECT COUNT(*) FROM results").await, 2);
    assert_eq!(server.count("SELECT COUNT(*) FROM changes").await, 3);
    let metrics = server.get("/metrics", None).await.text;
    for reason in ["expired", "unknown_key", "forbidden", "too_large"] {
        let counted = metrics.lines().any(|line| {
            line.starts_with("argo_results_auth_failures_total") && line.contains(reason)
        });
        assert!(
            counted || mode == Mode::TokenReview,
            "{reason} not counted:\n{metrics}"
        );
    }
}

async fn attacks_fail_on_each_backend(backend: Backend) {
    attack_suite(backend, Mode::JwksFile).await;
}

#[tokio::test]
async fn attacks_fail_with_the_cluster_keys() {
    attack_suite(Backend::Sqlite, Mode::KubeJwks).await;
}

#[tokio::test]
async fn attacks_fail_with_token_review() {
    attack_suite(Backend::Sqlite, Mode::TokenReview).await;
}

/// A JWKS of the test keys plus a new EC key, and a token signed by the new key.
fn rotated_keys() -> (String, String) {
    let pem = generate_es256_key().expect("key");
    let mut set: JwkSet = serde_json::from_str(&tokens::keys().jwks).expect("jwks");
    set.keys
        .push(es256_public_jwk(pem.as_bytes(), "rotated").expect("jwk"));
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some("rotated".into());
    let token = jsonwebtoken::encode(
        &header,
        &tokens::user_claims(READER),
        &EncodingKey::from_ec_pem(pem.as_bytes()).expect("key"),
    )
    .expect("sign");
    (serde_json::to_string(&set).expect("jwks"), token)
}

#[tokio::test]
async fn cluster_keys_rotate_without_a_restart_and_survive_a_failing_endpoint() {
    let (kube, server) = start(Mode::KubeJwks, &[]).await;
    let kube = kube.expect("fake API server");
    let (jwks, token) = rotated_keys();
    assert_eq!(
        server.get("/api/v1/whoami", Some(&token)).await.status,
        401,
        "not rotated yet"
    );
    kube.set_jwks(jwks);
    // The unknown kid above refreshed the keys less than 30 s ago; the next refresh for an
    // unknown kid waits that long, so wait for it once.
    let trusted =
        async || (server.get("/api/v1/whoami", Some(&token)).await.status == 200).then_some(());
    let what = "the rotated key is trusted";
    eventually(what, Duration::from_secs(40), trusted).await;

    kube.fail_jwks(true);
    let stranger = sign_with_stranger("another-unknown", &tokens::user_claims(READER));
    assert_eq!(
        server.get("/api/v1/whoami", Some(&stranger)).await.status,
        401
    );
    let reader = tokens::user_token(READER);
    assert_eq!(
        server.get("/api/v1/whoami", Some(&reader)).await.status,
        200,
        "last good keys kept"
    );
    assert_eq!(server.get("/api/v1/whoami", Some(&token)).await.status, 200);
    assert_eq!(server.get("/readyz", None).await.status, 200);
}

#[tokio::test]
async fn cluster_keys_are_fetched_rarely() {
    let (kube, server) = start(Mode::KubeJwks, &[]).await;
    let kube = kube.expect("fake API server");
    for i in 0..100 {
        let token = if i % 2 == 0 {
            tokens::user_token(READER)
        } else {
            sign_with_stranger(&format!("forged-{i}"), &tokens::user_claims(READER))
        };
        server.get("/api/v1/whoami", Some(&token)).await;
    }
    let fetches = kube.count("jwks");
    assert!(
        (1..=3).contains(&fetches),
        "JWKS fetched {fetches} times over 100 requests"
    );
}

#[tokio::test]
async fn readiness_waits_for_the_cluster_keys() {
    let kube = FakeKube::start().await;
    kube.fail_jwks(true);
    let server = TestServer::builder(Backend::Sqlite)
        .auth(Auth::Kube(&kube.kubeconfig))
        .flags(&["--kube-jwks"])
        .start()
        .await;
    assert_eq!(server.get("/readyz", None).await.status, 503);
    let whoami = server
        .get("/api/v1/whoami", Some(&tokens::user_token(READER)))
        .await;
    assert_eq!(
        (whoami.status, whoami.json["code"].as_str()),
        (503, Some("unavailable"))
    );
    kube.fail_jwks(false);
    server.wait_ready().await;
    assert_eq!(
        server
            .get("/api/v1/whoami", Some(&tokens::user_token(READER)))
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn token_reviews_are_cached() {
    let (kube, server) = start(Mode::TokenReview, &[]).await;
    let kube = kube.expect("fake API server");
    let token = tokens::user_token(READER);
    for _ in 0..20 {
        assert_eq!(server.get("/api/v1/whoami", Some(&token)).await.status, 200);
    }
    let reviews = kube.count("tokenreviews");
    assert!(
        (1..=2).contains(&reviews),
        "{reviews} TokenReviews for one token used 20 times"
    );
}

#[tokio::test]
async fn tls_is_served_and_reloaded_when_the_files_change() {
    let dir = tempfile::tempdir().expect("scratch directory");
    let (first_ca, second_ca) = (TestCa::new("first CA"), TestCa::new("second CA"));
    let (cert_file, key_file) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    let install = |ca: &TestCa| {
        let cert = ca.server_cert();
        std::fs::write(&key_file, &cert.key_pem).expect("key");
        std::fs::write(&cert_file, &cert.cert_pem).expect("cert");
    };
    install(&first_ca);
    let paths = [
        cert_file.to_str().expect("path"),
        key_file.to_str().expect("path"),
    ];
    let server = TestServer::builder(Backend::Sqlite)
        .flags(&["--tls-cert", paths[0], "--tls-key", paths[1]])
        .start()
        .await;
    let trusting = |ca: &TestCa| {
        reqwest::Client::builder()
            .tls_certs_only([reqwest::Certificate::from_pem(ca.pem().as_bytes()).expect("ca")])
            .build()
            .expect("client")
    };
    let healthz = format!("{}/healthz", server.url());
    assert!(trusting(&first_ca).get(&healthz).send().await.is_ok());
    assert!(trusting(&second_ca).get(&healthz).send().await.is_err());

    // Plain HTTP on the TLS port gets no HTTP answer.
    let plain = format!(
        "http://{}/healthz",
        server.url().trim_start_matches("https://")
    );
    assert!(reqwest::get(&plain).await.is_err());

    install(&second_ca);
    let reloaded = async || trusting(&second_ca).get(&healthz).send().await.ok();
    let what = "a new connection sees the new certificate";
    eventually(what, Duration::from_secs(30), reloaded).await;
    assert!(trusting(&first_ca).get(&healthz).send().await.is_err());
}

#[tokio::test]
async fn an_rsa_tls_key_is_named_once_at_start_and_an_ecdsa_one_is_not() {
    let dir = tempfile::tempdir().expect("scratch directory");
    let ca = TestCa::new("CA");
    let (cert_file, key_file) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    let paths = [
        cert_file.to_str().expect("path"),
        key_file.to_str().expect("path"),
    ];
    let client = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(ca.pem().as_bytes()).expect("ca")])
        .build()
        .expect("client");
    for (cert, warnings) in [(ca.server_cert_rsa(), 1), (ca.server_cert(), 0)] {
        std::fs::write(&key_file, &cert.key_pem).expect("key");
        std::fs::write(&cert_file, &cert.cert_pem).expect("cert");
        let server = TestServer::builder(Backend::Sqlite)
            .flags(&["--tls-cert", paths[0], "--tls-key", paths[1]])
            .start()
            .await;
        let healthz = client
            .get(format!("{}/healthz", server.url()))
            .send()
            .await
            .expect("served over TLS");
        assert_eq!(healthz.status(), 200);
        let log = server.log();
        assert_eq!(log.matches("the TLS key is RSA").count(), warnings, "{log}");
        if warnings > 0 {
            assert!(
                log.contains("privateKey: {algorithm: ECDSA, size: 256}"),
                "{log}"
            );
        }
    }
}

#[tokio::test]
async fn the_audience_is_the_configured_one() {
    let server = TestServer::builder(Backend::Sqlite)
        .flags(&["--audience", "results.example"])
        .start()
        .await;
    let default = tokens::user_token(READER);
    assert_eq!(
        server.get("/api/v1/whoami", Some(&default)).await.status,
        401
    );
    let claims = TokenClaims {
        aud: Audience::Many(vec!["results.example".into(), AUDIENCE.into()]),
        ..tokens::user_claims(READER)
    };
    let token = tokens::sign(&tokens::rs256(), &claims);
    assert_eq!(server.get("/api/v1/whoami", Some(&token)).await.status, 200);
}
