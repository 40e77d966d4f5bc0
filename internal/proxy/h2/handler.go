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
	"golang.org/x/net/http2/hpack"

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
	Dedup    bool                // deduplicates by Idempotency-Key: any key makes a POST retryable (policy.KeyRetryable)
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
	// PingInterval: a client connection nothing was read from for that
	// long is sent a PING; 0: 60s (as grpc-go's keepalive finds a dead
	// peer). PingTimeout: unanswered that long, the connection is closed;
	// 0: 15s. Both engines.
	PingInterval time.Duration
	PingTimeout  time.Duration
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
	// Engine is the HTTP/2 implementation (--h2-engine): EngineRelay, the
	// frame relay (relay*.go), or EngineStdlib ("" too), net/http's
	// server and transport.
	Engine string
}

// The engines Config.Engine names.
const (
	EngineStdlib = "stdlib"
	EngineRelay  = "relay"
)

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
	relay   bool              // Engine is EngineRelay
	rmu     sync.Mutex
	rconns  map[*cconn]struct{} // the relay's client connections
	rpools  sync.Map            // the relay's upstream addresses -> *rpool
	// The relay's connections with writes not flushed yet (relay_write.go).
	dmu        sync.Mutex
	dirty      []*batchConn
	spareDirty []*batchConn
	dtimer     *time.Timer
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
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = 60 * time.Second
	}
	if cfg.PingTimeout <= 0 {
		cfg.PingTimeout = 15 * time.Second
	}
	if cfg.Dial == nil {
		d := &net.Dialer{Timeout: cfg.PerTryTimeout}
		cfg.Dial = d.DialContext
	}
	switch cfg.Engine {
	case "", EngineStdlib, EngineRelay:
	default:
		return nil, fmt.Errorf("h2 engine %q: must be %s or %s", cfg.Engine, EngineRelay, EngineStdlib)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("h2 metrics: %w", err)
	}
	h := &Handler{cfg: cfg, m: m, methods: map[string]bool{}, unknown: &Upstream{Name: "unknown", Attempts: 1}, relay: cfg.Engine == EngineRelay}
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
			SendPingTimeout: cfg.PingInterval,
			PingTimeout:     cfg.PingTimeout,
		},
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if sc, ok := c.(*servedConn); ok {
				return context.WithValue(ctx, targetKey{}, sc.target)
			}
			return ctx
		},
		ErrorLog: cfg.Logger,
	}
	if !h.relay {
		go func() { _ = h.srv.Serve(h.ln) }()
	}
	h.dtimer = time.AfterFunc(time.Hour, h.flushDirty)
	h.dtimer.Stop()
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
	if h.relay {
		h.serveRelay(c, target)
		return
	}
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
	if h.relay {
		h.relayShutdown(ctx.Done())
		h.conns.Wait()
		return ctx.Err()
	}
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

// call is one stream of the stdlib engine: the shared policy state
// (callState, decide.go) and net/http's request and response writer.
type call struct {
	*callState
	w    http.ResponseWriter
	r    *http.Request
	body *replay
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
	cs, own := h.newCall(hostPort, r.Method, r.Host, r.URL.Path, r.Header, r.ContentLength, isGRPC(r.Header))
	c := &call{callState: cs, w: w, r: r}
	if own != nil {
		c.writeOwn(own)
		return
	}
	c.run()
}

// writeOwn writes one of the proxy's own answers.
func (c *call) writeOwn(a *ownAnswer) {
	wh := c.w.Header()
	for _, f := range a.fields {
		wh.Set(f.Name, f.Value)
	}
	c.w.WriteHeader(a.status)
	if a.body != "" {
		_, _ = io.WriteString(c.w, a.body)
	}
}

// attemptResult is what one attempt ended in.
type attemptResult struct {
	outcome
	resp  *http.Response
	first []byte // gRPC: the first bytes of the response body (committed), nil if none
	bufp  *[]byte
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
		ok, probe := c.allow(now)
		if !ok {
			if last == nil {
				c.writeOwn(c.ownAnswer(policy.ReasonBreaker, "circuit breaker open", 0))
				return
			}
			// The last failure is the answer, as for HTTP/1.1.
			c.finish(last, policy.ReasonBreaker, attempt-1)
			return
		}
		if last != nil {
			last.discard()
			last = nil
		}
		if c.hasDL && !time.Now().Before(c.dl) {
			c.writeOwn(c.deadlineAnswer())
			return
		}
		c.attemptStart = now
		res := c.attempt(ctx, attempt)
		if res.err != nil && r.Context().Err() != nil {
			// The client reset the stream or its connection ended (the
			// request's own context, not the deadline's): judged without
			// a retry decision, as the relay does.
			res.err, res.cond = context.Canceled, policy.CondReset
			c.judgeGone(attempt, probe, &res.outcome)
			res.discard()
			return
		}
		d := c.judge(attempt, probe, c.body == nil || c.body.replayable(), &res.outcome)
		if d.Retry {
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
						c.writeOwn(c.deadlineAnswer())
					}
					return
				}
			}
			continue
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
	var setBuf [5]hpack.HeaderField
	for _, f := range c.attemptHeaders(n, setBuf[:0]) {
		hdr[http.CanonicalHeaderKey(f.Name)] = []string{f.Value}
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
			return &attemptResult{outcome: outcome{err: err, cond: policy.CondReset}}
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
	res := &attemptResult{resp: resp, outcome: outcome{err: err}}
	if err == nil && !stopped && timedOut.Load() {
		_ = resp.Body.Close()
		res.resp, res.err = nil, context.DeadlineExceeded
	}
	if res.err != nil {
		cancel()
		res.cond = classify(res.err, timedOut.Load())
		if timedOut.Load() {
			// The per-try timeout cancelled it: say so, not "context canceled".
			res.err = context.DeadlineExceeded
		}
		return res
	}
	// From here the attempt lives as long as the call: cancel goes with the body.
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	res.status = resp.StatusCode
	res.exhausted = resp.Header.Get(policy.HeaderExhausted) != ""
	if !c.grpc {
		res.retryAfter = resp.Header.Get(hdrRetryAfter)
		return res
	}
	res.pushback = resp.Header.Values(hdrGRPCPushback)
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
			res.first, res.bufp, res.committed = (*bufp)[:k], bufp, true
			return res
		}
		if rerr == io.EOF {
			bufPool.Put(bufp)
			res.eof, res.inTrails = true, true
			res.exhausted = res.exhausted || resp.Trailer.Get(policy.HeaderExhausted) != ""
			if len(res.pushback) == 0 {
				res.pushback = resp.Trailer.Values(hdrGRPCPushback)
			}
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
		c.writeOwn(c.giveUp(res.err, res.cond, reason, attempts))
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
	var extra [2]hpack.HeaderField
	for _, f := range c.headerExtras(&res.outcome, reason, extra[:0]) {
		wh[http.CanonicalHeaderKey(f.Name)] = []string{f.Value}
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
		for _, f := range c.brokenTrailers(broken) {
			wh.Set(http.TrailerPrefix+f.Name, f.Value)
		}
		return
	}
	for k, vs := range resp.Trailer {
		wh[http.TrailerPrefix+k] = vs
	}
	for _, f := range c.trailerExtras(&res.outcome, reason, resp.Trailer.Values(hdrGRPCStatus), extra[:0]) {
		wh.Set(http.TrailerPrefix+f.Name, f.Value)
	}
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
