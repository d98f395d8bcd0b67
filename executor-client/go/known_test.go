package argoresults

import (
	"fmt"
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
