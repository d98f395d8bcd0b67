package argoresults

import (
	"context"
	"fmt"
	"time"
)

// Submission is what the caller's step did with the tick it holds: made with
// [Created], [AlreadyExisted] or [Skipped].
type Submission struct {
	// WorkflowUID of the workflow that runs the tick (created, or already there).
	WorkflowUID string
	// AlreadyExists: Kubernetes answered AlreadyExists, because an earlier holder of the
	// tick created it before it lost its lease. It counts as created.
	AlreadyExists bool
	// SkipReason, when set, says why the tick is not run (concurrencyPolicy Forbid with an
	// active run, suspend, a when that is false, startingDeadlineSeconds passed).
	SkipReason string
}

// Created: Kubernetes created the claimed workflow, whose UID is uid.
func Created(uid string) Submission { return Submission{WorkflowUID: uid} }

// AlreadyExisted: Kubernetes answered AlreadyExists; uid is the existing workflow's, read
// back.
func AlreadyExisted(uid string) Submission { return Submission{WorkflowUID: uid, AlreadyExists: true} }

// Skipped: the tick is not run, for reason.
func Skipped(reason string) Submission { return Submission{SkipReason: reason} }

// TickOutcome is how a tick ended for this controller.
type TickOutcome string

// The outcomes of [RunTick].
const (
	// TickSettled: this controller settled the tick; Tick.Claim says how.
	TickSettled TickOutcome = "settled"
	// TickHeld: another claim holds the tick or settled it; nothing was done. While it is
	// claimed, Tick.RetryAfter is its lease: a retry after it takes the tick over, unless
	// the holder settled meanwhile.
	TickHeld TickOutcome = "held"
	// TickLeaseLost: the tick was taken over while this controller worked on it; its new
	// holder creates the same workflow name and settles. Stop; touch nothing of the tick.
	TickLeaseLost TickOutcome = "lease lost"
)

// Tick is how a tick ended: Claim is the settled claim (TickSettled) or the one that holds
// the tick (TickHeld, TickLeaseLost).
type Tick struct {
	Outcome    TickOutcome
	Claim      Claim
	RetryAfter time.Duration
}

// TickError is a tick that did not end. Stage says where: "claim" (no claim was taken),
// "submit" (the caller's step failed; the lease is held until it expires: retry with
// [FinishTick] and Claim, or leave the tick to whoever claims it after the lease), or
// "settle" (retry with FinishTick, Claim, and a step answering Submission again).
type TickError struct {
	Stage      string
	Claim      *Claim
	Submission *Submission
	Err        error
}

func (e *TickError) Error() string {
	if e.Claim == nil {
		return fmt.Sprintf("cron tick %s: %v", e.Stage, e.Err)
	}
	return fmt.Sprintf("cron tick %s (%s) %s: %v", e.Claim.ScheduledTime, e.Claim.WorkflowName, e.Stage, e.Err)
}

// Unwrap gives the cause.
func (e *TickError) Unwrap() error { return e.Err }

// SubmitFunc creates the claim's WorkflowName (after concurrencyPolicy and the other
// checks of Argo's enforceRuntimePolicy) and says what it did.
type SubmitFunc func(ctx context.Context, claim *Claim) (Submission, error)

// RunTick runs one cron tick the safe way (docs/api.md section 6): it claims the tick under a
// lease, runs submit with the claim if this controller now holds it, and settles with
// what submit answered. A controller that dies in between loses its lease and the next
// takes the tick over under the same workflow name, so the workflow is created once and
// the tick is never dropped.
func RunTick(ctx context.Context, client *Client, namespace, cronWorkflow string, request *ClaimRequest, submit SubmitFunc) (*Tick, error) {
	claim, err := client.Claim(ctx, namespace, cronWorkflow, request)
	if CodeOf(err) == CodeAlreadyClaimed {
		current, decodeErr := ProblemOf(err).CurrentClaim()
		if decodeErr != nil {
			return nil, &TickError{Stage: "claim", Err: fmt.Errorf("%w (%v)", err, decodeErr)}
		}
		tick := &Tick{Outcome: TickHeld, Claim: *current}
		if current.State == ClaimClaimed {
			tick.RetryAfter = lease(current)
		}
		return tick, nil
	}
	if err != nil {
		return nil, &TickError{Stage: "claim", Err: err}
	}
	return FinishTick(ctx, client, namespace, cronWorkflow, claim, submit)
}

// RunTickUntilSettled is RunTick for a scheduler that must not drop a tick: a tick held by
// a claim that is not settled yet (TickHeld with a RetryAfter) is claimed again once that
// lease has run out, and taken over if its holder died meanwhile. It returns when the
// tick is settled (by this controller, TickSettled, or by another, TickHeld with no
// RetryAfter), when it was taken over from this controller (TickLeaseLost), on an error,
// or when ctx ends. Run it in a goroutine of its own per tick: the wait can be a lease
// long.
func RunTickUntilSettled(ctx context.Context, client *Client, namespace, cronWorkflow string, request *ClaimRequest, submit SubmitFunc) (*Tick, error) {
	for {
		tick, err := RunTick(ctx, client, namespace, cronWorkflow, request, submit)
		if err != nil || tick.Outcome != TickHeld || tick.RetryAfter == 0 {
			return tick, err
		}
		if err := sleep(ctx, tick.RetryAfter); err != nil {
			return tick, err
		}
	}
}

// FinishTick runs submit for a claim this controller holds (the 201 of a claim) and
// settles.
func FinishTick(ctx context.Context, client *Client, namespace, cronWorkflow string, claim *Claim, submit SubmitFunc) (*Tick, error) {
	submission, err := submit(ctx, claim)
	if err != nil {
		return nil, &TickError{Stage: "submit", Claim: claim, Err: err}
	}
	settle := SettleRequest{
		CronWorkflowUID: claim.CronWorkflowUID,
		ScheduledTime:   claim.ScheduledTime,
		ClaimID:         claim.ClaimID,
		Outcome:         OutcomeSubmitted,
		WorkflowUID:     submission.WorkflowUID,
	}
	if submission.SkipReason != "" {
		settle.Outcome, settle.WorkflowUID, settle.Reason = OutcomeSkipped, "", submission.SkipReason
	}
	settled, err := client.Settle(ctx, namespace, cronWorkflow, &settle)
	if err == nil {
		return &Tick{Outcome: TickSettled, Claim: *settled}, nil
	}
	if CodeOf(err) == CodeLeaseLost {
		if current, decodeErr := ProblemOf(err).CurrentClaim(); decodeErr == nil {
			return &Tick{Outcome: TickLeaseLost, Claim: *current}, nil
		}
	}
	return nil, &TickError{Stage: "settle", Claim: claim, Submission: &submission, Err: err}
}

// lease is a claim's lease length: its expiry and its start are both the database's
// clock, so their difference means the same on any machine. 0 when unreadable.
func lease(claim *Claim) time.Duration {
	start, err1 := time.Parse(time.RFC3339Nano, claim.ClaimedAt)
	end, err2 := time.Parse(time.RFC3339Nano, claim.LeaseExpiresAt)
	if err1 != nil || err2 != nil || end.Before(start) {
		return 0
	}
	return end.Sub(start)
}
