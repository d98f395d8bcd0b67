//! What requests may ask of the Kubernetes API on their callers' behalf (TokenReview,
//! SubjectAccessReview): at most `IN_FLIGHT` calls at once and `--kube-api-qps` a second,
//! in bursts of twice that. A request waits at most `MAX_WAIT` for its turn and is then
//! answered `503` with `Retry-After`, so neither a flood of callers nor a slow API server
//! piles up waiting requests, and the API server never sees more than the rate.

use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::{Semaphore, SemaphorePermit};
use tokio::time::Instant;

use super::AuthError;
use crate::rate::Bucket;

/// Calls to the API server in flight at once.
pub const IN_FLIGHT: usize = 16;
/// The longest a request waits for a call's turn.
const MAX_WAIT: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub struct KubeCalls {
    in_flight: Semaphore,
    rate: Mutex<Bucket>,
    qps: u32,
}

impl KubeCalls {
    pub fn new(qps: u32) -> Self {
        let qps = qps.max(1);
        KubeCalls {
            in_flight: Semaphore::new(IN_FLIGHT),
            rate: Mutex::new(Bucket::full(f64::from(qps), 2.0 * f64::from(qps))),
            qps,
        }
    }

    fn busy(&self, what: &str) -> AuthError {
        AuthError::Unavailable(format!(
            "the Kubernetes API is asked at most {IN_FLIGHT} {what}s at once and {} a second \
             (--kube-api-qps), and none was free within {}s; retry later",
            self.qps,
            MAX_WAIT.as_secs()
        ))
    }

    /// Waits for the turn of one call (`what`, e.g. `TokenReview`), at most `MAX_WAIT`.
    pub async fn turn(&self, what: &str) -> Result<SemaphorePermit<'_>, AuthError> {
        let deadline = Instant::now() + MAX_WAIT;
        let permit = tokio::time::timeout_at(deadline, self.in_flight.acquire())
            .await
            .ok()
            .and_then(Result::ok)
            .ok_or_else(|| self.busy(what))?;
        let left = deadline.saturating_duration_since(Instant::now());
        let delay = self
            .rate
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .reserve(1.0, left)
            .ok_or_else(|| self.busy(what))?;
        tokio::time::sleep(delay).await;
        Ok(permit)
    }
}
