package argoresults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The change set of docs/argo-upstream.md, call for call, against the real server: the
// controller's side (ResumeFollower at start, Follower.Run enqueueing, Register around the
// pod's creation, Results and Settle in backendTaskResultReconciliation, Delete in
// persistUpdates) and the pod's (Reporter.Start, Progress, Finalize from
// the container that finalizes, Outputs from main when another one does).

// feedLoop is the controller's goroutine the change set adds: Follower.Run, its callback
// enqueueing each changed workflow.
type feedLoop struct {
	follower *Follower
	mu       sync.Mutex
	queued   []WorkflowRef
	// signal wakes a waiter after each enqueue.
	signal  chan struct{}
	running bool
	stop    context.CancelFunc
	done    chan error
}

func newFeedLoop(f *Follower) *feedLoop {
	return &feedLoop{follower: f, signal: make(chan struct{}, 1)}
}

// start runs Run, unless it runs.
func (l *feedLoop) start(ctx context.Context) {
	if l.running {
		return
	}
	l.running = true
	ctx, l.stop = context.WithCancel(ctx)
	l.done = make(chan error, 1)
	go func() { l.done <- l.follower.Run(ctx, 5*time.Second, l.enqueue) }()
}

func (l *feedLoop) enqueue(workflow WorkflowRef) {
	l.mu.Lock()
	l.queued = append(l.queued, workflow)
	l.mu.Unlock()
	select {
	case l.signal <- struct{}{}:
	default:
	}
}

// halt stops Run, which must end with its context.
func (l *feedLoop) halt(t *testing.T) {
	t.Helper()
	l.running = false
	l.stop()
	select {
	case err := <-l.done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run ended with %v, want its context's end", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not end with its context")
	}
}

func (l *feedLoop) enqueued(workflow WorkflowRef) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, queued := range l.queued {
		if queued == workflow {
			n++
		}
	}
	return n
}

// await waits until Run enqueued the workflow more than after times and the follower
// knows the node's result at the revision stored now: the controller's worker would see
// everything the pod committed.
func (l *feedLoop) await(t *testing.T, s *testServer, st step, after int) NodeResult {
	t.Helper()
	stored := s.stored(st)
	deadline := time.After(30 * time.Second)
	for {
		known, ok := l.follower.Result(st.workflow.UID, st.nodeID)
		if l.enqueued(st.workflow) > after && ok && known.Revision == stored.Revision {
			return known
		}
		select {
		case <-l.signal:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatalf("%s was not enqueued with %s at revision %d within 30 s (enqueued %d times, known: %v at %d)",
				st.workflow.Name, st.nodeID, stored.Revision, l.enqueued(st.workflow), ok, known.Revision)
		}
	}
}

// reportingPod is a pod's reporting container: its reporter and its token file.
type reportingPod struct {
	r         *Reporter
	tokenFile string
}

// revoke makes the pod's token one the server refuses.
func (p *reportingPod) revoke(t *testing.T) {
	t.Helper()
	if err := writeFile(p.tokenFile, "revoked"); err != nil {
		t.Fatal(err)
	}
}

// podEnding is one way a pod ends, and what the controller must conclude of it.
type podEnding struct {
	name string
	// running is the pod's phase until it ends, as the pod informer shows it.
	running PodPhase
	// reports is what the pod's reporting container sends while it runs, final what it
	// sends as it ends; nil: nothing.
	reports, final func(t *testing.T, ctx context.Context, p *reportingPod)
	// seen is the state the follower knows the result in when the pod ends.
	seen ResultState
	// lagging: the controller's feed has not caught up with the pod's final report when
	// the pod is gone.
	lagging bool
	ended   PodPhase
	verdict Verdict
	// message is a fragment of the decision's message ("": none); outputs are the node's
	// exactly ("": none).
	message, outputs string
	stored           ResultState
}

func TestTheChangeSetsCallsDecideEveryPodEnding(t *testing.T) {
	sent := `{"parameters": [{"name": "rows", "value": "1042\n\"é\""}],` + "\n" +
		` "artifacts": [{"name": "main-logs", "s3": {"key": "ends/main.log"}}]}`
	// What the final report stores: main's exit code inserted, every other byte kept.
	withExitCode := func(code string) string { return `{"exitCode":"` + code + `",` + sent[1:] }
	running := func(t *testing.T, ctx context.Context, p *reportingPod) {
		if err := p.r.Start(ctx); err != nil {
			t.Fatalf("start: %v", err)
		}
		if err := p.r.Progress(ctx, "1/2"); err != nil {
			t.Fatalf("progress: %v", err)
		}
	}
	finalize := func(code int) func(*testing.T, context.Context, *reportingPod) {
		return func(t *testing.T, ctx context.Context, p *reportingPod) {
			if _, err := p.r.Finalize(ctx, FinalReport{Outputs: json.RawMessage(sent), ExitCodes: map[string]int{"main": code}}); err != nil {
				t.Fatalf("the final report: %v", err)
			}
		}
	}
	// The token is refused from here on, so the reports fail as they would after a
	// refusal or a give-up; the container exits 0 all the same.
	refusedStart := func(t *testing.T, ctx context.Context, p *reportingPod) {
		p.revoke(t)
		if err := p.r.Start(ctx); CodeOf(err) != CodeUnauthenticated {
			t.Fatalf("start with a refused token: %v", err)
		}
	}
	refusedFinal := func(t *testing.T, ctx context.Context, p *reportingPod) {
		p.revoke(t)
		_, err := p.r.Finalize(ctx, FinalReport{Outputs: json.RawMessage(sent), ExitCodes: map[string]int{"main": 0}})
		if CodeOf(err) != CodeUnauthenticated {
			t.Fatalf("the final report with a refused token: %v", err)
		}
	}
	const endedFailed, endedSucceeded = "the pod ended Failed without a completed result",
		"the pod ended Succeeded without a completed result"
	endings := []podEnding{
		{name: "Succeeded", running: PodRunning, reports: running, final: finalize(0), seen: StateCompleted,
			ended: PodSucceeded, verdict: Succeeded, outputs: withExitCode("0"), stored: StateCompleted},
		{name: "Failed, main exited 3", running: PodRunning, reports: running, final: finalize(3), seen: StateCompleted,
			ended: PodFailed, verdict: Failed, message: "the main container exited with code 3", outputs: withExitCode("3"),
			stored: StateCompleted},
		{name: "an init container failed: wait never ran", running: PodPending, seen: StateExpected,
			ended: PodFailed, verdict: Lost, message: endedFailed, stored: StateAbandoned},
		{name: "failed while Pending", running: PodPending, seen: StateExpected,
			ended: PodFailed, verdict: Lost, message: endedFailed, stored: StateAbandoned},
		{name: "deleted while running", running: PodRunning, reports: running, seen: StateReporting,
			ended: PodGone, verdict: Lost, message: "the pod is gone", stored: StateAbandoned},
		{name: "evicted while reporting", running: PodRunning, reports: running, seen: StateReporting,
			ended: PodFailed, verdict: Lost, message: endedFailed, stored: StateAbandoned},
		{name: "wait exited 0 after its final report failed", running: PodRunning, reports: running, final: refusedFinal,
			seen: StateReporting, ended: PodSucceeded, verdict: Lost, message: endedSucceeded, stored: StateAbandoned},
		{name: "wait exited 0 with nothing it sent stored", running: PodRunning, reports: refusedStart, final: refusedFinal,
			seen: StateExpected, ended: PodSucceeded, verdict: Lost, message: endedSucceeded, stored: StateAbandoned},
		{name: "Succeeded, then deleted before the feed caught up", running: PodRunning, reports: running, final: finalize(0),
			seen: StateReporting, lagging: true, ended: PodGone, verdict: Succeeded, outputs: withExitCode("0"),
			stored: StateCompleted},
	}

	onBackends(t, func(t *testing.T, b backend) {
		s := startServer(t, b, "--require-expectation")
		ctx := testContext(t)
		admin := s.admin()
		var inFlight []WorkflowRef
		for i := range endings {
			inFlight = append(inFlight, testWorkflow("ending-"+string(rune('a'+i))))
		}

		// The controller starts: it lists the workflows in flight and follows the feed.
		f, err := ResumeFollower(ctx, admin, inFlight, FollowerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		loop := newFeedLoop(f)
		loop.start(ctx)

		for i, ending := range endings {
			t.Run(ending.name, func(t *testing.T) {
				wf := inFlight[i]
				st := wf.step(1)
				pod := &reportingPod{}
				pod.r, pod.tokenFile = s.reporter(st)
				// The feed runs on for the next ending, whatever happens to this one.
				defer loop.start(ctx)

				// submitPod: registered by name before the pod is created, with its UID after.
				before, err := f.Register(ctx, wf, st.nodeID, st.podName, "")
				if err != nil || before.State != StateExpected || before.PodUID != nil || deref(before.PodName) != st.podName {
					t.Fatalf("registered before the pod: %+v, %v", before, err)
				}
				after, err := f.Register(ctx, wf, st.nodeID, st.podName, st.podUID)
				if err != nil || after.State != StateExpected || deref(after.PodUID) != st.podUID {
					t.Fatalf("registered with the pod's UID: %+v, %v", after, err)
				}
				loop.await(t, s, st, 0)
				mark := loop.enqueued(wf)

				if ending.reports != nil {
					ending.reports(t, ctx, pod)
				}
				if ending.lagging {
					loop.await(t, s, st, mark)
					loop.halt(t)
				}
				if ending.final != nil {
					ending.final(t, ctx, pod)
				}
				if !ending.lagging && ending.seen != StateExpected {
					loop.await(t, s, st, mark)
				}

				// backendTaskResultReconciliation: the workflow's results as the follower knows them.
				results := f.Results(wf.UID)
				if len(results) != 1 || results[0].NodeID != st.nodeID || results[0].State != ending.seen {
					t.Fatalf("the workflow's results when its pod ends: %+v, want %s %s", results, st.nodeID, ending.seen)
				}
				if d, err := f.Settle(ctx, wf, st.nodeID, ending.running); err != nil || d.Verdict != Wait {
					t.Errorf("the pod still %s: %+v, %v; want Wait", ending.running, d, err)
				}

				// podReconciliation: the pod ended or is gone.
				decision, err := f.Settle(ctx, wf, st.nodeID, ending.ended)
				if err != nil {
					t.Fatalf("settle: %v", err)
				}
				if decision.Verdict == Wait || decision.Verdict == Settle || decision.Verdict != ending.verdict {
					t.Errorf("decided %s, want %s", decision.Verdict, ending.verdict)
				}
				if (ending.message == "") != (decision.Message == "") || !strings.Contains(decision.Message, ending.message) {
					t.Errorf("message %q, want one with %q", decision.Message, ending.message)
				}
				if string(decision.Outputs) != ending.outputs {
					t.Errorf("the node's outputs\n%s\nwant exactly\n%s", decision.Outputs, ending.outputs)
				}

				stored := s.stored(st)
				if stored.State != ending.stored || string(stored.Outputs) != ending.outputs {
					t.Errorf("stored %s with outputs %s, want %s with %s", stored.State, stored.Outputs, ending.stored, ending.outputs)
				}
				if ending.stored == StateAbandoned && deref(stored.AbandonReason) != decision.Message {
					t.Errorf("abandoned for %q, decided with %q", deref(stored.AbandonReason), decision.Message)
				}
				if ending.stored == StateCompleted && stored.AbandonReason != nil {
					t.Errorf("a completed result with an abandon reason %q", *stored.AbandonReason)
				}
				if known, ok := f.Result(wf.UID, st.nodeID); !ok || known.State != stored.State || known.Revision != stored.Revision {
					t.Errorf("the follower knows %s at %d, stored is %s at %d", known.State, known.Revision, stored.State, stored.Revision)
				}
				if ending.lagging {
					loop.start(ctx)
				}

				// A late report of the ended pod changes nothing.
				s.writeToken(st, pod.tokenFile)
				if _, err := pod.r.Finalize(ctx, FinalReport{Phase: "Error", Message: "a late report"}); CodeOf(err) != CodeAlreadyCompleted {
					t.Errorf("a late final report: %v, want already_completed", err)
				}
				if late := s.stored(st); late.Revision != stored.Revision {
					t.Errorf("a late report moved the result from revision %d to %d", stored.Revision, late.Revision)
				}

				// persistUpdates: the results are deleted, and the workflow is followed no more.
				deleted, err := f.Delete(ctx, wf)
				if err != nil || deleted != 1 {
					t.Fatalf("delete: %d, %v", deleted, err)
				}
				if _, err := admin.GetResult(ctx, st.node(), wf.UID); CodeOf(err) != CodeNotFound {
					t.Errorf("after the delete: %v, want not_found", err)
				}
				current, _, err := head(ctx, admin, "")
				if err != nil {
					t.Fatal(err)
				}
				for deadline := time.Now().Add(30 * time.Second); f.Since() < current; time.Sleep(50 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("the feed was not read past the tombstone at %d (at %d)", current, f.Since())
					}
				}
				if results := f.Results(wf.UID); len(results) != 0 {
					t.Errorf("a deleted workflow is still known: %+v", results)
				}
				if d := f.Decide(wf.UID, st.nodeID, ending.ended); d.Verdict != Settle {
					t.Errorf("a deleted workflow's node still decides %s", d.Verdict)
				}
			})
		}

		loop.halt(t)
		loop.mu.Lock()
		defer loop.mu.Unlock()
		for _, queued := range loop.queued {
			if !slices.Contains(inFlight, queued) {
				t.Errorf("Run enqueued %v, which the controller does not follow", queued)
			}
		}
		for _, wf := range inFlight {
			if !slices.Contains(loop.queued, wf) {
				t.Errorf("Run never enqueued %s", wf.Name)
			}
		}
	})
}

// recorder keeps each answer's status and body as a transport Argo wraps around the
// client (Config.HTTPClient) sees them.
type recorder struct {
	mu      sync.Mutex
	answers []recorded
}

type recorded struct {
	method string
	status int
	body   []byte
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	answer, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(answer.Body)
	answer.Body.Close()
	if err != nil {
		return nil, err
	}
	answer.Body = io.NopCloser(bytes.NewReader(body))
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answers = append(r.answers, recorded{method: req.Method, status: answer.StatusCode, body: body})
	return answer, nil
}

func (r *recorder) last(t *testing.T) recorded {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.answers) == 0 {
		t.Fatal("no answer recorded")
	}
	return r.answers[len(r.answers)-1]
}

// Argo's init-less layout for a manifestFrom resource template: main (argoexec resource)
// and supervisor report for one node, from one pod, drawing sequences from one counter
// in the var-run-argo emptyDir. main sends the resource's parameters, not final; the
// supervisor finalizes after main exited, with the log artifact and the exit codes, and
// its final report is the first, not a refused second.
func TestTheInitlessSupervisorsReportsEndAccepted(t *testing.T) {
	onBackends(t, func(t *testing.T, b backend) {
		s := startServer(t, b, "--require-expectation")
		ctx := testContext(t)
		st := testWorkflow("initless").step(1)
		f := NewFollower(s.admin(), 0, FollowerOptions{})
		register(t, f, st, "")
		register(t, f, st, st.podUID)

		dir := t.TempDir()
		tokenFile, sequenceFile := filepath.Join(dir, "token"), filepath.Join(dir, SequenceFileName)
		s.writeToken(st, tokenFile)
		container := func(httpClient *http.Client) *Reporter {
			r, err := NewReporter(ReporterConfig{
				URL: s.url, TokenFile: tokenFile, Workflow: st.workflow.Name, WorkflowUID: st.workflow.UID,
				NodeID: st.nodeID, PodName: st.podName, PodUID: st.podUID, SequenceFile: sequenceFile,
				HTTPClient: httpClient,
			})
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		answers := &recorder{}
		supervisor, main := container(&http.Client{Transport: answers}), container(nil)

		var sequences []int64
		took := func(what string) {
			t.Helper()
			sequence := *s.stored(st).Sequence
			if len(sequences) > 0 && sequence <= sequences[len(sequences)-1] {
				t.Errorf("%s stored sequence %d after %v: the shared counter hands out growing values", what, sequence, sequences)
			}
			sequences = append(sequences, sequence)
		}
		if err := supervisor.Start(ctx); err != nil {
			t.Fatalf("the supervisor's start: %v", err)
		}
		took("the supervisor's start")
		if err := main.Start(ctx); err != nil {
			t.Fatalf("main's start: %v", err)
		}
		took("main's start")

		manifest, uid := "kind: ConfigMap\nmetadata:\n  name: \"café\"\n", "é\"\n"
		params := `{"parameters": [{"name": "manifest", "value": "kind: ConfigMap\nmetadata:\n  name: \"café\"\n"}, ` +
			`{"name": "uid", "value": "é\"\n"}]}`
		sent, err := main.Outputs(ctx, json.RawMessage(params))
		if err != nil {
			t.Fatalf("main's outputs: %v", err)
		}
		reporting := s.stored(st)
		if sent.State != StateReporting || reporting.State != StateReporting ||
			string(sent.Outputs) != params || string(reporting.Outputs) != params {
			t.Errorf("main's parameters: answered %s %s, stored %s %s; want reporting, byte for byte\n%s",
				sent.State, sent.Outputs, reporting.State, reporting.Outputs, params)
		}
		took("main's outputs")

		logs := `{"artifacts": [{"name": "main-logs", "s3": {"key": "initless/initless-main-1/main.log"}}]}`
		final := FinalReport{Outputs: json.RawMessage(logs), ExitCodes: map[string]int{"main": 0}}
		done, err := supervisor.Finalize(ctx, final)
		if err != nil {
			t.Fatalf("the supervisor's final report: %v", err)
		}
		accepted := answers.last(t)
		if accepted.method != http.MethodPut || accepted.status != http.StatusOK {
			t.Errorf("the final report answered %s %d, want PUT 200", accepted.method, accepted.status)
		}
		if done.State != StateCompleted || deref(done.Phase) != "Succeeded" || done.CompletedAt == nil {
			t.Errorf("the final report: %s, phase %q", done.State, deref(done.Phase))
		}
		took("the supervisor's final report")
		jsonEqual(t, "the merged outputs", done.Outputs, `{"exitCode":"0",`+
			`"parameters":[{"name":"manifest","value":"kind: ConfigMap\nmetadata:\n  name: \"café\"\n"},{"name":"uid","value":"é\"\n"}],`+
			`"artifacts":[{"name":"main-logs","s3":{"key":"initless/initless-main-1/main.log"}}]}`)
		var merged struct {
			ExitCode   *string `json:"exitCode"`
			Parameters []struct {
				Name, Value string
			} `json:"parameters"`
		}
		if err := json.Unmarshal(done.Outputs, &merged); err != nil {
			t.Fatal(err)
		}
		if merged.ExitCode == nil || *merged.ExitCode != "0" || len(merged.Parameters) != 2 ||
			merged.Parameters[0].Value != manifest || merged.Parameters[1].Value != uid {
			t.Errorf("main's parameters and exit code after the merge: %+v", merged)
		}

		// What GET returns is the final answer, byte for byte.
		reads := &recorder{}
		reader, err := New(Config{URL: s.url, Token: StaticToken(s.mint(adminClaims())), HTTPClient: &http.Client{Transport: reads}})
		if err != nil {
			t.Fatal(err)
		}
		got, err := reader.GetResult(ctx, st.node(), st.workflow.UID)
		if err != nil {
			t.Fatal(err)
		}
		if read := reads.last(t); !bytes.Equal(read.body, accepted.body) {
			t.Errorf("GET answered\n%s\nthe final report\n%s", read.body, accepted.body)
		}

		// The supervisor retries its final report (its answer lost): a replay, not a 409.
		again, err := supervisor.Finalize(ctx, final)
		replayed := answers.last(t)
		if err != nil || replayed.status != http.StatusOK || again.Revision != done.Revision || !bytes.Equal(replayed.body, accepted.body) {
			t.Errorf("the retried final report: %d, revision %d after %d, %v", replayed.status, again.Revision, done.Revision, err)
		}
		if next, err := NextSequence(sequenceFile); err != nil || next <= sequences[len(sequences)-1] {
			t.Errorf("the shared counter goes on at %d, %v; want past %v", next, err, sequences)
		}

		// The controller's decision, from the result it follows and from the stored one.
		followAll(t, f)
		for _, d := range []Decision{f.Decide(st.workflow.UID, st.nodeID, PodSucceeded), Decide(PodSucceeded, got)} {
			if d.Verdict != Succeeded || d.Message != "" || string(d.Outputs) != string(got.Outputs) {
				t.Errorf("decided %+v, want Succeeded with exactly\n%s", d, got.Outputs)
			}
		}
	})
}
