package argoresults

import (
	"encoding/json"
	"fmt"
)

// FeedItemType says what a change of the feed did.
type FeedItemType string

// The kinds of change.
const (
	// Upserted: a result was created or changed; Result is its state at Revision.
	Upserted FeedItemType = "upserted"
	// Deleted: a result was deleted (a tombstone); the result's key is given.
	Deleted FeedItemType = "deleted"
)

// FeedItem is one change of the feed, in revision order. An upserted item carries Result;
// a deleted one carries Namespace, Workflow, WorkflowUID and NodeID.
type FeedItem struct {
	Type        FeedItemType `json:"type"`
	Revision    int64        `json:"revision"`
	Result      *NodeResult  `json:"result,omitempty"`
	Namespace   string       `json:"namespace,omitempty"`
	Workflow    string       `json:"workflow,omitempty"`
	WorkflowUID string       `json:"workflowUid,omitempty"`
	NodeID      string       `json:"nodeId,omitempty"`
}

// UnmarshalJSON reads an item and checks that it has the fields of its type.
func (i *FeedItem) UnmarshalJSON(data []byte) error {
	type plain FeedItem
	if err := json.Unmarshal(data, (*plain)(i)); err != nil {
		return err
	}
	switch {
	case i.Type == Upserted && i.Result != nil:
	case i.Type == Deleted && i.Namespace != "" && i.Workflow != "" && i.WorkflowUID != "" && i.NodeID != "":
	default:
		return fmt.Errorf("feed item of type %q lacks its fields", i.Type)
	}
	return nil
}

// Key is the (workflow UID, node ID) of the result the change is about.
func (i *FeedItem) Key() (workflowUID, nodeID string) {
	if i.Result != nil {
		return i.Result.WorkflowUID, i.Result.NodeID
	}
	return i.WorkflowUID, i.NodeID
}

// FeedPage is every change after the requested revision, then the revision to pass as the
// next since, and the store's epoch it belongs to (empty from a server older than epochs).
type FeedPage struct {
	Items    []FeedItem `json:"items"`
	Revision int64      `json:"revision"`
	Epoch    string     `json:"epoch,omitempty"`
}
