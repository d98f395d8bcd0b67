package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	argoresults "github.com/argo-results/argo-results/executor-client/go"
	"github.com/argoproj/argo-workflows/v4/pkg/apis/workflow"
	wfv1 "github.com/argoproj/argo-workflows/v4/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v4/pkg/client/clientset/versioned"
	"github.com/argoproj/argo-workflows/v4/workflow/common"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
)

// reporter sends one pod's result the way its side does, on a connection of its own.
type reporter interface {
	report(ctx context.Context, p *pod) error
}

// statusQuo is argoexec v4 (workflow/executor/taskresult.go): InitializeOutput creates
// the WorkflowTaskResult with the workflow's label, the completed label "false" and the
// Workflow as owner; ReportOutputs merge-patches the outputs in; FinalizeOutput
// merge-patches the completed label to "true". Three requests through Argo's generated
// clientset, on one new TLS connection: a new process's client-go transport (a Dial
// function of its own keeps client-go from sharing a cached transport between pods).
type statusQuo struct {
	base      *rest.Config
	namespace string
	outputs   *wfv1.Outputs
	// The negative control of the bench's count check: FinalizeOutput's patch left out.
	skipLastWrite bool
}

func (s *statusQuo) report(ctx context.Context, p *pod) error {
	config := rest.CopyConfig(s.base)
	config.BearerToken = p.token
	config.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	// The process ends after its report, and its connection with it.
	var transport http.RoundTripper
	config.Wrap(func(rt http.RoundTripper) http.RoundTripper { transport = rt; return rt })
	defer func() { utilnet.CloseIdleConnectionsFor(transport) }()
	clientset, err := versioned.NewForConfig(config)
	if err != nil {
		return err
	}
	results := clientset.ArgoprojV1alpha1().WorkflowTaskResults(s.namespace)
	created := &wfv1.WorkflowTaskResult{
		TypeMeta: metav1.TypeMeta{APIVersion: workflow.APIVersion, Kind: workflow.WorkflowTaskResultKind},
		ObjectMeta: metav1.ObjectMeta{
			Name: p.nodeID,
			Labels: map[string]string{
				common.LabelKeyWorkflow:               p.workflow,
				common.LabelKeyReportOutputsCompleted: "false",
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: workflow.APIVersion, Kind: workflow.WorkflowKind,
				Name: p.workflow, UID: types.UID(p.workflowUID),
			}},
		},
	}
	if _, err := results.Create(ctx, created, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create: %w", err)
	}
	outputs, err := json.Marshal(&wfv1.WorkflowTaskResult{NodeResult: wfv1.NodeResult{Outputs: s.outputs}})
	if err != nil {
		return err
	}
	if _, err := results.Patch(ctx, p.nodeID, types.MergePatchType, outputs, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch the outputs: %w", err)
	}
	if s.skipLastWrite {
		return nil
	}
	completed, err := json.Marshal(&wfv1.WorkflowTaskResult{ObjectMeta: metav1.ObjectMeta{
		Labels: map[string]string{common.LabelKeyReportOutputsCompleted: "true"},
	}})
	if err != nil {
		return err
	}
	if _, err := results.Patch(ctx, p.nodeID, types.MergePatchType, completed, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch the completed label: %w", err)
	}
	return nil
}

// argoResults is argo-results' wait container: one final report with the outputs, through
// the Go package Argo imports, on a new TLS connection.
type argoResults struct {
	url       string
	roots     *x509.CertPool
	namespace string
	outputs   json.RawMessage
	// The negative control of the bench's count check: the report left out.
	skipLastWrite bool
}

func newArgoResults(url, caFile, namespace string, outputs json.RawMessage, skipLastWrite bool) (*argoResults, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	return &argoResults{url: url, roots: roots, namespace: namespace, outputs: outputs, skipLastWrite: skipLastWrite}, nil
}

func (a *argoResults) report(ctx context.Context, p *pod) error {
	if a.skipLastWrite {
		return nil
	}
	transport := &http.Transport{
		DialContext:     (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig: &tls.Config{RootCAs: a.roots, MinVersion: tls.VersionTLS12},
	}
	defer transport.CloseIdleConnections()
	client, err := argoresults.New(argoresults.Config{
		URL:        a.url,
		Token:      argoresults.StaticToken(p.token),
		HTTPClient: &http.Client{Transport: transport},
	})
	if err != nil {
		return err
	}
	node := argoresults.NodeRef{Namespace: a.namespace, Workflow: p.workflow, NodeID: p.nodeID}
	_, _, err = client.Report(ctx, node, &argoresults.ReportRequest{
		ProtocolVersion: argoresults.ProtocolVersion,
		WorkflowUID:     p.workflowUID,
		PodName:         p.name,
		PodUID:          p.uid,
		Final:           true,
		Phase:           "Succeeded",
		Outputs:         a.outputs,
	})
	return err
}

// status is the HTTP status an error carries, for the summary's count by status.
func status(err error) string {
	var apiStatus apierrors.APIStatus
	if errors.As(err, &apiStatus) {
		return fmt.Sprint(apiStatus.Status().Code)
	}
	var problem *argoresults.ProblemError
	if errors.As(err, &problem) {
		return fmt.Sprint(problem.Problem.Status)
	}
	return "transport"
}
