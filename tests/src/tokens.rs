//! Test signing keys (one EC P-256 and one RSA key, made once per test process) and the
//! tokens they sign, shaped like Kubernetes' projected service-account tokens.

use std::sync::OnceLock;
use std::time::Duration;

use argo_results_proto::token::{
    KubernetesClaims, ObjectRef, PodIdentity, TokenClaims, es256_public_jwk, generate_es256_key,
    pem_encode,
};
use aws_lc_rs::encoding::{AsDer, Pkcs8V1Der};
use aws_lc_rs::rsa::{KeyPair, KeySize};
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::Serialize;

pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
pub const AUDIENCE: &str = "argo-results";
/// Granted `--controller` by test servers.
pub const CONTROLLER: &str = "system:serviceaccount:argo:argo";
/// Granted `--reader` by test servers.
pub const READER: &str = "system:serviceaccount:argo:argo-server";
pub const EC_KID: &str = "test-ec";
pub const RSA_KID: &str = "test-rsa";

const TTL: Duration = Duration::from_secs(600);

#[derive(Debug)]
pub struct TestKeys {
    pub ec: EncodingKey,
    pub rsa: EncodingKey,
    /// The JWKS document trusting both keys (what `--jwks-file` reads).
    pub jwks: String,
}

fn make_keys() -> TestKeys {
    let ec_pem = generate_es256_key().expect("EC key");
    let ec_jwk = es256_public_jwk(ec_pem.as_bytes(), EC_KID).expect("EC JWK");
    let rsa_pair = KeyPair::generate(KeySize::Rsa2048).expect("RSA key");
    let der: Pkcs8V1Der<'static> = rsa_pair.as_der().expect("PKCS#8");
    let rsa_pem = pem_encode("PRIVATE KEY", der.as_ref());
    let rsa = EncodingKey::from_rsa_pem(rsa_pem.as_bytes()).expect("RSA PEM");
    let mut rsa_jwk = Jwk::from_encoding_key(&rsa, Algorithm::RS256).expect("RSA JWK");
    rsa_jwk.common.key_id = Some(RSA_KID.to_owned());
    TestKeys {
        ec: EncodingKey::from_ec_pem(ec_pem.as_bytes()).expect("EC PEM"),
        rsa,
        jwks: serde_json::to_string(&JwkSet {
            keys: vec![ec_jwk, rsa_jwk],
        })
        .expect("JWKS"),
    }
}

pub fn keys() -> &'static TestKeys {
    static KEYS: OnceLock<TestKeys> = OnceLock::new();
    KEYS.get_or_init(make_keys)
}

/// Signs any claims with the test EC key (ES256) or RSA key (RS256), as `header` says.
pub fn sign(header: &Header, claims: &impl Serialize) -> String {
    let key = match header.alg {
        Algorithm::ES256 => &keys().ec,
        _ => &keys().rsa,
    };
    jsonwebtoken::encode(header, claims, key).expect("sign")
}

pub fn es256() -> Header {
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(EC_KID.to_owned());
    header
}

pub fn rs256() -> Header {
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(RSA_KID.to_owned());
    header
}

/// Claims of the projected token of pod `pod_name` (UID `pod_uid`) in `namespace`.
pub fn pod_claims(namespace: &str, pod_name: &str, pod_uid: &str) -> TokenClaims {
    let pod = PodIdentity {
        namespace,
        service_account: "default",
        pod_name,
        pod_uid,
    };
    TokenClaims::pod(ISSUER, AUDIENCE, &pod, TTL)
}

pub fn pod_token(namespace: &str, pod_name: &str, pod_uid: &str) -> String {
    sign(&es256(), &pod_claims(namespace, pod_name, pod_uid))
}

/// Claims of `subject` with no pod; a service account's subject
/// (`system:serviceaccount:NS:NAME`) gets the `kubernetes.io` claim its token carries.
pub fn user_claims(subject: &str) -> TokenClaims {
    let mut claims = TokenClaims::user(ISSUER, AUDIENCE, subject, TTL);
    let account = subject
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'));
    if let Some((namespace, name)) = account {
        claims.kubernetes = Some(KubernetesClaims {
            namespace: namespace.to_owned(),
            pod: None,
            serviceaccount: Some(ObjectRef {
                name: name.to_owned(),
                uid: format!("{namespace}-{name}"),
            }),
        });
    }
    claims
}

/// A token of `subject` with no pod, signed with the RSA key.
pub fn user_token(subject: &str) -> String {
    sign(&rs256(), &user_claims(subject))
}
