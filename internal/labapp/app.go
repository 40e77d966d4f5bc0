package labapp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Propagation says which chain-budget carriers an app copies from its
// inbound request onto its outbound calls.
type Propagation int

// Propagation modes.
const (
	PropagateHeader  Propagation = iota // Retrycap-Budget only
	PropagateBaggage                    // baggage only (retrycap-budget member)
	PropagateBoth                       // both
	PropagateNone                       // neither: the app does not propagate
)

// Config configures an App.
type Config struct {
	// Name is the service name (for errors and logs).
	Name string
	// Listen is the address to serve on; default "127.0.0.1:0".
	Listen string
	// Upstreams are the URLs called, in order, for every inbound request,
	// e.g. "http://order/pay". Empty makes the app a leaf.
	Upstreams []string
	// ProxyURL is the HTTP proxy the calls go through (like HTTP_PROXY),
	// e.g. "http://127.0.0.1:15001". Empty calls directly.
	ProxyURL string
	// Propagation of the chain budget; default PropagateHeader.
	Propagation Propagation
	// Capacity is the most requests served at once; beyond it the app
	// answers 503 at once. 0 = unlimited.
	Capacity int
	// Timeout bounds one outbound call; default 10s.
	Timeout time.Duration
	// FailStatus is what a failing leaf answers; default 503.
	FailStatus int
	// Attempts is how many times the app itself tries each upstream call that failed (a 5xx, or
	// no answer): the app's own retries, under whatever a proxy does. Only a GET, or a request
	// with an Idempotency-Key, is tried again. Default 1.
	Attempts int
	// KeepCallsWhenCallerGone makes the app finish its outbound calls (their own retries
	// included, bounded by Timeout) after its caller hung up, as most servers do: a
	// thread-per-request server (a servlet container, Spring MVC with RestTemplate) learns of a
	// gone client only when it writes the answer, and a Node or Go handler calls on unless its
	// code wires the inbound request's cancellation into the outbound call. Default (false): the
	// calls end with the inbound request's context, as a Go handler passing r.Context() does.
	// The storm lab's chains run this way: the work below a caller that gave up goes on.
	KeepCallsWhenCallerGone bool
	// OnRequest, if set, is called with each inbound request (the admin paths excepted) as it
	// arrives, before anything else: the storm lab records when each tier really received each
	// user request.
	OnRequest func(*http.Request)
}

// Stats are an app's counters since start (or the last ResetStats).
type Stats struct {
	Received      int64 // inbound requests, rejected ones included
	OK            int64 // answered 2xx
	Failed        int64 // answered 5xx because failing or a downstream failed
	Rejected      int64 // answered 503 because over Capacity
	Posts         int64 // inbound POSTs
	DuplicatePost int64 // POSTs whose Idempotency-Key was already seen (a side effect done twice)
	MaxBudgetSeen int64 // largest chain budget seen on an inbound request (header or baggage)
	Budgeted      int64 // inbound requests that carried a chain budget (each through a sidecar)
}

// App is a running chain app.
type App struct {
	cfg    Config
	ln     net.Listener
	srv    *http.Server
	client *http.Client

	failing  atomic.Bool
	prop     atomic.Int32
	inflight atomic.Int64

	received, ok, failed, rejected, posts, dupPost, maxBudget, budgeted atomic.Int64

	keysMu sync.Mutex
	keys   map[string]struct{}
}

// Start starts an app serving in the background.
func Start(cfg Config) (*App, error) {
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.FailStatus == 0 {
		cfg.FailStatus = http.StatusServiceUnavailable
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second}
	if cfg.ProxyURL != "" {
		u, err := url.Parse(cfg.ProxyURL)
		if err != nil {
			return nil, fmt.Errorf("app %s: proxy URL: %w", cfg.Name, err)
		}
		tr.Proxy = http.ProxyURL(u)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("app %s: listen: %w", cfg.Name, err)
	}
	a := &App{cfg: cfg, ln: ln, client: &http.Client{Transport: tr, Timeout: cfg.Timeout}, keys: map[string]struct{}{}}
	a.prop.Store(int32(cfg.Propagation))
	a.srv = &http.Server{Handler: a, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = a.srv.Serve(ln) }()
	return a, nil
}

// Addr is the app's listen address, host:port.
func (a *App) Addr() string { return a.ln.Addr().String() }

// URL is http://Addr.
func (a *App) URL() string { return "http://" + a.Addr() }

// SetFailing switches failing on or off at run time: a failing app
// answers FailStatus to everything without calling its upstreams.
func (a *App) SetFailing(on bool) { a.failing.Store(on) }

// SetPropagation changes how the app propagates the chain budget.
func (a *App) SetPropagation(p Propagation) { a.prop.Store(int32(p)) }

// Stats returns the counters.
func (a *App) Stats() Stats {
	return Stats{
		Received: a.received.Load(), OK: a.ok.Load(), Failed: a.failed.Load(), Rejected: a.rejected.Load(),
		Posts: a.posts.Load(), DuplicatePost: a.dupPost.Load(), MaxBudgetSeen: a.maxBudget.Load(), Budgeted: a.budgeted.Load(),
	}
}

// Received is the number of inbound requests so far.
func (a *App) Received() int64 { return a.received.Load() }

// ResetStats zeroes the counters and forgets the keys seen.
func (a *App) ResetStats() {
	for _, c := range []*atomic.Int64{&a.received, &a.ok, &a.failed, &a.rejected, &a.posts, &a.dupPost, &a.maxBudget, &a.budgeted} {
		c.Store(0)
	}
	a.keysMu.Lock()
	a.keys = map[string]struct{}{}
	a.keysMu.Unlock()
}

// Drain keeps the app serving but ends each keep-alive connection after its current request,
// so that clients holding one move to another replica while this one is still answering (what
// an app does between its SIGTERM and its exit, while its Service's endpoints are removed).
func (a *App) Drain() { a.srv.SetKeepAlivesEnabled(false) }

// Close stops the app.
func (a *App) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := a.srv.Shutdown(ctx)
	a.client.CloseIdleConnections()
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("app %s: shutdown: %w", a.cfg.Name, err)
	}
	return nil
}

// ServeHTTP is the app: count, fail or reject, else call the upstreams.
// The admin paths /_labapp/fail?on=1|0 and /_labapp/stats are not counted,
// so a process-level lab can drive an app over HTTP too.
func (a *App) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/_labapp/fail":
		a.SetFailing(r.URL.Query().Get("on") == "1")
		_, _ = io.WriteString(w, "ok\n")
		return
	case "/_labapp/stats":
		s := a.Stats()
		fmt.Fprintf(w, "received %d\nok %d\nfailed %d\nrejected %d\nposts %d\nduplicate_posts %d\nmax_budget %d\nbudgeted %d\n",
			s.Received, s.OK, s.Failed, s.Rejected, s.Posts, s.DuplicatePost, s.MaxBudgetSeen, s.Budgeted)
		return
	}
	if a.cfg.OnRequest != nil {
		a.cfg.OnRequest(r)
	}
	a.received.Add(1)
	_, _ = io.Copy(io.Discard, r.Body)
	if b := budgetOf(r); b > 0 {
		a.budgeted.Add(1)
		for {
			m := a.maxBudget.Load()
			if b <= m || a.maxBudget.CompareAndSwap(m, b) {
				break
			}
		}
	}
	if r.Method == http.MethodPost {
		a.posts.Add(1)
		if k := r.Header.Get("Idempotency-Key"); k != "" {
			a.keysMu.Lock()
			if _, seen := a.keys[k]; seen {
				a.dupPost.Add(1)
			} else {
				a.keys[k] = struct{}{}
			}
			a.keysMu.Unlock()
		}
	}
	if c := a.cfg.Capacity; c > 0 {
		if a.inflight.Add(1) > int64(c) {
			a.inflight.Add(-1)
			a.rejected.Add(1)
			http.Error(w, a.cfg.Name+": over capacity", http.StatusServiceUnavailable)
			return
		}
		defer a.inflight.Add(-1)
	}
	if a.failing.Load() {
		a.failed.Add(1)
		http.Error(w, a.cfg.Name+": failing", a.cfg.FailStatus)
		return
	}
	attempts := a.cfg.Attempts
	if attempts < 1 || (r.Method != http.MethodGet && r.Header.Get("Idempotency-Key") == "") {
		attempts = 1
	}
	for _, u := range a.cfg.Upstreams {
		var err error
		for try := 0; try < attempts; try++ {
			if err = a.call(r, u); err == nil {
				break
			}
		}
		if err != nil {
			a.failed.Add(1)
			http.Error(w, a.cfg.Name+": "+err.Error(), http.StatusBadGateway)
			return
		}
	}
	a.ok.Add(1)
	_, _ = io.WriteString(w, a.cfg.Name+": ok\n")
}

// call makes one outbound call, copying the chain budget and the
// Idempotency-Key (as an app propagating a request context would).
func (a *App) call(in *http.Request, target string) error {
	ctx := in.Context()
	if a.cfg.KeepCallsWhenCallerGone {
		// The values (none used) stay; the caller's cancellation does not reach the call.
		ctx = context.WithoutCancel(ctx)
	}
	req, err := http.NewRequestWithContext(ctx, in.Method, target, nil)
	if err != nil {
		return fmt.Errorf("request %s: %w", target, err)
	}
	p := Propagation(a.prop.Load())
	if v := in.Header.Get("Retrycap-Budget"); v != "" && (p == PropagateHeader || p == PropagateBoth) {
		req.Header.Set("Retrycap-Budget", v)
	}
	if p == PropagateBaggage || p == PropagateBoth {
		if v := in.Header.Get("Baggage"); v != "" {
			req.Header.Set("Baggage", v)
		} else if v := in.Header.Get("Retrycap-Budget"); v != "" {
			// An OpenTelemetry app carries the value in baggage only.
			req.Header.Set("Baggage", "retrycap-budget="+v)
		}
	}
	if k := in.Header.Get("Idempotency-Key"); k != "" {
		req.Header.Set("Idempotency-Key", k)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("call %s: %w", target, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("call %s: status %d", target, resp.StatusCode)
	}
	return nil
}

// budgetOf reads the chain budget an inbound request carries (the
// smaller of header and baggage), 0 if none.
func budgetOf(r *http.Request) int64 {
	var best int64
	if v := r.Header.Get("Retrycap-Budget"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
			best = n
		}
	}
	for _, bag := range r.Header.Values("Baggage") {
		for _, m := range splitComma(bag) {
			k, v, ok := cutEq(m)
			if ok && k == "retrycap-budget" {
				if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 && (best == 0 || n < best) {
					best = n
				}
			}
		}
	}
	return best
}
