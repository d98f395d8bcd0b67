//! `--token-review`: the API server itself validates each token (TokenReview), for the
//! audience argo-results. Only a token that could pass is sent: a JWT whose unverified
//! `exp` and `aud` are acceptable, so garbage from a stranger never reaches the API
//! server. Answers are cached by the token's SHA-256 until the token expires or 60 s
//! pass, refusals for 60 s (a refused token never becomes valid), and the reviews sent
//! are bounded in flight and in rate ([`KubeCalls`]).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use argo_results_proto::PodRef;
use argo_results_proto::token::{Audience, TokenClaims};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::{Api, PostParams};

use super::cache::{TokenDigest, TtlCache, token_digest};
use super::kube_calls::KubeCalls;
use super::{AuthError, Caller, EXTRA_POD_NAME, EXTRA_POD_UID, KubeApi, Reason};

const ACCEPTED_FOR_AT_MOST: Duration = Duration::from_secs(60);
const REFUSED_FOR: Duration = Duration::from_secs(60);
const CACHED_TOKENS: usize = 10_000;
/// Clock skew tolerated on `exp`, as when tokens are verified offline.
const LEEWAY_SECONDS: u64 = 30;

#[derive(Debug)]
pub struct TokenReviewer {
    client: KubeApi,
    audience: String,
    cache: TtlCache<TokenDigest, Result<Caller, AuthError>>,
    calls: Arc<KubeCalls>,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

/// The claims of a token worth a review: a JWT, not expired, for `audience`. Its
/// signature is for the API server to judge.
fn plausible(token: &str, audience: &str) -> Result<TokenClaims, AuthError> {
    let claims = jsonwebtoken::dangerous::insecure_decode::<TokenClaims>(token)
        .map_err(|_| {
            AuthError::unauthenticated(Reason::Malformed, "malformed token: not a signed JWT")
        })?
        .claims;
    if claims.exp + LEEWAY_SECONDS < now() {
        return Err(AuthError::unauthenticated(Reason::Expired, "token expired"));
    }
    let for_us = match &claims.aud {
        Audience::One(one) => one == audience,
        Audience::Many(many) => many.iter().any(|aud| aud == audience),
    };
    if !for_us {
        return Err(AuthError::unauthenticated(
            Reason::WrongAudience,
            format!("token audience does not include {audience:?}"),
        ));
    }
    Ok(claims)
}

fn first(extra: &std::collections::BTreeMap<String, Vec<String>>, key: &str) -> Option<String> {
    extra.get(key).and_then(|values| values.first()).cloned()
}

impl TokenReviewer {
    pub fn new(client: KubeApi, audience: String, calls: Arc<KubeCalls>) -> Self {
        TokenReviewer {
            client,
            audience,
            cache: TtlCache::new(CACHED_TOKENS),
            calls,
        }
    }

    pub async fn review(&self, token: &str) -> Result<Caller, AuthError> {
        let key = token_digest(token);
        if let Some(answer) = self.cache.get(&key) {
            return answer;
        }
        let claims = plausible(token, &self.audience)?;
        let _turn = self.calls.turn("TokenReview").await?;
        // Another request may have reviewed the same token while this one waited.
        if let Some(answer) = self.cache.get(&key) {
            return answer;
        }
        let answer = self.ask(token).await;
        match &answer {
            Ok(_) => {
                // Reused until the token expires, at most a minute.
                let left = Duration::from_secs(claims.exp.saturating_sub(now()));
                self.cache
                    .insert(key, answer.clone(), left.min(ACCEPTED_FOR_AT_MOST))
            }
            Err(AuthError::Unauthenticated { .. }) => {
                self.cache.insert(key, answer.clone(), REFUSED_FOR)
            }
            Err(_) => {}
        }
        answer
    }

    async fn ask(&self, token: &str) -> Result<Caller, AuthError> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                audiences: Some(vec![self.audience.clone()]),
            },
            ..TokenReview::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.0.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|error| AuthError::kube_failed("TokenReview", &error))?;
        let status = reviewed.status.unwrap_or_default();
        let refused =
            |detail: String| Err(AuthError::unauthenticated(Reason::ReviewDenied, detail));
        if status.authenticated != Some(true) {
            return refused(format!(
                "the API server refused the token: {}",
                status.error.unwrap_or_else(|| "not authenticated".into())
            ));
        }
        if !status
            .audiences
            .unwrap_or_default()
            .contains(&self.audience)
        {
            return refused(format!(
                "the token is not for the audience {}",
                self.audience
            ));
        }
        let user = status.user.unwrap_or_default();
        let subject = user.username.unwrap_or_default();
        let extra = user.extra.unwrap_or_default();
        let namespace = subject
            .strip_prefix("system:serviceaccount:")
            .and_then(|rest| rest.split_once(':'))
            .map(|(namespace, _)| namespace.to_owned());
        let pod = first(&extra, EXTRA_POD_NAME)
            .zip(first(&extra, EXTRA_POD_UID))
            .map(|(name, uid)| PodRef { name, uid });
        Ok(Caller {
            subject,
            groups: user.groups.unwrap_or_default(),
            uid: user.uid,
            extra,
            namespace,
            pod,
            unrestricted: false,
        })
    }
}
