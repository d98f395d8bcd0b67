package argoresults

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// The cron tick helper against the real server: claim, create, settle, and a takeover
// after a holder died.

func TestCronTakeover(t *testing.T) {
	onBackends(t, func(t *testing.T, b backend) {
		s := startServer(t, b)
		ctx := testContext(t)
		admin := s.admin()
		request := ClaimRequest{
			CronWorkflowUID: "nightly-uid", ScheduledTime: "2026-11-29T17:00:00Z",
			WorkflowName: "nightly-1795971600", LeaseSeconds: 5,
		}
		// The first holder claims, and dies before it settles.
		dead, err := admin.Claim(ctx, testNamespace, "nightly", &request)
		if err != nil || dead.State != ClaimClaimed || dead.ClaimID == "" || dead.TakenOver {
			t.Fatalf("the first claim: %+v, %v", dead, err)
		}

		// Another controller finds the tick held, and is told how long the lease is.
		var created []string
		submit := func(_ context.Context, claim *Claim) (Submission, error) {
			created = append(created, claim.WorkflowName)
			if !claim.TakenOver {
				t.Errorf("the holder after the lease did not take over: %+v", claim)
			}
			// The dead holder created the workflow: Kubernetes answers AlreadyExists.
			return AlreadyExisted("wf-uid-1"), nil
		}
		retried := request
		retried.WorkflowName = "nightly-other-name"
		held, err := RunTick(ctx, admin, testNamespace, "nightly", &retried, submit)
		if err != nil || held.Outcome != TickHeld || held.RetryAfter != 5*time.Second || held.Claim.ClaimID != "" {
			t.Fatalf("a tick under a live lease: %+v, %v", held, err)
		}

		// After the lease it takes the tick over, under the first holder's name.
		var tick *Tick
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(250 * time.Millisecond) {
			if tick, err = RunTick(ctx, admin, testNamespace, "nightly", &retried, submit); err != nil {
				t.Fatal(err)
			}
			if tick.Outcome != TickHeld {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the 5 s lease never expired")
			}
		}
		if tick.Outcome != TickSettled || tick.Claim.State != ClaimSubmitted || deref(tick.Claim.WorkflowUID) != "wf-uid-1" {
			t.Errorf("the takeover: %+v", tick)
		}
		if len(created) != 1 || created[0] != request.WorkflowName {
			t.Errorf("workflows created: %v, want once %s", created, request.WorkflowName)
		}

		// The dead holder comes back: it lost its lease and must touch nothing.
		back, err := FinishTick(ctx, admin, testNamespace, "nightly", dead, func(context.Context, *Claim) (Submission, error) {
			return Created("wf-uid-2"), nil
		})
		if err != nil || back.Outcome != TickLeaseLost || deref(back.Claim.WorkflowUID) != "wf-uid-1" {
			t.Errorf("the old holder: %+v, %v", back, err)
		}

		// A settled tick is held for good, with no lease to wait for.
		again, err := RunTick(ctx, admin, testNamespace, "nightly", &request, submit)
		if err != nil || again.Outcome != TickHeld || again.RetryAfter != 0 || again.Claim.State != ClaimSubmitted {
			t.Errorf("a settled tick claimed again: %+v, %v", again, err)
		}

		// A skipped tick is settled with its reason; a failed step leaves the claim held.
		next := ClaimRequest{CronWorkflowUID: "nightly-uid", ScheduledTime: "2026-11-30T17:00:00Z", WorkflowName: "nightly-1796058000"}
		skipped, err := RunTick(ctx, admin, testNamespace, "nightly", &next, func(context.Context, *Claim) (Submission, error) {
			return Skipped("concurrencyPolicy Forbid"), nil
		})
		if err != nil || skipped.Outcome != TickSettled || skipped.Claim.State != ClaimSkipped || deref(skipped.Claim.Reason) != "concurrencyPolicy Forbid" {
			t.Errorf("a skipped tick: %+v, %v", skipped, err)
		}
		third := ClaimRequest{CronWorkflowUID: "nightly-uid", ScheduledTime: "2026-12-01T17:00:00Z", WorkflowName: "nightly-1796144400"}
		refused := errors.New("the API server refused the workflow")
		_, err = RunTick(ctx, admin, testNamespace, "nightly", &third, func(context.Context, *Claim) (Submission, error) {
			return Submission{}, refused
		})
		var tickErr *TickError
		if !errors.As(err, &tickErr) || tickErr.Stage != "submit" || tickErr.Claim == nil || !errors.Is(err, refused) {
			t.Errorf("a failed submission: %v", err)
		}

		runs, err := admin.Runs(ctx, testNamespace, "nightly", RunsOptions{CronWorkflowUID: "nightly-uid"})
		if err != nil {
			t.Fatal(err)
		}
		if len(runs.Items) != 3 || deref(runs.LastScheduledTime) != "2026-11-30T17:00:00Z" {
			t.Errorf("the runs: %d claims, last scheduled %s", len(runs.Items), deref(runs.LastScheduledTime))
		}
		for _, claim := range runs.Items {
			if claim.ClaimID != "" {
				t.Errorf("a listed claim shows its holder's proof: %+v", claim)
			}
		}
	})
}

// The scheduler's side of a held tick: a leader that dies inside its lease does not drop
// the tick, because the next leader claims it again once the lease ran out.
func TestAHeldTickIsRunOnceItsDeadLeadersLeaseEnds(t *testing.T) {
	onBackends(t, func(t *testing.T, b backend) {
		s := startServer(t, b)
		ctx := testContext(t)
		admin := s.admin()
		request := ClaimRequest{
			CronWorkflowUID: "hourly-uid", ScheduledTime: "2026-11-29T18:00:00Z",
			WorkflowName: "hourly-1795975200", LeaseSeconds: 5,
		}
		// The leader claims and creates the workflow, then dies before it settles.
		if _, err := admin.Claim(ctx, testNamespace, "hourly", &request); err != nil {
			t.Fatal(err)
		}
		var submitted []bool
		submit := func(_ context.Context, claim *Claim) (Submission, error) {
			submitted = append(submitted, claim.TakenOver)
			return AlreadyExisted("wf-uid-hourly"), nil
		}
		started := time.Now()
		tick, err := RunTickUntilSettled(ctx, admin, testNamespace, "hourly", &request, submit)
		if err != nil || tick.Outcome != TickSettled || deref(tick.Claim.WorkflowUID) != "wf-uid-hourly" {
			t.Fatalf("the held tick: %+v, %v", tick, err)
		}
		if len(submitted) != 1 || !submitted[0] {
			t.Errorf("the step ran %v times (taken over: %v); want once, on the takeover", len(submitted), submitted)
		}
		if waited := time.Since(started); waited < 4*time.Second {
			t.Errorf("taken over after %v, inside the dead leader's 5 s lease", waited)
		}
		// Settled by another: the next try returns at once.
		again, err := RunTickUntilSettled(ctx, admin, testNamespace, "hourly", &request, submit)
		if err != nil || again.Outcome != TickHeld || again.RetryAfter != 0 || len(submitted) != 1 {
			t.Errorf("a settled tick: %+v, %v", again, err)
		}
	})
}

func TestATickErrorSaysItsStageAndTickAndUnwraps(t *testing.T) {
	refused := &ProblemError{Problem: Problem{Status: 409, Code: CodeAlreadyCompleted, Detail: "frozen"}}
	tick := &TickError{Stage: "settle", Claim: &Claim{ScheduledTime: "2026-11-29T17:00:00Z", WorkflowName: "nightly-1"}, Err: refused}
	if msg := tick.Error(); !strings.Contains(msg, "settle") || !strings.Contains(msg, "nightly-1") || !strings.Contains(msg, "frozen") {
		t.Errorf("tick error: %s", msg)
	}
	if !errors.Is(tick, refused) || CodeOf(tick) != CodeAlreadyCompleted {
		t.Error("a tick error unwraps to its cause")
	}
	if msg := (&TickError{Stage: "claim", Err: refused}).Error(); !strings.Contains(msg, "claim") {
		t.Errorf("a claim's error: %s", msg)
	}
}

// A lease is read on the database's clock; one that cannot be read is no lease, so the
// tick is not waited for on a guess.
func TestALeaseIsTheDatabasesExpiryLessItsClaimTime(t *testing.T) {
	for _, c := range []struct {
		name, claimed, expires string
		want                   time.Duration
	}{
		{"a lease", "2026-11-29T17:00:00.5Z", "2026-11-29T17:01:00.5Z", time.Minute},
		{"any offset", "2026-11-29T18:00:00+01:00", "2026-11-29T17:00:05Z", 5 * time.Second},
		{"an unreadable claim time", "yesterday", "2026-11-29T17:01:00Z", 0},
		{"an unreadable expiry", "2026-11-29T17:00:00Z", "", 0},
		{"an expiry before the claim", "2026-11-29T17:01:00Z", "2026-11-29T17:00:00Z", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := lease(&Claim{ClaimedAt: c.claimed, LeaseExpiresAt: c.expires}); got != c.want {
				t.Errorf("lease %v, want %v", got, c.want)
			}
		})
	}
}
