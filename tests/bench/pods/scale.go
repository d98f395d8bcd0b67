package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	argoresults "github.com/argo-results/argo-results/executor-client/go"
	"github.com/argoproj/argo-workflows/v4/pkg/apis/workflow"
	wfv1 "github.com/argoproj/argo-workflows/v4/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v4/pkg/client/clientset/versioned"
	"github.com/argoproj/argo-workflows/v4/workflow/common"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// scaleSummary is `scale`'s JSON line.
type scaleSummary struct {
	Side    string `json:"side"`
	Results int    `json:"results"`
	// A restarted controller reading every result back: the informer's LIST until synced,
	// or the Follower's resume (every page of every workflow's listing).
	RelistSeconds  float64 `json:"relist_s"`
	RelistCPUTicks int64   `json:"relist_cpu_ticks"`
	Relisted       int     `json:"relisted"`
	// One workflow's results deleted (Argo's DeleteCollection by the workflow label, or
	// DELETE .../results), when --delete.
	DeleteSeconds  float64 `json:"delete_s"`
	DeleteCPUTicks int64   `json:"delete_cpu_ticks"`
	Deleted        int     `json:"deleted"`
}

// scale measures a controller's relist of --results stored results, and with --delete the
// deletion of one workflow's. The status quo's results are stored here first (those past
// --seeded, named as tests/bench/common.sh's prefill names argo-results' rows, 1,000 to a
// workflow); argo-results' are that prefill's, in Postgres.
func scale(args []string) error {
	set := flag.NewFlagSet("scale", flag.ContinueOnError)
	side := set.String("side", "", "status-quo or argo-results")
	kubeconfig := set.String("kubeconfig", "", "status quo: the API server's admin kubeconfig")
	etcd := set.String("etcd", "", "status quo: etcd's client URL (the results are stored through it)")
	namespace := set.String("namespace", "argo", "the results' namespace")
	results := set.Int("results", 10000, "results stored, 1,000 per workflow")
	seeded := set.Int("seeded", 0, "status quo: results this namespace already holds")
	outputsFile := set.String("outputs", "", "status quo: the outputs of each result (Argo's Outputs JSON)")
	url := set.String("url", "", "argo-results: the server's URL")
	ca := set.String("ca", "", "argo-results: the CA of its certificate")
	controllerToken := set.String("controller-token", "", "argo-results: a file holding the controller's token (to follow, and to delete)")
	cpuPIDs := set.String("cpu-pids", "", "comma-separated PIDs whose CPU is the side's")
	postgres := set.Bool("cpu-postgres", false, "also count every process of the machine's Postgres")
	deleteOne := set.Bool("delete", false, "also delete the first workflow's results")
	if err := set.Parse(args); err != nil {
		return err
	}
	pids, err := parsePIDs(*cpuPIDs)
	if err != nil {
		return fmt.Errorf("--cpu-pids: %w", err)
	}
	measured := processes{pids: pids, postgres: *postgres}
	ctx := context.Background()
	s := scaleSummary{Side: *side, Results: *results}
	switch *side {
	case "status-quo":
		clientset, err := controllerClientset(*kubeconfig)
		if err != nil {
			return err
		}
		outputsJSON, err := os.ReadFile(*outputsFile)
		if err != nil {
			return fmt.Errorf("--outputs: %w", err)
		}
		var outputs wfv1.Outputs
		if err := json.Unmarshal(outputsJSON, &outputs); err != nil {
			return fmt.Errorf("--outputs: %w", err)
		}
		say("storing task results %d to %d", *seeded, *results)
		if err := seedTaskResults(ctx, clientset, *etcd, *namespace, *seeded, *results, &outputs); err != nil {
			return err
		}
		err = s.measure(measured, func() (int, error) { return relistTaskResults(clientset, *namespace) },
			func() (int, error) {
				collection := clientset.ArgoprojV1alpha1().WorkflowTaskResults(*namespace)
				selector := common.LabelKeyWorkflow + "=" + prefillWorkflow(0)
				before, err := collection.List(ctx, metav1.ListOptions{LabelSelector: selector})
				if err != nil {
					return 0, err
				}
				return len(before.Items), collection.DeleteCollection(ctx, metav1.DeleteOptions{},
					metav1.ListOptions{LabelSelector: selector})
			}, *deleteOne)
		if err != nil {
			return err
		}
	case "argo-results":
		token, err := os.ReadFile(*controllerToken)
		if err != nil {
			return fmt.Errorf("--controller-token: %w", err)
		}
		client, err := argoresults.New(argoresults.Config{URL: *url, CAFile: *ca, Token: argoresults.StaticToken(string(token))})
		if err != nil {
			return err
		}
		workflows := make([]argoresults.WorkflowRef, *results/podsPerWorkflow)
		for i := range workflows {
			workflows[i] = argoresults.WorkflowRef{Namespace: *namespace, Name: prefillWorkflow(i), UID: prefillWorkflow(i) + "-uid"}
		}
		err = s.measure(measured, func() (int, error) {
			follower, err := argoresults.ResumeFollower(ctx, client, workflows, argoresults.FollowerOptions{Namespace: *namespace})
			if err != nil {
				return 0, err
			}
			held := 0
			for _, workflow := range workflows {
				held += len(follower.Results(workflow.UID))
			}
			return held, nil
		}, func() (int, error) {
			deleted, err := client.DeleteResults(ctx, *namespace, workflows[0].Name, workflows[0].UID)
			return int(deleted), err
		}, *deleteOne)
		if err != nil {
			return err
		}
	default:
		return fmt.Errorf("--side: want status-quo or argo-results, got %q", *side)
	}
	return json.NewEncoder(os.Stdout).Encode(s)
}

// measure times relist, and then deleteOne when asked, with the side's CPU in each.
func (s *scaleSummary) measure(side processes, relist, deleteOne func() (int, error), deleting bool) error {
	before, started := side.cpuTicks(), time.Now()
	held, err := relist()
	if err != nil {
		return fmt.Errorf("relist: %w", err)
	}
	s.RelistSeconds, s.RelistCPUTicks, s.Relisted = time.Since(started).Seconds(), side.ticksSince(before), held
	if !deleting {
		return nil
	}
	before, started = side.cpuTicks(), time.Now()
	deleted, err := deleteOne()
	if err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	s.DeleteSeconds, s.DeleteCPUTicks, s.Deleted = time.Since(started).Seconds(), side.ticksSince(before), deleted
	return nil
}

// prefillWorkflow is the name of the i-th workflow of 1,000 results, as common.sh's
// prefill names them.
func prefillWorkflow(i int) string { return fmt.Sprintf("prefill-%05d", i) }

// relistTaskResults starts Argo's task-result informer, as a restarted controller does,
// and gives what it holds once synced.
func relistTaskResults(clientset versioned.Interface, namespace string) (int, error) {
	stop := make(chan struct{})
	defer close(stop)
	results := newTaskResultInformer(clientset, namespace)
	go results.Run(stop)
	if !cache.WaitForCacheSync(stop, results.HasSynced) {
		return 0, fmt.Errorf("the informer did not sync")
	}
	return len(results.GetStore().ListKeys()), nil
}

// seedTaskResults stores results from to to, complete: what the measurements read, not
// measured themselves. Result 0 is created through the API server, and its bytes as etcd
// holds them are the template of the others, written straight into etcd (its JSON
// gateway, /v3/kv/txn) 100 to a transaction with their name, UID, label and owner
// replaced: the API server's watch on etcd takes them into its cache as it takes its own
// writes. Through the API server, 100,000 creates take 4 minutes here (its CPU is the
// limit), more than the whole bench may; the LIST and the deletion measured go through it.
func seedTaskResults(ctx context.Context, clientset versioned.Interface, etcd, namespace string, from, to int, outputs *wfv1.Outputs) error {
	if from == 0 {
		name := prefillWorkflow(0)
		_, err := clientset.ArgoprojV1alpha1().WorkflowTaskResults(namespace).Create(ctx, &wfv1.WorkflowTaskResult{
			TypeMeta: metav1.TypeMeta{APIVersion: workflow.APIVersion, Kind: workflow.WorkflowTaskResultKind},
			ObjectMeta: metav1.ObjectMeta{
				Name: prefillNode(0),
				Labels: map[string]string{
					common.LabelKeyWorkflow:               name,
					common.LabelKeyReportOutputsCompleted: "true",
				},
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: workflow.APIVersion, Kind: workflow.WorkflowKind,
					Name: name, UID: types.UID(name + "-uid"),
				}},
			},
			NodeResult: wfv1.NodeResult{Outputs: outputs},
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create the first task result: %w", err)
		}
		from = 1
	}
	store := etcdGateway{url: etcd}
	template, err := store.get(ctx, taskResultKey(namespace, prefillNode(0)))
	if err != nil {
		return fmt.Errorf("read the first task result from etcd: %w", err)
	}
	var puts []etcdPut
	for i := from; i < to; i++ {
		value, err := copyTaskResult(template, i)
		if err != nil {
			return err
		}
		puts = append(puts, etcdPut{Key: []byte(taskResultKey(namespace, prefillNode(i))), Value: value})
		if len(puts) == 100 || i == to-1 {
			if err := store.txn(ctx, puts); err != nil {
				return err
			}
			puts = puts[:0]
		}
	}
	return nil
}

// prefillNode is the i-th result's name: node 1000000000+i of its prefill workflow.
func prefillNode(i int) string {
	return fmt.Sprintf("%s-%d", prefillWorkflow(i/podsPerWorkflow), 1000000000+i)
}

// taskResultKey is where the API server keeps a task result in etcd (its --etcd-prefix,
// /registry, then the CRD's group and plural).
func taskResultKey(namespace, name string) string {
	return "/registry/argoproj.io/workflowtaskresults/" + namespace + "/" + name
}

// copyTaskResult is the stored template as result i: its name, UID, workflow label and
// owner (the API server stores custom resources as JSON, keys sorted as here).
func copyTaskResult(template []byte, i int) ([]byte, error) {
	var object map[string]any
	if err := json.Unmarshal(template, &object); err != nil {
		return nil, fmt.Errorf("the stored task result: %w", err)
	}
	metadata := object["metadata"].(map[string]any)
	workflowName := prefillWorkflow(i / podsPerWorkflow)
	metadata["name"] = prefillNode(i)
	metadata["uid"] = fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
	metadata["labels"].(map[string]any)[common.LabelKeyWorkflow] = workflowName
	owner := metadata["ownerReferences"].([]any)[0].(map[string]any)
	owner["name"], owner["uid"] = workflowName, workflowName+"-uid"
	return json.Marshal(object)
}
