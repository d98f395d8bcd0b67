package main

// `up`: etcd and kube-apiserver started as children of this process on loopback, with
// TLS, a service-account issuer and its signing keys, OIDC discovery and the JWKS (served
// by the API server itself), the RBAC and Node authorizers, the TokenRequest API, and an
// admin kubeconfig. It prints two lines that harnesses and people read:
//
//	control plane: kube-apiserver v1.N.M, etcd vX.Y.Z, ready in S s
//	kubeconfig: PATH
//
// and stays until interrupted (or, with --stop-with-stdin, until its standard input
// closes, so that a test process that dies takes the control plane with it).
//
// No kubelet, scheduler or controller manager runs: Pods are stored and stay Pending,
// namespaces are never finalized, owner references are never collected. What the tests
// need of those is done by the tests themselves.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The issuer real clusters commonly use (kubeadm's default), and the one the tests' own
// tokens name.
const issuer = "https://kubernetes.default.svc.cluster.local"

type upFlags struct {
	dir           string
	port          int
	saKeys        string
	saSigningKey  string
	stopWithStdin bool
	apiserverArgs multiFlag
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, " ") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func up(args []string) int {
	var f upFlags
	set := flag.NewFlagSet("up", flag.ContinueOnError)
	set.StringVar(&f.dir, "dir", "", "keep etcd's data, the keys and the kubeconfig here, and reuse them on the next\nstart (default: a new temporary directory, removed at exit)")
	set.IntVar(&f.port, "port", 0, "the API server's HTTPS port on 127.0.0.1 (default: the one --dir used last, else a free one)")
	set.StringVar(&f.saKeys, "sa-keys", "1", "service-account keys the API server trusts, by name, comma-separated; each is made\nin --dir as sa-NAME.key if it is missing (to rotate: 1, then 1,2, then 2)")
	set.StringVar(&f.saSigningKey, "sa-signing-key", "", "the key of --sa-keys that signs new tokens (default: the last one)")
	set.BoolVar(&f.stopWithStdin, "stop-with-stdin", false, "stop when standard input closes (for test harnesses)")
	set.Var(&f.apiserverArgs, "apiserver-arg", "one more kube-apiserver flag, as --name=value; repeatable")
	set.Usage = func() {
		fmt.Fprintf(set.Output(), `usage: kube-control-plane up [flags]

Starts etcd and kube-apiserver (the versions this binary was built from) on 127.0.0.1,
prints
  control plane: kube-apiserver vX.Y.Z, etcd vX.Y.Z, ready in S s
  kubeconfig: PATH
and stays until interrupted. Use the kubeconfig with kubectl (KUBECONFIG=PATH).
There is no kubelet, scheduler or controller manager: Pods stay Pending.

Flags:
`)
		set.PrintDefaults()
	}
	if err := set.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if err := run(f); err != nil {
		fmt.Fprintf(os.Stderr, "kube-control-plane up: %v\n", err)
		return 1
	}
	return 0
}

func run(f upFlags) error {
	started := time.Now()
	if f.dir == "" {
		dir, err := os.MkdirTemp("", "kube-control-plane-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		f.dir = dir
	}
	dir, err := filepath.Abs(f.dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	p := pki{dir: dir}
	if err := p.ensure(); err != nil {
		return fmt.Errorf("making certificates in %s: %w", dir, err)
	}
	keyFlags, err := serviceAccountKeyFlags(p, f.saKeys, f.saSigningKey)
	if err != nil {
		return err
	}
	ports, err := loadPorts(dir, f.port)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if f.stopWithStdin {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			stop()
		}()
	}

	self, err := os.Executable()
	if err != nil {
		return err
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports.etcdClient)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports.etcdPeer)
	etcd, err := start(self, filepath.Join(dir, "etcd.log"), "etcd",
		"--name=default",
		"--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL,
		"--log-level=warn",
	)
	if err != nil {
		return err
	}
	defer etcd.stop()
	if err := waitFor(ctx, etcd, http.DefaultClient, etcdURL+"/health"); err != nil {
		return err
	}

	apiURL := fmt.Sprintf("https://127.0.0.1:%d", ports.apiserver)
	apiserverArgs := append([]string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports.apiserver),
		"--tls-cert-file=" + p.path("apiserver.crt"),
		"--tls-private-key-file=" + p.path("apiserver.key"),
		"--client-ca-file=" + p.path("ca.crt"),
		"--service-account-issuer=" + issuer,
		"--authorization-mode=Node,RBAC",
		"--service-cluster-ip-range=10.96.0.0/16",
		// Nothing listens behind the `kubernetes` Service here: keep it without endpoints
		// rather than have the reconciler write a loopback address, which is invalid.
		"--endpoint-reconciler-type=none",
		"--profiling=false",
	}, keyFlags...)
	apiserverArgs = append(apiserverArgs, f.apiserverArgs...)
	apiserver, err := start(self, filepath.Join(dir, "kube-apiserver.log"), "kube-apiserver", apiserverArgs...)
	if err != nil {
		return err
	}
	defer apiserver.stop()
	admin, err := adminClient(p)
	if err != nil {
		return err
	}
	if err := waitFor(ctx, apiserver, admin, apiURL+"/readyz"); err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "admin.kubeconfig")
	if err := p.writeKubeconfig(kubeconfig, apiURL); err != nil {
		return err
	}
	kubeVersion, etcdVersion := versions()
	fmt.Printf("control plane: kube-apiserver %s, etcd %s, ready in %.1f s\n",
		kubeVersion, etcdVersion, time.Since(started).Seconds())
	fmt.Printf("kubeconfig: %s\n", kubeconfig)

	select {
	case <-ctx.Done():
		return nil
	case <-etcd.exited:
		return fmt.Errorf("etcd exited: %v\n%s", etcd.err, etcd.logTail())
	case <-apiserver.exited:
		return fmt.Errorf("kube-apiserver exited: %v\n%s", apiserver.err, apiserver.logTail())
	}
}

// serviceAccountKeyFlags makes the named keys and returns the API server's flags for them.
func serviceAccountKeyFlags(p pki, names, signing string) ([]string, error) {
	var flags []string
	var last string
	for _, name := range strings.Split(names, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		path, err := p.serviceAccountKey(name)
		if err != nil {
			return nil, fmt.Errorf("service-account key %q: %w", name, err)
		}
		flags = append(flags, "--service-account-key-file="+path)
		last = name
	}
	if last == "" {
		return nil, errors.New("--sa-keys names no key")
	}
	if signing == "" {
		signing = last
	}
	if !strings.Contains(","+names+",", ","+signing+",") {
		return nil, fmt.Errorf("--sa-signing-key %q is not one of --sa-keys %q", signing, names)
	}
	path, err := p.serviceAccountKey(signing)
	if err != nil {
		return nil, err
	}
	return append(flags, "--service-account-signing-key-file="+path), nil
}

type portSet struct{ apiserver, etcdClient, etcdPeer int }

// loadPorts keeps the ports of a directory across restarts, so that a kubeconfig written
// before a restart still reaches the API server after it.
func loadPorts(dir string, apiserver int) (portSet, error) {
	path := filepath.Join(dir, "ports")
	var ports portSet
	if content, err := os.ReadFile(path); err == nil {
		if _, err := fmt.Sscan(string(content), &ports.apiserver, &ports.etcdClient, &ports.etcdPeer); err != nil {
			return ports, fmt.Errorf("%s: %w", path, err)
		}
	} else {
		for _, port := range []*int{&ports.apiserver, &ports.etcdClient, &ports.etcdPeer} {
			free, err := freePort()
			if err != nil {
				return ports, err
			}
			*port = free
		}
	}
	if apiserver != 0 {
		ports.apiserver = apiserver
	}
	content := fmt.Sprintf("%d %d %d\n", ports.apiserver, ports.etcdClient, ports.etcdPeer)
	return ports, os.WriteFile(path, []byte(content), 0o600)
}

// freePort picks a port below the kernel's ephemeral range: a port from that range (as
// listening on :0 gives) can be taken as the source port of any outgoing connection, such
// as etcd's own gateway dialling etcd, between the pick and the child's bind.
func freePort() (int, error) {
	low := 32768
	if content, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var first, last int
		if _, err := fmt.Sscan(string(content), &first, &last); err == nil && first > 12000 {
			low = first
		}
	}
	for range 1000 {
		port := 10000 + rand.IntN(low-10000)
		listener, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		listener.Close()
		return port, nil
	}
	return 0, fmt.Errorf("no free port in 10000-%d on 127.0.0.1", low-1)
}

type child struct {
	name   string
	log    string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// start runs this binary as one of the two programs, its output in log.
func start(self, log, name string, args ...string) (*child, error) {
	out, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, append([]string{name}, args...)...)
	cmd.Stdout, cmd.Stderr = out, out
	// Killed with us if we are killed: a test process's crash leaves nothing behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	c := &child{name: name, log: log, cmd: cmd, exited: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		out.Close()
		close(c.exited)
	}()
	return c, nil
}

// stop asks the program to stop as a kubelet would (SIGTERM), then kills it.
func (c *child) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

func (c *child) logTail() string {
	content, err := os.ReadFile(c.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(content), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return fmt.Sprintf("last lines of %s:\n%s", c.log, strings.Join(lines, "\n"))
}

// waitFor polls url until it answers 200, the child exits, or two minutes pass.
func waitFor(ctx context.Context, c *child, client *http.Client, url string) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		answer, err := client.Get(url)
		if err == nil {
			answer.Body.Close()
			if answer.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s was not ready at %s within 2 minutes\n%s", c.name, url, c.logTail())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.exited:
			return fmt.Errorf("%s exited: %v\n%s", c.name, c.err, c.logTail())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func adminClient(p pki) (*http.Client, error) {
	caPEM, err := os.ReadFile(p.path("ca.crt"))
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	cert, err := tls.LoadX509KeyPair(p.path("admin.crt"), p.path("admin.key"))
	if err != nil {
		return nil, err
	}
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: roots, Certificates: []tls.Certificate{cert},
		}},
	}, nil
}

// versions are the module versions this binary was built from (go.mod's pins).
func versions() (kube, etcd string) {
	kube, etcd = "unknown", "unknown"
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	for _, dep := range info.Deps {
		switch dep.Path {
		case "k8s.io/kubernetes":
			kube = dep.Version
		case "go.etcd.io/etcd/server/v3":
			etcd = dep.Version
		}
	}
	return
}
