//! The flags of authentication and authorization, and the authenticator they make.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use argo_results_proto::token::{DEV_ADMIN_SUBJECT, DEV_ISSUER};
use clap::{Args, ValueEnum};

use super::values::{DAY, MINUTE, ZERO, duration_between};
use crate::auth::dev::{self, DevKey, DevKeyError};
use crate::auth::jwks_file::{JwksFile, JwksFileError};
use crate::auth::keys::{Issuer, Lifetime, TokenPolicy};
use crate::auth::kube_calls::KubeCalls;
use crate::auth::kube_keys::KubeKeys;
use crate::auth::rbac::Rbac;
use crate::auth::token_review::TokenReviewer;
use crate::auth::{Authenticator, Authorizer, KubeApi, RoleLists, Verifier};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AuthMode {
    /// Validate tokens: with --jwks-file when given, else (on loopback) with a dev key.
    Tokens,
    /// No authentication at all. Loopback only; for experiments.
    None,
}

#[derive(Debug, Clone, Args)]
pub struct AuthFlags {
    /// Trust the keys of this JWKS file (offline validation of service-account tokens;
    /// re-read when it changes).
    #[arg(long, env = "ARGO_RESULTS_JWKS_FILE", display_order = 120)]
    pub jwks_file: Option<PathBuf>,

    /// Trust the cluster's service-account keys, fetched through the Kubernetes API
    /// (in-cluster config or KUBECONFIG) and refreshed as the cluster rotates them.
    #[arg(long, env = "ARGO_RESULTS_KUBE_JWKS", display_order = 130,
          conflicts_with_all = ["jwks_file", "token_review"])]
    pub kube_jwks: bool,

    /// Validate tokens with the Kubernetes TokenReview API instead (answers cached).
    #[arg(
        long,
        env = "ARGO_RESULTS_TOKEN_REVIEW",
        conflicts_with = "jwks_file",
        display_order = 140
    )]
    pub token_review: bool,

    /// Decide reader and controller rights with SubjectAccessReview on
    /// argoproj.io/workflowtaskresults instead of --reader / --controller.
    #[arg(long, env = "ARGO_RESULTS_RBAC", display_order = 150,
          conflicts_with_all = ["readers", "controllers"])]
    pub rbac: bool,

    /// Accept writes with service-account tokens bound to no pod (Argo's
    /// executor.serviceAccountName) where RBAC allows create on workflowtaskresults.
    #[arg(
        long,
        env = "ARGO_RESULTS_ALLOW_UNBOUND_EXECUTOR_TOKENS",
        display_order = 160
    )]
    pub allow_unbound_executor_tokens: bool,

    /// TokenReviews and SubjectAccessReviews sent per second at most, in bursts of twice
    /// as many and 16 at once; a request that would wait more than a second for its turn
    /// answers 503 with Retry-After.
    #[arg(long, env = "ARGO_RESULTS_KUBE_API_QPS", default_value_t = 50, display_order = 170,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub kube_api_qps: u32,

    /// Required `iss` of tokens. Required with --jwks-file unless --any-issuer is given;
    /// --kube-jwks learns it from the cluster's OIDC discovery when unset.
    #[arg(long, env = "ARGO_RESULTS_ISSUER", display_order = 180)]
    pub issuer: Option<String>,

    /// Accept tokens of any issuer (`iss` must still be present): with --jwks-file, trust
    /// whoever the JWKS's keys sign for; with --kube-jwks, also the cluster's former
    /// issuers. Roles go by subject alone, so the subjects of every such issuer are one:
    /// for issuers that are one authority only.
    #[arg(
        long,
        env = "ARGO_RESULTS_ANY_ISSUER",
        conflicts_with = "issuer",
        display_order = 190
    )]
    pub any_issuer: bool,

    /// Required `aud` of tokens.
    #[arg(long, env = "ARGO_RESULTS_AUDIENCE", display_order = 200,
          default_value = argo_results_proto::token::DEFAULT_AUDIENCE)]
    pub audience: String,

    /// Longest a token verified by its signature may live (`exp` - `iat`). The default
    /// admits every token Kubernetes issues, including projected tokens its API server
    /// extends to a year (--service-account-extend-token-expiration).
    #[arg(long, env = "ARGO_RESULTS_MAX_TOKEN_LIFETIME", default_value = "400d", display_order = 210,
          value_parser = duration_between(MINUTE, 3650 * DAY))]
    pub max_token_lifetime: Duration,

    /// Clock skew tolerated on a token's `exp`, `nbf` and `iat`, at most 5m.
    #[arg(long, env = "ARGO_RESULTS_CLOCK_LEEWAY", default_value = "30s", display_order = 220,
          value_parser = duration_between(ZERO, 5 * MINUTE))]
    pub clock_leeway: Duration,

    /// Subject allowed to read everything; repeatable (env: comma-separated).
    #[arg(
        long = "reader",
        env = "ARGO_RESULTS_READER",
        value_delimiter = ',',
        display_order = 230
    )]
    pub readers: Vec<String>,

    /// Subject allowed to read and to perform controller operations; repeatable.
    #[arg(
        long = "controller",
        env = "ARGO_RESULTS_CONTROLLER",
        value_delimiter = ',',
        display_order = 240
    )]
    pub controllers: Vec<String>,

    /// Pods may report only the nodes the controller registered for them (an expectation
    /// naming the pod), so no pod can win a race for another's node or invent a workflow
    /// incarnation [default: on with --jwks-file, --kube-jwks or --token-review; off with
    /// dev auth and --auth none, where the first pod to report binds the result].
    #[arg(
        long,
        env = "ARGO_RESULTS_REQUIRE_EXPECTATION",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_name = "BOOL",
        display_order = 250
    )]
    pub require_expectation: Option<bool>,

    /// `none` turns authentication off (refused unless listening on loopback).
    #[arg(
        long,
        env = "ARGO_RESULTS_AUTH",
        value_enum,
        default_value = "tokens",
        display_order = 260
    )]
    pub auth: AuthMode,
}

/// Why the flags could not make an authenticator.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("--auth none is refused on {0}: it is allowed on a loopback address only")]
    UnauthenticatedOnNetwork(SocketAddr),
    #[error(
        "no token validation is configured for {0}: give --jwks-file, --kube-jwks or \
         --token-review, or listen on a loopback address to use the dev key"
    )]
    NoValidation(SocketAddr),
    #[error(
        "--jwks-file needs --issuer ISS, the `iss` its tokens must carry, or --any-issuer \
         to trust every issuer its keys sign for"
    )]
    IssuerRequired,
    #[error("--jwks-file {path}: {source}")]
    Jwks { path: String, source: JwksFileError },
    #[error("Kubernetes API (in-cluster config or KUBECONFIG): {0}")]
    Kube(kube::Error),
    #[error("dev key: {0}")]
    DevKey(#[from] DevKeyError),
}

impl AuthFlags {
    /// How requests listening on `listen` are authenticated and authorized, and the dev
    /// key (kept in `data_dir`) when the embedded default made one.
    pub async fn authenticator(
        &self,
        listen: SocketAddr,
        data_dir: &Path,
    ) -> Result<(Authenticator, Option<DevKey>), AuthError> {
        let loopback = listen.ip().is_loopback();
        if self.auth == AuthMode::None {
            if !loopback {
                return Err(AuthError::UnauthenticatedOnNetwork(listen));
            }
            tracing::warn!(
                "AUTHENTICATION IS OFF (--auth none): anyone who can reach {listen} may read and write every result"
            );
            return Ok((Authenticator::disabled(), None));
        }
        let needs_kube =
            self.kube_jwks || self.token_review || self.rbac || self.allow_unbound_executor_tokens;
        let kube = if needs_kube {
            let client = kube::Client::try_default().await.map_err(AuthError::Kube)?;
            Some(KubeApi(client))
        } else {
            None
        };
        // Given, or (--any-issuer) any; `None`: the cluster's, for --kube-jwks.
        let issuer = match (&self.issuer, self.any_issuer) {
            (Some(issuer), _) => Some(Issuer::Only(issuer.clone())),
            (None, true) => Some(Issuer::Any),
            (None, false) => None,
        };
        let calls = Arc::new(KubeCalls::new(self.kube_api_qps));
        let lifetime = Lifetime {
            max: self.max_token_lifetime,
            leeway: self.clock_leeway,
        };
        let mut roles = RoleLists {
            readers: self.readers.clone(),
            controllers: self.controllers.clone(),
        };
        let mut dev = None;
        let verifier = match (&self.jwks_file, &kube) {
            (Some(path), _) => {
                let policy = TokenPolicy {
                    audience: self.audience.clone(),
                    issuer: issuer.ok_or(AuthError::IssuerRequired)?,
                    lifetime,
                };
                let file =
                    JwksFile::watch(path.clone(), policy).map_err(|source| AuthError::Jwks {
                        path: path.display().to_string(),
                        source,
                    })?;
                Verifier::KeysFile(file)
            }
            (None, Some(kube)) if self.kube_jwks => Verifier::KubeKeys(KubeKeys::start(
                kube.clone(),
                self.audience.clone(),
                issuer,
                lifetime,
            )),
            (None, Some(kube)) if self.token_review => Verifier::TokenReview(TokenReviewer::new(
                kube.clone(),
                self.audience.clone(),
                Arc::clone(&calls),
            )),
            _ if loopback => {
                let policy = TokenPolicy {
                    audience: self.audience.clone(),
                    issuer: Issuer::Only(DEV_ISSUER.to_owned()),
                    lifetime,
                };
                let (key, keys) = dev::load_or_create(data_dir, &policy)?;
                dev = Some(key);
                roles.readers.push(DEV_ADMIN_SUBJECT.to_owned());
                roles.controllers.push(DEV_ADMIN_SUBJECT.to_owned());
                Verifier::Keys(keys)
            }
            _ => return Err(AuthError::NoValidation(listen)),
        };
        let authorizer = match &kube {
            Some(kube) if self.rbac => {
                Authorizer::Rbac(Rbac::new(kube.clone(), Arc::clone(&calls)))
            }
            _ => Authorizer::Lists(roles),
        };
        let unbound = kube
            .filter(|_| self.allow_unbound_executor_tokens)
            .map(|kube| Rbac::new(kube, calls));
        Ok((Authenticator::tokens(verifier, authorizer, unbound), dev))
    }

    /// Whether pods may report only the nodes registered for them: on by default where
    /// tokens are validated for real, off under dev auth and `--auth none`.
    pub fn require_expectation(&self, dev: bool) -> bool {
        self.require_expectation
            .unwrap_or(!dev && self.auth == AuthMode::Tokens)
    }
}
