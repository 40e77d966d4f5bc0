package goroutine

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/retrycap/retrycap/internal/proxy/forward"
	"github.com/retrycap/retrycap/internal/proxy/policy"
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
// chunked body are not passed on (the decoder, forward.NewChunkedBody,
// reads them after the client's headers were written) and are bounded.

// streamTransport is the fasthttp RoundTripper of every upstream client:
// fasthttp's default transport, except that the body is left on the
// connection for upstreamBody to stream, and the per-try deadline ends with
// the headers.
type streamTransport struct {
	f       *forward.Forwarder
	perTry  time.Duration
	idle    time.Duration
	maxIdle time.Duration // --upstream-idle-timeout: the longest a pooled connection is trusted idle
	// answer is an empty answer header as fasthttp's server prepares it
	// for the handler (its NoDefaultDate set), copied over each response
	// before its head is read: the client reset the response and cleared
	// that, and an upstream's answer must pass on its own Date (or none),
	// never the proxy's.
	answer fasthttp.ResponseHeader

	// cuts are the calls' cuts (cut.go) by request: the client's reset
	// cuts the upstream connection of its attempt.
	cutMu sync.Mutex
	cuts  map[*fasthttp.Request]*clientCut
	// interims are the calls' interim-answer sinks by request (interim.go).
	interims map[*fasthttp.Request]*interimSink

	// bodies are the answers passed on whose bodies stream (their
	// StreamEnd set), with their client's connection, so that a drain
	// that runs out of time can cut them (cutBodies) and wait for their
	// lines (bodyWG); drainCut says it did: the cut is the proxy's.
	bodyMu   sync.Mutex
	bodies   map[*upstreamBody]net.Conn
	bodyWG   sync.WaitGroup
	drainCut atomic.Bool
}

// errDrainCut ends the read of a body a drain that ran out of time cut.
var errDrainCut = errors.New("retrycap-proxy: the drain ran out of time: the answer's body cut")

// trackBody keeps b, an answer passed on whose body streams to client,
// until its release (untrackBody).
func (t *streamTransport) trackBody(b *upstreamBody, client net.Conn) {
	t.bodyMu.Lock()
	defer t.bodyMu.Unlock()
	if t.bodies == nil {
		t.bodies = make(map[*upstreamBody]net.Conn)
	}
	t.bodies[b] = client
	t.bodyWG.Add(1)
	b.tracked = true
}

func (t *streamTransport) untrackBody(b *upstreamBody) {
	t.bodyMu.Lock()
	defer t.bodyMu.Unlock()
	delete(t.bodies, b)
	b.tracked = false
	t.bodyWG.Done()
}

// cutBodies ends the bodies still streaming when a drain ran out of time:
// a deadline that has passed on both connections ends the read and the
// write under way at once (a client that stopped reading too), and each
// body's release, seeing drainCut, puts the cut down to the proxy.
func (t *streamTransport) cutBodies() {
	t.drainCut.Store(true)
	t.bodyMu.Lock()
	defer t.bodyMu.Unlock()
	for b, client := range t.bodies {
		_ = b.conn.SetDeadline(aLongTimeAgo)
		_ = client.SetDeadline(aLongTimeAgo)
	}
}

// maxStaleSkips bounds the pooled connections one request looks at and
// closes as stale before it takes whatever comes (a fresh one, usually).
const maxStaleSkips = 64

func (t *streamTransport) RoundTrip(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response) (bool, error) {
	// The attempt's timeout as DoTimeout set it (forward.Exchange.TryTimeout:
	// min(the upstream's per-try timeout, the caller's time left), which
	// may exceed --per-try-timeout: "payment=3/5s"); --per-try-timeout
	// otherwise.
	perTry := t.perTry
	if to := req.GetTimeOut(); to > 0 {
		perTry = to
	}
	deadline := time.Now().Add(perTry)
	// A pooled connection is never trusted blindly: one idle longer than
	// --upstream-idle-timeout, or whose end the upstream closed, is closed
	// and the next one taken.
	var cc any
	var uc *upConn
	for skips := 0; ; skips++ {
		c, err := hc.AcquireConn(perTry, req.ConnectionClose())
		if err != nil {
			return false, err
		}
		cc = c
		uc, _ = c.Conn().(*upConn)
		if uc == nil || !uc.used || skips >= maxStaleSkips || uc.alive(time.Now(), t.maxIdle) {
			break
		}
		closeConnAny(hc, cc)
	}
	cut := t.cutOf(req)
	reused := uc != nil && uc.used
	var before, wroteBefore int64
	if uc != nil {
		before, wroteBefore = uc.nread.Load(), uc.nwritten
	}
	rd, br, err := t.exchange(hc, cc, connOf(cc), deadline, req, resp, cut)
	wrote := uc != nil && uc.nwritten != wroteBefore
	if err == nil || !reused || !staleErr(err, before, uc.nread.Load()) || !policy.MayResend(wrote, t.f.Replayable(req)) {
		return t.answerBody(hc, cc, rd, br, req, resp, err, cut)
	}
	// The reused connection failed before any byte of an answer came back:
	// the upstream may have closed it idle (policy.MayResend, Go's
	// transport's rule, says when the request may go again). Bytes of a
	// replayable request were written: the upstream may have run it, so
	// its repeat is the exchange's next attempt (forward.StaleError), with
	// its number and lowered budget, or none when none is left. A request
	// not safe to repeat that was written never gets here: it fails, and
	// the exchange answers 502.
	if wrote {
		_, err = t.answerBody(hc, cc, rd, br, req, resp, err, cut)
		return false, &forward.StaleError{Err: err}
	}
	// No byte of it was written: the upstream never saw it. It is re-sent
	// once on a fresh connection within the same attempt (not an attempt,
	// the same budget).
	t.f.M.StaleResends.Inc()
	cut.disarm() // the stale connection is closed (exchange's error)
	if hc.Dial == nil {
		return true, err
	}
	conn, err := hc.Dial(hc.Addr)
	if err != nil {
		return false, err
	}
	fresh := &freshConn{conn: conn}
	rd, br, err = t.exchange(hc, fresh, conn, deadline, req, resp, cut)
	return t.answerBody(hc, fresh, rd, br, req, resp, err, cut)
}

// freshConn is a connection dialled for a stale-connection re-send, outside
// the HostClient's pool: it is closed after its one answer.
type freshConn struct{ conn net.Conn }

// exchange writes req on conn and reads the answer's status line and headers
// (skipping interim 1xx answers) into resp, within deadline. rd reads the
// answer: br, or for a head larger than br's buffer (up to
// forward.MaxResponseHead) a larger reader over it, after which the
// connection is not reused (rd may have read ahead of the answer). On an
// error the connection is closed. cut (nil: none) is armed on conn once its
// deadline is set (a reset cutting it after that cuts this attempt; one
// before it is seen by arm): nothing is sent for a client gone already.
func (t *streamTransport) exchange(hc *fasthttp.HostClient, cc any, conn net.Conn, deadline time.Time, req *fasthttp.Request, resp *fasthttp.Response, cut *clientCut) (rd, br *bufio.Reader, err error) {
	if err := conn.SetDeadline(deadline); err != nil {
		closeAny(hc, cc)
		return nil, nil, err
	}
	if !cut.arm(conn) {
		closeAny(hc, cc)
		return nil, nil, errClientGone
	}
	uc, _ := conn.(*upConn)
	var wrote0 int64
	if uc != nil {
		wrote0 = uc.nwritten
	}
	if len(req.Body()) > duplexMin {
		return t.exchangeDuplex(hc, cc, conn, req, resp)
	}
	bw := hc.AcquireWriter(conn)
	err = forward.WriteRequest(req, bw)
	if err == nil {
		err = bw.Flush()
	}
	hc.ReleaseWriter(bw)
	if err != nil {
		// The upstream may have answered before it closed (an early 413
		// to an upload it would not read, then its close: the write fails
		// with EPIPE or a reset): read that answer, as the loop (which
		// reads while it writes) and Go's transport do, rather than a 502
		// of the proxy's own. Only when bytes of this request left (a
		// connection of a pool could hold bytes from before it, a fresh
		// one cannot); a read that finds none fails at once (the
		// connection is closed) and the write's error stands. The
		// connection is never reused: the request was not all sent.
		if uc != nil && uc.nwritten == wrote0 {
			closeAny(hc, cc)
			return nil, nil, err
		}
		werr := err
		if rd, br, err = t.readHead(hc, cc, conn, resp, t.interimOf(req)); err != nil {
			return nil, nil, werr
		}
		resp.SetConnectionClose()
		return rd, br, nil
	}
	return t.readHead(hc, cc, conn, resp, t.interimOf(req))
}

// duplexMin: a request whose body is larger is written while its answer
// is read (exchangeDuplex); a smaller one fits the sockets' buffers, so
// its write never waits on an upstream that does not read.
const duplexMin = 64 << 10

// exchangeDuplex is exchange for a large request body: written by a
// goroutine of its own while the answer's head is read, as Go's transport
// does (its writeLoop and readLoop). An upstream may answer before it has
// read the whole request (RFC 9112 9.5: a 413 to an upload) and then
// neither read the rest nor close; written first, the request waited in
// its write for the per-try deadline, after which the answer could not be
// read (the deadline had passed): the client got the proxy's 504, not the
// upstream's 413. An answer that comes before the whole request went
// stops the write (the rest is never sent) and closes the connection
// after it: the upstream would read the next request as this one's rest.
func (t *streamTransport) exchangeDuplex(hc *fasthttp.HostClient, cc any, conn net.Conn, req *fasthttp.Request, resp *fasthttp.Response) (rd, br *bufio.Reader, err error) {
	wrote := make(chan error, 1)
	go func() {
		bw := hc.AcquireWriter(conn)
		err := forward.WriteRequest(req, bw)
		if err == nil {
			err = bw.Flush()
		}
		hc.ReleaseWriter(bw)
		wrote <- err
	}()
	// On an error readHead closes the connection, which ends the write.
	rd, br, err = t.readHead(hc, cc, conn, resp, t.interimOf(req))
	var werr error
	select {
	case werr = <-wrote:
	default:
		// Answered (or failed) before the whole request went.
		_ = conn.SetWriteDeadline(time.Now())
		if werr = <-wrote; werr == nil {
			werr = errEarlyAnswer // the write ended meanwhile: still no reuse
		}
	}
	if err != nil {
		// A write that failed on its own (not by readHead's close): its
		// error stands, as in exchange (staleErr and policy.MayResend
		// judge it).
		if werr != nil && !errors.Is(werr, net.ErrClosed) {
			return nil, nil, werr
		}
		return nil, nil, err
	}
	if werr != nil {
		resp.SetConnectionClose()
	}
	return rd, br, nil
}

// errEarlyAnswer marks an exchange answered before its write ended.
var errEarlyAnswer = errors.New("answered before the whole request was sent")

// readHead reads the answer's status line and headers on conn (skipping
// interim 1xx answers) into resp: rd reads the answer, br is the pooled
// reader under it (see exchange). On an error the connection is closed.
//
// An interim answer relay takes (nil: none) is passed on to the client
// (interimSink) as it is read.
func (t *streamTransport) readHead(hc *fasthttp.HostClient, cc any, conn net.Conn, resp *fasthttp.Response, relay *interimSink) (rd, br *bufio.Reader, err error) {
	br = hc.AcquireReader(conn)
	rd = br
	t.answer.CopyTo(&resp.Header)
	// The status line and headers, skipping interim 1xx answers (an upgrade
	// is tunnelled before forward and never gets here).
	var both bool // the final head's forward.BothFramings
	for n := 0; ; n++ {
		var whole bool
		// raw is the head read, whole in rd's buffer (checkAnswerHead),
		// which the parser's read of it does not move.
		var raw []byte
		if whole, err = checkAnswerHead(rd); err == nil {
			raw = peekHead(rd)
			both = forward.BothFramings(raw)
			err = readAnswerHeader(rd, resp)
		}
		if err != nil && rd == br && isSmallBuffer(err) {
			// A head larger than br's buffer: judged again, whole, on a
			// reader that holds up to forward.MaxResponseHead (before,
			// a bare LF beyond br's buffer went unseen and fasthttp's
			// reader waited for the end of that head until the per-try
			// timeout).
			rd = bufio.NewReaderSize(br, forward.MaxResponseHead+1)
			t.answer.CopyTo(&resp.Header)
			if whole, err = checkAnswerHead(rd); err == nil {
				raw = peekHead(rd)
				both = forward.BothFramings(raw)
				if err = readAnswerHeader(rd, resp); isSmallBuffer(err) {
					err = forward.ErrAnswerHeadTooLarge
				}
			}
		}
		if err != nil && !whole && err != io.EOF && errors.Is(err, io.EOF) {
			// Part of a head, then the close: in the loop's words (a bare
			// io.EOF, no byte of an answer, stays itself: staleErr).
			err = forward.ClosedEarly(io.ErrUnexpectedEOF)
		}
		if err != nil && whole && !forward.BadAnswer(err) {
			// The whole head was read, so the parser's error is about its
			// bytes: the upstream's bad answer, not a transport failure.
			err = forward.AnswerParseError(err, peekHead(rd))
		}
		if err != nil {
			hc.ReleaseReader(br)
			closeAny(hc, cc)
			return nil, nil, err
		}
		skip, err := forward.Interim(resp.StatusCode(), n)
		if err != nil {
			hc.ReleaseReader(br)
			closeAny(hc, cc)
			return nil, nil, err
		}
		if !skip {
			break
		}
		relay.relay(resp.StatusCode(), raw, t.idle)
	}
	if resp.StatusCode() == fasthttp.StatusSwitchingProtocols {
		hc.ReleaseReader(br)
		closeAny(hc, cc)
		return nil, nil, forward.ErrUnsolicitedSwitch
	}
	if both {
		// Read by its chunks; what the upstream sends after them (the rest
		// of its Content-Length, another answer) must never answer the
		// next request: the connection ends with this answer, as HAProxy
		// ends it (the loop ends every streamed answer's).
		resp.SetConnectionClose()
	}
	return rd, br, nil
}

// readAnswerHeader reads the answer head at the start of rd into resp's
// header with fasthttp's reader, and its Trailer field dropped
// (forward.DropTrailerField). A head that reader refuses, whole in rd (a
// refused head is not consumed), whose Transfer-Encoding is "identity" is
// read again without its framing fields (forward.IdentityAnswer), so that
// its body is read to the close: only a refused head is looked at twice.
func readAnswerHeader(rd *bufio.Reader, resp *fasthttp.Response) error {
	err := resp.Header.Read(rd)
	if err != nil {
		head := peekHead(rd)
		id, ok := forward.IdentityAnswer(head)
		if !ok || forward.HeadEnd(head) != len(head) {
			return err
		}
		if err := resp.Header.Read(bufio.NewReader(bytes.NewReader(id))); err != nil {
			return err
		}
		if _, err := rd.Discard(len(head)); err != nil {
			return err
		}
	}
	forward.DropTrailerField(&resp.Header)
	return nil
}

// checkAnswerHead gives the verdict of forward.CheckAnswerHead on the
// answer head at the start of rd, reading until the head is whole (whole:
// rd holds it all): a head with a bare LF is forward.ErrAnswerBareLF
// (fasthttp's reader would wait for its end until the deadline). A head
// larger than rd's buffer, or a read error, is left to fasthttp's reader,
// which reports it.
func checkAnswerHead(rd *bufio.Reader) (whole bool, err error) {
	for n := 1; ; {
		if _, err := rd.Peek(n); err != nil {
			return false, resetBeforeAnswer(err)
		}
		b, _ := rd.Peek(rd.Buffered())
		if end, err := forward.CheckAnswerHead(b); end >= 0 {
			return true, err
		}
		n = len(b) + 1
	}
}

// resetBeforeAnswer is the read error of an answer head that is the
// upstream's reset, in the loop's words (forward.ClosedEarly over the read
// error without the local address); nil for any other error, left to
// fasthttp's reader. That reader takes every error on a head's first byte
// for an end of stream, which fasthttp's client then words as its own
// advice ("make sure the server returns 'connection: close'...") in the
// client's 502: a reset never read as one.
func resetBeforeAnswer(err error) error {
	if !errors.Is(err, syscall.ECONNRESET) {
		return nil
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		err = &net.OpError{Op: oe.Op, Net: oe.Net, Addr: oe.Addr, Err: oe.Err}
	}
	return forward.ClosedEarly(err)
}

// peekHead is the answer head rd holds whole (checkAnswerHead found it),
// after fasthttp's parser refused it: a refused head is not consumed.
func peekHead(rd *bufio.Reader) []byte {
	b, _ := rd.Peek(rd.Buffered())
	if end := forward.HeadEnd(b); end >= 0 {
		return b[:end]
	}
	return b
}

// answerBody reads or sets up the body of the answer whose head exchange
// read (err: exchange's error, returned as it is). The bool is fasthttp's
// "may retry": never for an answer the app sent (a head too large, an
// unsolicited 101), which the exchange judges instead.
//
// cut (nil: none) is armed on the connection: it is disarmed before the
// connection is released, which closes it instead of pooling it when the
// client reset meanwhile (its deadline was cut); a streamed body keeps it
// armed until the body ends (upstreamBody.release).
func (t *streamTransport) answerBody(hc *fasthttp.HostClient, cc any, rd, br *bufio.Reader, req *fasthttp.Request, resp *fasthttp.Response, err error, cut *clientCut) (bool, error) {
	if err != nil {
		cut.disarm()
		return !forward.BadAnswer(err), err
	}
	closeConn := req.ConnectionClose() || resp.ConnectionClose() || rd != br
	cl := resp.Header.ContentLength()
	if st := resp.StatusCode(); req.Header.IsHead() || resp.SkipBody || st < 200 || st == fasthttp.StatusNoContent || st == fasthttp.StatusNotModified {
		resp.SkipBody = true
		// Bytes beyond the answer (a body after a 204 or a HEAD's answer,
		// a second answer): the upstream is out of step with the requests
		// on this connection, which is closed, as the loop closes it.
		extra := br.Buffered() > 0
		hc.ReleaseReader(br)
		releaseConn(hc, cc, cut.disarm() || closeConn || extra)
		return false, nil
	}
	if cl >= 0 && cl <= forward.BufferedBodyMax {
		// Small and of known length: read it within the per-try deadline,
		// as before streaming, so that a reset or a stall in it is still a
		// failed attempt that can be retried.
		err = resp.ReadBody(rd, 0)
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			err = forward.ClosedEarly(io.ErrUnexpectedEOF) // in the loop's words
		}
		extra := br.Buffered() > 0 // sent beyond its Content-Length: closed (above)
		hc.ReleaseReader(br)
		if gone := cut.disarm(); err != nil || gone {
			closeAny(hc, cc)
			return false, err
		}
		releaseConn(hc, cc, closeConn || extra)
		return false, nil
	}
	// Stream it. A body delimited by the end of the connection (neither a
	// length nor chunked) leaves the connection unusable.
	ub := bodyPool.Get().(*upstreamBody)
	ub.hc, ub.cc, ub.conn, ub.br = hc, cc, connOf(cc), br
	ub.cut = cut // armed on ub.conn until the body ends
	ub.idle, ub.tr = t.idle, t
	ub.closeConn = closeConn || cl == -2
	ub.left = cl
	if cl == -1 {
		// Chunked: Go's decoder, with its bounds (forward.NewChunkedBody).
		ub.body = forward.NewChunkedBody(rd)
	} else {
		ub.own.StreamBody = true
		ub.own.Header.SetContentLength(cl)
		if err = ub.own.ReadBody(rd, 0); err != nil { // sets up the decoder; reads nothing
			ub.release(true)
			return false, err
		}
		ub.body = ub.own.BodyStream()
	}
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

// The pooled connection type fasthttp hands out is unexported; these take
// it as an any (a pointer in an interface: no allocation) so that the
// pooled upstreamBody can hold it. A *freshConn (a re-send's) is closed
// instead of pooled.
var releaseConnAny, closeConnAny, connAny = connOps((*fasthttp.HostClient).AcquireConn, (*fasthttp.HostClient).ReleaseConn, (*fasthttp.HostClient).CloseConn)

func connOps[C interface{ Conn() net.Conn }](_ func(*fasthttp.HostClient, time.Duration, bool) (C, error), release, closeConn func(*fasthttp.HostClient, C)) (rel, cls func(*fasthttp.HostClient, any), conn func(any) net.Conn) {
	return func(hc *fasthttp.HostClient, cc any) { release(hc, cc.(C)) }, //nolint:forcetypeassert // only ever stored from AcquireConn
		func(hc *fasthttp.HostClient, cc any) { closeConn(hc, cc.(C)) }, //nolint:forcetypeassert // ditto
		func(cc any) net.Conn { return cc.(C).Conn() } //nolint:forcetypeassert // ditto
}

func connOf(cc any) net.Conn {
	if f, ok := cc.(*freshConn); ok {
		return f.conn
	}
	return connAny(cc)
}

func closeAny(hc *fasthttp.HostClient, cc any) {
	if f, ok := cc.(*freshConn); ok {
		_ = f.conn.Close()
		return
	}
	closeConnAny(hc, cc)
}

// releaseConn returns a connection whose response has been read in full to
// the pool, or closes it when either side asked for that. A pooled one
// remembers when it went idle (upConn.alive).
func releaseConn(hc *fasthttp.HostClient, cc any, closeConn bool) {
	if _, ok := cc.(*freshConn); ok || closeConn {
		closeAny(hc, cc)
		return
	}
	if uc, ok := connAny(cc).(*upConn); ok {
		uc.used, uc.idleSince = true, time.Now()
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
	hc   *fasthttp.HostClient
	cc   any
	conn net.Conn
	br   *bufio.Reader
	own  fasthttp.Response // holds fasthttp's body decoder (a length, or to the close)
	body io.Reader
	idle time.Duration
	// client bounds the writes of the body to the client, as reads from
	// the upstream are bounded: each read sets its write deadline idle
	// ahead (the request's ctx, whose deadline the server clears after
	// the answer; the hijacked connection of an HTTP/1.0 client's). A
	// client that stopped reading held the upstream connection for as
	// long as it kept its own open. nil: unbounded (an answer retried).
	client    interface{ SetWriteDeadline(time.Time) error }
	left      int // bytes still to come of a known length; < 0 if unknown
	eof       bool
	held      bool // Close does nothing: http10 took the body over
	closeConn bool
	// cut is the call's (nil: none), armed on conn while the body streams;
	// ownCut: the call has ended and left it to the body to stop.
	cut    *clientCut
	ownCut bool
	// end is the attempt's (nil: none), told at release how the body
	// ended; n counts the body bytes read, rerr is the first read's
	// failure (not the body's end).
	end  *forward.StreamEnd
	n    int64
	rerr error
	// tr is the transport that made it; tracked: in tr.bodies.
	tr      *streamTransport
	tracked bool
}

var bodyPool = sync.Pool{New: func() any { return &upstreamBody{} }}

func (b *upstreamBody) Read(p []byte) (int, error) {
	if b.body == nil {
		return 0, io.ErrClosedPipe
	}
	if b.eof {
		return 0, io.EOF
	}
	// Idle timeout: each read must make progress within b.idle, and so
	// must the write of what the read before it gave.
	now := time.Now()
	if err := b.conn.SetReadDeadline(now.Add(b.idle)); err != nil {
		return 0, err
	}
	if b.client != nil {
		if err := b.client.SetWriteDeadline(now.Add(b.idle)); err != nil {
			return 0, err
		}
	}
	if b.cut.isGone() {
		// The client reset before this deadline was set, which would
		// have undone the cut's (set after it, the cut's stands).
		return 0, errClientGone
	}
	if b.tracked && b.tr.drainCut.Load() {
		return 0, errDrainCut // the same for a drain's deadline (cutBodies)
	}
	n, err := b.body.Read(p)
	b.n += int64(n)
	if b.left >= 0 {
		b.left -= n
		if b.left <= 0 && err == nil {
			err = io.EOF
		}
	}
	switch {
	case err == io.EOF:
		b.eof = true
	case err != nil && b.rerr == nil:
		b.rerr = err
	}
	return n, err
}

// Close ends the body: the connection goes back to the pool only if the body
// was read to its end.
func (b *upstreamBody) Close() error {
	if b.body == nil || b.held {
		return nil
	}
	b.release(!b.eof)
	return nil
}

func (b *upstreamBody) release(discard bool) {
	drained := false
	if b.tracked {
		b.tr.untrackBody(b)
		drained = b.tr.drainCut.Load()
	}
	gone := false
	if b.cut != nil {
		if gone = b.cut.disarm(); gone {
			discard = true // the client reset: the connection's deadline was cut
		}
		if b.ownCut {
			b.cut.stop()
		}
	}
	if b.end != nil {
		cut := ""
		switch {
		case b.eof:
		case drained:
			cut = forward.CutProxy // a drain out of time cut it (cutBodies)
		case gone || errors.Is(b.rerr, errClientGone):
			cut = forward.CutClient
		case b.rerr != nil:
			cut = forward.CutUpstream
		default:
			cut = forward.CutClient // the server stopped writing it: the client's writes failed
		}
		b.end.Done(cut, b.n)
	}
	b.own.Reset() // closes the decoder, which returns it to fasthttp's pool
	// Bytes read beyond the body's end: the upstream is out of step with
	// this connection's requests (answerBody), closed.
	extra := b.br.Buffered() > 0
	b.hc.ReleaseReader(b.br)
	releaseConn(b.hc, b.cc, discard || b.closeConn || extra)
	b.hc, b.cc, b.conn, b.br, b.body = nil, nil, nil, nil, nil
	b.eof, b.closeConn, b.held = false, false, false
	b.cut, b.ownCut, b.client = nil, false, nil
	b.end, b.n, b.rerr, b.tr = nil, 0, nil, nil
	bodyPool.Put(b)
}

// http10 writes an answer of unknown length (chunked or delimited by the
// upstream's close) to an HTTP/1.0 client delimited by the end of the
// connection: HTTP/1.0 has no chunked coding (RFC 9112 7.1), and fasthttp
// would write it chunked. The head is fasthttp's without the
// Transfer-Encoding; the body is copied as it arrives, then the
// connection closes.
func (e *Engine) http10(ctx *fasthttp.RequestCtx) {
	resp := &ctx.Response
	ub, ok := resp.BodyStream().(*upstreamBody)
	if !ok || resp.Header.ContentLength() >= 0 || resp.SkipBody || ctx.Request.Header.IsHead() {
		return
	}
	resp.Header.SetConnectionClose()
	head := resp.Header.AppendBytes(nil)
	var out []byte
	for rest := head; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n') + 1
		if i == 0 {
			i = len(rest)
		}
		if line := rest[:i]; len(line) < 18 || !bytes.EqualFold(line[:18], []byte("Transfer-Encoding:")) {
			out = append(out, line...)
		}
		rest = rest[i:]
	}
	ub.held = true
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) {
		ub.client = c // closed after: its deadline needs no clearing
		defer func() {
			ub.held = false
			_ = ub.Close()
		}()
		if _, err := c.Write(out); err != nil {
			return
		}
		_, _ = io.Copy(c, ub)
	})
}

// isSmallBuffer: err says a head did not fit the reader's buffer.
func isSmallBuffer(err error) bool {
	var small *fasthttp.ErrSmallBuffer
	return err != nil && errors.As(err, &small)
}
