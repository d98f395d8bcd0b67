package backend

import (
	"context"
	"fmt"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v4/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v4/util/logging"
	"github.com/argoproj/argo-workflows/v4/workflow/taskresults"

	argoresults "github.com/argo-results/argo-results/executor-client/go"
)

var _ taskresults.CronTicks = (*source)(nil)

// tickLease is how long a claim holds a tick (leaseSeconds): a controller that dies
// holding one delays that tick by at most this much, until its successor takes it over.
const tickLease = 30

// tickTimeout bounds a tick's claim, run and settle, with their retries: two leases (one
// waited out, one held) and a call. A tick that did not settle within it is logged by
// Argo's side, and run as missed when the CronWorkflow is next processed.
const tickTimeout = 2*tickLease*time.Second + callTimeout

// RunTick runs a CronWorkflow's tick under the server's claim (docs/api.md section 6),
// waiting out another holder's lease and taking the tick over if that holder died.
func (s *source) RunTick(ctx context.Context, cronWf *wfv1.CronWorkflow, scheduled time.Time, workflowName string, run func(context.Context) (taskresults.TickRun, error)) error {
	ctx, cancel := context.WithTimeout(ctx, tickTimeout)
	defer cancel()
	request := &argoresults.ClaimRequest{
		CronWorkflowUID: string(cronWf.UID),
		ScheduledTime:   scheduled.UTC().Format(time.RFC3339),
		WorkflowName:    workflowName,
		LeaseSeconds:    tickLease,
	}
	tick, err := argoresults.RunTickUntilSettled(ctx, s.client, cronWf.Namespace, cronWf.Name, request,
		func(ctx context.Context, claim *argoresults.Claim) (argoresults.Submission, error) {
			// A tick taken over keeps its first name; Argo's names are the tick's own, so
			// another name means another scheme: nothing is created.
			if claim.WorkflowName != workflowName {
				return argoresults.Submission{}, fmt.Errorf("the tick's claim names workflow %s, not %s", claim.WorkflowName, workflowName)
			}
			done, err := run(ctx)
			switch {
			case err != nil:
				return argoresults.Submission{}, err
			case done.Skipped != "":
				return argoresults.Skipped(done.Skipped), nil
			case done.AlreadyExists:
				return argoresults.AlreadyExisted(done.WorkflowUID), nil
			}
			return argoresults.Created(done.WorkflowUID), nil
		})
	if err != nil {
		return err
	}
	logging.RequireLoggerFromContext(ctx).WithFields(logging.Fields{
		"cronWorkflow": cronWf.Namespace + "/" + cronWf.Name, "scheduledTime": request.ScheduledTime,
		"outcome": string(tick.Outcome), "workflow": tick.Claim.WorkflowName,
	}).Info(ctx, "argo-results: cron tick")
	return nil
}

// LastScheduledTime is the server's newest settled tick of cronWf.
func (s *source) LastScheduledTime(ctx context.Context, cronWf *wfv1.CronWorkflow) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	list, err := s.client.Runs(ctx, cronWf.Namespace, cronWf.Name, argoresults.RunsOptions{CronWorkflowUID: string(cronWf.UID), Limit: 1})
	if err != nil || list.LastScheduledTime == nil {
		return time.Time{}, err
	}
	last, err := time.Parse(time.RFC3339Nano, *list.LastScheduledTime)
	if err != nil {
		return time.Time{}, fmt.Errorf("the server's lastScheduledTime %q: %w", *list.LastScheduledTime, err)
	}
	return last, nil
}
