package argoresults

import (
	"bytes"
	"encoding/json"
)

// ProtocolVersion is the only report protocol version this package speaks.
const ProtocolVersion = 1

// ResultState is where a node's result stands (docs/api.md section 1).
type ResultState string

// The states of a result. Completed and abandoned results are frozen.
const (
	StateExpected  ResultState = "expected"
	StateReporting ResultState = "reporting"
	StateCompleted ResultState = "completed"
	StateAbandoned ResultState = "abandoned"
)

// Frozen reports whether a result in this state accepts no further change.
func (s ResultState) Frozen() bool { return s == StateCompleted || s == StateAbandoned }

// NodeResult is one node's stored result. Optional fields are nil when absent; Outputs is
// Argo's Outputs JSON exactly as stored, nil when the result has none.
type NodeResult struct {
	Namespace     string          `json:"namespace"`
	Workflow      string          `json:"workflow"`
	WorkflowUID   string          `json:"workflowUid"`
	NodeID        string          `json:"nodeId"`
	PodName       *string         `json:"podName"`
	PodUID        *string         `json:"podUid"`
	InstanceID    *string         `json:"instanceId"`
	State         ResultState     `json:"state"`
	Phase         *string         `json:"phase"`
	Message       *string         `json:"message"`
	Progress      *string         `json:"progress"`
	Outputs       json.RawMessage `json:"outputs"`
	Sequence      *int64          `json:"sequence"`
	Revision      int64           `json:"revision"`
	CreatedAt     string          `json:"createdAt"`
	UpdatedAt     string          `json:"updatedAt"`
	CompletedAt   *string         `json:"completedAt"`
	AbandonReason *string         `json:"abandonReason"`
}

// UnmarshalJSON reads a result, leaving Outputs nil when it is JSON null.
func (r *NodeResult) UnmarshalJSON(data []byte) error {
	type plain NodeResult
	if err := json.Unmarshal(data, (*plain)(r)); err != nil {
		return err
	}
	r.Outputs = nilIfNull(r.Outputs)
	return nil
}

// deref is the string s points to, "" for none.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func nilIfNull(raw json.RawMessage) json.RawMessage {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil
	}
	return raw
}

// WorkflowRef names one workflow incarnation, as the controller's Workflow informer knows
// it.
type WorkflowRef struct {
	Namespace string
	Name      string
	UID       string
}

// node names one of the workflow's nodes.
func (w WorkflowRef) node(nodeID string) NodeRef {
	return NodeRef{Namespace: w.Namespace, Workflow: w.Name, NodeID: nodeID}
}

// NodeRef names which node of which workflow a result belongs to: the three strings a
// caller could otherwise swap without a compile error. The workflow's incarnation (its
// UID) travels apart: in the request's WorkflowUID, or [Client.GetResult]'s workflowUID.
type NodeRef struct {
	Namespace string
	Workflow  string
	NodeID    string
}

// Summary counts a workflow's results in each state.
type Summary struct {
	Expected  uint64 `json:"expected"`
	Reporting uint64 `json:"reporting"`
	Completed uint64 `json:"completed"`
	Abandoned uint64 `json:"abandoned"`
}

// ResultList is one page of a workflow's results, ordered by node ID, with the summary of
// the same snapshot at Revision. Continue is empty on the last page.
type ResultList struct {
	Items    []NodeResult `json:"items"`
	Revision int64        `json:"revision"`
	// Epoch is the store's epoch Revision belongs to.
	Epoch    string  `json:"epoch,omitempty"`
	Summary  Summary `json:"summary"`
	Continue string  `json:"continue,omitempty"`
}

// DeleteResponse answers a workflow's garbage collection.
type DeleteResponse struct {
	Deleted uint64 `json:"deleted"`
}

// ReportRequest is the body of a report (docs/api.md section 2). Empty optional fields are left
// out, and an absent field keeps the stored value. Outputs is sent byte for byte and is
// merged onto the stored outputs as an RFC 7386 patch.
type ReportRequest struct {
	ProtocolVersion int             `json:"protocolVersion"`
	WorkflowUID     string          `json:"workflowUid"`
	PodName         string          `json:"podName"`
	PodUID          string          `json:"podUid"`
	InstanceID      string          `json:"instanceId,omitempty"`
	Sequence        int64           `json:"sequence,omitempty"`
	Final           bool            `json:"final,omitempty"`
	Outputs         json.RawMessage `json:"-"`
	Progress        string          `json:"progress,omitempty"`
	Phase           string          `json:"phase,omitempty"`
	Message         string          `json:"message,omitempty"`
}

// ExpectationRequest registers the pod whose result the controller awaits; PodUID is left
// out when empty (before the pod exists).
type ExpectationRequest struct {
	WorkflowUID string `json:"workflowUid"`
	PodName     string `json:"podName"`
	PodUID      string `json:"podUid,omitempty"`
}

// AbandonRequest gives up on a node's result.
type AbandonRequest struct {
	WorkflowUID string `json:"workflowUid"`
	Reason      string `json:"reason"`
}

// WhoAmI is who the server thinks the caller is.
type WhoAmI struct {
	Subject   string  `json:"subject"`
	Namespace *string `json:"namespace"`
	Pod       *PodRef `json:"pod"`
	Roles     []Role  `json:"roles"`
}

// PodRef names the pod a token is bound to.
type PodRef struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
}

// Role is what a caller may do.
type Role string

// The roles of docs/api.md section 8.
const (
	RolePod        Role = "pod"
	RoleReader     Role = "reader"
	RoleController Role = "controller"
)
