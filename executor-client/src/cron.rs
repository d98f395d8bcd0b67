//! One cron tick run the safe way (docs/controller-integration.md, "Cron schedules"): claim
//! it under a lease, create its workflow under the claimed name, settle. A controller that
//! dies in between loses its lease and the next one takes the tick over under the same
//! name, so the workflow is created once (Kubernetes answers the second create
//! `AlreadyExists`) and the tick is never dropped.
//!
//! ```no_run
//! # async fn example(client: argo_results_client::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use argo_results_client::cron::{Submission, Tick, run_tick};
//! use argo_results_client::proto::ClaimRequest;
//!
//! let request = ClaimRequest {
//!     cron_workflow_uid: "8e2a6f0c-...".into(),
//!     scheduled_time: "2026-11-29T17:00:00Z".into(),
//!     // Argo's `getChildWorkflowName`: `<cron>-<unix scheduled time>`.
//!     workflow_name: "nightly-1795971600".into(),
//!     lease_seconds: None,
//! };
//! let tick = run_tick(&client, "argo", "nightly", &request, async |claim| {
//!     // Apply concurrencyPolicy, then create `claim.workflow_name`; on AlreadyExists,
//!     // read the workflow back and answer `Submission::AlreadyExists` with its UID.
//!     Ok::<_, std::io::Error>(Submission::Created { uid: "5d0c9f5e-...".into() })
//! })
//! .await?;
//! if let Tick::Held { retry_after: Some(wait), .. } = tick {
//!     // Held by a claim that is not settled yet: look again after `wait`.
//! }
//! # Ok(())
//! # }
//! ```

use std::time::Duration;

use argo_results_proto::{
    Claim, ClaimRequest, ClaimState, ProblemCode, SettleOutcome, SettleRequest,
};

use crate::{Client, ClientError};

/// What the caller's step did with the tick it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Submission {
    /// Kubernetes created the claimed workflow; its UID.
    Created { uid: String },
    /// Kubernetes answered `AlreadyExists`: an earlier holder of the tick created it before
    /// it lost its lease. It counts as created; its UID, read back.
    AlreadyExists { uid: String },
    /// The tick is not run (`concurrencyPolicy: Forbid` with an active run, `suspend`,
    /// a `when` that is false, `startingDeadlineSeconds` passed); the reason is recorded.
    Skipped { reason: String },
}

/// How the tick ended for this controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tick {
    /// This controller settled the tick; `state` says how.
    Settled(Claim),
    /// Another claim holds the tick or settled it; nothing was done. While `current` is
    /// `claimed`, `retry_after` is its lease: a retry after it takes the tick over, unless
    /// the holder settled meanwhile.
    Held {
        current: Claim,
        retry_after: Option<Duration>,
    },
    /// The tick was taken over while this controller worked on it: its new holder creates
    /// the same workflow name and settles. Stop; touch nothing of the tick.
    LeaseLost { current: Claim },
}

/// A tick that did not end.
#[derive(Debug, thiserror::Error)]
pub enum TickError<E> {
    /// No claim was taken.
    #[error("claim: {0}")]
    Claim(ClientError),
    /// The caller's step failed; the lease is still held until `leaseExpiresAt`. Retry with
    /// [`finish`] and the same claim, or leave the tick to whoever claims it after the lease.
    #[error("tick {} ({}): {error}", claim.scheduled_time, claim.workflow_name)]
    Submit { claim: Box<Claim>, error: E },
    /// The settle failed. Retry it (it is idempotent) with [`finish`], the same claim and a
    /// step answering `submission` again.
    #[error("settle tick {}: {error}", claim.scheduled_time)]
    Settle {
        claim: Box<Claim>,
        submission: Submission,
        error: ClientError,
    },
}

/// The claim in a refusal's `current`.
fn current(error: &ClientError) -> Option<Claim> {
    let raw = error.problem()?.current.as_ref()?;
    serde_json::from_str(raw.get()).ok()
}

/// A claim's lease length: its expiry and its start are both the database's clock, so
/// their difference means the same on any machine.
fn lease(claim: &Claim) -> Option<Duration> {
    let start: jiff::Timestamp = claim.claimed_at.parse().ok()?;
    let end: jiff::Timestamp = claim.lease_expires_at.parse().ok()?;
    Duration::try_from(end.duration_since(start)).ok()
}

/// Claims the tick, runs `submit` with the claim if this controller now holds it, and
/// settles with what `submit` answered.
pub async fn run_tick<E>(
    client: &Client,
    namespace: &str,
    cron_workflow: &str,
    request: &ClaimRequest,
    submit: impl AsyncFnOnce(&Claim) -> Result<Submission, E>,
) -> Result<Tick, TickError<E>> {
    let claim = match client.claim(namespace, cron_workflow, request).await {
        Ok(claim) => claim,
        Err(error) if error.code() == Some(ProblemCode::AlreadyClaimed) => {
            let Some(current) = current(&error) else {
                return Err(TickError::Claim(error));
            };
            let retry_after = (current.state == ClaimState::Claimed)
                .then(|| lease(&current))
                .flatten();
            return Ok(Tick::Held {
                current,
                retry_after,
            });
        }
        Err(error) => return Err(TickError::Claim(error)),
    };
    finish(client, namespace, cron_workflow, claim, submit).await
}

/// Runs `submit` for a claim this controller holds (the `201` of a claim) and settles.
pub async fn finish<E>(
    client: &Client,
    namespace: &str,
    cron_workflow: &str,
    claim: Claim,
    submit: impl AsyncFnOnce(&Claim) -> Result<Submission, E>,
) -> Result<Tick, TickError<E>> {
    let submission = match submit(&claim).await {
        Ok(submission) => submission,
        Err(error) => {
            return Err(TickError::Submit {
                claim: Box::new(claim),
                error,
            });
        }
    };
    let (outcome, workflow_uid, reason) = match &submission {
        Submission::Created { uid } | Submission::AlreadyExists { uid } => {
            (SettleOutcome::Submitted, Some(uid.clone()), None)
        }
        Submission::Skipped { reason } => (SettleOutcome::Skipped, None, Some(reason.clone())),
    };
    let settle = SettleRequest {
        cron_workflow_uid: claim.cron_workflow_uid.clone(),
        scheduled_time: claim.scheduled_time.clone(),
        claim_id: claim.claim_id.clone().unwrap_or_default(),
        outcome,
        workflow_uid,
        reason,
    };
    match client.settle(namespace, cron_workflow, &settle).await {
        Ok(settled) => Ok(Tick::Settled(settled)),
        Err(error) if error.code() == Some(ProblemCode::LeaseLost) => match current(&error) {
            Some(current) => Ok(Tick::LeaseLost { current }),
            None => Err(TickError::Settle {
                claim: Box::new(claim),
                submission,
                error,
            }),
        },
        Err(error) => Err(TickError::Settle {
            claim: Box::new(claim),
            submission,
            error,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lease_is_read_from_the_claims_own_times() {
        let claim = Claim {
            namespace: "argo".into(),
            cron_workflow: "nightly".into(),
            cron_workflow_uid: "u".into(),
            scheduled_time: "2026-11-29T17:00:00Z".into(),
            workflow_name: "nightly-1795971600".into(),
            state: ClaimState::Claimed,
            claim_id: None,
            claimed_at: "2026-11-29T17:00:01.250Z".into(),
            lease_expires_at: "2026-11-29T17:01:01.250Z".into(),
            taken_over: false,
            settled_at: None,
            workflow_uid: None,
            reason: None,
        };
        assert_eq!(lease(&claim), Some(Duration::from_secs(60)));
    }
}
