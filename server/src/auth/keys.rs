//! Offline token verification against a set of trusted public keys (a JWKS).
//!
//! Each key fixes its algorithm (RSA: RS256 unless the JWK names another RSA algorithm;
//! EC P-256: ES256; P-384: ES384). A token is checked with its key's algorithm only, so a
//! header claiming `none` or HS256 can never select a weaker check. Symmetric (`oct`) keys
//! are refused when the set is loaded.

use std::time::Duration;

use argo_results_proto::token::TokenClaims;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, JwkSet, KeyAlgorithm};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};

use super::cache::{TokenDigest, TtlCache, token_digest};
use super::{AuthError, Reason};

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("not a JWKS document: {0}")]
    Json(#[from] serde_json::Error),
    #[error("the key set is empty")]
    Empty,
    #[error("{}: {detail}", key_name(kid.as_deref()))]
    Refused { kid: Option<String>, detail: String },
}

/// A key as an error names it: by its `kid`, else as having none.
fn key_name(kid: Option<&str>) -> String {
    kid.map_or_else(
        || "a key without \"kid\"".to_owned(),
        |kid| format!("key \"{kid}\""),
    )
}

/// Whose tokens are trusted: `iss` is always required.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Issuer {
    Only(String),
    /// `--any-issuer`.
    Any,
}

/// What a token must carry besides a good signature.
#[derive(Debug, Clone)]
pub struct TokenPolicy {
    pub audience: String,
    pub issuer: Issuer,
    pub lifetime: Lifetime,
}

/// How long a token may live, and the clock skew tolerated on `exp`, `nbf` and `iat`
/// (`--max-token-lifetime`, `--clock-leeway`): a key that signs tokens without end, or
/// dated ahead, is refused rather than trusted for centuries.
#[derive(Debug, Clone, Copy)]
pub struct Lifetime {
    pub max: Duration,
    pub leeway: Duration,
}

impl Lifetime {
    /// Whether `claims`, issued by a trusted key, keep to it at `now` (Unix seconds).
    fn check(&self, claims: &TokenClaims, now: u64) -> Result<(), AuthError> {
        if claims.iat > now.saturating_add(self.leeway.as_secs()) {
            return Err(AuthError::unauthenticated(
                Reason::NotYetValid,
                "token was issued in the future (iat), beyond --clock-leeway",
            ));
        }
        if claims.exp.saturating_sub(claims.iat) > self.max.as_secs() {
            return Err(AuthError::unauthenticated(
                Reason::TooLong,
                format!(
                    "token lives longer than --max-token-lifetime ({} days)",
                    self.max.as_secs() / 86_400
                ),
            ));
        }
        Ok(())
    }
}

#[derive(Debug)]
struct TrustedKey {
    kid: Option<String>,
    key: DecodingKey,
    validation: Validation,
}

#[derive(Debug)]
pub struct KeySet {
    keys: Vec<TrustedKey>,
    lifetime: Lifetime,
    /// Claims of tokens these keys verified, until the token expires: a pod's later
    /// requests cost a hash instead of a signature check. A new key set (a rotation)
    /// starts empty.
    verified: TtlCache<TokenDigest, TokenClaims>,
    /// Why tokens were refused, for [`REFUSED_FOR`]: a forged token replayed costs a hash,
    /// not a signature check each time (ES256 75 µs, RS256 36 µs of CPU).
    refused: TtlCache<TokenDigest, (Reason, String)>,
}

/// Tokens remembered at once; past it the cache starts over.
const VERIFIED_TOKENS: usize = 10_000;

/// How long a refusal is remembered. Briefly: a rotation that makes a token good comes with
/// a new key set, which starts with no refusal, and a token refused as not yet valid is
/// never remembered.
const REFUSED_FOR: Duration = Duration::from_secs(30);

fn algorithm_of(jwk: &Jwk) -> Result<Algorithm, String> {
    match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => match jwk.common.key_algorithm {
            None => Ok(Algorithm::RS256),
            Some(KeyAlgorithm::RS256) => Ok(Algorithm::RS256),
            Some(KeyAlgorithm::RS384) => Ok(Algorithm::RS384),
            Some(KeyAlgorithm::RS512) => Ok(Algorithm::RS512),
            Some(KeyAlgorithm::PS256) => Ok(Algorithm::PS256),
            Some(KeyAlgorithm::PS384) => Ok(Algorithm::PS384),
            Some(KeyAlgorithm::PS512) => Ok(Algorithm::PS512),
            Some(other) => Err(format!("an RSA key cannot sign {other:?}")),
        },
        AlgorithmParameters::EllipticCurve(ec) => match ec.curve {
            EllipticCurve::P256 => Ok(Algorithm::ES256),
            EllipticCurve::P384 => Ok(Algorithm::ES384),
            ref other => Err(format!("curve {other:?} is not supported")),
        },
        AlgorithmParameters::OctetKey(_) => {
            Err("symmetric (oct) keys are refused: anyone who can verify could sign".into())
        }
        _ => Err("only RSA and EC (P-256, P-384) keys are supported".into()),
    }
}

impl KeySet {
    /// Trusts every key of a JWKS document.
    pub fn from_jwks(text: &str, policy: &TokenPolicy) -> Result<Self, KeyError> {
        Self::from_jwk_set(&serde_json::from_str(text)?, policy)
    }

    pub fn from_jwk_set(set: &JwkSet, policy: &TokenPolicy) -> Result<Self, KeyError> {
        let keys = set
            .keys
            .iter()
            .map(|jwk| {
                let kid = jwk.common.key_id.clone();
                let refused = |detail: String| KeyError::Refused {
                    kid: kid.clone(),
                    detail,
                };
                let algorithm = algorithm_of(jwk).map_err(refused)?;
                let key = DecodingKey::from_jwk(jwk).map_err(|e| refused(e.to_string()))?;
                Ok(TrustedKey::new(kid.clone(), algorithm, key, policy))
            })
            .collect::<Result<Vec<_>, KeyError>>()?;
        if keys.is_empty() {
            return Err(KeyError::Empty);
        }
        Ok(KeySet {
            keys,
            lifetime: policy.lifetime,
            verified: TtlCache::new(VERIFIED_TOKENS),
            refused: TtlCache::new(VERIFIED_TOKENS),
        })
    }

    /// Verifies signature, algorithm, `exp`, `nbf`, `iss`, `aud` and the presence of `sub`
    /// and `iat`, or finds the token verified before and not yet expired.
    pub fn verify(&self, token: &str) -> Result<TokenClaims, AuthError> {
        let digest = token_digest(token);
        if let Some(claims) = self.verified.get(&digest) {
            return Ok(claims);
        }
        if let Some((reason, detail)) = self.refused.get(&digest) {
            return Err(AuthError::unauthenticated(reason, detail));
        }
        let checked = self.check(token).and_then(|claims| {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs();
            self.lifetime.check(&claims, now)?;
            Ok((claims, now))
        });
        let (claims, now) = match checked {
            Ok(checked) => checked,
            Err(AuthError::Unauthenticated { reason, detail }) => {
                if reason != Reason::NotYetValid {
                    self.refused
                        .insert(digest, (reason, detail.clone()), REFUSED_FOR);
                }
                return Err(AuthError::Unauthenticated { reason, detail });
            }
            Err(other) => return Err(other),
        };
        let ttl = Duration::from_secs(claims.exp.saturating_sub(now));
        if !ttl.is_zero() {
            self.verified.insert(digest, claims.clone(), ttl);
        }
        Ok(claims)
    }

    fn check(&self, token: &str) -> Result<TokenClaims, AuthError> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| {
            AuthError::unauthenticated(Reason::Malformed, "malformed token: not a signed JWT")
        })?;
        let key = match &header.kid {
            Some(kid) => self.keys.iter().find(|k| k.kid.as_deref() == Some(kid)),
            None if self.keys.len() == 1 => self.keys.first(),
            None => None,
        }
        .ok_or_else(|| {
            AuthError::unauthenticated(
                Reason::UnknownKey,
                "token is signed by an untrusted key (unknown kid)",
            )
        })?;
        if !key.validation.algorithms.contains(&header.alg) {
            return Err(AuthError::unauthenticated(
                Reason::AlgorithmMismatch,
                format!(
                    "token algorithm {:?} is not its key's {:?}",
                    header.alg, key.validation.algorithms
                ),
            ));
        }
        jsonwebtoken::decode::<TokenClaims>(token, &key.key, &key.validation)
            .map(|data| data.claims)
            .map_err(|e| describe(e.kind(), &key.validation))
    }
}

impl TrustedKey {
    fn new(
        kid: Option<String>,
        algorithm: Algorithm,
        key: DecodingKey,
        policy: &TokenPolicy,
    ) -> Self {
        let mut validation = Validation::new(algorithm);
        validation.leeway = policy.lifetime.leeway.as_secs();
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.set_audience(&[&policy.audience]);
        if let Issuer::Only(issuer) = &policy.issuer {
            validation.set_issuer(&[issuer]);
        }
        TrustedKey {
            kid,
            key,
            validation,
        }
    }
}

fn describe(kind: &ErrorKind, validation: &Validation) -> AuthError {
    let (reason, detail) = match kind {
        ErrorKind::ExpiredSignature => (Reason::Expired, "token expired".to_owned()),
        ErrorKind::ImmatureSignature => (
            Reason::NotYetValid,
            "token is not valid yet (nbf)".to_owned(),
        ),
        ErrorKind::InvalidAudience => (
            Reason::WrongAudience,
            format!(
                "token audience does not include {:?}",
                validation
                    .aud
                    .iter()
                    .flatten()
                    .next()
                    .map(String::as_str)
                    .unwrap_or_default()
            ),
        ),
        ErrorKind::InvalidIssuer => (
            Reason::WrongIssuer,
            "token issuer is not trusted".to_owned(),
        ),
        ErrorKind::MissingRequiredClaim(claim) => (
            Reason::MissingClaim,
            format!("token lacks the {claim} claim"),
        ),
        ErrorKind::InvalidSignature => (
            Reason::BadSignature,
            "token signature does not verify".to_owned(),
        ),
        ErrorKind::Json(_) => (
            Reason::MissingClaim,
            "token claims are malformed (exp, iat, iss, aud and sub are required)".to_owned(),
        ),
        _ => (Reason::Malformed, "token is invalid".to_owned()),
    };
    AuthError::unauthenticated(reason, detail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use argo_results_proto::token::{TokenClaims, pem_encode};
    use aws_lc_rs::signature::{ECDSA_P384_SHA384_FIXED_SIGNING, EcdsaKeyPair};
    use jsonwebtoken::{EncodingKey, Header};

    fn policy() -> TokenPolicy {
        TokenPolicy {
            audience: "argo-results".into(),
            issuer: Issuer::Any,
            lifetime: Lifetime {
                max: Duration::from_secs(400 * 86_400),
                leeway: Duration::from_secs(30),
            },
        }
    }

    /// A P-384 key set and a function signing claims with its key.
    fn p384() -> (KeySet, impl Fn(&TokenClaims) -> String) {
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P384_SHA384_FIXED_SIGNING, &rng).expect("key");
        let key = EncodingKey::from_ec_pem(pem_encode("PRIVATE KEY", pkcs8.as_ref()).as_bytes())
            .expect("pem");
        let mut jwk = Jwk::from_encoding_key(&key, Algorithm::ES384).expect("jwk");
        jwk.common.key_id = Some("p384".into());
        let keys = KeySet::from_jwk_set(&JwkSet { keys: vec![jwk] }, &policy()).expect("key set");
        let sign = move |claims: &TokenClaims| {
            let mut header = Header::new(Algorithm::ES384);
            header.kid = Some("p384".into());
            jsonwebtoken::encode(&header, claims, &key).expect("sign")
        };
        (keys, sign)
    }

    fn claims(lifetime: Duration) -> TokenClaims {
        TokenClaims::user("issuer", "argo-results", "someone", lifetime)
    }

    #[test]
    fn a_p384_key_verifies_es384_and_nothing_else() {
        let (keys, sign) = p384();
        let token = sign(&claims(Duration::from_secs(60)));
        assert_eq!(keys.verify(&token).expect("ES384 verifies").sub, "someone");
    }

    #[test]
    fn verified_tokens_are_remembered_until_they_expire() {
        let (keys, sign) = p384();
        let token = sign(&claims(Duration::from_secs(60)));
        let first = keys.verify(&token).expect("verified");
        assert_eq!(
            keys.verified.get(&token_digest(&token)),
            Some(first.clone())
        );
        assert_eq!(keys.verify(&token).expect("remembered"), first);
        // A token differing in its signature is checked, not taken from the cache.
        let forged = format!("{}AAAA", &token[..token.len() - 4]);
        assert!(keys.verify(&forged).is_err());
        // An expired token (within the leeway, so it still verifies) is never remembered.
        let mut expired = claims(Duration::from_secs(60));
        expired.exp -= 70;
        let expired = sign(&expired);
        assert!(keys.verify(&expired).is_ok());
        assert_eq!(keys.verified.get(&token_digest(&expired)), None);
    }

    #[test]
    fn refused_tokens_are_remembered_briefly_but_not_yet_valid_ones_are_not() {
        let (keys, sign) = p384();
        let token = sign(&claims(Duration::from_secs(60)));
        let forged = format!("{}AAAA", &token[..token.len() - 4]);
        let refused = keys.verify(&forged).expect_err("forged");
        let remembered = keys.refused.get(&token_digest(&forged));
        assert_eq!(
            remembered.as_ref().map(|(reason, _)| *reason),
            Some(Reason::BadSignature)
        );
        // Replayed, it is refused for the same reason, from the cache.
        assert_eq!(
            keys.verify(&forged).expect_err("replayed").to_string(),
            refused.to_string()
        );
        // The good token is not refused for its forgery's sake.
        assert!(keys.verify(&token).is_ok());
        // A token that will be valid soon is checked again each time.
        let mut early = claims(Duration::from_secs(600));
        early.nbf = Some(early.iat + 300);
        let early = sign(&early);
        assert!(keys.verify(&early).is_err());
        assert!(keys.refused.get(&token_digest(&early)).is_none());
    }

    #[test]
    fn symmetric_keys_are_refused_when_loaded() {
        let refused = KeySet::from_jwks(
            r#"{"keys":[{"kty":"oct","kid":"k","k":"c2VjcmV0"}]}"#,
            &policy(),
        );
        let refused = refused.err().map(|error| error.to_string());
        assert!(
            refused
                .as_deref()
                .is_some_and(|message| message.starts_with("key \"k\": ")),
            "named plainly: {refused:?}"
        );
        assert!(matches!(
            KeySet::from_jwks(r#"{"keys":[]}"#, &policy()),
            Err(KeyError::Empty)
        ));
    }
}
