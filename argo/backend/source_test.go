package backend

import (
	"encoding/json"
	"testing"

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
