//! `--rbac`: rights decided by the RBAC operators already wrote for Argo's task results,
//! through SubjectAccessReview on `argoproj.io/workflowtaskresults` ([`rbac_rules`], the
//! table `--print-rbac-rules` prints). Decisions are cached, allowed for 10 s and denied
//! for 30 s (as the API server's own webhook authorizer caches denials), so a denied
//! caller repeating itself reaches the API server twice a minute at most; the reviews sent
//! are bounded in flight and in rate ([`KubeCalls`]).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::authorization::v1::{SubjectAccessReview, SubjectAccessReviewSpec};
use kube::api::{Api, PostParams};

use super::cache::TtlCache;
use super::kube_calls::KubeCalls;
use super::{AuthError, Caller, KubeApi, Verb, rbac_rules};

const ALLOWED_FOR: Duration = Duration::from_secs(10);
const DENIED_FOR: Duration = Duration::from_secs(30);
const CACHED_DECISIONS: usize = 10_000;

#[derive(Debug)]
pub struct Rbac {
    client: KubeApi,
    cache: TtlCache<String, bool>,
    calls: Arc<KubeCalls>,
}

impl Rbac {
    pub fn new(client: KubeApi, calls: Arc<KubeCalls>) -> Self {
        Rbac {
            client,
            cache: TtlCache::new(CACHED_DECISIONS),
            calls,
        }
    }

    /// Whether `caller` may `verb` workflow task results in `namespace` (`None`: all).
    pub async fn allows(
        &self,
        caller: &Caller,
        verb: Verb,
        namespace: Option<&str>,
    ) -> Result<bool, AuthError> {
        let key = format!(
            "{}\n{:?}\n{:?}\n{:?}\n{}\n{}",
            caller.subject,
            caller.uid,
            caller.groups,
            caller.extra,
            verb.as_str(),
            namespace.unwrap_or("")
        );
        if let Some(allowed) = self.cache.get(&key) {
            return Ok(allowed);
        }
        let _turn = self.calls.turn("SubjectAccessReview").await?;
        // Another request may have asked the same while this one waited.
        if let Some(allowed) = self.cache.get(&key) {
            return Ok(allowed);
        }
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                resource_attributes: Some(rbac_rules::resource_attributes(verb, namespace)),
                user: Some(caller.subject.clone()),
                groups: Some(caller.groups.clone()),
                uid: caller.uid.clone(),
                extra: Some(caller.extra.clone()),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let reviewed = Api::<SubjectAccessReview>::all(self.client.0.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|error| AuthError::kube_failed("SubjectAccessReview", &error))?;
        let allowed = reviewed.status.is_some_and(|status| status.allowed);
        self.cache
            .insert(key, allowed, if allowed { ALLOWED_FOR } else { DENIED_FOR });
        Ok(allowed)
    }
}
