package h2

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retrycap/retrycap/internal/proxy/accesslog"
	"github.com/retrycap/retrycap/internal/proxy/policy"
)

// Upstream is one --upstreams entry as the h2c path sees it. Budget and
// Breaker are the HTTP/1.1 path's own objects, so both protocols share one
// retry budget and one breaker per upstream.
type Upstream struct {
	Name     string
	Attempts int                 // tries per call (>= 1)
	Addr     string              // address to dial; "" = the call's host:port through Config.Resolve
	Budget   *policy.RetryBudget // nil: no retry budget
	Breaker  *policy.Breaker     // nil: no breaker
}

// Config is what the h2c path needs from the proxy; every field but Lookup
// has a usable zero value.
type Config struct {
	// Lookup finds the upstream a host (without port, any case) names; nil
	// when none does (the call is then forwarded once, without retries).
	Lookup func(host string) *Upstream
	// IsSelf reports whether host:port is the proxy's own listener (a call
	// there is refused: it would loop). nil: never.
	IsSelf func(hostPort string) bool
	// ChainCap is --chain-cap; 0 turns chain budgeting off.
	ChainCap int
	// PerTryTimeout bounds one attempt up to its response headers (and the dial).
	PerTryTimeout time.Duration
	// Policy is the retry-on set and the backoff.
	Policy policy.Policy
	// RetryMethods are the methods a plain (non-gRPC) HTTP/2 request is
	// retried with without an Idempotency-Key; gRPC calls ignore them.
	RetryMethods []string
	// MaxReplayBytes is the largest request body (gRPC: the messages sent
	// so far) that is kept to be re-sent.
	MaxReplayBytes int
	// Resolve maps a host:port to the address to dial (--resolve); nil: as is.
	Resolve func(hostPort string) string
	// Dial opens an upstream connection; nil: net.Dialer with PerTryTimeout.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Registerer takes the metrics; nil: not registered.
	Registerer prometheus.Registerer
	// Now is the clock the budget and breaker read (unix ns); nil: time.Now.
	Now func() int64
	// Logger; nil: discard.
	Logger *log.Logger
	// MaxConcurrentStreams advertised to clients; 0: 1000.
	MaxConcurrentStreams uint32
	// IdleTimeout closes (GOAWAY) a client connection idle that long; 0: 5m.
	IdleTimeout time.Duration
	// AccessLog takes one line per attempt (--access-log), as the HTTP/1.1
	// path writes them, with grpc_status for gRPC; nil: none.
	AccessLog *accesslog.Writer
	// Entrypoint is --entrypoint: a call carrying an Idempotency-Key
	// (gRPC metadata idempotency-key) is charged in the key ledger, so a
	// client retrying with the same key gets what is left of the chain
	// budget, not a fresh cap, as on the HTTP/1.1 path; a plain HTTP/2
	// POST or PATCH without a key gets a generated one (policy.NewKey),
	// returned on a failed answer. gRPC calls get none: their retries
	// follow grpc-status, not the method and key rules.
	Entrypoint bool
	// Ledger is the key ledger charged at an entrypoint: the HTTP/1.1
	// path's (forward.Forwarder.Ledger), so one key has one chain budget
	// whichever protocol the client retries with. nil with Entrypoint: a
	// ledger of this Handler's own, remembering keys for KeyTTL.
	Ledger *policy.KeyLedger
	// KeyTTL is how long an own ledger remembers a key; 0: 10m.
	KeyTTL time.Duration
}

// Handler terminates h2c client connections and proxies their streams.
type Handler struct {
	cfg     Config
	srv     *http.Server
	ln      *connListener
	tr      *http.Transport
	m       *metrics
	methods map[string]bool
	unknown *Upstream
	ups     sync.Map // *Upstream -> *[2]*upMetrics (grpc, h2)
	conns   sync.WaitGroup
	closing atomic.Bool
	ledger  *policy.KeyLedger // nil unless Entrypoint
	pools   sync.Map          // known upstreams' addresses -> *upPool (upconn.go)
}

// New builds a Handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Lookup == nil {
		cfg.Lookup = func(string) *Upstream { return nil }
	}
	if cfg.PerTryTimeout <= 0 {
		cfg.PerTryTimeout = 2 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = func() int64 { return time.Now().UnixNano() }
	}
	if cfg.Logger == nil {
		cfg.Logger = log.New(io.Discard, "", 0)
	}
	if cfg.MaxConcurrentStreams == 0 {
		cfg.MaxConcurrentStreams = 1000
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 5 * time.Minute
	}
	if cfg.Dial == nil {
		d := &net.Dialer{Timeout: cfg.PerTryTimeout}
		cfg.Dial = d.DialContext
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("h2 metrics: %w", err)
	}
	h := &Handler{cfg: cfg, m: m, methods: map[string]bool{}, unknown: &Upstream{Name: "unknown", Attempts: 1}}
	if cfg.Entrypoint {
		h.ledger = cfg.Ledger
		if h.ledger == nil {
			if cfg.KeyTTL <= 0 {
				cfg.KeyTTL = 10 * time.Minute
			}
			h.ledger = policy.NewKeyLedger(cfg.KeyTTL, 100000)
		}
	}
	for _, x := range cfg.RetryMethods {
		h.methods[strings.ToUpper(x)] = true
	}
	// h2c only, with prior knowledge: the connections handed over start
	// with the client preface.
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	h.ln = newConnListener()
	h.srv = &http.Server{
		Handler:     http.HandlerFunc(h.serveHTTP),
		Protocols:   &protos,
		IdleTimeout: cfg.IdleTimeout,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams: int(cfg.MaxConcurrentStreams),
			// Dead clients are found by pings, as grpc-go's keepalive does.
			SendPingTimeout: 60 * time.Second,
			PingTimeout:     15 * time.Second,
		},
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if sc, ok := c.(*servedConn); ok {
				return context.WithValue(ctx, targetKey{}, sc.target)
			}
			return ctx
		},
		ErrorLog: cfg.Logger,
	}
	go func() { _ = h.srv.Serve(h.ln) }()
	dial := cfg.Dial
	h.tr = &http.Transport{
		Protocols: &protos, // h2c with prior knowledge to every upstream
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, &dialError{err}
			}
			// As on the client side: the transport flushes a request's
			// HEADERS, DATA and END_STREAM one by one.
			return newCoalesceConn(c), nil
		},
		DisableCompression:  true, // pass Accept-Encoding and bodies on untouched
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		HTTP2: &http.HTTP2Config{
			SendPingTimeout: 30 * time.Second,
			PingTimeout:     15 * time.Second,
		},
	}
	return h, nil
}

type targetKey struct{}

// ServeConn serves one client connection speaking h2c until it ends; c
// starts with the client preface. target is the CONNECT host:port the
// connection was tunnelled to, which every stream is routed to; "" for
// h2c with prior knowledge on the listener, where each stream is routed by
// its :authority.
func (h *Handler) ServeConn(c net.Conn, target string) {
	if h.closing.Load() {
		_ = c.Close()
		return
	}
	h.conns.Add(1)
	defer h.conns.Done()
	kind := "connect"
	if target == "" {
		kind = "prior-knowledge"
	}
	h.m.conns.WithLabelValues(kind).Inc()
	// Writes batched (coalesce.go): the server flushes after nearly every frame.
	sc := &servedConn{Conn: newCoalesceConn(c), target: target, done: make(chan struct{})}
	if !h.ln.push(sc) {
		_ = c.Close()
		return
	}
	<-sc.done
}

// Shutdown sends GOAWAY to every client connection, lets their streams end
// until ctx does, and closes idle upstream connections.
func (h *Handler) Shutdown(ctx context.Context) error {
	h.closing.Store(true)
	err := h.srv.Shutdown(ctx) // GOAWAY on each connection, then waits for them
	done := make(chan struct{})
	go func() { h.conns.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		err = errors.Join(err, ctx.Err())
		_ = h.srv.Close()
	}
	h.tr.CloseIdleConnections()
	h.closeAll()
	return err
}

// servedConn is a connection handed to the server; Close (by the server,
// when the connection ends) releases ServeConn.
type servedConn struct {
	net.Conn
	target string
	once   sync.Once
	done   chan struct{}
}

func (c *servedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { close(c.done) })
	return err
}

// connListener is the server's listener: it accepts only the connections
// ServeConn hands over.
type connListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newConnListener() *connListener {
	return &connListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *connListener) push(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.closed:
		return false
	}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *connListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// dialError marks a failure to connect (connect-failure, not reset).
type dialError struct{ err error }

func (e *dialError) Error() string { return "dial: " + e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

func (h *Handler) metricsFor(up *Upstream, grpc bool) *upMetrics {
	v, ok := h.ups.Load(up)
	if !ok {
		pair := &[2]*upMetrics{h.m.forUpstream(up.Name, "grpc"), h.m.forUpstream(up.Name, "h2")}
		v, _ = h.ups.LoadOrStore(up, pair)
	}
	pair := v.(*[2]*upMetrics)
	if grpc {
		return pair[0]
	}
	return pair[1]
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// call is one stream's policy state.
type call struct {
	h       *Handler
	w       http.ResponseWriter
	r       *http.Request
	up      *Upstream
	m       *upMetrics
	known   bool
	grpc    bool
	addr    string
	start   int64
	end     int64 // the deadline the policy reads (pushback, Retry-After)
	hasDL   bool  // the gRPC client set grpc-timeout
	dl      time.Time
	chainOn bool
	split   policy.Split
	hadBag  bool
	bag     string
	body    *replay
	// retryable: the call may be re-sent (a gRPC call always, until its
	// messages overflow the replay buffer; other requests by method or key).
	retryable    bool
	maxAttempts  int
	chainLimited bool
	key          string // Idempotency-Key, "" for none
	generated    bool   // key was generated here (entrypoint, keyless POST/PATCH)
	ledgerOn     bool   // the key is charged in the entry proxy's ledger
	attemptStart int64
}

func hostOf(hostPort string) string {
	if h, _, err := net.SplitHostPort(hostPort); err == nil {
		return h
	}
	return strings.Trim(hostPort, "[]")
}

func (h *Handler) serveHTTP(w http.ResponseWriter, r *http.Request) {
	target, _ := r.Context().Value(targetKey{}).(string)
	hostPort := target
	if hostPort == "" {
		hostPort = r.Host
	}
	c := &call{h: h, w: w, r: r, grpc: isGRPC(r.Header), start: h.cfg.Now()}
	up := h.cfg.Lookup(hostOf(hostPort))
	c.known = up != nil
	if up == nil {
		up = h.unknown
	}
	c.up = up
	c.m = h.metricsFor(up, c.grpc)
	if hostPort == "" {
		c.answer(policy.ReasonNone, "request has no :authority", http.StatusBadRequest)
		return
	}
	if !c.known && h.cfg.IsSelf != nil && h.cfg.IsSelf(hostPort) {
		c.answer(policy.ReasonNone, "request addressed to the proxy itself ("+hostPort+"): loop refused", http.StatusLoopDetected)
		return
	}
	c.addr = up.Addr
	if c.addr == "" {
		hp := hostPort
		if _, _, err := net.SplitHostPort(hp); err != nil {
			hp = net.JoinHostPort(hp, "80")
		}
		c.addr = hp
		if h.cfg.Resolve != nil {
			c.addr = h.cfg.Resolve(hp)
		}
	}
	c.run()
}

// setup reads the request's policy inputs: deadline, chain budget, whether
// it may be retried, and the split of the chain budget over its attempts.
// It returns false when the call is answered without an attempt (its key's
// chain budget is spent).
func (c *call) setup() bool {
	h, r := c.h, c.r
	if c.grpc {
		if d, ok := parseTimeout(r.Header.Get(hdrGRPCTimeout)); ok {
			c.hasDL, c.dl = true, time.Now().Add(d)
		}
		c.retryable = c.known && (r.ContentLength < 0 || r.ContentLength <= int64(h.cfg.MaxReplayBytes))
	} else {
		method := r.Method
		c.retryable = c.known && (h.methods[method] || policy.RetryableKey([]byte(r.Header.Get(hdrIdempotencyKey)))) &&
			(r.ContentLength < 0 || r.ContentLength <= int64(h.cfg.MaxReplayBytes))
	}
	n := 0
	c.chainOn = h.cfg.ChainCap > 0
	if c.chainOn {
		n = h.cfg.ChainCap
		for _, v := range r.Header.Values(policy.HeaderBudget) {
			n = policy.IncomingBudget([]byte(v), true, nil, false, n)
		}
		if bags := r.Header.Values(hdrBaggage); len(bags) > 0 {
			c.hadBag = true
			c.bag = strings.Join(bags, ",")
			n = policy.IncomingBudget(nil, false, []byte(c.bag), true, n)
		}
	}
	c.key = r.Header.Get(hdrIdempotencyKey)
	if c.key == "" && h.ledger != nil && !c.grpc && (r.Method == http.MethodPost || r.Method == http.MethodPatch) {
		// As on the HTTP/1.1 path (forward.Exchange.Begin): not retried
		// here (the app did not ask for it), but the key lets the client
		// retry safely and counts those retries against the cap.
		c.key, c.generated = string(policy.NewKey()), true
	}
	// Unknown hosts too, as on the HTTP/1.1 path: the key's budget is the
	// chain's, wherever the call went.
	c.ledgerOn = c.chainOn && h.ledger != nil && c.key != ""
	if c.ledgerOn {
		n -= h.ledger.Spent([]byte(c.key), c.start)
		if n <= 0 {
			c.m.denied[policy.ReasonChain].Inc()
			c.answer(policy.ReasonChain, "chain budget of this Idempotency-Key is spent", 0)
			return false
		}
	}
	// The attempts the split reserves budget for: none beyond the first
	// when this hop can never retry, except for a generated key, whose
	// reservation is what the client's own retries will spend.
	splitAttempts := c.up.Attempts
	if !c.retryable && !c.generated {
		splitAttempts = 1
	}
	c.split = policy.SplitBudget(splitAttempts, n)
	c.maxAttempts = max(c.up.Attempts, 1)
	if c.chainOn && c.split.Attempts < c.maxAttempts {
		c.maxAttempts, c.chainLimited = c.split.Attempts, true
	}
	if !c.retryable {
		c.maxAttempts = 1
	}
	c.end = c.start + int64(c.maxAttempts)*int64(h.cfg.PerTryTimeout)
	if c.hasDL {
		c.end = c.start + int64(time.Until(c.dl))
	}
	return true
}

// attemptResult is what one attempt ended in.
type attemptResult struct {
	resp     *http.Response
	err      error
	cond     policy.Condition
	first    []byte // gRPC: the first bytes of the response body (committed), nil if none
	bufp     *[]byte
	eof      bool // gRPC: the response ended without a message
	code     int  // gRPC: grpc-status (or mapped from HTTP)
	inTrails bool // gRPC: the status came in trailers after headers (not trailers-only)
}

func (a *attemptResult) discard() {
	if a.resp != nil {
		_ = a.resp.Body.Close()
	}
	if a.bufp != nil {
		bufPool.Put(a.bufp)
		a.bufp = nil
	}
}

func (c *call) run() {
	h, r := c.h, c.r
	if !c.setup() {
		return
	}
	if c.known && c.up.Budget != nil {
		c.up.Budget.Deposit(c.start)
	}
	if r.Body != nil && r.Body != http.NoBody {
		c.body = newReplay(r.Body, c.h.cfg.MaxReplayBytes)
	}
	ctx := r.Context()
	if c.hasDL {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, c.dl)
		defer cancel()
	}
	var last *attemptResult
	for attempt := 1; ; attempt++ {
		now := h.cfg.Now()
		probe := false
		if br := c.up.Breaker; br != nil && c.known {
			ok, p := br.Allow(now)
			if !ok {
				c.m.denied[policy.ReasonBreaker].Inc()
				if last == nil {
					c.answer(policy.ReasonBreaker, "circuit breaker open", 0)
					return
				}
				// The last failure is the answer, as for HTTP/1.1.
				c.finish(last, policy.ReasonBreaker, attempt-1)
				return
			}
			probe = p
		}
		if last != nil {
			last.discard()
			last = nil
		}
		if c.hasDL && !time.Now().Before(c.dl) {
			c.deadline()
			return
		}
		c.attemptStart = now
		res := c.attempt(ctx, attempt)
		now = h.cfg.Now()
		c.m.attempts.Inc()
		o := policy.Outcome{
			Attempt: attempt, MaxAttempts: c.maxAttempts, ChainLimited: c.chainLimited,
			Retryable: c.retryable && (c.body == nil || c.body.replayable()),
			Remaining: time.Duration(c.end - now), GRPC: c.grpc, Cond: res.cond,
		}
		fault := res.err != nil
		if res.err == nil {
			resp := res.resp
			o.Status = resp.StatusCode
			o.ExhaustedResp = resp.Header.Get(policy.HeaderExhausted) != "" || resp.Trailer.Get(policy.HeaderExhausted) != ""
			if c.grpc {
				o.GRPCCode = res.code
				fault = res.first == nil && serverFault(res.code)
				if res.first == nil {
					pb := resp.Header.Values(hdrGRPCPushback)
					if len(pb) == 0 {
						pb = resp.Trailer.Values(hdrGRPCPushback)
					}
					o.RetryAfter, o.HasRetryAfter, o.PushbackStop = parsePushback(pb)
				} else {
					// Committed: a message reached (is reaching) the client.
					o.Retryable = false
					o.GRPCCode = codeOK
				}
			} else {
				fault = resp.StatusCode >= 500
				if v := resp.Header.Get(hdrRetryAfter); v != "" && (o.Status == 429 || o.Status == 503) {
					o.RetryAfter, o.HasRetryAfter = parseRetryAfter(v)
				}
			}
		}
		if br := c.up.Breaker; br != nil && c.known {
			if fault {
				br.Failure(now, probe)
			} else {
				br.Success(now, probe)
			}
		}
		pol := &h.cfg.Policy
		var d policy.Decision
		if c.known {
			d = pol.Decide(&o, c.up.Budget, c.up.Breaker, now)
		}
		c.logAttempt(attempt, now, res, d)
		if d.Retry {
			c.m.retries.Inc()
			// Kept (unread) until the next attempt is allowed: a breaker
			// refusing it returns this failure.
			last = res
			if d.Wait > 0 {
				t := time.NewTimer(d.Wait)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					last.discard()
					if c.hasDL && errors.Is(ctx.Err(), context.DeadlineExceeded) {
						c.deadline()
					}
					return
				}
			}
			continue
		}
		if d.Reason != policy.ReasonNone {
			c.m.denied[d.Reason].Inc()
		}
		c.finish(res, d.Reason, attempt)
		return
	}
}

// attempt sends one try and reads its answer up to what the decision
// needs: the response headers, and for gRPC the first message or the end.
func (c *call) attempt(ctx context.Context, n int) *attemptResult {
	h, r := c.h, c.r
	hdr := r.Header.Clone()
	hdr.Del("Trailer")
	if _, ok := hdr["User-Agent"]; !ok {
		hdr["User-Agent"] = nil // the transport adds none then
	}
	if c.chainOn {
		b := c.split.BudgetFor(n)
		hdr.Set(policy.HeaderBudget, strconv.Itoa(b))
		if c.ledgerOn {
			h.ledger.Add([]byte(c.key), b, c.attemptStart)
		}
		if c.hadBag {
			hdr.Set(hdrBaggage, string(policy.AppendBaggage(nil, []byte(c.bag), b)))
		}
	}
	if c.generated {
		hdr[hdrIdempotencyKey] = []string{c.key}
	}
	if c.grpc {
		if n > 1 {
			hdr.Set(hdrGRPCPrevious, strconv.Itoa(n-1))
		}
		if c.hasDL {
			hdr.Set(hdrGRPCTimeout, formatTimeout(time.Until(c.dl)))
		}
	}
	actx, cancel := context.WithCancel(ctx)
	var timedOut atomic.Bool
	timer := time.AfterFunc(h.cfg.PerTryTimeout, func() { timedOut.Store(true); cancel() })
	out := &http.Request{
		Method:        r.Method,
		Proto:         "HTTP/2.0",
		ProtoMajor:    2,
		Header:        hdr,
		Host:          r.Host,
		ContentLength: r.ContentLength,
		Trailer:       r.Trailer,
	}
	u := *r.URL
	u.Scheme, u.Host = "http", c.addr
	out.URL = &u
	if out.Host == "" {
		out.Host = c.addr
	}
	if c.body != nil {
		b, err := c.body.reader()
		if err != nil {
			timer.Stop()
			cancel()
			return &attemptResult{err: err, cond: policy.CondReset}
		}
		out.Body = b
		m := c.m
		out.GetBody = func() (io.ReadCloser, error) {
			// The transport re-sends a stream the upstream never processed
			// (GOAWAY below its id, REFUSED_STREAM): not an attempt.
			m.resent.Inc()
			return c.body.reader()
		}
	} else {
		out.Body = http.NoBody
	}
	out = out.WithContext(actx)
	t0 := time.Now()
	resp, err := c.roundTrip(out)
	stopped := timer.Stop()
	c.m.latency.Observe(time.Since(t0).Seconds())
	res := &attemptResult{resp: resp, err: err}
	if err == nil && !stopped && timedOut.Load() {
		_ = resp.Body.Close()
		res.resp, res.err = nil, context.DeadlineExceeded
	}
	if res.err != nil {
		cancel()
		res.cond = classify(res.err, timedOut.Load())
		return res
	}
	// From here the attempt lives as long as the call: cancel goes with the body.
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	if !c.grpc {
		return res
	}
	if code, ok := parseStatus(resp.Header.Values(hdrGRPCStatus)); ok {
		// Trailers-only: the whole answer is in the headers.
		res.code, res.eof = code, true
		return res
	}
	if resp.StatusCode != http.StatusOK {
		res.code, res.eof = statusFromHTTP(resp.StatusCode), true
		return res
	}
	// Hold the headers back until a message or the trailers come.
	bufp := bufPool.Get().(*[]byte)
	for {
		k, rerr := resp.Body.Read(*bufp)
		if k > 0 {
			res.first, res.bufp = (*bufp)[:k], bufp
			return res
		}
		if rerr == io.EOF {
			bufPool.Put(bufp)
			res.eof, res.inTrails = true, true
			if code, ok := parseStatus(resp.Trailer.Values(hdrGRPCStatus)); ok {
				res.code = code
			} else {
				res.code = codeInternal
			}
			return res
		}
		if rerr != nil {
			bufPool.Put(bufp)
			_ = resp.Body.Close()
			res.resp, res.err = nil, rerr
			res.cond = classify(rerr, timedOut.Load())
			return res
		}
	}
}

// roundTrip sends one attempt: to a known upstream on a connection of its
// pool (upconn.go), re-sent on another while the upstream did not process
// it (GOAWAY below its id, REFUSED_STREAM; not an attempt, as the
// Transport's own re-sends are not); to any other host through the
// Transport.
func (c *call) roundTrip(out *http.Request) (*http.Response, error) {
	if !c.known {
		return c.h.tr.RoundTrip(out)
	}
	p := c.h.pool(c.addr)
	for resend := 0; ; resend++ {
		cc, err := p.get(out.Context())
		if err != nil {
			return nil, err
		}
		resp, err := cc.RoundTrip(out)
		// As many times as the Transport would (http2's RoundTripOpt).
		if !unprocessed(err) || resend == 6 || out.Context().Err() != nil {
			return resp, err
		}
		if out.GetBody != nil {
			b, berr := out.GetBody() // counts the re-send
			if berr != nil {
				return nil, err
			}
			out.Body = b
		} else {
			c.m.resent.Inc()
		}
	}
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// classify maps a transport error to a retry-on condition.
func classify(err error, timedOut bool) policy.Condition {
	var de *dialError
	var ne net.Error
	switch {
	case errors.As(err, &de):
		return policy.CondConnectFailure
	case timedOut, errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return policy.CondTimeout
	}
	return policy.CondReset
}

// finish passes on the last attempt's answer (marked Retrycap-Exhausted
// when the reason is one of the four), or the proxy's own when there is none.
func (c *call) finish(res *attemptResult, reason policy.Reason, attempts int) {
	if res.err != nil {
		if c.hasDL && !time.Now().Before(c.dl) {
			c.deadline()
			return
		}
		msg := fmt.Sprintf("%d attempt(s), last failed with %s (%v)", attempts, res.cond, res.err)
		if reason != policy.ReasonNone {
			msg += "; not retried: " + reason.String()
		}
		status := http.StatusServiceUnavailable
		if !reason.Exhausts() {
			status = http.StatusBadGateway
			if res.cond == policy.CondTimeout {
				status = http.StatusGatewayTimeout
			}
		}
		c.answer(reason, msg, status)
		return
	}
	c.relay(res, reason)
}

// relay writes an upstream answer to the client: headers, then (once one
// is committed) the body as it streams, then the trailers.
func (c *call) relay(res *attemptResult, reason policy.Reason) {
	w, resp := c.w, res.resp
	defer res.discard()
	wh := w.Header()
	for k, vs := range resp.Header {
		if k == "Trailer" {
			continue
		}
		wh[k] = vs
	}
	exhausted := reason.Exhausts()
	if c.grpc {
		code := res.code
		if res.first != nil {
			code = codeOK // unknown until the trailers; counted then
		}
		if exhausted && !res.inTrails {
			wh.Set(policy.HeaderExhausted, reason.String())
		}
		if res.eof {
			c.m.code(codeLabel(code))
		}
	} else {
		if exhausted {
			wh.Set(policy.HeaderExhausted, reason.String())
		}
		if c.generated && c.h.failedStatus(resp.StatusCode) {
			wh[hdrIdempotencyKey] = []string{c.key}
		}
		c.m.code(strconv.Itoa(resp.StatusCode))
	}
	w.WriteHeader(resp.StatusCode)
	fl, _ := w.(http.Flusher)
	broken := error(nil)
	if res.first != nil {
		if _, err := w.Write(res.first); err != nil {
			return
		}
		if fl != nil {
			fl.Flush()
		}
	}
	if !res.eof {
		bufp := bufPool.Get().(*[]byte)
		defer bufPool.Put(bufp)
		for {
			n, err := resp.Body.Read(*bufp)
			if n > 0 {
				if _, werr := w.Write((*bufp)[:n]); werr != nil {
					return // the client went away; the upstream stream is cancelled by discard
				}
				if fl != nil {
					fl.Flush()
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				broken = err
				break
			}
		}
	}
	if broken != nil {
		if !c.grpc {
			// The upstream broke the stream: so does the proxy (RST_STREAM).
			panic(http.ErrAbortHandler)
		}
		wh.Set(http.TrailerPrefix+hdrGRPCStatus, strconv.Itoa(codeUnavailable))
		wh.Set(http.TrailerPrefix+hdrGRPCMessage, encodeMessage("retrycap-proxy: upstream "+c.up.Name+" broke the stream after the answer began: "+broken.Error()))
		c.m.code(codeLabel(codeUnavailable))
		return
	}
	for k, vs := range resp.Trailer {
		wh[http.TrailerPrefix+k] = vs
	}
	if c.grpc {
		if res.inTrails && exhausted {
			wh.Set(http.TrailerPrefix+policy.HeaderExhausted, reason.String())
		}
		if res.first != nil {
			code, ok := parseStatus(resp.Trailer.Values(hdrGRPCStatus))
			if !ok {
				code = codeInternal
			}
			c.m.code(codeLabel(code))
		}
	}
}

// answer is the proxy's own answer: for gRPC a trailers-only
// UNAVAILABLE whose grpc-message says why, else an HTTP status (503 by
// default) with the reason in the body. Both carry Retrycap-Exhausted when
// reason is one of the four.
func (c *call) answer(reason policy.Reason, why string, status int) {
	w := c.w
	wh := w.Header()
	if reason.Exhausts() {
		wh.Set(policy.HeaderExhausted, reason.String())
	}
	msg := "retrycap-proxy: upstream " + c.up.Name + ": " + why
	if c.grpc {
		wh.Set("Content-Type", "application/grpc")
		wh.Set(hdrGRPCStatus, strconv.Itoa(codeUnavailable))
		wh.Set(hdrGRPCMessage, encodeMessage(msg))
		w.WriteHeader(http.StatusOK)
		c.m.code(codeLabel(codeUnavailable))
		return
	}
	if status == 0 {
		status = http.StatusServiceUnavailable
	}
	if c.generated {
		// The proxy's own answers are all failures the client may retry
		// (502, 503, 504), as forward.Exchange.giveUp returns the key.
		wh[hdrIdempotencyKey] = []string{c.key}
	}
	wh.Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg+"\n")
	c.m.code(strconv.Itoa(status))
}

// deadline answers a gRPC call whose grpc-timeout passed.
func (c *call) deadline() {
	if !c.grpc {
		c.answer(policy.ReasonNone, "deadline exceeded", http.StatusGatewayTimeout)
		return
	}
	wh := c.w.Header()
	wh.Set("Content-Type", "application/grpc")
	wh.Set(hdrGRPCStatus, strconv.Itoa(codeDeadline))
	wh.Set(hdrGRPCMessage, encodeMessage("retrycap-proxy: upstream "+c.up.Name+": deadline exceeded"))
	c.w.WriteHeader(http.StatusOK)
	c.m.code(codeLabel(codeDeadline))
}

// failedStatus reports whether an upstream's HTTP status is a failed
// answer the client may retry, on which a generated key is returned: a
// 5xx, a 429 (it asks for exactly that) or a status --retry-on names, as
// forward.Exchange.finish decides.
func (h *Handler) failedStatus(st int) bool {
	return st >= 500 || st == http.StatusTooManyRequests || h.cfg.Policy.RetryOn.Status(st)
}

// parseRetryAfter reads delay-seconds or an HTTP date.
func parseRetryAfter(v string) (time.Duration, bool) {
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
		if s < 0 {
			return 0, false
		}
		return time.Duration(s) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(time.Until(t), 0), true
}

// logAttempt writes the attempt that just ended (at now) to the access log,
// if there is one, in the HTTP/1.1 path's format: the HTTP status it rode
// on, for gRPC the grpc-status (0 once a message committed the answer: the
// real status comes later, in trailers the decision never waits for).
func (c *call) logAttempt(n int, now int64, res *attemptResult, d policy.Decision) {
	w := c.h.cfg.AccessLog
	if w == nil {
		return
	}
	e := w.Begin()
	if e == nil {
		return // dropped, counted by the writer
	}
	r := c.r
	e.TimeNanos, e.DurationNanos = c.attemptStart, now-c.attemptStart
	e.Upstream, e.Attempt, e.Status, e.GRPCStatus = c.up.Name, n, 0, -1
	e.BudgetIn, e.BudgetOut = -1, -1
	if c.chainOn {
		e.BudgetIn, e.BudgetOut = c.split.First+c.split.Attempts-1, c.split.BudgetFor(n)
	}
	if res.err != nil {
		e.Error = res.cond.String()
	} else {
		e.Status = res.resp.StatusCode
		if c.grpc {
			e.GRPCStatus = res.code
			if res.first != nil {
				e.GRPCStatus = codeOK
			}
		}
	}
	if !d.Retry && d.Reason != policy.ReasonNone {
		e.Exhausted = d.Reason.String()
	}
	e.SetMethod([]byte(r.Method))
	e.SetAuthority([]byte(r.Host))
	e.SetPath([]byte(r.URL.Path))
	e.SetTraceparent([]byte(r.Header.Get("Traceparent")))
	e.SetKey([]byte(c.key))
	e.SetRequestID([]byte(r.Header.Get("X-Request-Id")))
	if c.hadBag {
		e.SetStormOp([]byte(c.bag))
	} else {
		e.SetStormOp([]byte(r.Header.Get(hdrBaggage)))
	}
	w.Commit(e)
}
