// Command lab-app is the storm lab's chain app (internal/labapp) as a container's process: the
// image retrycap/lab-app the samples and the node e2e suite (test/node) deploy. For each inbound
// request it calls its upstreams in order, through HTTP_PROXY when set (the injected
// retrycap-proxy), trying each up to --attempts times (the app's own retries); with no upstreams
// it is a leaf that answers 200, or --fail's status. GET /_labapp/fail?on=1|0 switches failing at
// run time and GET /_labapp/stats shows its counters.
//
//	lab-app [--protocol http|grpc] [--listen :8080] [--stats-listen :8081] [--name NAME]
//	        [--upstreams URL,...] [--attempts N] [--fail] [--shutdown-delay 5s]
//
// Flags default from the environment (LAB_PROTOCOL, LAB_LISTEN, LAB_STATS_LISTEN, LAB_NAME or
// HOSTNAME, LAB_UPSTREAMS, LAB_ATTEMPTS, LAB_FAIL, LAB_SHUTDOWN_DELAY), so a Deployment can set
// either.
//
// With --call URL (LAB_CALL) it serves nothing: it makes one GET of URL with Go's default
// client, which honours HTTP_PROXY and NO_PROXY as most apps do, prints the status line and the
// body, and exits 0 on a 2xx answer, 1 otherwise: the one-shot client of an init container or a
// Job (the node suite's pods as people write them).
//
// With --protocol grpc it is the storm lab's gRPC chain app (labapp.StartGRPC): it serves
// retrycap.lab.Chain on --listen and calls its one upstream, NAME:PORT, through HTTPS_PROXY as
// grpc-go does (the injected sidecar), trying an UNAVAILABLE call --attempts times; --fail
// answers UNAVAILABLE. Its counters are then served over HTTP on --stats-listen, at
// /_labapp/stats ("received N" and "failed N" lines), which is also its readiness path.
//
// On SIGTERM it keeps serving for --shutdown-delay before it stops: the kubelet signals the
// container and the endpoints controller and kube-proxy remove the pod from its Service at the
// same time, not before, so requests keep arriving for a moment (on the test node, a rolling
// update of an app that stopped at once lost 16 of 286 requests: refused, or sent to a pod
// already gone). The pod's terminationGracePeriodSeconds (30 by default) must exceed it.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/retrycap/retrycap/internal/labapp"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "lab-app:", err)
		os.Exit(1)
	}
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func run(args []string) error {
	fs := flag.NewFlagSet("lab-app", flag.ContinueOnError)
	protocol := fs.String("protocol", env("LAB_PROTOCOL", "http"), "http, or grpc (the Chain service)")
	listen := fs.String("listen", env("LAB_LISTEN", ":8080"), "address to serve on")
	statsListen := fs.String("stats-listen", env("LAB_STATS_LISTEN", ":8081"), "--protocol grpc: address of the HTTP counters (/_labapp/stats)")
	name := fs.String("name", env("LAB_NAME", env("HOSTNAME", "lab-app")), "service name (in answers and errors)")
	upstreams := fs.String("upstreams", env("LAB_UPSTREAMS", ""), "comma-separated URLs called for every request; empty: a leaf")
	attemptsDef, err := strconv.Atoi(env("LAB_ATTEMPTS", "1"))
	if err != nil {
		return fmt.Errorf("LAB_ATTEMPTS=%q: not a number", os.Getenv("LAB_ATTEMPTS"))
	}
	attempts := fs.Int("attempts", attemptsDef, "tries per failed upstream call (the app's own retries)")
	delayDef, err := time.ParseDuration(env("LAB_SHUTDOWN_DELAY", "5s"))
	if err != nil {
		return fmt.Errorf("LAB_SHUTDOWN_DELAY=%q: %w", os.Getenv("LAB_SHUTDOWN_DELAY"), err)
	}
	delay := fs.Duration("shutdown-delay", delayDef, "how long to keep serving after SIGTERM, while the pod leaves its Service's endpoints")
	call := fs.String("call", env("LAB_CALL", ""), "make one GET of this URL (through HTTP_PROXY as Go's client does), print the answer and exit: 0 on 2xx")
	fail := fs.Bool("fail", env("LAB_FAIL", "") == "1" || env("LAB_FAIL", "") == "true", "start failing (503 to everything)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *delay < 0 {
		return fmt.Errorf("--shutdown-delay=%s: must not be negative", *delay)
	}
	if *attempts < 1 {
		return fmt.Errorf("--attempts=%d: must be at least 1", *attempts)
	}
	if *call != "" {
		return callOnce(*call)
	}
	var ups []string
	for _, u := range strings.Split(*upstreams, ",") {
		if u = strings.TrimSpace(u); u != "" {
			ups = append(ups, u)
		}
	}
	// The handler first: a SIGTERM that came before it would kill the app without its delay.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	switch *protocol {
	case "http":
	case "grpc":
		return runGRPC(sigs, *name, *listen, *statsListen, ups, *attempts, *fail, *delay)
	default:
		return fmt.Errorf("--protocol=%q: must be http or grpc", *protocol)
	}
	// The injected sidecar sets HTTP_PROXY; every upstream call goes through it.
	proxy := env("HTTP_PROXY", os.Getenv("http_proxy"))
	app, err := labapp.Start(labapp.Config{Name: *name, Listen: *listen, Upstreams: ups, ProxyURL: proxy, Attempts: *attempts})
	if err != nil {
		return err
	}
	app.SetFailing(*fail)
	fmt.Fprintf(os.Stderr, "lab-app %s: serving on %s, upstreams %v, attempts %d, proxy %q, failing %v\n", *name, app.Addr(), ups, *attempts, proxy, *fail)
	// SIGTERM: keep answering while the endpoints are removed (keep-alive connections closed
	// after their current request, so their clients reconnect elsewhere), then finish what is in
	// flight (Close drains for up to 2s) and exit 0.
	awaitStop(sigs, *name, *delay, app.Drain)
	return app.Close()
}

// runGRPC is --protocol grpc: the gRPC chain app, its counters on an HTTP listener of their own.
func runGRPC(sigs <-chan os.Signal, name, listen, statsListen string, ups []string, attempts int, fail bool, delay time.Duration) error {
	if len(ups) > 1 {
		return fmt.Errorf("--upstreams=%s: a gRPC app calls one upstream, NAME:PORT", strings.Join(ups, ","))
	}
	up := ""
	if len(ups) == 1 {
		up = ups[0]
		if _, port, err := net.SplitHostPort(up); err != nil || port == "" || strings.Contains(up, "/") {
			return fmt.Errorf("--upstreams=%s: a gRPC upstream is NAME:PORT (dialed as dns:///NAME:PORT)", up)
		}
	}
	stats, err := net.Listen("tcp", statsListen)
	if err != nil {
		return fmt.Errorf("--stats-listen=%s: %w", statsListen, err)
	}
	app, err := labapp.StartGRPC(labapp.GRPCConfig{Name: name, Listen: listen, Upstream: up, Fail: fail, Attempts: attempts})
	if err != nil {
		stats.Close()
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/_labapp/stats", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "received %d\nfailed %d\n", app.Received(), app.Failed())
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(stats) }()
	fmt.Fprintf(os.Stderr, "lab-app %s: serving gRPC on %s (counters on %s), upstream %q, attempts %d, proxy %q, failing %v\n",
		name, app.Addr(), stats.Addr(), up, attempts, env("HTTPS_PROXY", os.Getenv("https_proxy")), fail)
	// As the HTTP app: keep answering while the endpoints are removed, then stop.
	awaitStop(sigs, name, delay, func() {})
	app.Close()
	return srv.Close()
}

// awaitStop waits for the first SIGTERM or SIGINT, drains, says so, and keeps serving for delay
// (a second signal cuts it short).
// callOnce is --call: one GET with Go's default client (http.ProxyFromEnvironment).
func callOnce(url string) error {
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return fmt.Errorf("--call %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return fmt.Errorf("--call %s: reading the answer: %w", url, err)
	}
	fmt.Printf("%s %s\n%s", resp.Proto, resp.Status, body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("--call %s: status %s", url, resp.Status)
	}
	return nil
}

func awaitStop(sigs <-chan os.Signal, name string, delay time.Duration, drain func()) {
	<-sigs
	drain()
	fmt.Fprintf(os.Stderr, "lab-app %s: terminating: serving %s more, then stopping\n", name, delay)
	select {
	case <-time.After(delay):
	case <-sigs:
	}
}
