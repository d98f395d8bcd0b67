package argoresults

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Code is the machine-readable code of a refusal (docs/api.md section 7). Compare it with
// [CodeOf]: `argoresults.CodeOf(err) == argoresults.CodeAlreadyCompleted`.
type Code string

// The problem codes of the contract.
const (
	CodeInvalidJSON                Code = "invalid_json"
	CodeUnknownField               Code = "unknown_field"
	CodeUnsupportedProtocolVersion Code = "unsupported_protocol_version"
	CodeInvalidParameter           Code = "invalid_parameter"
	CodeUnauthenticated            Code = "unauthenticated"
	CodeForbidden                  Code = "forbidden"
	CodeNotFound                   Code = "not_found"
	CodeAlreadyCompleted           Code = "already_completed"
	CodeStaleSequence              Code = "stale_sequence"
	CodePodMismatch                Code = "pod_mismatch"
	CodeNotExpected                Code = "not_expected"
	CodeAlreadyClaimed             Code = "already_claimed"
	CodeLeaseLost                  Code = "lease_lost"
	CodeGone                       Code = "gone"
	CodeRequestTimeout             Code = "request_timeout"
	CodePayloadTooLarge            Code = "payload_too_large"
	CodeUnsupportedMediaType       Code = "unsupported_media_type"
	CodeInvalidField               Code = "invalid_field"
	CodeOverloaded                 Code = "overloaded"
	CodeUnavailable                Code = "unavailable"
	CodeInternal                   Code = "internal"
)

// Problem is an application/problem+json body (RFC 9457).
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Code   Code   `json:"code"`
	Detail string `json:"detail"`
	// Field is the JSON path of the offending field, e.g. outputs.parameters[0].name.
	Field string `json:"field,omitempty"`
	// Current is the stored object the request conflicts with (a result or a claim).
	Current json.RawMessage `json:"current,omitempty"`
	// Revision is the store's current revision, on 410 gone.
	Revision *int64 `json:"revision,omitempty"`
	// Epoch is the store's epoch Revision belongs to, on 410 gone.
	Epoch string `json:"epoch,omitempty"`
}

// CurrentResult decodes Current as a result (already_completed, stale_sequence, ...).
func (p *Problem) CurrentResult() (*NodeResult, error) {
	var result NodeResult
	if err := decodeCurrent(p, &result); err != nil {
		return nil, err
	}
	return &result, nil
}

// CurrentClaim decodes Current as a cron claim (already_claimed, lease_lost).
func (p *Problem) CurrentClaim() (*Claim, error) {
	var claim Claim
	if err := decodeCurrent(p, &claim); err != nil {
		return nil, err
	}
	return &claim, nil
}

func decodeCurrent(p *Problem, into any) error {
	if len(nilIfNull(p.Current)) == 0 {
		return fmt.Errorf("the %s refusal carries no current object", p.Code)
	}
	if err := json.Unmarshal(p.Current, into); err != nil {
		return fmt.Errorf("read the current object of a %s refusal: %w", p.Code, err)
	}
	return nil
}

// ProblemError is a refusal by the server.
type ProblemError struct {
	Problem Problem
}

func (e *ProblemError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Problem.Status, e.Problem.Code, e.Problem.Detail)
}

// UnexpectedError is an answer that is not the API's JSON (a proxy's page, perhaps).
type UnexpectedError struct {
	Status int
	Body   string
}

func (e *UnexpectedError) Error() string {
	return fmt.Sprintf("unexpected answer (%d): %s", e.Status, e.Body)
}

// GaveUpError says that transient failures went on until the deadline, or for longer than
// the policy's For.
type GaveUpError struct {
	Attempts int
	// For is the bound that ended the retries; 0: the deadline did.
	For  time.Duration
	Last error
}

func (e *GaveUpError) Error() string {
	if e.For > 0 {
		return fmt.Sprintf("gave up after %d attempts in %s; last error: %v", e.Attempts, e.For, e.Last)
	}
	return fmt.Sprintf("gave up at the deadline after %d attempts; last error: %v", e.Attempts, e.Last)
}

// Unwrap gives the last attempt's error, so that [CodeOf] and [errors.As] see through.
func (e *GaveUpError) Unwrap() error { return e.Last }

// ProblemOf is the server's refusal in err's chain, or nil.
func ProblemOf(err error) *Problem {
	var refused *ProblemError
	if errors.As(err, &refused) {
		return &refused.Problem
	}
	return nil
}

// CodeOf is the problem code in err's chain, or "" when the server did not refuse.
func CodeOf(err error) Code {
	if p := ProblemOf(err); p != nil {
		return p.Code
	}
	return ""
}
