package argoresults

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// defaultWatch is the server's long-poll wait when FeedOptions.Timeout is 0.
const defaultWatch = 30 * time.Second

func nodePath(node NodeRef) string {
	return "/api/v1/namespaces/" + url.PathEscape(node.Namespace) + "/workflows/" + url.PathEscape(node.Workflow) +
		"/nodes/" + url.PathEscape(node.NodeID)
}

func resultsPath(namespace, workflow string) string {
	return "/api/v1/namespaces/" + url.PathEscape(namespace) + "/workflows/" + url.PathEscape(workflow) + "/results"
}

func runsPath(namespace, cronWorkflow string) string {
	return "/api/v1/namespaces/" + url.PathEscape(namespace) + "/cronworkflows/" + url.PathEscape(cronWorkflow) + "/runs"
}

// Report sends a pod's report of its node's result (PUT .../result). created is true on the
// row's first write (201).
func (c *Client) Report(ctx context.Context, node NodeRef, report *ReportRequest) (result *NodeResult, created bool, err error) {
	body, err := jsonBody(report, report.Outputs)
	if err != nil {
		return nil, false, fmt.Errorf("report %s/%s %s: %w", node.Namespace, node.Workflow, node.NodeID, err)
	}
	result = new(NodeResult)
	status, err := c.call(ctx, request{method: http.MethodPut, path: nodePath(node) + "/result", body: body}, result)
	if err != nil {
		return nil, false, err
	}
	return result, status == http.StatusCreated, nil
}

// Expect registers the pod whose result the controller awaits (PUT .../expectation).
// created is true when the row is new (201).
func (c *Client) Expect(ctx context.Context, node NodeRef, expectation *ExpectationRequest) (result *NodeResult, created bool, err error) {
	body, err := jsonBody(expectation, nil)
	if err != nil {
		return nil, false, err
	}
	result = new(NodeResult)
	status, err := c.call(ctx, request{method: http.MethodPut, path: nodePath(node) + "/expectation", body: body}, result)
	if err != nil {
		return nil, false, err
	}
	return result, status == http.StatusCreated, nil
}

// Abandon gives up on a node's result. A result already completed is refused with
// [CodeAlreadyCompleted], and the refusal's [Problem.CurrentResult] is that result.
func (c *Client) Abandon(ctx context.Context, node NodeRef, abandon *AbandonRequest) (*NodeResult, error) {
	body, err := jsonBody(abandon, nil)
	if err != nil {
		return nil, err
	}
	var result NodeResult
	if _, err := c.call(ctx, request{method: http.MethodPost, path: nodePath(node) + "/result/abandon", body: body}, &result); err != nil {
		return nil, err
	}
	return &result, nil
}

// GetResult reads one result; workflowUID "" reads the newest incarnation.
func (c *Client) GetResult(ctx context.Context, node NodeRef, workflowUID string) (*NodeResult, error) {
	query := map[string]string{}
	if workflowUID != "" {
		query["workflowUid"] = workflowUID
	}
	var result NodeResult
	if _, err := c.call(ctx, request{method: http.MethodGet, path: nodePath(node) + "/result", query: query}, &result); err != nil {
		return nil, err
	}
	return &result, nil
}

// ListOptions narrows a listing of a workflow's results; zero values are left out.
type ListOptions struct {
	WorkflowUID string
	State       ResultState
	Limit       int
	Continue    string
}

// ListResults reads one page of a workflow's results; [Client.ListAllResults] reads them all.
func (c *Client) ListResults(ctx context.Context, namespace, workflow string, options ListOptions) (*ResultList, error) {
	query := map[string]string{}
	setIf(query, "workflowUid", options.WorkflowUID)
	setIf(query, "state", string(options.State))
	setIf(query, "continue", options.Continue)
	if options.Limit > 0 {
		query["limit"] = strconv.Itoa(options.Limit)
	}
	var list ResultList
	if _, err := c.call(ctx, request{method: http.MethodGet, path: resultsPath(namespace, workflow), query: query}, &list); err != nil {
		return nil, err
	}
	return &list, nil
}

// ListAllResults reads every page of a workflow's results and returns them with the
// lowest page revision: the feed after it has every change the pages may have missed.
func (c *Client) ListAllResults(ctx context.Context, namespace, workflow string, options ListOptions) ([]NodeResult, int64, error) {
	pages, err := c.listPages(ctx, namespace, workflow, options)
	if err != nil {
		return nil, 0, err
	}
	var items []NodeResult
	for _, page := range pages {
		items = append(items, page.Items...)
	}
	return items, lowestRevision(pages), nil
}

// listPages reads every page of a listing, following continue tokens.
func (c *Client) listPages(ctx context.Context, namespace, workflow string, options ListOptions) ([]ResultList, error) {
	var pages []ResultList
	for {
		page, err := c.ListResults(ctx, namespace, workflow, options)
		if err != nil {
			return nil, fmt.Errorf("list the results of %s/%s: %w", namespace, workflow, err)
		}
		pages = append(pages, *page)
		if page.Continue == "" {
			return pages, nil
		}
		options.Continue = page.Continue
	}
}

// DeleteResults deletes every result of one workflow incarnation (garbage collection) and
// returns how many went; each leaves a tombstone in the feed.
func (c *Client) DeleteResults(ctx context.Context, namespace, workflow, workflowUID string) (uint64, error) {
	var answer DeleteResponse
	query := map[string]string{"workflowUid": workflowUID}
	if _, err := c.call(ctx, request{method: http.MethodDelete, path: resultsPath(namespace, workflow), query: query}, &answer); err != nil {
		return 0, err
	}
	return answer.Deleted, nil
}

// FeedOptions asks for the changes after Since, read in Epoch (empty: not checked). With
// Watch, the server waits up to Timeout (whole seconds, at least 1; 0 means its default of
// 30 s) for a change.
type FeedOptions struct {
	Since     int64
	Epoch     string
	Namespace string
	Limit     int
	Watch     bool
	Timeout   time.Duration
}

// Feed reads the changes after options.Since in revision order. A since that is not in the
// store's retained history (pruned, ahead of the head, or read in another epoch: the
// database was restored or replaced) is refused with [CodeGone]; the problem's Revision
// and Epoch are where to resume after re-listing.
func (c *Client) Feed(ctx context.Context, options FeedOptions) (*FeedPage, error) {
	query := map[string]string{"since": strconv.FormatInt(options.Since, 10)}
	setIf(query, "epoch", options.Epoch)
	setIf(query, "namespace", options.Namespace)
	if options.Limit > 0 {
		query["limit"] = strconv.Itoa(options.Limit)
	}
	timeout := requestTimeout
	if options.Watch {
		query["watch"] = "true"
		wait := defaultWatch
		if options.Timeout > 0 {
			seconds := max(int64((options.Timeout+time.Second-1)/time.Second), 1)
			query["timeoutSeconds"] = strconv.FormatInt(seconds, 10)
			wait = time.Duration(seconds) * time.Second
		}
		timeout += wait
	}
	var page FeedPage
	if _, err := c.call(ctx, request{method: http.MethodGet, path: "/api/v1/results", query: query, timeout: timeout}, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// Claim claims one tick of a cron workflow under a lease, or takes over a claim whose
// lease expired unsettled (TakenOver). A tick held or settled is refused with
// [CodeAlreadyClaimed] and its claim in [Problem.CurrentClaim]. [RunTick] runs the whole
// protocol.
func (c *Client) Claim(ctx context.Context, namespace, cronWorkflow string, claim *ClaimRequest) (*Claim, error) {
	return c.postClaim(ctx, runsPath(namespace, cronWorkflow), claim)
}

// Settle records what the holder did with its tick; idempotent for the same outcome.
// [CodeLeaseLost]: the tick was taken over, and its new holder finishes it.
func (c *Client) Settle(ctx context.Context, namespace, cronWorkflow string, settle *SettleRequest) (*Claim, error) {
	return c.postClaim(ctx, runsPath(namespace, cronWorkflow)+"/settle", settle)
}

func (c *Client) postClaim(ctx context.Context, path string, value any) (*Claim, error) {
	body, err := jsonBody(value, nil)
	if err != nil {
		return nil, err
	}
	var claim Claim
	if _, err := c.call(ctx, request{method: http.MethodPost, path: path, body: body}, &claim); err != nil {
		return nil, err
	}
	return &claim, nil
}

// RunsOptions narrows a listing of a cron workflow's claims; zero values are left out.
type RunsOptions struct {
	CronWorkflowUID string
	Limit           int
	Continue        string
}

// Runs reads one page of a cron workflow's claims, newest first, with its newest settled
// tick.
func (c *Client) Runs(ctx context.Context, namespace, cronWorkflow string, options RunsOptions) (*ClaimList, error) {
	query := map[string]string{}
	setIf(query, "cronWorkflowUid", options.CronWorkflowUID)
	setIf(query, "continue", options.Continue)
	if options.Limit > 0 {
		query["limit"] = strconv.Itoa(options.Limit)
	}
	var list ClaimList
	if _, err := c.call(ctx, request{method: http.MethodGet, path: runsPath(namespace, cronWorkflow), query: query}, &list); err != nil {
		return nil, err
	}
	return &list, nil
}

// WhoAmI asks who the server thinks the caller is: the first thing to run when a call is
// refused.
func (c *Client) WhoAmI(ctx context.Context) (*WhoAmI, error) {
	var who WhoAmI
	if _, err := c.call(ctx, request{method: http.MethodGet, path: "/api/v1/whoami"}, &who); err != nil {
		return nil, err
	}
	return &who, nil
}

func setIf(query map[string]string, key, value string) {
	if value != "" {
		query[key] = value
	}
}

// lowestRevision of a listing's pages; the feed after it has every change they missed.
func lowestRevision(pages []ResultList) int64 {
	lowest := pages[0].Revision
	for _, page := range pages[1:] {
		lowest = min(lowest, page.Revision)
	}
	return lowest
}
