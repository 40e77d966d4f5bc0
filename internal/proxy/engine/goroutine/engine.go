package goroutine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/valyala/fasthttp"

	"github.com/retrycap/retrycap/internal/proxy/forward"
)

// Engine is the goroutine engine of one proxy: fasthttp's server and the
// upstream clients, driving the forwarding core's exchanges.
type Engine struct {
	f      *forward.Forwarder
	srv    *fasthttp.Server
	client *fasthttp.Client // for hosts without a dedicated HostClient
	// hcs are the HostClients of the upstreams --resolve names (one pool,
	// no per-host lookup), by forward.Upstream.Index; nil for the others.
	hcs []*fasthttp.HostClient
	// transport reads an upstream's status and headers within the per-try
	// timeout and leaves the body to stream (stream.go).
	transport *streamTransport
	// answerOnce takes the transport's answer template from the first
	// request the server hands the handler.
	answerOnce sync.Once
	// bodyDue holds the request headers (by address: one per pooled
	// RequestCtx) of requests whose head was read and whose body is being
	// read, with when that began: a timeout meanwhile is --client-timeout's,
	// not --http-request-timeout's (fasthttp resets the request on a body
	// error, so the header cannot tell).
	bodyDue sync.Map
	// held holds, by request header (as bodyDue), the body budget a
	// Content-Length body over forward.BufferedBodyMax reserved when its
	// head was read (headerReceived), or the refusal when it did not fit:
	// taken by the handler (bodyDone) or the error handler (requestError).
	held sync.Map
	// badHeld counts the entries of held that are refusals by the head
	// (heldBody.bad). One whose connection ended unseen (fasthttp answers
	// nothing to a close) stays with its pooled header: while any is held,
	// headerReceived drops one from the header it is given, so that it
	// never answers a later request read into that header.
	badHeld atomic.Int64

	// ConnectHook, when set (before Serve), is offered every hijacked
	// CONNECT tunnel first, with the client connection, the CONNECT target
	// and its --resolve address: it returns true when it served the
	// tunnel (it answered the CONNECT itself), false, having done nothing,
	// to leave it to the blind tunnel. Package proxy sets it to the h2c
	// path's (h2_seam.go).
	ConnectHook func(c net.Conn, target, addr string) bool

	// watchErr: a hang-up watch that could not start is logged once.
	watchErr sync.Once

	// served holds the listeners Serve was given and stopped whether
	// Shutdown ran: fasthttp's Shutdown returns at once when its Serve has
	// not registered a listener yet (a SIGTERM right after start, or a
	// Serve goroutine not yet scheduled), and that Serve would then accept
	// for good; so Shutdown closes them itself, and a Serve after it
	// serves nothing.
	servedMu sync.Mutex
	served   []net.Listener
	stopped  bool
}

// New builds the engine on the forwarding core.
func New(f *forward.Forwarder) *Engine {
	cfg := f.Cfg
	e := &Engine{f: f}
	e.transport = &streamTransport{f: f, perTry: cfg.PerTryTimeout, idle: f.Cfg.StreamIdle(), maxIdle: cfg.UpstreamIdleTimeout}
	e.client = &fasthttp.Client{
		Name:                      "",
		NoDefaultUserAgentHeader:  true,
		DisablePathNormalizing:    true,
		MaxConnsPerHost:           4096,
		MaxIdemponentCallAttempts: 1,
		RetryIfErr:                noRetry,
		Dial:                      e.dial,
		ReadBufferSize:            8192,
		Transport:                 e.transport,
		// Pooled connections idle longer than this are closed, not reused
		// (RoundTrip checks each one it takes, too).
		MaxIdleConnDuration: cfg.UpstreamIdleTimeout,
		ConfigureClient: func(hc *fasthttp.HostClient) error {
			hc.SecureErrorLogMessage = true // as hostClient's
			return nil
		},
	}
	e.hcs = make([]*fasthttp.HostClient, len(f.Upstreams))
	for i, up := range f.Upstreams {
		if up.Resolved != "" {
			e.hcs[i] = e.hostClient(up.Resolved)
		}
	}
	e.srv = &fasthttp.Server{
		Handler:               e.Handler,
		NoDefaultServerHeader: true, // a proxy passes the upstream's Server on, adds none

		NoDefaultContentType:         true,
		NoDefaultDate:                true,
		DisablePreParseMultipartForm: true,
		LazyRequestTime:              true, // ctx.Time is unused: spare a clock read per request
		CloseOnShutdown:              true,
		// --http-request-timeout bounds a connection's first request from
		// the accept, and every later one from its first byte, up to the end
		// of its head; HeaderReceived then gives the body --client-timeout.
		// --keepalive-timeout bounds the wait between requests.
		ReadTimeout:        cfg.HTTPRequestTimeout,
		IdleTimeout:        cfg.KeepAliveTimeout,
		HeaderReceived:     e.headerReceived,
		ExpectHandler:      e.expect,
		MaxRequestBodySize: forward.MaxRequestBody,
		ReadBufferSize:     8192,
		Logger:             serverLog{l: f.Logger},
		// Parse errors without the head they refused ("contents: ...", up
		// to 400 of its bytes: cookies, tokens): requestError answers in
		// the proxy's words, serverLog logs a bounded excerpt.
		SecureErrorLogMessage: true,
		ErrorHandler:          e.requestError,
	}
	return e
}

// Serve serves the connections ln accepts until Shutdown. Accepting pauses
// (with a backoff) while descriptors are exhausted, rather than ending.
func (e *Engine) Serve(ln net.Listener) error {
	e.servedMu.Lock()
	if e.stopped {
		e.servedMu.Unlock()
		_ = ln.Close()
		return nil
	}
	e.served = append(e.served, ln)
	e.servedMu.Unlock()
	return e.srv.Serve(&pauseListener{Listener: ln, e: e, f: e.f, pause: &e.f.Accept})
}

// ServeConn serves the HTTP/1.1 requests on c until it closes, as a
// connection of the listener (through the pre-parser): the inside of a
// CONNECT tunnel to a known upstream that carries plain HTTP/1.1.
func (e *Engine) ServeConn(c net.Conn) error { return e.srv.ServeConn(e.newHeadConn(c)) }

// Shutdown stops the server: in-flight requests may finish until ctx ends.
// At its end the answers whose bodies still stream are cut ("cut":"proxy":
// fasthttp leaves its connections be) and their ends waited for a moment,
// so that their lines reach the access log, which closes after the drain.
func (e *Engine) Shutdown(ctx context.Context) error {
	e.servedMu.Lock()
	e.stopped = true
	e.servedMu.Unlock()
	err := e.srv.ShutdownWithContext(ctx)
	// After fasthttp's own close (a second close's error is not ours to
	// report): a listener its Serve had not registered yet closes here,
	// and that Serve returns at its first Accept.
	e.servedMu.Lock()
	for _, ln := range e.served {
		_ = ln.Close()
	}
	e.servedMu.Unlock()
	if err != nil && ctx.Err() != nil {
		e.transport.cutBodies()
		forward.WaitBounded(&e.transport.bodyWG, forward.CutWait)
	}
	return err
}

// requestError answers a request the server could not read, saying why;
// fasthttp's default answers 400 "Error when parsing request" to a body
// over MaxRequestBodySize too.
func (e *Engine) requestError(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	// fasthttp's ErrTimeout (a trailer section cut off) has Timeout but
	// not Temporary: no net.Error, it was answered 400 "the request cannot
	// be parsed".
	var ne interface{ Timeout() bool }
	// The connection closes after this answer: its budget is released,
	// and what was read of its body dropped (not pooled: bodyDone).
	ctx.Request.ReleaseBody(forward.BufferedBodyMax)
	if closeWaitGone(ctx.Conn()) {
		// Its body waited for budget when the connection ended (after a
		// 100 Continue: fasthttp calls this for any error there). Closed
		// now, nothing is written: no answer reaches anyone, and no close
		// lingers for a client that is gone.
		return
	}
	// Its client may still be sending: the close lingers.
	lingerAfterRefusal(ctx.Conn())
	if bad := e.takeBad(&ctx.Request.Header); bad != nil {
		// A head refused whatever its body (headerReceived): before the
		// body's size (413, the budget's 503) and before a URI fasthttp
		// could not parse, in the handler's order, which is the loop's.
		bad.set(ctx)
		return
	}
	budget := e.takeHeld(&ctx.Request.Header)
	if budget != "" {
		e.f.LogBudgetRefusal(&ctx.Request.Header, nil)
	}
	if b := budgetRefused(ctx.Conn()); b != "" {
		budget = b // logged by the pre-parser: fasthttp reset the header on the body's error
	}
	switch why := bodyRefusedWhy(ctx.Conn()); {
	case budget != "":
		// The body did not fit in --max-buffered-body-bytes: 503, nothing
		// sent upstream.
		forward.SetBudgetAnswer(&ctx.Response, budget)
	case why != "":
		// The pre-parser refused the request's chunked body (trailers with
		// a bare LF, a chunk line or framing over Go's bounds); fasthttp
		// reports another error for it. The loop's answer, as for a head.
		refuseParsed(ctx, why)
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		refuse(ctx, fasthttp.StatusRequestEntityTooLarge, fmt.Sprintf("retrycap-proxy: request body larger than %d bytes\n", forward.MaxRequestBody))
	case errors.As(err, &small):
		refuse(ctx, fasthttp.StatusRequestHeaderFieldsTooLarge, "retrycap-proxy: request header too large\n")
	case errors.As(err, &ne) && ne.Timeout():
		kind, what := forward.TimeoutHTTPRequest, "request head not received within --http-request-timeout"
		if e.bodyTimedOut(ctx) {
			kind, what = forward.TimeoutClient, "request body not received within --client-timeout"
		}
		e.f.M.Timeouts.WithLabelValues(kind).Inc()
		refuse(ctx, fasthttp.StatusRequestTimeout, "retrycap-proxy: request timeout: "+what+"\n")
	default:
		// In the proxy's words (forward.Reason): fasthttp's message quotes
		// the refused bytes, which the answer would reflect. The loop's
		// answer to the heads it refuses itself, byte for byte (the
		// server's response, not yet written to, is fresh: ctx.Error would
		// reset it, and with it the server's NoDefaultDate).
		refuseParsed(ctx, forward.Reason(err, "the request cannot be parsed"))
	}
}

// serverLog is the server's logger: fasthttp logs the error of every
// connection it could not serve ("error when serving connection ...:
// <err>"), whose text quotes the bytes refused; each error is logged as
// forward.LogExcerpt words it (the reason, and fasthttp's message bounded
// and escaped).
type serverLog struct{ l fasthttp.Logger }

func (s serverLog) Printf(format string, args ...any) {
	for i, a := range args {
		if err, ok := a.(error); ok {
			args[i] = forward.LogExcerpt(err)
		}
	}
	s.l.Printf(format, args...)
}

// headerReceived gives a request's body --client-timeout, from the end of
// its head, and notes when that began (bodyDue).
func (e *Engine) headerReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	cfg := fasthttp.RequestConfig{ReadTimeout: e.f.Cfg.ClientTimeout}
	if e.badHeld.Load() > 0 {
		e.takeBad(h) // left by a connection that ended unseen
	}
	n := h.ContentLength()
	if n != 0 {
		e.bodyDue.Store(h, time.Now().UnixNano())
	}
	if n > 0 || n == -1 { // a body: a length, or chunked (-2: none)
		if bad, ok := headRefusal(h); ok {
			// Refused by its head whatever its body: the loop refuses such
			// a head before it reserves or reads a byte of the body, and
			// so does this engine now (the body's size was judged first:
			// the budget's 503 or the 413 answered a malformed request;
			// and a head the handler would refuse waited for its whole
			// body, or for --client-timeout's 408). fasthttp refuses the
			// body unread (ErrBodyTooLarge), and requestError (or expect)
			// answers this refusal.
			e.takeHeld(h) // left by a connection that ended unseen
			e.held.Store(h, heldBody{bad: &bad})
			e.badHeld.Add(1)
			cfg.MaxRequestBodySize = 1
			return cfg
		}
	}
	if n > forward.BufferedBodyMax && n <= forward.MaxRequestBody {
		// Reserved here, not by the pre-parser: fasthttp allocates the
		// body's buffer as it starts reading it, so a refusal must come
		// before. A larger body is fasthttp's 413, unread; a smaller one's
		// is the pre-parser's (frame).
		e.takeHeld(h) // left by a connection that ended unseen (closed under its read)
		r, hold := int64(n), &forward.Hold{}
		if ok, inUse := e.f.Bodies.Reserve(hold, r); ok {
			e.held.Store(h, heldBody{h: hold})
			// A buffer of exactly n: fasthttp makes one rounded up to a
			// power of two (appendBodyFixedSize) unless the request's has
			// room, so a 15 MiB body held 16 MiB and two no longer fitted
			// in the 30 MiB large bodies may hold of the default budget.
			requestOf(h).SwapBody(make([]byte, 0, n))
		} else {
			e.held.Store(h, heldBody{refusal: e.f.Bodies.RefusedBody(hold, r, int64(n), inUse)})
			// fasthttp refuses it unread (ErrBodyTooLarge; requestError
			// answers the budget's 503), its buffer never allocated.
			cfg.MaxRequestBodySize = 1
		}
	}
	return cfg
}

// requestOf is the request whose header h is: fasthttp's server calls
// HeaderReceived, the one caller of headerReceived, with
// &ctx.Request.Header (server.go, serveConn), and gives it no other way to
// reach the request before it reads the body.
func requestOf(h *fasthttp.RequestHeader) *fasthttp.Request {
	return (*fasthttp.Request)(unsafe.Add(unsafe.Pointer(h), -int(unsafe.Offsetof(fasthttp.Request{}.Header))))
}

// expect decides an Expect: 100-continue request's 100 (fasthttp's server
// writes it, then reads the body): a body refused by its head alone (a
// Content-Length over forward.MaxRequestBody; one whose reservation
// headerReceived or the pre-parser refused) gets its final answer instead,
// and the connection closes with the body never asked for (RFC 9110
// 10.1.1; nginx answers its 413 so). With the 100 first, the client
// uploaded into a closing connection and its upload's reset could take
// the answer with it. The answer is set on the response here, the same
// bytes requestError writes when the refusal comes with the body;
// fasthttp then sets the same status and Connection: close.
func (e *Engine) expect(ctx *fasthttp.RequestCtx) int {
	status := e.expectStatus(ctx)
	if status != fasthttp.StatusContinue {
		// A client that stops waiting for the 100 sends its body anyway.
		lingerAfterRefusal(ctx.Conn())
	}
	return status
}

func (e *Engine) expectStatus(ctx *fasthttp.RequestCtx) int {
	if bad := e.takeBad(&ctx.Request.Header); bad != nil {
		bad.set(ctx)
		return bad.code
	}
	if ctx.Request.Header.ContentLength() > forward.MaxRequestBody {
		refuse(ctx, fasthttp.StatusRequestEntityTooLarge, fmt.Sprintf("retrycap-proxy: request body larger than %d bytes\n", forward.MaxRequestBody))
		return fasthttp.StatusRequestEntityTooLarge
	}
	budget := e.takeHeldRefusal(&ctx.Request.Header)
	if budget != "" {
		e.f.LogBudgetRefusal(&ctx.Request.Header, nil)
	} else {
		budget = expectRefused(ctx.Conn()) // logged by the pre-parser
	}
	if budget != "" {
		forward.SetBudgetAnswer(&ctx.Response, budget)
		return fasthttp.StatusServiceUnavailable
	}
	return fasthttp.StatusContinue
}

// takeHeldRefusal is takeHeld for a refused body only: a reservation stays
// with its request, whose body is read next.
func (e *Engine) takeHeldRefusal(h *fasthttp.RequestHeader) string {
	if v, ok := e.held.Load(h); !ok || v.(heldBody).refusal == "" {
		return ""
	}
	return e.takeHeld(h)
}

// heldBody is a Content-Length body's reservation (h) or refusal, or the
// refusal of a request with a body by its head (bad: headerReceived).
type heldBody struct {
	h       *forward.Hold
	refusal string
	bad     *headAnswer
}

// takeBad takes h's refusal by its head (headRefusal), nil if none; any
// other entry of h is left.
func (e *Engine) takeBad(h *fasthttp.RequestHeader) *headAnswer {
	if v, ok := e.held.Load(h); !ok || v.(heldBody).bad == nil {
		return nil
	}
	v, ok := e.held.LoadAndDelete(h)
	hb, _ := v.(heldBody)
	if ok && hb.bad != nil {
		e.badHeld.Add(-1)
	}
	return hb.bad
}

// takeHeld takes h's reservation, released, and returns its refusal ("" if
// it was none).
func (e *Engine) takeHeld(h *fasthttp.RequestHeader) string {
	v, ok := e.held.LoadAndDelete(h)
	if !ok {
		return ""
	}
	hb, _ := v.(heldBody)
	if hb.h != nil {
		e.f.Bodies.ReleaseFreed(hb.h)
	}
	if hb.bad != nil {
		e.badHeld.Add(-1)
	}
	return hb.refusal
}

// bodyTimedOut reports whether a timeout on ctx's connection is its body's:
// a head was read on this connection (since it opened: the header, like
// ctx, is pooled across connections) and its body was being read.
func (e *Engine) bodyTimedOut(ctx *fasthttp.RequestCtx) bool {
	v, ok := e.bodyDue.LoadAndDelete(&ctx.Request.Header)
	since, _ := v.(int64)
	return ok && since >= ctx.ConnTime().UnixNano()
}

func noRetry(*fasthttp.Request, int, error) (bool, bool) { return false, false }

func (e *Engine) hostClient(addr string) *fasthttp.HostClient {
	return &fasthttp.HostClient{
		Addr:                      addr,
		NoDefaultUserAgentHeader:  true,
		DisablePathNormalizing:    true,
		MaxConns:                  4096,
		MaxIdemponentCallAttempts: 1,
		RetryIfErr:                noRetry,
		Dial:                      e.dialDirect,
		ReadBufferSize:            8192,
		Transport:                 e.transport,
		MaxIdleConnDuration:       e.f.Cfg.UpstreamIdleTimeout,
		// Header errors without the answer's bytes ("contents: ..."): an
		// answer head cut short by the upstream's close went into the
		// client's 502 with up to 400 of its bytes.
		SecureErrorLogMessage: true,
	}
}

func (e *Engine) dialDirect(addr string) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, e.f.Cfg.PerTryTimeout)
	if err != nil {
		return nil, &forward.DialError{Err: err}
	}
	if e.f.IsSelfConn(c) {
		// A name that resolved to the proxy's own listener.
		_ = c.Close()
		return nil, &forward.DialError{Err: &forward.LoopError{Addr: addr}}
	}
	return newUpConn(c), nil
}

// dial applies --resolve to hosts reached through the shared client.
func (e *Engine) dial(addr string) (net.Conn, error) {
	return e.dialDirect(e.f.ResolveAddr(addr))
}

// Handler is the server's request handler.
func (e *Engine) Handler(ctx *fasthttp.RequestCtx) {
	// The header the server prepares for each answer carries its
	// NoDefaultDate, which fasthttp's client clears on the response it
	// fills (and exports no setter for): the transport restores it from
	// this copy before it reads an upstream's head, so that the answer
	// passes the upstream's Date on and adds none.
	e.answerOnce.Do(func() { ctx.Response.Header.CopyTo(&e.transport.answer) })
	if ctx.Request.Header.ContentLength() != 0 {
		e.bodyDue.Delete(&ctx.Request.Header) // the body is in
	}
	servedRequest(ctx.Conn())
	if nextWaits(ctx.Conn()) {
		// A handler's write deadline has the server flush the answer
		// (none is set: zero is no deadline), as it does when nothing
		// follows: the client may wait for it before it sends the next
		// body (Go's server and the loop answer so).
		_ = ctx.SetWriteDeadline(time.Time{})
	}
	// The request's body is not needed once the handler is done (an answer
	// that streams on reads only the upstream): its budget is released,
	// and its buffer dropped rather than left pooled with the request.
	defer e.bodyDone(ctx)
	// A head the proxy does not read (HAProxy answers these 400 too), and
	// the HTTP version (forward.CheckVersion).
	msg := forward.BadHeaderLines(ctx.Request.Header.RawHeaders())
	if msg == "" {
		msg = forward.CheckTarget(ctx.Request.Header.Host(), ctx.Request.Header.RequestURI())
	}
	if msg != "" {
		refuseParsed(ctx, msg)
		return
	}
	switch forward.CheckVersion(ctx.Request.Header.Protocol()) {
	case forward.VersionAs11:
		ctx.Request.Header.SetProtocol("HTTP/1.1")
	case forward.VersionUnsupported:
		forward.SetOwnAnswer(&ctx.Response, fasthttp.StatusHTTPVersionNotSupported, versionRefusal(ctx.Request.Header.Protocol()), true)
		return
	}
	if ctx.IsConnect() {
		e.connect(ctx)
		return
	}
	req := &ctx.Request
	hostPort := req.URI().Host()
	host := forward.SplitHostPort(hostPort)
	if len(host) == 0 {
		// No host, or a port alone (":80"): an http URI with an empty
		// host is invalid (RFC 9110 4.2.1); dialled, it failed in words
		// naming an address nobody wrote (":80:80"). The loop hands such
		// a request over as to an unknown host.
		refuse(ctx, fasthttp.StatusBadRequest, noHostRefusal)
		return
	}
	up := e.f.Match(host)
	if up == nil && e.f.IsSelf(hostPort) {
		// A request addressed to the proxy itself (origin-form, or an app
		// whose NO_PROXY misses the loopback) would be forwarded to itself
		// until every connection is used up.
		refuse(ctx, fasthttp.StatusLoopDetected, "retrycap-proxy: request addressed to the proxy itself ("+string(hostPort)+"): loop refused; send requests for upstreams through HTTP_PROXY in absolute form\n")
		e.f.Unknown.M.Code(fasthttp.StatusLoopDetected)
		return
	}
	if up != nil && e.f.IsSelf([]byte(e.f.TargetOf(up, hostPort))) {
		// A known upstream that resolves to the proxy's own address
		// (--upstreams localhost=2 with the proxy's port, or a --resolve).
		refuse(ctx, fasthttp.StatusLoopDetected, forward.SelfLoopBody("upstream "+up.Name+" ("+e.f.TargetOf(up, hostPort)+")"))
		up.M.Code(fasthttp.StatusLoopDetected)
		return
	}
	if forward.H2CUpgrade(&req.Header) {
		// Upgrade: h2c never becomes a tunnel (it would carry its streams
		// around the retry policy, their chain budget unclamped): the
		// request is served as HTTP/1.1, without its upgrade fields.
		sc := e.f.GetScratch()
		forward.DropH2CUpgrade(&req.Header, sc)
		e.f.PutScratch(sc)
	} else if req.Header.ConnectionUpgrade() {
		e.upgrade(ctx, up, hostPort)
		return
	}
	e.forward(ctx, up)
	if !ctx.Request.Header.IsHTTP11() {
		e.http10(ctx)
	}
}

// bodyDone releases the budget of ctx's request body, whose buffer goes
// with it: a large one is dropped, not kept by the pooled request until the
// next request on some connection (fasthttp pools buffers of any size until
// its pool calibrates), so that the bytes released are bytes freed.
func (e *Engine) bodyDone(ctx *fasthttp.RequestCtx) {
	if len(ctx.Request.Body()) > forward.BufferedBodyMax {
		ctx.Request.ReleaseBody(forward.BufferedBodyMax)
	}
	e.takeHeld(&ctx.Request.Header)
	requestDone(ctx.Conn())
}

// refuse answers a request the proxy refuses with code and body, its own
// answer (forward.SetOwnAnswer: the loop's bytes, no Date). ctx.Error
// would reset the answer, and with it the server's NoDefaultDate: the 400
// to a request without a host, the 408, 413, 431, 505, the 508s and the
// CONNECT and upgrade refusals carried a Date the loop's answers have not.
// The response must be the one the server prepared (Engine.refuseReset
// for one an upstream's answer was read into).
func refuse(ctx *fasthttp.RequestCtx, code int, body string) {
	forward.SetOwnAnswer(&ctx.Response, code, body, false)
}

// refuseReset is refuse on a response an upstream's answer was read into:
// reset, the server's header template (NoDefaultDate) copied back first.
func (e *Engine) refuseReset(ctx *fasthttp.RequestCtx, code int, body string) {
	ctx.Response.Reset()
	e.transport.answer.CopyTo(&ctx.Response.Header)
	refuse(ctx, code, body)
}

// refuseParsed answers a parsed head the proxy does not read as the loop
// does (forward.MalformedAnswer), and closes the connection.
func refuseParsed(ctx *fasthttp.RequestCtx, why string) {
	forward.SetOwnAnswer(&ctx.Response, fasthttp.StatusBadRequest, forward.MalformedBody(why), true)
}

// forward runs one call on the connection's goroutine: the attempt loop of
// an exchange (package forward), blocking on each attempt and each backoff.
func (e *Engine) forward(ctx *fasthttp.RequestCtx, up *forward.Upstream) {
	sc := e.f.GetScratch()
	defer e.f.PutScratch(sc)
	var x forward.Exchange
	defer x.End()
	if !x.Begin(e.f, up, &ctx.Request, &ctx.Response, forward.ScanRequestHeaders(&ctx.Request.Header), sc) {
		return
	}
	var hc *fasthttp.HostClient
	if u := x.Upstream(); u.Index >= 0 {
		hc = e.hcs[u.Index]
	}
	// The client's reset cuts the attempt's upstream connection at once
	// (cut.go); the transport finds the cut by the request.
	cut := e.watchClient(ctx.Conn())
	if cut != nil {
		e.transport.setCut(&ctx.Request, cut)
		defer e.endCut(ctx, cut)
	}
	if interimOK(ctx.Conn()) {
		e.transport.setInterim(&ctx.Request, &interimSink{x: &x, conn: ctx.Conn()})
		defer e.transport.setInterim(&ctx.Request, nil)
	}
	for x.NextAttempt() {
		// The per-try timeout covers the status line and the headers (time
		// to first byte), all the retry decision needs; the body chosen for
		// the client streams afterwards under an idle timeout (stream.go).
		var err error
		if hc != nil {
			err = hc.DoTimeout(&ctx.Request, &ctx.Response, x.TryTimeout())
		} else {
			err = e.client.DoTimeout(&ctx.Request, &ctx.Response, x.TryTimeout())
		}
		if errors.Is(err, fasthttp.ErrConnectionClosed) {
			// The upstream's close before a byte of a final answer (the
			// transport's bare io.EOF, which fasthttp's client rewords as
			// advice to its user): the 502 says it in the loop's words.
			err = forward.ClosedEarly(io.ErrUnexpectedEOF)
		}
		if cut.isGone() || (err != nil || ctx.Response.StatusCode() >= 500) && clientClosed(ctx.Conn()) {
			// The client reset its connection (the watch cut the attempt),
			// or closed its end while the attempt ran (fasthttp does not
			// watch it; looked at only for a failed attempt: one poll(2)):
			// its own cancellation, not the upstream's failure.
			x.ClientGone()
		}
		ub, streams := ctx.Response.BodyStream().(*upstreamBody)
		if streams && err == nil {
			x.Streams() // the line of an answer passed on waits for its body's end
		}
		retry, wait := x.AfterAttempt(err)
		if !retry {
			if streams && ctx.Response.BodyStream() == ub {
				ub.client = ctx // the server's writes of it are bounded too
				if ub.end = x.StreamEnd(); ub.end != nil {
					e.transport.trackBody(ub, ctx.Conn())
				}
			}
			return
		}
		// A streamed body of the answer being retried is dropped unread by
		// the next attempt's reset of resp (closing its connection, fine for
		// a failure); until then it stays, so that a breaker refusing that
		// attempt still returns it whole.
		if wait > 0 {
			if !cut.sleep(wait) {
				// The client reset its connection during the backoff: no
				// retry for nobody.
				ctx.SetConnectionClose()
				return
			}
			if clientClosed(ctx.Conn()) {
				// It closed its end during the backoff (a FIN: curl's
				// --max-time): no retry for a client that left; the last
				// answer for one that only half-closed.
				x.ClientLeft()
				ctx.SetConnectionClose()
				return
			}
			x.Waited()
		} else if cut.isGone() {
			ctx.SetConnectionClose()
			return
		}
	}
}
