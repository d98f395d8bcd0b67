//! Token claims as Kubernetes puts them in projected service-account tokens, and minting of
//! tokens signed by the embedded default's dev key (`argo-results token`, the server's
//! start-up banner, the tests).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::{Deserialize, Serialize};

/// File name of the dev signing key in the server's data directory.
pub const DEV_KEY_FILE: &str = "argo-results-dev-key.pem";
/// `kid` of the dev signing key.
pub const DEV_KEY_ID: &str = "argo-results-dev";
/// `iss` of tokens signed by the dev key.
pub const DEV_ISSUER: &str = "argo-results-dev";
/// Subject of the reader + controller token that the embedded default prints.
pub const DEV_ADMIN_SUBJECT: &str = "argo-results:dev-admin";
/// The audience a token must carry unless the server is told otherwise.
pub const DEFAULT_AUDIENCE: &str = "argo-results";

/// `aud` is a string or an array of strings (RFC 7519 section 4.1.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Audience {
    One(String),
    Many(Vec<String>),
}

/// A name and UID under the `kubernetes.io` claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRef {
    pub name: String,
    pub uid: String,
}

/// The `kubernetes.io` claim of a service-account token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubernetesClaims {
    pub namespace: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<ObjectRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serviceaccount: Option<ObjectRef>,
}

/// The claims argo-results reads from a token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenClaims {
    pub iss: String,
    pub sub: String,
    pub aud: Audience,
    pub exp: u64,
    pub iat: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<u64>,
    #[serde(
        rename = "kubernetes.io",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub kubernetes: Option<KubernetesClaims>,
}

/// Who a pod token names.
#[derive(Debug, Clone)]
pub struct PodIdentity<'a> {
    pub namespace: &'a str,
    pub service_account: &'a str,
    pub pod_name: &'a str,
    pub pod_uid: &'a str,
}

impl TokenClaims {
    /// Claims of a projected token of `pod`, as the kubelet would mint them.
    pub fn pod(issuer: &str, audience: &str, pod: &PodIdentity<'_>, ttl: Duration) -> Self {
        let mut claims = Self::user(
            issuer,
            audience,
            &format!(
                "system:serviceaccount:{}:{}",
                pod.namespace, pod.service_account
            ),
            ttl,
        );
        claims.kubernetes = Some(KubernetesClaims {
            namespace: pod.namespace.to_owned(),
            pod: Some(ObjectRef {
                name: pod.pod_name.to_owned(),
                uid: pod.pod_uid.to_owned(),
            }),
            serviceaccount: Some(ObjectRef {
                name: pod.service_account.to_owned(),
                uid: format!("{}-{}", pod.namespace, pod.service_account),
            }),
        });
        claims
    }

    /// Claims of a token for `subject`, valid from now for `ttl`.
    pub fn user(issuer: &str, audience: &str, subject: &str, ttl: Duration) -> Self {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        TokenClaims {
            iss: issuer.to_owned(),
            sub: subject.to_owned(),
            aud: Audience::Many(vec![audience.to_owned()]),
            exp: now + ttl.as_secs(),
            iat: now,
            nbf: Some(now),
            kubernetes: None,
        }
    }
}

/// Signs `claims` with an EC P-256 private key in PKCS#8 PEM (ES256), naming it `kid`.
pub fn mint(
    key_pem: &[u8],
    kid: &str,
    claims: &TokenClaims,
) -> Result<String, jsonwebtoken::errors::Error> {
    let key = EncodingKey::from_ec_pem(key_pem)?;
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(&header, claims, &key)
}

/// Wraps DER bytes in PEM armour, e.g. `label` = `PRIVATE KEY` for PKCS#8.
pub fn pem_encode(label: &str, der: &[u8]) -> String {
    let encoded = STANDARD.encode(der);
    let mut pem = format!("-----BEGIN {label}-----\n");
    for line in encoded.as_bytes().chunks(64) {
        pem.push_str(&String::from_utf8_lossy(line));
        pem.push('\n');
    }
    pem.push_str(&format!("-----END {label}-----\n"));
    pem
}

/// A new EC P-256 private key in PKCS#8 PEM, for ES256.
pub fn generate_es256_key() -> Result<String, aws_lc_rs::error::Unspecified> {
    let document = EcdsaKeyPair::generate_pkcs8(
        &ECDSA_P256_SHA256_FIXED_SIGNING,
        &aws_lc_rs::rand::SystemRandom::new(),
    )?;
    Ok(pem_encode("PRIVATE KEY", document.as_ref()))
}

/// The public JWK of an EC P-256 private key in PKCS#8 PEM, named `kid`.
pub fn es256_public_jwk(key_pem: &[u8], kid: &str) -> Result<Jwk, jsonwebtoken::errors::Error> {
    let key = EncodingKey::from_ec_pem(key_pem)?;
    let mut jwk = Jwk::from_encoding_key(&key, Algorithm::ES256)?;
    jwk.common.key_id = Some(kid.to_owned());
    Ok(jwk)
}
