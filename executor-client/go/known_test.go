package argoresults

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
)

// BenchmarkFollowerResults reads one workflow's results while the follower holds many
// others, as the controller's reconciliation of one workflow does: the cost is what that
// workflow holds (16 nodes), not what every followed workflow does.
func BenchmarkFollowerResults(b *testing.B) {
	const nodes = 16
	for _, followed := range []int{10_000, 100_000, 500_000} {
		b.Run(fmt.Sprintf("%d", followed), func(b *testing.B) {
			f := &Follower{known: newKnown(0)}
			for w := range followed / nodes {
				workflow := WorkflowRef{Namespace: "argo", Name: fmt.Sprintf("wf-%d", w), UID: fmt.Sprintf("uid-%d", w)}
				f.known.follow(workflow)
				for n := range nodes {
					f.known.remember(NodeResult{WorkflowUID: workflow.UID, NodeID: fmt.Sprintf("%s-%d", workflow.Name, n), Revision: int64(w*nodes + n)})
				}
			}
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if got := f.Results(fmt.Sprintf("uid-%d", i%(followed/nodes))); len(got) != nodes {
					b.Fatalf("%d results, want %d", len(got), nodes)
				}
			}
		})
	}
}

// eventsFile is testdata/reconciler-events.json: sequences of what a reconciler hears
// from the server, in order, and what it knows and decides after them. Each step is an
// object with one key: an event (the answer to a call of [Follower], applied by its pure
// part) or an expect.
//
//	{"defaults": {"result": a NodeResult, "page": members of a ResultList page},
//	 "scenarios": [{"name": ..., "since": where the follower starts reading the feed,
//	                "steps": [STEP]}]}
//
//	STEP:
//	  {"podCreated": {"workflow": WORKFLOW, "answer": RESULT}}   Follower.Register: the
//	                      workflow is followed from now on; the expectation's answer
//	  {"feed": a FeedPage, its upserted items' result RESULTs}   Follower.Follow: a page
//	  {"gone": {"revision": N, "epoch": E (optional), "listings": [LISTING]}}
//	                      Follower.Follow: 410 gone at N of epoch E, then the listing of
//	                      each workflow followed (exactly those)
//	  {"restart": {"listings": [LISTING]}}               ResumeFollower with these
//	  {"track": LISTING}                                 Follower.Track
//	  {"settle": {"pod": a pod phase, "answer": {"status": 200, "body": RESULT}
//	                       | {"status": 409 or 404, "problem": a Problem, its current a
//	                          RESULT},
//	              "expect": DECISION}}                   Follower.Settle
//	  {"expect": {"since": N (optional), "epoch": E (optional), "decisions":
//	              [{"workflowUid", "nodeId", "pod", "expect": DECISION}]}}
//	                                                     what it knows now
//
//	WORKFLOW: {"namespace", "name", "uid"}
//	LISTING:  {"workflow": WORKFLOW, "pages": [a ResultList: defaults.page's members, then
//	           these; its items RESULTs]}
//	RESULT:   the members of defaults.result, then these (a NodeResult on the wire)
//	DECISION: as in TestReconcilerDecisions
type eventsFile struct {
	Defaults struct {
		Result map[string]json.RawMessage `json:"result"`
		Page   map[string]json.RawMessage `json:"page"`
	} `json:"defaults"`
	Scenarios []struct {
		Name  string      `json:"name"`
		Since int64       `json:"since"`
		Steps []eventStep `json:"steps"`
	} `json:"scenarios"`
}

type eventWorkflow struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

type eventListing struct {
	Workflow eventWorkflow     `json:"workflow"`
	Pages    []json.RawMessage `json:"pages"`
}

type eventStep struct {
	PodCreated *struct {
		Workflow eventWorkflow   `json:"workflow"`
		Answer   json.RawMessage `json:"answer"`
	} `json:"podCreated"`
	Feed json.RawMessage `json:"feed"`
	Gone *struct {
		Revision int64          `json:"revision"`
		Epoch    string         `json:"epoch"`
		Listings []eventListing `json:"listings"`
	} `json:"gone"`
	Restart *struct {
		Listings []eventListing `json:"listings"`
	} `json:"restart"`
	Track  *eventListing `json:"track"`
	Settle *struct {
		Pod    string `json:"pod"`
		Answer struct {
			Status  int             `json:"status"`
			Body    json.RawMessage `json:"body"`
			Problem json.RawMessage `json:"problem"`
		} `json:"answer"`
		Expect expectDecision `json:"expect"`
	} `json:"settle"`
	Expect *struct {
		Since     *int64 `json:"since"`
		Epoch     string `json:"epoch"`
		Decisions []struct {
			WorkflowUID string         `json:"workflowUid"`
			NodeID      string         `json:"nodeId"`
			Pod         string         `json:"pod"`
			Expect      expectDecision `json:"expect"`
		} `json:"decisions"`
	} `json:"expect"`
}

// over is defaults with the members of value over them.
func over(t *testing.T, defaults map[string]json.RawMessage, value json.RawMessage) json.RawMessage {
	t.Helper()
	var members map[string]json.RawMessage
	if err := json.Unmarshal(value, &members); err != nil {
		t.Fatalf("not an object: %s", value)
	}
	merged := map[string]json.RawMessage{}
	for key, member := range defaults {
		merged[key] = member
	}
	for key, member := range members {
		merged[key] = member
	}
	text, err := json.Marshal(merged)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// completeAt replaces the RESULTs at key of value (one object, or each of an array) with
// themselves over the result defaults.
func (f *eventsFile) completeAt(t *testing.T, value json.RawMessage, key string) json.RawMessage {
	t.Helper()
	var members map[string]json.RawMessage
	if err := json.Unmarshal(value, &members); err != nil {
		t.Fatalf("not an object: %s", value)
	}
	raw, ok := members[key]
	if !ok {
		return value
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) == nil {
		for i := range items {
			items[i] = over(t, f.Defaults.Result, items[i])
		}
		raw = mustJSON(t, items)
	} else {
		raw = over(t, f.Defaults.Result, raw)
	}
	members[key] = raw
	return mustJSON(t, members)
}

func mustJSON(t *testing.T, value any) json.RawMessage {
	t.Helper()
	text, err := json.Marshal(value)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// decode reads text as the client does.
func decode[T any](t *testing.T, text json.RawMessage) *T {
	t.Helper()
	var value T
	if err := json.Unmarshal(text, &value); err != nil {
		t.Fatalf("%v: %s", err, text)
	}
	return &value
}

func (f *eventsFile) result(t *testing.T, value json.RawMessage) *NodeResult {
	return decode[NodeResult](t, over(t, f.Defaults.Result, value))
}

func (f *eventsFile) feed(t *testing.T, page json.RawMessage) *FeedPage {
	var wire struct {
		Items    []json.RawMessage `json:"items"`
		Revision int64             `json:"revision"`
		Epoch    string            `json:"epoch,omitempty"`
	}
	if err := json.Unmarshal(page, &wire); err != nil {
		t.Fatal(err)
	}
	for i := range wire.Items {
		wire.Items[i] = f.completeAt(t, wire.Items[i], "result")
	}
	return decode[FeedPage](t, mustJSON(t, wire))
}

func (f *eventsFile) listings(t *testing.T, listed []eventListing) []listing {
	var listings []listing
	for _, l := range listed {
		var pages []ResultList
		for _, page := range l.Pages {
			pages = append(pages, *decode[ResultList](t, f.completeAt(t, over(t, f.Defaults.Page, page), "items")))
		}
		listings = append(listings, listing{workflow: WorkflowRef(l.Workflow), pages: pages})
	}
	return listings
}

// answer is an abandon's answer as the client returns it.
func (f *eventsFile) answer(t *testing.T, status int, body, problem json.RawMessage) (*NodeResult, error) {
	if status == 200 {
		return f.result(t, body), nil
	}
	p := decode[Problem](t, f.completeAt(t, problem, "current"))
	if p.Status != status {
		t.Fatalf("a %d answer with a problem of status %d", status, p.Status)
	}
	return nil, fmt.Errorf("POST .../abandon: %w", &ProblemError{Problem: *p})
}

// TestReconcilerEvents runs testdata/reconciler-events.json (its shape: [eventsFile]).
func TestReconcilerEvents(t *testing.T) {
	var file eventsFile
	readTestdata(t, "reconciler-events.json", &file)
	if len(file.Scenarios) == 0 {
		t.Fatal("no scenarios")
	}
	for _, scenario := range file.Scenarios {
		t.Run(scenario.Name, func(t *testing.T) {
			k := newKnown(scenario.Since)
			for i, step := range scenario.Steps {
				name := fmt.Sprintf("step %d", i+1)
				switch {
				case step.PodCreated != nil:
					k.follow(WorkflowRef(step.PodCreated.Workflow))
					k.remember(*file.result(t, step.PodCreated.Answer))
				case step.Feed != nil:
					k.advance(file.feed(t, step.Feed))
				case step.Gone != nil:
					listings := file.listings(t, step.Gone.Listings)
					var followed, listed []string
					for _, w := range k.followed() {
						followed = append(followed, w.UID)
					}
					for _, l := range listings {
						listed = append(listed, l.workflow.UID)
					}
					slices.Sort(followed)
					slices.Sort(listed)
					if !slices.Equal(followed, listed) {
						t.Fatalf("%s: listed %v again, but follows %v", name, listed, followed)
					}
					k.relisted(step.Gone.Revision, step.Gone.Epoch, listings)
				case step.Restart != nil:
					k = resumed(file.listings(t, step.Restart.Listings))
				case step.Track != nil:
					k.tracked(file.listings(t, []eventListing{*step.Track})[0])
				case step.Settle != nil:
					answer := step.Settle.Answer
					result, err := file.answer(t, answer.Status, answer.Body, answer.Problem)
					decision, err := k.settled(result, err, PodPhase(step.Settle.Pod))
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					checkDecision(t, name, decision, step.Settle.Expect)
				case step.Expect != nil:
					if since := step.Expect.Since; since != nil && k.since != *since {
						t.Errorf("%s: since %d, want %d", name, k.since, *since)
					}
					if epoch := step.Expect.Epoch; epoch != "" && k.epoch != epoch {
						t.Errorf("%s: epoch %q, want %q", name, k.epoch, epoch)
					}
					for _, d := range step.Expect.Decisions {
						what := fmt.Sprintf("%s: %s %s %s", name, d.WorkflowUID, d.NodeID, d.Pod)
						var stored *NodeResult
						if result, ok := k.result(d.WorkflowUID, d.NodeID); ok {
							stored = &result
						}
						checkDecision(t, what, Decide(PodPhase(d.Pod), stored), d.Expect)
					}
				default:
					t.Fatalf("%s: a step with no known key", name)
				}
			}
		})
	}
}
