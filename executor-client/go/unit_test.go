package argoresults

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Parts that need no server: backoff, deadlines, sequences, body encoding, Retry-After and
// the CA file (against httptest servers).

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
	for status := 400; status < 600; status++ {
		want := slices.Contains([]int{408, 429, 502, 503, 504}, status)
		refused := &ProblemError{Problem: Problem{Status: status, Code: "x"}}
		if IsTransient(refused) != want || IsTransient(&UnexpectedError{Status: status}) != want {
			t.Errorf("status %d: transient should be %v", status, want)
		}
	}
	if !IsTransient(&attemptError{errors.New("connection refused")}) {
		t.Error("no answer is transient")
	}
	if IsTransient(&GaveUpError{Attempts: 3, Last: &attemptError{errors.New("refused")}}) {
		t.Error("giving up is final")
	}
}

func TestNoDeadlineIsEmptyOrGosZeroTime(t *testing.T) {
	for _, none := range []string{"", "  ", "0001-01-01T00:00:00Z"} {
		deadline, err := ParseDeadline(none)
		if err != nil || !deadline.IsZero() {
			t.Errorf("%q: %v, %v; want the zero time", none, deadline, err)
		}
	}
	deadline, err := ParseDeadline("2001-02-03T04:05:06Z")
	if err != nil || !deadline.Equal(time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)) {
		t.Errorf("a past deadline: %v, %v", deadline, err)
	}
	if deadline, _ := ParseDeadline("0001-01-01T00:00:01Z"); deadline.IsZero() {
		t.Error("only the zero time itself means none")
	}
	if _, err := ParseDeadline("tomorrow"); err == nil {
		t.Error("not RFC 3339 is an error")
	}
}

func TestTheExitCodeIsInsertedAndEveryOtherByteKept(t *testing.T) {
	for _, c := range []struct {
		outputs, want string
		code          int
	}{
		{`{ "parameters" : [{"value":"1.50", "name":"é\u0000"}],"result":"<x>" }`,
			`{"exitCode":"137", "parameters" : [{"value":"1.50", "name":"é\u0000"}],"result":"<x>" }`, 137},
		{`{ }`, `{"exitCode":"0" }`, 0},
		{``, `{"exitCode":"-1"}`, -1},
	} {
		var outputs json.RawMessage
		if c.outputs != "" {
			outputs = json.RawMessage(c.outputs)
		}
		got, err := WithExitCode(outputs, c.code)
		if err != nil || string(got) != c.want {
			t.Errorf("%s: %s, %v; want %s", c.outputs, got, err, c.want)
		}
	}
	for _, refused := range []string{`{"exitCode":"0"}`, `{"exit\u0043ode":"0"}`, `[]`, `null`} {
		if _, err := WithExitCode(json.RawMessage(refused), 1); err == nil {
			t.Errorf("%s: an exit code was added", refused)
		}
	}
}

func TestABodysOutputsAreSentByteForByte(t *testing.T) {
	outputs := json.RawMessage("{ \"result\" : \"<a & b>\",\n \"z\":1, \"a\":\"\\u0000é\" }")
	body, err := jsonBody(&ReportRequest{ProtocolVersion: 1, WorkflowUID: "u", PodName: "p", PodUID: "q"}, outputs)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"protocolVersion":1,"workflowUid":"u","podName":"p","podUid":"q","outputs":` + string(outputs) + `}`
	if string(body) != want {
		t.Errorf("body\n%s\nwant\n%s", body, want)
	}
	if _, err := jsonBody(&ReportRequest{}, json.RawMessage(`{"a":`)); err == nil {
		t.Error("outputs that are not JSON were sent")
	}
}

// Each taker opens the file itself, so the lock is contended as between processes (flock
// locks belong to an open file, not to a process).
func TestConcurrentSequenceTakersNeverShareAValue(t *testing.T) {
	path := filepath.Join(t.TempDir(), SequenceFileName)
	ahead := ClockSequence() + 1_000_000_000_000
	if err := os.WriteFile(path, []byte(strconv.FormatInt(ahead, 10)), 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var values []int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				value, err := NextSequence(path)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				values = append(values, value)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.Sort(values)
	for i, value := range values {
		if value != ahead+int64(i)+1 {
			t.Fatalf("value %d is %d, want %d: every value once, none skipped", i, value, ahead+int64(i)+1)
		}
	}
	if err := os.WriteFile(path, []byte("not a number"), 0o644); err != nil {
		t.Fatal(err)
	}
	if value, err := NextSequence(path); err != nil || value >= ahead {
		t.Errorf("a garbled file counts on from the clock: %d, %v", value, err)
	}
	if _, ok := DefaultSequenceFile(filepath.Join(t.TempDir(), "absent")); ok {
		t.Error("a default file in a directory that does not exist")
	}
}

// whoamiServer answers the statuses in order, then a whoami.
func whoamiServer(t *testing.T, tlsServer bool, statuses ...int) (*httptest.Server, *atomic.Int32) {
	calls := new(atomic.Int32)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		call := int(calls.Add(1))
		if call <= len(statuses) {
			status, code := statuses[call-1], "unavailable"
			if status == http.StatusForbidden {
				code = "forbidden"
			}
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"type":"about:blank","title":"refused","status":` +
				strconv.Itoa(status) + `,"code":"` + code + `","detail":"refused"}`))
			return
		}
		_, _ = w.Write([]byte(`{"subject":"someone","namespace":null,"pod":null,"roles":["reader"]}`))
	})
	server := httptest.NewUnstartedServer(handler)
	// The untrusting client's refused handshake is expected, not worth a log line.
	server.Config.ErrorLog = log.New(io.Discard, "", 0)
	if tlsServer {
		server.StartTLS()
	} else {
		server.Start()
	}
	t.Cleanup(server.Close)
	return server, calls
}

func TestRetryAfterIsHonouredAndRetriesStopAtRefusals(t *testing.T) {
	server, calls := whoamiServer(t, false, 503, 503)
	var waits []time.Duration
	client, err := New(Config{URL: server.URL, Retry: &RetryPolicy{}, OnRetry: func(_ error, wait time.Duration) {
		waits = append(waits, wait)
	}})
	if err != nil {
		t.Fatal(err)
	}
	who, err := client.Whoami(testContext(t))
	if err != nil || who.Subject != "someone" {
		t.Fatalf("whoami: %v, %v", who, err)
	}
	if calls.Load() != 3 || !slices.Equal(waits, []time.Duration{time.Second, time.Second}) {
		t.Errorf("%d calls, waits %v; want 3 calls after two waits of Retry-After's 1 s", calls.Load(), waits)
	}

	refusing, calls := whoamiServer(t, false, 403)
	client, _ = New(Config{URL: refusing.URL, Retry: &RetryPolicy{}})
	if _, err := client.Whoami(testContext(t)); CodeOf(err) != CodeForbidden || calls.Load() != 1 {
		t.Errorf("a 403 is final: %v after %d calls", err, calls.Load())
	}
}

func TestACancelledContextEndsTheRetries(t *testing.T) {
	server, _ := whoamiServer(t, false, 503, 503, 503, 503, 503)
	client, _ := New(Config{URL: server.URL, Retry: &RetryPolicy{}})
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := client.Whoami(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Errorf("%v after %v; want the context's end, soon", err, time.Since(start))
	}
}

func TestACAFileIsTrusted(t *testing.T) {
	server, _ := whoamiServer(t, true)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	certificate := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw})
	if err := os.WriteFile(caFile, certificate, 0o644); err != nil {
		t.Fatal(err)
	}
	trusting, err := New(Config{URL: server.URL, CAFile: caFile})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := trusting.Whoami(testContext(t)); err != nil {
		t.Errorf("with the CA file: %v", err)
	}
	untrusting, _ := New(Config{URL: server.URL})
	if _, err := untrusting.Whoami(testContext(t)); err == nil {
		t.Error("without the CA file the server was trusted")
	}
	if err := os.WriteFile(caFile, []byte("not PEM"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{URL: server.URL, CAFile: caFile}); err == nil {
		t.Error("a CA file without a certificate was accepted")
	}
}
