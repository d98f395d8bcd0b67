package argoresults

import (
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The client's requests and answers, against httptest servers.

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
	if _, err := jsonBody(func() {}, nil); err == nil || !strings.Contains(err.Error(), "encode the request") {
		t.Errorf("a body that cannot be encoded: %v", err)
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
	if _, err := trusting.WhoAmI(testContext(t)); err != nil {
		t.Errorf("with the CA file: %v", err)
	}
	untrusting, _ := New(Config{URL: server.URL})
	if _, err := untrusting.WhoAmI(testContext(t)); err == nil {
		t.Error("without the CA file the server was trusted")
	}
	if err := os.WriteFile(caFile, []byte("not PEM"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{URL: server.URL, CAFile: caFile}); err == nil {
		t.Error("a CA file without a certificate was accepted")
	}
	if _, err := New(Config{URL: server.URL, CAFile: caFile + ".absent"}); err == nil || !strings.Contains(err.Error(), "read the CA file") {
		t.Errorf("a CA file that is not there: %v", err)
	}
}

// Argo's hooks: its own *http.Client sends every request, with its user agent and the
// token read for each attempt; a token that cannot be read is a failure a retry may
// overcome (the kubelet has not written it yet).
func TestRequestsGoThroughTheGivenHTTPClientWithTheTokenAndUserAgent(t *testing.T) {
	server, _ := whoamiServer(t, false)
	var seen []*http.Request
	httpClient := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		seen = append(seen, r)
		return http.DefaultTransport.RoundTrip(r)
	})}
	tokens := []string{"first", "second"}
	client, err := New(Config{URL: server.URL + "/", HTTPClient: httpClient, UserAgent: "argoexec/v4.1.2",
		Token: func() (string, error) { token := tokens[0]; tokens = tokens[1:]; return token, nil }})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := client.WhoAmI(testContext(t)); err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != 2 {
		t.Fatalf("%d requests went through the given client, want 2", len(seen))
	}
	for i, want := range []string{"Bearer first", "Bearer second"} {
		r := seen[i]
		if r.URL.Path != "/api/v1/whoami" || r.Header.Get("Authorization") != want || r.Header.Get("User-Agent") != "argoexec/v4.1.2" {
			t.Errorf("request %d: %s, Authorization %q, User-Agent %q", i, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("User-Agent"))
		}
	}

	unreadable, _ := New(Config{URL: server.URL, Token: TokenFile(filepath.Join(t.TempDir(), "not-yet"))})
	if _, err := unreadable.WhoAmI(testContext(t)); err == nil || !IsTransient(err) || !strings.Contains(err.Error(), "read the token file") {
		t.Errorf("an unreadable token file: %v; want a transient failure naming it", err)
	}
}

// roundTripFunc is a transport made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Answers that are not the API's JSON (a proxy's page, a truncated body) are refused with
// what came, transient when their status is.
func TestAnswersThatAreNotTheAPIsAreUnexpected(t *testing.T) {
	for _, c := range []struct {
		name      string
		status    int
		body      string
		transient bool
	}{
		{"a proxy's 502 page", http.StatusBadGateway, "<html>bad gateway</html>", true},
		{"a 404 without a problem", http.StatusNotFound, "404 page not found", false},
		{"a 200 that is not JSON", http.StatusOK, "<html>login</html>", false},
		{"a problem without a code", http.StatusConflict, `{"status":409}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(c.status)
				_, _ = w.Write([]byte(c.body))
			}))
			defer server.Close()
			client, _ := New(Config{URL: server.URL})
			_, err := client.WhoAmI(testContext(t))
			var unexpected *UnexpectedError
			if !errors.As(err, &unexpected) || unexpected.Status != c.status || unexpected.Body != c.body {
				t.Fatalf("%v; want an UnexpectedError with status %d and the body", err, c.status)
			}
			if IsTransient(err) != c.transient || CodeOf(err) != "" || !strings.Contains(err.Error(), "GET /api/v1/whoami") {
				t.Errorf("%v: transient %v, code %q", err, IsTransient(err), CodeOf(err))
			}
		})
	}
}

func TestRetryAfterIsReadInWholeSecondsAndCapped(t *testing.T) {
	for _, c := range []struct {
		value string
		want  time.Duration
	}{
		{"", 0},
		{"1", time.Second},
		{" 7 ", 7 * time.Second},
		{"0", 0},
		{"299", 299 * time.Second},
		{"100000", maxRetryAfter},
		{"1.5", 0},
		{"-1", 0},
		{"Wed, 21 Oct 2026 07:28:00 GMT", 0},
	} {
		t.Run(strconv.Quote(c.value), func(t *testing.T) {
			if got := parseRetryAfter(c.value); got != c.want {
				t.Errorf("Retry-After %q: %v, want %v", c.value, got, c.want)
			}
		})
	}
}
