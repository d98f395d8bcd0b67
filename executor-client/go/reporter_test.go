package argoresults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
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
		if _, err := r.Outputs(ctx, json.RawMessage(params)); CodeOf(err) != CodeUnauthenticated {
			t.Errorf("with the token file's new content: %v, want unauthenticated", err)
		}
	})
}

// monitorProgress goes on while wait sends its final report. A progress update then must
// not take a later sequence: stored while the final report's first attempt is still on its
// way (or its answer lost), it would have that attempt, or its retry under the same
// sequence, refused as stale_sequence, and the step's outputs lost.
func TestProgressNeverOvertakesTheFinalReport(t *testing.T) {
	onBackends(t, func(t *testing.T, b backend) {
		s := startServer(t, b)
		ctx := testContext(t)
		st := testWorkflow("overtake").step(1)
		dir := t.TempDir()
		tokenFile := filepath.Join(dir, "token")
		s.writeToken(st, tokenFile)
		held, release := make(chan struct{}), make(chan struct{})
		logged := &recordingLogger{}
		r, err := NewReporter(ReporterConfig{
			URL: s.url, TokenFile: tokenFile, Namespace: testNamespace,
			Workflow: st.workflow.Name, WorkflowUID: st.workflow.UID, NodeID: st.nodeID,
			PodName: st.podName, PodUID: st.podUID,
			SequenceFile: filepath.Join(dir, SequenceFileName), Logger: logged,
			HTTPClient: &http.Client{Transport: holdFirstFinal{held, release, &sync.Once{}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Progress(ctx, "1/3"); err != nil {
			t.Fatalf("progress: %v", err)
		}
		finalized := make(chan error, 1)
		go func() {
			_, err := r.Finalize(ctx, FinalReport{Outputs: json.RawMessage(`{"parameters":[{"name":"rows","value":"42"}]}`), ExitCodes: map[string]int{"main": 0}})
			finalized <- err
		}()
		<-held
		if err := r.Progress(ctx, "3/3"); err != nil {
			t.Errorf("progress while the final report is on its way: %v", err)
		}
		close(release)
		if err := <-finalized; err != nil {
			t.Fatalf("the final report, overtaken by progress: %v", err)
		}
		got := s.stored(st)
		if got.State != StateCompleted || deref(got.Progress) != "1/3" {
			t.Errorf("stored %s, progress %s; want completed, 1/3", got.State, deref(got.Progress))
		}
		jsonEqual(t, "the completed outputs", got.Outputs, `{"exitCode":"0","parameters":[{"name":"rows","value":"42"}]}`)
		if !logged.has("argo-results: not sent") {
			t.Errorf("the progress held back was not logged: %v", logged.messages())
		}
	})
}

// holdFirstFinal delays the first final report in the network until release is closed,
// after saying so on held: the network being slow, which the real server cannot be made to
// be on demand.
type holdFirstFinal struct {
	held, release chan struct{}
	once          *sync.Once
}

func (h holdFirstFinal) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"final":true`)) {
			h.once.Do(func() {
				close(h.held)
				<-h.release
			})
		}
	}
	return http.DefaultTransport.RoundTrip(req)
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
		first, created, err := pod.Report(ctx, st.node(), &report)
		if err != nil || !created {
			t.Fatalf("first: created %v, %v", created, err)
		}
		again, created, err := pod.Report(ctx, st.node(), &report)
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
		if _, _, err := pod.Report(ctx, third.node(), &progress); err != nil {
			t.Fatal(err)
		}
		for _, stale := range []ReportRequest{{Sequence: 5, Progress: "2/2"}, {Sequence: 4, Progress: "2/2"}} {
			progress.Sequence, progress.Progress = stale.Sequence, stale.Progress
			_, _, err := pod.Report(ctx, third.node(), &progress)
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
		_, err = s.admin().Abandon(ctx, st.node(), &AbandonRequest{WorkflowUID: st.workflow.UID, Reason: "pod deleted"})
		if CodeOf(err) != CodeAlreadyCompleted {
			t.Errorf("abandon after completion: %v, want already_completed", err)
		}
		if got := s.stored(st); got.Revision != done.Revision || got.State != StateCompleted {
			t.Errorf("a refused write changed the result: %s at %d", got.State, got.Revision)
		}
		jsonEqual(t, "frozen outputs", s.stored(st).Outputs, `{"result":"first"}`)

		// An abandoned result is frozen too; the late report does not count as done.
		lost := testWorkflow("frozen").step(2)
		abandoned, err := s.admin().Abandon(ctx, lost.node(), &AbandonRequest{WorkflowUID: lost.workflow.UID, Reason: "pod deleted"})
		if CodeOf(err) != CodeNotFound {
			t.Fatalf("abandon of a node never registered: %v, %v; want not_found", abandoned, err)
		}
		late, _ := s.reporter(lost)
		if err := late.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.admin().Abandon(ctx, lost.node(), &AbandonRequest{WorkflowUID: lost.workflow.UID, Reason: "pod deleted"}); err != nil {
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
// appears only then. It logs its first retry and every 20th, and every report given
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

// A pod created again under its name (its predecessor was deleted before the workflow
// recorded it, and the controller died before binding the new pod's UID) reports into a
// row still bound to the predecessor: its pod_mismatch is retried until the controller
// binds it, then its final report is stored. The model finds the final lost without the
// retry (#39, tests/model's pod created again).
func TestAPodCreatedAgainIsStoredOnceTheControllerBindsIt(t *testing.T) {
	onBackends(t, func(t *testing.T, b backend) {
		s := startServer(t, b, "--require-expectation")
		ctx := testContext(t)
		admin := s.admin()
		deleted := testWorkflow("again").step(1)
		again := deleted
		again.podUID = deleted.podUID + "-again"
		expect := func(podUID string) {
			t.Helper()
			request := ExpectationRequest{WorkflowUID: deleted.workflow.UID, PodName: deleted.podName, PodUID: podUID}
			if _, _, err := admin.Expect(ctx, deleted.node(), &request); err != nil {
				t.Fatal(err)
			}
		}
		expect(deleted.podUID)
		first, _ := s.reporter(deleted)
		if err := first.Start(ctx); err != nil {
			t.Fatal(err)
		}
		// The controller, run again, registers the node by name and creates the pod again.
		expect("")
		final := FinalReport{ExitCodes: map[string]int{"main": 0}}

		// The negative control: without the retry, the final report is lost.
		refusing, _ := s.reporter(again)
		refusing.client.retry.Codes = nil
		if _, err := refusing.Finalize(ctx, final); CodeOf(err) != CodePodMismatch {
			t.Fatalf("without the retry: %v; want pod_mismatch", err)
		}

		r, _ := s.reporter(again)
		retried := make(chan error, 1)
		r.client.onRetry = func(_ int, err error, _ time.Duration) {
			select {
			case retried <- err:
			default:
			}
		}
		reported := make(chan error, 1)
		go func() {
			_, err := r.Finalize(ctx, final)
			reported <- err
		}()
		select {
		case err := <-retried:
			if CodeOf(err) != CodePodMismatch {
				t.Fatalf("retried after %v; want pod_mismatch", err)
			}
		case err := <-reported:
			t.Fatalf("the final report ended unbound, not retried: %v", err)
		}
		expect(again.podUID)
		if err := <-reported; err != nil {
			t.Fatalf("the final report once the pod was bound: %v", err)
		}
		got := s.stored(deleted)
		if got.State != StateCompleted || deref(got.PodUID) != again.podUID || deref(got.Phase) != "Succeeded" {
			t.Errorf("stored %s by pod %s, phase %s; want completed by %s", got.State, deref(got.PodUID), deref(got.Phase), again.podUID)
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

func TestTheExitCodeIsInsertedAndEveryOtherByteKept(t *testing.T) {
	for _, c := range []struct {
		name, outputs, want string
		code                int
	}{
		{"outputs with spacing, escapes and unicode",
			`{ "parameters" : [{"value":"1.50", "name":"é\u0000"}],"result":"<x>" }`,
			`{"exitCode":"137", "parameters" : [{"value":"1.50", "name":"é\u0000"}],"result":"<x>" }`, 137},
		{"empty outputs", `{ }`, `{"exitCode":"0" }`, 0},
		{"no outputs", ``, `{"exitCode":"-1"}`, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var outputs json.RawMessage
			if c.outputs != "" {
				outputs = json.RawMessage(c.outputs)
			}
			got, err := WithExitCode(outputs, c.code)
			if err != nil || string(got) != c.want {
				t.Errorf("%s: %s, %v; want %s", c.outputs, got, err, c.want)
			}
		})
	}
	for _, refused := range []string{`{"exitCode":"0"}`, `{"exit\u0043ode":"0"}`, `[]`, `null`} {
		t.Run("refused "+refused, func(t *testing.T) {
			if _, err := WithExitCode(json.RawMessage(refused), 1); err == nil {
				t.Errorf("%s: an exit code was added", refused)
			}
		})
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
	identity := unreachableReporterConfig()
	identity.CAFile = filepath.Join(t.TempDir(), "absent-ca.crt")
	if _, err := NewReporter(identity); err == nil || !strings.Contains(err.Error(), "argo-results reporter") {
		t.Errorf("a CA file that is not there: %v", err)
	}
}

// unreachableReporterConfig is a complete identity whose server nothing answers for: for
// what a reporter checks before it sends.
func unreachableReporterConfig() ReporterConfig {
	return ReporterConfig{URL: "http://127.0.0.1:1", Namespace: "argo", Workflow: "wf", WorkflowUID: "u", NodeID: "wf-1", PodName: "wf-main-1", PodUID: "p"}
}

// A reporter without a sequence file outside a pod (no /var/run/argo) counts on the clock;
// with an unusable one, it says so.
func TestReporterSequences(t *testing.T) {
	config := unreachableReporterConfig()
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
	if err := r.Start(testContext(t)); err == nil || !strings.Contains(err.Error(), "sequence file") {
		t.Errorf("a report without a sequence: %v; want nothing sent, and why", err)
	}
	if _, ok := DefaultSequenceFile(t.TempDir() + "/absent"); ok {
		t.Error("no directory, no default sequence file")
	}
}

// Exactly the variables the change set has the controller set (argoexec's Init passes its
// own lookup): the step's identity from Argo's standard variables, the server, token and CA
// from ARGO_RESULTS_*. Argo sets no namespace variable, so none is read.
func TestReporterConfigFromEnvReadsTheVariablesArgoSets(t *testing.T) {
	env := map[string]string{
		"ARGO_RESULTS_URL": "https://argo-results.argo.svc:8443", "ARGO_RESULTS_TOKEN_FILE": "/var/run/secrets/argo-results/token",
		"ARGO_RESULTS_CA_FILE": "/var/run/secrets/argo-results/ca.crt", "ARGO_WORKFLOW_NAME": "etl",
		"ARGO_WORKFLOW_UID": "5d0c9f5e", "ARGO_NODE_ID": "etl-1529417052", "ARGO_POD_NAME": "etl-extract-1529417052",
		"ARGO_POD_UID": "0b6f7c1e", "ARGO_INSTANCE_ID": "blue", "ARGO_RESULTS_SEQUENCE_FILE": "/var/run/argo/seq",
		"ARGO_RESULTS_RETRY_FOR": "90s", "ARGO_NAMESPACE": "not-read",
	}
	var read []string
	config := ReporterConfigFromEnv(func(name string) string {
		read = append(read, name)
		return env[name]
	})
	want := ReporterConfig{
		URL: env["ARGO_RESULTS_URL"], TokenFile: env["ARGO_RESULTS_TOKEN_FILE"], CAFile: env["ARGO_RESULTS_CA_FILE"],
		Workflow: "etl", WorkflowUID: "5d0c9f5e", NodeID: "etl-1529417052", PodName: "etl-extract-1529417052",
		PodUID: "0b6f7c1e", InstanceID: "blue", SequenceFile: "/var/run/argo/seq", retryForEnv: "90s",
	}
	if config != want {
		t.Errorf("read\n%+v\nwant\n%+v", config, want)
	}
	slices.Sort(read)
	wantRead := []string{"ARGO_INSTANCE_ID", "ARGO_NODE_ID", "ARGO_POD_NAME", "ARGO_POD_UID", "ARGO_RESULTS_CA_FILE",
		"ARGO_RESULTS_RETRY_FOR", "ARGO_RESULTS_SEQUENCE_FILE", "ARGO_RESULTS_TOKEN_FILE", "ARGO_RESULTS_URL",
		"ARGO_WORKFLOW_NAME", "ARGO_WORKFLOW_UID"}
	if !slices.Equal(read, wantRead) {
		t.Errorf("looked up %v, want exactly %v", read, wantRead)
	}
}

// The namespace: the configured one, else the token's, else the service account's file;
// without any, the reporter is not built and says where it looked.
func TestAReportersNamespaceComesFromItsToken(t *testing.T) {
	dir := t.TempDir()
	namespaced, bare := filepath.Join(dir, "namespaced"), filepath.Join(dir, "bare")
	if err := writeFile(namespaced, "a."+base64URL(`{"kubernetes.io":{"namespace":"team-a"}}`)+".c\n"); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(bare, "a."+base64URL(`{"sub":"someone"}`)+".c"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, configured, tokenFile, want string
	}{
		{"the token's", "", namespaced, "team-a"},
		{"the configured one over the token's", "team-b", namespaced, "team-b"},
		{"the configured one without a token", "team-b", filepath.Join(dir, "absent"), "team-b"},
	} {
		t.Run(c.name, func(t *testing.T) {
			config := unreachableReporterConfig()
			config.Namespace, config.TokenFile = c.configured, c.tokenFile
			r, err := NewReporter(config)
			if err != nil {
				t.Fatal(err)
			}
			if r.namespace != c.want {
				t.Errorf("namespace %q, want %q", r.namespace, c.want)
			}
		})
	}
	t.Run("none", func(t *testing.T) {
		if _, err := os.Stat(ServiceAccountNamespaceFile); err == nil {
			t.Skipf("%s exists here: the service account's namespace would be taken", ServiceAccountNamespaceFile)
		}
		config := unreachableReporterConfig()
		config.Namespace, config.TokenFile = "", bare
		_, err := NewReporter(config)
		if err == nil || !strings.Contains(err.Error(), bare) || !strings.Contains(err.Error(), ServiceAccountNamespaceFile) {
			t.Errorf("no namespace anywhere: %v; want an error naming both places", err)
		}
	})
}

// What a reporter refuses before sending anything: no outputs to send, or an exit code
// for outputs that already carry one.
func TestAReporterRefusesReportsItCannotMake(t *testing.T) {
	r, err := NewReporter(unreachableReporterConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	if _, err := r.Outputs(ctx, nil); err == nil || !strings.Contains(err.Error(), "no outputs") {
		t.Errorf("outputs without outputs: %v", err)
	}
	_, err = r.Finalize(ctx, FinalReport{Outputs: json.RawMessage(`{"exitCode":"1"}`), ExitCodes: map[string]int{"main": 0}})
	if err == nil || !strings.Contains(err.Error(), "already have an exitCode") {
		t.Errorf("two exit codes: %v", err)
	}
}

// The first retry is logged at once, so that a server down shows while it matters; then
// every 20th attempt, as argoexec's reportResult logs its own.
func TestTheFirstRetryAndEveryTwentiethAreLogged(t *testing.T) {
	config := unreachableReporterConfig()
	logged := &recordingLogger{}
	config.Logger = logged
	r, err := NewReporter(config)
	if err != nil {
		t.Fatal(err)
	}
	for attempt := 1; attempt <= 45; attempt++ {
		r.client.onRetry(attempt, errors.New("503 unavailable"), time.Second)
	}
	lines := logged.messages()
	if len(lines) != 3 || !strings.Contains(lines[0], "attempt:1 ") || !strings.Contains(lines[1], "attempt:20") ||
		!strings.Contains(lines[2], "attempt:40") || !strings.Contains(lines[0], "retrying a report") ||
		!strings.Contains(lines[0], "503 unavailable") {
		t.Errorf("logged %q; want attempts 1, 20 and 40, with the error", lines)
	}
}

// A report is retried for ARGO_RESULTS_RETRY_FOR (DefaultRetryFor without it), then given
// up with a GaveUpError that fails the container, and the give-up is logged.
func TestAReportIsRetriedForItsBoundThenGivenUp(t *testing.T) {
	for value, want := range map[string]string{"": DefaultRetryFor.String(), "90s": "1m30s"} {
		config := unreachableReporterConfig()
		config.retryForEnv = value
		r, err := NewReporter(config)
		if err != nil || r.config.RetryFor.String() != want {
			t.Errorf("ARGO_RESULTS_RETRY_FOR %q: %v, %v; want %s", value, r, err, want)
		}
	}
	for _, bad := range []string{"5", "-1s", "0s", "soon"} {
		config := unreachableReporterConfig()
		config.retryForEnv = bad
		if _, err := NewReporter(config); err == nil || !strings.Contains(err.Error(), "ARGO_RESULTS_RETRY_FOR") {
			t.Errorf("ARGO_RESULTS_RETRY_FOR %q: %v; want it refused by name", bad, err)
		}
	}
	config := unreachableReporterConfig()
	config.RetryFor = 2 * time.Second
	logged := &recordingLogger{}
	config.Logger = logged
	r, err := NewReporter(config)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = r.Finalize(testContext(t), FinalReport{ExitCodes: map[string]int{"main": 0}})
	var gaveUp *GaveUpError
	if !errors.As(err, &gaveUp) || gaveUp.For != 2*time.Second || time.Since(start) > 2*time.Second {
		t.Fatalf("%v after %v; want a GaveUpError within the 2 s bound", err, time.Since(start))
	}
	lines := logged.messages()
	if len(lines) < 2 || !strings.Contains(lines[0], "retrying a report") || !strings.Contains(lines[len(lines)-1], "gave up on a report") {
		t.Errorf("logged %q; want the first retry, then the give-up", lines)
	}
}

// A container set without a main container: the phase comes from every exit code, and
// the outputs get no exitCode, since Argo's is main's; a node whose pod vanished is still
// decided by that phase.
func TestAContainerSetWithoutMainIsDecidedByEveryExitCode(t *testing.T) {
	onBackends(t, func(t *testing.T, b backend) {
		s := startServer(t, b)
		wf := testWorkflow("container-set")
		params := `{"parameters": [{"name": "n", "value": "é\n"}]}`
		for i, c := range []struct {
			name      string
			outputs   string
			exitCodes map[string]int
			phase     string
			exitCode  string // "" for none
			verdict   Verdict
		}{
			{"every container exited 0", params, map[string]int{"a": 0, "b": 0}, "Succeeded", "", Succeeded},
			{"one container exited 2", "", map[string]int{"a": 0, "b": 2}, "Failed", "", Failed},
			{"one exited 1 beside main's 0", params, map[string]int{"main": 0, "b": 1}, "Failed", "0", Failed},
		} {
			t.Run(c.name, func(t *testing.T) {
				st := wf.step(i + 1)
				r, _ := s.reporter(st)
				final := FinalReport{ExitCodes: c.exitCodes}
				if c.outputs != "" {
					final.Outputs = json.RawMessage(c.outputs)
				}
				if _, err := r.Finalize(testContext(t), final); err != nil {
					t.Fatal(err)
				}
				stored := s.stored(st)
				if stored.State != StateCompleted || deref(stored.Phase) != c.phase {
					t.Errorf("stored %s with phase %q, want completed, %s", stored.State, deref(stored.Phase), c.phase)
				}
				code, ok := exitCode(stored)
				if ok != (c.exitCode != "") || code != c.exitCode {
					t.Errorf("outputs %s: exitCode %q (%v), want %q", stored.Outputs, code, ok, c.exitCode)
				}
				if c.exitCode == "" && string(stored.Outputs) != c.outputs {
					t.Errorf("outputs %q, want exactly what was sent, %q", stored.Outputs, c.outputs)
				}
				for _, pod := range []PodPhase{PodGone, PodSucceeded} {
					if pod == PodSucceeded && c.verdict != Succeeded {
						continue
					}
					if d := Decide(pod, stored); d.Verdict != c.verdict || !bytes.Equal(d.Outputs, stored.Outputs) {
						t.Errorf("pod %s: %+v, want %s with the stored outputs", pod, d, c.verdict)
					}
				}
			})
		}
	})
}
