package goroutine

import (
	"bufio"
	"io"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/retrycap/retrycap/internal/proxy/forward"
)

// Response bodies are streamed, not buffered: the retry decision needs only
// the status line and the headers, so once those are read the proxy either
// hands the body on to the client as it arrives, or (for an attempt it will
// retry) drops it with the connection. A buffering proxy needs the whole body
// in memory per request in flight (five parallel 10 MiB downloads: 92 MiB peak RSS),
// and its per-try timeout had to cover the whole body, which cut slow
// streaming answers.
//
// Timeouts: --per-try-timeout bounds one attempt up to the end of the
// response headers (connect, write the request, time to first byte and the
// headers). The body then has no overall deadline; each read of it must make
// progress within forward.BodyIdleTimeout.
//
// Exception: a body of known length up to forward.BufferedBodyMax is read whole
// within the per-try timeout, as before: a reset or stall in it stays a
// failed attempt that can be retried, the connection goes back to the pool at
// once, and the small-response path stays allocation-free. A streamed body
// that breaks after the headers cannot be retried (the client has the
// headers by then): the client's connection is closed, so it sees a
// truncated body, never a complete-looking one. Trailers of a streamed
// chunked body are not passed on (fasthttp's decoder reads them into its own
// header, after the client's headers were written).

// streamTransport is the fasthttp RoundTripper of every upstream client:
// fasthttp's default transport, except that the body is left on the
// connection for upstreamBody to stream, and the per-try deadline ends with
// the headers.
type streamTransport struct {
	perTry time.Duration
	idle   time.Duration
	// answer is an empty answer header as fasthttp's server prepares it
	// for the handler (its NoDefaultDate set), copied over each response
	// before its head is read: the client reset the response and cleared
	// that, and an upstream's answer must pass on its own Date (or none),
	// never the proxy's.
	answer fasthttp.ResponseHeader
}

func (t *streamTransport) RoundTrip(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response) (bool, error) {
	deadline := time.Now().Add(t.perTry)
	cc, err := hc.AcquireConn(t.perTry, req.ConnectionClose())
	if err != nil {
		return false, err
	}
	conn := cc.Conn()
	if err := conn.SetDeadline(deadline); err != nil {
		hc.CloseConn(cc)
		return true, err
	}
	bw := hc.AcquireWriter(conn)
	err = req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	hc.ReleaseWriter(bw)
	if err != nil {
		hc.CloseConn(cc)
		return true, err
	}

	br := hc.AcquireReader(conn)
	t.answer.CopyTo(&resp.Header)
	// The status line and headers, skipping interim 1xx answers (an upgrade
	// is tunnelled before forward and never gets here).
	for n := 0; ; n++ {
		if err = resp.Header.Read(br); err != nil {
			hc.ReleaseReader(br)
			hc.CloseConn(cc)
			return true, err
		}
		if st := resp.StatusCode(); st >= 200 || st == fasthttp.StatusSwitchingProtocols || n >= forward.MaxInterim {
			break
		}
	}
	closeConn := req.ConnectionClose() || resp.ConnectionClose()
	cl := resp.Header.ContentLength()
	if st := resp.StatusCode(); req.Header.IsHead() || resp.SkipBody || st < 200 || st == fasthttp.StatusNoContent || st == fasthttp.StatusNotModified {
		resp.SkipBody = true
		hc.ReleaseReader(br)
		releaseConn(hc, cc, closeConn)
		return false, nil
	}
	if cl >= 0 && cl <= forward.BufferedBodyMax {
		// Small and of known length: read it within the per-try deadline,
		// as before streaming, so that a reset or a stall in it is still a
		// failed attempt that can be retried.
		err = resp.ReadBody(br, 0)
		hc.ReleaseReader(br)
		if err != nil {
			hc.CloseConn(cc)
			return false, err
		}
		releaseConn(hc, cc, closeConn)
		return false, nil
	}
	// Stream it. A body delimited by the end of the connection (neither a
	// length nor chunked) leaves the connection unusable.
	ub := bodyPool.Get().(*upstreamBody)
	ub.hc, ub.cc, ub.conn, ub.br = hc, cc, conn, br
	ub.idle = t.idle
	ub.closeConn = closeConn || cl == -2
	ub.left = cl
	ub.own.StreamBody = true
	ub.own.Header.SetContentLength(cl)
	if err = ub.own.ReadBody(br, 0); err != nil { // sets up the decoder; reads nothing
		ub.release(true)
		return false, err
	}
	ub.body = ub.own.BodyStream()
	size := cl
	if size < 0 {
		size = -1 // to the client: chunked, whatever framing the upstream used
	}
	resp.SetBodyStream(ub, size)
	// The client gets the headers before the first body byte, which for a
	// slow stream may be a while.
	resp.ImmediateHeaderFlush = true
	return false, nil
}

// The pooled connection type fasthttp hands out is unexported; these two
// take it as an any (a pointer in an interface: no allocation) so that the
// pooled upstreamBody can hold it.
var releaseConnAny, closeConnAny = connOps((*fasthttp.HostClient).AcquireConn, (*fasthttp.HostClient).ReleaseConn, (*fasthttp.HostClient).CloseConn)

func connOps[C any](_ func(*fasthttp.HostClient, time.Duration, bool) (C, error), release, closeConn func(*fasthttp.HostClient, C)) (rel, cls func(*fasthttp.HostClient, any)) {
	return func(hc *fasthttp.HostClient, cc any) { release(hc, cc.(C)) }, //nolint:forcetypeassert // only ever stored from AcquireConn
		func(hc *fasthttp.HostClient, cc any) { closeConn(hc, cc.(C)) } //nolint:forcetypeassert // ditto
}

// releaseConn returns a connection whose response has been read in full to
// the pool, or closes it when either side asked for that.
func releaseConn(hc *fasthttp.HostClient, cc any, closeConn bool) {
	if closeConn {
		closeConnAny(hc, cc)
		return
	}
	releaseConnAny(hc, cc)
}

// upstreamBody is a response body read from the upstream connection as the
// client's side of the proxy writes it. The server closes it once the
// response is written (or the proxy does, for an attempt it retries, or
// resets the response): a body read to its end gives the connection back to
// the pool, any other is cut by closing the connection, so that a large
// body nobody wants is never transferred.
type upstreamBody struct {
	hc        *fasthttp.HostClient
	cc        any
	conn      net.Conn
	br        *bufio.Reader
	own       fasthttp.Response // holds fasthttp's body decoder (length, chunked or to close)
	body      io.Reader
	idle      time.Duration
	left      int // bytes still to come of a known length; < 0 if unknown
	eof       bool
	closeConn bool
}

var bodyPool = sync.Pool{New: func() any { return &upstreamBody{} }}

func (b *upstreamBody) Read(p []byte) (int, error) {
	if b.body == nil {
		return 0, io.ErrClosedPipe
	}
	if b.eof {
		return 0, io.EOF
	}
	// Idle timeout: each read must make progress within b.idle.
	if err := b.conn.SetReadDeadline(time.Now().Add(b.idle)); err != nil {
		return 0, err
	}
	n, err := b.body.Read(p)
	if b.left >= 0 {
		b.left -= n
		if b.left <= 0 && err == nil {
			err = io.EOF
		}
	}
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

// Close ends the body: the connection goes back to the pool only if the body
// was read to its end.
func (b *upstreamBody) Close() error {
	if b.body == nil {
		return nil
	}
	b.release(!b.eof)
	return nil
}

func (b *upstreamBody) release(discard bool) {
	b.own.Reset() // closes the decoder, which returns it to fasthttp's pool
	b.hc.ReleaseReader(b.br)
	releaseConn(b.hc, b.cc, discard || b.closeConn)
	b.hc, b.cc, b.conn, b.br, b.body = nil, nil, nil, nil, nil
	b.eof, b.closeConn = false, false
	bodyPool.Put(b)
}
