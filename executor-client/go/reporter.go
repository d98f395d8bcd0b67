package argoresults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// DefaultTokenFile is where the controller mounts the pod's projected token for
// argo-results.
const DefaultTokenFile = "/var/run/secrets/argo-results/token"

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
	// Namespace of the workflow (ARGO_NAMESPACE); empty: the token's
	// kubernetes.io.namespace.
	Namespace   string
	Workflow    string // ARGO_WORKFLOW_NAME
	WorkflowUID string // ARGO_WORKFLOW_UID
	NodeID      string // ARGO_NODE_ID
	PodName     string // ARGO_POD_NAME
	PodUID      string // ARGO_POD_UID
	InstanceID  string // ARGO_INSTANCE_ID, optional
	// Deadline ends the retries of transient failures (ARGO_DEADLINE); the zero time,
	// which Argo sets when the workflow has none, retries without end.
	Deadline time.Time
	// SequenceFile is the counter shared by the pod's reporting processes
	// (ARGO_RESULTS_SEQUENCE_FILE); empty: DefaultSequenceFile(ArgoSequenceDir) when that
	// directory exists, else the clock, which two processes may then share.
	SequenceFile string
	// Logger, when set, is told of retries and of progress the server did not store.
	Logger *slog.Logger
}

// ReporterConfigFromEnv reads a ReporterConfig from the variables Argo and the controller
// set in a reporting container; getenv is os.Getenv, or a lookup in argoexec's
// executor.Config. The URL, token file and CA file may be empty: URL "" means the pod does
// not report to argo-results.
func ReporterConfigFromEnv(getenv func(string) string) (ReporterConfig, error) {
	deadline, err := ParseDeadline(getenv("ARGO_DEADLINE"))
	if err != nil {
		return ReporterConfig{}, err
	}
	tokenFile := getenv("ARGO_RESULTS_TOKEN_FILE")
	if tokenFile == "" {
		tokenFile = DefaultTokenFile
	}
	return ReporterConfig{
		URL:          getenv("ARGO_RESULTS_URL"),
		TokenFile:    tokenFile,
		CAFile:       getenv("ARGO_RESULTS_CA_FILE"),
		Namespace:    getenv("ARGO_NAMESPACE"),
		Workflow:     getenv("ARGO_WORKFLOW_NAME"),
		WorkflowUID:  getenv("ARGO_WORKFLOW_UID"),
		NodeID:       getenv("ARGO_NODE_ID"),
		PodName:      getenv("ARGO_POD_NAME"),
		PodUID:       getenv("ARGO_POD_UID"),
		InstanceID:   getenv("ARGO_INSTANCE_ID"),
		Deadline:     deadline,
		SequenceFile: getenv("ARGO_RESULTS_SEQUENCE_FILE"),
	}, nil
}

// ParseDeadline reads ARGO_DEADLINE (RFC 3339). Empty, or Go's zero time
// 0001-01-01T00:00:00Z that Argo writes when the workflow has no deadline
// (workflowpod.go getDeadline), gives the zero time: no deadline.
func ParseDeadline(text string) (time.Time, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return time.Time{}, nil
	}
	deadline, err := time.Parse(time.RFC3339Nano, text)
	if err != nil {
		return time.Time{}, fmt.Errorf("ARGO_DEADLINE %q is not an RFC 3339 time: %w", text, err)
	}
	if deadline.IsZero() {
		return time.Time{}, nil
	}
	return deadline, nil
}

// Reporter replaces argoexec's WorkflowTaskResult calls (workflow/executor/taskresult.go
// and the executor's InitializeOutput, ReportOutputs, ReportOutputsLogs, FinalizeOutput)
// with reports of the pod's node result. Every report takes a new sequence and is retried
// with that same sequence on transient failures until the deadline, so a retry after a
// lost answer is an idempotent replay.
type Reporter struct {
	config    ReporterConfig
	namespace string
	client    *Client
}

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
	namespace := config.Namespace
	if namespace == "" {
		token, _ := TokenFile(config.TokenFile)()
		var ok bool
		if namespace, ok = TokenNamespace(token); !ok {
			return nil, fmt.Errorf("argo-results reporter: no namespace: set ARGO_NAMESPACE, or mount a service-account token at %s", config.TokenFile)
		}
	}
	client, err := New(Config{
		URL:    config.URL,
		Token:  TokenFile(config.TokenFile),
		CAFile: config.CAFile,
		Retry:  &RetryPolicy{Deadline: config.Deadline},
		OnRetry: func(err error, wait time.Duration) {
			if config.Logger != nil {
				config.Logger.Warn("argo-results: retrying", "error", err, "wait", wait)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("argo-results reporter: %w", err)
	}
	return &Reporter{config: config, namespace: namespace, client: client}, nil
}

// Start reports that the step started (argoexec's InitializeOutput): from then on the
// node reads reporting.
func (r *Reporter) Start(ctx context.Context) error {
	_, err := r.report(ctx, ReportRequest{})
	return r.progressOnly(err, "start")
}

// Progress reports the step's progress, N/M (argoexec's monitorProgress). Like argoexec's
// failed progress updates, one the server does not store because the result is already
// completed, or a newer report is, is only logged: it returns nil.
func (r *Reporter) Progress(ctx context.Context, progress string) error {
	_, err := r.report(ctx, ReportRequest{Progress: progress})
	return r.progressOnly(err, "progress "+progress)
}

// progressOnly: a report of no outputs refused because newer ones are stored changed
// nothing that matters.
func (r *Reporter) progressOnly(err error, what string) error {
	switch code := CodeOf(err); code {
	case CodeAlreadyCompleted, CodeStaleSequence:
		if r.config.Logger != nil {
			r.config.Logger.Info("argo-results: not stored", "report", what, "node", r.config.NodeID, "code", code)
		}
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
	return r.report(ctx, ReportRequest{Outputs: outputs})
}

// FinalReport is how the step ended. Outputs are merged like [Reporter.Outputs]; Phase is
// Succeeded, Failed or Error; ExitCode, when set, is inserted into Outputs as Argo's
// exitCode (a decimal string) so that a node whose pod vanished is still decided.
type FinalReport struct {
	Outputs  json.RawMessage
	Phase    string
	ExitCode *int
	Message  string
}

// Finalize completes the result (argoexec's ReportOutputs, ReportOutputsLogs and
// FinalizeOutput in one): the fields and the completion commit in one transaction, and the
// result is frozen from then on. Finalizing again with nothing new is a replay (200).
func (r *Reporter) Finalize(ctx context.Context, final FinalReport) (*NodeResult, error) {
	outputs := final.Outputs
	if final.ExitCode != nil {
		var err error
		if outputs, err = WithExitCode(outputs, *final.ExitCode); err != nil {
			return nil, fmt.Errorf("argo-results reporter: %w", err)
		}
	}
	return r.report(ctx, ReportRequest{Final: true, Outputs: outputs, Phase: final.Phase, Message: final.Message})
}

// report fills in the identity and a new sequence and sends body.
func (r *Reporter) report(ctx context.Context, body ReportRequest) (*NodeResult, error) {
	sequence, err := r.sequence()
	if err != nil {
		return nil, err
	}
	body.ProtocolVersion = ProtocolVersion
	body.WorkflowUID = r.config.WorkflowUID
	body.PodName = r.config.PodName
	body.PodUID = r.config.PodUID
	body.InstanceID = r.config.InstanceID
	body.Sequence = sequence
	result, _, err := r.client.Report(ctx, r.namespace, r.config.Workflow, r.config.NodeID, &body)
	return result, err
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
		if r.config.Logger != nil {
			r.config.Logger.Warn("argo-results: the sequence is Unix microseconds", "error", err)
		}
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
