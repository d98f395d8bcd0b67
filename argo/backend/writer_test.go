package backend

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v4/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v4/util/logging"
)

// reports records the bodies of the reports a test server receives.
type reports struct {
	mu     sync.Mutex
	bodies []map[string]any
}

func (r *reports) all() []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]map[string]any(nil), r.bodies...)
}

// testWriter is a writer of node "n1" reporting to a server that stores nothing and
// answers 200, with main's exit code as the emissary would have written it ("" for none).
func testWriter(t *testing.T, finalizes bool, mainExitCode string) (*writer, *reports) {
	t.Helper()
	got := &reports{}
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		raw, _ := io.ReadAll(req.Body)
		var body map[string]any
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Errorf("report body: %v", err)
		}
		got.mu.Lock()
		got.bodies = append(got.bodies, body)
		got.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"namespace":"argo","workflow":"wf","workflowUid":"u","nodeId":"n1","state":"reporting","revision":1}`))
	}))
	t.Cleanup(server.Close)
	dir := t.TempDir()
	claims := base64.RawURLEncoding.EncodeToString([]byte(`{"kubernetes.io":{"namespace":"argo"}}`))
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("e30."+claims+".sig"), 0o600); err != nil {
		t.Fatal(err)
	}
	exitCodeDir = filepath.Join(dir, "ctr")
	if mainExitCode != "" {
		if err := os.MkdirAll(filepath.Join(exitCodeDir, "main"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(exitCodeDir, "main", "exitcode"), []byte(mainExitCode), 0o644); err != nil {
			t.Fatal(err)
		}
		// A sidecar the controller stopped once main ended: not the step's outcome.
		if err := os.MkdirAll(filepath.Join(exitCodeDir, "sidecar"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(exitCodeDir, "sidecar", "exitcode"), []byte("143"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	vars := map[string]string{
		"ARGO_RESULTS_URL": server.URL, "ARGO_RESULTS_TOKEN_FILE": tokenFile,
		"ARGO_RESULTS_SEQUENCE_FILE": filepath.Join(dir, "sequence"),
		"ARGO_WORKFLOW_NAME":         "wf", "ARGO_WORKFLOW_UID": "u", "ARGO_NODE_ID": "n1",
		"ARGO_POD_NAME": "wf-1", "ARGO_POD_UID": "p", EnvFinalizes: map[bool]string{true: "true", false: "false"}[finalizes],
	}
	ctx := logging.InitLoggerInContext()
	w, err := newWriter(ctx, func(name string) string { return vars[name] }, &wfv1.Template{})
	if err != nil {
		t.Fatal(err)
	}
	return w.(*writer), got
}

func greeting() *wfv1.Outputs {
	return &wfv1.Outputs{Parameters: []wfv1.Parameter{{Name: "greeting", Value: wfv1.AnyStringPtr("hello")}}}
}

// outputsThenFinalize runs a wait container's last two calls and returns the reports sent.
func outputsThenFinalize(t *testing.T, finalizes bool, mainExitCode string) []map[string]any {
	t.Helper()
	w, got := testWriter(t, finalizes, mainExitCode)
	ctx := context.Background()
	if err := w.Outputs(ctx, greeting(), nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Finalize(ctx, nil); err != nil {
		t.Fatal(err)
	}
	return got.all()
}

// The finalizing container's outputs are the final report, with main's exit code, and
// the phase the exit codes give; Finalize then sends nothing more.
func TestOutputsFinalize(t *testing.T) {
	bodies := outputsThenFinalize(t, true, "3")
	if len(bodies) != 1 {
		t.Fatalf("%d reports, want 1", len(bodies))
	}
	body := bodies[0]
	outputs, _ := body["outputs"].(map[string]any)
	if body["final"] != true || body["phase"] != "Failed" || outputs["exitCode"] != "3" || outputs["parameters"] == nil {
		t.Fatalf("final report: %v", body)
	}
}

// The container's own errors end the step in Error, with their message (G11).
func TestOutputsFinalizeWithFailures(t *testing.T) {
	w, got := testWriter(t, true, "0")
	if err := w.Outputs(context.Background(), greeting(), []error{errors.New("save artifact: bucket gone")}); err != nil {
		t.Fatal(err)
	}
	body := got.all()[0]
	if body["final"] != true || body["phase"] != "Error" || body["message"] != "save artifact: bucket gone" {
		t.Fatalf("final report: %v", body)
	}
}

// A main container that finalizes (no wait beside it) has no exit code yet: Succeeded.
func TestOutputsFinalizeWithoutExitCode(t *testing.T) {
	w, got := testWriter(t, true, "")
	if err := w.Outputs(context.Background(), greeting(), nil); err != nil {
		t.Fatal(err)
	}
	if body := got.all()[0]; body["phase"] != "Succeeded" {
		t.Fatalf("final report: %v", body)
	}
}

// main beside a finalizing wait sends its outputs as a report that does not complete.
func TestOutputsNotFinal(t *testing.T) {
	bodies := outputsThenFinalize(t, false, "")
	if len(bodies) != 1 || bodies[0]["final"] != nil || bodies[0]["outputs"] == nil {
		t.Fatalf("reports: %v", bodies)
	}
}

// A container that stopped before its outputs still completes the result when it ends.
func TestFinalizeWithoutOutputs(t *testing.T) {
	w, got := testWriter(t, true, "0")
	ctx := context.Background()
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Progress(ctx, "1/2"); err != nil {
		t.Fatal(err)
	}
	if err := w.Finalize(ctx, []error{errors.New("wait: context canceled")}); err != nil {
		t.Fatal(err)
	}
	bodies := got.all()
	if len(bodies) != 3 || bodies[1]["progress"] != "1/2" || bodies[2]["final"] != true || bodies[2]["phase"] != "Error" {
		t.Fatalf("reports: %v", bodies)
	}
}

// The final report carries the main containers' exit codes only: a sidecar stopped with
// SIGTERM once main ended does not fail the step.
func TestSidecarExitCodesAreLeftOut(t *testing.T) {
	bodies := outputsThenFinalize(t, true, "0")
	outputs, _ := bodies[0]["outputs"].(map[string]any)
	if bodies[0]["phase"] != "Succeeded" || outputs["exitCode"] != "0" {
		t.Fatalf("final report: %v", bodies[0])
	}
}

// A final report given up (the server away past RetryFor) fails the container; the
// Finalize that follows does not wait that long again.
func TestFinalizeAfterAGiveUpSendsNothing(t *testing.T) {
	var attempts atomic.Int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		attempts.Add(1)
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status":503,"code":"unavailable","title":"Service Unavailable"}`))
	}))
	t.Cleanup(server.Close)
	w, _ := testWriter(t, true, "0")
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	claims := base64.RawURLEncoding.EncodeToString([]byte(`{"kubernetes.io":{"namespace":"argo"}}`))
	if err := os.WriteFile(tokenFile, []byte("e30."+claims+".sig"), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{
		"ARGO_RESULTS_URL": server.URL, "ARGO_RESULTS_TOKEN_FILE": tokenFile, "ARGO_RESULTS_RETRY_FOR": "1s",
		"ARGO_RESULTS_SEQUENCE_FILE": filepath.Join(dir, "sequence"),
		"ARGO_WORKFLOW_NAME":         "wf", "ARGO_WORKFLOW_UID": "u", "ARGO_NODE_ID": "n1",
		"ARGO_POD_NAME": "wf-1", "ARGO_POD_UID": "p", EnvFinalizes: "true",
	}
	made, err := newWriter(logging.InitLoggerInContext(), func(name string) string { return vars[name] }, &wfv1.Template{})
	if err != nil {
		t.Fatal(err)
	}
	w = made.(*writer)
	ctx := context.Background()
	if err := w.Outputs(ctx, greeting(), nil); err == nil {
		t.Fatal("a final report the server never took succeeded")
	}
	before := attempts.Load()
	if err := w.Finalize(ctx, nil); err != nil || attempts.Load() != before {
		t.Fatalf("Finalize after the give-up: %v, %d more attempts", err, attempts.Load()-before)
	}
}
