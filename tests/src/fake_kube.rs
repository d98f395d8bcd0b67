//! A fake of the Kubernetes API server, kept only for what a real one cannot be made to do
//! on demand: fail (`fail_jwks`, `fail_reviews`), answer slowly (`delay_reviews`), flap,
//! and count the calls it serves (the caching and rate-limit cases of `security.rs` and
//! `hostile.rs`). The cases a real API server can express run against the real
//! kube-apiserver and etcd (`cluster.rs`); `tests/e2e/cluster.rs` lists what stays here.
//!
//! What it serves, for the modes that ask it: HTTPS with its
//! own CA, reached through a generated kubeconfig by the real `kube` client; OIDC discovery
//! and the service-account JWKS; TokenReview and SubjectAccessReview with their real JSON
//! shapes (k8s-openapi's types). It counts the requests it serves.
//!
//! TokenReview judges tokens the way the API server's service-account authenticator does:
//! signature by a served key of the key's own algorithm, issuer, expiry, an audience in
//! common with `spec.audiences`, and `sub` agreeing with the `kubernetes.io` claim.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use argo_results_proto::token::TokenClaims;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewStatus, UserInfo};
use k8s_openapi::api::authorization::v1::{SubjectAccessReview, SubjectAccessReviewStatus};
use tempfile::TempDir;

use crate::tls::TestCa;
use crate::tokens::{self, ISSUER};

/// One RBAC grant: `verb` on workflowtaskresults for `user`, in `namespace` or (None)
/// everywhere.
#[derive(Debug, Clone)]
pub struct Grant {
    pub user: String,
    pub verb: String,
    pub namespace: Option<String>,
}

#[derive(Debug, Default)]
struct FakeState {
    jwks: Mutex<String>,
    jwks_fails: AtomicBool,
    reviews_fail: AtomicBool,
    grants: Mutex<Vec<Grant>>,
    counts: Mutex<HashMap<&'static str, u32>>,
    /// How long each review takes to answer, in milliseconds (a loaded API server).
    review_delay_ms: AtomicU64,
    reviews_in_flight: AtomicU32,
    most_reviews_in_flight: AtomicU32,
}

impl FakeState {
    fn count(&self, route: &'static str) {
        *self
            .counts
            .lock()
            .expect("counts")
            .entry(route)
            .or_default() += 1;
    }

    /// The API server's answer while reviews fail: a 500 whose message names etcd's
    /// address, as a real one's may.
    fn failed_review(&self) -> Option<Response> {
        self.reviews_fail.load(Ordering::SeqCst).then(|| {
            status(
                StatusCode::INTERNAL_SERVER_ERROR,
                "etcdserver: request timed out, possibly due to connection lost to \
                 https://10.96.0.7:2379",
            )
        })
    }

    /// Counts a review in flight until the guard is dropped, after the configured delay.
    async fn review(&self) -> InFlight<'_> {
        let now = self.reviews_in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_reviews_in_flight.fetch_max(now, Ordering::SeqCst);
        let delay = self.review_delay_ms.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(delay)).await;
        InFlight(&self.reviews_in_flight)
    }
}

struct InFlight<'a>(&'a AtomicU32);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[derive(Debug)]
pub struct FakeKube {
    state: Arc<FakeState>,
    /// A kubeconfig that reaches this server with its CA.
    pub kubeconfig: PathBuf,
    handle: axum_server::Handle<std::net::SocketAddr>,
    _dir: TempDir,
}

fn status(code: StatusCode, message: &str) -> Response {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": code.canonical_reason(), "code": code.as_u16()
    });
    (code, Json(body)).into_response()
}

async fn discovery(State(state): State<Arc<FakeState>>) -> Response {
    state.count("discovery");
    Json(serde_json::json!({
        "issuer": ISSUER,
        "jwks_uri": "https://172.18.0.2:6443/openid/v1/jwks",
        "response_types_supported": ["id_token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256", "ES256"]
    }))
    .into_response()
}

async fn jwks(State(state): State<Arc<FakeState>>) -> Response {
    state.count("jwks");
    if state.jwks_fails.load(Ordering::SeqCst) {
        return status(
            StatusCode::SERVICE_UNAVAILABLE,
            "etcdserver: request timed out",
        );
    }
    let body = state.jwks.lock().expect("jwks").clone();
    ([("content-type", "application/jwk-set+json")], body).into_response()
}

/// What the API server's service-account authenticator would say of `token`.
fn authenticate(jwks: &str, token: &str, audiences: &[String]) -> Result<UserInfo, String> {
    let set: JwkSet = serde_json::from_str(jwks).map_err(|e| e.to_string())?;
    let header =
        jsonwebtoken::decode_header(token).map_err(|_| "invalid bearer token".to_owned())?;
    let jwk = set
        .keys
        .iter()
        .find(|k| k.common.key_id.is_some() && k.common.key_id == header.kid)
        .ok_or("invalid bearer token, square/go-jose: error in cryptographic primitive")?;
    let algorithm = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(ec) if ec.curve == EllipticCurve::P384 => {
            Algorithm::ES384
        }
        AlgorithmParameters::EllipticCurve(_) => Algorithm::ES256,
        _ => return Err("invalid bearer token".into()),
    };
    let mut validation = Validation::new(algorithm);
    validation.set_issuer(&[ISSUER]);
    validation.set_audience(audiences);
    validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    validation.validate_nbf = true;
    let key = DecodingKey::from_jwk(jwk).map_err(|e| e.to_string())?;
    let claims = jsonwebtoken::decode::<TokenClaims>(token, &key, &validation)
        .map_err(|e| format!("[invalid bearer token, {e}]"))?
        .claims;
    let kubernetes = claims
        .kubernetes
        .ok_or("invalid bearer token, not a service-account token")?;
    let account = kubernetes
        .serviceaccount
        .ok_or("invalid bearer token, no service account")?;
    if claims.sub
        != format!(
            "system:serviceaccount:{}:{}",
            kubernetes.namespace, account.name
        )
    {
        return Err("invalid bearer token, sub does not match the service account".into());
    }
    let mut extra = std::collections::BTreeMap::new();
    if let Some(pod) = kubernetes.pod {
        extra.insert(
            "authentication.kubernetes.io/pod-name".to_owned(),
            vec![pod.name],
        );
        extra.insert(
            "authentication.kubernetes.io/pod-uid".to_owned(),
            vec![pod.uid],
        );
    }
    Ok(UserInfo {
        username: Some(claims.sub),
        uid: Some(account.uid),
        groups: Some(vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{}", kubernetes.namespace),
            "system:authenticated".into(),
        ]),
        extra: Some(extra),
    })
}

async fn token_review(
    State(state): State<Arc<FakeState>>,
    Json(mut review): Json<TokenReview>,
) -> Response {
    state.count("tokenreviews");
    let _in_flight = state.review().await;
    if let Some(failed) = state.failed_review() {
        return failed;
    }
    let token = review.spec.token.clone().unwrap_or_default();
    let audiences = review.spec.audiences.clone().unwrap_or_default();
    let jwks = state.jwks.lock().expect("jwks").clone();
    review.status = Some(match authenticate(&jwks, &token, &audiences) {
        Ok(user) => TokenReviewStatus {
            authenticated: Some(true),
            user: Some(user),
            audiences: Some(audiences),
            error: None,
        },
        Err(error) => TokenReviewStatus {
            user: Some(UserInfo::default()),
            error: Some(error),
            ..TokenReviewStatus::default()
        },
    });
    (StatusCode::CREATED, Json(review)).into_response()
}

async fn access_review(
    State(state): State<Arc<FakeState>>,
    Json(mut review): Json<SubjectAccessReview>,
) -> Response {
    state.count("subjectaccessreviews");
    let _in_flight = state.review().await;
    if let Some(failed) = state.failed_review() {
        return failed;
    }
    let spec = &review.spec;
    let Some(resource) = &spec.resource_attributes else {
        return status(
            StatusCode::BAD_REQUEST,
            "resourceAttributes is required here",
        );
    };
    let on_task_results = resource.group.as_deref() == Some("argoproj.io")
        && resource.resource.as_deref() == Some("workflowtaskresults");
    let user = spec.user.clone().unwrap_or_default();
    let allowed = on_task_results
        && state.grants.lock().expect("grants").iter().any(|grant| {
            grant.user == user
                && Some(grant.verb.as_str()) == resource.verb.as_deref()
                && (grant.namespace.is_none() || grant.namespace == resource.namespace)
        });
    review.status = Some(SubjectAccessReviewStatus {
        allowed,
        reason: Some(
            if allowed {
                "RBAC: allowed by a test grant"
            } else {
                ""
            }
            .to_owned(),
        ),
        ..SubjectAccessReviewStatus::default()
    });
    (StatusCode::CREATED, Json(review)).into_response()
}

impl FakeKube {
    /// Starts the fake, serving the test keys' JWKS.
    pub async fn start() -> Self {
        let dir = tempfile::tempdir().expect("scratch directory");
        let ca = TestCa::new("fake kube-apiserver CA");
        let cert = ca.server_cert();
        let (cert_file, key_file) = (
            dir.path().join("apiserver.crt"),
            dir.path().join("apiserver.key"),
        );
        std::fs::write(&cert_file, &cert.cert_pem).expect("cert");
        std::fs::write(&key_file, &cert.key_pem).expect("key");
        let state = Arc::new(FakeState {
            jwks: Mutex::new(tokens::keys().jwks.clone()),
            ..FakeState::default()
        });
        let app = Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/openid/v1/jwks", get(jwks))
            .route(
                "/apis/authentication.k8s.io/v1/tokenreviews",
                post(token_review),
            )
            .route(
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                post(access_review),
            )
            .fallback(|| async {
                status(
                    StatusCode::NOT_FOUND,
                    "the server could not find the requested resource",
                )
            })
            .with_state(Arc::clone(&state));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        let tls = axum_server::tls_rustls::RustlsConfig::from_pem_file(&cert_file, &key_file)
            .await
            .expect("TLS");
        let handle = axum_server::Handle::new();
        let server = axum_server::from_tcp_rustls(listener, tls)
            .expect("listener")
            .handle(handle.clone());
        tokio::spawn(server.serve(app.into_make_service()));
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: https://127.0.0.1:{port}\n    certificate-authority-data: {}\nusers:\n- name: argo-results\n  user:\n    token: argo-results-service-account-token\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: argo-results\ncurrent-context: fake\n",
                STANDARD.encode(ca.pem())
            ),
        )
        .expect("kubeconfig");
        FakeKube {
            state,
            kubeconfig,
            handle,
            _dir: dir,
        }
    }

    /// How many requests `route` (`discovery`, `jwks`, `tokenreviews`,
    /// `subjectaccessreviews`) has served.
    pub fn count(&self, route: &str) -> u32 {
        self.state
            .counts
            .lock()
            .expect("counts")
            .get(route)
            .copied()
            .unwrap_or(0)
    }

    /// Serves `jwks` from now on (a key rotation).
    pub fn set_jwks(&self, jwks: String) {
        *self.state.jwks.lock().expect("jwks") = jwks;
    }

    /// Makes the JWKS endpoint fail (503) or answer again.
    pub fn fail_jwks(&self, fail: bool) {
        self.state.jwks_fails.store(fail, Ordering::SeqCst);
    }

    /// Makes every TokenReview and SubjectAccessReview fail (500), or answer again.
    pub fn fail_reviews(&self, fail: bool) {
        self.state.reviews_fail.store(fail, Ordering::SeqCst);
    }

    /// Makes every TokenReview and SubjectAccessReview take `delay` to answer.
    pub fn delay_reviews(&self, delay: Duration) {
        let millis = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        self.state.review_delay_ms.store(millis, Ordering::SeqCst);
    }

    /// The most reviews (TokenReview and SubjectAccessReview) it has served at once.
    pub fn most_reviews_in_flight(&self) -> u32 {
        self.state.most_reviews_in_flight.load(Ordering::SeqCst)
    }

    pub fn grant(&self, user: &str, verb: &str, namespace: Option<&str>) {
        self.state.grants.lock().expect("grants").push(Grant {
            user: user.to_owned(),
            verb: verb.to_owned(),
            namespace: namespace.map(str::to_owned),
        });
    }
}

impl Drop for FakeKube {
    fn drop(&mut self) {
        self.handle.shutdown();
    }
}
