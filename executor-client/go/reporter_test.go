package argoresults

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The Reporter against the real server: what argoexec's four task-result calls become.

func TestReport(t *testing.T) {
	onBackends(t, func(t *testing.T, b backend) {
		s := startServer(t, b)
		ctx := testContext(t)
		st := testWorkflow("report").step(1)
		r, tokenFile := s.reporter(st)

		if err := r.Start(ctx); err != nil {
			t.Fatalf("start: %v", err)
		}
		if got := s.stored(st); got.State != StateReporting || got.Outputs != nil {
			t.Errorf("started: %s with outputs %s", got.State, got.Outputs)
		}
		if err := r.Progress(ctx, "1/3"); err != nil {
			t.Fatalf("progress: %v", err)
		}
		params := `{"parameters":[{"name":"rows","value":"1042"}]}`
		if _, err := r.Outputs(ctx, json.RawMessage(params)); err != nil {
			t.Fatalf("outputs: %v", err)
		}
		reporting := s.stored(st)
		if reporting.State != StateReporting || deref(reporting.Progress) != "1/3" {
			t.Errorf("before the final report: %s, progress %v", reporting.State, deref(reporting.Progress))
		}
		jsonEqual(t, "outputs sent before the final report", reporting.Outputs, params)

		logs := `{"artifacts":[{"name":"main-logs","s3":{"key":"report/report-main-1/main.log"}}]}`
		final, err := r.Finalize(ctx, FinalReport{Outputs: json.RawMessage(logs), Phase: "Succeeded", ExitCodes: map[string]int{"main": 0}})
		if err != nil {
			t.Fatalf("finalize: %v", err)
		}
		if final.State != StateCompleted || deref(final.Phase) != "Succeeded" || final.CompletedAt == nil {
			t.Errorf("final: %s, phase %s", final.State, deref(final.Phase))
		}
		jsonEqual(t, "the completed outputs", s.stored(st).Outputs,
			`{"exitCode":"0","parameters":[{"name":"rows","value":"1042"}],`+
				`"artifacts":[{"name":"main-logs","s3":{"key":"report/report-main-1/main.log"}}]}`)
		if *final.Sequence <= *reporting.Sequence {
			t.Errorf("sequence %d after %d: each report takes a larger one", *final.Sequence, *reporting.Sequence)
		}

		// The token file is read before each attempt: a rotated-out token is refused.
		if err := r.Progress(ctx, "3/3"); err != nil {
			t.Errorf("a progress update after the final report is only logged: %v", err)
		}
		if got := s.stored(st); got.Revision != final.Revision || deref(got.Progress) != "1/3" {
			t.Errorf("a refused progress changed the result: revision %d, progress %s", got.Revision, deref(got.Progress))
		}
		if err := writeFile(tokenFile, "not-a-token"); err != nil {
			t.Fatal(err)
		}
		if err := r.Progress(ctx, "3/3"); CodeOf(err) != CodeUnauthenticated {
			t.Errorf("with the token file's new content: %v, want unauthenticated", err)
		}
	})
}

func TestReplay(t *testing.T) {
	onBackends(t, func(t *testing.T, b backend) {
		s := startServer(t, b)
		ctx := testContext(t)
		st := testWorkflow("replay").step(1)
		pod := s.client(s.mint(podClaims(testNamespace, st.podName, st.podUID)))
		report := ReportRequest{
			ProtocolVersion: ProtocolVersion, WorkflowUID: st.workflow.UID, PodName: st.podName, PodUID: st.podUID,
			Sequence: 5, Final: true, Phase: "Succeeded", Outputs: json.RawMessage(`{"result":"x"}`),
		}
		first, created, err := pod.Report(ctx, testNamespace, st.workflow.Name, st.nodeID, &report)
		if err != nil || !created {
			t.Fatalf("first: created %v, %v", created, err)
		}
		again, created, err := pod.Report(ctx, testNamespace, st.workflow.Name, st.nodeID, &report)
		if err != nil || created || again.Revision != first.Revision {
			t.Errorf("replay: created %v, revision %d after %d, %v", created, again.Revision, first.Revision, err)
		}

		// The Reporter's own retry after a lost answer: a new sequence, the same content.
		other := testWorkflow("replay").step(2)
		r, _ := s.reporter(other)
		done, err := r.Finalize(ctx, FinalReport{Phase: "Failed", ExitCodes: map[string]int{"main": 3}})
		if err != nil {
			t.Fatal(err)
		}
		replayed, err := r.Finalize(ctx, FinalReport{Phase: "Failed", ExitCodes: map[string]int{"main": 3}})
		if err != nil || replayed.Revision != done.Revision {
			t.Errorf("finalizing again: %v, revision %d after %d", err, replayed.Revision, done.Revision)
		}

		// A sequence reused with other content, or a lower one, is stale and changes nothing.
		third := testWorkflow("replay").step(3)
		pod = s.client(s.mint(podClaims(testNamespace, third.podName, third.podUID)))
		progress := ReportRequest{
			ProtocolVersion: ProtocolVersion, WorkflowUID: third.workflow.UID, PodName: third.podName, PodUID: third.podUID,
			Sequence: 5, Progress: "1/2",
		}
		if _, _, err := pod.Report(ctx, testNamespace, third.workflow.Name, third.nodeID, &progress); err != nil {
			t.Fatal(err)
		}
		for _, stale := range []ReportRequest{{Sequence: 5, Progress: "2/2"}, {Sequence: 4, Progress: "2/2"}} {
			progress.Sequence, progress.Progress = stale.Sequence, stale.Progress
			_, _, err := pod.Report(ctx, testNamespace, third.workflow.Name, third.nodeID, &progress)
			if CodeOf(err) != CodeStaleSequence || ProblemOf(err).Status != http.StatusConflict {
				t.Errorf("sequence %d: %v, want 409 stale_sequence", stale.Sequence, err)
			}
		}
		if got := s.stored(third); deref(got.Progress) != "1/2" {
			t.Errorf("a stale report changed the progress to %s", deref(got.Progress))
		}
	})
}

func TestFrozen(t *testing.T) {
	onBackends(t, func(t *testing.T, b backend) {
		s := startServer(t, b)
		ctx := testContext(t)
		st := testWorkflow("frozen").step(1)
		r, _ := s.reporter(st)
		done, err := r.Finalize(ctx, FinalReport{Outputs: json.RawMessage(`{"result":"first"}`), Phase: "Succeeded"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.Outputs(ctx, json.RawMessage(`{"result":"second"}`))
		if CodeOf(err) != CodeAlreadyCompleted {
			t.Fatalf("outputs after completion: %v, want already_completed", err)
		}
		current, err := ProblemOf(err).CurrentResult()
		if err != nil || current.Revision != done.Revision || current.State != StateCompleted {
			t.Errorf("the refusal's current result: %+v, %v", current, err)
		}
		_, err = s.admin().Abandon(ctx, testNamespace, st.workflow.Name, st.nodeID,
			&AbandonRequest{WorkflowUID: st.workflow.UID, Reason: "pod deleted"})
		if CodeOf(err) != CodeAlreadyCompleted {
			t.Errorf("abandon after completion: %v, want already_completed", err)
		}
		if got := s.stored(st); got.Revision != done.Revision || got.State != StateCompleted {
			t.Errorf("a refused write changed the result: %s at %d", got.State, got.Revision)
		}
		jsonEqual(t, "frozen outputs", s.stored(st).Outputs, `{"result":"first"}`)

		// An abandoned result is frozen too; the late report does not count as done.
		lost := testWorkflow("frozen").step(2)
		abandoned, err := s.admin().Abandon(ctx, testNamespace, lost.workflow.Name, lost.nodeID,
			&AbandonRequest{WorkflowUID: lost.workflow.UID, Reason: "pod deleted"})
		if CodeOf(err) != CodeNotFound {
			t.Fatalf("abandon of a node never registered: %v, %v; want not_found", abandoned, err)
		}
		late, _ := s.reporter(lost)
		if err := late.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.admin().Abandon(ctx, testNamespace, lost.workflow.Name, lost.nodeID,
			&AbandonRequest{WorkflowUID: lost.workflow.UID, Reason: "pod deleted"}); err != nil {
			t.Fatal(err)
		}
		if _, err := late.Finalize(ctx, FinalReport{Phase: "Succeeded"}); CodeOf(err) != CodeAlreadyCompleted {
			t.Errorf("a final report after the abandon: %v, want already_completed", err)
		}
		if got := s.stored(lost); got.State != StateAbandoned || deref(got.AbandonReason) != "pod deleted" {
			t.Errorf("abandoned: %s (%s)", got.State, deref(got.AbandonReason))
		}
	})
}

func TestMerge(t *testing.T) {
	onBackends(t, func(t *testing.T, b backend) {
		s := startServer(t, b)
		ctx := testContext(t)
		// The main container of a resource template reports its parameters; wait then
		// archives the logs; a key set to null goes.
		st := testWorkflow("merge").step(1)
		r, _ := s.reporter(st)
		exact := "{ \"parameters\" : [{\"name\":\"id\",\"value\":\"<a & b> é \\u0000\"}],\n  \"result\": \"drop me\" }"
		sent, err := r.Outputs(ctx, json.RawMessage(exact))
		if err != nil {
			t.Fatal(err)
		}
		if string(sent.Outputs) != exact || string(s.stored(st).Outputs) != exact {
			t.Errorf("outputs are not stored byte for byte:\n%s\n%s\nwant\n%s", sent.Outputs, s.stored(st).Outputs, exact)
		}
		_, err = r.Finalize(ctx, FinalReport{
			Outputs: json.RawMessage(`{"result":null,"artifacts":[{"name":"main-logs","s3":{"key":"k"}}]}`),
			Phase:   "Succeeded", ExitCodes: map[string]int{"main": 0},
		})
		if err != nil {
			t.Fatal(err)
		}
		jsonEqual(t, "merged outputs", s.stored(st).Outputs,
			`{"exitCode":"0","parameters":[{"name":"id","value":"<a & b> é \u0000"}],`+
				`"artifacts":[{"name":"main-logs","s3":{"key":"k"}}]}`)

		// An array is replaced as a whole.
		next := testWorkflow("merge").step(2)
		r, _ = s.reporter(next)
		for _, outputs := range []string{`{"parameters":[{"name":"a","value":"1"},{"name":"b","value":"2"}]}`,
			`{"parameters":[{"name":"c","value":"3"}]}`} {
			if _, err := r.Outputs(ctx, json.RawMessage(outputs)); err != nil {
				t.Fatal(err)
			}
		}
		jsonEqual(t, "a replaced array", s.stored(next).Outputs, `{"parameters":[{"name":"c","value":"3"}]}`)
	})
}

// ARGO_DEADLINE is when Argo kills main, not when reporting stops: argoexec reports the
// outputs after it on a context nothing cancels. The Reporter reads no deadline, and
// retries until the report is stored: here the server starts late, and the token file
// appears only then. It logs every 20th retry, as argoexec does, and every report given
// up with its cause.
func TestReportsGoOnPastTheDeadlineUntilStored(t *testing.T) {
	onBackends(t, func(t *testing.T, b backend) {
		ctx := testContext(t)
		late := freeAddress(t)
		st := testWorkflow("deadline").step(1)
		tokenFile := t.TempDir() + "/token"
		env := map[string]string{
			"ARGO_RESULTS_URL": "http://" + late, "ARGO_RESULTS_TOKEN_FILE": tokenFile,
			"ARGO_DEADLINE":      time.Now().Add(-time.Minute).Format(time.RFC3339),
			"ARGO_WORKFLOW_NAME": st.workflow.Name, "ARGO_WORKFLOW_UID": st.workflow.UID,
			"ARGO_NODE_ID": st.nodeID, "ARGO_POD_NAME": st.podName, "ARGO_POD_UID": st.podUID,
			"ARGO_RESULTS_SEQUENCE_FILE": t.TempDir() + "/seq",
		}
		config := ReporterConfigFromEnv(func(name string) string { return env[name] })
		config.Namespace = testNamespace
		logged := &recordingLogger{}
		config.Logger = logged
		r, err := NewReporter(config)
		if err != nil {
			t.Fatal(err)
		}
		reported := make(chan error, 1)
		go func() {
			_, err := r.Finalize(ctx, FinalReport{ExitCodes: map[string]int{"main": 0}})
			reported <- err
		}()
		time.Sleep(1500 * time.Millisecond)
		s := startServerAt(t, b, late)
		s.writeToken(st, tokenFile)
		select {
		case err := <-reported:
			if err != nil {
				t.Fatalf("a report past the deadline: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("no report stored within 60 s of the server's start")
		}
		if got := s.stored(st); got.State != StateCompleted || deref(got.Phase) != "Succeeded" {
			t.Errorf("stored %s, phase %s", got.State, deref(got.Phase))
		}

		// A report whose context ended gives up at once, and says why.
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := r.Finalize(cancelled, FinalReport{Phase: "Failed"}); err == nil {
			t.Error("a report on an ended context succeeded")
		}
		if !logged.has("argo-results: gave up on a report") {
			t.Errorf("the give-up was not logged: %v", logged.messages())
		}
	})
}

// recordingLogger keeps what it was told.
type recordingLogger struct {
	mu    sync.Mutex
	lines []string
}

func (l *recordingLogger) Log(_ context.Context, level slog.Level, msg string, fields map[string]any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf("%s %s %v", level, msg, fields))
}

func (l *recordingLogger) messages() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}

func (l *recordingLogger) has(fragment string) bool {
	for _, line := range l.messages() {
		if strings.Contains(line, fragment) {
			return true
		}
	}
	return false
}
