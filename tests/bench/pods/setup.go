package main

import (
	"context"
	"fmt"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The audience of argo-results' tokens (the server's --audience default, and the projected
// token deploy/argo/executor mounts).
const argoResultsAudience = "argo-results"

// cluster is the API server as its admin reaches it, and as a pod does: its address and
// CA, with no credentials but the pod's token.
type cluster struct {
	admin *kubernetes.Clientset
	// anonymous: the address and the CA, nothing else.
	anonymous *rest.Config
}

func connect(kubeconfig string) (*cluster, error) {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig %s: %w", kubeconfig, err)
	}
	config.QPS, config.Burst = 1000, 1000
	admin, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	anonymous := rest.AnonymousClientConfig(config)
	return &cluster{admin: admin, anonymous: anonymous}, nil
}

// pod is one simulated Argo pod: its node, its Pod object and its bound token.
type pod struct {
	workflow, workflowUID, nodeID string
	name, uid                     string
	token                         string
}

// podsPerWorkflow: each workflow has this many nodes, one pod each.
const podsPerWorkflow = 1000

// prepare makes the namespace, its default ServiceAccount with Argo's executor Role (the
// status quo's grant: create and patch workflowtaskresults), and count Pods with a token
// each for audience ("" is the API server's own), 16 at a time.
func (c *cluster) prepare(ctx context.Context, namespace, runID string, count int, audience string) ([]pod, error) {
	if err := c.namespace(ctx, namespace); err != nil {
		return nil, err
	}
	pods := make([]pod, count)
	work := make(chan int)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := c.makePod(ctx, namespace, runID, i, audience, &pods[i]); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var err error
feed:
	for i := range count {
		select {
		case work <- i:
		case err = <-errs:
			break feed
		}
	}
	close(work)
	wg.Wait()
	if err == nil && len(errs) > 0 {
		err = <-errs
	}
	return pods, err
}

func (c *cluster) makePod(ctx context.Context, namespace, runID string, i int, audience string, p *pod) error {
	workflow := fmt.Sprintf("%s-%05d", runID, i/podsPerWorkflow)
	*p = pod{
		workflow:    workflow,
		workflowUID: workflow + "-uid",
		nodeID:      fmt.Sprintf("%s-%d", workflow, 1000000000+i),
		name:        fmt.Sprintf("%s-main-%d", workflow, 1000000000+i),
	}
	created, err := c.admin.CoreV1().Pods(namespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Labels: map[string]string{"workflows.argoproj.io/workflow": workflow}},
		Spec: corev1.PodSpec{
			ServiceAccountName: "default",
			Containers:         []corev1.Container{{Name: "main", Image: "argoproj/argosay:v2"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create Pod %s: %w", p.name, err)
	}
	p.uid = string(created.UID)
	request := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr(int64(3600)),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.name, UID: created.UID},
	}}
	if audience != "" {
		request.Spec.Audiences = []string{audience}
	}
	token, err := c.admin.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, "default", request, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("a token for Pod %s: %w", p.name, err)
	}
	p.token = token.Status.Token
	return nil
}

// namespace makes the namespace, its default ServiceAccount (no controller manager makes
// it here) and Argo's executor grant, each unless it exists.
func (c *cluster) namespace(ctx context.Context, namespace string) error {
	objects := []func() error{
		func() error {
			_, err := c.admin.CoreV1().Namespaces().Create(ctx,
				&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.admin.CoreV1().ServiceAccounts(namespace).Create(ctx,
				&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
			return err
		},
		// Argo's executor Role (manifests/quick-start/base/executor/emissary/executor-role.yaml).
		func() error {
			_, err := c.admin.RbacV1().Roles(namespace).Create(ctx, &rbacv1.Role{
				ObjectMeta: metav1.ObjectMeta{Name: "executor"},
				Rules: []rbacv1.PolicyRule{{
					APIGroups: []string{"argoproj.io"}, Resources: []string{"workflowtaskresults"},
					Verbs: []string{"create", "patch"},
				}},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.admin.RbacV1().RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "executor-default"},
				RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "executor"},
				Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "default", Namespace: namespace}},
			}, metav1.CreateOptions{})
			return err
		},
	}
	for _, create := range objects {
		if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
