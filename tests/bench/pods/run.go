package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"sync"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v4/pkg/apis/workflow/v1alpha1"
)

type runFlags struct {
	kubeconfig      string
	side            string
	namespace       string
	runID           string
	pods            int
	concurrency     int
	outputs         string
	url             string
	ca              string
	visibleVia      string
	follower        string
	controllerToken string
	cpuPIDs         string
	postgres        bool
	background      int
	skipLastWrite   bool
}

// summary is `run`'s JSON line.
type summary struct {
	Side        string         `json:"side"`
	Pods        int            `json:"pods"`
	Concurrency int            `json:"concurrency"`
	Seconds     float64        `json:"seconds"`
	PodsPerS    float64        `json:"pods_per_s"`
	CPUTicks    int64          `json:"cpu_ticks"`
	PSSKiB      int64          `json:"pss_kib"`
	Errors      int            `json:"errors"`
	Statuses    map[string]int `json:"statuses"`
	P50MS       float64        `json:"p50_ms"`
	P99MS       float64        `json:"p99_ms"`
	// From each pod's last 2xx until the observing controller held its result completed.
	VisibleCount     int     `json:"visible_count"`
	VisibleP50MS     float64 `json:"visible_p50_ms"`
	VisibleP99MS     float64 `json:"visible_p99_ms"`
	VisibleMaxMS     float64 `json:"visible_max_ms"`
	VisibleNeverSeen int     `json:"visible_never_seen"`
	// From each result's updatedAt (argo-results only: the writer's clock before the
	// commit), an upper bound of the same lag.
	VisibleSinceWriteP50MS float64 `json:"visible_since_write_p50_ms"`
	VisibleSinceWriteP99MS float64 `json:"visible_since_write_p99_ms"`
	// Pod status updates the background load made while the pods ran, per second.
	BackgroundPerS float64 `json:"background_per_s"`
	BackgroundErrs int     `json:"background_errors"`
}

// run plays --pods pods of --side, --concurrency at a time, and prints a summary.
func run(args []string) error {
	var f runFlags
	set := flag.NewFlagSet("run", flag.ContinueOnError)
	set.StringVar(&f.kubeconfig, "kubeconfig", "", "the API server's admin kubeconfig (to make the Pods and their tokens)")
	set.StringVar(&f.side, "side", "", "status-quo (WorkflowTaskResults) or argo-results (a final report to --url)")
	set.StringVar(&f.namespace, "namespace", "bench", "the pods' namespace")
	set.StringVar(&f.runID, "run-id", "pods", "prefix of the workflows' names (distinct per run)")
	set.IntVar(&f.pods, "pods", 2000, "pods to play")
	set.IntVar(&f.concurrency, "concurrency", 64, "pods in flight")
	set.StringVar(&f.outputs, "outputs", "", "a file holding the outputs each pod reports (Argo's Outputs JSON)")
	set.StringVar(&f.url, "url", "", "argo-results: the server's URL")
	set.StringVar(&f.ca, "ca", "", "argo-results: the CA of the server's certificate")
	set.StringVar(&f.visibleVia, "visible-via", "", "argo-results: the URL of the replica the Follower follows (empty: no observer)")
	set.StringVar(&f.follower, "follower", "", "argo-results: the Go Follower (tests/bench/follower)")
	set.StringVar(&f.controllerToken, "controller-token", "", "argo-results: a file holding the controller's token, which the Follower sends")
	visible := set.Bool("visible", false, "status quo: observe with Argo's task-result informer (a child process)")
	set.StringVar(&f.cpuPIDs, "cpu-pids", "", "comma-separated PIDs whose CPU and memory are the side's")
	set.BoolVar(&f.postgres, "cpu-postgres", false, "also count every process of the machine's Postgres")
	set.IntVar(&f.background, "background", 0, "Pod status updates per second sent to the API server meanwhile")
	set.BoolVar(&f.skipLastWrite, "skip-last-write", false, "the control's negative control: each pod leaves out its last write "+
		"(the status quo FinalizeOutput's patch, argo-results its report) and still counts as answered")
	if err := set.Parse(args); err != nil {
		return err
	}
	if f.side != "status-quo" && f.side != "argo-results" {
		return fmt.Errorf("--side: want status-quo or argo-results, got %q", f.side)
	}
	pids, err := parsePIDs(f.cpuPIDs)
	if err != nil {
		return fmt.Errorf("--cpu-pids: %w", err)
	}
	side := processes{pids: pids, postgres: f.postgres}
	outputsJSON, err := os.ReadFile(f.outputs)
	if err != nil {
		return fmt.Errorf("--outputs: %w", err)
	}
	var outputs wfv1.Outputs
	if err := json.Unmarshal(outputsJSON, &outputs); err != nil {
		return fmt.Errorf("--outputs: %w", err)
	}
	ctx := context.Background()
	c, err := connect(f.kubeconfig)
	if err != nil {
		return err
	}

	var send reporter
	audience := ""
	if f.side == "status-quo" {
		send = &statusQuo{base: c.anonymous, namespace: f.namespace, outputs: &outputs, skipLastWrite: f.skipLastWrite}
	} else {
		audience = argoResultsAudience
		if send, err = newArgoResults(f.url, f.ca, f.namespace, outputsJSON, f.skipLastWrite); err != nil {
			return err
		}
	}
	say("making %d Pods and their tokens (%s)", f.pods, f.side)
	pods, err := c.prepare(ctx, f.namespace, f.runID, f.pods, audience)
	if err != nil {
		return err
	}

	var watch *observer
	switch {
	case f.side == "status-quo" && *visible:
		watch, err = startObserver(exec.Command(os.Args[0], "informer", "--kubeconfig", f.kubeconfig, "--namespace", f.namespace))
	case f.side == "argo-results" && f.visibleVia != "":
		token, readErr := os.ReadFile(f.controllerToken)
		if readErr != nil {
			return fmt.Errorf("--controller-token: %w", readErr)
		}
		cmd := exec.Command(f.follower)
		cmd.Env = append(os.Environ(), "ARGO_RESULTS_URL="+f.visibleVia, "ARGO_RESULTS_CA="+f.ca,
			"ARGO_RESULTS_TOKEN="+string(token))
		if watch, err = startObserver(cmd); err == nil {
			err = watch.track(f.namespace, pods)
		}
	}
	if err != nil {
		return err
	}
	if watch != nil {
		defer watch.stop()
	}

	var load *backgroundLoad
	if f.background > 0 {
		if load, err = startBackground(ctx, c, f.namespace, f.runID, f.background); err != nil {
			return err
		}
	}

	say("%d pods, %d in flight", f.pods, f.concurrency)
	before := side.cpuTicks()
	started := time.Now()
	outcome := playPods(ctx, send, pods, f.concurrency)
	seconds := time.Since(started).Seconds()
	s := summary{
		Side: f.side, Pods: f.pods, Concurrency: f.concurrency, Seconds: seconds,
		PodsPerS: float64(f.pods-outcome.errors) / seconds,
		CPUTicks: side.ticksSince(before), PSSKiB: side.pssKiB(),
		Errors: outcome.errors, Statuses: outcome.statuses,
		P50MS: quantileMS(outcome.latencies, 0.50), P99MS: quantileMS(outcome.latencies, 0.99),
	}
	if load != nil {
		s.BackgroundPerS, s.BackgroundErrs = load.stop(seconds)
	}
	if watch != nil {
		nodes := make([]string, 0, len(outcome.answered))
		for node := range outcome.answered {
			nodes = append(nodes, node)
		}
		seen := watch.await(nodes, 10*time.Second)
		var lags []time.Duration
		for node, answered := range outcome.answered {
			at, ok := seen[node]
			if !ok {
				s.VisibleNeverSeen++
				continue
			}
			lags = append(lags, max(time.Duration(at-answered), 0))
		}
		s.VisibleCount = len(lags)
		s.VisibleP50MS, s.VisibleP99MS = quantileMS(lags, 0.50), quantileMS(lags, 0.99)
		s.VisibleMaxMS = quantileMS(lags, 1)
		sinceWrite := watch.sinceWrite()
		s.VisibleSinceWriteP50MS, s.VisibleSinceWriteP99MS = quantileMS(sinceWrite, 0.50), quantileMS(sinceWrite, 0.99)
	}
	return json.NewEncoder(os.Stdout).Encode(s)
}

// outcome is what the pods saw: the latency of each pod that got its 2xx, the wall-clock
// time of that 2xx by node, and the failures by status.
type outcome struct {
	latencies []time.Duration
	answered  map[string]int64
	errors    int
	statuses  map[string]int
}

// playPods runs the pods, concurrency at a time (a closed loop), each on its own
// connection.
func playPods(ctx context.Context, send reporter, pods []pod, concurrency int) outcome {
	var mu sync.Mutex
	result := outcome{answered: map[string]int64{}, statuses: map[string]int{}}
	work := make(chan *pod)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				started := time.Now()
				err := send.report(ctx, p)
				done := time.Now()
				mu.Lock()
				if err != nil {
					result.errors++
					result.statuses[status(err)]++
					if result.errors <= 3 {
						say("pod %s: %v", p.name, err)
					}
				} else {
					result.statuses["2xx"]++
					result.latencies = append(result.latencies, done.Sub(started))
					result.answered[p.nodeID] = done.UnixNano()
				}
				mu.Unlock()
			}
		}()
	}
	for i := range pods {
		work <- &pods[i]
	}
	close(work)
	wg.Wait()
	return result
}

// quantileMS is the q-quantile of durations, in milliseconds (0 when there are none).
func quantileMS(durations []time.Duration, q float64) float64 {
	if len(durations) == 0 {
		return 0
	}
	sorted := append([]time.Duration(nil), durations...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	index := int(q*float64(len(sorted))+0.5) - 1
	index = min(max(index, 0), len(sorted)-1)
	return float64(sorted[index].Microseconds()) / 1000
}

func say(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "pods: "+format+"\n", args...)
}
