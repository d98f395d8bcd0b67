// Package backend is argo-results as a task results backend of Argo Workflows: the
// implementation behind the seam that the patch in ../patch adds to Argo
// (workflow/taskresults). Linked into workflow-controller and argoexec (the patch's blank
// imports), it registers under the name Name, which the controller's configuration
// chooses:
//
//	taskResults:
//	  backend: argo-results
//	  settings:
//	    url: https://argo-results.argo.svc:8443
//
// The executor side is the Go package's Reporter (writer.go), the controller side its
// Follower (source.go); pod.go gives the reporting containers their token.
package backend

import "github.com/argoproj/argo-workflows/v4/workflow/taskresults"

// Name is the backend's name in the controller's taskResults.backend setting.
const Name = "argo-results"

func init() {
	taskresults.Register(Name, newSource, newWriter)
}
