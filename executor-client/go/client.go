package argoresults

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

const (
	// requestTimeout bounds an ordinary attempt.
	requestTimeout = 60 * time.Second
	connectTimeout = 10 * time.Second
	// maxAnswerBytes bounds what is read of an answer: a page is at most 8 MiB of JSON.
	maxAnswerBytes = 64 << 20
)

// Config configures a [Client].
type Config struct {
	// URL of the server, e.g. https://argo-results.argo.svc:8443.
	URL string
	// Token is read before each attempt; nil sends none.
	Token TokenSource
	// CAFile is a PEM CA (bundle) trusted besides the system's roots.
	CAFile string
	// Retry retries transient failures; nil makes one attempt.
	Retry *RetryPolicy
	// OnRetry, when set, is told of each transient failure: the attempt that failed
	// (1, 2, ...) and the wait before the next.
	OnRetry func(attempt int, err error, wait time.Duration)
	// HTTPClient, when set, sends every request as it is: its transport (Argo wraps its
	// clients' for tracing, metrics and logging) decides TLS, and CAFile is not used.
	HTTPClient *http.Client
	// UserAgent of every request; empty: "argo-results-go".
	UserAgent string
}

// Client calls one argo-results server. It is safe for concurrent use.
type Client struct {
	http      *http.Client
	base      string
	token     TokenSource
	retry     *RetryPolicy
	onRetry   func(int, error, time.Duration)
	userAgent string
}

// New builds a client; it fails only on a CA file it cannot use.
func New(config Config) (*Client, error) {
	httpClient := config.HTTPClient
	if httpClient == nil {
		transport := http.DefaultTransport.(*http.Transport).Clone()
		transport.DialContext = (&net.Dialer{Timeout: connectTimeout, KeepAlive: 30 * time.Second}).DialContext
		if config.CAFile != "" {
			roots, err := caPool(config.CAFile)
			if err != nil {
				return nil, err
			}
			transport.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		}
		httpClient = &http.Client{Transport: transport}
	}
	userAgent := config.UserAgent
	if userAgent == "" {
		userAgent = "argo-results-go"
	}
	return &Client{
		http:      httpClient,
		base:      strings.TrimRight(config.URL, "/"),
		token:     config.Token,
		retry:     config.Retry,
		onRetry:   config.OnRetry,
		userAgent: userAgent,
	}, nil
}

// caPool is the system's roots plus the certificates of file.
func caPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read the CA file: %w", err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("the CA file %s holds no PEM certificate", file)
	}
	return roots, nil
}

// request is one call, sent again as is on each attempt.
type request struct {
	method  string
	path    string
	query   map[string]string
	body    []byte
	timeout time.Duration
}

// call sends req, retrying as the policy allows, and decodes a 2xx into out. It returns
// the answer's status.
func (c *Client) call(ctx context.Context, req request, out any) (int, error) {
	if req.timeout == 0 {
		req.timeout = requestTimeout
	}
	steps := newBackoff()
	first := time.Now()
	for attempts := 1; ; attempts++ {
		status, retryAfter, err := c.attempt(ctx, req, out)
		if err == nil {
			return status, nil
		}
		if ctx.Err() != nil || c.retry == nil || !c.retry.retries(err) {
			return status, err
		}
		wait := retryAfter
		if wait == 0 {
			wait = steps.wait()
		}
		if deadline := c.retry.Deadline; !deadline.IsZero() && time.Now().Add(wait).After(deadline) {
			return status, &GaveUpError{Attempts: attempts, Last: err}
		}
		if bound := c.retry.For; bound > 0 && time.Since(first)+wait > bound {
			return status, &GaveUpError{Attempts: attempts, For: bound, Last: err}
		}
		if c.onRetry != nil {
			c.onRetry(attempts, err, wait)
		}
		if stop := sleep(ctx, wait); stop != nil {
			return status, fmt.Errorf("waiting to retry after %v: %w", err, stop)
		}
	}
}

// attempt sends req once: the token read afresh, the answer decoded into out or as a
// problem, with the server's Retry-After.
func (c *Client) attempt(ctx context.Context, req request, out any) (int, time.Duration, error) {
	timeout := req.timeout
	if c.retry != nil && !c.retry.Deadline.IsZero() {
		timeout = min(timeout, max(time.Until(c.retry.Deadline), time.Second))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	what := req.method + " " + req.path
	httpReq, err := http.NewRequestWithContext(ctx, req.method, c.base+req.path, bytes.NewReader(req.body))
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", what, err)
	}
	if len(req.query) > 0 {
		query := httpReq.URL.Query()
		for key, value := range req.query {
			query.Set(key, value)
		}
		httpReq.URL.RawQuery = query.Encode()
	}
	httpReq.Header.Set("Accept", "application/json")
	httpReq.Header.Set("User-Agent", c.userAgent)
	if req.body != nil {
		httpReq.Header.Set("Content-Type", "application/json")
	}
	if c.token != nil {
		token, err := c.token()
		if err != nil {
			return 0, 0, &attemptError{fmt.Errorf("%s: %w", what, err)}
		}
		if token != "" {
			httpReq.Header.Set("Authorization", "Bearer "+token)
		}
	}
	answer, err := c.http.Do(httpReq)
	if err != nil {
		return 0, 0, &attemptError{fmt.Errorf("%s: %w", what, err)}
	}
	defer answer.Body.Close()
	body, err := io.ReadAll(io.LimitReader(answer.Body, maxAnswerBytes))
	if err != nil {
		return 0, 0, &attemptError{fmt.Errorf("%s: read the answer: %w", what, err)}
	}
	status := answer.StatusCode
	if status >= 200 && status < 300 {
		if err := json.Unmarshal(body, out); err != nil {
			return status, 0, fmt.Errorf("%s: %w", what, &UnexpectedError{Status: status, Body: string(body)})
		}
		return status, 0, nil
	}
	retryAfter := parseRetryAfter(answer.Header.Get("Retry-After"))
	var problem Problem
	if json.Unmarshal(body, &problem) == nil && problem.Code != "" {
		return status, retryAfter, fmt.Errorf("%s: %w", what, &ProblemError{Problem: problem})
	}
	return status, retryAfter, fmt.Errorf("%s: %w", what, &UnexpectedError{Status: status, Body: string(body)})
}

// parseRetryAfter reads Retry-After in seconds, capped; 0 when absent or unreadable.
func parseRetryAfter(value string) time.Duration {
	seconds, err := strconv.ParseUint(strings.TrimSpace(value), 10, 32)
	if err != nil {
		return 0
	}
	return min(time.Duration(seconds)*time.Second, maxRetryAfter)
}

// jsonBody encodes a request body. Outputs are spliced in as given, because encoding/json
// would compact them and escape HTML characters, and the server stores them byte for byte.
func jsonBody(value any, outputs json.RawMessage) ([]byte, error) {
	var buffer bytes.Buffer
	encoder := json.NewEncoder(&buffer)
	encoder.SetEscapeHTML(false)
	if err := encoder.Encode(value); err != nil {
		return nil, fmt.Errorf("encode the request: %w", err)
	}
	body := bytes.TrimRight(buffer.Bytes(), "\n")
	if outputs == nil {
		return body, nil
	}
	if !json.Valid(outputs) {
		return nil, errors.New("the outputs are not valid JSON")
	}
	spliced := make([]byte, 0, len(body)+len(outputs)+12)
	spliced = append(spliced, body[:len(body)-1]...)
	spliced = append(spliced, `,"outputs":`...)
	spliced = append(spliced, outputs...)
	return append(spliced, '}'), nil
}
