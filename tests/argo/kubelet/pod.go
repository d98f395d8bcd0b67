package main

// One Pod's life on this node: its volumes, its init containers one after another, then
// its containers at once, each state change written to the Pod's status.

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

type podRunner struct {
	k   *kubelet
	pod *apiv1.Pod
	dir string

	mu      sync.Mutex
	procs   map[string]*os.Process
	evicted bool
	stopped bool
}

func newPodRunner(k *kubelet, pod *apiv1.Pod) *podRunner {
	return &podRunner{k: k, pod: pod, dir: filepath.Join(k.root, string(pod.UID)), procs: map[string]*os.Process{}}
}

func (r *podRunner) logf(format string, args ...any) {
	log.Printf("%s/%s: %s", r.pod.Namespace, r.pod.Name, fmt.Sprintf(format, args...))
}

func (r *podRunner) run(ctx context.Context) {
	// Every volume goes once the Pod's last process has exited. A kubelet keeps an ended
	// Pod's emptyDirs until the Pod is deleted, but no container reads them again, and
	// each holds the copy of argoexec (155 MB) that Argo's init container makes: kept,
	// one e2e run's Pods filled gigabytes of the disk CI shares.
	defer r.removeVolumes()
	volumes, err := r.volumes(ctx)
	if err != nil {
		r.logf("volumes: %v", err)
		r.finish(ctx, apiv1.PodFailed, "VolumeFailed", err.Error())
		return
	}
	r.update(ctx, func(s *apiv1.PodStatus) {
		s.StartTime = ptrNow()
		s.HostIP, s.PodIP = "127.0.0.1", "127.0.0.1"
		s.Conditions = []apiv1.PodCondition{{Type: apiv1.PodScheduled, Status: apiv1.ConditionTrue}}
		s.InitContainerStatuses = waiting(r.pod.Spec.InitContainers, "PodInitializing")
		s.ContainerStatuses = waiting(r.pod.Spec.Containers, "PodInitializing")
	})
	for _, c := range r.pod.Spec.InitContainers {
		if code, _ := r.runContainer(ctx, c, volumes, true); code != 0 || r.isStopped() {
			if !r.wasEvicted() { // else evict wrote the Pod's end
				r.finish(ctx, apiv1.PodFailed, "", "")
			}
			return
		}
	}
	r.update(ctx, func(s *apiv1.PodStatus) { s.Phase = apiv1.PodRunning })
	codes := make([]int, len(r.pod.Spec.Containers))
	var wg sync.WaitGroup
	for i, c := range r.pod.Spec.Containers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _ = r.runContainer(ctx, c, volumes, false)
		}()
	}
	wg.Wait()
	phase := apiv1.PodSucceeded
	for _, code := range codes {
		if code != 0 {
			phase = apiv1.PodFailed
		}
	}
	if r.wasEvicted() {
		return // evict wrote the Pod's end
	}
	r.finish(ctx, phase, "", "")
}

func (r *podRunner) wasEvicted() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.evicted
}

func (r *podRunner) isStopped() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopped || r.evicted
}

// runContainer runs c to its end and returns its exit code; its states go to the status.
func (r *podRunner) runContainer(ctx context.Context, c apiv1.Container, volumes map[string]string, init bool) (int, error) {
	if r.isStopped() {
		return 137, nil
	}
	argv := append(append([]string{}, c.Command...), c.Args...)
	if len(c.Command) == 0 {
		return r.exited(ctx, c, init, time.Now(), 128, "no command: images have no entrypoint on this kubelet"), nil
	}
	if argv[0] == "argoexec" {
		argv[0] = r.k.argoexec
	}
	ctrDir := filepath.Join(r.dir, "containers", c.Name)
	if err := os.MkdirAll(ctrDir, 0o755); err != nil {
		return r.exited(ctx, c, init, time.Now(), 128, err.Error()), err
	}
	termination := filepath.Join(ctrDir, "termination-log")
	if err := os.WriteFile(termination, nil, 0o666); err != nil {
		return r.exited(ctx, c, init, time.Now(), 128, err.Error()), err
	}
	args := []string{"container"}
	// An image has a /tmp of its own: each container gets one unless the Pod mounts one.
	ownTmp := true
	for _, m := range c.VolumeMounts {
		ownTmp = ownTmp && filepath.Clean(m.MountPath) != "/tmp"
	}
	if ownTmp {
		tmp := filepath.Join(ctrDir, "tmp")
		if err := os.MkdirAll(tmp, 0o777); err != nil {
			return r.exited(ctx, c, init, time.Now(), 128, err.Error()), err
		}
		args = append(args, "--mount", mountSpec{source: tmp, target: "/tmp"}.String())
	}
	for _, m := range c.VolumeMounts {
		source, ok := volumes[m.Name]
		if !ok {
			return r.exited(ctx, c, init, time.Now(), 128, "no volume "+m.Name), nil
		}
		if m.SubPath != "" {
			// A kubelet makes a missing subPath a directory; one that exists (the file an
			// init container wrote, such as an input artifact) is mounted as it is.
			source = filepath.Join(source, m.SubPath)
			if _, err := os.Stat(source); errors.Is(err, os.ErrNotExist) {
				if err := os.MkdirAll(source, 0o777); err != nil {
					return r.exited(ctx, c, init, time.Now(), 128, err.Error()), err
				}
			}
		}
		args = append(args, "--mount", mountSpec{source: source, target: m.MountPath, readOnly: m.ReadOnly}.String())
	}
	messagePath := c.TerminationMessagePath
	if messagePath == "" {
		messagePath = apiv1.TerminationMessagePathDefault
	}
	args = append(args, "--mount", mountSpec{source: termination, target: messagePath}.String())
	if c.WorkingDir != "" {
		args = append(args, "--workdir", c.WorkingDir)
	}
	args = append(append(args, "--"), argv...)
	env, err := r.env(ctx, c)
	if err != nil {
		return r.exited(ctx, c, init, time.Now(), 128, err.Error()), err
	}
	logFile, err := os.Create(filepath.Join(r.dir, c.Name+".log"))
	if err != nil {
		return r.exited(ctx, c, init, time.Now(), 128, err.Error()), err
	}
	defer logFile.Close()
	cmd := exec.Command(r.k.self, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWPID, Setpgid: true, Pdeathsig: syscall.SIGKILL,
	}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return r.exited(ctx, c, init, started, 128, err.Error()), err
	}
	r.mu.Lock()
	r.procs[c.Name] = cmd.Process
	r.mu.Unlock()
	// A container the kill annotation names dies as it starts, before it can do anything,
	// rather than whenever the Pod's next update reaches this stand-in.
	if r.pod.Annotations[annotationPrefix+"kill"] == c.Name {
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
	}
	r.setState(ctx, c.Name, init, apiv1.ContainerState{Running: &apiv1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}})
	_ = cmd.Wait()
	r.mu.Lock()
	delete(r.procs, c.Name)
	r.mu.Unlock()
	code := cmd.ProcessState.ExitCode()
	if status, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && status.Signaled() {
		code = 128 + int(status.Signal())
	}
	message, _ := os.ReadFile(termination)
	return r.exited(ctx, c, init, started, code, string(message)), nil
}

// exited records c's end and returns its exit code.
func (r *podRunner) exited(ctx context.Context, c apiv1.Container, init bool, started time.Time, code int, message string) int {
	reason := "Completed"
	switch {
	case r.pod.Annotations[annotationPrefix+"oom-at-exit"] == c.Name:
		code, reason = 137, "OOMKilled"
	case code != 0:
		reason = "Error"
	}
	r.setState(ctx, c.Name, init, apiv1.ContainerState{Terminated: &apiv1.ContainerStateTerminated{
		ExitCode: int32(code), Reason: reason, Message: message,
		StartedAt: metav1.NewTime(started), FinishedAt: metav1.Now(),
		ContainerID: "kubelet-stand-in://" + string(r.pod.UID) + "/" + c.Name,
	}})
	return code
}

func (r *podRunner) setState(ctx context.Context, name string, init bool, state apiv1.ContainerState) {
	r.update(ctx, func(s *apiv1.PodStatus) {
		statuses := s.ContainerStatuses
		if init {
			statuses = s.InitContainerStatuses
		}
		for i := range statuses {
			if statuses[i].Name == name {
				statuses[i].State = state
				statuses[i].Ready = state.Running != nil
				started := state.Running != nil || state.Terminated != nil
				statuses[i].Started = &started
				if state.Terminated != nil {
					statuses[i].ContainerID = state.Terminated.ContainerID
				}
			}
		}
	})
}

// finish writes the Pod's end: its phase, and every container not yet ended as never run.
func (r *podRunner) finish(ctx context.Context, phase apiv1.PodPhase, reason, message string) {
	r.update(ctx, func(s *apiv1.PodStatus) {
		s.Phase, s.Reason, s.Message = phase, reason, message
		for _, statuses := range [][]apiv1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses} {
			for i := range statuses {
				if statuses[i].State.Terminated == nil {
					statuses[i].Ready = false
					statuses[i].State = apiv1.ContainerState{Terminated: &apiv1.ContainerStateTerminated{
						ExitCode: 137, Reason: "ContainerStatusUnknown", FinishedAt: metav1.Now(),
						Message: "The container could not be located when the pod was terminated",
					}}
				}
			}
		}
	})
	r.logf("%s %s", phase, reason)
}

// update applies change to the Pod's latest status and writes it, retrying on conflict.
func (r *podRunner) update(ctx context.Context, change func(*apiv1.PodStatus)) {
	pods := r.k.client.CoreV1().Pods(r.pod.Namespace)
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		latest, err := pods.Get(ctx, r.pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if latest.UID != r.pod.UID {
			return nil
		}
		change(&latest.Status)
		_, err = pods.UpdateStatus(ctx, latest, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		r.logf("status: %v", err)
	}
}

// kill sends signal to every running container's PID 1, as a container runtime does; a
// SIGKILL to PID 1 ends every process of its PID namespace.
func (r *podRunner) kill(signal syscall.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.procs {
		_ = syscall.Kill(p.Pid, signal)
	}
}

func (r *podRunner) killContainer(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.procs[name]; ok {
		_ = syscall.Kill(p.Pid, syscall.SIGKILL)
	}
}

// stop ends the Pod's containers as a deletion does: SIGTERM, then SIGKILL after grace.
func (r *podRunner) stop(grace int64) {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
	r.kill(syscall.SIGTERM)
	deadline := time.Now().Add(time.Duration(grace) * time.Second)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		left := len(r.procs)
		r.mu.Unlock()
		if left == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.kill(syscall.SIGKILL)
}

// reject fails the Pod before it runs, as a kubelet's admission refuses a Pod that does
// not fit the node (kubelet.go rejectPod): phase Failed, the reason, and no container
// statuses.
func (r *podRunner) reject(ctx context.Context, reason string) {
	r.update(ctx, func(s *apiv1.PodStatus) {
		*s = apiv1.PodStatus{Phase: apiv1.PodFailed, Reason: reason, Message: "Pod was rejected: " + reason + " (the test's reject annotation)"}
	})
	r.logf("rejected: %s", reason)
}

// evict ends the Pod as a kubelet under node pressure does: its containers killed, the
// Pod Failed with reason Evicted (the Pod object stays).
func (r *podRunner) evict(ctx context.Context) {
	r.mu.Lock()
	if r.evicted {
		r.mu.Unlock()
		return
	}
	r.evicted = true
	r.mu.Unlock()
	r.kill(syscall.SIGKILL)
	r.finish(ctx, apiv1.PodFailed, "Evicted", "The node was low on resource: memory.")
}

func (r *podRunner) removeVolumes() {
	if err := os.RemoveAll(filepath.Join(r.dir, "volumes")); err != nil {
		r.logf("removing volumes: %v", err)
	}
}

// volumes makes each of the Pod's volumes and returns where each is on the host.
func (r *podRunner) volumes(ctx context.Context) (map[string]string, error) {
	paths := map[string]string{}
	for _, v := range r.pod.Spec.Volumes {
		dir := filepath.Join(r.dir, "volumes", v.Name)
		switch {
		case v.HostPath != nil:
			paths[v.Name] = v.HostPath.Path
			continue
		case v.EmptyDir != nil:
		case v.Projected != nil:
			for _, source := range v.Projected.Sources {
				if err := r.project(ctx, dir, source); err != nil {
					return nil, fmt.Errorf("volume %s: %w", v.Name, err)
				}
			}
		case v.ConfigMap != nil:
			if err := r.configMap(ctx, dir, v.ConfigMap.Name, v.ConfigMap.Items); err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
		case v.Secret != nil:
			secret, err := r.k.client.CoreV1().Secrets(r.pod.Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
			if err := writeKeys(dir, secret.Data, v.Secret.Items); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("volume %s: this kubelet has no such volume type", v.Name)
		}
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return nil, err
		}
		// emptyDirs are writable by any user a container runs as, as a kubelet's are.
		if v.EmptyDir != nil {
			if err := os.Chmod(dir, 0o777); err != nil {
				return nil, err
			}
		}
		paths[v.Name] = dir
	}
	return paths, nil
}

func (r *podRunner) project(ctx context.Context, dir string, source apiv1.VolumeProjection) error {
	switch {
	case source.ServiceAccountToken != nil:
		t := source.ServiceAccountToken
		request := &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{
			ExpirationSeconds: t.ExpirationSeconds,
			BoundObjectRef:    &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: r.pod.Name, UID: r.pod.UID},
		}}
		if t.Audience != "" {
			request.Spec.Audiences = []string{t.Audience}
		}
		account := r.pod.Spec.ServiceAccountName
		if account == "" {
			account = "default"
		}
		token, err := r.k.client.CoreV1().ServiceAccounts(r.pod.Namespace).CreateToken(ctx, account, request, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("token for %s: %w", account, err)
		}
		return writeFile(filepath.Join(dir, t.Path), []byte(token.Status.Token))
	case source.ConfigMap != nil:
		return r.configMap(ctx, dir, source.ConfigMap.Name, source.ConfigMap.Items)
	case source.DownwardAPI != nil:
		for _, item := range source.DownwardAPI.Items {
			if item.FieldRef == nil {
				return fmt.Errorf("downward API item %s: only fieldRef", item.Path)
			}
			value, err := r.field(item.FieldRef.FieldPath)
			if err != nil {
				return err
			}
			if err := writeFile(filepath.Join(dir, item.Path), []byte(value)); err != nil {
				return err
			}
		}
		return nil
	case source.Secret != nil:
		secret, err := r.k.client.CoreV1().Secrets(r.pod.Namespace).Get(ctx, source.Secret.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		return writeKeys(dir, secret.Data, source.Secret.Items)
	}
	return fmt.Errorf("this kubelet has no such projection")
}

func (r *podRunner) configMap(ctx context.Context, dir, name string, items []apiv1.KeyToPath) error {
	// Published by the controller manager's root-ca-cert-publisher, which does not run here.
	if name == "kube-root-ca.crt" {
		return writeKeys(dir, map[string][]byte{"ca.crt": r.k.ca}, items)
	}
	cm, err := r.k.client.CoreV1().ConfigMaps(r.pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	data := map[string][]byte{}
	for key, value := range cm.Data {
		data[key] = []byte(value)
	}
	return writeKeys(dir, data, items)
}

func writeKeys(dir string, data map[string][]byte, items []apiv1.KeyToPath) error {
	if len(items) == 0 {
		for key := range data {
			items = append(items, apiv1.KeyToPath{Key: key, Path: key})
		}
	}
	for _, item := range items {
		if err := writeFile(filepath.Join(dir, item.Path), data[item.Key]); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(path string, content []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, content, 0o644)
}

// env is the container's environment: its own variables resolved, as a kubelet does,
// and the API server's address as the `kubernetes` Service's variables (the apiserver
// annotation's HOST:PORT in its place: a way to the API server the test can cut).
func (r *podRunner) env(ctx context.Context, c apiv1.Container) ([]string, error) {
	host, port := r.k.host, r.k.port
	if address := r.pod.Annotations[annotationPrefix+"apiserver"]; address != "" {
		var err error
		if host, port, err = net.SplitHostPort(address); err != nil {
			return nil, fmt.Errorf("the apiserver annotation %q: %w", address, err)
		}
	}
	env := []string{
		"PATH=" + filepath.Dir(r.k.argoexec) + ":" + os.Getenv("PATH"),
		"HOME=/root",
		"HOSTNAME=" + r.pod.Name,
		"KUBERNETES_SERVICE_HOST=" + host,
		"KUBERNETES_SERVICE_PORT=" + port,
	}
	for _, e := range c.Env {
		value := e.Value
		if from := e.ValueFrom; from != nil {
			var err error
			switch {
			case from.FieldRef != nil:
				value, err = r.field(from.FieldRef.FieldPath)
			case from.SecretKeyRef != nil:
				var secret *apiv1.Secret
				secret, err = r.k.client.CoreV1().Secrets(r.pod.Namespace).Get(ctx, from.SecretKeyRef.Name, metav1.GetOptions{})
				if err == nil {
					value = string(secret.Data[from.SecretKeyRef.Key])
				}
			case from.ConfigMapKeyRef != nil:
				var cm *apiv1.ConfigMap
				cm, err = r.k.client.CoreV1().ConfigMaps(r.pod.Namespace).Get(ctx, from.ConfigMapKeyRef.Name, metav1.GetOptions{})
				if err == nil {
					value = cm.Data[from.ConfigMapKeyRef.Key]
				}
			default:
				err = fmt.Errorf("env %s: this kubelet has no such source", e.Name)
			}
			if err != nil {
				return nil, err
			}
		}
		env = append(env, e.Name+"="+value)
	}
	return env, nil
}

// field is the value of a downward-API field path.
func (r *podRunner) field(path string) (string, error) {
	p := r.pod
	switch path {
	case "metadata.name":
		return p.Name, nil
	case "metadata.namespace":
		return p.Namespace, nil
	case "metadata.uid":
		return string(p.UID), nil
	case "spec.serviceAccountName":
		return p.Spec.ServiceAccountName, nil
	case "spec.nodeName":
		return r.k.node, nil
	case "status.podIP", "status.hostIP":
		return "127.0.0.1", nil
	}
	for _, prefix := range []string{"metadata.annotations['", "metadata.labels['"} {
		if strings.HasPrefix(path, prefix) && strings.HasSuffix(path, "']") {
			key := strings.TrimSuffix(strings.TrimPrefix(path, prefix), "']")
			if strings.HasPrefix(prefix, "metadata.annotations") {
				return p.Annotations[key], nil
			}
			return p.Labels[key], nil
		}
	}
	return "", fmt.Errorf("field %s: not known to this kubelet", path)
}

func waiting(containers []apiv1.Container, reason string) []apiv1.ContainerStatus {
	statuses := make([]apiv1.ContainerStatus, len(containers))
	for i, c := range containers {
		statuses[i] = apiv1.ContainerStatus{
			Name: c.Name, Image: c.Image,
			State: apiv1.ContainerState{Waiting: &apiv1.ContainerStateWaiting{Reason: reason}},
		}
	}
	return statuses
}

func ptrNow() *metav1.Time {
	now := metav1.Now()
	return &now
}

type server struct{ host, port string }

func parseServer(raw string) (server, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return server{}, err
	}
	return server{host: u.Hostname(), port: u.Port()}, nil
}
