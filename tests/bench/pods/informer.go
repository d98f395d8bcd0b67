package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v4/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v4/pkg/client/clientset/versioned"
	wfinformers "github.com/argoproj/argo-workflows/v4/pkg/client/informers/externalversions/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v4/workflow/common"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// newTaskResultInformer is the informer Argo's controller runs on task results
// (workflow/controller/taskresult.go, newWorkflowTaskResultInformer): Argo's generated
// filtered informer on the namespace, selecting results that carry the workflow label,
// resynced every 20 minutes, with ResourceVersion "0" replaced by "" as Argo does (a
// consistent, paginated LIST).
func newTaskResultInformer(clientset versioned.Interface, namespace string) cache.SharedIndexInformer {
	workflowLabel, _ := labels.NewRequirement(common.LabelKeyWorkflow, selection.Exists, nil)
	selector := labels.NewSelector().Add(*workflowLabel).String()
	return wfinformers.NewFilteredWorkflowTaskResultInformer(clientset, namespace, 20*time.Minute,
		cache.Indexers{}, func(options *metav1.ListOptions) {
			options.LabelSelector = selector
			if options.ResourceVersion == "0" {
				options.ResourceVersion = ""
			}
		})
}

// controllerClientset is Argo's controller's clientset: its client-side rate limit is the
// controller's defaults (cmd/workflow-controller/main.go: --qps 20, --burst 30), which
// every page of an informer's LIST passes through.
func controllerClientset(kubeconfig string) (versioned.Interface, error) {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig %s: %w", kubeconfig, err)
	}
	config.QPS, config.Burst = 20, 30
	return versioned.NewForConfig(config)
}

// informer is the status quo's controller as an observer: it writes `ready` once its
// informer has synced, then `seen NODE_ID UNIX_NANOS` the first time it holds a task
// result labelled completed, and ends when its stdin does.
func informer(args []string) error {
	set := flag.NewFlagSet("informer", flag.ContinueOnError)
	kubeconfig := set.String("kubeconfig", "", "the API server's kubeconfig")
	namespace := set.String("namespace", "", "the namespace whose task results to follow")
	if err := set.Parse(args); err != nil {
		return err
	}
	clientset, err := controllerClientset(*kubeconfig)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &seenWriter{writer: bufio.NewWriter(os.Stdout), told: map[string]bool{}}
	results := newTaskResultInformer(clientset, *namespace)
	handle := func(obj any) {
		if result, ok := obj.(*wfv1.WorkflowTaskResult); ok &&
			result.Labels[common.LabelKeyReportOutputsCompleted] == "true" {
			out.seen(result.Name)
		}
	}
	if _, err := results.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    handle,
		UpdateFunc: func(_, obj any) { handle(obj) },
	}); err != nil {
		return err
	}
	go results.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), results.HasSynced) {
		return fmt.Errorf("the informer did not sync")
	}
	out.line("ready")
	_, err = io.Copy(io.Discard, os.Stdin)
	return err
}

// seenWriter writes each node once, with the wall-clock time it was first held.
type seenWriter struct {
	mu     sync.Mutex
	writer *bufio.Writer
	told   map[string]bool
}

func (s *seenWriter) line(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintln(s.writer, line)
	s.writer.Flush()
}

func (s *seenWriter) seen(node string) {
	at := time.Now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.told[node] {
		return
	}
	s.told[node] = true
	fmt.Fprintf(s.writer, "seen %s %d\n", node, at)
	s.writer.Flush()
}
