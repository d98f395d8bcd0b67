// Command kube-control-plane is the Kubernetes control plane of argo-results' tests: the
// real kube-apiserver and etcd, built from their Go modules (go.mod pins the versions),
// in one binary that runs as either of them, and `up`, which starts both on loopback.
//
//	kube-control-plane up [flags]          etcd and kube-apiserver, ready to use (up.go)
//	kube-control-plane etcd [flags]        etcd's own main (go.etcd.io/etcd/server/v3/etcdmain)
//	kube-control-plane kube-apiserver ...  kube-apiserver's own main (cmd/kube-apiserver)
//
// One binary rather than two because linking dominates a warm build: the two programs
// share most of their dependencies, and one link of both costs little more than one.
// Nothing of either program is changed: each subcommand is its project's main function.
package main

import (
	"fmt"
	"os"
	_ "time/tzdata" // as cmd/kube-apiserver: time zones for CronJob

	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // as cmd/kube-apiserver
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // as cmd/kube-apiserver
	_ "k8s.io/component-base/metrics/prometheus/version"  // as cmd/kube-apiserver
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

const usage = `usage: kube-control-plane up [flags]        (up --help lists them)
       kube-control-plane etcd [etcd flags]
       kube-control-plane kube-apiserver [kube-apiserver flags]
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	switch os.Args[1] {
	case "up":
		os.Exit(up(os.Args[2:]))
	case "etcd":
		// etcdmain reads its flags from args[1:], as from its own os.Args.
		etcdmain.Main(os.Args[1:])
	case "kube-apiserver":
		command := app.NewAPIServerCommand()
		command.SetArgs(os.Args[2:])
		os.Exit(cli.Run(command))
	case "-h", "--help", "help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "kube-control-plane: unknown command %q\n%s", os.Args[1], usage)
		os.Exit(2)
	}
}
