package argoresults

import (
	"encoding/json"
	"fmt"
)

// PodPhase is what the pod informer says of a node's pod.
type PodPhase string

// The pod phases a decision reads; PodGone is a pod no longer in the informer (deleted,
// evicted, its node drained).
const (
	PodPending   PodPhase = "Pending"
	PodRunning   PodPhase = "Running"
	PodSucceeded PodPhase = "Succeeded"
	PodFailed    PodPhase = "Failed"
	PodGone      PodPhase = "Gone"
)

// Verdict is the kind of a [Decision].
type Verdict string

// The verdicts, as the Rust reference reconciler names them.
const (
	// Wait: not decided yet, the pod still runs; keep the node as it is and look again on
	// the next change.
	Wait Verdict = "Wait"
	// Settle: the pod ended or vanished and no completed result was seen; settle the node
	// now ([Follower.Settle]), abandoning its result for the reason in Message unless it
	// completed.
	Settle Verdict = "Settle"
	// Succeeded, with the result's outputs.
	Succeeded Verdict = "Succeeded"
	// Failed, with the result's outputs and a message when there is one.
	Failed Verdict = "Failed"
	// Error: the step ended without saying how, or said Error.
	Error Verdict = "Error"
	// Lost: the controller abandoned the result before it completed; Message is the
	// abandon's reason.
	Lost Verdict = "Lost"
)

// Decision is what the controller may conclude about a node now. Outputs is Argo's
// Outputs JSON exactly as stored (nil for none); Message is empty when there is none.
type Decision struct {
	Verdict Verdict
	Outputs json.RawMessage
	Message string
}

// Decide gives a node's fate from its pod and its stored result (nil: nothing stored),
// and nothing else, as the Rust reference reconciler's decide does (the shared table is
// executor-client/testdata/reconciler-decisions.json):
//
//   - An abandoned result is lost, whatever the pod.
//   - A completed result decides a pod that ended: Succeeded or Failed as the pod says,
//     with the result's outputs; for a vanished pod, as the result says: its phase, else
//     its exit code, else an error, never success by default.
//   - A pod that ended or vanished with no completed result seen is to be settled
//     (Settle): its wait container is done, so whatever it committed is all there will
//     be, and the server's answer to the settle is the node's fate.
//   - A pod still pending or running waits.
func Decide(pod PodPhase, result *NodeResult) Decision {
	switch {
	case result != nil && result.State == StateAbandoned:
		return Decision{Verdict: Lost, Message: deref(result.AbandonReason)}
	case pod == PodPending || pod == PodRunning:
		return Decision{Verdict: Wait}
	case result == nil || result.State != StateCompleted:
		return Decision{Verdict: Settle, Message: settleReason(pod)}
	case pod == PodSucceeded:
		return Decision{Verdict: Succeeded, Outputs: result.Outputs}
	case pod == PodFailed:
		return Decision{Verdict: Failed, Outputs: result.Outputs, Message: failureMessage(result)}
	}
	return ended(result)
}

// settleReason is why a pod's result is abandoned when it ended, or vanished, without
// completing.
func settleReason(pod PodPhase) string {
	if pod == PodGone {
		return "the pod is gone (deleted, evicted or its node drained) without a completed result"
	}
	return fmt.Sprintf("the pod ended %s without a completed result", pod)
}

// ended is how a completed step ended, when its pod is gone.
func ended(result *NodeResult) Decision {
	outputs := result.Outputs
	switch deref(result.Phase) {
	case "Succeeded":
		return Decision{Verdict: Succeeded, Outputs: outputs}
	case "Failed":
		return Decision{Verdict: Failed, Outputs: outputs, Message: failureMessage(result)}
	case "Error":
		message := failureMessage(result)
		if message == "" {
			message = "the step reported that it ended in Error"
		}
		return Decision{Verdict: Error, Outputs: outputs, Message: message}
	}
	switch code, ok := exitCode(result); {
	case ok && code == "0":
		return Decision{Verdict: Succeeded, Outputs: outputs}
	case ok:
		return Decision{Verdict: Failed, Outputs: outputs, Message: exitMessage(code)}
	}
	return Decision{Verdict: Error, Outputs: outputs, Message: "the pod is gone and its final report said " +
		"nothing of how the step ended (no phase Succeeded, Failed or Error, no exitCode)"}
}

// exitCode is the outputs' exitCode, a string as in Argo's Outputs. The key is matched
// exactly (encoding/json would match it in any case).
func exitCode(result *NodeResult) (string, bool) {
	var members map[string]json.RawMessage
	if json.Unmarshal(result.Outputs, &members) != nil {
		return "", false
	}
	var code string
	if raw, ok := members["exitCode"]; !ok || json.Unmarshal(raw, &code) != nil {
		return "", false
	}
	return code, true
}

func exitMessage(code string) string {
	return fmt.Sprintf("the main container exited with code %s", code)
}

// failureMessage is why a step failed: what it said, else its exit code.
func failureMessage(result *NodeResult) string {
	if result.Message != nil {
		return *result.Message
	}
	if code, ok := exitCode(result); ok {
		return exitMessage(code)
	}
	return ""
}
