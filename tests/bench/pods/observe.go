package main

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// observer is a controller as a process of its own, telling when it first holds each
// node's result completed. Two line protocols:
//   - the status quo's, `pods informer`: `ready`, then `seen NODE_ID UNIX_NANOS`;
//   - argo-results', tests/bench/follower (the Go Follower): it reads `track NAMESPACE
//     NAME UID` lines, writes `ready`, then `completed WORKFLOW_UID NODE_ID UNIX_NANOS
//     UPDATED_AT`.
type observer struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	ready chan struct{}
	ended chan error

	mu   sync.Mutex
	seen map[string]int64
	// written: each node's updatedAt, the writer's clock before its commit (the Follower
	// tells it; the informer does not).
	written map[string]int64
	added   chan struct{}
}

func startObserver(cmd *exec.Cmd) (*observer, error) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	o := &observer{cmd: cmd, stdin: stdin, ready: make(chan struct{}), ended: make(chan error, 1),
		seen: map[string]int64{}, written: map[string]int64{}, added: make(chan struct{}, 1)}
	go func() { o.ended <- o.read(stdout) }()
	select {
	case <-o.ready:
		return o, nil
	case err := <-o.ended:
		return nil, fmt.Errorf("the observer %s ended before it was ready: %v", cmd.Path, err)
	case <-time.After(5 * time.Minute):
		return nil, fmt.Errorf("the observer %s was not ready in 5 minutes", cmd.Path)
	}
}

func (o *observer) read(stdout io.Reader) error {
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		fields := strings.Fields(lines.Text())
		var node, at string
		var written time.Time
		switch {
		case len(fields) == 1 && fields[0] == "ready":
			close(o.ready)
			continue
		case len(fields) == 3 && fields[0] == "seen":
			node, at = fields[1], fields[2]
		case len(fields) == 5 && fields[0] == "completed":
			node, at = fields[2], fields[3]
			var err error
			if written, err = time.Parse(time.RFC3339Nano, fields[4]); err != nil {
				return fmt.Errorf("unexpected updatedAt in %q", lines.Text())
			}
		default:
			return fmt.Errorf("unexpected line %q", lines.Text())
		}
		nanos, err := strconv.ParseInt(at, 10, 64)
		if err != nil {
			return fmt.Errorf("unexpected time in %q", lines.Text())
		}
		o.mu.Lock()
		if _, ok := o.seen[node]; !ok {
			o.seen[node] = nanos
			if !written.IsZero() {
				o.written[node] = written.UnixNano()
			}
		}
		o.mu.Unlock()
		select {
		case o.added <- struct{}{}:
		default:
		}
	}
	return lines.Err()
}

// track tells a Follower of the workflows to follow (the informer follows them all).
func (o *observer) track(namespace string, pods []pod) error {
	told := map[string]bool{}
	for _, p := range pods {
		if told[p.workflow] {
			continue
		}
		told[p.workflow] = true
		if _, err := fmt.Fprintf(o.stdin, "track %s %s %s\n", namespace, p.workflow, p.workflowUID); err != nil {
			return err
		}
	}
	return nil
}

// await waits until every node of nodes is seen, or patience has passed, and returns
// when each node seen was.
func (o *observer) await(nodes []string, patience time.Duration) map[string]int64 {
	deadline := time.After(patience)
	for o.missing(nodes) > 0 {
		select {
		case <-o.added:
		case <-deadline:
			return o.sightings()
		}
	}
	return o.sightings()
}

func (o *observer) missing(nodes []string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	missing := 0
	for _, node := range nodes {
		if _, ok := o.seen[node]; !ok {
			missing++
		}
	}
	return missing
}

func (o *observer) sightings() map[string]int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.seen)
}

// sinceWrite is, for each node seen whose updatedAt is known, the time from that write
// to the sighting: the lag of the feed and the controller alone, which a busy load
// generator reading its 2xx late does not shorten.
func (o *observer) sinceWrite() []time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	var lags []time.Duration
	for node, written := range o.written {
		lags = append(lags, max(time.Duration(o.seen[node]-written), 0))
	}
	return lags
}

func (o *observer) stop() {
	o.stdin.Close()
	done := make(chan struct{})
	go func() { o.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		o.cmd.Process.Kill()
		<-done
	}
}
