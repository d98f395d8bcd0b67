package argoresults

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The two files of executor-client/testdata that the Rust reference reconciler's tests
// run too (executor-client/src/controller.rs, decisions_follow_the_shared_table and
// events_follow_the_shared_scenarios), so that the two cannot drift apart: the decision
// table here, the events in known_test.go. Their shapes are documented there and at each
// test.

func readTestdata(t *testing.T, name string, into any) {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	decoder := json.NewDecoder(bytes.NewReader(text))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(into); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// expectDecision is a decision as both files write it: the verdict, the outputs (compared
// as JSON values), and a fragment of the message (of the reason, for Lost), or null.
type expectDecision struct {
	Decision string          `json:"decision"`
	Outputs  json.RawMessage `json:"outputs"`
	Message  *string         `json:"message"`
}

func checkDecision(t *testing.T, name string, got Decision, want expectDecision) {
	t.Helper()
	if string(got.Verdict) != want.Decision {
		t.Errorf("%s: verdict %s, want %s", name, got.Verdict, want.Decision)
	}
	if !sameJSON(t, got.Outputs, want.Outputs) {
		t.Errorf("%s: outputs %s, want %s", name, got.Outputs, want.Outputs)
	}
	switch {
	case want.Message == nil && got.Message != "":
		t.Errorf("%s: message %q, want none", name, got.Message)
	case want.Message != nil && !strings.Contains(got.Message, *want.Message):
		t.Errorf("%s: message %q, want one with %q", name, got.Message, *want.Message)
	}
}

// TestReconcilerDecisions runs testdata/reconciler-decisions.json, the decision table:
//
//	{"cases": [{"name": ..., "pod": "Pending" | "Running" | "Succeeded" | "Failed" | "Gone",
//	            "result": null (nothing stored) or {"state", "phase", "message", "outputs",
//	                      "abandonReason"} of the stored result,
//	            "expect": {"decision": "Wait" | "Settle" | "Succeeded" | "Failed" | "Error" |
//	                                   "Lost",
//	                       "outputs": null or the outputs the node takes (as JSON values),
//	                       "message": null (none) or a fragment of it (Lost, Settle: the
//	                                  reason)}}]}
func TestReconcilerDecisions(t *testing.T) {
	var table struct {
		Cases []struct {
			Name   string `json:"name"`
			Pod    string `json:"pod"`
			Result *struct {
				State         ResultState     `json:"state"`
				Phase         *string         `json:"phase"`
				Message       *string         `json:"message"`
				Outputs       json.RawMessage `json:"outputs"`
				AbandonReason *string         `json:"abandonReason"`
			} `json:"result"`
			Expect expectDecision `json:"expect"`
		} `json:"cases"`
	}
	readTestdata(t, "reconciler-decisions.json", &table)
	if len(table.Cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range table.Cases {
		t.Run(c.Name, func(t *testing.T) {
			var result *NodeResult
			if stored := c.Result; stored != nil {
				result = &NodeResult{
					Namespace: "argo", Workflow: "wf", WorkflowUID: "uid", NodeID: "wf-1",
					State: stored.State, Phase: stored.Phase, Message: stored.Message,
					Outputs: nilIfNull(stored.Outputs), AbandonReason: stored.AbandonReason, Revision: 1,
				}
			}
			checkDecision(t, c.Name, Decide(PodPhase(c.Pod), result), c.Expect)
		})
	}
}
