package argoresults

import (
	"slices"
	"testing"
	"time"
)

// The reading, garbage-collection and identity endpoints against the real server.

func TestEndpoints(t *testing.T) {
	onBackends(t, func(t *testing.T, b backend) {
		s := startServer(t, b)
		ctx := testContext(t)
		admin := s.admin()
		wf := testWorkflow("pages")
		var nodes []string
		for n := 1; n <= 5; n++ {
			st := wf.step(n)
			_, created, err := admin.Expect(ctx, st.node(), &ExpectationRequest{WorkflowUID: wf.UID, PodName: st.podName})
			if err != nil || !created {
				t.Fatalf("expect %s: created %v, %v", st.nodeID, created, err)
			}
			nodes = append(nodes, st.nodeID)
		}
		slices.Sort(nodes)

		page, err := admin.ListResults(ctx, testNamespace, wf.Name, ListOptions{WorkflowUID: wf.UID, Limit: 2})
		if err != nil || len(page.Items) != 2 || page.Continue == "" || page.Summary.Expected != 5 {
			t.Fatalf("the first page of 2: %+v, %v", page, err)
		}
		all, revision, err := admin.ListAllResults(ctx, testNamespace, wf.Name, ListOptions{WorkflowUID: wf.UID, Limit: 2})
		if err != nil || revision < 5 {
			t.Fatalf("every page: revision %d, %v", revision, err)
		}
		var listed []string
		for _, result := range all {
			listed = append(listed, result.NodeID)
		}
		if !slices.Equal(listed, nodes) {
			t.Errorf("listed %v, want each of %v once, by node ID", listed, nodes)
		}
		if none, err := admin.ListResults(ctx, testNamespace, wf.Name, ListOptions{State: StateCompleted}); err != nil || len(none.Items) != 0 {
			t.Errorf("completed results: %+v, %v", none, err)
		}

		deleted, err := admin.DeleteResults(ctx, testNamespace, wf.Name, wf.UID)
		if err != nil || deleted != 5 {
			t.Errorf("deleted %d, %v; want 5", deleted, err)
		}
		if _, err := admin.GetResult(ctx, wf.node(nodes[0]), ""); CodeOf(err) != CodeNotFound {
			t.Errorf("a deleted result: %v, want not_found", err)
		}
		feed, err := admin.Feed(ctx, FeedOptions{Since: revision, Namespace: testNamespace})
		if err != nil || len(feed.Items) != 5 {
			t.Fatalf("the tombstones: %+v, %v", feed, err)
		}
		for _, item := range feed.Items {
			if uid, node := item.Key(); item.Type != Deleted || uid != wf.UID || !slices.Contains(nodes, node) {
				t.Errorf("not a tombstone of the workflow: %+v", item)
			}
		}
		elsewhere, err := admin.Feed(ctx, FeedOptions{Since: revision, Namespace: "elsewhere", Watch: true, Timeout: time.Second})
		if err != nil || len(elsewhere.Items) != 0 {
			t.Errorf("another namespace's feed: %+v, %v", elsewhere, err)
		}

		who, err := admin.WhoAmI(ctx)
		if err != nil || who.Subject != devAdmin || !slices.Contains(who.Roles, RoleController) {
			t.Errorf("the admin: %+v, %v", who, err)
		}
		st := wf.step(9)
		pod, err := s.client(s.mint(podClaims(testNamespace, st.podName, st.podUID))).WhoAmI(ctx)
		if err != nil || pod.Pod == nil || pod.Pod.Name != st.podName || !slices.Equal(pod.Roles, []Role{RolePod}) {
			t.Errorf("a pod: %+v, %v", pod, err)
		}
		if _, err := s.client("not-a-token").WhoAmI(ctx); CodeOf(err) != CodeUnauthenticated {
			t.Errorf("a bad token: %v, want unauthenticated", err)
		}
		if _, err := s.client(s.mint(podClaims(testNamespace, st.podName, st.podUID))).
			ListResults(ctx, testNamespace, wf.Name, ListOptions{}); CodeOf(err) != CodeForbidden {
			t.Errorf("a pod listing: %v, want forbidden", err)
		}
	})
}
