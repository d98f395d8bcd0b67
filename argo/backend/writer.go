package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	wfv1 "github.com/argoproj/argo-workflows/v4/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v4/util/logging"
	"github.com/argoproj/argo-workflows/v4/workflow/taskresults"

	argoresults "github.com/argo-results/argo-results/executor-client/go"
)

// EnvFinalizes is "true" in the one container of a pod whose report completes the
// result (pod.go decides which).
const EnvFinalizes = "ARGO_RESULTS_FINALIZES"

// exitCodeDir is where the emissary writes each main container's exit code
// (cmd/argoexec/commands/emissary.go: /var/run/argo/ctr/<name>/exitcode).
var exitCodeDir = "/var/run/argo/ctr"

// writer reports a container's part of its node's result through the Go package's
// Reporter, which retries transient failures until the container's context ends.
type writer struct {
	reporter  *argoresults.Reporter
	finalizes bool
	finalized bool
	// gaveUp: a final report was given up (the server away past RetryFor); the container
	// fails, and Finalize does not wait that long again.
	gaveUp bool
	// mains are the template's main containers, whose exit codes the final report
	// carries (not a sidecar's, which the controller stops once main ends).
	mains []string
}

func newWriter(ctx context.Context, getenv func(string) string, tmpl *wfv1.Template) (taskresults.Writer, error) {
	config := argoresults.ReporterConfigFromEnv(getenv)
	config.Logger = argoLogger{logging.RequireLoggerFromContext(ctx)}
	config.UserAgent = "argo-workflows argoexec (argo-results backend)"
	reporter, err := argoresults.NewReporter(config)
	if err != nil {
		return nil, err
	}
	return &writer{reporter: reporter, finalizes: getenv(EnvFinalizes) == "true", mains: tmpl.GetMainContainerNames()}, nil
}

func (w *writer) Start(ctx context.Context) error {
	return w.reporter.Start(ctx)
}

func (w *writer) Progress(ctx context.Context, progress wfv1.Progress) error {
	if !progress.IsValid() {
		return nil
	}
	return w.reporter.Progress(ctx, string(progress))
}

// Outputs is the final report in the container that finalizes: the outputs, how the
// step ended and the exit codes commit in one transaction, and an error fails the
// container (argoexec's ReportOutputs' error does), which the controller then settles.
func (w *writer) Outputs(ctx context.Context, outputs *wfv1.Outputs, failures []error) error {
	raw, err := json.Marshal(outputs)
	if err != nil {
		return fmt.Errorf("argo-results: outputs: %w", err)
	}
	if !w.finalizes {
		_, err := w.reporter.Outputs(ctx, raw)
		return err
	}
	return w.finalize(ctx, raw, failures)
}

// Finalize completes the result if Outputs did not (a container that stopped before it).
func (w *writer) Finalize(ctx context.Context, failures []error) error {
	if !w.finalizes || w.finalized || w.gaveUp {
		return nil
	}
	return w.finalize(ctx, nil, failures)
}

func (w *writer) finalize(ctx context.Context, outputs json.RawMessage, failures []error) error {
	final := argoresults.FinalReport{Outputs: outputs, ExitCodes: exitCodes(w.mains)}
	if len(failures) > 0 {
		// The container's own errors (an artifact it could not save) end the step in
		// Error, as Argo ends it when this container fails.
		final.Phase = string(wfv1.NodeError)
		final.Message = errors.Join(failures...).Error()
	} else if len(final.ExitCodes) == 0 {
		// A main container that finalizes runs before its exit code is written: it
		// ended as its action did.
		final.Phase = string(wfv1.NodeSucceeded)
	}
	if _, err := w.reporter.Finalize(ctx, final); err != nil {
		var gaveUp *argoresults.GaveUpError
		w.gaveUp = errors.As(err, &gaveUp)
		return err
	}
	w.finalized = true
	return nil
}

// exitCodes are the exit codes the emissary wrote for the containers named, by name.
func exitCodes(names []string) map[string]int {
	codes := map[string]int{}
	for _, name := range names {
		content, err := os.ReadFile(filepath.Join(exitCodeDir, name, "exitcode"))
		if err != nil {
			continue
		}
		if code, err := strconv.Atoi(strings.TrimSpace(string(content))); err == nil {
			codes[name] = code
		}
	}
	return codes
}
