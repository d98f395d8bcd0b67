package argoresults

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The real server binary, on SQLite and, when ARGO_RESULTS_TEST_POSTGRES is set, on
// Postgres with a schema of its own per server, as the Rust harness (tests/src/server.rs)
// starts it. Servers use dev auth: they make a signing key in their data directory, which
// the tests mint tokens with (devtokens_test.go).

// startTimeout bounds a server's start.
const startTimeout = 30 * time.Second

// backend is a store a server runs on.
type backend string

const (
	sqlite   backend = "sqlite"
	postgres backend = "postgres"
)

// onBackends runs test as a subtest on each backend available.
func onBackends(t *testing.T, test func(t *testing.T, b backend)) {
	t.Helper()
	backends := []backend{sqlite}
	if os.Getenv("ARGO_RESULTS_TEST_POSTGRES") != "" {
		backends = append(backends, postgres)
	}
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) { test(t, b) })
	}
}

// serverBinary is ARGO_RESULTS_SERVER_BIN, else the workspace's debug build.
func serverBinary(t *testing.T) string {
	t.Helper()
	path := os.Getenv("ARGO_RESULTS_SERVER_BIN")
	if path == "" {
		path = filepath.Join("..", "..", "target", "debug", "argo-results-server")
	}
	path, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no server binary at %s (%v): run `cargo build -p argo-results-server` or set ARGO_RESULTS_SERVER_BIN", path, err)
	}
	return path
}

// testServer is a running server process.
type testServer struct {
	t       *testing.T
	backend backend
	url     string
	dir     string
	dbURL   string
	flags   []string
	cmd     *exec.Cmd
	log     string
}

var schemas atomic.Int64

// startServer starts a server on b with flags, on a free loopback port; it is stopped,
// and its schema dropped, when the test ends.
func startServer(t *testing.T, b backend, flags ...string) *testServer {
	t.Helper()
	return startServerAt(t, b, "127.0.0.1:0", flags...)
}

// startServerAt is startServer listening on address.
func startServerAt(t *testing.T, b backend, address string, flags ...string) *testServer {
	t.Helper()
	s := &testServer{t: t, backend: b, dir: t.TempDir(), flags: flags}
	switch b {
	case sqlite:
		s.dbURL = "sqlite://" + filepath.Join(s.dir, "results.db")
	case postgres:
		base := os.Getenv("ARGO_RESULTS_TEST_POSTGRES")
		schema := fmt.Sprintf("go_%d_%d", os.Getpid(), schemas.Add(1))
		psql(t, base, "CREATE SCHEMA "+schema)
		t.Cleanup(func() { psql(t, base, "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
		separator := "?"
		if strings.Contains(base, "?") {
			separator = "&"
		}
		s.dbURL = base + separator + "options=-csearch_path%3D" + schema
	}
	s.start(address)
	return s
}

// start runs the server listening on address and waits for its `listening on` line.
func (s *testServer) start(address string) {
	t := s.t
	t.Helper()
	args := []string{"--listen", address, "--database-url", s.dbURL, "--data-dir", s.dir}
	s.cmd = exec.Command(serverBinary(t), append(args, s.flags...)...)
	s.cmd.Env = append(os.Environ(), "RUST_LOG=warn")
	s.log = filepath.Join(s.dir, fmt.Sprintf("server-%d.log", time.Now().UnixNano()))
	logFile, err := os.Create(s.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	s.cmd.Stderr = logFile
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", s.cmd.Path, err)
	}
	cmd := s.cmd
	t.Cleanup(func() { stop(cmd) })
	found := make(chan string, 1)
	go func() {
		// Reads stdout to its end, so the server never blocks on it; ends when it exits.
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			if listening, ok := strings.CutPrefix(lines.Text(), "argo-results-server listening on "); ok {
				found <- listening
			}
		}
		close(found)
	}()
	select {
	case listening, ok := <-found:
		if !ok {
			t.Fatalf("the server exited before it listened; its log:\n%s", s.logText())
		}
		s.url = listening
	case <-time.After(startTimeout):
		t.Fatalf("the server did not listen within %v; its log:\n%s", startTimeout, s.logText())
	}
}

// stop kills a server (as a crash would) and reaps it.
func stop(cmd *exec.Cmd) {
	if cmd.ProcessState == nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

func (s *testServer) logText() string {
	text, _ := os.ReadFile(s.log)
	return string(text)
}

// psql runs one statement against url.
func psql(t *testing.T, url, statement string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "psql", url, "-v", "ON_ERROR_STOP=1", "-qc", statement).CombinedOutput()
	if err != nil {
		t.Fatalf("psql %q: %v\n%s", statement, err, out)
	}
}

// freeAddress is a loopback address nothing listens on (for a server started later).
func freeAddress(t *testing.T) string {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	address := listener.Addr().String()
	if err := listener.Close(); err != nil {
		t.Fatal(err)
	}
	return address
}

// host is the server's host:port.
func (s *testServer) host() string {
	parsed, err := url.Parse(s.url)
	if err != nil {
		s.t.Fatal(err)
	}
	return parsed.Host
}

// client is a client of the server sending token, without retries.
func (s *testServer) client(token string) *Client {
	s.t.Helper()
	client, err := New(Config{URL: s.url, Token: StaticToken(token)})
	if err != nil {
		s.t.Fatal(err)
	}
	return client
}

// admin is a client with the dev key's reader and controller token.
func (s *testServer) admin() *Client {
	return s.client(s.mint(adminClaims()))
}

// testContext is a context bounded for one test's calls.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
