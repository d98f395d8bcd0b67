package backend

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	wfv1 "github.com/argoproj/argo-workflows/v4/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v4/util/logging"
	"github.com/argoproj/argo-workflows/v4/workflow/taskresults"

	argoresults "github.com/argo-results/argo-results/executor-client/go"
)

// claimsServer answers a tick's claim with claim (status and body) and records the
// requests it gets; a settle gets the settled claim back.
type claimsServer struct {
	mu       sync.Mutex
	requests []string
	settles  []map[string]any
}

func (c *claimsServer) start(t *testing.T, claimStatus int, claimBody string) *source {
	t.Helper()
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		raw, _ := io.ReadAll(req.Body)
		c.mu.Lock()
		defer c.mu.Unlock()
		c.requests = append(c.requests, req.Method+" "+req.URL.Path)
		switch {
		case strings.HasSuffix(req.URL.Path, "/runs/settle"):
			var body map[string]any
			_ = json.Unmarshal(raw, &body)
			c.settles = append(c.settles, body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"namespace":"argo","cronWorkflow":"nightly","cronWorkflowUid":"c1","scheduledTime":"2026-12-06T08:00:00Z","workflowName":"nightly-1796544000","state":"submitted","claimedAt":"2026-12-06T08:00:00Z","leaseExpiresAt":"2026-12-06T08:00:30Z"}`))
		case req.Method == http.MethodPost:
			w.Header().Set("Content-Type", "application/problem+json")
			if claimStatus == http.StatusCreated {
				w.Header().Set("Content-Type", "application/json")
			}
			w.WriteHeader(claimStatus)
			_, _ = w.Write([]byte(claimBody))
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(claimBody))
		}
	}))
	t.Cleanup(server.Close)
	client, err := argoresults.New(argoresults.Config{URL: server.URL})
	if err != nil {
		t.Fatal(err)
	}
	return &source{client: client}
}

const claimed = `{"namespace":"argo","cronWorkflow":"nightly","cronWorkflowUid":"c1","scheduledTime":"2026-12-06T08:00:00Z","workflowName":"nightly-1796544000","state":"claimed","claimId":"k1","claimedAt":"2026-12-06T08:00:00Z","leaseExpiresAt":"2026-12-06T08:00:30Z"}`

var (
	nightly   = &wfv1.CronWorkflow{ObjectMeta: metav1.ObjectMeta{Namespace: "argo", Name: "nightly", UID: "c1"}}
	scheduled = time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
)

func testContextWithLogger() context.Context {
	return logging.WithLogger(context.Background(), logging.NewSlogLogger(logging.Info, logging.Text))
}

// A tick this controller claims runs once and is settled with what the run did.
func TestRunTickSettlesWhatTheRunDid(t *testing.T) {
	for name, tc := range map[string]struct {
		run  taskresults.TickRun
		want map[string]any
	}{
		"created":        {taskresults.TickRun{WorkflowUID: "w1"}, map[string]any{"outcome": "submitted", "workflowUid": "w1"}},
		"already exists": {taskresults.TickRun{WorkflowUID: "w0", AlreadyExists: true}, map[string]any{"outcome": "submitted", "workflowUid": "w0"}},
		"skipped":        {taskresults.TickRun{Skipped: "concurrencyPolicy"}, map[string]any{"outcome": "skipped", "reason": "concurrencyPolicy"}},
	} {
		t.Run(name, func(t *testing.T) {
			server := &claimsServer{}
			s := server.start(t, http.StatusCreated, claimed)
			runs := 0
			err := s.RunTick(testContextWithLogger(), nightly, scheduled, "nightly-1796544000", func(context.Context) (taskresults.TickRun, error) {
				runs++
				return tc.run, nil
			})
			if err != nil || runs != 1 || len(server.settles) != 1 {
				t.Fatalf("err %v, %d runs, settles %v", err, runs, server.settles)
			}
			for key, value := range tc.want {
				if server.settles[0][key] != value {
					t.Errorf("settle %v: %s is %v, want %v", server.settles[0], key, server.settles[0][key], value)
				}
			}
			if server.settles[0]["claimId"] != "k1" || server.requests[0] != "POST /api/v1/namespaces/argo/cronworkflows/nightly/runs" {
				t.Errorf("requests %v, settle %v", server.requests, server.settles[0])
			}
		})
	}
}

// A tick another controller settled is not run again; a name other than the tick's own
// creates nothing.
func TestRunTickRunsNothingItDoesNotHold(t *testing.T) {
	settled := `{"type":"about:blank","title":"Conflict","status":409,"code":"already_claimed","current":` +
		strings.Replace(claimed, `"state":"claimed","claimId":"k1"`, `"state":"submitted"`, 1) + `}`
	server := &claimsServer{}
	s := server.start(t, http.StatusConflict, settled)
	run := func(context.Context) (taskresults.TickRun, error) {
		t.Fatal("a tick settled by another controller ran")
		return taskresults.TickRun{}, nil
	}
	if err := s.RunTick(testContextWithLogger(), nightly, scheduled, "nightly-1796544000", run); err != nil {
		t.Fatal(err)
	}
	other := (&claimsServer{}).start(t, http.StatusCreated, claimed)
	err := other.RunTick(testContextWithLogger(), nightly, scheduled, "nightly-other", run)
	if err == nil || !strings.Contains(err.Error(), "names workflow nightly-1796544000, not nightly-other") {
		t.Fatalf("another name: %v", err)
	}
}

// The newest settled tick is the server's lastScheduledTime; none is the zero time.
func TestLastScheduledTime(t *testing.T) {
	for body, want := range map[string]time.Time{
		`{"items":[],"lastScheduledTime":"2026-12-06T08:00:00Z"}`: scheduled,
		`{"items":[],"lastScheduledTime":null}`:                   {},
	} {
		s := (&claimsServer{}).start(t, http.StatusOK, body)
		got, err := s.LastScheduledTime(context.Background(), nightly)
		if err != nil || !got.Equal(want) {
			t.Errorf("%s: %v, %v; want %v", body, got, err, want)
		}
	}
}
