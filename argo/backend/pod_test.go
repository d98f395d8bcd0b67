package backend

import (
	"testing"

	apiv1 "k8s.io/api/core/v1"

	"github.com/argoproj/argo-workflows/v4/workflow/common"
	"github.com/argoproj/argo-workflows/v4/workflow/taskresults"
)

func marked(name string) apiv1.Container {
	return apiv1.Container{Name: name, Env: []apiv1.EnvVar{{Name: taskresults.EnvVarBackend, Value: Name}}}
}

func env(c apiv1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

func testSource(t *testing.T, raw map[string]string) *source {
	s, err := parseSettings(raw)
	if err != nil {
		t.Fatal(err)
	}
	return &source{settings: s}
}

// Only the containers the controller marked get the token; the wait container finalizes.
func TestPreparePodWithWait(t *testing.T) {
	pod := &apiv1.Pod{Spec: apiv1.PodSpec{
		InitContainers: []apiv1.Container{{Name: common.InitContainerName}},
		Containers:     []apiv1.Container{marked(common.WaitContainerName), {Name: common.MainContainerName}, {Name: "sidecar"}},
	}}
	if err := testSource(t, map[string]string{"url": "https://server:8443"}).PreparePod(pod, nil); err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.Volumes) != 1 || pod.Spec.Volumes[0].Projected == nil {
		t.Fatalf("volumes: %+v", pod.Spec.Volumes)
	}
	token := pod.Spec.Volumes[0].Projected.Sources[0].ServiceAccountToken
	if token.Audience != "argo-results" || *token.ExpirationSeconds != 600 || token.Path != "token" {
		t.Fatalf("token: %+v", token)
	}
	wait := pod.Spec.Containers[0]
	if v, _ := env(wait, EnvFinalizes); v != "true" {
		t.Fatalf("wait does not finalize: %+v", wait.Env)
	}
	if v, _ := env(wait, "ARGO_RESULTS_URL"); v != "https://server:8443" || len(wait.VolumeMounts) != 1 || !wait.VolumeMounts[0].ReadOnly {
		t.Fatalf("wait: %+v", wait)
	}
	if _, ok := env(wait, "ARGO_RESULTS_CA_FILE"); ok {
		t.Fatal("a CA file without caConfigMap")
	}
	if _, ok := env(wait, "ARGO_RESULTS_RETRY_FOR"); ok {
		t.Fatal("a retry bound without retryFor: the Go package's default is the one")
	}
	for _, c := range append(pod.Spec.Containers[1:], pod.Spec.InitContainers...) {
		if len(c.Env) != 0 || len(c.VolumeMounts) != 0 {
			t.Fatalf("container %s got the token: %+v", c.Name, c)
		}
	}
}

// A resource or data template's main container alone finalizes; with a wait beside it
// (logs archived) both report and wait finalizes.
func TestPreparePodMainFinalizes(t *testing.T) {
	alone := &apiv1.Pod{Spec: apiv1.PodSpec{Containers: []apiv1.Container{marked(common.MainContainerName)}}}
	beside := &apiv1.Pod{Spec: apiv1.PodSpec{Containers: []apiv1.Container{marked(common.WaitContainerName), marked(common.MainContainerName)}}}
	s := testSource(t, map[string]string{"url": "u", "caConfigMap": "argo-results-ca", "retryFor": "90s"})
	for _, pod := range []*apiv1.Pod{alone, beside} {
		if err := s.PreparePod(pod, nil); err != nil {
			t.Fatal(err)
		}
		if len(pod.Spec.Volumes) != 1 || len(pod.Spec.Volumes[0].Projected.Sources) != 2 {
			t.Fatalf("volumes: %+v", pod.Spec.Volumes)
		}
	}
	if v, _ := env(alone.Spec.Containers[0], EnvFinalizes); v != "true" {
		t.Fatal("main alone does not finalize")
	}
	if v, _ := env(beside.Spec.Containers[1], EnvFinalizes); v != "false" {
		t.Fatal("main beside wait finalizes")
	}
	if v, _ := env(alone.Spec.Containers[0], "ARGO_RESULTS_CA_FILE"); v != "/var/run/secrets/argo-results/ca.crt" {
		t.Fatalf("CA file: %q", v)
	}
	if v, _ := env(beside.Spec.Containers[1], "ARGO_RESULTS_RETRY_FOR"); v != "90s" {
		t.Fatalf("retry bound: %q", v)
	}
}

// A reporting container's ARGO_RESULTS_* are the backend's settings alone: those the
// controller's executor.env put in every executor container are dropped there, and a
// container that does not report keeps its own.
func TestPreparePodDropsOtherSettings(t *testing.T) {
	fromExecutorEnv := []apiv1.EnvVar{
		{Name: "ARGO_RESULTS_URL", Value: "https://elsewhere"},
		{Name: "ARGO_RESULTS_CA_FILE", Value: "/not/projected.crt"},
		{Name: "ARGO_RESULTS_FINALIZES", Value: "true"},
		{Name: "HTTPS_PROXY", Value: "http://proxy:3128"},
	}
	wait := marked(common.WaitContainerName)
	wait.Env = append(append([]apiv1.EnvVar{}, fromExecutorEnv...), wait.Env...)
	mainEnv := []apiv1.EnvVar{{Name: "ARGO_RESULTS_URL", Value: "https://the-steps-own"}}
	pod := &apiv1.Pod{Spec: apiv1.PodSpec{Containers: []apiv1.Container{wait, {Name: common.MainContainerName, Env: mainEnv}}}}
	if err := testSource(t, map[string]string{"url": "https://server:8443"}).PreparePod(pod, nil); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, e := range pod.Spec.Containers[0].Env {
		seen[e.Name]++
	}
	if seen["ARGO_RESULTS_URL"] != 1 || seen["ARGO_RESULTS_FINALIZES"] != 1 || seen["ARGO_RESULTS_CA_FILE"] != 0 {
		t.Fatalf("wait's variables: %+v", pod.Spec.Containers[0].Env)
	}
	if v, _ := env(pod.Spec.Containers[0], "ARGO_RESULTS_URL"); v != "https://server:8443" {
		t.Fatalf("wait reports to %q", v)
	}
	if v, _ := env(pod.Spec.Containers[0], "HTTPS_PROXY"); v != "http://proxy:3128" {
		t.Fatal("a variable not of the backend dropped")
	}
	if v, _ := env(pod.Spec.Containers[1], "ARGO_RESULTS_URL"); v != "https://the-steps-own" {
		t.Fatalf("main's own variable changed: %q", v)
	}
}

// A pod none of whose containers report gets nothing.
func TestPreparePodNoneReports(t *testing.T) {
	pod := &apiv1.Pod{Spec: apiv1.PodSpec{Containers: []apiv1.Container{{Name: common.MainContainerName}}}}
	if err := testSource(t, map[string]string{"url": "u"}).PreparePod(pod, nil); err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.Volumes) != 0 || len(pod.Spec.Containers[0].Env) != 0 {
		t.Fatalf("pod changed: %+v", pod.Spec)
	}
}
