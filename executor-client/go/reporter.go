package argoresults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// DefaultTokenFile is where the controller mounts the pod's projected token for
// argo-results.
const DefaultTokenFile = "/var/run/secrets/argo-results/token"

// ServiceAccountNamespaceFile holds the pod's namespace, as Kubernetes mounts it with a
// service-account token; argoexec finds its namespace there too (client-go's in-cluster
// configuration).
const ServiceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// ReporterConfig is a reporting container's identity and server. [ReporterConfigFromEnv]
// reads it from the environment Argo gives its containers.
type ReporterConfig struct {
	// URL of the server (ARGO_RESULTS_URL).
	URL string
	// TokenFile, the projected service-account token, is read before every attempt
	// (ARGO_RESULTS_TOKEN_FILE; default DefaultTokenFile).
	TokenFile string
	// CAFile is a PEM CA trusted besides the system's (ARGO_RESULTS_CA_FILE).
	CAFile string
	// Namespace of the workflow; empty: the token's kubernetes.io namespace, else
	// ServiceAccountNamespaceFile's. Argo sets no variable for it.
	Namespace   string
	Workflow    string // ARGO_WORKFLOW_NAME
	WorkflowUID string // ARGO_WORKFLOW_UID
	NodeID      string // ARGO_NODE_ID
	PodName     string // ARGO_POD_NAME
	PodUID      string // ARGO_POD_UID
	InstanceID  string // ARGO_INSTANCE_ID, optional
	// SequenceFile is the counter shared by the pod's reporting processes
	// (ARGO_RESULTS_SEQUENCE_FILE); empty: DefaultSequenceFile(ArgoSequenceDir) when that
	// directory exists, else the clock, which two processes may then share.
	SequenceFile string
	// RetryFor bounds how long one report is retried (ARGO_RESULTS_RETRY_FOR, a Go
	// duration; 0: DefaultRetryFor). Past it the report fails with a [GaveUpError], which
	// fails the container, and the controller decides the node without its result.
	RetryFor time.Duration
	// retryForEnv is ARGO_RESULTS_RETRY_FOR as read, checked by NewReporter.
	retryForEnv string
	// Logger is told of retries (the first at once, then every 20th attempt, as argoexec
	// logs its own), of every report given up with its cause, and of progress the server
	// did not store.
	Logger Logger
	// HTTPClient and UserAgent are those of [Config].
	HTTPClient *http.Client
	UserAgent  string
}

// ReporterConfigFromEnv reads a ReporterConfig from the variables Argo and the controller
// set in a reporting container; getenv is os.Getenv, or a lookup in argoexec's
// executor.Config. The URL, token file and CA file may be empty: URL "" means the pod does
// not report to argo-results.
func ReporterConfigFromEnv(getenv func(string) string) ReporterConfig {
	tokenFile := getenv("ARGO_RESULTS_TOKEN_FILE")
	if tokenFile == "" {
		tokenFile = DefaultTokenFile
	}
	return ReporterConfig{
		URL:          getenv("ARGO_RESULTS_URL"),
		TokenFile:    tokenFile,
		CAFile:       getenv("ARGO_RESULTS_CA_FILE"),
		Workflow:     getenv("ARGO_WORKFLOW_NAME"),
		WorkflowUID:  getenv("ARGO_WORKFLOW_UID"),
		NodeID:       getenv("ARGO_NODE_ID"),
		PodName:      getenv("ARGO_POD_NAME"),
		PodUID:       getenv("ARGO_POD_UID"),
		InstanceID:   getenv("ARGO_INSTANCE_ID"),
		SequenceFile: getenv("ARGO_RESULTS_SEQUENCE_FILE"),
		retryForEnv:  getenv("ARGO_RESULTS_RETRY_FOR"),
	}
}

// Reporter replaces argoexec's WorkflowTaskResult calls (workflow/executor/taskresult.go
// and the executor's InitializeOutput, ReportOutputs, ReportOutputsLogs, FinalizeOutput)
// with reports of the pod's node result. Every report takes a new sequence and is retried
// with that same sequence on transient failures, so a retry after a lost answer is an
// idempotent replay. A pod_mismatch is retried too: the node's result may still be bound
// to a pod of the same name that was deleted, until the controller binds this one (it
// creates a pod again when the first was deleted before the workflow recorded it, and
// binds the new one's UID right after, or on its next pass after a crash). Like
// argoexec's reporting, it pays no heed to ARGO_DEADLINE: the outputs of a step killed at
// its deadline are still reported. Retries go on for RetryFor, or until the context
// passed ends (argoexec reports on a context nothing cancels) or the pod is deleted.
type Reporter struct {
	config    ReporterConfig
	namespace string
	client    *Client
	// mu makes taking a sequence and recording outputsTaken one step (see Progress).
	mu sync.Mutex
	// outputsTaken: a report with outputs, or the final one, took its sequence.
	outputsTaken bool
}

// retryLogEvery is how often a retry is logged after the first, which is logged at once
// so that a server down or unreachable shows in the container's log when it starts to
// matter: argoexec logs every 20th attempt.
const retryLogEvery = 20

// DefaultRetryFor is how long a report is retried by default: long enough to ride out a
// rollout of the server or a failover of its database, short enough that a server down or
// misconfigured fails the finishing pods instead of keeping them running unseen.
const DefaultRetryFor = 5 * time.Minute

// NewReporter checks the identity and builds the reporter's client.
func NewReporter(config ReporterConfig) (*Reporter, error) {
	var missing []string
	for _, part := range []struct{ value, name string }{
		{config.URL, "ARGO_RESULTS_URL"}, {config.Workflow, "ARGO_WORKFLOW_NAME"},
		{config.WorkflowUID, "ARGO_WORKFLOW_UID"}, {config.NodeID, "ARGO_NODE_ID"},
		{config.PodName, "ARGO_POD_NAME"}, {config.PodUID, "ARGO_POD_UID"},
	} {
		if part.value == "" {
			missing = append(missing, part.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("argo-results reporter: missing %s", strings.Join(missing, ", "))
	}
	if config.TokenFile == "" {
		config.TokenFile = DefaultTokenFile
	}
	if config.retryForEnv != "" && config.RetryFor == 0 {
		retryFor, err := time.ParseDuration(config.retryForEnv)
		if err != nil || retryFor <= 0 {
			return nil, fmt.Errorf("argo-results reporter: ARGO_RESULTS_RETRY_FOR %q: not a positive duration such as 5m", config.retryForEnv)
		}
		config.RetryFor = retryFor
	}
	if config.RetryFor <= 0 {
		config.RetryFor = DefaultRetryFor
	}
	namespace, err := reporterNamespace(config)
	if err != nil {
		return nil, err
	}
	client, err := New(Config{
		URL:        config.URL,
		Token:      TokenFile(config.TokenFile),
		CAFile:     config.CAFile,
		Retry:      &RetryPolicy{For: config.RetryFor, Codes: []Code{CodePodMismatch}},
		HTTPClient: config.HTTPClient,
		UserAgent:  config.UserAgent,
		OnRetry: func(attempt int, err error, wait time.Duration) {
			if attempt == 1 || attempt%retryLogEvery == 0 {
				logTo(context.Background(), config.Logger, slog.LevelWarn, "argo-results: retrying a report",
					map[string]any{"node": config.NodeID, "attempt": attempt, "error": err.Error(), "wait": wait.String()})
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("argo-results reporter: %w", err)
	}
	return &Reporter{config: config, namespace: namespace, client: client}, nil
}

// reporterNamespace is the configured namespace, else the token's, else the service
// account's.
func reporterNamespace(config ReporterConfig) (string, error) {
	if config.Namespace != "" {
		return config.Namespace, nil
	}
	token, _ := TokenFile(config.TokenFile)()
	if namespace, ok := TokenNamespace(token); ok {
		return namespace, nil
	}
	if namespace, err := os.ReadFile(ServiceAccountNamespaceFile); err == nil && len(strings.TrimSpace(string(namespace))) > 0 {
		return strings.TrimSpace(string(namespace)), nil
	}
	return "", fmt.Errorf("argo-results reporter: no namespace: neither the token at %s nor %s names one", config.TokenFile, ServiceAccountNamespaceFile)
}

// Start reports that the step started (argoexec's InitializeOutput): from then on the
// node reads reporting.
func (r *Reporter) Start(ctx context.Context) error {
	_, err := r.report(ctx, ReportRequest{})
	return r.gaveUp(ctx, "start", r.progressOnly(err, "start"))
}

// Progress reports the step's progress, N/M (argoexec's monitorProgress). Like argoexec's
// failed progress updates, one the server does not store because the result is already
// completed, or a newer report is, is only logged: it returns nil.
//
// Once a report of this reporter with outputs, or its final one, took its sequence,
// progress is not sent at all, only logged: argoexec's monitorProgress goes on while wait
// reports (Wait starts it on a context that stays live through PostMain), and a progress
// stored under a later sequence while that report's answer is lost would have its retry,
// under its own sequence, refused as stale, and the step's outputs with it. The other
// process of a pod that reports, argoexec's main of a resource or data template, sends
// outputs and never progress.
func (r *Reporter) Progress(ctx context.Context, progress string) error {
	_, err := r.report(ctx, ReportRequest{Progress: progress})
	if errors.Is(err, errProgressAfterOutputs) {
		logTo(ctx, r.config.Logger, slog.LevelInfo, "argo-results: not sent",
			map[string]any{"report": "progress " + progress, "node": r.config.NodeID, "why": err.Error()})
		return nil
	}
	return r.gaveUp(ctx, "progress", r.progressOnly(err, "progress "+progress))
}

// errProgressAfterOutputs: a progress report after outputs or the final report (Progress).
var errProgressAfterOutputs = errors.New("the outputs or the final report were sent; progress would overtake them")

// progressOnly: a report of no outputs refused because newer ones are stored changed
// nothing that matters.
func (r *Reporter) progressOnly(err error, what string) error {
	switch code := CodeOf(err); code {
	case CodeAlreadyCompleted, CodeStaleSequence:
		logTo(context.Background(), r.config.Logger, slog.LevelInfo, "argo-results: not stored",
			map[string]any{"report": what, "node": r.config.NodeID, "code": string(code)})
		return nil
	}
	return err
}

// Outputs sends outputs now, as a report that does not complete the result (argoexec's
// ReportOutputs from the main container of a resource or data template whose logs the
// wait container archives). The server merges them onto the stored outputs as an RFC 7386
// patch, as argoexec's merge patch of its WorkflowTaskResult does: a key replaces that
// key (an array as a whole), null removes it, absent keys stay.
func (r *Reporter) Outputs(ctx context.Context, outputs json.RawMessage) (*NodeResult, error) {
	if outputs == nil {
		return nil, errors.New("argo-results reporter: no outputs to send")
	}
	result, err := r.report(ctx, ReportRequest{Outputs: outputs})
	return result, r.gaveUp(ctx, "outputs", err)
}

// FinalReport is how the step ended. Outputs are merged like [Reporter.Outputs]; Phase is
// Succeeded, Failed or Error. ExitCodes are the exit codes of the pod's main containers,
// by name, as the emissary wrote them (/var/run/argo/ctr/<name>/exitcode): the one of
// "main" is inserted into Outputs as Argo's exitCode (a decimal string, as the controller
// sets it), and when Phase is empty they give it (Succeeded when every one is 0, Failed
// otherwise), so that a node whose pod vanished is still decided; a container set without
// a "main" thus has a phase and no exitCode.
type FinalReport struct {
	Outputs   json.RawMessage
	Phase     string
	ExitCodes map[string]int
	Message   string
}

// Finalize completes the result (argoexec's ReportOutputs, ReportOutputsLogs and
// FinalizeOutput in one): the fields and the completion commit in one transaction, and the
// result is frozen from then on. Finalizing again with nothing new is a replay (200). An
// error means the result did not complete: the container must fail, as argoexec's does
// when ReportOutputs fails, so that the controller settles the node.
func (r *Reporter) Finalize(ctx context.Context, final FinalReport) (*NodeResult, error) {
	outputs := final.Outputs
	if code, ok := final.ExitCodes["main"]; ok {
		var err error
		if outputs, err = WithExitCode(outputs, code); err != nil {
			return nil, fmt.Errorf("argo-results reporter: %w", err)
		}
	}
	phase := final.Phase
	if phase == "" && len(final.ExitCodes) > 0 {
		phase = "Succeeded"
		for _, code := range final.ExitCodes {
			if code != 0 {
				phase = "Failed"
			}
		}
	}
	result, err := r.report(ctx, ReportRequest{Final: true, Outputs: outputs, Phase: phase, Message: final.Message})
	return result, r.gaveUp(ctx, "final", err)
}

// report fills in the identity and a new sequence and sends body.
func (r *Reporter) report(ctx context.Context, body ReportRequest) (*NodeResult, error) {
	sequence, err := r.take(body)
	if err != nil {
		return nil, err
	}
	body.ProtocolVersion = ProtocolVersion
	body.WorkflowUID = r.config.WorkflowUID
	body.PodName = r.config.PodName
	body.PodUID = r.config.PodUID
	body.InstanceID = r.config.InstanceID
	body.Sequence = sequence
	result, _, err := r.client.Report(ctx, NodeRef{Namespace: r.namespace, Workflow: r.config.Workflow, NodeID: r.config.NodeID}, &body)
	return result, err
}

// gaveUp logs a report that ended in err, with its cause, and returns err.
func (r *Reporter) gaveUp(ctx context.Context, what string, err error) error {
	if err != nil {
		logTo(ctx, r.config.Logger, slog.LevelError, "argo-results: gave up on a report",
			map[string]any{"report": what, "node": r.config.NodeID, "error": err.Error()})
	}
	return err
}

// take is body's sequence, or errProgressAfterOutputs for a progress report that would
// come after outputs or the final report (Progress).
func (r *Reporter) take(body ReportRequest) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	carriesOutputs := body.Final || body.Outputs != nil
	if !carriesOutputs && body.Progress != "" && r.outputsTaken {
		return 0, errProgressAfterOutputs
	}
	sequence, err := r.sequence()
	if err == nil && carriesOutputs {
		r.outputsTaken = true
	}
	return sequence, err
}

// sequence is the next value of the counter file, or of the clock without one.
func (r *Reporter) sequence() (int64, error) {
	if r.config.SequenceFile != "" {
		sequence, err := NextSequence(r.config.SequenceFile)
		if err != nil {
			return 0, fmt.Errorf("argo-results reporter: %w", err)
		}
		return sequence, nil
	}
	path, ok := DefaultSequenceFile(ArgoSequenceDir)
	if !ok {
		return ClockSequence(), nil
	}
	sequence, err := NextSequence(path)
	if err != nil {
		logTo(context.Background(), r.config.Logger, slog.LevelWarn, "argo-results: the sequence is Unix microseconds",
			map[string]any{"error": err.Error()})
		return ClockSequence(), nil
	}
	return sequence, nil
}

// WithExitCode inserts Argo's exitCode (Outputs.ExitCode, a decimal string) into outputs
// as their first member by editing the text, so that every other byte stays. Outputs that
// are not an object, or already have an exitCode, are refused.
func WithExitCode(outputs json.RawMessage, code int) (json.RawMessage, error) {
	member := fmt.Sprintf(`"exitCode":"%d"`, code)
	if outputs == nil {
		return json.RawMessage("{" + member + "}"), nil
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(outputs, &members); err != nil || members == nil {
		return nil, errors.New("outputs must be a JSON object to carry an exit code")
	}
	if _, ok := members["exitCode"]; ok {
		return nil, errors.New("the outputs already have an exitCode")
	}
	open := strings.IndexByte(string(outputs), '{') + 1
	separator := ""
	if len(members) > 0 {
		separator = ","
	}
	edited := make([]byte, 0, len(outputs)+len(member)+1)
	edited = append(edited, outputs[:open]...)
	edited = append(edited, member+separator...)
	return append(edited, outputs[open:]...), nil
}
