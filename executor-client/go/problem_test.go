package argoresults

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// Refusals and the errors that carry them.

func TestErrorsSayWhatFailedAndUnwrap(t *testing.T) {
	refused := &ProblemError{Problem: Problem{Status: 409, Code: CodeAlreadyCompleted, Detail: "frozen"}}
	if msg := refused.Error(); msg != "409 already_completed: frozen" {
		t.Errorf("a refusal: %s", msg)
	}
	if msg := (&UnexpectedError{Status: 502, Body: "bad gateway"}).Error(); !strings.Contains(msg, "502") {
		t.Errorf("unexpected: %s", msg)
	}
	gaveUp := &GaveUpError{Attempts: 3, Last: refused}
	if !strings.Contains(gaveUp.Error(), "3 attempts") || !errors.Is(gaveUp, refused) {
		t.Errorf("gave up: %s", gaveUp.Error())
	}
	for _, c := range []struct {
		name    string
		err     error
		code    Code
		problem bool
	}{
		{"a refusal", refused, CodeAlreadyCompleted, true},
		{"a refusal, wrapped", fmt.Errorf("settle node wf-1: %w", refused), CodeAlreadyCompleted, true},
		{"a refusal the retries gave up on", gaveUp, CodeAlreadyCompleted, true},
		{"no answer", &attemptError{errors.New("connection refused")}, "", false},
		{"an answer that is not the API's", &UnexpectedError{Status: 502}, "", false},
		{"no error", nil, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := CodeOf(c.err); got != c.code {
				t.Errorf("CodeOf: %q, want %q", got, c.code)
			}
			if got := ProblemOf(c.err); (got != nil) != c.problem || (got != nil && got.Detail != "frozen") {
				t.Errorf("ProblemOf: %+v", got)
			}
		})
	}
}

// A refusal's current object is read as what the caller expects it to be, or says why not.
func TestARefusalsCurrentObjectIsReadOrSaysWhyNot(t *testing.T) {
	problem := &Problem{Code: CodeAlreadyCompleted}
	if _, err := problem.CurrentResult(); err == nil || !strings.Contains(err.Error(), "no current object") {
		t.Errorf("no current: %v", err)
	}
	problem.Current = json.RawMessage(`null`)
	if _, err := problem.CurrentResult(); err == nil || !strings.Contains(err.Error(), "no current object") {
		t.Errorf("a null current: %v", err)
	}
	problem.Current = json.RawMessage(`"a string"`)
	if _, err := problem.CurrentClaim(); err == nil || !strings.Contains(err.Error(), "already_completed") {
		t.Error("a current that is not a claim is an error naming the refusal")
	}
	problem.Current = json.RawMessage(`{"namespace":"argo","workflow":"wf","workflowUid":"u","nodeId":"wf-1",` +
		`"state":"completed","outputs":{"result":"x"},"revision":7}`)
	current, err := problem.CurrentResult()
	if err != nil || current.State != StateCompleted || current.Revision != 7 || string(current.Outputs) != `{"result":"x"}` {
		t.Errorf("the completed result: %+v, %v", current, err)
	}
	problem.Current = json.RawMessage(`{"state":"claimed","workflowName":"nightly-1","leaseExpiresAt":"2026-11-29T17:01:00Z"}`)
	claim, err := problem.CurrentClaim()
	if err != nil || claim.State != ClaimClaimed || claim.WorkflowName != "nightly-1" {
		t.Errorf("the claim: %+v, %v", claim, err)
	}
}
