// Command lagproxy stands between one client and the tests' kube-apiserver and delays
// the events of its watches on one resource, as an informer lags behind a loaded API
// server or etcd: the seed's fault, where Argo's controller sees a WorkflowTaskResult
// later than the Pod that wrote it. Everything else passes through unchanged, at once.
//
//	lagproxy --upstream https://127.0.0.1:PORT --ca ca.crt --resource workflowtaskresults --delay 10s
//
// It listens on loopback with the API server's own certificate (--cert, --key: client-go
// sends no token over plain HTTP), forwards the client's own token, and prints
// `lagproxy: https://127.0.0.1:PORT`.
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
	"strings"
	"time"
)

func main() {
	upstream := flag.String("upstream", "", "the API server's URL")
	caFile := flag.String("ca", "", "the API server's CA certificate")
	resource := flag.String("resource", "workflowtaskresults", "the resource whose watch events are delayed")
	delay := flag.Duration("delay", 10*time.Second, "how long each of its watch events is held")
	listen := flag.String("listen", "127.0.0.1:0", "where to listen")
	cert := flag.String("cert", "", "the certificate to serve (the API server's)")
	key := flag.String("key", "", "its key")
	flag.Parse()
	target, err := url.Parse(*upstream)
	if err != nil || *caFile == "" || *cert == "" || *key == "" {
		flag.Usage()
		os.Exit(2)
	}
	ca, err := os.ReadFile(*caFile)
	if err != nil {
		log.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
	// Watch events go to the client as they come (or as they are released).
	proxy.FlushInterval = -1
	proxy.ModifyResponse = func(answer *http.Response) error {
		request := answer.Request
		if request.URL.Query().Get("watch") == "true" && strings.Contains(request.URL.Path, "/"+*resource) {
			answer.Body = delayed(answer.Body, *delay)
		}
		return nil
	}
	listener, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("lagproxy: https://%s\n", listener.Addr())
	log.Fatal(http.ServeTLS(listener, proxy, *cert, *key))
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
