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

	"github.com/retrycap/retrycap/internal/proxy/h2"
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
	resolved string // the --resolve address of its name, if any
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
	h2        *h2.Handler // h2c: CONNECT tunnels to upstreams and prior knowledge (h2_seam.go)
	ledger    *policy.KeyLedger
	methods   [][]byte
	m         *metrics
	srv       *fasthttp.Server
	admin     *http.Server
	logger    *log.Logger

	dataLn, adminLn net.Listener
	loops           *loopEngine      // the event loops, unless --engine=goroutine
	handoff         *handoffListener // what the loops hand to srv
	selfPort        []byte           // the data listener's port, for loop detection
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
			up.resolved = addr
		}
		up.m = p.m.forUpstream(u.Name, up.budget, up.breaker)
		p.ups = append(p.ups, up)
	}
	if err := p.initH2(); err != nil {
		return nil, err
	}
	p.unknown = &upstream{name: "unknown", attempts: 1}
	p.unknown.m = p.m.forUpstream("unknown", nil, nil)
	p.srv = &fasthttp.Server{
		Handler:               p.handle,
		NoDefaultServerHeader: true, // a proxy passes the upstream's Server on, adds none

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

// forward runs one call on the connection's goroutine: the attempt loop of
// an exchange (exchange.go), blocking on each attempt and each backoff.
func (p *Proxy) forward(ctx *fasthttp.RequestCtx, up *upstream) {
	sc := p.scratch.Get().(*scratch)
	defer p.scratch.Put(sc)
	var x exchange
	defer x.end()
	if !x.begin(p, up, &ctx.Request, &ctx.Response, scanRequestHeaders(&ctx.Request.Header), sc) {
		return
	}
	for x.nextAttempt() {
		// The per-try timeout covers the status line and the headers (time
		// to first byte), all the retry decision needs; the body chosen for
		// the client streams afterwards under an idle timeout (stream.go).
		var err error
		if x.up.hc != nil {
			err = x.up.hc.DoTimeout(x.req, x.resp, p.cfg.PerTryTimeout)
		} else {
			err = p.client.DoTimeout(x.req, x.resp, p.cfg.PerTryTimeout)
		}
		retry, wait := x.afterAttempt(err)
		if !retry {
			return
		}
		// A streamed body of the answer being retried is dropped unread by
		// the next attempt's reset of resp (closing its connection, fine for
		// a failure); until then it stays, so that a breaker refusing that
		// attempt still returns it whole.
		if wait > 0 {
			time.Sleep(wait)
			x.waited()
		}
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
