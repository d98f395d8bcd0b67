// Command follower is the Go Follower of executor-client/go as loadgen's `run
// --visible-via --follower PATH` drives it (tests/src/bin/loadgen/visible.rs): it follows
// the change feed of ARGO_RESULTS_URL (trusting ARGO_RESULTS_CA, sending
// ARGO_RESULTS_TOKEN) from its head, follows each workflow named on stdin by a line
// `track NAMESPACE NAME UID`, and writes `completed WORKFLOW_UID NODE_ID UNIX_NANOS
// UPDATED_AT` the first time it holds a node completed, with the wall-clock time it did
// and the result's updatedAt. It writes `ready` once it follows, and ends when stdin does.
package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	argoresults "github.com/argo-results/argo-results/executor-client/go"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "follower:", err)
		os.Exit(1)
	}
}

func run() error {
	client, err := argoresults.New(argoresults.Config{
		URL:    os.Getenv("ARGO_RESULTS_URL"),
		Token:  argoresults.StaticToken(os.Getenv("ARGO_RESULTS_TOKEN")),
		CAFile: os.Getenv("ARGO_RESULTS_CA"),
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	follower, err := argoresults.ResumeFollower(ctx, client, nil, argoresults.FollowerOptions{})
	if err != nil {
		return err
	}
	out := &sightings{writer: bufio.NewWriter(os.Stdout), told: map[string]bool{}}
	out.line("ready")

	tracking := make(chan error, 1)
	go func() {
		tracking <- track(ctx, follower, out)
		cancel()
	}()
	err = follower.Run(ctx, time.Second, func(workflow argoresults.WorkflowRef) {
		out.completed(follower, workflow.UID)
	})
	if err := <-tracking; err != nil {
		return err
	}
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// track follows each workflow stdin names until stdin ends.
func track(ctx context.Context, follower *argoresults.Follower, out *sightings) error {
	lines := bufio.NewScanner(os.Stdin)
	for lines.Scan() {
		fields := strings.Fields(lines.Text())
		if len(fields) != 4 || fields[0] != "track" {
			return fmt.Errorf("expected `track NAMESPACE NAME UID`, read %q", lines.Text())
		}
		workflow := argoresults.WorkflowRef{Namespace: fields[1], Name: fields[2], UID: fields[3]}
		if err := follower.Track(ctx, workflow); err != nil {
			return err
		}
		// Its listing may already hold completed nodes.
		out.completed(follower, workflow.UID)
	}
	return lines.Err()
}

// sightings writes each node completed once.
type sightings struct {
	mu     sync.Mutex
	writer *bufio.Writer
	told   map[string]bool
}

func (s *sightings) line(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintln(s.writer, line)
	s.writer.Flush()
}

// completed writes the nodes of a workflow the follower holds completed and that were
// not written before.
func (s *sightings) completed(follower *argoresults.Follower, workflowUID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, result := range follower.Results(workflowUID) {
		key := workflowUID + " " + result.NodeID
		if result.State == argoresults.StateCompleted && !s.told[key] {
			s.told[key] = true
			fmt.Fprintf(s.writer, "completed %s %d %s\n", key, time.Now().UnixNano(), result.UpdatedAt)
		}
	}
	s.writer.Flush()
}
