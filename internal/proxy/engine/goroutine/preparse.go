package goroutine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/retrycap/retrycap/internal/proxy/forward"
)

// headConn is the pre-parser in front of fasthttp's server: every client
// connection of the engine (accepted, or handed over by a loop) is read
// through one. It finds each request head in the bytes as they arrive and
// gives it forward.CheckHead's verdict, the event loop's, before fasthttp
// sees it: a refused head (a bare LF, on which fasthttp's parser would
// wait for the head timeout) is answered with forward.MalformedAnswer,
// byte for byte the loop's answer, and the connection closes. A chunked
// body's trailer section with a bare LF, on which fasthttp waits alike, is
// refused the same way, the request not served: its answer comes from the
// server's error handler (requestError), after the answers fasthttp holds
// for the requests before it. Everything else passes unchanged, in the
// same reads.
//
// To find the heads after the first it follows each request's framing: a
// Content-Length body, a chunked one (sizes, data, the last chunk and its
// trailers). The framing comes from fasthttp's parser (forward.HeadParser)
// only when bytes follow a head in the same read; a head that ends its read
// (the common keep-alive request) costs no parse: at the next read the
// handler has either had the request (it had no body: fasthttp never asked
// for one) or not (fasthttp is reading its body, so the head is parsed
// then). The handler counts its requests (served): a head is refused only
// when fasthttp has finished every request before it, so a framing this
// scanner got wrong never refuses a body; it stops scanning instead.
//
// Once the connection is a tunnel (CONNECT, a 101), or its framing is one
// this does not follow, or a head exceeds fasthttp's read buffer (fasthttp
// answers 431), scanning stops for good (off) and fasthttp reads on as it
// always did. A request that may become a tunnel (CONNECT, Upgrade) does
// not stop it: what follows that request in the same read is held until
// the handler has had it, then passed on unread if it became a tunnel
// (stopScan), else scanned as requests. Stopped at the request, a refused
// upgrade left every later request on the connection unscanned: a chunk
// extension of any length read whole (Go's bounds not applied).
//
// All of it runs on the connection's serving goroutine (fasthttp's reads
// and its handler), so nothing is locked.
type headConn struct {
	net.Conn
	st  scanState
	off bool
	// part is what was read so far of a head, a chunk-size line, or the
	// last chunk and its trailers, begun in an earlier read.
	part []byte
	// last is the head passed on whose framing is not known yet (stAwait).
	last []byte
	// left: body bytes still to come (stBody), of the chunk (stChunkData),
	// of the CRLF after it (stChunkEnd).
	left int64
	// heads passed on to fasthttp; served, requests the handler got.
	heads, served int
	// quiet: nothing after the request being served had been read when
	// its handler began, so fasthttp flushes its answer; interimOK: so it
	// was for the request before (servedRequest, interimOK).
	quiet, interimOK bool
	// refusal is the answer to a refused head, written at the next read;
	// held, the bytes from that head on (passed on after all if the
	// refusal does not stand).
	refusal []byte
	held    []byte
	refused bool
	// refuseAt is how many requests the handler must have had for the
	// refusal to stand: every one before the refused head (heads), or,
	// for bare LFs in a chunked body's trailers, every one before the
	// request they end (heads-1: fasthttp is reading its body).
	refuseAt int
	// bodyRefused: the refusal was of a chunked body's framing (its
	// trailers, a chunk line), answered by the server's error handler
	// with this reason.
	bodyRefused string
	// excess is Go's count of a chunked body's framing beyond what its
	// data carries (chunkExcess).
	excess int64
	hp     *headParse
	// mayTunnel: the request being followed may become a tunnel (CONNECT,
	// Upgrade); what follows it is held (held, with no refusal) until the
	// handler has had it.
	mayTunnel bool
	// fd is the socket under the connection plus one (0: not looked up
	// yet), for the hang-up watch of each call (clientFd).
	fd int

	// budget bounds the body bytes fasthttp buffers (nil: unbounded, as in
	// the pre-parser's own tests). resv are this connection's reservations,
	// oldest first, by the head (its number, heads) whose body they are: a
	// Content-Length body's whole length when its framing is known, a
	// chunked one's as its data passes, rounded up to a power of two as
	// fasthttp's buffer for it grows. Released when the handler is done
	// with the request (bodyDone), on an error the server answers
	// (releaseAll), and at the close.
	budget *forward.BodyBudget
	f      *forward.Forwarder // logs a refusal (nil: not logged)
	// rmu guards resv and gone: Close may come from another goroutine
	// (the server's shutdown, a tunnel's end).
	rmu  sync.Mutex
	resv []reservation
	gone bool // closed: nothing more is reserved
	// closed is closed by Close: a body waiting for budget (Grow) stops.
	closed chan struct{}
	// readBy is the read deadline fasthttp set last (unix ns; 0: none):
	// a chunked body waits for budget no longer.
	readBy atomic.Int64
	// passed counts the bytes Read returned.
	passed int64
	// chunked counts the data bytes of the chunked body being read,
	// chunkBuf the buffer fasthttp holds them in (reserved), chunkOld its
	// buffers outgrown, still reserved: released (after a collection) once
	// fasthttp has surely read past the chunk line it grew at, when
	// passed reaches chunkOldAt (it buffers at most readBufferSize bytes
	// unread, and grows its buffer as soon as it has read a chunk line).
	chunked, chunkBuf, chunkOld, chunkOldAt int64
	chunkHead                               int // the head whose body it is
	// headShared: the last head came whole in a read after bytes of the
	// request before it (mayWait).
	headShared bool
	// budgetRefusal is the body of the 503 to the request whose body did
	// not fit (requestError answers it).
	budgetRefusal string
	// waitGone: the connection ended (its client's reset, its close) while
	// a body waited for budget (grow).
	waitGone bool
	// unbudgeted: the head framed last is refused whatever its body
	// (headRefusal): its body reserves nothing (fasthttp reads none of it).
	unbudgeted bool
	// linger: the server refused a request on c and closes it after its
	// answer, the client's bytes perhaps still coming (lingerAfterRefusal).
	linger atomic.Bool
}

// reservation is the budget held for head's body.
type reservation struct {
	head int
	h    *forward.Hold
}

type scanState uint8

const (
	stHead      scanState = iota // the next byte starts (or part continues) a head
	stAwait                      // a head ended its read; its framing is decided at the next read
	stBody                       // a Content-Length body
	stChunkSize                  // a chunk-size line
	stChunkData                  // a chunk's data
	stChunkEnd                   // the CRLF after a chunk's data
	stTrailer                    // the last chunk and its trailers
)

// Bounds of what is scanned: a head larger than fasthttp's read buffer is
// fasthttp's (431); a chunk-size line or trailer section beyond these is
// left to fasthttp too.
const (
	scanMaxHead = 8 << 10 // the server's ReadBufferSize
	// A chunk line (size, extensions, CRLF) of this many bytes or more is
	// refused, and so is a body whose framing goes beyond what its data
	// carries by more than maxChunkExcess: Go's chunked reader's rules
	// (net/http/internal/chunked.go, maxLineLength and excess), which
	// the proxy applies to answers (forward.NewChunkedBody). fasthttp's
	// parser reads an extension byte by byte for as long as it goes on:
	// a client could send any number of bytes that carry no data
	// (CVE-2023-39326's shape) under the idle timeout.
	maxChunkLine   = 4096
	maxChunkExcess = 16 << 10
)

// Reasons of a chunked body's refusals.
const (
	reasonChunkLine   = "a chunk line longer than 4 KiB"
	reasonChunkExcess = "chunked encoding contains too much non-data"
	reasonTrailerLF   = "a line ends in a bare LF"
)

// errHeadRefused ends fasthttp's read of a refused head. It wraps
// net.ErrClosed, which fasthttp's server takes for a connection closed
// under it: it answers nothing (the refusal is out) and closes.
var errHeadRefused = fmt.Errorf("retrycap-proxy: request head refused: %w", net.ErrClosed)

// headParse is a fasthttp header and a reader over a head in memory, for
// the framing of a head that bytes follow.
type headParse struct {
	h  fasthttp.RequestHeader
	ps forward.HeadParser
}

func newHeadConn(c net.Conn) *headConn { return &headConn{Conn: c} }

// newHeadConn is the pre-parser on c with the engine's body budget.
func (e *Engine) newHeadConn(c net.Conn) *headConn {
	return &headConn{Conn: c, budget: e.f.Bodies, f: e.f, closed: make(chan struct{})}
}

// readBufferSize is the server's ReadBufferSize: fasthttp holds at most
// this many bytes read and not yet parsed.
const readBufferSize = 8192

// reserve takes n more bytes of the budget for the body of the current
// head; false (the refusal set, its answer worded for size) if they do not
// fit. A chunked body's growth (wait) waits for room: see
// forward.BodyBudget.Grow; until the read deadline fasthttp set for the
// body, or the close.
func (c *headConn) reserve(n, size int64, wait bool) bool {
	if c.budget == nil || n <= 0 {
		return true
	}
	c.rmu.Lock()
	if c.gone {
		c.rmu.Unlock()
		return true // the read ends in an error; nothing is held past the close
	}
	var h *forward.Hold
	if k := len(c.resv); k > 0 && c.resv[k-1].head == c.heads {
		h = c.resv[k-1].h
	} else {
		h = &forward.Hold{}
		c.resv = append(c.resv, reservation{head: c.heads, h: h})
	}
	c.rmu.Unlock()
	ok, inUse := c.budget.Reserve(h, n)
	if !ok && wait && c.mayWait() {
		ok, inUse = c.grow(h, n)
		if !ok && c.waitGone {
			// The wait ended with the connection: no answer reaches
			// anyone, so it is no refusal (reserveChunk).
			c.budget.GoneWaiting()
			return false
		}
	}
	if !ok {
		c.budgetRefusal = c.budget.RefusedBody(h, n, size, inUse)
		return false
	}
	c.rmu.Lock()
	if c.gone {
		// Closed while it waited: Close released the rest.
		c.budget.ReleaseFreed(h)
	}
	c.rmu.Unlock()
	return true
}

// mayWait: the chunked body being read may wait for budget, blocking the
// read it is scanned in. Only when nothing of the connection is held up by
// it: fasthttp is reading this body (every request before it handled) and
// its head came in a read of its own. A head read with the end of the
// request before it is parsed from fasthttp's buffer without a read, and
// then fasthttp does not flush the answers it holds (pipelining): the
// answer to a GET before a waiting body was not sent, and with the chunk
// line in the GET's read the GET itself was not served, until the wait
// ended. Such a body is refused at once instead, as every body was before
// bodies waited.
func (c *headConn) mayWait() bool {
	return c.served == c.heads-1 && !c.headShared
}

// grow waits for n more bytes of the budget for h (forward.BodyBudget.Grow)
// until the read deadline fasthttp set for the body, the close, or the
// client's reset: the connection's reads are paused, so nobody else sees
// it, and the body held its bytes (and held up every large body behind
// it) until --client-timeout. A FIN alone does not end the wait: a
// half-closed client still reads its answer, and its body may be whole in
// the socket (as a call's client: cut.go).
func (c *headConn) grow(h *forward.Hold, n int64) (bool, int64) {
	deadline := time.Now().Add(c.f.Cfg.ClientTimeout)
	if by := c.readBy.Load(); by != 0 {
		deadline = time.Unix(0, by)
	}
	reset, stopWatch := watchReset(c)
	gone, stop := make(chan struct{}), make(chan struct{})
	go func() {
		select {
		case <-stop:
		case <-c.closed:
			close(gone)
		case <-reset:
			close(gone)
		}
	}()
	ok, inUse := c.budget.Grow(h, n, deadline, gone)
	close(stop)
	stopWatch()
	if !ok {
		// Closed by now: the wait ended with the connection (or the
		// budget refused it as it ended; the 503 would reach nobody).
		select {
		case <-gone:
			c.waitGone = true
		default:
		}
	}
	return ok, inUse
}

// releaseOld releases the buffers a chunked body outgrew once fasthttp has
// surely dropped them (chunkOldAt): after the collection that frees them.
func (c *headConn) releaseOld() {
	if c.chunkOld == 0 || c.passed < c.chunkOldAt {
		return
	}
	c.rmu.Lock()
	if k := len(c.resv); k > 0 && c.resv[k-1].head == c.chunkHead {
		c.budget.ReleaseFreedPart(c.resv[k-1].h, c.chunkOld)
	}
	c.rmu.Unlock()
	c.chunkOld = 0
}

// bodyDone releases the budget of the requests the handler is done with:
// every head up to the one served.
func (c *headConn) bodyDone() {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	i := 0
	for ; i < len(c.resv) && c.resv[i].head <= c.served; i++ {
		c.budget.ReleaseFreed(c.resv[i].h)
	}
	c.resv = c.resv[:copy(c.resv, c.resv[i:])]
}

// releaseAll releases every reservation of the connection (it ends).
func (c *headConn) releaseAll() {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	for _, r := range c.resv {
		c.budget.ReleaseFreed(r.h)
	}
	c.resv = c.resv[:0]
}

// Close releases the connection's reservations and closes it.
func (c *headConn) Close() error {
	if c.linger.Swap(false) {
		c.lingerClose()
	}
	c.rmu.Lock()
	if !c.gone && c.closed != nil {
		close(c.closed)
	}
	c.gone = true
	c.rmu.Unlock()
	c.releaseAll()
	return c.Conn.Close()
}

// How long, and how many bytes, a refused connection is read after the
// proxy's answer (lingerClose): nginx's lingering_close reads for up to
// 30 s, Go's net/http waits 500 ms after its write shutdown. A client that
// read the answer stops sending and closes within a round trip, but what
// its socket buffers by then passes first: curl -T of 20 MB over loopback
// had up to 2.7 MB on its way (the bound was 4 MiB, and 1 run in 40 still
// met a reset). 16 MiB: the largest body the proxy reads.
const (
	lingerTime  = time.Second
	lingerBytes = forward.MaxRequestBody
)

// lingerAfterRefusal: the request being served on c (a headConn, or any
// other connection, which is ignored) was refused, and the server closes c
// after its answer.
func lingerAfterRefusal(c net.Conn) {
	if hc, ok := c.(*headConn); ok {
		hc.linger.Store(true)
	}
}

// lingerClose ends c's writes (the answer went out with a FIN) and reads
// and drops what the client still sends until it closes, for lingerTime
// and lingerBytes at most, before Close closes the socket. A close with
// the client's bytes unread is a reset, and a reset that meets a client
// still uploading the refused body can take the answer with it (curl:
// "Send failure: Connection reset by peer", no status).
func (c *headConn) lingerClose() {
	// The socket, under a connection the loop handed over with what it
	// had read (forward.PrefixConn): those bytes are dropped too.
	nc := c.Conn
	for {
		u, ok := nc.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		nc = u.NetConn()
	}
	cw, ok := nc.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil || nc.SetReadDeadline(time.Now().Add(lingerTime)) != nil {
		return
	}
	buf := make([]byte, 32<<10)
	for n := 0; n < lingerBytes; {
		k, err := nc.Read(buf)
		n += k
		if err != nil {
			return
		}
	}
}

// SetReadDeadline notes the deadline (a body waiting for budget waits no
// longer) and sets it.
func (c *headConn) SetReadDeadline(t time.Time) error {
	c.noteDeadline(t)
	return c.Conn.SetReadDeadline(t)
}

// SetDeadline notes the read deadline, as SetReadDeadline.
func (c *headConn) SetDeadline(t time.Time) error {
	c.noteDeadline(t)
	return c.Conn.SetDeadline(t)
}

func (c *headConn) noteDeadline(t time.Time) {
	if t.IsZero() {
		c.readBy.Store(0)
	} else {
		c.readBy.Store(t.UnixNano())
	}
}

// requestDone: the handler is done with c's request (c a headConn, or any
// other connection, which is ignored): its body's budget is released.
func requestDone(c net.Conn) {
	if hc, ok := c.(*headConn); ok {
		hc.bodyDone()
	}
}

// budgetRefused is the body of the 503 to the request of c whose body did
// not fit in the budget; "" if none. The connection's reservations are
// released: it closes after the answer.
func budgetRefused(c net.Conn) string {
	hc, ok := c.(*headConn)
	if !ok {
		return ""
	}
	hc.releaseAll()
	return hc.budgetRefusal
}

// closeWaitGone closes c, if its connection ended while a body waited for
// budget (waitGone), and reports whether it did.
func closeWaitGone(c net.Conn) bool {
	hc, ok := c.(*headConn)
	if !ok || !hc.waitGone {
		return false
	}
	_ = hc.Close()
	return true
}

// expectRefused is budgetRefused for a request with Expect: 100-continue,
// asked before its body is (engine.expect), and only of that request's
// own head (heads behind it, pipelined, are asked when they are served):
// if it ended its read, its framing is decided now, not at the next read
// (the body's, which would come after the 100). The server's goroutine
// asks, the one that reads c, with the handler not yet run (served counts
// the requests before this one): resolve frames the head, as that read
// would. Resolving for a later head instead framed it as this one's and
// stopped the scan of the connection.
func expectRefused(c net.Conn) string {
	hc, ok := c.(*headConn)
	if !ok || hc.off {
		return ""
	}
	if hc.st == stAwait && hc.served == hc.heads-1 {
		hc.resolve()
	}
	if hc.budgetRefusal == "" || !bytes.Equal(hc.refusal, budgetMarker) || hc.refuseAt != hc.served {
		return ""
	}
	return budgetRefused(c)
}

// budgetMarker is the refusal of a body that did not fit: never written
// (requestError answers it, budgetRefused), it only holds the refusal's place.
var budgetMarker = []byte("body budget")

// round2 is n rounded up to a power of two, as fasthttp's body buffer grows.
func round2(n int64) int64 {
	p := int64(1)
	for p < n {
		p <<= 1
	}
	return p
}

// servedRequest: the handler has the next request of c (a headConn, or any
// other connection, which is ignored).
// NetConn is the connection the pre-parser reads (clientClosed looks at it).
func (c *headConn) NetConn() net.Conn { return c.Conn }

func servedRequest(c net.Conn) {
	if hc, ok := c.(*headConn); ok {
		hc.served++
		// fasthttp flushes an answer only when nothing more was read
		// (pipelined), or when the handler set a write deadline (the
		// Handler does when nextWaits): whether the last one went out is
		// known when its handler begins (fasthttp reads nothing while a
		// handler runs).
		hc.interimOK = hc.served == 1 || hc.quiet
		nothingMore := hc.heads == hc.served && (hc.st == stHead || hc.st == stAwait) && len(hc.part) == 0 && len(hc.held) == 0
		hc.quiet = !hc.off && (nothingMore || nextWaits(hc))
	}
}

// interimOK reports whether an interim answer of the request being served
// on c may be written to c now, ahead of fasthttp's writer: every earlier
// answer on it went out (servedRequest). False for any other connection.
func interimOK(c net.Conn) bool {
	hc, ok := c.(*headConn)
	return ok && hc.interimOK
}

// nextWaits reports whether fasthttp has read into a request after the one
// being served on c (a headConn; any other connection: false) that is not
// whole in what it read: a head in its buffer whose body (or framing,
// stAwait) is still to come. fasthttp, which flushes an answer only when
// nothing more was read, would hold the served request's answer while it
// waits for that body.
func nextWaits(c net.Conn) bool {
	hc, ok := c.(*headConn)
	return ok && !hc.off && hc.heads > hc.served && hc.st != stHead
}

// stopScan: c becomes a tunnel (a CONNECT, a 101): nothing on it is a
// request head any more.
func stopScan(c net.Conn) {
	if hc, ok := c.(*headConn); ok {
		hc.stop()
	}
}

// stop ends scanning: what is held, and all that follows, passes unread.
func (c *headConn) stop() {
	c.off = true
	c.refusal = nil
	c.part, c.last = nil, nil
}

func (c *headConn) Read(p []byte) (int, error) {
	c.releaseOld()
	n, err := c.read(p)
	c.passed += int64(n)
	if err == io.EOF && c.unbudgeted && c.served < c.heads {
		// The client's end came while fasthttp reads the body of a head
		// refused whatever its body: fasthttp answers nothing to an end
		// of stream, and the client, which may only have closed its
		// sending half, would get no answer, where the loop answers the
		// head's refusal. A cut body is an error fasthttp answers
		// (requestError: the head's refusal).
		err = errBadHeadCut
	}
	return n, err
}

// errBadHeadCut ends fasthttp's read of the body of a head refused
// whatever its body, cut by its client's end (Read).
var errBadHeadCut = fmt.Errorf("retrycap-proxy: the body of a refused head cut: %w", io.ErrUnexpectedEOF)

func (c *headConn) read(p []byte) (int, error) {
	if c.refused {
		return 0, errHeadRefused
	}
	if c.refusal != nil {
		return c.refuse(p)
	}
	if c.off {
		if len(c.held) > 0 {
			n := copy(p, c.held)
			c.held = c.held[n:]
			return n, nil
		}
		return c.Conn.Read(p)
	}
	if c.mayTunnel && c.st == stHead {
		// The request that may have become a tunnel ended in an earlier
		// read; fasthttp reads on only once its handler is done with it,
		// and it did not become one (stopScan): requests follow.
		c.mayTunnel = false
	}
	if c.st == stAwait {
		c.resolve()
		if c.refusal != nil {
			// The body's framing did not fit in the budget (frame).
			return c.refuse(p)
		}
	}
	var n int
	var err error
	if len(c.held) > 0 {
		// Held after a request that did not become a tunnel: scanned now.
		n = copy(p, c.held)
		c.held = c.held[n:]
	} else {
		n, err = c.Conn.Read(p)
	}
	if n > 0 && !c.off {
		if k := c.scan(p[:n]); k < n {
			if len(c.held) > 0 {
				c.held = append(bytes.Clone(p[k:n]), c.held...)
			} else {
				c.held = append(c.held[:0], p[k:n]...)
			}
			if k == 0 {
				return c.refuse(p) // scan holds at 0 only to refuse
			}
			return k, nil
		}
	}
	return n, err
}

// refuse writes the refusal of the head held, if fasthttp has finished
// every request before it; if not, fasthttp frames those requests
// otherwise than the scanner did, so the bytes held are passed on and
// scanning stops.
func (c *headConn) refuse(p []byte) (int, error) {
	if c.served != c.refuseAt {
		c.stop()
		n := copy(p, c.held)
		c.held = c.held[n:]
		return n, nil
	}
	if c.waitGone {
		// Its connection ended while its body waited for budget (endGone):
		// nothing to answer.
		c.refusal, c.held, c.refused = nil, nil, true
		return 0, errWaitGone
	}
	if c.refuseAt != c.heads {
		// A chunked body: fasthttp is reading it, with the answers to the
		// requests before it perhaps still in its buffer. Its error
		// handler answers (requestError), after those.
		c.refusal, c.held, c.refused = nil, nil, true
		return 0, errBodyRefused
	}
	_, _ = c.Write(c.refusal)
	c.refusal, c.held, c.refused = nil, nil, true
	return 0, errHeadRefused
}

// errWaitGone ends fasthttp's read of a chunked body whose connection
// ended while it waited for budget: it wraps net.ErrClosed, so the server
// answers nothing (a 503 would reach no one) and closes.
var errWaitGone = fmt.Errorf("retrycap-proxy: connection ended while its body waited for budget: %w", net.ErrClosed)

// errBodyRefused ends fasthttp's read of a chunked body the pre-parser
// refused (fasthttp's error handler gets another error for it:
// bodyRefusedWhy tells).
var errBodyRefused = errors.New("retrycap-proxy: chunked body refused")

// bodyRefusedWhy is why c (a request's connection) refused the chunked
// body of the request being read; "" if it did not.
func bodyRefusedWhy(c net.Conn) string {
	if hc, ok := c.(*headConn); ok {
		return hc.bodyRefused
	}
	return ""
}

// resolve decides the framing of the head that ended the last read: the
// handler had its request (no body), or fasthttp is reading its body.
func (c *headConn) resolve() {
	switch c.served {
	case c.heads:
		c.st = stHead
	case c.heads - 1:
		c.frame(c.last)
	default:
		c.stop()
	}
	c.last = c.last[:0]
}

// frame sets the state after head (passed on) from its framing, as
// fasthttp's parser reads it, and reserves a Content-Length body's bytes: on
// false they did not fit, and the body is refused (refuseBody's state set,
// with budgetRefusal).
func (c *headConn) frame(head []byte) bool {
	if c.hp == nil {
		c.hp = &headParse{}
		c.hp.ps.Init(scanMaxHead + 1)
	}
	h := &c.hp.h
	h.Reset()
	if err := h.Read(c.hp.ps.Reader(head)); err != nil {
		// fasthttp refuses it too (and closes).
		c.stop()
		return true
	}
	c.mayTunnel = h.IsConnect() || h.ConnectionUpgrade() || len(h.Peek(fasthttp.HeaderUpgrade)) > 0
	// A head refused whatever its body: nothing is reserved for the body,
	// which fasthttp does not read (headerReceived), so that the refusal
	// is the head's 400, not the budget's 503.
	c.unbudgeted = false
	if n := h.ContentLength(); n != 0 && n != -2 {
		_, c.unbudgeted = headRefusal(h)
	}
	switch n := h.ContentLength(); {
	case n == -1:
		c.st, c.excess, c.chunked, c.chunkBuf, c.chunkOld, c.chunkHead = stChunkSize, 0, 0, 0, 0, c.heads
	case n > 0:
		// Reserved the length fasthttp's buffer takes (round2). A larger
		// body's is reserved by the engine's headerReceived, before
		// fasthttp allocates its buffer (a body over fasthttp's limit is
		// its 413, unread).
		if n <= forward.BufferedBodyMax && !c.unbudgeted && !c.reserve(round2(int64(n)), int64(n), false) {
			c.refuseBudget()
			return false
		}
		c.st, c.left = stBody, int64(n)
	default: // 0, or -2: neither a length nor chunked (no body)
		c.st = stHead
	}
	return true
}

// reserveChunk reserves what fasthttp's buffer for a chunked body grows to
// when it reads a chunk of size bytes, whose line ends at the stream
// offset at: it makes room for the whole chunk and its CRLF first, a new
// buffer of round2 of the data so far, the old one copied and left
// garbage. The new buffer is reserved (waiting for room, in the order the
// bodies began: forward.BodyBudget.Grow) beside the old ones, which are
// released once they are surely garbage and collected (releaseOld): a
// 15 MiB body holds 16 MiB, 24 while it grows past 8. Reserved twice
// the buffer for the garbage instead, such a body needed the whole 32 MiB
// budget, and eight concurrent ones were all refused. false: the body
// refused. A body over fasthttp's limit is its 413, unreserved.
func (c *headConn) reserveChunk(size, at int64) bool {
	if c.budget == nil || c.unbudgeted {
		return true
	}
	c.chunked += size
	if c.chunked > forward.MaxRequestBody {
		return true
	}
	if want := round2(c.chunked + 2); want > c.chunkBuf {
		if !c.reserve(want, c.chunked, true) {
			if c.waitGone {
				c.endGone()
			} else {
				c.refuseBudget()
			}
			return false
		}
		c.chunkOld += c.chunkBuf
		c.chunkBuf, c.chunkOldAt = want, at+readBufferSize
	}
	return true
}

// refuseBudget refuses the body of the head just passed on (fasthttp has
// it) for the budget: the server's error handler answers (requestError,
// budgetRefused). Nothing of the body was read, so the scan goes no further.
func (c *headConn) refuseBudget() {
	if c.f != nil && c.hp != nil {
		// The head framed last is the refused body's (fasthttp resets its
		// own on the body's error, before requestError sees it).
		c.f.LogBudgetRefusal(&c.hp.h, nil)
	}
	c.refusal, c.refuseAt = budgetMarker, c.heads-1
	c.part = c.part[:0]
}

// endGone ends the chunked body whose connection ended while it waited
// for budget (waitGone): its line in the access log says the client went
// (status 0, "cancelled"), and the read ends as at a close, which fasthttp
// answers with nothing (refuse).
func (c *headConn) endGone() {
	if c.f != nil && c.hp != nil {
		c.f.LogBudgetGone(&c.hp.h)
	}
	c.refusal, c.refuseAt = budgetMarker, c.heads-1
	c.part = c.part[:0]
}

// scan follows data, one read, and returns how much of it passes on: all of
// it, or the bytes before a refused head (c.refusal set).
func (c *headConn) scan(data []byte) int {
	for i := 0; i < len(data) && !c.off; {
		rest := data[i:]
		switch c.st {
		case stHead:
			if c.mayTunnel {
				// The request before may become a tunnel: the rest waits
				// (Read) until its handler is done with it.
				if i == 0 {
					c.stop() // not reached: it ended in an earlier read (Read)
					return len(data)
				}
				return i
			}
			head, before := rest, len(c.part)
			if before > 0 {
				c.part = append(c.part, rest...)
				head = c.part
			}
			end, why := forward.CheckHead(head)
			if end < 0 {
				if len(head) > scanMaxHead {
					c.stop()
				} else if before == 0 {
					c.part = append(c.part, rest...)
				}
				// Passed on: fasthttp waits for the rest of it too.
				return len(data)
			}
			if why != "" {
				c.refusal, c.refuseAt = forward.MalformedAnswer(why), c.heads
				c.part = c.part[:0]
				return i
			}
			c.heads++
			// Read with bytes before it (whole in this read): see mayWait.
			c.headShared = before == 0 && i > 0
			i += end - before
			if i == len(data) {
				c.last = append(c.last[:0], head[:end]...)
				c.st = stAwait
			} else if !c.frame(head[:end]) {
				return i
			}
			if c.part != nil {
				c.part = c.part[:0]
			}
		case stBody:
			k := min(int64(len(rest)), c.left)
			c.left -= k
			i += int(k)
			if c.left == 0 {
				c.st = stHead
			}
		case stChunkSize:
			j := bytes.IndexByte(rest, '\n')
			if j < 0 {
				if len(c.part)+len(rest) >= maxChunkLine {
					return c.refuseBody(i, reasonChunkLine)
				}
				c.part = append(c.part, rest...)
				return len(data)
			}
			line := rest[:j+1]
			if len(c.part) > 0 {
				c.part = append(c.part, line...)
				line = c.part
			}
			if len(line) >= maxChunkLine {
				return c.refuseBody(i, reasonChunkLine)
			}
			size, ok := chunkSize(line)
			if ok && chunkExcess(&c.excess, len(line), size) {
				return c.refuseBody(i, reasonChunkExcess)
			}
			i += j + 1
			switch {
			case !ok:
				c.stop()
			case size == 0:
				c.part = append(c.part[:0], line...)
				c.st = stTrailer
			default:
				if !c.reserveChunk(size, c.passed+int64(i)) {
					return i - (j + 1)
				}
				c.part = c.part[:0]
				c.st, c.left = stChunkData, size
			}
		case stChunkData:
			k := min(int64(len(rest)), c.left)
			c.left -= k
			i += int(k)
			if c.left == 0 {
				c.st, c.left = stChunkEnd, 2
			}
		case stChunkEnd:
			if rest[0] != "\r\n"[2-c.left] {
				c.stop()
				break
			}
			i++
			c.left--
			if c.left == 0 {
				c.st = stChunkSize
			}
		case stTrailer:
			// The last chunk's line, then the trailer fields through the
			// empty line: a head's shape.
			before := len(c.part)
			c.part = append(c.part, rest...)
			end := forward.HeadEnd(c.part)
			if end < 0 {
				if len(c.part) > scanMaxHead {
					c.stop()
				}
				return len(data)
			}
			if forward.BareLF(c.part[:end]) {
				// fasthttp's parser never finds the end of trailers ended
				// by bare LFs (it would wait for --http-request-timeout):
				// the request is refused as a head with a bare LF is, with
				// the same answer, before fasthttp has the rest of it. What
				// of the last chunk came in earlier reads is fasthttp's
				// already; this read's part of it is held.
				return c.refuseBody(i, reasonTrailerLF)
			}
			// The trailer lines (after the last chunk's) are held to the
			// head's field-line rules, refused the same way.
			if why := forward.BadTrailerLines(c.part[:end]); why != "" {
				return c.refuseBody(i, why)
			}
			i += end - before
			c.part = c.part[:0]
			c.st = stHead
		case stAwait:
			// Only at the start of a read (resolve); never mid-scan.
			c.stop()
		}
	}
	return len(data)
}

// refuseBody refuses the chunked body being read (fasthttp has its head)
// for why, holding data from i on: the server's error handler answers
// (requestError, bodyRefusedWhy), after the answers fasthttp holds for the
// requests before it.
func (c *headConn) refuseBody(i int, why string) int {
	c.refusal, c.refuseAt, c.bodyRefused = forward.MalformedAnswer(why), c.heads-1, why
	c.part = c.part[:0]
	return i
}

// chunkExcess is Go's count (net/http/internal/chunked.go, beginChunk):
// each chunk line (line bytes, through its LF) adds its length and the CRLF
// after the data, less 16 and twice the data; over maxChunkExcess the body
// is refused.
func chunkExcess(excess *int64, line int, size int64) bool {
	*excess += int64(line) // the line without its CRLF, plus the CRLF after the data
	*excess = max(*excess-16-2*size, 0)
	return *excess > maxChunkExcess
}

// chunkSize reads a chunk-size line (through its LF): the hex size, then
// whatever fasthttp's parser allows before the CRLF (extensions), which it
// checks itself. ok is false for a line this does not follow.
func chunkSize(line []byte) (size int64, ok bool) {
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return 0, false
	}
	digits := 0
	for _, b := range line {
		var d byte
		switch {
		case b >= '0' && b <= '9':
			d = b - '0'
		case b >= 'a' && b <= 'f':
			d = b - 'a' + 10
		case b >= 'A' && b <= 'F':
			d = b - 'A' + 10
		default:
			return size, digits > 0
		}
		if digits++; digits > 15 {
			return 0, false
		}
		size = size<<4 | int64(d)
	}
	return size, digits > 0
}
