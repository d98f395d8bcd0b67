package argoresults

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"math/rand/v2"
	"slices"
	"time"
)

// Argo's executor backoff: from 1 s, doubling, ±20 % jitter, capped at 30 s.
const (
	backoffFirst  = time.Second
	backoffCap    = 30 * time.Second
	backoffJitter = 0.2
	// Retry-After is honoured up to this long.
	maxRetryAfter = 300 * time.Second
)

// RetryPolicy retries transient failures (connection errors, timeouts, 408, 429, 502, 503,
// 504, honouring Retry-After) until Deadline, and for each call no longer than For after
// its first attempt. The zero time and the zero duration mean no such bound, as Argo's
// ARGO_DEADLINE does; the context passed to each call still bounds it.
type RetryPolicy struct {
	Deadline time.Time
	For      time.Duration
	// Codes are problem codes retried as transient failures are: refusals that a call
	// of the controller may lift meanwhile.
	Codes []Code
}

// retries reports whether err is worth another attempt under the policy.
func (p *RetryPolicy) retries(err error) bool {
	return IsTransient(err) || slices.Contains(p.Codes, CodeOf(err))
}

// transientStatus: timeouts, shed load, a proxy or the server not ready.
func transientStatus(status int) bool {
	switch status {
	case 408, 429, 502, 503, 504:
		return true
	}
	return false
}

// IsTransient reports whether trying again may succeed: no answer (connection refused or
// reset, a timeout), an unreadable token file, or a transient status. A call whose own
// context ended is not transient, nor a server whose certificate this client does not
// trust: that is a misconfiguration no retry mends.
func IsTransient(err error) bool {
	var refused *ProblemError
	var unexpected *UnexpectedError
	var gaveUp *GaveUpError
	var attempt *attemptError
	switch {
	case errors.As(err, &gaveUp), untrusted(err):
		return false
	case errors.As(err, &refused):
		return transientStatus(refused.Problem.Status)
	case errors.As(err, &unexpected):
		return transientStatus(unexpected.Status)
	case errors.As(err, &attempt):
		return true
	}
	return false
}

// untrusted reports whether err is the server's certificate failing verification.
func untrusted(err error) bool {
	var verification *tls.CertificateVerificationError
	var authority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	return errors.As(err, &verification) || errors.As(err, &authority) || errors.As(err, &hostname) ||
		errors.As(err, &invalid)
}

// attemptError marks a failure without an answer (transport, timeout, token file): the
// kind a retry may overcome.
type attemptError struct{ err error }

func (e *attemptError) Error() string { return e.err.Error() }
func (e *attemptError) Unwrap() error { return e.err }

// backoff hands out the waits between attempts.
type backoff struct{ next time.Duration }

func newBackoff() *backoff { return &backoff{next: backoffFirst} }

// wait is the current step with ±20 % jitter; the step doubles up to the cap.
func (b *backoff) wait() time.Duration {
	base := b.next
	b.next = min(2*b.next, backoffCap)
	return time.Duration(float64(base) * (1 + backoffJitter*(2*rand.Float64()-1)))
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
