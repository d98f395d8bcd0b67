package argoresults

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The retry policy and its backoff, against httptest servers (whoamiServer, client_test.go).

func TestBackoffDoublesFromOneSecondToTheCapWithBoundedJitter(t *testing.T) {
	steps := newBackoff()
	for _, base := range []time.Duration{1, 2, 4, 8, 16, 30, 30, 30} {
		base *= time.Second
		wait := steps.wait()
		if wait < base*8/10 || wait > base*12/10 {
			t.Errorf("wait %v, want %v ± 20 %%", wait, base)
		}
	}
}

func TestOnlyTimeoutsSheddingAndGatewaysAreTransient(t *testing.T) {
	t.Run("statuses", func(t *testing.T) {
		for status := 400; status < 600; status++ {
			want := slices.Contains([]int{408, 429, 502, 503, 504}, status)
			refused := &ProblemError{Problem: Problem{Status: status, Code: "x"}}
			if IsTransient(refused) != want || IsTransient(&UnexpectedError{Status: status}) != want {
				t.Errorf("status %d: transient should be %v", status, want)
			}
		}
	})
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"no answer", &attemptError{errors.New("connection refused")}, true},
		{"no answer, wrapped", errors.Join(errors.New("register"), &attemptError{errors.New("reset")}), true},
		{"giving up", &GaveUpError{Attempts: 3, Last: &attemptError{errors.New("refused")}}, false},
		{"the call's own context ended", context.Canceled, false},
		{"no error", nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := IsTransient(c.err); got != c.want {
				t.Errorf("IsTransient(%v) = %v, want %v", c.err, got, c.want)
			}
		})
	}
}

func TestRetryAfterIsHonouredAndRetriesStopAtRefusals(t *testing.T) {
	server, calls := whoamiServer(t, false, 503, 503)
	var waits []time.Duration
	client, err := New(Config{URL: server.URL, Retry: &RetryPolicy{}, OnRetry: func(_ int, _ error, wait time.Duration) {
		waits = append(waits, wait)
	}})
	if err != nil {
		t.Fatal(err)
	}
	who, err := client.WhoAmI(testContext(t))
	if err != nil || who.Subject != "someone" {
		t.Fatalf("whoami: %v, %v", who, err)
	}
	if calls.Load() != 3 || !slices.Equal(waits, []time.Duration{time.Second, time.Second}) {
		t.Errorf("%d calls, waits %v; want 3 calls after two waits of Retry-After's 1 s", calls.Load(), waits)
	}

	refusing, calls := whoamiServer(t, false, 403)
	client, _ = New(Config{URL: refusing.URL, Retry: &RetryPolicy{}})
	if _, err := client.WhoAmI(testContext(t)); CodeOf(err) != CodeForbidden || calls.Load() != 1 {
		t.Errorf("a 403 is final: %v after %d calls", err, calls.Load())
	}
}

func TestACancelledContextEndsTheRetries(t *testing.T) {
	server, _ := whoamiServer(t, false, 503, 503, 503, 503, 503)
	client, _ := New(Config{URL: server.URL, Retry: &RetryPolicy{}})
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := client.WhoAmI(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Errorf("%v after %v; want the context's end, soon", err, time.Since(start))
	}
}

// A policy's deadline stops the retries before a wait would pass it, with the last
// refusal inside; giving up is final.
func TestADeadlineEndsTheRetriesWithTheLastError(t *testing.T) {
	server, calls := whoamiServer(t, false, 503, 503, 503, 503, 503, 503, 503, 503)
	start := time.Now()
	deadline := start.Add(2500 * time.Millisecond)
	client, _ := New(Config{URL: server.URL, Retry: &RetryPolicy{Deadline: deadline}})
	_, err := client.WhoAmI(testContext(t))
	var gaveUp *GaveUpError
	if !errors.As(err, &gaveUp) || gaveUp.Attempts != int(calls.Load()) || gaveUp.Attempts < 2 {
		t.Fatalf("%v after %d calls; want a GaveUpError counting them", err, calls.Load())
	}
	if CodeOf(err) != CodeUnavailable || IsTransient(err) {
		t.Errorf("gave up: code %q, transient %v; want the last 503 inside, and final", CodeOf(err), IsTransient(err))
	}
	if time.Now().After(deadline) {
		t.Errorf("gave up %v after the deadline; a wait past it is not started", time.Since(deadline))
	}
}

// A policy's For bounds each call's retries from its first attempt, whatever the
// deadline: the GaveUpError names the bound and keeps the last refusal.
func TestForBoundsEachCallsRetries(t *testing.T) {
	server, calls := whoamiServer(t, false, 503, 503, 503, 503, 503, 503, 503, 503)
	client, _ := New(Config{URL: server.URL, Retry: &RetryPolicy{For: 2500 * time.Millisecond}})
	start := time.Now()
	_, err := client.WhoAmI(testContext(t))
	var gaveUp *GaveUpError
	if !errors.As(err, &gaveUp) || gaveUp.For != 2500*time.Millisecond || gaveUp.Attempts != int(calls.Load()) {
		t.Fatalf("%v after %d calls; want a GaveUpError for 2.5s counting them", err, calls.Load())
	}
	if !strings.Contains(err.Error(), "gave up after") || CodeOf(err) != CodeUnavailable || IsTransient(err) {
		t.Errorf("gave up: %v (code %q, transient %v)", err, CodeOf(err), IsTransient(err))
	}
	if elapsed := time.Since(start); elapsed > 2500*time.Millisecond {
		t.Errorf("gave up after %v; no wait is started past the bound", elapsed)
	}
}

// A server whose certificate is not trusted is a misconfiguration: one attempt, final.
func TestAnUntrustedCertificateIsFinal(t *testing.T) {
	var calls atomic.Int32
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
	}))
	t.Cleanup(server.Close)
	client, _ := New(Config{URL: server.URL, Retry: &RetryPolicy{}})
	_, err := client.WhoAmI(testContext(t))
	if err == nil || IsTransient(err) || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("an untrusted server: %v (transient %v); want a final certificate error", err, IsTransient(err))
	}
	if calls.Load() != 0 {
		t.Errorf("%d requests reached the handler; the handshake must fail", calls.Load())
	}
}
