package argoresults

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// A workflow's steps as Argo names them: node <workflow>-<n>, v2 pod
// <workflow>-main-<n>.

const testNamespace = "argo"

type step struct {
	workflow WorkflowRef
	nodeID   string
	podName  string
	podUID   string
}

func testWorkflow(name string) WorkflowRef {
	return WorkflowRef{Namespace: testNamespace, Name: name, UID: name + "-uid"}
}

// node is the step's node, for the node-addressed calls.
func (st step) node() NodeRef { return st.workflow.node(st.nodeID) }

func (w WorkflowRef) step(n int) step {
	return step{
		workflow: w,
		nodeID:   fmt.Sprintf("%s-%d", w.Name, n),
		podName:  fmt.Sprintf("%s-main-%d", w.Name, n),
		podUID:   fmt.Sprintf("%s-pod-%d", w.Name, n),
	}
}

// reporter is the step's wait container reporting to s: its token file (minted by
// writeToken), a sequence file of its own, the namespace from the token.
func (s *testServer) reporter(st step) (*Reporter, string) {
	s.t.Helper()
	dir := s.t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	s.writeToken(st, tokenFile)
	reporter, err := NewReporter(ReporterConfig{
		URL: s.url, TokenFile: tokenFile,
		Workflow: st.workflow.Name, WorkflowUID: st.workflow.UID, NodeID: st.nodeID,
		PodName: st.podName, PodUID: st.podUID,
		SequenceFile: filepath.Join(dir, SequenceFileName),
	})
	if err != nil {
		s.t.Fatal(err)
	}
	return reporter, tokenFile
}

// writeToken writes the step's pod token to path, as the kubelet does.
func (s *testServer) writeToken(st step, path string) {
	s.t.Helper()
	token := s.mint(podClaims(st.workflow.Namespace, st.podName, st.podUID))
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		s.t.Fatal(err)
	}
}

// stored reads a step's result as the admin.
func (s *testServer) stored(st step) *NodeResult {
	s.t.Helper()
	result, err := s.admin().GetResult(testContext(s.t), st.node(), st.workflow.UID)
	if err != nil {
		s.t.Fatalf("get %s: %v", st.nodeID, err)
	}
	return result
}

// jsonEqual asserts that got is the JSON value of want.
func jsonEqual(t *testing.T, what string, got json.RawMessage, want string) {
	t.Helper()
	if !sameJSON(t, got, json.RawMessage(want)) {
		t.Errorf("%s: %s, want %s", what, got, want)
	}
}

// sameJSON compares two JSON texts as values; nil and null are both none.
func sameJSON(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	var va, vb any
	for _, side := range []struct {
		raw json.RawMessage
		v   *any
	}{{a, &va}, {b, &vb}} {
		if len(nilIfNull(side.raw)) == 0 {
			continue
		}
		if err := json.Unmarshal(side.raw, side.v); err != nil {
			t.Fatalf("not JSON: %s", side.raw)
		}
	}
	return reflect.DeepEqual(va, vb)
}

func writeFile(path, text string) error {
	return os.WriteFile(path, []byte(text), 0o600)
}
