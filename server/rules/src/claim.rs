//! Cron run claims as stored, and the pure decisions of claiming and settling a tick.
//!
//! A tick is claimed under a lease, then settled by its holder. An unsettled claim whose
//! lease expired is taken over by the next claimant, who gets a new `claimId` and keeps
//! the first workflow name, so that a workflow the dead holder did create is found
//! (`AlreadyExists`), never created twice. Decisions compare times of the database's
//! clock only, so replicas with skewed clocks still agree on whose lease has expired.

use argo_results_proto::{Claim, ClaimState};

use crate::clock::{format_millis, format_scheduled};
use crate::refusal::Refusal;
use crate::request::{NewClaim, Settled, Settlement};

/// A row of `cron_claims`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClaimRow {
    pub cron_workflow_uid: String,
    pub scheduled_time: i64,
    pub namespace: String,
    pub cron_workflow: String,
    pub workflow_name: String,
    pub state: ClaimState,
    pub claim_id: String,
    pub claimed_at: i64,
    pub lease_expires_at: i64,
    pub takeovers: i64,
    pub settled_at: Option<i64>,
    pub workflow_uid: Option<String>,
    pub reason: Option<String>,
}

impl ClaimRow {
    /// The API form for anyone but the holder: without the `claimId`, which would let its
    /// reader settle the holder's tick.
    pub fn public(self) -> Claim {
        Claim {
            namespace: self.namespace,
            cron_workflow: self.cron_workflow,
            cron_workflow_uid: self.cron_workflow_uid,
            scheduled_time: format_scheduled(self.scheduled_time),
            workflow_name: self.workflow_name,
            state: self.state,
            claim_id: None,
            claimed_at: format_millis(self.claimed_at),
            lease_expires_at: format_millis(self.lease_expires_at),
            taken_over: self.takeovers > 0,
            settled_at: self.settled_at.map(format_millis),
            workflow_uid: self.workflow_uid,
            reason: self.reason,
        }
    }

    /// The API form for the holder, with its `claimId`.
    pub fn for_holder(self) -> Claim {
        let claim_id = self.claim_id.clone();
        Claim {
            claim_id: Some(claim_id),
            ..self.public()
        }
    }
}

/// What a claim does.
#[derive(Debug)]
pub enum ClaimDecision {
    /// The tick was never claimed: store this row.
    Insert(ClaimRow),
    /// The holder's lease expired unsettled: the row under a new holder.
    TakeOver(ClaimRow),
    Refuse(Refusal),
}

/// Refuses a request naming another cron workflow's UID: UIDs are unique in a cluster, and
/// the URL's namespace is what the caller was authorized for.
fn same_cron_workflow(row: &ClaimRow, namespace: &str, cron_workflow: &str) -> Result<(), Refusal> {
    if row.namespace == namespace && row.cron_workflow == cron_workflow {
        Ok(())
    } else {
        Err(Refusal::OtherCronWorkflow {
            cron_workflow_uid: row.cron_workflow_uid.clone(),
        })
    }
}

/// Claims a tick at `now` (the database's clock) for a new holder, `claim_id`.
pub fn claim(
    current: Option<&ClaimRow>,
    new: &NewClaim,
    claim_id: &str,
    now: i64,
) -> ClaimDecision {
    let Some(current) = current else {
        return ClaimDecision::Insert(ClaimRow {
            cron_workflow_uid: new.cron_workflow_uid.clone(),
            scheduled_time: new.scheduled_millis,
            namespace: new.namespace.clone(),
            cron_workflow: new.cron_workflow.clone(),
            workflow_name: new.workflow_name.clone(),
            state: ClaimState::Claimed,
            claim_id: claim_id.to_owned(),
            claimed_at: now,
            lease_expires_at: now + new.lease_millis,
            takeovers: 0,
            settled_at: None,
            workflow_uid: None,
            reason: None,
        });
    };
    if let Err(refusal) = same_cron_workflow(current, &new.namespace, &new.cron_workflow) {
        return ClaimDecision::Refuse(refusal);
    }
    if current.state == ClaimState::Claimed && current.lease_expires_at <= now {
        // The first workflow name stays: the old holder may have created it.
        return ClaimDecision::TakeOver(ClaimRow {
            claim_id: claim_id.to_owned(),
            claimed_at: now,
            lease_expires_at: now + new.lease_millis,
            takeovers: current.takeovers + 1,
            ..current.clone()
        });
    }
    ClaimDecision::Refuse(Refusal::AlreadyClaimed {
        current: Box::new(current.clone().public()),
    })
}

/// What a settle does.
#[derive(Debug)]
pub enum SettleDecision {
    /// Store the settled row.
    Update(ClaimRow),
    /// A replay of the holder's settle: answer with the stored row.
    Unchanged(ClaimRow),
    Refuse(Refusal),
}

/// Records what the holder did, at `now` (the database's clock). A holder whose lease
/// expired may still settle as long as nobody took the tick over: its workflow exists.
pub fn settle(current: Option<ClaimRow>, settlement: &Settlement, now: i64) -> SettleDecision {
    let Some(current) = current else {
        return SettleDecision::Refuse(Refusal::NotClaimed {
            cron_workflow: settlement.cron_workflow.clone(),
            scheduled_time: format_scheduled(settlement.scheduled_millis),
        });
    };
    if let Err(refusal) =
        same_cron_workflow(&current, &settlement.namespace, &settlement.cron_workflow)
    {
        return SettleDecision::Refuse(refusal);
    }
    if current.claim_id != settlement.claim_id {
        return SettleDecision::Refuse(Refusal::LeaseLost {
            current: Box::new(current.public()),
        });
    }
    let (state, workflow_uid, reason) = match &settlement.outcome {
        Settled::Submitted { workflow_uid } => {
            (ClaimState::Submitted, Some(workflow_uid.clone()), None)
        }
        Settled::Skipped { reason } => (ClaimState::Skipped, None, Some(reason.clone())),
    };
    if current.state == ClaimState::Claimed {
        return SettleDecision::Update(ClaimRow {
            state,
            settled_at: Some(now),
            workflow_uid,
            reason,
            ..current
        });
    }
    // Settled already: the same outcome is a replay. A skip's reason is prose, but a
    // submitted tick's workflow UID names its run, so another UID is another outcome.
    if current.state == state && current.workflow_uid == workflow_uid {
        SettleDecision::Unchanged(current)
    } else {
        SettleDecision::Refuse(Refusal::AlreadySettled {
            current: Box::new(current.public()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_764_435_600_000;
    const LEASE: i64 = 60_000;

    fn new_claim() -> NewClaim {
        NewClaim {
            namespace: "argo".into(),
            cron_workflow: "nightly".into(),
            cron_workflow_uid: "cron-uid".into(),
            scheduled_millis: NOW,
            workflow_name: "nightly-1764435600".into(),
            lease_millis: LEASE,
        }
    }

    fn claimed(claim_id: &str) -> ClaimRow {
        match claim(None, &new_claim(), claim_id, NOW) {
            ClaimDecision::Insert(row) => row,
            other => panic!("expected an insert, got {other:?}"),
        }
    }

    fn settlement(claim_id: &str, outcome: Settled) -> Settlement {
        Settlement {
            namespace: "argo".into(),
            cron_workflow: "nightly".into(),
            cron_workflow_uid: "cron-uid".into(),
            scheduled_millis: NOW,
            claim_id: claim_id.into(),
            outcome,
        }
    }

    fn submitted(uid: &str) -> Settled {
        Settled::Submitted {
            workflow_uid: uid.into(),
        }
    }

    #[test]
    fn a_live_lease_refuses_and_an_expired_one_is_taken_over_under_the_first_name() {
        let first = claimed("first");
        assert_eq!(first.lease_expires_at, NOW + LEASE);
        let renamed = NewClaim {
            workflow_name: "another-name".into(),
            ..new_claim()
        };
        let just_before = NOW + LEASE - 1;
        assert!(matches!(
            claim(Some(&first), &renamed, "second", just_before),
            ClaimDecision::Refuse(Refusal::AlreadyClaimed { current }) if current.claim_id.is_none()
        ));
        match claim(Some(&first), &renamed, "second", NOW + LEASE) {
            ClaimDecision::TakeOver(row) => {
                assert_eq!(row.workflow_name, "nightly-1764435600");
                assert_eq!(row.claim_id, "second");
                assert_eq!(row.lease_expires_at, NOW + 2 * LEASE);
                assert_eq!(row.takeovers, 1);
            }
            other => panic!("expected a takeover, got {other:?}"),
        }
    }

    #[test]
    fn a_settled_tick_is_never_taken_over() {
        let ClaimDecision::Insert(first) = claim(None, &new_claim(), "first", NOW) else {
            panic!("insert");
        };
        let SettleDecision::Update(settled) =
            settle(Some(first), &settlement("first", submitted("wf")), NOW + 1)
        else {
            panic!("settle");
        };
        assert!(matches!(
            claim(Some(&settled), &new_claim(), "second", NOW + 10 * LEASE),
            ClaimDecision::Refuse(Refusal::AlreadyClaimed { current })
                if current.state == ClaimState::Submitted && current.claim_id.is_none()
        ));
    }

    #[test]
    fn settle_is_idempotent_for_its_outcome_and_refuses_another() {
        let SettleDecision::Update(done) = settle(
            Some(claimed("c")),
            &settlement("c", submitted("wf")),
            NOW + 5,
        ) else {
            panic!("settle");
        };
        assert_eq!(
            (done.state, done.settled_at, done.workflow_uid.as_deref()),
            (ClaimState::Submitted, Some(NOW + 5), Some("wf"))
        );
        assert!(matches!(
            settle(Some(done.clone()), &settlement("c", submitted("wf")), NOW + 9),
            SettleDecision::Unchanged(row) if row == done
        ));
        for other in [
            submitted("another-wf"),
            Settled::Skipped {
                reason: "concurrencyPolicy Forbid".into(),
            },
        ] {
            assert!(matches!(
                settle(Some(done.clone()), &settlement("c", other), NOW + 9),
                SettleDecision::Refuse(Refusal::AlreadySettled { current })
                    if current.workflow_uid.as_deref() == Some("wf") && current.claim_id.is_none()
            ));
        }
        let skip = |reason: &str| Settled::Skipped {
            reason: reason.into(),
        };
        let SettleDecision::Update(skipped) =
            settle(Some(claimed("c")), &settlement("c", skip("Forbid")), NOW)
        else {
            panic!("skip");
        };
        assert!(matches!(
            settle(Some(skipped), &settlement("c", skip("reworded")), NOW),
            SettleDecision::Unchanged(row) if row.reason.as_deref() == Some("Forbid")
        ));
    }

    #[test]
    fn only_the_current_holder_settles_even_after_its_lease() {
        let expired_but_held = claimed("c");
        assert!(matches!(
            settle(
                Some(expired_but_held.clone()),
                &settlement("c", submitted("wf")),
                NOW + 10 * LEASE
            ),
            SettleDecision::Update(_)
        ));
        assert!(matches!(
            settle(Some(expired_but_held), &settlement("old", submitted("wf")), NOW),
            SettleDecision::Refuse(Refusal::LeaseLost { current }) if current.claim_id.is_none()
        ));
        assert!(matches!(
            settle(None, &settlement("c", submitted("wf")), NOW),
            SettleDecision::Refuse(Refusal::NotClaimed { cron_workflow, scheduled_time })
                if cron_workflow == "nightly" && scheduled_time == format_scheduled(NOW)
        ));
    }

    #[test]
    fn a_uid_of_another_cron_workflow_is_refused() {
        let first = claimed("c");
        let elsewhere = NewClaim {
            namespace: "other".into(),
            ..new_claim()
        };
        assert!(matches!(
            claim(Some(&first), &elsewhere, "d", NOW + 10 * LEASE),
            ClaimDecision::Refuse(Refusal::OtherCronWorkflow { cron_workflow_uid })
                if cron_workflow_uid == "cron-uid"
        ));
        let mut settle_elsewhere = settlement("c", submitted("wf"));
        settle_elsewhere.cron_workflow = "weekly".into();
        assert!(matches!(
            settle(Some(first), &settle_elsewhere, NOW),
            SettleDecision::Refuse(Refusal::OtherCronWorkflow { cron_workflow_uid })
                if cron_workflow_uid == "cron-uid"
        ));
    }

    #[test]
    fn a_takeover_is_flagged_and_dated_and_only_the_holder_gets_its_claim_id() {
        let first = claimed("first");
        assert_eq!(first.claimed_at, NOW);
        assert!(!first.clone().public().taken_over);
        assert_eq!(
            first.clone().for_holder().claim_id.as_deref(),
            Some("first")
        );
        let later = NOW + 2 * LEASE;
        let ClaimDecision::TakeOver(second) = claim(Some(&first), &new_claim(), "second", later)
        else {
            panic!("takeover");
        };
        assert_eq!(second.claimed_at, later);
        let public = second.clone().public();
        assert_eq!((public.taken_over, public.claim_id), (true, None));
        assert_eq!(public.claimed_at, format_millis(later));
        assert_eq!(second.for_holder().claim_id.as_deref(), Some("second"));
    }
}
