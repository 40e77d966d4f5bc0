//go:build linux

package loop

import (
	"bytes"
	"errors"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/sys/unix"

	"github.com/retrycap/retrycap/internal/proxy/forward"
	"github.com/retrycap/retrycap/internal/proxy/netpoll"
)

// cliConn is a client connection served by a loop: one request at a time,
// in order; requests pipelined behind it wait in in (or in the socket).
type cliConn struct {
	l          *evLoop
	fd         int
	in         []byte // read, not yet served: a partial request or pipelined ones
	out        []byte // answer bytes the socket did not take yet
	call       *call  // the request being served
	lastActive int64
	// headStart: when the request head being waited for began (its first
	// byte; the accept for a connection's first request); 0 when no request
	// is due (idle between requests). bodySince: when the head of a request
	// whose body is not all in yet was read; 0 otherwise. The sweep enforces
	// --http-request-timeout and --client-timeout from them.
	headStart  int64
	bodySince  int64
	closeAfter bool // answer the request in flight, then close
	eof        bool // the client sent all it will: serve what is buffered, then close
	unread     bool // stopped reading with bytes possibly left in the socket
	serving    bool // inside serve: a call answered synchronously returns to its loop
	closed     bool
	// resv is the body budget (forward.BodyBudget) held for the request
	// being read or served (reserved: it holds some): its Content-Length,
	// reserved when its head is read, released when its answer is written
	// or the connection ends.
	resv     forward.Hold
	reserved bool
	// refusing: the answer being written is the loop's own refusal (a
	// head's 400, the body budget's 503), after which the connection
	// lingers (linger). lingerT: set while it lingers; lingerUntil, when
	// it stops; lingered, the bytes read and dropped meanwhile.
	refusing    bool
	lingerT     *netpoll.Timer
	lingerUntil int64
	lingered    int
}

func (c *cliConn) writing() bool { return len(c.out) > 0 }

func (c *cliConn) Event(ev uint32) {
	if c.closed {
		return
	}
	if ev&unix.EPOLLOUT != 0 && c.writing() {
		c.flush()
		if c.closed {
			return
		}
	}
	if ev&(unix.EPOLLHUP|unix.EPOLLERR) != 0 && c.call != nil {
		// The client reset the connection while its call runs: nobody
		// will read the answer. Cut the upstream work now (close: the
		// attempt's upstream connection closed, its timer or backoff
		// cancelled, the attempt judged the client's cancellation).
		c.close()
		return
	}
	if ev&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		// The client will send nothing more: answer what it sent (a
		// half-closed client still reads), then close.
		c.eof = true
	}
	if ev&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		c.read()
	}
}

// read drains the socket (edge-triggered) into the loop's buffer, or into
// c.in when bytes are already waiting or a request is being served, then
// serves what it can.
func (c *cliConn) read() {
	if c.lingerT != nil {
		c.drop()
		return
	}
	l := c.l
	c.unread = false
	filled := false // a read filled the buffer: its bytes wait in c.in
	for {
		busy := c.call != nil || c.writing()
		if busy && len(c.in) >= loopMaxInput {
			c.unread = true
			return
		}
		n, err := netpoll.Recv(c.fd, l.buf)
		if n > 0 {
			c.lastActive = l.now()
			data := l.buf[:n]
			if busy || len(c.in) > 0 || n == len(l.buf) {
				c.in = append(c.in, data...)
				data = nil
			}
			if n == len(l.buf) {
				if len(c.in) >= loopMaxInput {
					c.unread = true
					if !busy {
						c.serve(nil)
					}
					return
				}
				filled = true
				continue // edge-triggered: there may be more
			}
			if !busy {
				c.serve(data)
			}
			return
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EAGAIN) {
			// The socket held exactly what filled the buffer (a 64 KiB
			// request, say): serve it now, as no edge will come for it.
			if filled && !busy && !c.serving {
				c.serve(nil)
			}
			return
		}
		if err != nil && c.call != nil {
			// A reset (ECONNRESET) while the call runs, seen by the read
			// before epoll reported it: cut, as in Event.
			c.close()
			return
		}
		// End of stream (a FIN: a half-closed client still reads) or an
		// error: nothing more will come.
		c.eof = true
		if c.call == nil && !c.writing() && !c.serving {
			c.serve(nil)
		}
		return
	}
}

// serve serves the requests in data (nil: in c.in), one at a time: a call
// that is answered at once (a refused breaker) lets the next one start here
// instead of recursing.
func (c *cliConn) serve(data []byte) {
	c.serving = true
	for !c.closed && c.call == nil && !c.writing() {
		fromIn := data == nil
		if fromIn {
			data = c.in
		}
		if len(data) == 0 {
			c.in = c.in[:0]
			break
		}
		rest, ok := c.start(data)
		if !ok {
			break
		}
		// Keep what follows the request (pipelined bytes) before anything
		// else uses the loop's buffer.
		if fromIn {
			c.in = c.in[:copy(c.in, rest)]
		} else {
			c.in = append(c.in[:0], rest...)
		}
		data = nil
		if c.call != nil {
			c.call.run()
		}
	}
	c.serving = false
	if c.closed || c.call != nil || c.writing() || c.lingerT != nil {
		return
	}
	if len(c.in) > 0 && c.headStart == 0 {
		// Part of the next request is in: its head is due within
		// --http-request-timeout, however slowly its bytes come.
		c.headStart = c.l.now()
	}
	switch {
	case c.unread:
		// Bytes wait in the socket that no edge will announce again; first,
		// even when the client's end was seen: that end comes after them.
		c.read()
	case c.eof:
		// Nothing more will come, and what is left is not a whole request.
		c.close()
	case c.l.draining:
		// Idle now (an answer begun before the drain, without Connection:
		// close, is out), and the drain closes idle connections: left open,
		// it would hold the drain until the idle sweep.
		c.close()
	}
}

// start parses the request at the head of data and sets up its call (not
// run yet). It returns the bytes after the request, and false when it
// cannot start one: the request is incomplete (kept in c.in), or the
// connection was handed off or closed.
func (c *cliConn) start(data []byte) (rest []byte, ok bool) {
	l := c.l
	end, refusal := forward.CheckHead(data)
	if end < 0 {
		if len(data) > loopMaxHead {
			c.handoff(data, HandoffHeadTooLarge)
			return nil, false
		}
		c.keep(data)
		return nil, false
	}
	if end > loopMaxHead {
		// Complete but over the limit: handed off too (431), as when it
		// arrives in pieces; served here, a 9 KiB head got 200 or 431
		// depending on how its bytes were split.
		c.handoff(data, HandoffHeadTooLarge)
		return nil, false
	}
	if bytes.HasPrefix(data, h2cPrefaceHead) {
		// h2c with prior knowledge: the preface's first part parses as a
		// head ("PRI * HTTP/2.0") that fasthttp refuses; the goroutine
		// engine's listener hands it to the h2c path. Counted apart from
		// the malformed heads it would otherwise be counted with.
		c.handoff(data, HandoffH2C)
		return nil, false
	}
	if refusal != "" {
		// Refused before it is parsed, as the goroutine engine's pre-parser
		// refuses it (fasthttp's parser would wait for the end of a head
		// ended by bare LFs).
		c.refuse(refusal)
		return nil, false
	}
	cl := l.getCall()
	req := &cl.req
	if err := req.Header.Read(l.parse.Reader(data[:end])); err != nil {
		l.putCall(cl)
		c.handoff(data, HandoffMalformed)
		return nil, false
	}
	msg := forward.BadHeaderLines(req.Header.RawHeaders())
	if msg == "" {
		msg = forward.CheckTarget(req.Header.Host(), req.Header.RequestURI())
	}
	if msg != "" {
		l.putCall(cl)
		c.refuse(msg)
		return nil, false
	}
	if err := l.uri.Parse(req.Header.Host(), req.Header.RequestURI()); err != nil {
		// A target fasthttp's URI parser refuses (a port that is no
		// number): the goroutine engine's server refuses it before its
		// handler runs, in the same words, and logs it. The request's own
		// parse (URI, in eligible) drops the error and leaves the path
		// empty: the loop sent `DELETE /users/42` upstream as `DELETE /`.
		l.putCall(cl)
		c.handoff(data, HandoffMalformed)
		return nil, false
	}
	up, target, bodyLen, why := l.eligible(cl)
	if why != 0 {
		l.putCall(cl)
		c.handoff(data, why)
		return nil, false
	}
	if bodyLen > 0 && !c.reserved {
		// The whole length, as the head arrives: the body's bytes are
		// held (in c.in, then the request) until the answer.
		ok, inUse := l.f.Bodies.Reserve(&c.resv, int64(bodyLen))
		if !ok {
			l.f.LogBudgetRefusal(&req.Header, l.alog)
			c.refuseBudget(l.f.Bodies.RefusedBody(&c.resv, int64(bodyLen), int64(bodyLen), inUse))
			l.putCall(cl)
			return nil, false
		}
		c.reserved = true
	}
	need := end + bodyLen
	if len(data) < need {
		l.putCall(cl)
		c.keep(data)
		if c.bodySince == 0 {
			c.bodySince = l.now()
		}
		return nil, false
	}
	c.headStart, c.bodySince = 0, 0
	if need > end {
		req.SetBody(data[end:need])
	}
	if req.Header.ConnectionClose() {
		c.closeAfter = true
	}
	cl.c, cl.up, cl.target = c, up, target
	c.call = cl
	l.calls++ // for Engine.Calls
	return data[need:], true
}

// refuse answers a head the proxy does not read with 400 and closes the
// connection (what follows the head cannot be framed).
func (c *cliConn) refuse(why string) {
	c.closeAfter, c.refusing = true, true
	c.in = c.in[:0]
	c.write(forward.MalformedAnswer(why))
}

// refuseBudget answers a request whose body does not fit in the budget
// (forward.BudgetAnswer) and closes the connection: the body is not read.
func (c *cliConn) refuseBudget(body string) {
	c.closeAfter, c.refusing = true, true
	c.in = c.in[:0]
	c.write(forward.BudgetAnswer(body))
}

// releaseBody releases the budget held for the request's body.
func (c *cliConn) releaseBody() {
	if !c.reserved {
		return // most requests: no lock taken
	}
	c.l.f.Bodies.Release(&c.resv)
	c.reserved = false
}

// keep saves an incomplete request until more of it arrives.
func (c *cliConn) keep(data []byte) {
	if len(c.in) == 0 || &c.in[0] != &data[0] {
		c.in = append(c.in[:0], data...)
	}
}

// eligible reports whether the loop serves the request itself: HTTP/1.1,
// plain http, to a known upstream, with no body or a body of known length
// up to 64 KiB, and nothing that needs the connection's control (CONNECT,
// Upgrade, Expect). It returns the upstream, the address to reach it at
// and the body's length, or why not (the hand-off metric's reason).
func (l *evLoop) eligible(cl *call) (up *forward.Upstream, target string, bodyLen int, why HandoffReason) {
	h := &cl.req.Header
	// fasthttp: -1 chunked, -2 neither length nor chunked (a request
	// without a body).
	bodyLen = h.ContentLength()
	if bodyLen == -2 {
		bodyLen = 0
	}
	// One pass over the head finds the names checked here and those the
	// exchange looks up (it gets the result: cl.seen); a chunked body or a
	// Transfer-Encoding makes it report every name.
	cl.seen = forward.ScanRequestHeaders(h)
	switch {
	case !h.IsHTTP11():
		return nil, "", 0, HandoffHTTP10
	case h.IsConnect():
		return nil, "", 0, HandoffConnect
	case bodyLen < 0 || bodyLen > loopMaxBody || cl.seen&forward.SeenTransferEncoding != 0:
		return nil, "", 0, HandoffRequestBody
	case h.ConnectionUpgrade() || cl.seen&forward.SeenUpgrade != 0:
		return nil, "", 0, HandoffUpgrade
	case cl.seen&forward.SeenExpect != 0:
		return nil, "", 0, HandoffExpect
	}
	uri := cl.req.URI()
	if s := uri.Scheme(); string(s) != "http" {
		return nil, "", 0, HandoffScheme
	}
	hostPort := uri.Host()
	up = l.f.Match(forward.SplitHostPort(hostPort))
	if len(hostPort) == 0 || up == nil {
		return nil, "", 0, HandoffUnknownHost
	}
	target = l.target(up, hostPort)
	if l.f.IsSelf([]byte(target)) {
		// A known upstream that resolves to the proxy's own listener: the
		// goroutine engine refuses it (508), as it does any self-loop.
		return nil, "", 0, HandoffSelfLoop
	}
	return up, target, bodyLen, 0
}

// target is the address an upstream request goes to, as the other engine
// dials it: --resolve for the upstream's name, else the request's host
// and port (80 by default) through --resolve by host name.
func (l *evLoop) target(up *forward.Upstream, hostPort []byte) string {
	if up.Resolved != "" {
		return up.Resolved
	}
	if t, ok := l.targets[string(hostPort)]; ok {
		return t
	}
	hp := string(hostPort)
	t := l.f.TargetOf(up, hostPort) // the other engine's rule, cached
	if len(l.targets) < 4096 {
		l.targets[hp] = t
	}
	return t
}

// handoff gives the connection, with what was read of it, to the
// goroutine engine, which serves it from then on.
func (c *cliConn) handoff(data []byte, why HandoffReason) {
	l := c.l
	l.f.M.Handoffs.WithLabelValues(why.String()).Inc()
	prefix := append([]byte(nil), data...)
	fd := c.fd
	c.detach()
	nc, err := netpoll.FileConn(fd, "client")
	if err != nil {
		l.f.Logger.Printf("event loop: hand-off: %v", err)
		return
	}
	l.e.handoff.Push(&forward.PrefixConn{Conn: nc, Prefix: prefix})
}

// detach takes the connection out of the loop without closing its socket.
func (c *cliConn) detach() {
	c.releaseBody()
	c.l.poll.Forget(c.fd)
	delete(c.l.clients, c)
	c.closed = true
	c.in, c.out = nil, nil
}

// answer writes the call's response and ends the call.
func (c *cliConn) answer() {
	l, cl := c.l, c.call
	resp := &cl.resp
	if cl.req.Header.IsHead() {
		resp.SkipBody = true
	}
	if c.closeAfter || l.draining {
		c.closeAfter = true
		resp.SetConnectionClose()
	}
	var err error
	if cl.x.UpstreamAnswer() {
		l.wbuf.b = appendAnswer(l.wbuf.b[:0], resp)
	} else {
		err = l.render(resp)
	}
	cl.x.End()
	c.call = nil
	l.putCall(cl)
	c.releaseBody()
	if err != nil {
		l.f.Logger.Printf("event loop: writing an answer: %v", err)
		c.close()
		return
	}
	c.write(l.wbuf.b)
}

// interim sends an interim (1xx) answer of the call in flight, before its
// answer: what the socket does not take waits in c.out, ahead of the
// answer (write). A failed write is not acted on here (the upstream's
// answer is being parsed): the answer's write meets it and closes.
func (c *cliConn) interim(b []byte) {
	if c.closed {
		return
	}
	if c.writing() {
		c.out = append(c.out, b...)
		return
	}
	rest, err := netpoll.WriteSome(c.fd, b)
	if err == nil && len(rest) > 0 {
		c.out = append(c.out, rest...)
	}
}

// write sends b, keeping what the socket does not take for EPOLLOUT.
func (c *cliConn) write(b []byte) {
	if c.writing() {
		// An interim answer is still going out: b follows it.
		c.out = append(c.out, b...)
		return
	}
	rest, err := netpoll.WriteSome(c.fd, b)
	if err != nil {
		c.close()
		return
	}
	if len(rest) > 0 {
		c.out = append(c.out, rest...)
		return
	}
	c.written()
}

// flush sends the rest of an answer once the socket takes more.
func (c *cliConn) flush() {
	out := c.out
	c.out = c.out[:0]
	c.write(out)
	if !c.writing() && cap(c.out) > 16<<10 {
		c.out = nil
	}
}

// written: the answer is out; close, or serve what came next.
func (c *cliConn) written() {
	c.lastActive = c.l.now()
	if c.call != nil {
		// Only an interim answer of the call in flight went out.
		return
	}
	if c.closeAfter {
		if c.refusing {
			c.linger()
			return
		}
		c.close()
		return
	}
	if cap(c.in) > 16<<10 && len(c.in) == 0 {
		c.in = nil
	}
	if !c.serving {
		c.serve(nil)
	}
}

// timedOut answers 408 to a request not received in time and closes the
// connection (the sweep found it: no call is in flight, nothing is being
// written).
func (c *cliConn) timedOut(kind string) {
	c.l.f.M.Timeouts.WithLabelValues(kind).Inc()
	answer := timeoutHead
	if kind == forward.TimeoutClient {
		answer = timeoutBody
	}
	if rest, err := netpoll.WriteSome(c.fd, answer); err != nil || len(rest) > 0 {
		c.close()
		return
	}
	c.linger()
}

// The 408 answers, written whole (a socket with nothing queued takes them),
// the proxy's own answers' form (forward.OwnAnswer).
var (
	timeoutHead = forward.OwnAnswer(fasthttp.StatusRequestTimeout, "retrycap-proxy: request timeout: request head not received within --http-request-timeout\n", true)
	timeoutBody = forward.OwnAnswer(fasthttp.StatusRequestTimeout, "retrycap-proxy: request timeout: request body not received within --client-timeout\n", true)
)

// close closes the connection; a call in flight is abandoned (its upstream
// connection closed, its timers cancelled).
func (c *cliConn) close() {
	if c.closed {
		return
	}
	if cl := c.call; cl != nil {
		cl.abandon()
		cl.x.End()
		c.call = nil
		c.l.putCall(cl)
	}
	if c.lingerT != nil {
		c.l.timers.Cancel(c.lingerT)
	}
	fd := c.fd
	c.detach()
	_ = unix.Close(fd)
}

// How long, and how many bytes, a connection is read after the loop's own
// refusal (linger): the goroutine engine's bounds (its lingerAfterRefusal).
// 16 MiB: the largest body the proxy reads.
const (
	lingerTime  = time.Second
	lingerBytes = forward.MaxRequestBody
)

// linger ends a connection after the loop's own refusal, its answer
// written whole: the writes end (the answer goes out with a FIN), and what
// the client still sends is read and dropped until it closes, for
// lingerTime and lingerBytes at most, before the socket closes. A close
// with the client's bytes unread is a reset, and a client still sending
// its body meets it in a write and may lose the answer with it (Go's
// net/http client: "write: broken pipe", no answer). The loop's timer, no
// goroutine: the first drop runs from the timer (now), outside serve,
// whose bytes the loop's buffer still holds.
func (c *cliConn) linger() {
	if unix.Shutdown(c.fd, unix.SHUT_WR) != nil {
		c.close()
		return
	}
	c.releaseBody()
	c.in, c.out, c.headStart, c.bodySince = nil, nil, 0, 0
	now := c.l.now()
	c.lingerUntil = now + int64(lingerTime)
	c.lingerT = netpoll.NewTimer(c.lingerTick)
	c.lingerT.Owner = c
	c.l.timers.Schedule(c.lingerT, now)
}

// lingerTick drops what came, or ends the linger when its time is up.
func (c *cliConn) lingerTick() {
	if c.closed {
		return
	}
	if c.l.now() >= c.lingerUntil {
		c.close()
		return
	}
	c.drop()
	if !c.closed {
		c.l.timers.Schedule(c.lingerT, c.lingerUntil)
	}
}

// drop reads and drops what the socket holds of a lingering connection;
// the client's end (or an error), or lingerBytes in all, closes it.
func (c *cliConn) drop() {
	for {
		n, err := netpoll.Recv(c.fd, c.l.buf)
		switch {
		case n > 0:
			c.lingered += n
			if c.lingered >= lingerBytes {
				c.close()
				return
			}
		case errors.Is(err, unix.EINTR):
		case errors.Is(err, unix.EAGAIN):
			return
		default:
			c.close()
			return
		}
	}
}
