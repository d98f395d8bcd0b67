package argoresults

import (
	"encoding/json"
	"testing"
)

func TestOnlyCompletedAndAbandonedResultsAreFrozen(t *testing.T) {
	for state, frozen := range map[ResultState]bool{
		StateExpected: false, StateReporting: false, StateCompleted: true, StateAbandoned: true,
	} {
		if state.Frozen() != frozen {
			t.Errorf("%s: frozen %v, want %v", state, state.Frozen(), frozen)
		}
	}
}

// A result's outputs are kept as the server sent them; JSON null is none.
func TestAResultsOutputsAreReadAsSentAndNullIsNone(t *testing.T) {
	for _, c := range []struct {
		name, body, outputs string
	}{
		{"outputs", `{"nodeId":"wf-1","outputs":{ "result" : "é\n" }}`, `{ "result" : "é\n" }`},
		{"null outputs", `{"nodeId":"wf-1","outputs":null}`, ""},
		{"no outputs", `{"nodeId":"wf-1"}`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var result NodeResult
			if err := json.Unmarshal([]byte(c.body), &result); err != nil {
				t.Fatal(err)
			}
			if string(result.Outputs) != c.outputs || (c.outputs == "") != (result.Outputs == nil) {
				t.Errorf("outputs %q, want %q", result.Outputs, c.outputs)
			}
		})
	}
	var result NodeResult
	if err := json.Unmarshal([]byte(`{"revision":"seven"}`), &result); err == nil {
		t.Error("a result whose revision is not a number was read")
	}
}
