package argoresults_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"

	argoresults "github.com/argo-results/argo-results/executor-client/go"
)

// argoexec's wait container, as the change set wires it: the Reporter from the
// environment the controller gives the container, the step's start, then one final
// report with the outputs and the main container's exit code. An error fails the
// container, so that the controller settles the node.
func ExampleReporter() {
	ctx := context.Background()
	config := argoresults.ReporterConfigFromEnv(os.Getenv)
	config.Logger = argoresults.SlogLogger(slog.Default())
	reporter, err := argoresults.NewReporter(config)
	if err != nil {
		return // ARGO_RESULTS_URL unset: the pod reports to WorkflowTaskResults
	}
	if err := reporter.Start(ctx); err != nil {
		return
	}
	_, err = reporter.Finalize(ctx, argoresults.FinalReport{
		Outputs:   json.RawMessage(`{"parameters":[{"name":"rows","value":"1042"}]}`),
		ExitCodes: map[string]int{"main": 0},
	})
	if err != nil {
		os.Exit(64)
	}
}

// The controller's side of one node: register it before and after creating its pod,
// then decide it whenever its pod or its result changes, settling a pod that ended.
func ExampleFollower_Settle() {
	ctx := context.Background()
	client, _ := argoresults.New(argoresults.Config{URL: "https://argo-results.argo.svc:8443", Retry: &argoresults.RetryPolicy{}})
	follower := argoresults.NewFollower(client, 0, argoresults.FollowerOptions{})
	go func() { _ = follower.Run(ctx, 0, func(argoresults.WorkflowRef) { /* enqueue it */ }) }()
	workflow := argoresults.WorkflowRef{Namespace: "argo", Name: "etl", UID: "5d0c9f5e"}
	if _, err := follower.Register(ctx, workflow, "etl-1529417052", "etl-extract-1529417052", ""); err != nil {
		return // requeue: no pod is created
	}
	decision, err := follower.Settle(ctx, workflow, "etl-1529417052", argoresults.PodSucceeded)
	if err != nil {
		return // requeue
	}
	_ = decision.Verdict // Succeeded, Failed, Error or Lost: never Settle; Wait while the pod runs
}

// The cron scheduler's side of one tick: claim, create, settle, and a tick held by a
// dead holder's lease taken over once it ran out.
func ExampleRunTickUntilSettled() {
	ctx := context.Background()
	client, _ := argoresults.New(argoresults.Config{URL: "https://argo-results.argo.svc:8443", Retry: &argoresults.RetryPolicy{}})
	request := argoresults.ClaimRequest{
		CronWorkflowUID: "8e2a6f0c", ScheduledTime: "2026-11-29T17:00:00Z",
		WorkflowName: "nightly-1795971600",
	}
	go func() {
		_, _ = argoresults.RunTickUntilSettled(ctx, client, "argo", "nightly", &request,
			func(_ context.Context, claim *argoresults.Claim) (argoresults.Submission, error) {
				// enforceRuntimePolicy, then create claim.WorkflowName; on AlreadyExists,
				// argoresults.AlreadyExisted with the existing workflow's UID.
				return argoresults.Created("5d0c9f5e"), nil
			})
	}()
}
