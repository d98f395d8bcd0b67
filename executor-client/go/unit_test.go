package argoresults

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
	client, err := New(Config{URL: server.URL, Retry: &RetryPolicy{}, OnRetry: func(_ int, _ error, wait time.Duration) {
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

func TestErrorsSayWhatFailedAndUnwrap(t *testing.T) {
	refused := &ProblemError{Problem: Problem{Status: 409, Code: CodeAlreadyCompleted, Detail: "frozen"}}
	tick := &TickError{Stage: "settle", Claim: &Claim{ScheduledTime: "2026-11-29T17:00:00Z", WorkflowName: "nightly-1"}, Err: refused}
	if msg := tick.Error(); !strings.Contains(msg, "settle") || !strings.Contains(msg, "nightly-1") || !strings.Contains(msg, "frozen") {
		t.Errorf("tick error: %s", msg)
	}
	if !errors.Is(tick, refused) || CodeOf(tick) != CodeAlreadyCompleted {
		t.Error("a tick error unwraps to its cause")
	}
	if msg := (&TickError{Stage: "claim", Err: refused}).Error(); !strings.Contains(msg, "claim") {
		t.Errorf("a claim's error: %s", msg)
	}
	if msg := (&UnexpectedError{Status: 502, Body: "bad gateway"}).Error(); !strings.Contains(msg, "502") {
		t.Errorf("unexpected: %s", msg)
	}
	gaveUp := &GaveUpError{Attempts: 3, Last: refused}
	if !strings.Contains(gaveUp.Error(), "3 attempts") || !errors.Is(gaveUp, refused) {
		t.Errorf("gave up: %s", gaveUp.Error())
	}
	if !StateCompleted.Frozen() || !StateAbandoned.Frozen() || StateReporting.Frozen() || StateExpected.Frozen() {
		t.Error("completed and abandoned results are frozen, the others not")
	}
}

func TestSlogLoggerWritesEachField(t *testing.T) {
	var out strings.Builder
	logger := SlogLogger(slog.New(slog.NewTextHandler(&out, nil)))
	logger.Log(context.Background(), slog.LevelWarn, "argo-results: retrying a report", map[string]any{"attempt": 20})
	if line := out.String(); !strings.Contains(line, "level=WARN") || !strings.Contains(line, "attempt=20") {
		t.Errorf("logged %q", line)
	}
}

func TestAReporterNeedsItsIdentity(t *testing.T) {
	_, err := NewReporter(ReporterConfig{URL: "http://127.0.0.1:1", Workflow: "wf"})
	for _, name := range []string{"ARGO_WORKFLOW_UID", "ARGO_NODE_ID", "ARGO_POD_NAME", "ARGO_POD_UID"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("missing %s: %v", name, err)
		}
	}
	config := ReporterConfigFromEnv(func(string) string { return "" })
	if config.TokenFile != DefaultTokenFile || config.URL != "" {
		t.Errorf("from an empty environment: %+v", config)
	}
}

func TestMalformedAnswersAreRefusedWithWhatIsWrong(t *testing.T) {
	var item FeedItem
	if err := json.Unmarshal([]byte(`{"type":"deleted","revision":1}`), &item); err == nil || !strings.Contains(err.Error(), "lacks its fields") {
		t.Errorf("a tombstone without its key: %v", err)
	}
	if err := json.Unmarshal([]byte(`{"type":`), &item); err == nil {
		t.Error("truncated JSON is an error")
	}
	problem := &Problem{Code: CodeAlreadyCompleted}
	if _, err := problem.CurrentResult(); err == nil || !strings.Contains(err.Error(), "no current object") {
		t.Errorf("no current: %v", err)
	}
	problem.Current = json.RawMessage(`"a string"`)
	if _, err := problem.CurrentClaim(); err == nil {
		t.Error("a current that is not a claim is an error")
	}
	for _, token := range []string{"not-a-jwt", "a.%%%.c", "a." + base64URL(`{"sub":"x"}`) + ".c"} {
		if namespace, ok := TokenNamespace(token); ok {
			t.Errorf("%q names namespace %q", token, namespace)
		}
	}
	if namespace, ok := TokenNamespace("a." + base64URL(`{"kubernetes.io":{"namespace":"argo"}}`) + ".c"); !ok || namespace != "argo" {
		t.Errorf("a pod token's namespace: %q, %v", namespace, ok)
	}
}

// A reporter without a sequence file outside a pod (no /var/run/argo) counts on the clock;
// with an unusable one, it says so.
func TestReporterSequences(t *testing.T) {
	config := ReporterConfig{URL: "http://127.0.0.1:1", Namespace: "argo", Workflow: "wf", WorkflowUID: "u", NodeID: "wf-1", PodName: "wf-main-1", PodUID: "p"}
	r, err := NewReporter(config)
	if err != nil {
		t.Fatal(err)
	}
	first, err := r.sequence()
	if err != nil || first <= 0 {
		t.Fatalf("a clock sequence: %d, %v", first, err)
	}
	config.SequenceFile = t.TempDir() + "/missing/dir/seq"
	r, err = NewReporter(config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.sequence(); err == nil || !strings.Contains(err.Error(), "sequence file") {
		t.Errorf("an unusable sequence file: %v", err)
	}
	if _, ok := DefaultSequenceFile(t.TempDir() + "/absent"); ok {
		t.Error("no directory, no default sequence file")
	}
}

func base64URL(text string) string { return base64.RawURLEncoding.EncodeToString([]byte(text)) }
