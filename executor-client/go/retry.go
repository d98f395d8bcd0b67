package argoresults

import (
	"context"
	"errors"
	"math/rand/v2"
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
// 504, honouring Retry-After) until Deadline. The zero time means no deadline, as Argo's
// ARGO_DEADLINE does; the context passed to each call still bounds it.
type RetryPolicy struct {
	Deadline time.Time
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
// reset, TLS, a timeout), an unreadable token file, or a transient status. A call whose
// own context ended is not transient.
func IsTransient(err error) bool {
	var refused *ProblemError
	var unexpected *UnexpectedError
	var gaveUp *GaveUpError
	var attempt *attemptError
	switch {
	case errors.As(err, &gaveUp):
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
