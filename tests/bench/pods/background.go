package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// backgroundPods: the Pods whose status the background load updates in turn.
const backgroundPods = 100

// backgroundLoad is an API server busy with what kubelets send it: Pod status updates (a
// strategic merge patch of a condition on the status subresource) at a fixed rate, from
// 64 goroutines sharing kept connections, so that a slow API server does not slow the rate.
type backgroundLoad struct {
	cancel  context.CancelFunc
	done    sync.WaitGroup
	updates atomic.Int64
	errors  atomic.Int64
}

func startBackground(ctx context.Context, c *cluster, namespace, runID string, perSecond int) (*backgroundLoad, error) {
	names := make([]string, backgroundPods)
	for i := range names {
		names[i] = fmt.Sprintf("%s-background-%d", runID, i)
		_, err := c.admin.CoreV1().Pods(namespace).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: names[i]},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "argoproj/argosay:v2"}}},
		}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	load := &backgroundLoad{cancel: cancel}
	ticks := make(chan int)
	load.done.Add(1)
	go func() {
		defer load.done.Done()
		defer close(ticks)
		interval := time.Second / time.Duration(perSecond)
		next := time.Now()
		for i := 0; ; i++ {
			next = next.Add(interval)
			time.Sleep(time.Until(next))
			select {
			case ticks <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	for range 64 {
		load.done.Add(1)
		go func() {
			defer load.done.Done()
			for i := range ticks {
				// The message changes each time: a patch that changes nothing is not written.
				patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":"True","message":"update %d"}]}}`, i)
				_, err := c.admin.CoreV1().Pods(namespace).Patch(ctx, names[i%backgroundPods],
					types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
				if err != nil && ctx.Err() == nil {
					load.errors.Add(1)
				} else if err == nil {
					load.updates.Add(1)
				}
			}
		}()
	}
	return load, nil
}

// stop ends the load and gives the updates it made per second over seconds, and its
// failures.
func (l *backgroundLoad) stop(seconds float64) (float64, int) {
	l.cancel()
	l.done.Wait()
	return float64(l.updates.Load()) / seconds, int(l.errors.Load())
}
