package argoresults

import (
	"errors"
	"math"
	"slices"
	"strings"
)

// listing is every page of one workflow's results.
type listing struct {
	workflow WorkflowRef
	pages    []ResultList
}

// known is what a follower knows, and how each answer of the server changes it: the pure
// part of [Follower], which only adds the calls and a lock. It mirrors Known of the Rust
// reference reconciler (executor-client/src/controller/known.rs); the scenarios of
// executor-client/testdata/reconciler-events.json drive both.
type known struct {
	// since: the feed is read from here on, in the store's epoch (empty until a page or
	// listing said).
	since int64
	epoch string
	// results by workflow UID, then node ID: a workflow's results cost what it holds to
	// read, however many others are followed.
	results map[string]map[string]NodeResult
	// workflows followed, by UID: the feed's changes to others are not kept, and these are
	// listed again when the feed's history is gone.
	workflows map[string]WorkflowRef
}

func newKnown(since int64) *known {
	return &known{since: since, results: map[string]map[string]NodeResult{}, workflows: map[string]WorkflowRef{}}
}

// resumed is a follower started with no memory, from the listings of the workflows in
// flight: the feed is read on from the lowest revision listed (0 when none was).
func resumed(listings []listing) *known {
	k := newKnown(0)
	for i, l := range listings {
		revision := k.listed(l)
		if i == 0 {
			k.since = revision
		}
		k.since = min(k.since, revision)
	}
	return k
}

// follow: the workflow is followed from now on (its pod is about to be created).
func (k *known) follow(workflow WorkflowRef) {
	if _, ok := k.workflows[workflow.UID]; !ok {
		k.workflows[workflow.UID] = workflow
	}
}

// followed lists the workflows followed, to be listed again.
func (k *known) followed() []WorkflowRef {
	workflows := make([]WorkflowRef, 0, len(k.workflows))
	for _, workflow := range k.workflows {
		workflows = append(workflows, workflow)
	}
	return workflows
}

// tracked: a workflow learnt of later, listed now, is followed, and the feed is read on
// from no later than its listing.
func (k *known) tracked(l listing) {
	k.since = min(k.since, k.listed(l))
}

// relisted: after 410 gone at revision current of epoch, every workflow followed was
// listed again; the feed goes on from the lowest revision listed, or from current, in
// epoch. A listing read in a later epoch (another restore meanwhile) then gets 410 gone
// again, and everything is listed anew. Returns how many results are known.
func (k *known) relisted(current int64, epoch string, listings []listing) int {
	since := current
	for _, l := range listings {
		since = min(since, k.listed(l))
	}
	k.since = since
	k.epoch = epoch
	count := 0
	for _, nodes := range k.results {
		count += len(nodes)
	}
	return count
}

// listed replaces what is known of a workflow with its listing and follows it; it returns
// the lowest page revision, after which the feed has every change. The first epoch a
// listing names is kept when none was known.
func (k *known) listed(l listing) int64 {
	delete(k.results, l.workflow.UID)
	lowest := int64(math.MaxInt64)
	for _, page := range l.pages {
		lowest = min(lowest, page.Revision)
		if k.epoch == "" {
			k.epoch = page.Epoch
		}
		for _, result := range page.Items {
			k.store(result)
		}
	}
	k.workflows[l.workflow.UID] = l.workflow
	return lowest
}

// remember keeps result if its workflow is followed and it is newer than what is known.
func (k *known) remember(result NodeResult) {
	if _, ok := k.workflows[result.WorkflowUID]; !ok {
		return
	}
	if stored, ok := k.result(result.WorkflowUID, result.NodeID); ok && stored.Revision >= result.Revision {
		return
	}
	k.store(result)
}

// store keeps result under its workflow and node.
func (k *known) store(result NodeResult) {
	nodes, ok := k.results[result.WorkflowUID]
	if !ok {
		nodes = map[string]NodeResult{}
		k.results[result.WorkflowUID] = nodes
	}
	nodes[result.NodeID] = result
}

// apply applies one change of the feed. A tombstone removes only what is older than
// itself: after a re-list, the feed replays changes the listing already has.
func (k *known) apply(item FeedItem) {
	if item.Type == Upserted {
		k.remember(*item.Result)
		return
	}
	if stored, ok := k.result(item.WorkflowUID, item.NodeID); ok && stored.Revision < item.Revision {
		delete(k.results[item.WorkflowUID], item.NodeID)
	}
}

// advance applies a page of the feed and reads on after it; it returns the followed
// workflows the page changed, each once, in the order of their first change.
func (k *known) advance(page *FeedPage) []WorkflowRef {
	k.since = page.Revision
	if page.Epoch != "" {
		k.epoch = page.Epoch
	}
	var changed []WorkflowRef
	seen := map[string]bool{}
	for _, item := range page.Items {
		k.apply(item)
		uid, _ := item.Key()
		if workflow, ok := k.workflows[uid]; ok && !seen[uid] {
			seen[uid] = true
			changed = append(changed, workflow)
		}
	}
	return changed
}

// nothingStored is the reason a node is lost when the settle finds no result.
const nothingStored = "no result is stored for the node: it was deleted, or lost when the database was restored"

// settled: the settle's answer (POST .../abandon) for a node whose pod ended as pod: the
// frozen result is remembered and decides the node; nothing stored (404: deleted, or lost
// in a restore) is a node lost.
func (k *known) settled(result *NodeResult, err error, pod PodPhase) (Decision, error) {
	frozen, err := frozen(result, err)
	if CodeOf(err) == CodeNotFound {
		return Decision{Verdict: Lost, Message: nothingStored}, nil
	}
	if err != nil {
		return Decision{}, err
	}
	decision := Decide(pod, frozen)
	k.remember(*frozen)
	return decision, nil
}

// frozen is the frozen result in an abandon's answer: the abandoned result, or the
// completed one that an already_completed refusal carries.
func frozen(result *NodeResult, err error) (*NodeResult, error) {
	if CodeOf(err) != CodeAlreadyCompleted {
		return result, err
	}
	current, decodeErr := ProblemOf(err).CurrentResult()
	if decodeErr != nil {
		return nil, errors.Join(err, decodeErr)
	}
	return current, nil
}

// forget stops following a workflow and drops what is known of it.
func (k *known) forget(workflowUID string) {
	delete(k.workflows, workflowUID)
	delete(k.results, workflowUID)
}

// resultsOf are the results known of one workflow, by node ID.
func (k *known) resultsOf(workflowUID string) []NodeResult {
	nodes := k.results[workflowUID]
	results := make([]NodeResult, 0, len(nodes))
	for _, result := range nodes {
		results = append(results, result)
	}
	slices.SortFunc(results, func(a, b NodeResult) int { return strings.Compare(a.NodeID, b.NodeID) })
	return results
}

func (k *known) result(workflowUID, nodeID string) (NodeResult, bool) {
	result, ok := k.results[workflowUID][nodeID]
	return result, ok
}
