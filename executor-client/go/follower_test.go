package argoresults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The Follower against the real server: what the controller's task-result informer
// becomes.

// finish reports a step's final result from its pod.
func (s *testServer) finish(st step, final FinalReport) *NodeResult {
	s.t.Helper()
	r, _ := s.reporter(st)
	result, err := r.Finalize(testContext(s.t), final)
	if err != nil {
		s.t.Fatalf("final report of %s: %v", st.nodeID, err)
	}
	return result
}

func register(t *testing.T, f *Follower, st step, podUID string) {
	t.Helper()
	if _, err := f.Register(testContext(t), st.workflow, st.nodeID, st.podName, podUID); err != nil {
		t.Fatal(err)
	}
}

// followAll follows the feed until it has nothing new.
func followAll(t *testing.T, f *Follower) []WorkflowRef {
	t.Helper()
	var changed []WorkflowRef
	for range 100 {
		since := f.Since()
		workflows, err := f.Follow(testContext(t), 0)
		if err != nil {
			t.Fatal(err)
		}
		changed = append(changed, workflows...)
		if f.Since() == since {
			return changed
		}
	}
	t.Fatal("the feed never ran dry")
	return nil
}

func TestFollower(t *testing.T) {
	onBackends(t, func(t *testing.T, b backend) {
		s := startServer(t, b, "--require-expectation")
		ctx := testContext(t)
		f := NewFollower(s.admin(), 0, FollowerOptions{})
		wf := testWorkflow("follow")
		done, lost, running := wf.step(1), wf.step(2), wf.step(3)

		// Not registered: the pod may not report, and nothing is stored.
		early, _ := s.reporter(done)
		if err := early.Start(ctx); CodeOf(err) != CodeNotExpected {
			t.Fatalf("a report before registration: %v, want not_expected", err)
		}
		if _, err := s.admin().GetResult(ctx, done.node(), ""); CodeOf(err) != CodeNotFound {
			t.Errorf("a refused report stored something: %v", err)
		}
		for _, st := range []step{done, lost, running} {
			register(t, f, st, "")
			register(t, f, st, st.podUID)
		}
		if d := f.Decide(wf.UID, done.nodeID, PodSucceeded); d.Verdict != Settle {
			t.Errorf("registered, not reported, the pod succeeded: %s; not seen is not done, and a settle decides", d.Verdict)
		}

		// A long poll wakes on the final report.
		type followed struct {
			changed []WorkflowRef
			err     error
		}
		woke := make(chan followed, 1)
		go func() {
			changed, err := f.Follow(ctx, 20*time.Second)
			woke <- followed{changed, err}
		}()
		time.Sleep(300 * time.Millisecond)
		start := time.Now()
		s.finish(done, FinalReport{Outputs: json.RawMessage(`{"parameters":[{"name":"n","value":"1"}]}`), Phase: "Succeeded", ExitCodes: map[string]int{"main": 0}})
		select {
		case got := <-woke:
			if got.err != nil || !slices.Equal(got.changed, []WorkflowRef{wf}) {
				t.Errorf("the long poll: %v, %v", got.changed, got.err)
			}
			if time.Since(start) > 5*time.Second {
				t.Errorf("the long poll woke %v after the commit", time.Since(start))
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the long poll never returned")
		}
		followAll(t, f)
		decided := f.Decide(wf.UID, done.nodeID, PodSucceeded)
		if decided.Verdict != Succeeded {
			t.Errorf("completed and the pod succeeded: %s", decided.Verdict)
		}
		jsonEqual(t, "the node's outputs", decided.Outputs, `{"exitCode":"0","parameters":[{"name":"n","value":"1"}]}`)

		// Pods gone: one that never reported is lost, one that completed keeps its outcome.
		d, err := f.Settle(ctx, wf, lost.nodeID, PodGone)
		if err != nil || d.Verdict != Lost || !strings.Contains(d.Message, "the pod is gone") {
			t.Errorf("a pod gone before reporting: %+v, %v", d, err)
		}
		if d := f.Decide(wf.UID, lost.nodeID, PodSucceeded); d.Verdict != Lost {
			t.Errorf("an abandoned node, remembered: %s", d.Verdict)
		}
		if d, err := f.Settle(ctx, wf, done.nodeID, PodGone); err != nil || d.Verdict != Succeeded {
			t.Errorf("a completed pod gone: %+v, %v; want its reported phase", d, err)
		}

		var states []ResultState
		for _, result := range f.Results(wf.UID) {
			states = append(states, result.State)
		}
		if !slices.Equal(states, []ResultState{StateCompleted, StateAbandoned, StateExpected}) {
			t.Errorf("the workflow's results by node ID: %v", states)
		}

		// A restarted follower, told the workflows in flight, decides as this one does.
		s.finish(running, FinalReport{Phase: "Failed", Message: "OOMKilled", ExitCodes: map[string]int{"main": 137}})
		followAll(t, f)
		resumed, err := ResumeFollower(ctx, s.admin(), []WorkflowRef{wf}, FollowerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range []step{done, lost, running} {
			for _, pod := range []PodPhase{PodRunning, PodSucceeded, PodFailed, PodGone} {
				want, got := f.Decide(wf.UID, st.nodeID, pod), resumed.Decide(wf.UID, st.nodeID, pod)
				if got.Verdict != want.Verdict || got.Message != want.Message || !sameJSON(t, got.Outputs, want.Outputs) {
					t.Errorf("%s, pod %s: resumed %+v, live %+v", st.nodeID, pod, got, want)
				}
			}
		}
		if d := resumed.Decide(wf.UID, running.nodeID, PodGone); d.Verdict != Failed || d.Message != "OOMKilled" {
			t.Errorf("a vanished pod's node takes its phase from the stored result: %+v", d)
		}

		// Run hands each change to the controller until its context ends.
		runCtx, stopRun := context.WithCancel(ctx)
		changes := make(chan WorkflowRef, 16)
		ran := make(chan error, 1)
		go func() { ran <- resumed.Run(runCtx, 10*time.Second, func(w WorkflowRef) { changes <- w }) }()
		other := testWorkflow("follow-later").step(1)
		if err := resumed.Track(ctx, other.workflow); err != nil {
			t.Fatal(err)
		}
		register(t, f, other, other.podUID)
		s.finish(other, FinalReport{Phase: "Succeeded"})
		select {
		case w := <-changes:
			if w != other.workflow {
				t.Errorf("Run handed %v, want %v", w, other.workflow)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Run handed no change")
		}
		stopRun()
		select {
		case err := <-ran:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Run ended with %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not end with its context")
		}

		// A workflow garbage collected is forgotten.
		f.Forget(wf.UID)
		if d := f.Decide(wf.UID, done.nodeID, PodSucceeded); d.Verdict != Settle || len(f.Results(wf.UID)) != 0 {
			t.Errorf("a forgotten workflow is still known: %s", d.Verdict)
		}
	})
}

func TestFollowerRelistsWhenTheHistoryIsGone(t *testing.T) {
	onBackends(t, func(t *testing.T, b backend) {
		s := startServer(t, b, "--feed-retention", "1s", "--retention-every", "100ms")
		ctx := testContext(t)
		admin := s.admin()
		f := NewFollower(admin, 0, FollowerOptions{})
		wf := testWorkflow("relist")
		first, second := wf.step(1), wf.step(2)
		register(t, f, first, first.podUID)
		register(t, f, second, second.podUID)
		s.finish(first, FinalReport{Phase: "Succeeded"})
		followAll(t, f)
		behind := f.Since()

		// While the follower looks away, the second step completes and the history goes.
		s.finish(second, FinalReport{Outputs: json.RawMessage(`{"result":"late"}`), Phase: "Failed", Message: "boom"})
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, err := admin.Feed(ctx, FeedOptions{Since: behind})
			if CodeOf(err) == CodeGone {
				if ProblemOf(err).Revision == nil {
					t.Fatal("410 without the current revision")
				}
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if time.Now().After(deadline) {
				t.Fatal("the history was never pruned")
			}
			time.Sleep(100 * time.Millisecond)
		}
		if d := f.Decide(wf.UID, second.nodeID, PodFailed); d.Verdict != Settle {
			t.Fatalf("before the re-list the follower cannot know: %s", d.Verdict)
		}
		changed, err := f.Follow(ctx, 0)
		if err != nil || !slices.Equal(changed, []WorkflowRef{wf}) {
			t.Fatalf("following after the history went: %v, %v; want a re-list of %v", changed, err, wf)
		}
		d := f.Decide(wf.UID, second.nodeID, PodFailed)
		if d.Verdict != Failed || d.Message != "boom" {
			t.Errorf("after the re-list: %+v", d)
		}
		jsonEqual(t, "outputs after the re-list", d.Outputs, `{"result":"late"}`)
		if f.Since() <= behind {
			t.Errorf("the feed is read on from %d, not after the listing", f.Since())
		}

		// And goes on from there without loss.
		third := wf.step(3)
		register(t, f, third, third.podUID)
		s.finish(third, FinalReport{Phase: "Succeeded"})
		followAll(t, f)
		if d := f.Decide(wf.UID, third.nodeID, PodSucceeded); d.Verdict != Succeeded {
			t.Errorf("a change after the re-list: %s", d.Verdict)
		}
	})
}

// A workflow deleted while it runs (the informer's delete event): its rows are deleted,
// it is followed no more, and its pod's late report finds nothing to write.
func TestAWorkflowDeletedWhileRunning(t *testing.T) {
	onBackends(t, func(t *testing.T, b backend) {
		s := startServer(t, b, "--require-expectation")
		ctx := testContext(t)
		f := NewFollower(s.admin(), 0, FollowerOptions{})
		wf := testWorkflow("deleted")
		running := wf.step(1)
		register(t, f, running, running.podUID)
		r, _ := s.reporter(running)
		if err := r.Progress(ctx, "1/2"); err != nil {
			t.Fatal(err)
		}
		followAll(t, f)
		deleted, err := f.Delete(ctx, wf)
		if err != nil || deleted != 1 {
			t.Fatalf("delete: %d, %v", deleted, err)
		}
		if results := f.Results(wf.UID); len(results) != 0 {
			t.Errorf("a deleted workflow is still known: %v", results)
		}
		listed, err := s.admin().ListResults(ctx, wf.Namespace, wf.Name, ListOptions{WorkflowUID: wf.UID})
		if err != nil || len(listed.Items) != 0 {
			t.Errorf("rows left: %v, %v", listed, err)
		}
		if _, err := r.Finalize(ctx, FinalReport{Phase: "Succeeded"}); CodeOf(err) != CodeNotExpected {
			t.Errorf("the deleted workflow's late report: %v; want not_expected", err)
		}
		followAll(t, f)
		if results := f.Results(wf.UID); len(results) != 0 {
			t.Errorf("the tombstones brought it back: %v", results)
		}
	})
}

// A controller restarted with nothing in flight reads on from the head, not from the
// oldest change retained; a namespaced install's reads its own namespace's changes only.
// A resume lists its workflows several at a time (listConcurrency): each one's results
// are held, in the order given, and a listing refused fails the resume with its own
// error, not another listing's cancellation.
func TestAResumeListsEveryWorkflowInFlight(t *testing.T) {
	onBackends(t, func(t *testing.T, b backend) {
		s := startServer(t, b)
		ctx := testContext(t)
		admin := s.admin()
		var inFlight []WorkflowRef
		for i := range 3*listConcurrency + 1 {
			wf := testWorkflow(fmt.Sprintf("resume-%d", i))
			inFlight = append(inFlight, wf)
			for n := 1; n <= i%3+1; n++ {
				register(t, NewFollower(admin, 0, FollowerOptions{}), wf.step(n), wf.step(n).podUID)
			}
		}
		f, err := ResumeFollower(ctx, admin, inFlight, FollowerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i, wf := range inFlight {
			if held := len(f.Results(wf.UID)); held != i%3+1 {
				t.Errorf("%s: %d results held; want %d", wf.Name, held, i%3+1)
			}
		}

		refused := append(slices.Clone(inFlight[:5]), WorkflowRef{Namespace: testNamespace, Name: "Not_A_Name", UID: "x"})
		refused = append(refused, inFlight[5:]...)
		_, err = ResumeFollower(ctx, admin, refused, FollowerOptions{})
		var problem *ProblemError
		if !errors.As(err, &problem) || problem.Problem.Status != 400 || !strings.Contains(err.Error(), "Not_A_Name") {
			t.Errorf("a resume with a listing refused: %v; want that listing's 400", err)
		}
	})
}

func TestAResumeWithNothingInFlightStartsAtTheHead(t *testing.T) {
	onBackends(t, func(t *testing.T, b backend) {
		s := startServer(t, b)
		ctx := testContext(t)
		admin := s.admin()
		wf := testWorkflow("history")
		for i := 1; i <= 3; i++ {
			register(t, NewFollower(admin, 0, FollowerOptions{}), wf.step(i), wf.step(i).podUID)
		}
		f, err := ResumeFollower(ctx, admin, nil, FollowerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if f.Since() != 3 {
			t.Errorf("resumed at %d; want the head, 3", f.Since())
		}
		if changed := followAll(t, f); len(changed) != 0 {
			t.Errorf("the history was replayed: %v", changed)
		}

		elsewhere := NewFollower(admin, 0, FollowerOptions{Namespace: "elsewhere"})
		register(t, elsewhere, wf.step(4), wf.step(4).podUID)
		// It reads on past the changes it does not see.
		if changed := followAll(t, elsewhere); len(changed) != 0 || elsewhere.Since() != 4 {
			t.Errorf("another namespace's changes: %v, since %d", changed, elsewhere.Since())
		}
	})
}

// fakeAPI answers each request with what answer gives for its path.
func fakeAPI(t *testing.T, answer func(path string) (int, string)) *Client {
	t.Helper()
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status, body := answer(r.URL.Path)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(server.Close)
	client, err := New(Config{URL: server.URL})
	if err != nil {
		t.Fatal(err)
	}
	return client
}

func problemJSON(status int, code Code, extra string) string {
	return `{"type":"about:blank","title":"t","status":` + strconv.Itoa(status) + `,"code":"` + string(code) + `","detail":"d"` + extra + `}`
}

// Every call of the controller's says what failed, and whether the controller may
// requeue: the change set wraps a transient registration error for Argo's IsTransientErr,
// so that no pod is created and the node stays Pending; a refusal is final.
func TestTheControllersCallsSayWhatFailedAndWhetherToRequeue(t *testing.T) {
	wf := testWorkflow("down")
	for _, server := range []struct {
		status    int
		code      Code
		transient bool
	}{
		{http.StatusServiceUnavailable, CodeUnavailable, true},
		{http.StatusForbidden, CodeForbidden, false},
	} {
		t.Run(string(server.code), func(t *testing.T) {
			ctx := testContext(t)
			client := fakeAPI(t, func(string) (int, string) { return server.status, problemJSON(server.status, server.code, "") })
			f := NewFollower(client, 0, FollowerOptions{})
			for _, c := range []struct {
				name, says string
				call       func() error
			}{
				{"Register", "register node down-1 of argo/down", func() error {
					_, err := f.Register(ctx, wf, "down-1", "down-main-1", "")
					return err
				}},
				{"Settle", "settle node down-1 of argo/down", func() error {
					_, err := f.Settle(ctx, wf, "down-1", PodGone)
					return err
				}},
				{"Delete", "delete the results of argo/down", func() error {
					_, err := f.Delete(ctx, wf)
					return err
				}},
				{"Track", "track: list the results of argo/down", func() error { return f.Track(ctx, wf) }},
				{"Follow", "follow the feed from revision 0", func() error {
					_, err := f.Follow(ctx, 0)
					return err
				}},
				{"Run", "follow the feed from revision 0", func() error {
					return f.Run(ctx, 0, func(w WorkflowRef) { t.Errorf("a change from a failing server: %v", w) })
				}},
				{"ResumeFollower, workflows in flight", "resume: list the results of argo/down", func() error {
					_, err := ResumeFollower(ctx, client, []WorkflowRef{wf}, FollowerOptions{})
					return err
				}},
				{"ResumeFollower, none in flight", "resume at the head", func() error {
					_, err := ResumeFollower(ctx, client, nil, FollowerOptions{})
					return err
				}},
			} {
				t.Run(c.name, func(t *testing.T) {
					err := c.call()
					if err == nil || !strings.Contains(err.Error(), c.says) || CodeOf(err) != server.code || IsTransient(err) != server.transient {
						t.Errorf("%v; want an error saying %q, code %s, transient %v", err, c.says, server.code, server.transient)
					}
				})
			}
			// Nothing was learnt, and the workflow is still followed: the failed delete is
			// retried.
			if _, ok := f.Result(wf.UID, "down-1"); ok || len(f.followedUIDs()) != 1 || f.Since() != 0 {
				t.Errorf("after failures: known %v, following %v, since %d", ok, f.followedUIDs(), f.Since())
			}
		})
	}
}

func (f *Follower) followedUIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var uids []string
	for _, workflow := range f.known.followed() {
		uids = append(uids, workflow.UID)
	}
	return uids
}

// Where the feed's head is comes from its 410 gone; an answer that does not say is an
// error, never a guess. After gone, a failed re-list keeps the old position.
func TestAFeedThatDoesNotSayWhereItsHeadIsIsAnError(t *testing.T) {
	ctx := testContext(t)
	for _, c := range []struct {
		name   string
		status int
		feed   string
		says   string
	}{
		{"a page past any revision", http.StatusOK, `{"items":[],"revision":5}`, "the feed answered a position past any revision"},
		{"gone without the revision", http.StatusGone, problemJSON(410, CodeGone, ""), "410 gone without the current revision"},
	} {
		t.Run(c.name, func(t *testing.T) {
			client := fakeAPI(t, func(string) (int, string) { return c.status, c.feed })
			if _, err := ResumeFollower(ctx, client, nil, FollowerOptions{}); err == nil || !strings.Contains(err.Error(), c.says) {
				t.Errorf("%v; want %q", err, c.says)
			}
		})
	}
	t.Run("a re-list that fails", func(t *testing.T) {
		client := fakeAPI(t, func(path string) (int, string) {
			if path == "/api/v1/results" {
				return http.StatusGone, problemJSON(410, CodeGone, `,"revision":9,"epoch":"e2"`)
			}
			return http.StatusServiceUnavailable, problemJSON(503, CodeUnavailable, "")
		})
		f := NewFollower(client, 3, FollowerOptions{})
		f.known.follow(testWorkflow("relist"))
		changed, err := f.Follow(ctx, 0)
		if err == nil || !strings.Contains(err.Error(), "list again after the feed's history is gone") || !IsTransient(err) || changed != nil {
			t.Errorf("%v, %v; want a transient error and nothing changed", changed, err)
		}
		if f.Since() != 3 {
			t.Errorf("since %d after a failed re-list; want 3, to be listed again", f.Since())
		}
	})
}
