// Command lagproxy stands between one client and a server and delays or fails what the
// tests say, as a loaded API server, etcd or argo-results server would:
//
//   - --resource R: the events of the client's watches on resource R are each held for
//     --delay, as an informer lags behind a loaded API server or etcd (the seed's fault,
//     where Argo's controller sees a WorkflowTaskResult later than the Pod that wrote it);
//   - --path P: every answer to a request for path P is held for --delay (argo-results'
//     change feed, /api/v1/results, behind by as much);
//   - --fail S: requests whose path ends with S are answered --fail-status (a problem+json
//     body, as the server's own 503) without reaching the server, for --fail-for from the
//     first of them (a rollout of the server); with --fail-method M, only requests of
//     method M (a DELETE of a collection, whose path its list and watch share);
//   - --outage D: on SIGUSR1 every open connection is cut and every new one reset, for D
//     from the signal (the server down, as its clients see it: transport errors), then it
//     serves again on the same address, which it keeps listening on (no other process can
//     take the port meanwhile). It logs `outage: ...` when the outage starts and ends.
//
// Everything else passes through unchanged, at once.
//
//	lagproxy --upstream https://127.0.0.1:PORT --ca ca.crt --cert c --key k --resource workflowtaskresults --delay 10s
//	lagproxy --upstream http://127.0.0.1:PORT --fail /result/abandon --fail-for 15s
//
// With --cert and --key it serves TLS (the API server's own certificate: client-go sends
// no token over plain HTTP), else plain HTTP; it forwards the client's own token and prints
// `lagproxy: URL`.
package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	upstream := flag.String("upstream", "", "the server's URL")
	caFile := flag.String("ca", "", "the server's CA certificate (https)")
	resource := flag.String("resource", "", "the resource whose watch events are delayed")
	path := flag.String("path", "", "the path whose answers are delayed")
	delay := flag.Duration("delay", 10*time.Second, "how long each watch event or answer is held")
	fail := flag.String("fail", "", "the path suffix whose requests are failed")
	failFor := flag.Duration("fail-for", 15*time.Second, "how long they fail, from the first")
	failStatus := flag.Int("fail-status", http.StatusServiceUnavailable, "the status they get")
	failMethod := flag.String("fail-method", "", "the method of the requests failed (default: any)")
	listen := flag.String("listen", "127.0.0.1:0", "where to listen")
	cert := flag.String("cert", "", "the certificate to serve (the API server's)")
	key := flag.String("key", "", "its key")
	outage := flag.Duration("outage", 0, "how long the server seems down after SIGUSR1 (0: never)")
	flag.Parse()
	target, err := url.Parse(*upstream)
	if err != nil || target.Host == "" || (*cert == "") != (*key == "") {
		flag.Usage()
		os.Exit(2)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	if *caFile != "" {
		ca, err := os.ReadFile(*caFile)
		if err != nil {
			log.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(ca)
		proxy.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
	}
	// Watch events go to the client as they come (or as they are released).
	proxy.FlushInterval = -1
	proxy.ModifyResponse = func(answer *http.Response) error {
		request := answer.Request
		switch {
		case *resource != "" && request.URL.Query().Get("watch") == "true" && strings.Contains(request.URL.Path, "/"+*resource):
			answer.Body = delayed(answer.Body, *delay)
		case *path != "" && request.URL.Path == *path:
			time.Sleep(*delay)
		}
		return nil
	}
	handler := http.Handler(proxy)
	if *fail != "" {
		handler = &failing{next: proxy, suffix: *fail, method: *failMethod, period: *failFor, status: *failStatus}
	}
	listener, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	if *outage > 0 {
		listener = newOutageListener(listener, *outage)
	}
	if *cert == "" {
		fmt.Printf("lagproxy: http://%s\n", listener.Addr())
		log.Fatal(http.Serve(listener, handler))
	}
	fmt.Printf("lagproxy: https://%s\n", listener.Addr())
	log.Fatal(http.ServeTLS(listener, handler, *cert, *key))
}

// failing answers requests whose path ends with suffix (and of method, if set) with status
// for period from the first of them, and passes everything else on.
type failing struct {
	next   http.Handler
	suffix string
	method string
	period time.Duration
	status int

	mu    sync.Mutex
	first time.Time
}

func (f *failing) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, f.suffix) && (f.method == "" || r.Method == f.method) {
		f.mu.Lock()
		if f.first.IsZero() {
			f.first = time.Now()
		}
		failed := time.Since(f.first) < f.period
		f.mu.Unlock()
		if failed {
			log.Printf("failed %s %s with %d", r.Method, r.URL.Path, f.status)
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(f.status)
			fmt.Fprintf(w, `{"type":"about:blank","title":"%s","status":%d,"code":"unavailable","detail":"lagproxy --fail"}`,
				http.StatusText(f.status), f.status)
			return
		}
	}
	f.next.ServeHTTP(w, r)
}

// outageListener cuts and refuses connections for a while after each SIGUSR1.
type outageListener struct {
	net.Listener
	period time.Duration

	mu    sync.Mutex
	until time.Time
	open  map[net.Conn]bool
}

func newOutageListener(inner net.Listener, period time.Duration) *outageListener {
	l := &outageListener{Listener: inner, period: period, open: map[net.Conn]bool{}}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGUSR1)
	go func() {
		for range signals {
			l.start()
		}
	}()
	return l
}

// start begins an outage: every open connection is reset.
func (l *outageListener) start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.until = time.Now().Add(l.period)
	for conn := range l.open {
		reset(conn)
	}
	log.Printf("outage: connections cut and refused for %s", l.period)
	time.AfterFunc(l.period, func() { log.Printf("outage: over, serving again") })
}

func (l *outageListener) Accept() (net.Conn, error) {
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		down := time.Now().Before(l.until)
		if !down {
			l.open[conn] = true
		}
		l.mu.Unlock()
		if down {
			reset(conn)
			continue
		}
		return &trackedConn{Conn: conn, listener: l}, nil
	}
}

// reset closes conn with an RST, as a server that is gone answers.
func reset(conn net.Conn) {
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = conn.Close()
}

// trackedConn leaves its listener's open set when closed.
type trackedConn struct {
	net.Conn
	listener *outageListener
}

func (c *trackedConn) Close() error {
	c.listener.mu.Lock()
	delete(c.listener.open, c.Conn)
	c.listener.mu.Unlock()
	return c.Conn.Close()
}

type event struct {
	line []byte
	at   time.Time
}

// delayed releases each line (one watch event in JSON) of body `delay` after it arrived,
// in order.
func delayed(body io.ReadCloser, delay time.Duration) io.ReadCloser {
	reader, writer := io.Pipe()
	events := make(chan event, 100_000)
	go func() {
		defer close(events)
		lines := bufio.NewReader(body)
		for {
			line, err := lines.ReadBytes('\n')
			if len(line) > 0 {
				events <- event{line: line, at: time.Now()}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		defer body.Close()
		for e := range events {
			time.Sleep(time.Until(e.at.Add(delay)))
			if _, err := writer.Write(e.line); err != nil {
				return
			}
		}
		writer.Close()
	}()
	return reader
}
