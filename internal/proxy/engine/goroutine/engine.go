package goroutine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

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
}

// New builds the engine on the forwarding core.
func New(f *forward.Forwarder) *Engine {
	cfg := f.Cfg
	e := &Engine{f: f}
	e.transport = &streamTransport{perTry: cfg.PerTryTimeout, idle: forward.BodyIdleTimeout}
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
		IdleTimeout:                  forward.ClientIdleTimeout,
		MaxRequestBodySize:           forward.MaxRequestBody,
		ReadBufferSize:               8192,
		Logger:                       f.Logger,
		ErrorHandler:                 requestError,
	}
	return e
}

// Serve serves the connections ln accepts until Shutdown.
func (e *Engine) Serve(ln net.Listener) error { return e.srv.Serve(ln) }

// Shutdown stops the server: in-flight requests may finish until ctx ends.
func (e *Engine) Shutdown(ctx context.Context) error { return e.srv.ShutdownWithContext(ctx) }

// requestError answers a request the server could not read, saying why;
// fasthttp's default answers 400 "Error when parsing request" to a body
// over MaxRequestBodySize too.
func requestError(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	var ne net.Error
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		ctx.Error(fmt.Sprintf("retrycap-proxy: request body larger than %d bytes\n", forward.MaxRequestBody), fasthttp.StatusRequestEntityTooLarge)
	case errors.As(err, &small):
		ctx.Error("retrycap-proxy: request header too large\n", fasthttp.StatusRequestHeaderFieldsTooLarge)
	case errors.As(err, &ne) && ne.Timeout():
		ctx.Error("retrycap-proxy: request timeout\n", fasthttp.StatusRequestTimeout)
	default:
		ctx.Error("retrycap-proxy: malformed request: "+err.Error()+"\n", fasthttp.StatusBadRequest)
	}
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
	}
}

func (e *Engine) dialDirect(addr string) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, e.f.Cfg.PerTryTimeout)
	if err != nil {
		return nil, &forward.DialError{Err: err}
	}
	return c, nil
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
	if ctx.IsConnect() {
		e.connect(ctx)
		return
	}
	req := &ctx.Request
	hostPort := req.URI().Host()
	if len(hostPort) == 0 {
		ctx.Error("retrycap-proxy: request has no host", fasthttp.StatusBadRequest)
		return
	}
	up := e.f.Match(forward.SplitHostPort(hostPort))
	if up == nil && e.f.IsSelf(hostPort) {
		// A request addressed to the proxy itself (origin-form, or an app
		// whose NO_PROXY misses the loopback) would be forwarded to itself
		// until every connection is used up.
		ctx.Error("retrycap-proxy: request addressed to the proxy itself ("+string(hostPort)+"): loop refused; send requests for upstreams through HTTP_PROXY in absolute form", fasthttp.StatusLoopDetected)
		e.f.Unknown.M.Code(fasthttp.StatusLoopDetected)
		return
	}
	if req.Header.ConnectionUpgrade() {
		e.upgrade(ctx, up, hostPort)
		return
	}
	e.forward(ctx, up)
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
	perTry := e.f.Cfg.PerTryTimeout
	var hc *fasthttp.HostClient
	if u := x.Upstream(); u.Index >= 0 {
		hc = e.hcs[u.Index]
	}
	for x.NextAttempt() {
		// The per-try timeout covers the status line and the headers (time
		// to first byte), all the retry decision needs; the body chosen for
		// the client streams afterwards under an idle timeout (stream.go).
		var err error
		if hc != nil {
			err = hc.DoTimeout(&ctx.Request, &ctx.Response, perTry)
		} else {
			err = e.client.DoTimeout(&ctx.Request, &ctx.Response, perTry)
		}
		retry, wait := x.AfterAttempt(err)
		if !retry {
			return
		}
		// A streamed body of the answer being retried is dropped unread by
		// the next attempt's reset of resp (closing its connection, fine for
		// a failure); until then it stays, so that a breaker refusing that
		// attempt still returns it whole.
		if wait > 0 {
			time.Sleep(wait)
			x.Waited()
		}
	}
}
