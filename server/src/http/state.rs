//! What the handlers share: the store, authentication, metrics, admission and limits.

use std::sync::Arc;

use tokio::sync::watch;

use super::admission::Admission;
use super::observe::RefusalLog;
use super::pod_writes::PodWrites;
use super::probes::Readiness;
use crate::auth::{AuthError, Authenticator, Caller, Verb};
use crate::listener::Guard;
use crate::metrics::Metrics;
use crate::store::Store;
use crate::validate::Limits;

/// What the handlers share. Axum clones it for each request and each middleware, so it
/// is one `Arc` to clone.
#[derive(Debug, Clone)]
pub struct AppState(Arc<Shared>);

impl AppState {
    pub fn new(shared: Shared) -> Self {
        AppState(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

#[derive(Debug)]
pub struct Shared {
    pub store: Arc<Store>,
    pub auth: Authenticator,
    pub metrics: Arc<Metrics>,
    pub limits: Limits,
    /// Turns `true` at SIGTERM or SIGINT: `/readyz` answers 503 from then on, while the
    /// server still serves for `--shutdown-delay`.
    pub draining: watch::Receiver<bool>,
    /// Turns `true` when the server starts shutting down; long polls end early then.
    pub stopping: watch::Receiver<bool>,
    /// What API requests may hold: slots in flight, watches, body memory.
    pub admission: Admission,
    /// What each pod may still change (`--pod-write-budget`).
    pub pod_writes: PodWrites,
    /// The API listener's connections: readiness fails while they are all in use.
    pub api_connections: Guard,
    /// The store's last answer to `/readyz`, kept a second.
    pub readiness: Readiness,
    /// How many `401` lines the log took this second.
    pub refusal_log: RefusalLog,
}

impl AppState {
    /// Counts a refusal by its reason on the way out, and says it in the request's log line.
    pub(super) fn counted<T>(&self, decided: Result<T, AuthError>) -> Result<T, AuthError> {
        if let Err(error) = &decided {
            let reason = error.reason();
            self.metrics.auth_failure(reason);
            // Why, in the request's log line (its span).
            if let Some(reason) = reason {
                tracing::Span::current().record("reason", reason.as_str());
            }
        }
        decided
    }

    /// Allows `verb` on results in `namespace` (`None`: all namespaces) or refuses.
    pub(super) async fn authorize(
        &self,
        caller: &Caller,
        verb: Verb,
        namespace: Option<&str>,
    ) -> Result<(), AuthError> {
        self.counted(self.auth.authorize(caller, verb, namespace).await)
    }
}
