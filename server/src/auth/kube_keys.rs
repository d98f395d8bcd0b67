//! `--kube-jwks`: the cluster's service-account signing keys, fetched through the API
//! server (OIDC discovery, then `/openid/v1/jwks`) and verified offline.
//!
//! The keys are refreshed every 10 minutes and when a token names an unknown `kid` (one
//! fetch at a time, at most once per 30 s, so a flood of forged kids cannot hammer the API
//! server). A failed refresh keeps the last good keys.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use argo_results_proto::token::TokenClaims;
use axum::http::Request;
use serde::Deserialize;
use tokio::sync::Mutex;
use tokio::time::Instant;

use super::keys::{Issuer, KeySet, Lifetime, TokenPolicy};
use super::{AuthError, KubeApi, Reason};

const REFRESH_EVERY: Duration = Duration::from_secs(600);
const UNKNOWN_KID_REFRESH_AT_MOST_EVERY: Duration = Duration::from_secs(30);
/// Retry interval while no key set has been loaded yet.
const FIRST_LOAD_RETRY: Duration = Duration::from_secs(2);

#[derive(Debug, Deserialize)]
struct Discovery {
    issuer: String,
}

#[derive(Debug)]
pub struct KubeKeys {
    client: KubeApi,
    audience: String,
    /// `None`: the issuer the cluster's OIDC discovery names.
    issuer: Option<Issuer>,
    lifetime: Lifetime,
    keys: RwLock<Option<Arc<KeySet>>>,
    /// When the last fetch started; held while fetching, so fetches never overlap.
    last_fetch: Mutex<Option<Instant>>,
}

impl KubeKeys {
    /// Starts loading and refreshing the keys in the background.
    pub fn start(
        client: KubeApi,
        audience: String,
        issuer: Option<Issuer>,
        lifetime: Lifetime,
    ) -> Arc<Self> {
        let keys = Arc::new(KubeKeys {
            client,
            audience,
            issuer,
            lifetime,
            keys: RwLock::new(None),
            last_fetch: Mutex::new(None),
        });
        let refreshing = Arc::clone(&keys);
        tokio::spawn(async move {
            loop {
                refreshing.refresh(Duration::ZERO).await;
                let wait = if refreshing.loaded() {
                    REFRESH_EVERY
                } else {
                    FIRST_LOAD_RETRY
                };
                tokio::time::sleep(wait).await;
            }
        });
        keys
    }

    pub fn loaded(&self) -> bool {
        self.current().is_some()
    }

    fn current(&self) -> Option<Arc<KeySet>> {
        self.keys.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    async fn get(&self, path: &str) -> Result<String, String> {
        let request = Request::get(path)
            .body(Vec::new())
            .map_err(|e| e.to_string())?;
        self.client
            .0
            .request_text(request)
            .await
            .map_err(|e| format!("GET {path}: {e}"))
    }

    async fn fetch(&self) -> Result<KeySet, String> {
        let discovery: Discovery =
            serde_json::from_str(&self.get("/.well-known/openid-configuration").await?)
                .map_err(|e| format!("OIDC discovery: {e}"))?;
        let policy = TokenPolicy {
            audience: self.audience.clone(),
            issuer: self
                .issuer
                .clone()
                .unwrap_or(Issuer::Only(discovery.issuer)),
            lifetime: self.lifetime,
        };
        KeySet::from_jwks(&self.get("/openid/v1/jwks").await?, &policy)
            .map_err(|e| format!("JWKS: {e}"))
    }

    /// Fetches the keys unless a fetch started less than `at_most_every` ago.
    async fn refresh(&self, at_most_every: Duration) {
        let mut last = self.last_fetch.lock().await;
        if last.is_some_and(|at| at.elapsed() < at_most_every) {
            return;
        }
        *last = Some(Instant::now());
        match self.fetch().await {
            Ok(keys) => {
                *self.keys.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(keys));
                tracing::info!("service-account keys loaded from the Kubernetes API");
            }
            Err(error) => {
                tracing::warn!(%error, "service-account keys not refreshed; keeping the last ones")
            }
        }
    }

    pub async fn verify(&self, token: &str) -> Result<TokenClaims, AuthError> {
        let not_loaded = || {
            AuthError::Unavailable("the cluster's service-account keys are not loaded yet".into())
        };
        let keys = self.current().ok_or_else(not_loaded)?;
        match keys.verify(token) {
            Err(AuthError::Unauthenticated {
                reason: Reason::UnknownKey,
                ..
            }) => {
                // The cluster may have rotated its key: look again, then judge.
                self.refresh(UNKNOWN_KID_REFRESH_AT_MOST_EVERY).await;
                self.current().ok_or_else(not_loaded)?.verify(token)
            }
            verified => verified,
        }
    }
}
