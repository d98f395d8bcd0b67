package backend

import (
	"path/filepath"
	"strconv"
	"strings"

	apiv1 "k8s.io/api/core/v1"

	wfv1 "github.com/argoproj/argo-workflows/v4/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v4/workflow/common"
	"github.com/argoproj/argo-workflows/v4/workflow/taskresults"
)

const (
	// volumeName is the pod volume of the projected token (and CA).
	volumeName = "argo-results"
	// mountDir is where reporting containers find them: the Go package's default.
	mountDir = "/var/run/secrets/argo-results"
	// envPrefix names the variables the Go package reads in a reporting container.
	envPrefix = "ARGO_RESULTS_"
)

// PreparePod gives the containers the controller marked as reporting (taskresults'
// EnvVarBackend) a token bound to the pod, for the server's audience, and the server's
// address; no other container gets the token. The wait container, when the pod has one,
// completes the result; otherwise main does (a resource or data template on its own).
// The variables it sets are the backend's settings alone: any other ARGO_RESULTS_* in a
// reporting container (from the controller's executor.env, which Argo copies into every
// executor container, or a template's podSpecPatch) is dropped, so that no setting of the
// kind goes half through (a CA file that is not projected, say). Containers that do not
// report keep theirs: a step's own program may use argo-results.
func (s *source) PreparePod(pod *apiv1.Pod, _ *wfv1.Template) error {
	expiration := s.settings.expirationSeconds
	projected := &apiv1.ProjectedVolumeSource{Sources: []apiv1.VolumeProjection{{
		ServiceAccountToken: &apiv1.ServiceAccountTokenProjection{
			Audience: s.settings.audience, ExpirationSeconds: &expiration, Path: "token",
		},
	}}}
	env := []apiv1.EnvVar{
		{Name: "ARGO_RESULTS_URL", Value: s.settings.url},
		{Name: "ARGO_RESULTS_TOKEN_FILE", Value: filepath.Join(mountDir, "token")},
	}
	if s.settings.caConfigMap != "" {
		projected.Sources = append(projected.Sources, apiv1.VolumeProjection{ConfigMap: &apiv1.ConfigMapProjection{
			LocalObjectReference: apiv1.LocalObjectReference{Name: s.settings.caConfigMap},
			Items:                []apiv1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
		}})
		env = append(env, apiv1.EnvVar{Name: "ARGO_RESULTS_CA_FILE", Value: filepath.Join(mountDir, "ca.crt")})
	}
	if s.settings.retryFor != "" {
		env = append(env, apiv1.EnvVar{Name: "ARGO_RESULTS_RETRY_FOR", Value: s.settings.retryFor})
	}
	finalizer := common.MainContainerName
	for _, c := range pod.Spec.Containers {
		if c.Name == common.WaitContainerName {
			finalizer = common.WaitContainerName
		}
	}
	reporting := false
	for i, c := range pod.Spec.Containers {
		if !hasEnv(c, taskresults.EnvVarBackend) {
			continue
		}
		reporting = true
		own := c.Env[:0:0]
		for _, e := range c.Env {
			if !strings.HasPrefix(e.Name, envPrefix) {
				own = append(own, e)
			}
		}
		c.Env = append(own, env...)
		c.Env = append(c.Env, apiv1.EnvVar{Name: EnvFinalizes, Value: strconv.FormatBool(c.Name == finalizer)})
		c.VolumeMounts = append(c.VolumeMounts, apiv1.VolumeMount{Name: volumeName, MountPath: mountDir, ReadOnly: true})
		pod.Spec.Containers[i] = c
	}
	if reporting {
		pod.Spec.Volumes = append(pod.Spec.Volumes, apiv1.Volume{
			Name: volumeName, VolumeSource: apiv1.VolumeSource{Projected: projected},
		})
	}
	return nil
}

func hasEnv(c apiv1.Container, name string) bool {
	for _, e := range c.Env {
		if e.Name == name {
			return true
		}
	}
	return false
}
