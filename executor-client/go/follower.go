package argoresults

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// Follower is what the workflow controller needs in place of its task-result informer
// (docs/controller-integration.md): it registers the results it expects, follows the
// change feed of every namespace with long polls, lists the workflows it follows again
// when the feed's history is gone (410), and decides nodes from committed results. It
// mirrors the Rust reference reconciler (executor-client/src/controller.rs) and is safe
// for concurrent use: the controller's workers decide and register while one goroutine
// runs [Follower.Run].
type Follower struct {
	client *Client
	// namespace whose feed is read; empty: every namespace's.
	namespace string
	mu        sync.Mutex
	known     *known
}

// FollowerOptions say what a [Follower] follows.
type FollowerOptions struct {
	// Namespace, when set, is the only namespace whose changes are read (the controller
	// of a namespaced install, whose role reads results there only); empty: every
	// namespace (a cluster-wide controller).
	Namespace string
}

// NewFollower follows the feed from since (0: the oldest retained change) for the
// workflows whose pods it registers from now on.
func NewFollower(client *Client, since int64, options FollowerOptions) *Follower {
	return &Follower{client: client, namespace: options.Namespace, known: newKnown(since)}
}

// ResumeFollower starts a follower with no memory, told the workflows in flight (the
// controller's Workflow informer lists them): each is listed, every page, and the feed is
// followed on from the lowest revision listed, so it reaches the decisions of a follower
// that never stopped. With no workflow in flight it starts at the store's head: there is
// nothing behind it to replay.
func ResumeFollower(ctx context.Context, client *Client, workflows []WorkflowRef, options FollowerOptions) (*Follower, error) {
	listings, err := list(ctx, client, workflows)
	if err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	k := resumed(listings)
	if len(workflows) == 0 {
		revision, epoch, err := head(ctx, client, options.Namespace)
		if err != nil {
			return nil, fmt.Errorf("resume at the head: %w", err)
		}
		k.since, k.epoch = revision, epoch
	}
	return &Follower{client: client, namespace: options.Namespace, known: k}, nil
}

// head is the store's newest revision and its epoch: a position past any revision is
// answered 410 gone with them (docs/api.md section 4).
func head(ctx context.Context, client *Client, namespace string) (int64, string, error) {
	_, err := client.Feed(ctx, FeedOptions{Since: math.MaxInt64, Namespace: namespace, Limit: 1})
	if CodeOf(err) != CodeGone {
		if err == nil {
			err = errors.New("the feed answered a position past any revision")
		}
		return 0, "", err
	}
	problem := ProblemOf(err)
	if problem.Revision == nil {
		return 0, "", fmt.Errorf("410 gone without the current revision: %w", err)
	}
	return *problem.Revision, problem.Epoch, nil
}

// listConcurrency is how many workflows a resume lists at once: a restarted controller
// with many workflows in flight waits on round trips and decoding, not on one server.
const listConcurrency = 4

// list reads every page of each workflow's results, listConcurrency workflows at a time;
// the listings are in the order of workflows.
func list(ctx context.Context, client *Client, workflows []WorkflowRef) ([]listing, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	listings := make([]listing, len(workflows))
	errs := make([]error, len(workflows))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(listConcurrency, len(workflows)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				workflow := workflows[i]
				pages, err := client.listPages(ctx, workflow.Namespace, workflow.Name, ListOptions{WorkflowUID: workflow.UID})
				listings[i], errs[i] = listing{workflow: workflow, pages: pages}, err
				if err != nil {
					cancel()
				}
			}
		}()
	}
feed:
	for i := range workflows {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	// The first failure in the order of workflows, not a later one's cancellation.
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return listings, nil
}

// Track follows a workflow that was already running when this follower started and that
// [ResumeFollower] was not told of: it is listed, and the feed is read from there on.
func (f *Follower) Track(ctx context.Context, workflow WorkflowRef) error {
	listings, err := list(ctx, f.client, []WorkflowRef{workflow})
	if err != nil {
		return fmt.Errorf("track: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.known.tracked(listings[0])
	return nil
}

// Register records that the controller is about to create (podUID "") or has created the
// pod of a node, or re-creates it (PUT .../expectation): from then on the node reads
// expected until its pod reports, and the workflow is followed. With the server's
// --require-expectation, the pod may report only once this was called with its name.
func (f *Follower) Register(ctx context.Context, workflow WorkflowRef, nodeID, podName, podUID string) (*NodeResult, error) {
	f.mu.Lock()
	f.known.follow(workflow)
	f.mu.Unlock()
	expectation := ExpectationRequest{WorkflowUID: workflow.UID, PodName: podName, PodUID: podUID}
	stored, _, err := f.client.Expect(ctx, workflow.node(nodeID), &expectation)
	if err != nil {
		return nil, fmt.Errorf("register node %s of %s/%s: %w", nodeID, workflow.Namespace, workflow.Name, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.known.remember(*stored)
	return stored, nil
}

// Follow applies the changes committed since the last call, in every namespace, waiting
// up to wait for one (0: not at all). It returns the workflows followed whose results
// changed, for the controller to enqueue. When the history since the last call was
// pruned (410 gone), every workflow followed is listed again, and all are returned.
func (f *Follower) Follow(ctx context.Context, wait time.Duration) ([]WorkflowRef, error) {
	f.mu.Lock()
	since, epoch := f.known.since, f.known.epoch
	f.mu.Unlock()
	page, err := f.client.Feed(ctx, FeedOptions{Since: since, Epoch: epoch, Namespace: f.namespace, Watch: wait > 0, Timeout: wait})
	if CodeOf(err) == CodeGone {
		return f.relist(ctx, err)
	}
	if err != nil {
		return nil, fmt.Errorf("follow the feed from revision %d: %w", since, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.known.since != since {
		// A concurrent call read on meanwhile; applying this page again would move back.
		return nil, nil
	}
	return f.known.advance(page), nil
}

// relist lists every workflow followed again after gone, and goes on from there.
func (f *Follower) relist(ctx context.Context, gone error) ([]WorkflowRef, error) {
	current := int64(0)
	problem := ProblemOf(gone)
	if revision := problem.Revision; revision != nil {
		current = *revision
	}
	f.mu.Lock()
	workflows := f.known.followed()
	f.mu.Unlock()
	listings, err := list(ctx, f.client, workflows)
	if err != nil {
		return nil, fmt.Errorf("list again after the feed's history is gone: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.known.relisted(current, problem.Epoch, listings)
	return workflows, nil
}

// Run follows the feed until ctx ends, waiting up to wait in each long poll, and calls
// changed with each workflow whose results changed. Transient failures are waited out
// with the client's backoff (a client without a retry policy returns them); Run returns
// ctx's error once it ends, or the first other error.
func (f *Follower) Run(ctx context.Context, wait time.Duration, changed func(WorkflowRef)) error {
	for {
		workflows, err := f.Follow(ctx, wait)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return err
		}
		for _, workflow := range workflows {
			changed(workflow)
		}
	}
}

// Result is a node's result as last seen.
func (f *Follower) Result(workflowUID, nodeID string) (NodeResult, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.known.result(workflowUID, nodeID)
}

// Results are a workflow's results as last seen, by node ID: what the controller's
// reconciliation of a workflow merges into its nodes.
func (f *Follower) Results(workflowUID string) []NodeResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.known.resultsOf(workflowUID)
}

// Decide is [Decide] with the node's result as last seen.
func (f *Follower) Decide(workflowUID, nodeID string, pod PodPhase) Decision {
	result, ok := f.Result(workflowUID, nodeID)
	if !ok {
		return Decide(pod, nil)
	}
	return Decide(pod, &result)
}

// Settle decides a node from its pod as the informer shows it, and when that asks for a
// settle (the pod ended or vanished without a completed result seen), abandons its result
// (POST .../abandon) with the reason. The answer is frozen and final: the wait container
// gets its 2xx only after the commit and exits after it, so once the pod is terminal what
// is committed is all there will be. 200: the result is abandoned now (or was), and the
// node is Lost; 409 already_completed: the node takes its phase and outputs from the
// completed result in the refusal; 404: nothing is stored for the node any more, and it is
// Lost. It never returns Settle, and Wait only while the pod runs: call it wherever the
// controller would consult TaskResultSynced or its timers.
func (f *Follower) Settle(ctx context.Context, workflow WorkflowRef, nodeID string, pod PodPhase) (Decision, error) {
	decision := f.Decide(workflow.UID, nodeID, pod)
	if decision.Verdict != Settle {
		return decision, nil
	}
	abandon := AbandonRequest{WorkflowUID: workflow.UID, Reason: decision.Message}
	result, err := f.client.Abandon(ctx, workflow.node(nodeID), &abandon)
	f.mu.Lock()
	defer f.mu.Unlock()
	decision, err = f.known.settled(result, err, pod)
	if err != nil {
		return Decision{}, fmt.Errorf("settle node %s of %s/%s: %w", nodeID, workflow.Namespace, workflow.Name, err)
	}
	return decision, nil
}

// Delete deletes every result of a workflow (DELETE .../results?workflowUid=) and stops
// following it: call it once the controller garbage collected a Fulfilled workflow, or
// when the workflow was deleted, running or not (the informer's delete event), so that no
// row of it waits for retention. It returns how many results were deleted.
func (f *Follower) Delete(ctx context.Context, workflow WorkflowRef) (uint64, error) {
	deleted, err := f.client.DeleteResults(ctx, workflow.Namespace, workflow.Name, workflow.UID)
	if err != nil {
		return 0, fmt.Errorf("delete the results of %s/%s: %w", workflow.Namespace, workflow.Name, err)
	}
	f.Forget(workflow.UID)
	return deleted, nil
}

// Forget stops following a workflow and drops what is known of it, without deleting its
// results ([Follower.Delete] does both).
func (f *Follower) Forget(workflowUID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.known.forget(workflowUID)
}

// Since is the revision the feed is read on from.
func (f *Follower) Since() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.known.since
}
