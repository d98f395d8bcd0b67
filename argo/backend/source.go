package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	apiv1 "k8s.io/api/core/v1"

	wfv1 "github.com/argoproj/argo-workflows/v4/pkg/apis/workflow/v1alpha1"
	errorsutil "github.com/argoproj/argo-workflows/v4/util/errors"
	"github.com/argoproj/argo-workflows/v4/util/logging"
	"github.com/argoproj/argo-workflows/v4/workflow/taskresults"

	argoresults "github.com/argo-results/argo-results/executor-client/go"
)

const (
	// callTimeout bounds a worker's call (a registration, a settle, a deletion) with its
	// retries: a worker must not hang on a server that is away; the workflow is requeued.
	callTimeout = 10 * time.Second
	// feedWait is each long poll of the change feed.
	feedWait = 30 * time.Second
	// runPause is the wait before following again after the feed failed for good.
	runPause = 5 * time.Second
)

// source is the controller's side: the Go package's Follower.
type source struct {
	settings  settings
	client    *argoresults.Client
	namespace string

	// follower is set once the workflows in flight are listed, and then ready closes.
	follower *argoresults.Follower
	ready    chan struct{}
}

func newSource(ctx context.Context, raw map[string]string, namespace string) (taskresults.Source, error) {
	s, err := parseSettings(raw)
	if err != nil {
		return nil, err
	}
	client, err := argoresults.New(argoresults.Config{
		URL:       s.url,
		Token:     argoresults.TokenFile(s.tokenFile),
		CAFile:    s.caFile,
		Retry:     &argoresults.RetryPolicy{},
		UserAgent: "argo-workflows workflow-controller (argo-results backend)",
	})
	if err != nil {
		return nil, err
	}
	return &source{settings: s, client: client, namespace: namespace, ready: make(chan struct{})}, nil
}

func ref(wf *wfv1.Workflow) argoresults.WorkflowRef {
	return argoresults.WorkflowRef{Namespace: wf.Namespace, Name: wf.Name, UID: string(wf.UID)}
}

// Run lists the workflows in flight, then follows the feed from there until ctx ends.
func (s *source) Run(ctx context.Context, inFlight []*wfv1.Workflow, changed func(namespace, name string)) error {
	logger := logging.RequireLoggerFromContext(ctx)
	refs := make([]argoresults.WorkflowRef, 0, len(inFlight))
	for _, wf := range inFlight {
		refs = append(refs, ref(wf))
	}
	options := argoresults.FollowerOptions{Namespace: s.namespace}
	for {
		follower, err := argoresults.ResumeFollower(ctx, s.client, refs, options)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil {
			s.follower = follower
			close(s.ready)
			break
		}
		logger.WithError(err).Error(ctx, "argo-results: list the workflows in flight")
		pause(ctx)
	}
	for _, r := range refs {
		changed(r.Namespace, r.Name)
	}
	for {
		err := s.follower.Run(ctx, feedWait, func(r argoresults.WorkflowRef) { changed(r.Namespace, r.Name) })
		if ctx.Err() != nil {
			return ctx.Err()
		}
		logger.WithError(err).Error(ctx, "argo-results: follow the change feed")
		pause(ctx)
	}
}

// pause waits runPause, or until ctx ends.
func pause(ctx context.Context) {
	select {
	case <-time.After(runPause):
	case <-ctx.Done():
	}
}

// following waits until the workflows in flight are listed, or ctx ends: a worker that
// registers or settles right after a start waits for it rather than failing.
func (s *source) following(ctx context.Context) (*argoresults.Follower, error) {
	select {
	case <-s.ready:
		return s.follower, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("argo-results: not following yet: %w", ctx.Err())
	}
}

// Results are empty until the workflows in flight are listed; no node is decided from a
// result's absence (a settle asks the server).
func (s *source) Results(wf *wfv1.Workflow) []taskresults.Result {
	select {
	case <-s.ready:
	default:
		return nil
	}
	follower := s.follower
	var results []taskresults.Result
	for _, stored := range follower.Results(string(wf.UID)) {
		result := taskresults.Result{NodeID: stored.NodeID, Completed: stored.State == argoresults.StateCompleted}
		result.Outputs = outputs(stored.Outputs)
		if stored.Progress != nil {
			result.Progress = wfv1.Progress(*stored.Progress)
		}
		results = append(results, result)
	}
	return results
}

// Expect registers the node's pod. A row frozen already (a pod of this node completed
// or lost its result before) gives the node's fate, as if that pod were gone. A pod
// already bound by its UID costs no call: Argo asks again on every pass that finds the
// pod. An error the server may not have meant for good is transient for Argo (the
// workflow is requeued); any other fails the node.
func (s *source) Expect(ctx context.Context, wf *wfv1.Workflow, nodeID, podName, podUID string) (taskresults.Fate, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	follower, err := s.following(ctx)
	if err != nil {
		return taskresults.Fate{}, errorsutil.NewErrTransient(err.Error())
	}
	stored, known := follower.Result(string(wf.UID), nodeID)
	if !known || podUID == "" || stored.PodUID == nil || *stored.PodUID != podUID {
		registered, err := follower.Register(ctx, ref(wf), nodeID, podName, podUID)
		if argoresults.IsTransient(err) || errors.Is(err, context.DeadlineExceeded) {
			return taskresults.Fate{}, errorsutil.NewErrTransient(err.Error())
		}
		if err != nil {
			return taskresults.Fate{}, err
		}
		stored = *registered
	}
	if !stored.State.Frozen() {
		return taskresults.Fate{}, nil
	}
	return fate(argoresults.Decide(argoresults.PodGone, &stored)), nil
}

func (s *source) Settle(ctx context.Context, wf *wfv1.Workflow, nodeID string, pod *apiv1.Pod) (taskresults.Fate, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	follower, err := s.following(ctx)
	if err != nil {
		return taskresults.Fate{}, err
	}
	if _, known := follower.Result(string(wf.UID), nodeID); !known {
		// Not registered here: the node's pod reports with WorkflowTaskResults (created
		// before the backend was chosen), and the informer's reconciliation decides it.
		return taskresults.Fate{}, nil
	}
	phase := argoresults.PodGone
	if pod != nil {
		phase = argoresults.PodPhase(pod.Status.Phase)
	}
	decision, err := follower.Settle(ctx, ref(wf), nodeID, phase)
	if err != nil {
		return taskresults.Fate{}, err
	}
	return fate(decision), nil
}

// fate is a decision in Argo's terms. A lost result is an Error: the system lost what
// the step reported, not the step's code failing (Argo's own meaning of Error).
func fate(decision argoresults.Decision) taskresults.Fate {
	f := taskresults.Fate{Outputs: outputs(decision.Outputs), Message: decision.Message}
	switch decision.Verdict {
	case argoresults.Succeeded:
		f.Phase = wfv1.NodeSucceeded
	case argoresults.Failed:
		f.Phase = wfv1.NodeFailed
	case argoresults.Error:
		f.Phase = wfv1.NodeError
	case argoresults.Lost:
		f.Phase = wfv1.NodeError
		f.Message = "task result lost: " + decision.Message
	}
	return f
}

// Delete deletes a workflow's results when this follower knows of any. Argo calls it on
// every update of a Fulfilled workflow, and a deletion forgets what it deleted, so only
// the first call (or the first after one that failed) reaches the server. Results this
// follower never saw (a workflow that ended before the controller started) are left to
// the server's retention, or to Reset if the workflow is retried.
func (s *source) Delete(ctx context.Context, wf *wfv1.Workflow) error {
	return s.deleteResults(ctx, wf, false)
}

// Reset deletes a retried workflow's results, known to this follower or not.
func (s *source) Reset(ctx context.Context, wf *wfv1.Workflow) error {
	return s.deleteResults(ctx, wf, true)
}

// deleteResults deletes a workflow's results; unless always, only when any are known.
func (s *source) deleteResults(ctx context.Context, wf *wfv1.Workflow, always bool) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	follower, err := s.following(ctx)
	if err != nil {
		return err
	}
	if !always && len(follower.Results(string(wf.UID))) == 0 {
		return nil
	}
	_, err = follower.Delete(ctx, ref(wf))
	return err
}

// outputs reads Argo's Outputs as stored; nil for none or for what does not parse.
func outputs(raw json.RawMessage) *wfv1.Outputs {
	if len(raw) == 0 {
		return nil
	}
	var out wfv1.Outputs
	if json.Unmarshal(raw, &out) != nil {
		return nil
	}
	return &out
}

// settings are the controller's taskResults.settings for this backend.
type settings struct {
	// url of the server (required).
	url string
	// tokenFile is the controller's own projected token for the audience.
	tokenFile string
	// caFile is the CA the controller trusts the server with; empty: the system's.
	caFile string
	// audience and expirationSeconds of the token projected into reporting containers.
	audience          string
	expirationSeconds int64
	// caConfigMap (key ca.crt) is projected beside it when set.
	caConfigMap string
	// retryFor bounds each report's retries in reporting containers
	// (ARGO_RESULTS_RETRY_FOR); empty: the Go package's DefaultRetryFor.
	retryFor string
}

func parseSettings(raw map[string]string) (settings, error) {
	s := settings{
		url:               raw["url"],
		tokenFile:         raw["tokenFile"],
		caFile:            raw["caFile"],
		audience:          raw["audience"],
		caConfigMap:       raw["caConfigMap"],
		retryFor:          raw["retryFor"],
		expirationSeconds: 600,
	}
	for key := range raw {
		switch key {
		case "url", "tokenFile", "caFile", "audience", "caConfigMap", "expirationSeconds", "retryFor":
		default:
			return s, fmt.Errorf("argo-results: unknown setting %q", key)
		}
	}
	if s.url == "" {
		return s, errors.New("argo-results: the setting url is required")
	}
	if s.tokenFile == "" {
		s.tokenFile = argoresults.DefaultTokenFile
	}
	if s.audience == "" {
		s.audience = "argo-results"
	}
	if v, ok := raw["expirationSeconds"]; ok {
		seconds, err := strconv.ParseInt(v, 10, 64)
		if err != nil || seconds < 600 {
			return s, fmt.Errorf("argo-results: expirationSeconds %q: a whole number of seconds, at least 600 (Kubernetes' minimum)", v)
		}
		s.expirationSeconds = seconds
	}
	if s.retryFor != "" {
		if d, err := time.ParseDuration(s.retryFor); err != nil || d < time.Second {
			return s, fmt.Errorf("argo-results: retryFor %q: a duration of at least 1s, such as 5m", s.retryFor)
		}
	}
	return s, nil
}
