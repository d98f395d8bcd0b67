//! docs/api.md section 8: tokens, roles and the pod rules, with `--jwks-file` validation.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use argo_results_client::proto::token::{Audience, TokenClaims};
use argo_results_client::proto::{ProblemCode, Role};
use argo_results_tests::fixtures::{NS, WF, outputs, step};
use argo_results_tests::tokens::{self, AUDIENCE, CONTROLLER, ISSUER, READER};
use argo_results_tests::{Backend, TestServer};

on_both_backends!(a_pod_may_write_only_its_own_node);
// Tokens and roles are checked before any store access, so the other cases run once, on
// SQLite, the embedded default; a pod's own writes are stored, so that case runs on both.

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

async fn whoami_status(server: &TestServer, token: &str) -> (u16, serde_json::Value) {
    let answer = server.get("/api/v1/whoami", Some(token)).await;
    (answer.status, answer.json)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whoami_names_each_kind_of_caller() {
    let server = TestServer::builder(Backend::Sqlite).start().await;
    let me = server.controller().whoami().await.expect("controller");
    assert_eq!(me.subject, CONTROLLER);
    assert_eq!(
        me.roles,
        [Role::Reader, Role::Controller],
        "a controller also reads"
    );
    assert_eq!(
        server.reader().whoami().await.expect("reader").roles,
        [Role::Reader]
    );
    let s = step(1);
    let pod = server.pod_of(&s).whoami().await.expect("pod");
    assert_eq!(pod.roles, [Role::Pod]);
    assert_eq!(pod.namespace.as_deref(), Some(NS));
    assert_eq!(pod.subject, "system:serviceaccount:argo:default");
    let pod_ref = pod.pod.expect("pod");
    assert_eq!((pod_ref.name, pod_ref.uid), (s.pod_name, s.pod_uid));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_credentials_are_unauthenticated() {
    let server = TestServer::builder(Backend::Sqlite).start().await;
    let missing = server.get("/api/v1/whoami", None).await;
    assert_eq!(missing.status, 401);
    assert_eq!(missing.json["code"], "unauthenticated");
    assert!(missing.headers.get("www-authenticate").is_some());
    for token in ["garbage", "a.b.c", &"x".repeat(64 * 1024)] {
        let (status, body) = whoami_status(&server, token).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (401, Some("unauthenticated")),
            "{}",
            &token[..5.min(token.len())]
        );
    }
    let with_basic = reqwest::Client::new()
        .get(format!("{}/api/v1/whoami", server.url()))
        .basic_auth("admin", Some("secret"))
        .send()
        .await
        .expect("send");
    assert_eq!(with_basic.status(), 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_audience_issuer_and_algorithm_are_checked() {
    let server = TestServer::builder(Backend::Sqlite).start().await;
    let base = TokenClaims::user(ISSUER, AUDIENCE, READER, Duration::from_secs(600));
    let t = now();
    let cases: Vec<(&str, TokenClaims, u16)> = vec![
        (
            "expired",
            TokenClaims {
                exp: t - 120,
                iat: t - 720,
                nbf: None,
                ..base.clone()
            },
            401,
        ),
        (
            "expired within the 30 s leeway",
            TokenClaims {
                exp: t - 10,
                iat: t - 600,
                nbf: None,
                ..base.clone()
            },
            200,
        ),
        (
            "not valid yet",
            TokenClaims {
                nbf: Some(t + 120),
                ..base.clone()
            },
            401,
        ),
        (
            "wrong audience",
            TokenClaims {
                aud: Audience::One("kubernetes".into()),
                ..base.clone()
            },
            401,
        ),
        (
            "audience as a string",
            TokenClaims {
                aud: Audience::One(AUDIENCE.into()),
                ..base.clone()
            },
            200,
        ),
        (
            "wrong issuer",
            TokenClaims {
                iss: "https://evil.example".into(),
                ..base.clone()
            },
            401,
        ),
    ];
    for (name, claims, status) in cases {
        let token = tokens::sign(&tokens::rs256(), &claims);
        assert_eq!(whoami_status(&server, &token).await.0, status, "{name}");
    }
    // Claims without sub or iat.
    let mut no_sub = serde_json::to_value(&base).expect("json");
    no_sub.as_object_mut().expect("object").remove("sub");
    let mut no_iat = serde_json::to_value(&base).expect("json");
    no_iat.as_object_mut().expect("object").remove("iat");
    for claims in [no_sub, no_iat] {
        let token = tokens::sign(&tokens::rs256(), &claims);
        assert_eq!(whoami_status(&server, &token).await.0, 401);
    }
    // The key decides the algorithm: an ES256 header naming the RSA key is refused, and so
    // is an unknown kid.
    let mut mismatched = tokens::es256();
    mismatched.kid = Some(tokens::RSA_KID.into());
    let token = tokens::sign(&mismatched, &base);
    assert_eq!(whoami_status(&server, &token).await.0, 401);
    let mut unknown = tokens::rs256();
    unknown.kid = Some("rotated-away".into());
    let token = tokens::sign(&unknown, &base);
    assert_eq!(whoami_status(&server, &token).await.0, 401);
    // Both key types verify.
    assert_eq!(
        whoami_status(&server, &tokens::sign(&tokens::es256(), &base))
            .await
            .0,
        200
    );
    assert_eq!(
        whoami_status(&server, &tokens::sign(&tokens::rs256(), &base))
            .await
            .0,
        200
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_limit_what_each_caller_may_do() {
    let server = TestServer::builder(Backend::Sqlite).start().await;
    let s = step(1);
    let pod = server.pod_of(&s);
    let forbidden = |result: Result<_, argo_results_client::ClientError>| {
        assert_eq!(
            result.err().and_then(|e| e.code()),
            Some(ProblemCode::Forbidden)
        );
    };
    forbidden(pod.get_result(NS, WF, &s.node_id, None).await.map(|_| ()));
    forbidden(
        pod.expect(NS, WF, &s.node_id, &s.expectation())
            .await
            .map(|_| ()),
    );
    forbidden(
        server
            .reader()
            .expect(NS, WF, &s.node_id, &s.expectation())
            .await
            .map(|_| ()),
    );
    forbidden(
        server
            .reader()
            .delete_results(NS, WF, "uid")
            .await
            .map(|_| ()),
    );
    forbidden(
        server
            .controller()
            .report(
                NS,
                WF,
                &s.node_id,
                &s.report(Some(1), true, Some(&outputs(1))),
            )
            .await
            .map(|_| ()),
    );
    let stranger = server.client(Some(tokens::user_token(
        "system:serviceaccount:other:nobody",
    )));
    forbidden(
        stranger
            .list_results(NS, WF, &Default::default())
            .await
            .map(|_| ()),
    );
    assert_eq!(server.count("SELECT COUNT(*) FROM results").await, 0);
}

async fn a_pod_may_write_only_its_own_node(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let s = step(1);
    let mine = s.report(Some(1), true, Some(&outputs(1)));
    let pod = server.pod_of(&s);
    let attempts = [
        (
            "another namespace",
            server.pod("team-b", &s.pod_name, &s.pod_uid),
            NS,
            step(1).node_id,
            mine.clone(),
        ),
        (
            "another node",
            pod.clone(),
            NS,
            step(2).node_id,
            mine.clone(),
        ),
        (
            "another pod UID in the body",
            pod.clone(),
            NS,
            s.node_id.clone(),
            argo_results_client::proto::ReportRequest {
                pod_uid: "someone-else".into(),
                ..mine.clone()
            },
        ),
        (
            "another pod name in the body",
            pod.clone(),
            NS,
            s.node_id.clone(),
            argo_results_client::proto::ReportRequest {
                pod_name: step(2).pod_name,
                ..mine.clone()
            },
        ),
    ];
    for (name, client, namespace, node, body) in attempts {
        let error = client
            .report(namespace, WF, &node, &body)
            .await
            .expect_err(name);
        assert_eq!(error.code(), Some(ProblemCode::Forbidden), "{name}");
    }
    assert_eq!(server.count("SELECT COUNT(*) FROM results").await, 0);

    // v1 pod names are the node ID; the root node's pod is the workflow's name.
    let v1 = server.pod(NS, &s.node_id, "v1-uid");
    let mut v1_report = s.report(Some(1), true, Some(&outputs(1)));
    v1_report.pod_name = s.node_id.clone();
    v1_report.pod_uid = "v1-uid".into();
    assert_eq!(
        v1.report(NS, WF, &s.node_id, &v1_report)
            .await
            .expect("v1")
            .status,
        201
    );
    let root = server.pod(NS, WF, "root-uid");
    let mut root_report = v1_report.clone();
    root_report.pod_name = WF.into();
    root_report.pod_uid = "root-uid".into();
    assert_eq!(
        root.report(NS, WF, WF, &root_report)
            .await
            .expect("root")
            .status,
        201
    );
}

/// `--jwks-file` is re-read when it changes, as the TLS certificate is: a key taken out of
/// the file stops being trusted and one put back is trusted again, without a restart; a
/// file that does not parse keeps the keys read before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_jwks_file_is_re_read_when_it_changes() {
    let server = TestServer::builder(Backend::Sqlite)
        .env("RUST_LOG", "info")
        .start()
        .await;
    let rsa_token = tokens::sign(&tokens::rs256(), &tokens::user_claims(READER));
    let whoami = async |token: &str| server.get("/api/v1/whoami", Some(token)).await.status;
    assert_eq!(whoami(&rsa_token).await, 200);
    let mut only_ec: serde_json::Value = serde_json::from_str(&tokens::keys().jwks).expect("JWKS");
    only_ec["keys"]
        .as_array_mut()
        .expect("keys")
        .retain(|key| key["kid"] == tokens::EC_KID);
    std::fs::write(server.jwks_file(), only_ec.to_string()).expect("rewrite JWKS");
    argo_results_tests::eventually(
        "the RSA key taken out",
        Duration::from_secs(30),
        async || (whoami(&rsa_token).await == 401).then_some(()),
    )
    .await;
    std::fs::write(server.jwks_file(), &tokens::keys().jwks).expect("rewrite JWKS");
    argo_results_tests::eventually(
        "the RSA key put back",
        Duration::from_secs(30),
        async || (whoami(&rsa_token).await == 200).then_some(()),
    )
    .await;
    std::fs::write(server.jwks_file(), "{\"keys\": [").expect("break JWKS");
    argo_results_tests::eventually(
        "the broken file noticed",
        Duration::from_secs(30),
        async || server.log().contains("was not re-read").then_some(()),
    )
    .await;
    assert_eq!(whoami(&rsa_token).await, 200, "the keys before it stay");
}
