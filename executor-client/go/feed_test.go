package argoresults

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestMalformedAnswersAreRefusedWithWhatIsWrong(t *testing.T) {
	for _, c := range []struct {
		name, item, error string
	}{
		{"a tombstone without its key", `{"type":"deleted","revision":1}`, "lacks its fields"},
		{"an upsert without its result", `{"type":"upserted","revision":1}`, "lacks its fields"},
		{"an unknown type", `{"type":"renamed","revision":1,"namespace":"argo"}`, "lacks its fields"},
		{"truncated JSON", `{"type":`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var item FeedItem
			err := json.Unmarshal([]byte(c.item), &item)
			if err == nil || !strings.Contains(err.Error(), c.error) {
				t.Errorf("%s: %v, want an error with %q", c.item, err, c.error)
			}
		})
	}
}

// A change names the result it is about, whether it carries the result or is a tombstone.
func TestAChangesKeyIsItsResultsOrItsTombstones(t *testing.T) {
	var page FeedPage
	err := json.Unmarshal([]byte(`{"items":[`+
		`{"type":"upserted","revision":7,"result":{"workflowUid":"u1","nodeId":"wf-1","state":"reporting"}},`+
		`{"type":"deleted","revision":8,"namespace":"argo","workflow":"wf","workflowUid":"u2","nodeId":"wf-2"}],`+
		`"revision":8,"epoch":"e1"}`), &page)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range [][2]string{{"u1", "wf-1"}, {"u2", "wf-2"}} {
		if uid, node := page.Items[i].Key(); uid != want[0] || node != want[1] {
			t.Errorf("item %d is about %s %s, want %v", i, uid, node, want)
		}
	}
	if page.Revision != 8 || page.Epoch != "e1" || page.Items[1].Type != Deleted {
		t.Errorf("the page: %+v", page)
	}
}
