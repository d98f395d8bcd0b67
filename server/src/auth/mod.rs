//! Who is calling and what they may do (docs/api.md, "8. Authentication and roles").
//!
//! A bearer token is verified ([`Verifier`]): offline against a JWKS file or the dev key
//! ([`keys`]), against the cluster's keys fetched through the Kubernetes API
//! ([`kube_keys`]), or by the API server itself ([`token_review`]). Reads and controller
//! operations are then authorized ([`Authorizer`]) by the `--reader` / `--controller` lists
//! or by SubjectAccessReview ([`rbac`]). A token bound to a pod may write only its own
//! node's result ([`pod`]).

mod cache;
pub mod dev;
pub mod jwks_file;
pub mod keys;
pub mod kube_calls;
pub mod kube_keys;
pub mod pod;
pub mod rbac;
pub mod rbac_rules;
pub mod token_review;

use std::collections::BTreeMap;

use argo_results_proto::token::TokenClaims;
use argo_results_proto::{PodRef, Role, Whoami};
use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;

use keys::KeySet;
use kube_keys::KubeKeys;
use rbac::Rbac;
use token_review::TokenReviewer;

/// The Kubernetes API client, for the modes that ask the API server.
#[derive(Clone)]
pub struct KubeApi(pub kube::Client);

impl std::fmt::Debug for KubeApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KubeApi")
    }
}

/// Tokens longer than this are refused before any parsing.
const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// The `user.extra` keys under which Kubernetes names a bound token's pod.
pub const EXTRA_POD_NAME: &str = "authentication.kubernetes.io/pod-name";
pub const EXTRA_POD_UID: &str = "authentication.kubernetes.io/pod-uid";

/// Why a request was refused, as counted in `argo_results_auth_failures_total{reason}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    Missing,
    NotBearer,
    TooLarge,
    Malformed,
    UnknownKey,
    AlgorithmMismatch,
    BadSignature,
    Expired,
    NotYetValid,
    TooLong,
    WrongAudience,
    WrongIssuer,
    MissingClaim,
    SubjectMismatch,
    ReviewDenied,
    Forbidden,
}

impl Reason {
    /// Every reason, so that each is exported at zero from the start.
    pub const ALL: [Reason; 16] = [
        Reason::Missing,
        Reason::NotBearer,
        Reason::TooLarge,
        Reason::Malformed,
        Reason::UnknownKey,
        Reason::AlgorithmMismatch,
        Reason::BadSignature,
        Reason::Expired,
        Reason::NotYetValid,
        Reason::TooLong,
        Reason::WrongAudience,
        Reason::WrongIssuer,
        Reason::MissingClaim,
        Reason::SubjectMismatch,
        Reason::ReviewDenied,
        Reason::Forbidden,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Missing => "missing",
            Reason::NotBearer => "not_bearer",
            Reason::TooLarge => "too_large",
            Reason::Malformed => "malformed",
            Reason::UnknownKey => "unknown_key",
            Reason::AlgorithmMismatch => "algorithm_mismatch",
            Reason::BadSignature => "bad_signature",
            Reason::Expired => "expired",
            Reason::NotYetValid => "not_yet_valid",
            Reason::TooLong => "too_long",
            Reason::WrongAudience => "wrong_audience",
            Reason::WrongIssuer => "wrong_issuer",
            Reason::MissingClaim => "missing_claim",
            Reason::SubjectMismatch => "subject_mismatch",
            Reason::ReviewDenied => "review_denied",
            Reason::Forbidden => "forbidden",
        }
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum AuthError {
    /// No usable credentials: 401.
    #[error("{detail}")]
    Unauthenticated { reason: Reason, detail: String },
    /// Valid credentials without the right: 403.
    #[error("{0}")]
    Forbidden(String),
    /// The keys or the Kubernetes API needed to decide are not reachable: 503.
    #[error("{0}")]
    Unavailable(String),
}

impl AuthError {
    pub fn unauthenticated(reason: Reason, detail: impl Into<String>) -> Self {
        AuthError::Unauthenticated {
            reason,
            detail: detail.into(),
        }
    }

    /// A call to the Kubernetes API failed: its error, which may name the API server's or
    /// etcd's addresses, goes to the log, and the caller hears only what to do.
    pub fn kube_failed(call: &str, error: &kube::Error) -> Self {
        tracing::warn!(%error, call, "the Kubernetes API refused or failed a call");
        AuthError::Unavailable(format!(
            "the Kubernetes API could not answer a {call}; retry later"
        ))
    }

    /// The reason to count this failure under.
    pub fn reason(&self) -> Option<Reason> {
        match self {
            AuthError::Unauthenticated { reason, .. } => Some(*reason),
            AuthError::Forbidden(_) => Some(Reason::Forbidden),
            AuthError::Unavailable(_) => None,
        }
    }
}

/// The verified caller of one request, as Kubernetes would describe the user.
#[derive(Debug, Clone, Default)]
pub struct Caller {
    pub subject: String,
    pub groups: Vec<String>,
    pub uid: Option<String>,
    pub extra: BTreeMap<String, Vec<String>>,
    /// The service account's namespace.
    pub namespace: Option<String>,
    /// The pod a bound token names.
    pub pod: Option<PodRef>,
    /// `--auth none`: every operation is allowed.
    pub unrestricted: bool,
}

impl Caller {
    /// The caller a verified JWT describes, with the groups and extra Kubernetes gives a
    /// service account's token. `sub` must agree with the `kubernetes.io` claim.
    pub fn from_claims(claims: TokenClaims) -> Result<Self, AuthError> {
        let mut caller = Caller {
            subject: claims.sub,
            groups: vec!["system:authenticated".to_owned()],
            ..Caller::default()
        };
        let Some(kubernetes) = claims.kubernetes else {
            return Ok(caller);
        };
        // Kubernetes puts the service account in every token it signs with this claim; one
        // without it would skip the subject check below and act with its `sub` in another
        // namespace's pod.
        let Some(account) = &kubernetes.serviceaccount else {
            return Err(AuthError::unauthenticated(
                Reason::MissingClaim,
                "token's kubernetes.io claim names no service account",
            ));
        };
        let expected = format!(
            "system:serviceaccount:{}:{}",
            kubernetes.namespace, account.name
        );
        if caller.subject != expected {
            return Err(AuthError::unauthenticated(
                Reason::SubjectMismatch,
                format!(
                    "token subject {:?} disagrees with its kubernetes.io claim ({expected})",
                    caller.subject
                ),
            ));
        }
        caller.uid = Some(account.uid.clone());
        caller.groups.splice(
            0..0,
            [
                "system:serviceaccounts".to_owned(),
                format!("system:serviceaccounts:{}", kubernetes.namespace),
            ],
        );
        if let Some(pod) = kubernetes.pod {
            caller
                .extra
                .insert(EXTRA_POD_NAME.to_owned(), vec![pod.name.clone()]);
            caller
                .extra
                .insert(EXTRA_POD_UID.to_owned(), vec![pod.uid.clone()]);
            caller.pod = Some(PodRef {
                name: pod.name,
                uid: pod.uid,
            });
        }
        caller.namespace = Some(kubernetes.namespace);
        Ok(caller)
    }

    /// Whose share of what callers share (waiting places, the answers' memory) a request
    /// takes: a pod's UID, as every pod of a namespace shares its service account, else
    /// the subject.
    pub fn holder(&self) -> &str {
        self.pod.as_ref().map_or(&self.subject, |pod| &pod.uid)
    }
}

/// What an operation needs, as a verb on `argoproj.io/workflowtaskresults`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    Get,
    List,
    Create,
    Delete,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Create => "create",
            Verb::Delete => "delete",
        }
    }

    fn is_read(self) -> bool {
        matches!(self, Verb::Get | Verb::List)
    }
}

/// Subjects granted reader and controller rights.
#[derive(Debug, Clone, Default)]
pub struct RoleLists {
    pub readers: Vec<String>,
    pub controllers: Vec<String>,
}

/// How a token becomes a [`Caller`].
#[derive(Debug)]
pub enum Verifier {
    Keys(KeySet),
    /// `--jwks-file`, re-read when it changes.
    KeysFile(std::sync::Arc<jwks_file::JwksFile>),
    KubeKeys(std::sync::Arc<KubeKeys>),
    TokenReview(TokenReviewer),
}

/// How a caller's rights are decided.
#[derive(Debug)]
pub enum Authorizer {
    Lists(RoleLists),
    Rbac(Rbac),
}

#[derive(Debug)]
struct Tokens {
    verifier: Verifier,
    authorizer: Authorizer,
    /// Authorizes writes with tokens bound to no pod (`--allow-unbound-executor-tokens`).
    unbound: Option<Rbac>,
}

#[derive(Debug)]
enum Mode {
    /// `--auth none`, loopback only.
    Disabled,
    Tokens(Box<Tokens>),
}

#[derive(Debug)]
pub struct Authenticator {
    mode: Mode,
}

fn bearer(headers: &HeaderMap) -> Result<&str, AuthError> {
    let unauthenticated = |reason, detail: &str| Err(AuthError::unauthenticated(reason, detail));
    let Some(value) = headers.get(AUTHORIZATION) else {
        return unauthenticated(Reason::Missing, "missing Authorization: Bearer <token>");
    };
    if value.len() > MAX_TOKEN_BYTES + 7 {
        return unauthenticated(Reason::TooLarge, "token is larger than 16 KiB");
    }
    let Ok(value) = value.to_str() else {
        return unauthenticated(Reason::Malformed, "Authorization header is not ASCII");
    };
    match value.split_once(' ') {
        Some((scheme, token))
            if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() =>
        {
            Ok(token.trim())
        }
        _ => unauthenticated(
            Reason::NotBearer,
            "only Authorization: Bearer <token> is accepted",
        ),
    }
}

impl Authenticator {
    pub fn disabled() -> Self {
        Authenticator {
            mode: Mode::Disabled,
        }
    }

    pub fn tokens(verifier: Verifier, authorizer: Authorizer, unbound: Option<Rbac>) -> Self {
        Authenticator {
            mode: Mode::Tokens(Box::new(Tokens {
                verifier,
                authorizer,
                unbound,
            })),
        }
    }

    /// Whether the keys needed to verify tokens are loaded.
    pub fn ready(&self) -> bool {
        match &self.mode {
            Mode::Tokens(tokens) => match &tokens.verifier {
                Verifier::KubeKeys(keys) => keys.loaded(),
                _ => true,
            },
            Mode::Disabled => true,
        }
    }

    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Caller, AuthError> {
        let verifier = match &self.mode {
            Mode::Disabled => {
                return Ok(Caller {
                    subject: "anonymous (--auth none)".into(),
                    unrestricted: true,
                    ..Caller::default()
                });
            }
            Mode::Tokens(tokens) => &tokens.verifier,
        };
        let token = bearer(headers)?;
        match verifier {
            Verifier::Keys(keys) => Caller::from_claims(keys.verify(token)?),
            Verifier::KeysFile(file) => Caller::from_claims(file.verify(token)?),
            Verifier::KubeKeys(keys) => Caller::from_claims(keys.verify(token).await?),
            Verifier::TokenReview(reviewer) => reviewer.review(token).await,
        }
    }

    /// Allows `verb` in `namespace` (`None`: across namespaces) or says why not.
    pub async fn authorize(
        &self,
        caller: &Caller,
        verb: Verb,
        namespace: Option<&str>,
    ) -> Result<(), AuthError> {
        let authorizer = match &self.mode {
            Mode::Tokens(tokens) if !caller.unrestricted => &tokens.authorizer,
            _ => return Ok(()),
        };
        let allowed = match authorizer {
            Authorizer::Lists(lists) => {
                lists.controllers.contains(&caller.subject)
                    || (verb.is_read() && lists.readers.contains(&caller.subject))
            }
            Authorizer::Rbac(rbac) => rbac.allows(caller, verb, namespace).await?,
        };
        if allowed {
            return Ok(());
        }
        let needs = match authorizer {
            Authorizer::Lists(_) if verb.is_read() => {
                "a --reader or --controller subject".to_owned()
            }
            Authorizer::Lists(_) => "a --controller subject".to_owned(),
            Authorizer::Rbac(_) => format!(
                "RBAC allowing {} on workflowtaskresults.argoproj.io {}",
                verb.as_str(),
                namespace.map_or("in all namespaces".to_owned(), |ns| format!(
                    "in namespace {ns}"
                ))
            ),
        };
        Err(AuthError::Forbidden(format!(
            "{} may not {} results: that takes {needs}",
            caller.subject,
            verb.as_str()
        )))
    }

    /// Decides whether a token bound to no pod may write in `namespace`.
    pub async fn allow_unbound_write(
        &self,
        caller: &Caller,
        namespace: &str,
    ) -> Result<(), AuthError> {
        let unbound = match &self.mode {
            Mode::Tokens(tokens) => tokens.unbound.as_ref(),
            Mode::Disabled => None,
        };
        let Some(unbound) = unbound else {
            return Err(AuthError::Forbidden(format!(
                "{} is not bound to a pod (a Secret-based token, as Argo mounts with \
                 executor.serviceAccountName): only a pod's projected token may report; start \
                 the server with --allow-unbound-executor-tokens to accept such tokens where \
                 RBAC allows create on workflowtaskresults",
                caller.subject
            )));
        };
        if unbound
            .allows(caller, Verb::Create, Some(namespace))
            .await?
        {
            Ok(())
        } else {
            Err(AuthError::Forbidden(format!(
                "{} may not report in namespace {namespace}: RBAC does not allow create on \
                 workflowtaskresults.argoproj.io there",
                caller.subject
            )))
        }
    }

    /// The roles `whoami` shows: decided the way requests are.
    pub async fn roles(&self, caller: &Caller) -> Result<Vec<Role>, AuthError> {
        let mut roles = Vec::new();
        if caller.pod.is_some() {
            roles.push(Role::Pod);
        }
        if self.authorize(caller, Verb::List, None).await.is_ok() {
            roles.push(Role::Reader);
        }
        if self.authorize(caller, Verb::Create, None).await.is_ok() {
            roles.push(Role::Controller);
        }
        Ok(roles)
    }

    pub async fn whoami(&self, caller: &Caller) -> Result<Whoami, AuthError> {
        Ok(Whoami {
            subject: caller.subject.clone(),
            namespace: caller.namespace.clone(),
            pod: caller.pod.clone(),
            roles: self.roles(caller).await?,
        })
    }
}
