package goroutine

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// A client that went away while its call ran (issue 25, "no work after the
// caller gave up") has its upstream request cut at once, as nginx
// (proxy_ignore_client_abort off) and Envoy do: the attempt's upstream
// connection is closed, never pooled, a pending backoff ends without its
// retry, and the attempt is judged the client's cancellation
// (policy.Judge: logged "cancelled", not charged to the breaker). Gone
// means reset: the reset (RST) of the client's socket, which the kernel
// reports as EPOLLERR|EPOLLHUP (netpoll.WatchHangup watches for it while
// the call's goroutine is blocked on the upstream). A FIN alone is a
// half-close: the client may still read (Connection: close clients that
// shut down their write side), so the call goes on and answers it
// (docs/proxy.md, "A client that goes away").

// clientCut is one call's link from its client's socket to the upstream
// connection its attempt (or its streaming answer) is on.
type clientCut struct {
	mu  sync.Mutex
	tok uint64 // the hang-up watch (netpoll.WatchHangup)
	// gone: the client's socket was reset (set under mu, before the
	// deadline is cut; read without it by a body's reads, which set a
	// deadline first: either they see it, or the cut's deadline comes
	// after theirs).
	gone atomic.Bool
	up   net.Conn // the attempt's upstream connection; nil between attempts
	wake chan struct{}
}

var cutPool = sync.Pool{New: func() any { return &clientCut{} }}

// errClientGone is the attempt that was not sent: its client had reset
// the connection (judged the client's cancellation).
var errClientGone = errors.New("retrycap-proxy: the client reset its connection: attempt not sent")

// aLongTimeAgo is a deadline that has passed: set on a connection, it
// ends the read or write blocked on it at once.
var aLongTimeAgo = time.Unix(1, 0)

// Hungup: the client's socket was reset. The attempt's upstream connection
// is given a deadline that has passed, which ends its read or write at
// once; the transport then closes it (an error) rather than pooling it
// (disarm). Runs on the watcher's goroutine (netpoll.Hungup).
func (c *clientCut) Hungup() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gone.Store(true)
	if c.up != nil {
		_ = c.up.SetDeadline(aLongTimeAgo)
	}
	if c.wake != nil {
		close(c.wake)
	}
}

// isGone reports whether the client's socket was reset.
func (c *clientCut) isGone() bool {
	return c != nil && c.gone.Load()
}

// arm: the attempt runs on conn from now on. False when the client is gone
// already (the attempt must not be sent).
func (c *clientCut) arm(conn net.Conn) bool {
	if c == nil {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gone.Load() {
		return false
	}
	c.up = conn
	return true
}

// disarm: the attempt's connection is about to be released; it reports
// whether the client went away meanwhile (the connection must then be
// closed, not pooled: its deadline was cut).
func (c *clientCut) disarm() bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.up = nil
	return c.gone.Load()
}

// sleep waits d (a backoff) unless the client goes meanwhile: false then,
// and the retry is not made.
func (c *clientCut) sleep(d time.Duration) bool {
	if c == nil {
		time.Sleep(d)
		return true
	}
	c.mu.Lock()
	if c.gone.Load() {
		c.mu.Unlock()
		return false
	}
	if c.wake == nil {
		c.wake = make(chan struct{})
	}
	wake := c.wake
	c.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-wake:
		return false
	}
}

// cutOf is the cut of the call req belongs to (nil: not watched), for the
// transport, which gets only the request.
func (t *streamTransport) cutOf(req *fasthttp.Request) *clientCut {
	t.cutMu.Lock()
	defer t.cutMu.Unlock()
	return t.cuts[req]
}

func (t *streamTransport) setCut(req *fasthttp.Request, c *clientCut) {
	t.cutMu.Lock()
	defer t.cutMu.Unlock()
	if c == nil {
		delete(t.cuts, req)
		return
	}
	if t.cuts == nil {
		t.cuts = make(map[*fasthttp.Request]*clientCut)
	}
	t.cuts[req] = c
}

// endCut ends the call's part of its cut: an answer whose body streams
// from the attempt's connection keeps it (the body ends it, release),
// anything else stops the watch now.
func (e *Engine) endCut(ctx *fasthttp.RequestCtx, c *clientCut) {
	e.transport.setCut(&ctx.Request, nil)
	if ub, ok := ctx.Response.BodyStream().(*upstreamBody); ok && ub.cut == c {
		ub.ownCut = true
		return
	}
	c.stop()
}

// stop ends the watch and recycles c.
func (c *clientCut) stop() {
	stopWatch(c.tok)
	c.mu.Lock()
	c.tok, c.up, c.wake = 0, nil, nil
	c.gone.Store(false)
	c.mu.Unlock()
	cutPool.Put(c)
}
