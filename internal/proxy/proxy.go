package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
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

	"github.com/valyala/fasthttp"

	"github.com/retrycap/retrycap/internal/proxy/policy"
)

// Header names the proxy reads or writes besides the chain ones in policy.
const (
	headerIdempotencyKey = "Idempotency-Key"
	headerBaggage        = "Baggage"
	headerRetryAfter     = "Retry-After"
)

// The headers the data path sets on every attempt, as canonical byte
// slices: SetCanonical skips the copy-and-normalise of the key that
// SetBytesV does each time.
var (
	keyBudget  = []byte(policy.HeaderBudget)
	keyBaggage = []byte(headerBaggage)
)

// upstream is one --upstreams entry, or the catch-all for unknown hosts.
type upstream struct {
	name     string
	attempts int
	known    bool
	hc       *fasthttp.HostClient // set when --resolve names it: one pool, no per-host lookup
	budget   *policy.RetryBudget
	breaker  *policy.Breaker
	m        *upMetrics
}

// Proxy is one retrycap-proxy instance. Create it with New, run it with
// Start (or Run), stop it with Shutdown.
type Proxy struct {
	cfg     *Config
	pol     policy.Policy
	ups     []*upstream
	unknown *upstream
	client  *fasthttp.Client // for hosts without a dedicated HostClient
	// transport reads an upstream's status and headers within the per-try
	// timeout and leaves the body to stream (stream.go).
	transport *streamTransport
	ledger    *policy.KeyLedger
	methods   [][]byte
	m         *metrics
	srv       *fasthttp.Server
	admin     *http.Server
	logger    *log.Logger

	dataLn, adminLn net.Listener
	selfPort        []byte // the data listener's port, for loop detection
	ready           atomic.Bool
	serveDone       chan error
	scratch         sync.Pool
}

type scratch struct {
	bag  []byte // copy of the incoming baggage value (all baggage headers, joined)
	out  []byte // rewritten baggage value
	num  []byte
	conn []byte // copy of the Connection header, whose tokens name hop-by-hop headers
}

// New builds a proxy from a validated Config. logger may be nil.
func New(cfg *Config, logger *log.Logger) (*Proxy, error) {
	if logger == nil {
		logger = log.New(io.Discard, "", 0)
	}
	p := &Proxy{
		cfg: cfg,
		pol: policy.Policy{RetryOn: cfg.RetryOn, BackoffBase: cfg.BackoffBase, BackoffMax: cfg.BackoffMax, Jitter: cfg.BackoffJitter},
		m:   newMetrics(), logger: logger,
		ledger: policy.NewKeyLedger(cfg.KeyTTL, 100000),
	}
	p.scratch.New = func() any { return &scratch{} }
	p.transport = &streamTransport{perTry: cfg.PerTryTimeout, idle: bodyIdleTimeout}
	for _, m := range cfg.RetryMethods {
		p.methods = append(p.methods, []byte(m))
	}
	p.client = &fasthttp.Client{
		Name:                      "",
		NoDefaultUserAgentHeader:  true,
		DisablePathNormalizing:    true,
		MaxConnsPerHost:           4096,
		MaxIdemponentCallAttempts: 1,
		RetryIfErr:                noRetry,
		Dial:                      p.dial,
		ReadBufferSize:            8192,
		Transport:                 p.transport,
	}
	for _, u := range cfg.Upstreams {
		up := &upstream{
			name: u.Name, attempts: cfg.attemptsFor(u), known: true,
			budget:  policy.NewRetryBudget(cfg.BudgetPercent, cfg.BudgetMinPerSecond, cfg.BudgetWindow),
			breaker: policy.NewBreaker(cfg.BreakerFailures, cfg.BreakerWindow, cfg.BreakerOpenFor),
		}
		if addr, ok := cfg.Resolve[u.Name]; ok {
			up.hc = p.hostClient(addr)
		}
		up.m = p.m.forUpstream(u.Name, up.budget, up.breaker)
		p.ups = append(p.ups, up)
	}
	p.unknown = &upstream{name: "unknown", attempts: 1}
	p.unknown.m = p.m.forUpstream("unknown", nil, nil)
	p.srv = &fasthttp.Server{
		Handler:                      p.handle,
		Name:                         "retrycap-proxy",
		NoDefaultServerHeader:        true,
		NoDefaultContentType:         true,
		NoDefaultDate:                true,
		DisablePreParseMultipartForm: true,
		LazyRequestTime:              true, // ctx.Time is unused: spare a clock read per request
		CloseOnShutdown:              true,
		IdleTimeout:                  90 * time.Second,
		MaxRequestBodySize:           maxRequestBody,
		ReadBufferSize:               8192,
		Logger:                       logger,
		ErrorHandler:                 requestError,
	}
	return p, nil
}

// requestError answers a request the server could not read, saying why;
// fasthttp's default answers 400 "Error when parsing request" to a body
// over MaxRequestBodySize too.
func requestError(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	var ne net.Error
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		ctx.Error(fmt.Sprintf("retrycap-proxy: request body larger than %d bytes\n", maxRequestBody), fasthttp.StatusRequestEntityTooLarge)
	case errors.As(err, &small):
		ctx.Error("retrycap-proxy: request header too large\n", fasthttp.StatusRequestHeaderFieldsTooLarge)
	case errors.As(err, &ne) && ne.Timeout():
		ctx.Error("retrycap-proxy: request timeout\n", fasthttp.StatusRequestTimeout)
	default:
		ctx.Error("retrycap-proxy: malformed request: "+err.Error()+"\n", fasthttp.StatusBadRequest)
	}
}

// maxRequestBody is the largest request body the proxy reads (it buffers
// bodies to replay them).
const maxRequestBody = 16 << 20

func noRetry(*fasthttp.Request, int, error) (bool, bool) { return false, false }

func (p *Proxy) hostClient(addr string) *fasthttp.HostClient {
	return &fasthttp.HostClient{
		Addr:                      addr,
		NoDefaultUserAgentHeader:  true,
		DisablePathNormalizing:    true,
		MaxConns:                  4096,
		MaxIdemponentCallAttempts: 1,
		RetryIfErr:                noRetry,
		Dial:                      p.dialDirect,
		ReadBufferSize:            8192,
		Transport:                 p.transport,
	}
}

// dialError marks a failure to connect, so it is classified as
// connect-failure rather than reset.
type dialError struct{ err error }

func (e *dialError) Error() string { return "dial: " + e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

func (p *Proxy) dialDirect(addr string) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, p.cfg.PerTryTimeout)
	if err != nil {
		return nil, &dialError{err}
	}
	return c, nil
}

// dial applies --resolve to hosts reached through the shared client.
func (p *Proxy) dial(addr string) (net.Conn, error) {
	return p.dialDirect(p.resolveAddr(addr))
}

// resolveAddr maps host:port through --resolve (by host name).
func (p *Proxy) resolveAddr(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if r, ok := p.cfg.Resolve[strings.ToLower(host)]; ok {
		return r
	}
	return addr
}

// match finds the upstream a request host names; nil if none.
func (p *Proxy) match(host []byte) *upstream {
	for _, u := range p.ups {
		if policy.MatchHost(host, u.name) {
			return u
		}
	}
	return nil
}

// isSelf reports whether host:port names the data listener: its port on a
// loopback, unspecified or "localhost" host, or on the listener's own host.
// A host without a port means 80.
func (p *Proxy) isSelf(hostPort []byte) bool {
	if len(p.selfPort) == 0 {
		return false
	}
	host := splitHostPort(hostPort)
	port := []byte("80")
	if len(host) < len(hostPort) {
		if i := bytes.LastIndexByte(hostPort, ':'); i >= 0 {
			port = hostPort[i+1:]
		}
	}
	if !bytes.Equal(port, p.selfPort) {
		return false
	}
	if bytes.EqualFold(host, []byte("localhost")) {
		return true
	}
	ip := net.ParseIP(string(host))
	if ip == nil {
		return false
	}
	if ip.IsLoopback() || ip.IsUnspecified() {
		return true
	}
	if a, ok := p.dataLn.Addr().(*net.TCPAddr); ok {
		return a.IP.Equal(ip)
	}
	return false
}

func splitHostPort(hp []byte) (host []byte) {
	if len(hp) > 0 && hp[0] == '[' {
		if i := bytes.IndexByte(hp, ']'); i > 0 {
			return hp[1:i]
		}
	}
	if i := bytes.LastIndexByte(hp, ':'); i >= 0 {
		return hp[:i]
	}
	return hp
}

func (p *Proxy) handle(ctx *fasthttp.RequestCtx) {
	if ctx.IsConnect() {
		p.connect(ctx)
		return
	}
	req := &ctx.Request
	hostPort := req.URI().Host()
	if len(hostPort) == 0 {
		ctx.Error("retrycap-proxy: request has no host", fasthttp.StatusBadRequest)
		return
	}
	up := p.match(splitHostPort(hostPort))
	if up == nil && p.isSelf(hostPort) {
		// A request addressed to the proxy itself (origin-form, or an app
		// whose NO_PROXY misses the loopback) would be forwarded to itself
		// until every connection is used up.
		ctx.Error("retrycap-proxy: request addressed to the proxy itself ("+string(hostPort)+"): loop refused; send requests for upstreams through HTTP_PROXY in absolute form", fasthttp.StatusLoopDetected)
		p.unknown.m.code(fasthttp.StatusLoopDetected)
		return
	}
	if req.Header.ConnectionUpgrade() {
		p.upgrade(ctx, up, hostPort)
		return
	}
	p.forward(ctx, up)
}

func (p *Proxy) methodRetryable(m []byte) bool {
	for _, x := range p.methods {
		if bytes.Equal(x, m) {
			return true
		}
	}
	return false
}

func newKey() []byte {
	var b [16]byte
	_, _ = rand.Read(b[:])
	out := make([]byte, 32)
	hex.Encode(out, b[:])
	return out
}

// forward runs one call: the attempt loop with every policy check.
func (p *Proxy) forward(ctx *fasthttp.RequestCtx, up *upstream) {
	p.m.inFlight.Add(1)
	defer p.m.inFlight.Add(-1)
	req := &ctx.Request
	resp := &ctx.Response
	known := up != nil
	if !known {
		up = p.unknown
	}
	cfg := p.cfg
	start := nowNanos()
	sc := p.scratch.Get().(*scratch)
	defer p.scratch.Put(sc)

	chainOn := cfg.ChainCap > 0
	n, hadBag, key := p.requestHeaders(&req.Header, sc)
	method := req.Header.Method()
	generated := false
	retryable := known && (p.methodRetryable(method) || len(key) > 0) && len(req.Body()) <= cfg.MaxReplayBytes
	if len(key) == 0 && cfg.Entrypoint && (bytes.Equal(method, []byte("POST")) || bytes.Equal(method, []byte("PATCH"))) {
		// Not retried here (the app did not ask for it), but the key lets
		// the client retry safely, and counts those retries against the cap.
		key = newKey()
		req.Header.SetBytesV(headerIdempotencyKey, key)
		generated = true
	} else if len(key) > 0 {
		key = append([]byte(nil), key...)
	}

	// The attempts the split reserves budget for: none beyond the first
	// when this hop can never retry, except for a generated key, whose
	// reservation is what the client's own retries will spend.
	splitAttempts := up.attempts
	if !retryable && !generated {
		splitAttempts = 1
	}
	ledgerOn := chainOn && cfg.Entrypoint && len(key) > 0
	if ledgerOn {
		n -= p.ledger.Spent(key, start)
		if n <= 0 {
			p.fail(ctx, up, policy.ReasonChain, "chain budget of this Idempotency-Key is spent")
			return
		}
	}
	split := policy.SplitBudget(splitAttempts, n)
	maxAttempts := up.attempts
	chainLimited := false
	if chainOn && split.Attempts < maxAttempts {
		maxAttempts, chainLimited = split.Attempts, true
	}
	if !retryable {
		maxAttempts = 1
	}
	if up.budget != nil {
		up.budget.Deposit(start)
	}
	deadline := start + int64(maxAttempts)*int64(cfg.PerTryTimeout)
	// One clock read before each attempt and one after: the breaker, the
	// ledger and the latency metric share them.
	attemptStart := start

	var lastErr error
	var lastCond policy.Condition
	for attempt := 1; ; attempt++ {
		if chainOn {
			b := split.BudgetFor(attempt)
			sc.num = policy.AppendInt(sc.num[:0], b)
			req.Header.SetCanonical(keyBudget, sc.num)
			if hadBag {
				sc.out = policy.AppendBaggage(sc.out[:0], sc.bag, b)
				req.Header.SetCanonical(keyBaggage, sc.out)
			}
			if ledgerOn {
				p.ledger.Add(key, b, attemptStart)
			}
		}
		probe := false
		if up.breaker != nil {
			var ok bool
			ok, probe = up.breaker.Allow(attemptStart)
			if !ok {
				up.m.denied[policy.ReasonBreaker].Inc()
				if attempt == 1 {
					p.fail(ctx, up, policy.ReasonBreaker, "circuit breaker open")
					return
				}
				p.giveUp(ctx, up, policy.ReasonBreaker, attempt-1, lastErr, lastCond, generated, key, sc)
				return
			}
		}
		var err error
		// The per-try timeout covers the status line and the headers (time
		// to first byte), all the retry decision needs; the body chosen for
		// the client streams afterwards under an idle timeout (stream.go).
		if up.hc != nil {
			err = up.hc.DoTimeout(req, resp, cfg.PerTryTimeout)
		} else {
			err = p.client.DoTimeout(req, resp, cfg.PerTryTimeout)
		}
		now := nowNanos()
		up.m.attempts.Inc()
		up.m.latency.Observe(float64(now-attemptStart) / 1e9)
		o := policy.Outcome{
			Attempt: attempt, MaxAttempts: maxAttempts, ChainLimited: chainLimited,
			Retryable: retryable, Remaining: time.Duration(deadline - now),
		}
		if err != nil {
			o.Cond = classify(err)
			lastErr, lastCond = err, o.Cond
		} else {
			lastErr, lastCond = nil, policy.CondNone
			o.Status = resp.StatusCode()
			seen := scanResponseHeaders(&resp.Header)
			o.ExhaustedResp = seen&seenExhausted != 0 && len(resp.Header.Peek(policy.HeaderExhausted)) > 0
			if (o.Status == 429 || o.Status == 503) && seen&seenRetryAfter != 0 {
				o.RetryAfter, o.HasRetryAfter = parseRetryAfter(resp.Header.Peek(headerRetryAfter), time.Now())
			}
		}
		if up.breaker != nil {
			if err != nil || o.Status >= 500 {
				up.breaker.Failure(now, probe)
			} else {
				up.breaker.Success(now, probe)
			}
		}
		d := p.pol.Decide(&o, up.budget, up.breaker, now)
		if d.Retry {
			// A streamed body of the answer being retried is dropped
			// unread by the next attempt's reset of resp (closing its
			// connection, fine for a failure); until then it stays, so
			// that a breaker refusing that attempt still returns it whole.
			up.m.retries.Inc()
			attemptStart = now
			if d.Wait > 0 {
				time.Sleep(d.Wait)
				attemptStart = nowNanos()
			}
			continue
		}
		if d.Reason != policy.ReasonNone {
			up.m.denied[d.Reason].Inc()
		}
		if !p.pol.Failed(&o) && err == nil {
			// Success or a non-retryable answer: pass it on as is.
			p.finish(ctx, up, generated, key, sc)
			return
		}
		p.giveUp(ctx, up, d.Reason, attempt, err, o.Cond, generated, key, sc)
		return
	}
}

// requestHeaders does the data path's work on the app's request headers:
// the chain budget from what the app propagated (n, and whether it sent
// baggage), the hop-by-hop headers deleted, and the Idempotency-Key.
func (p *Proxy) requestHeaders(h *fasthttp.RequestHeader, sc *scratch) (n int, hadBag bool, key []byte) {
	return p.requestHeadersSeen(h, scanRequestHeaders(h), sc)
}

// requestHeadersSeen is requestHeaders with the names present known
// (headers.go); seenAll looks every one up.
func (p *Proxy) requestHeadersSeen(h *fasthttp.RequestHeader, seen seen, sc *scratch) (n int, hadBag bool, key []byte) {
	if p.cfg.ChainCap > 0 {
		n, hadBag = p.incomingBudget(h, seen, sc)
	}
	// Hop-by-hop headers are addressed to this proxy and go no further
	// (read after the budget: a Connection-nominated budget was meant for it).
	stripHopByHop(h, seen, sc)
	if seen&seenIdempotencyKey != 0 {
		key = h.Peek(headerIdempotencyKey)
	}
	return n, hadBag, key
}

// incomingBudget resolves the chain budget n from every Retrycap-Budget
// header and every baggage header the app sent: the smallest well-formed
// value counts (a repeated header can only lower it, never raise it). When
// a header is repeated, all copies are deleted so that the single value the
// attempt loop sets is the only one a hop below can read. The baggage
// headers are joined into sc.bag (W3C allows splitting baggage over several
// headers); hadBag reports whether there was any.
func (p *Proxy) incomingBudget(h *fasthttp.RequestHeader, seen seen, sc *scratch) (n int, hadBag bool) {
	var budgets, bags [][]byte
	if seen&seenBudget != 0 {
		budgets = h.PeekAll(policy.HeaderBudget)
	}
	n = policy.IncomingBudget(nil, false, nil, false, p.cfg.ChainCap)
	for _, v := range budgets {
		n = policy.IncomingBudget(v, true, nil, false, n)
	}
	if len(budgets) > 1 {
		h.Del(policy.HeaderBudget)
	}
	if seen&seenBaggage != 0 {
		bags = h.PeekAll(headerBaggage)
	}
	sc.bag = sc.bag[:0]
	for i, v := range bags {
		if i > 0 {
			sc.bag = append(sc.bag, ',')
		}
		sc.bag = append(sc.bag, v...)
	}
	hadBag = len(bags) > 0
	if hadBag {
		n = policy.IncomingBudget(nil, false, sc.bag, true, n)
	}
	if len(bags) > 1 {
		h.Del(headerBaggage)
	}
	return n, hadBag
}

// hopByHop are the headers that describe one connection, not the request
// (RFC 9110 7.6.1, and the list net/http/httputil.ReverseProxy drops).
// Upgrade is not here: an upgrade request is tunnelled before forward.
var hopByHop = [...]struct {
	name string
	bit  seen
}{
	{"Connection", seenConnection}, {"Proxy-Connection", seenProxyConnection}, {"Keep-Alive", seenKeepAlive},
	{"Proxy-Authorization", seenProxyAuthorization}, {"Proxy-Authenticate", seenProxyAuthenticate},
	{"Te", seenTe}, {"Trailer", seenTrailer},
}

// stripHopByHop deletes the headers the Connection header nominates and the
// fixed hop-by-hop list. The server has already read Connection: close for
// the client side; the upstream connection is the proxy's own business.
func stripHopByHop(h *fasthttp.RequestHeader, seen seen, sc *scratch) {
	if seen&seenConnection != 0 {
		deleteNominated(h, sc)
	}
	for _, k := range hopByHop {
		if seen&k.bit != 0 {
			h.Del(k.name)
		}
	}
}

// connectionHeader is what request and response headers share for deleteNominated.
type connectionHeader interface {
	PeekAll(key string) [][]byte
	DelBytes(key []byte)
}

// deleteNominated deletes the headers the Connection header nominates (RFC 9110 7.6.1), other
// than its own close and keep-alive tokens. The list is collected into scratch first, since
// deleting while iterating PeekAll's slices would read freed memory.
func deleteNominated(h connectionHeader, sc *scratch) {
	sc.conn = sc.conn[:0]
	for _, v := range h.PeekAll("Connection") {
		sc.conn = append(sc.conn, v...)
		sc.conn = append(sc.conn, ',')
	}
	for rest := sc.conn; len(rest) > 0; {
		tok := rest
		if i := bytes.IndexByte(rest, ','); i >= 0 {
			tok, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		tok = bytes.TrimSpace(tok)
		if len(tok) > 0 && !bytes.EqualFold(tok, []byte("close")) && !bytes.EqualFold(tok, []byte("keep-alive")) {
			h.DelBytes(tok)
		}
	}
}

// stripResponseHopByHop does the same for the upstream's response.
func stripResponseHopByHop(h *fasthttp.ResponseHeader, sc *scratch) {
	stripResponseHopByHopSeen(h, scanResponseHeaders(h), sc)
}

func stripResponseHopByHopSeen(h *fasthttp.ResponseHeader, seen seen, sc *scratch) {
	if seen&seenConnection != 0 {
		deleteNominated(h, sc)
	}
	for _, k := range hopByHop {
		if k.name != "Trailer" && seen&k.bit != 0 { // Trailer announces the trailers the body carries: end to end
			h.Del(k.name)
		}
	}
	if seen&seenUpgrade != 0 {
		h.Del("Upgrade")
	}
}

// finish cleans the upstream response and counts it.
func (p *Proxy) finish(ctx *fasthttp.RequestCtx, up *upstream, generated bool, key []byte, sc *scratch) {
	resp := &ctx.Response
	stripResponseHopByHop(&resp.Header, sc)
	resp.Header.ResetConnectionClose()
	// "A failed response" is any the client may want to retry: a 5xx, a 429 (Too Many
	// Requests asks for exactly that) or a status --retry-on names.
	if st := resp.StatusCode(); generated && (st >= 500 || st == fasthttp.StatusTooManyRequests || p.pol.RetryOn.Status(st)) {
		resp.Header.SetBytesV(headerIdempotencyKey, key)
	}
	up.m.code(resp.StatusCode())
}

// giveUp ends a call whose last attempt failed: the last upstream response
// marked Retrycap-Exhausted when the reason is one of the four, or a 5xx
// made by the proxy when there was no response.
func (p *Proxy) giveUp(ctx *fasthttp.RequestCtx, up *upstream, reason policy.Reason, attempts int, err error, cond policy.Condition, generated bool, key []byte, sc *scratch) {
	if err == nil {
		if reason.Exhausts() {
			ctx.Response.Header.Set(policy.HeaderExhausted, reason.String())
		}
		p.finish(ctx, up, generated, key, sc)
		return
	}
	status := fasthttp.StatusServiceUnavailable
	if !reason.Exhausts() {
		status = fasthttp.StatusBadGateway
		if cond == policy.CondTimeout {
			status = fasthttp.StatusGatewayTimeout
		}
	}
	ctx.Response.Reset()
	ctx.Response.SetStatusCode(status)
	ctx.Response.Header.SetContentType("text/plain; charset=utf-8")
	if reason.Exhausts() {
		ctx.Response.Header.Set(policy.HeaderExhausted, reason.String())
	}
	msg := fmt.Sprintf("retrycap-proxy: upstream %s: %d attempt(s), last failed with %s (%v)", up.name, attempts, cond, err)
	if reason != policy.ReasonNone {
		msg += "; not retried: " + reason.String()
	}
	ctx.Response.SetBodyString(msg + "\n")
	if generated {
		ctx.Response.Header.SetBytesV(headerIdempotencyKey, key)
	}
	up.m.code(status)
}

// fail answers with the proxy's own 503 before any attempt was made.
func (p *Proxy) fail(ctx *fasthttp.RequestCtx, up *upstream, reason policy.Reason, why string) {
	ctx.Response.Reset()
	ctx.Response.SetStatusCode(fasthttp.StatusServiceUnavailable)
	ctx.Response.Header.SetContentType("text/plain; charset=utf-8")
	ctx.Response.Header.Set(policy.HeaderExhausted, reason.String())
	ctx.Response.SetBodyString("retrycap-proxy: upstream " + up.name + ": " + why + "\n")
	up.m.code(fasthttp.StatusServiceUnavailable)
}

// classify maps a transport error to a retryOn condition.
func classify(err error) policy.Condition {
	var de *dialError
	switch {
	case errors.As(err, &de), errors.Is(err, fasthttp.ErrDialTimeout), errors.Is(err, fasthttp.ErrNoFreeConns):
		return policy.CondConnectFailure
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return policy.CondTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return policy.CondTimeout
	}
	return policy.CondReset
}

// parseRetryAfter reads delay-seconds or an HTTP date.
func parseRetryAfter(v []byte, now time.Time) (time.Duration, bool) {
	if len(v) == 0 {
		return 0, false
	}
	if s, err := strconv.Atoi(strings.TrimSpace(string(v))); err == nil {
		if s < 0 {
			return 0, false
		}
		return time.Duration(s) * time.Second, true
	}
	t, err := http.ParseTime(string(v))
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d < 0 {
		d = 0
	}
	return d, true
}
