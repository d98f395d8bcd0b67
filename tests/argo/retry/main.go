// Command retry retries an ended workflow as `argo retry NAME` does, with Argo's own code:
// argo-server's RetryWorkflow (server/workflow/workflow_server.go) is Argo's
// FormulateRetryWorkflow (workflow/util/util.go), then the Pods it names deleted, then
// the workflow updated. argo-server and the argo CLI are not built here; what they add
// around those three steps (authorization, the workflow's validation, offloaded node
// status, the actor's labels) does not touch task results.
//
//	retry --kubeconfig FILE --namespace argo NAME
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	apierr "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/argoproj/argo-workflows/v4/pkg/client/clientset/versioned"
	"github.com/argoproj/argo-workflows/v4/util/logging"
	"github.com/argoproj/argo-workflows/v4/workflow/util"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "the kubeconfig")
	namespace := flag.String("namespace", "argo", "the workflow's namespace")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: retry --kubeconfig FILE [--namespace NS] NAME")
		os.Exit(2)
	}
	if err := retry(*kubeconfig, *namespace, flag.Arg(0)); err != nil {
		fmt.Fprintln(os.Stderr, "retry:", err)
		os.Exit(1)
	}
}

func retry(kubeconfig, namespace, name string) error {
	ctx := logging.WithLogger(context.Background(), logging.NewSlogLogger(logging.Info, logging.Text))
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	workflows := versioned.NewForConfigOrDie(config).ArgoprojV1alpha1().Workflows(namespace)
	pods := kubernetes.NewForConfigOrDie(config).CoreV1().Pods(namespace)
	wf, err := workflows.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	wf, podsToDelete, err := util.FormulateRetryWorkflow(ctx, wf, false, "", nil)
	if err != nil {
		return err
	}
	for _, pod := range podsToDelete {
		if err := pods.Delete(ctx, pod, metav1.DeleteOptions{}); err != nil && !apierr.IsNotFound(err) {
			return err
		}
	}
	_, err = workflows.Update(ctx, wf, metav1.UpdateOptions{})
	return err
}
