// Command pods plays Argo's wait containers on a real kube-apiserver and etcd
// (tests/kube), once as Argo v4's argoexec reports a result (a WorkflowTaskResult created,
// then merge-patched with the outputs, then with the completed label, through Argo's own
// generated clientset) and once as argo-results' wait container does (one final report to
// the server, whose tokens are checked with --kube-jwks against the same API server). It
// is the status-quo half of tests/bench/run.sh (see tests/bench/status_quo.sh):
//
//	pods run       pods on one side, closed loop; the cost to the cluster and the lag
//	               until a controller holds each result; one JSON line
//	pods informer  the controller's side of the status quo: Argo's own filtered
//	               WorkflowTaskResult informer, writing when it first holds each result
//	               completed (a child of `run`)
//	pods scale     results stored by the thousand: a controller's relist and one
//	               workflow's deletion, on each side; one JSON line
//
// Each pod is a Pod object of the API server with its own service-account token from the
// TokenRequest API, bound to it (minted before the clock starts, as the kubelet mints
// it), and opens a fresh TLS connection, as a new argoexec process does.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: pods run|informer|scale [flags] (each takes --help)")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = run(os.Args[2:])
	case "informer":
		err = informer(os.Args[2:])
	case "scale":
		err = scale(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: want run, informer or scale", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pods:", err)
		os.Exit(1)
	}
}
