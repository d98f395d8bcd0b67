//! Who is calling and what they may do (API section 8).
//!
//! A bearer token is verified offline against trusted keys ([`keys`]); its subject is mapped
//! to reader and controller roles by the `--reader` / `--controller` lists; a token naming a
//! pod (`kubernetes.io.pod`) may write only its own node's result ([`pod`]).

pub mod dev;
pub mod keys;
pub mod pod;

use argo_results_proto::token::TokenClaims;
use argo_results_proto::{PodRef, Role, Whoami};
use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;

use keys::KeySet;

/// Tokens longer than this are refused before any parsing.
const MAX_TOKEN_BYTES: usize = 16 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// No usable credentials: 401.
    #[error("{0}")]
    Unauthenticated(String),
    /// Valid credentials without the right: 403.
    #[error("{0}")]
    Forbidden(String),
}

/// The verified caller of one request.
#[derive(Debug, Clone)]
pub struct Caller {
    pub subject: String,
    pub namespace: Option<String>,
    pub pod: Option<PodRef>,
    pub roles: Vec<Role>,
    /// `--auth none`: every operation is allowed.
    pub unrestricted: bool,
}

impl Caller {
    /// Fails unless the caller holds `role`; a controller is also a reader.
    pub fn require(&self, role: Role) -> Result<(), AuthError> {
        let held = self.unrestricted
            || self.roles.contains(&role)
            || (role == Role::Reader && self.roles.contains(&Role::Controller));
        if held {
            return Ok(());
        }
        let what = match role {
            Role::Reader => "read results: that takes a --reader or --controller subject",
            Role::Controller => "perform controller operations: that takes a --controller subject",
            Role::Pod => "report a result: that takes a pod's projected service-account token",
        };
        Err(AuthError::Forbidden(format!(
            "{} may not {what}",
            self.subject
        )))
    }

    pub fn whoami(&self) -> Whoami {
        Whoami {
            subject: self.subject.clone(),
            namespace: self.namespace.clone(),
            pod: self.pod.clone(),
            roles: self.roles.clone(),
        }
    }
}

/// Subjects granted reader and controller rights.
#[derive(Debug, Clone, Default)]
pub struct RoleLists {
    pub readers: Vec<String>,
    pub controllers: Vec<String>,
}

#[derive(Debug)]
enum Mode {
    /// `--auth none`, loopback only.
    Disabled,
    Tokens {
        keys: KeySet,
        roles: RoleLists,
    },
}

#[derive(Debug)]
pub struct Authenticator {
    mode: Mode,
}

impl Authenticator {
    pub fn disabled() -> Self {
        Authenticator {
            mode: Mode::Disabled,
        }
    }

    pub fn tokens(keys: KeySet, roles: RoleLists) -> Self {
        Authenticator {
            mode: Mode::Tokens { keys, roles },
        }
    }

    pub fn authenticate(&self, headers: &HeaderMap) -> Result<Caller, AuthError> {
        let (keys, roles) = match &self.mode {
            Mode::Disabled => {
                return Ok(Caller {
                    subject: "anonymous (--auth none)".into(),
                    namespace: None,
                    pod: None,
                    roles: vec![Role::Reader, Role::Controller],
                    unrestricted: true,
                });
            }
            Mode::Tokens { keys, roles } => (keys, roles),
        };
        let token = bearer(headers)?;
        let claims = keys.verify(token)?;
        caller_from(claims, roles)
    }
}

fn bearer(headers: &HeaderMap) -> Result<&str, AuthError> {
    let unauthenticated = |detail: &str| Err(AuthError::Unauthenticated(detail.into()));
    let Some(value) = headers.get(AUTHORIZATION) else {
        return unauthenticated("missing Authorization: Bearer <token>");
    };
    if value.len() > MAX_TOKEN_BYTES + 7 {
        return unauthenticated("token is larger than 16 KiB");
    }
    let Ok(value) = value.to_str() else {
        return unauthenticated("Authorization header is not ASCII");
    };
    match value.split_once(' ') {
        Some((scheme, token))
            if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() =>
        {
            Ok(token.trim())
        }
        _ => unauthenticated("only Authorization: Bearer <token> is accepted"),
    }
}

fn caller_from(claims: TokenClaims, roles: &RoleLists) -> Result<Caller, AuthError> {
    let mut granted = Vec::new();
    let (namespace, pod) = match claims.kubernetes {
        Some(kubernetes) => {
            if let Some(account) = &kubernetes.serviceaccount {
                let expected = format!(
                    "system:serviceaccount:{}:{}",
                    kubernetes.namespace, account.name
                );
                if claims.sub != expected {
                    return Err(AuthError::Unauthenticated(format!(
                        "token subject {:?} disagrees with its kubernetes.io claim ({expected})",
                        claims.sub
                    )));
                }
            }
            let pod = kubernetes.pod.map(|pod| PodRef {
                name: pod.name,
                uid: pod.uid,
            });
            if pod.is_some() {
                granted.push(Role::Pod);
            }
            (Some(kubernetes.namespace), pod)
        }
        None => (None, None),
    };
    if roles.readers.contains(&claims.sub) {
        granted.push(Role::Reader);
    }
    if roles.controllers.contains(&claims.sub) {
        granted.push(Role::Controller);
    }
    Ok(Caller {
        subject: claims.sub,
        namespace,
        pod,
        roles: granted,
        unrestricted: false,
    })
}
