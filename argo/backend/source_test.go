package backend

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	wfv1 "github.com/argoproj/argo-workflows/v4/pkg/apis/workflow/v1alpha1"

	argoresults "github.com/argo-results/argo-results/executor-client/go"
)

// Every verdict of the decision table in Argo's node phases; a lost result is an Error,
// Argo's phase for what the system, not the step's code, did.
func TestFate(t *testing.T) {
	outputs := json.RawMessage(`{"parameters":[{"name":"greeting","value":"hello"}],"exitCode":"0"}`)
	for _, tc := range []struct {
		decision argoresults.Decision
		phase    wfv1.NodePhase
		message  string
	}{
		{argoresults.Decision{Verdict: argoresults.Wait}, "", ""},
		{argoresults.Decision{Verdict: argoresults.Succeeded, Outputs: outputs}, wfv1.NodeSucceeded, ""},
		{argoresults.Decision{Verdict: argoresults.Failed, Outputs: outputs, Message: "exit 3"}, wfv1.NodeFailed, "exit 3"},
		{argoresults.Decision{Verdict: argoresults.Error, Message: "said Error"}, wfv1.NodeError, "said Error"},
		{argoresults.Decision{Verdict: argoresults.Lost, Message: "the pod is gone"}, wfv1.NodeError, "task result lost: the pod is gone"},
	} {
		t.Run(string(tc.decision.Verdict), func(t *testing.T) {
			f := fate(tc.decision)
			if f.Phase != tc.phase || f.Message != tc.message {
				t.Fatalf("phase %q message %q, want %q %q", f.Phase, f.Message, tc.phase, tc.message)
			}
			if tc.decision.Outputs != nil && (!f.Outputs.HasParameters() || f.Outputs.Parameters[0].Value.String() != "hello" || *f.Outputs.ExitCode != "0") {
				t.Fatalf("outputs not carried: %+v", f.Outputs)
			}
		})
	}
}

func TestOutputsRead(t *testing.T) {
	if outputs(nil) != nil || outputs(json.RawMessage(`[1]`)) != nil {
		t.Fatal("no outputs, or outputs that are not Argo's, read as none")
	}
	out := outputs(json.RawMessage(`{"result":"42"}`))
	if out == nil || out.Result == nil || *out.Result != "42" {
		t.Fatalf("result not read: %+v", out)
	}
}

// Argo calls Delete on every update of a Fulfilled workflow: only a workflow whose results
// the follower knows costs a call, once; a deletion that failed is tried again. Reset (a
// retried workflow) always reaches the server.
func TestDeleteOncePerKnownWorkflowResetAlways(t *testing.T) {
	var deletes atomic.Int32
	failing := atomic.Bool{}
	failing.Store(true)
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if req.Method == http.MethodDelete {
			deletes.Add(1)
			if failing.Swap(false) {
				w.WriteHeader(http.StatusForbidden)
				_, _ = w.Write([]byte(`{"status":403,"code":"forbidden","title":"Forbidden"}`))
				return
			}
			_, _ = w.Write([]byte(`{"deleted":1}`))
			return
		}
		_, _ = w.Write([]byte(`{"namespace":"argo","workflow":"wf","workflowUid":"u1","nodeId":"n1","state":"registered","revision":1}`))
	}))
	t.Cleanup(server.Close)
	client, err := argoresults.New(argoresults.Config{URL: server.URL})
	if err != nil {
		t.Fatal(err)
	}
	s := &source{client: client, follower: argoresults.NewFollower(client, 0, argoresults.FollowerOptions{}), ready: make(chan struct{})}
	close(s.ready)
	ctx := context.Background()
	known := &wfv1.Workflow{ObjectMeta: metav1.ObjectMeta{Namespace: "argo", Name: "wf", UID: "u1"}}
	unknown := &wfv1.Workflow{ObjectMeta: metav1.ObjectMeta{Namespace: "argo", Name: "other", UID: "u2"}}
	if _, err := s.Expect(ctx, known, "n1", "wf-main-1", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, unknown); err != nil || deletes.Load() != 0 {
		t.Fatalf("a workflow with no known results: %v, %d calls", err, deletes.Load())
	}
	if err := s.Delete(ctx, known); err == nil || deletes.Load() != 1 {
		t.Fatalf("a refused deletion: %v, %d calls", err, deletes.Load())
	}
	for range 3 {
		if err := s.Delete(ctx, known); err != nil {
			t.Fatal(err)
		}
	}
	if deletes.Load() != 2 {
		t.Fatalf("%d deletions reached the server; want 2 (the refused one, then one)", deletes.Load())
	}
	// A retried workflow's results are deleted whether or not the follower saw them (it
	// did not follow a workflow that ended before it started).
	if err := s.Reset(ctx, unknown); err != nil || deletes.Load() != 3 {
		t.Fatalf("Reset of a workflow the follower does not know: %v, %d calls; want a call", err, deletes.Load())
	}
}
