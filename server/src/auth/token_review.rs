//! `--token-review`: the API server itself validates each token (TokenReview), for the
//! audience argo-results. Answers are cached by the token's SHA-256 until the token
//! expires or 60 s pass, refusals for 5 s, and a semaphore bounds the reviews in flight so
//! that a flood of tokens cannot overload the API server.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use argo_results_proto::PodRef;
use argo_results_proto::token::TokenClaims;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::{Api, PostParams};
use tokio::sync::Semaphore;

use super::cache::{TokenDigest, TtlCache, token_digest};
use super::{AuthError, Caller, EXTRA_POD_NAME, EXTRA_POD_UID, KubeApi, Reason};

const ACCEPTED_FOR_AT_MOST: Duration = Duration::from_secs(60);
const REFUSED_FOR: Duration = Duration::from_secs(5);
const REVIEWS_IN_FLIGHT: usize = 8;
const CACHED_TOKENS: usize = 10_000;

#[derive(Debug)]
pub struct TokenReviewer {
    client: KubeApi,
    audience: String,
    cache: TtlCache<TokenDigest, Result<Caller, AuthError>>,
    in_flight: Semaphore,
}

/// How long an accepted token's answer may be reused: until it expires, at most 60 s.
fn accepted_for(token: &str) -> Duration {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    jsonwebtoken::dangerous::insecure_decode_claims::<TokenClaims>(token)
        .map(|claims| Duration::from_secs(claims.exp.saturating_sub(now)))
        .unwrap_or(ACCEPTED_FOR_AT_MOST)
        .min(ACCEPTED_FOR_AT_MOST)
}

fn first(extra: &std::collections::BTreeMap<String, Vec<String>>, key: &str) -> Option<String> {
    extra.get(key).and_then(|values| values.first()).cloned()
}

impl TokenReviewer {
    pub fn new(client: KubeApi, audience: String) -> Self {
        TokenReviewer {
            client,
            audience,
            cache: TtlCache::new(CACHED_TOKENS),
            in_flight: Semaphore::new(REVIEWS_IN_FLIGHT),
        }
    }

    pub async fn review(&self, token: &str) -> Result<Caller, AuthError> {
        let key = token_digest(token);
        if let Some(answer) = self.cache.get(&key) {
            return answer;
        }
        let _permit = self
            .in_flight
            .acquire()
            .await
            .map_err(|_| AuthError::Unavailable("token reviews are shut down".into()))?;
        // Another request may have reviewed the same token while this one waited.
        if let Some(answer) = self.cache.get(&key) {
            return answer;
        }
        let answer = self.ask(token).await;
        match &answer {
            Ok(_) => self.cache.insert(key, answer.clone(), accepted_for(token)),
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
            .map_err(|e| AuthError::Unavailable(format!("TokenReview failed: {e}")))?;
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
