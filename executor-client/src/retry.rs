//! Retries of transient failures with Argo's executor backoff: from 1 s, doubling, 20 %
//! jitter, capped at 30 s, until an optional deadline.

use std::hash::{BuildHasher, RandomState};
use std::time::Duration;

use argo_results_proto::ProblemCode;
use tokio::time::Instant;

use crate::ClientError;

const FIRST: Duration = Duration::from_secs(1);
const CAP: Duration = Duration::from_secs(30);
const JITTER: f64 = 0.2;

/// What is retried, and when to stop: transient failures, and the refusals in `codes`.
#[derive(Debug, Clone, Copy, Default)]
pub struct RetryPolicy {
    /// When to stop; `None` retries without end.
    pub deadline: Option<Instant>,
    /// Problem codes retried as transient failures are: refusals that a call of the
    /// controller may lift meanwhile.
    pub codes: &'static [ProblemCode],
}

impl RetryPolicy {
    /// Whether `error` is worth another attempt under the policy.
    pub(crate) fn retries(&self, error: &ClientError) -> bool {
        error.is_transient() || error.code().is_some_and(|code| self.codes.contains(&code))
    }
}

/// Statuses that say "try again": timeouts, shed load, a proxy or the server not ready.
pub fn transient_status(status: u16) -> bool {
    matches!(status, 408 | 429 | 502 | 503 | 504)
}

/// A number in [0, 1) from the standard library's per-process random hash keys.
fn random_unit() -> f64 {
    let bits = RandomState::new().hash_one(std::time::SystemTime::now());
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

#[derive(Debug)]
pub(crate) struct Backoff {
    next: Duration,
}

impl Backoff {
    pub fn new() -> Self {
        Backoff { next: FIRST }
    }

    /// The next wait: the current step with ±20 % jitter; the step doubles up to the cap.
    pub fn next(&mut self) -> Duration {
        let base = self.next;
        self.next = (self.next * 2).min(CAP);
        base.mul_f64(1.0 + JITTER * (2.0 * random_unit() - 1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_one_second_to_the_cap_with_bounded_jitter() {
        let mut backoff = Backoff::new();
        let waits: Vec<Duration> = (0..8).map(|_| backoff.next()).collect();
        let bases = [1, 2, 4, 8, 16, 30, 30, 30];
        for (wait, base) in waits.iter().zip(bases) {
            let base = Duration::from_secs(base);
            assert!(
                *wait >= base.mul_f64(0.8) && *wait <= base.mul_f64(1.2),
                "{wait:?} vs {base:?}"
            );
        }
    }

    #[test]
    fn only_timeouts_shedding_and_gateways_are_transient() {
        for status in [408, 429, 502, 503, 504] {
            assert!(transient_status(status));
        }
        for status in [400, 401, 403, 404, 409, 410, 413, 415, 422, 500] {
            assert!(!transient_status(status));
        }
    }
}
