//go:build linux

package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/sys/unix"
)

// call is one request served by a loop: its exchange (the policy, shared
// with the goroutine engine) and the attempt under way. Calls are pooled
// per loop, with their request, response and scratch buffers.
type call struct {
	l      *evLoop
	c      *cliConn
	req    fasthttp.Request
	resp   fasthttp.Response
	sc     scratch
	x      exchange
	up     *upstream
	seen   seen    // the request's header names the data path looks up (headers.go)
	target string  // host:port the attempts go to (the idle pool's key)
	uc     *upConn // the attempt's upstream connection
	t      *timer  // the attempt's timeout, or the backoff before the next
	// backoff: t is a backoff, not a per-try timeout.
	backoff bool
	// seq numbers the attempts, so that a DNS answer for an attempt that
	// timed out meanwhile is ignored.
	seq uint64
	// The addresses the attempt's connect goes through in turn.
	ips    []netip.Addr
	ipNext int
	ipLeft int
	port   int
}

func (l *evLoop) getCall() *call {
	if n := len(l.free); n > 0 {
		cl := l.free[n-1]
		l.free = l.free[:n-1]
		return cl
	}
	cl := &call{l: l}
	cl.t = newTimer(cl.onTimer)
	cl.t.owner = cl
	return cl
}

// putCall recycles a call; at most 1024 are kept per loop.
func (l *evLoop) putCall(cl *call) {
	l.timers.cancel(cl.t)
	cl.req.Reset()
	cl.resp.Reset()
	cl.c, cl.up, cl.uc, cl.target, cl.backoff, cl.ips = nil, nil, nil, "", false, nil
	cl.x = exchange{}
	if len(l.free) < 1024 {
		l.free = append(l.free, cl)
	}
}

// run starts the call: the exchange's checks, then the first attempt.
func (cl *call) run() {
	if !cl.x.begin(cl.l.p, cl.up, &cl.req, &cl.resp, cl.seen, &cl.sc) {
		cl.c.answer()
		return
	}
	cl.attempt()
}

// attempt starts the next attempt, or answers when the exchange refuses it.
func (cl *call) attempt() {
	if !cl.x.nextAttempt() {
		cl.c.answer()
		return
	}
	l := cl.l
	cl.seq++
	cl.backoff = false
	l.timers.schedule(cl.t, l.now()+int64(l.p.cfg.PerTryTimeout))
	if uc := l.idle(cl.target); uc != nil {
		uc.send(cl)
		return
	}
	cl.dial()
}

// onTimer is the per-try timeout, or the end of a backoff.
func (cl *call) onTimer() {
	if cl.backoff {
		cl.backoff = false
		cl.x.waited()
		cl.attempt()
		return
	}
	cl.seq++ // a DNS answer still on its way is for nobody now
	// Not connected yet (a DNS answer or the connect pending): a connect
	// failure, as a dial timeout is in the goroutine engine.
	var err error = fasthttp.ErrTimeout
	if cl.uc == nil || cl.uc.connecting {
		err = &dialError{fasthttp.ErrDialTimeout}
	}
	if cl.uc != nil {
		cl.uc.close()
		cl.uc = nil
	}
	cl.after(err)
}

// after hands the attempt's result to the exchange: retry (now, or after
// its backoff), or answer.
func (cl *call) after(err error) {
	l := cl.l
	l.timers.cancel(cl.t)
	retry, wait := cl.x.afterAttempt(err)
	if !retry {
		cl.c.answer()
		return
	}
	if wait > 0 {
		cl.backoff = true
		l.timers.schedule(cl.t, l.now()+int64(wait))
		return
	}
	cl.attempt()
}

// failed ends the attempt with a transport error.
func (cl *call) failed(err error) {
	if cl.uc != nil {
		cl.uc.close()
		cl.uc = nil
	}
	cl.after(err)
}

// abandon stops the call's attempt and timers (its client went away).
func (cl *call) abandon() {
	cl.seq++
	cl.l.timers.cancel(cl.t)
	if cl.uc != nil {
		cl.uc.close()
		cl.uc = nil
	}
}

// dial opens a new connection to the call's target: the address at once
// for an IP, else through the loop's DNS cache (an answer not cached yet
// is looked up off the loop; the attempt waits for it under its timeout).
func (cl *call) dial() {
	l := cl.l
	host, port, err := net.SplitHostPort(cl.target)
	if err != nil {
		cl.failed(&dialError{err})
		return
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		cl.connectAny([]netip.Addr{ip.Unmap()}, 0, port)
		return
	}
	e := l.dns[host]
	if e == nil {
		e = &dnsEntry{}
		l.dns[host] = e
	}
	now := l.now()
	if e.expires != 0 && (len(e.ips) > 0 || now < e.expires) {
		if now >= e.expires {
			l.lookup(host, e) // stale: refresh in the background, use what is known
		}
		if e.err != nil {
			cl.failed(&dialError{e.err})
			return
		}
		e.next++
		cl.connectAny(e.ips, e.next, port)
		return
	}
	e.waiters = append(e.waiters, dnsWaiter{cl, cl.seq, port})
	l.lookup(host, e)
}

// dnsEntry is a loop's cached resolution of one host name.
type dnsEntry struct {
	ips     []netip.Addr
	err     error
	expires int64 // 0: never resolved
	next    int   // round robin over ips
	pending bool
	waiters []dnsWaiter
}

type dnsWaiter struct {
	cl   *call
	seq  uint64
	port string
}

// Cached answers live this long; a failure is cached shortly, so that a
// missing name is not looked up for every request.
const (
	dnsTTL         = 5 * time.Second
	dnsFailureTTL  = time.Second
	dnsLookupLimit = 10 * time.Second
	// dnsForget drops an entry this long past its expiry.
	dnsForget = time.Minute
)

// lookupNetIP is the loops' resolver (a variable for tests).
var lookupNetIP = net.DefaultResolver.LookupNetIP

// lookup resolves host off the loop and posts the answer back to it.
func (l *evLoop) lookup(host string, e *dnsEntry) {
	if e.pending {
		return
	}
	e.pending = true
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), dnsLookupLimit)
		ips, err := lookupNetIP(ctx, "ip", host)
		cancel()
		l.post(func() { l.resolved(host, e, ips, err) })
	}()
}

func (l *evLoop) resolved(host string, e *dnsEntry, ips []netip.Addr, err error) {
	e.pending = false
	now := l.now()
	if err == nil && len(ips) == 0 {
		err = fmt.Errorf("lookup %s: no addresses", host)
	}
	if err != nil {
		if len(e.ips) == 0 {
			e.err = err
		}
		e.expires = now + int64(dnsFailureTTL)
	} else {
		for i, ip := range ips {
			ips[i] = ip.Unmap()
		}
		e.ips, e.err, e.expires = ips, nil, now+int64(dnsTTL)
	}
	waiters := e.waiters
	e.waiters = nil
	for _, w := range waiters {
		if w.cl.seq != w.seq || w.cl.c == nil {
			continue // that attempt timed out, or its client left
		}
		if e.err != nil {
			w.cl.failed(&dialError{&net.OpError{Op: "dial", Net: "tcp", Err: e.err}})
			continue
		}
		e.next++
		w.cl.connectAny(e.ips, e.next, w.port)
	}
}

// connectAny connects to one of ips, starting at ips[start%len] (the
// cache's round robin) and going on to the next when a connect fails, as
// Go's dialer does, all within the attempt's timeout.
func (cl *call) connectAny(ips []netip.Addr, start int, port string) {
	pn, err := strconv.Atoi(port)
	if err != nil || pn < 0 || pn > 65535 {
		cl.failed(&dialError{fmt.Errorf("bad port %q", port)})
		return
	}
	cl.ips, cl.ipNext, cl.ipLeft, cl.port = ips, start, len(ips), pn
	cl.connectNext()
}

// connectNext tries the next address; with none left it fails the attempt
// with the last connect error.
func (cl *call) connectNext() {
	for cl.ipLeft > 0 {
		ip := cl.ips[cl.ipNext%len(cl.ips)]
		cl.ipNext++
		cl.ipLeft--
		err := cl.connect(ip, cl.port)
		if err == nil {
			return
		}
		if cl.ipLeft == 0 {
			cl.failed(err)
		}
	}
}

// connectFailed: the connect under way failed; try the next address.
func (cl *call) connectFailed(uc *upConn, err error) {
	uc.close()
	cl.uc = nil
	if cl.ipLeft == 0 {
		cl.failed(err)
		return
	}
	cl.connectNext()
}

// connect starts a non-blocking connect; the request is written when
// epoll reports the socket writable. It returns the error of a connect
// that failed at once.
func (cl *call) connect(ip netip.Addr, pn int) error {
	l := cl.l
	family, sa := unix.AF_INET, unix.Sockaddr(&unix.SockaddrInet4{Port: pn, Addr: ip.As4()})
	if ip.Is6() {
		family, sa = unix.AF_INET6, &unix.SockaddrInet6{Port: pn, Addr: ip.As16()}
	}
	addr := net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip, uint16(pn))) //nolint:gosec // checked above
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return &dialError{&net.OpError{Op: "dial", Net: "tcp", Addr: addr, Err: os.NewSyscallError("socket", err)}}
	}
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	err = unix.Connect(fd, sa)
	if err != nil && !errors.Is(err, unix.EINPROGRESS) {
		_ = unix.Close(fd)
		return &dialError{&net.OpError{Op: "dial", Net: "tcp", Addr: addr, Err: os.NewSyscallError("connect", err)}}
	}
	uc := &upConn{l: l, fd: fd, target: cl.target, addr: addr, connecting: true}
	if err := l.add(fd, edgeEvents, uc); err != nil {
		_ = unix.Close(fd)
		return &dialError{err}
	}
	uc.send(cl)
	return nil
}

// upConn is a connection to an upstream, owned by one loop: serving one
// attempt, or idle in the loop's pool for its target.
type upConn struct {
	l          *evLoop
	fd         int
	target     string
	addr       *net.TCPAddr
	cl         *call  // the attempt it serves; nil when idle
	out        []byte // request bytes the socket did not take yet
	in         []byte // response bytes read so far (when not all in one read)
	interim    int    // 1xx answers skipped
	connecting bool
	closed     bool
	idleSince  int64 // when it went back to the pool
	// hup: the upstream closed its end. An answer that came with that end
	// is its last: pooled, the connection would fail the next request, and
	// epoll (edge-triggered) would not report the end again.
	hup bool
}

// send writes the call's request.
func (uc *upConn) send(cl *call) {
	l := uc.l
	uc.cl, cl.uc = cl, uc
	uc.in, uc.interim = uc.in[:0], 0
	// The request URI goes upstream as the client sent it, as the other
	// engine's clients send it (DisablePathNormalizing): /./, // and
	// escapes such as %2F or %7E are not rewritten.
	cl.req.URI().DisablePathNormalizing = true
	err := l.render(&cl.req)
	if err != nil {
		cl.failed(err)
		return
	}
	if uc.connecting {
		uc.out = append(uc.out[:0], l.wbuf.b...)
		return
	}
	uc.write(l.wbuf.b)
}

func (uc *upConn) write(b []byte) {
	rest, err := writeSome(uc.fd, b)
	if err != nil {
		uc.cl.failed(&net.OpError{Op: "write", Net: "tcp", Addr: uc.addr, Err: os.NewSyscallError("write", err)})
		return
	}
	uc.out = append(uc.out[:0], rest...)
}

func (uc *upConn) event(ev uint32) {
	if uc.closed {
		return
	}
	if uc.connecting {
		if ev&(unix.EPOLLOUT|unix.EPOLLERR|unix.EPOLLHUP) == 0 {
			return
		}
		uc.connecting = false
		soErr, err := unix.GetsockoptInt(uc.fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err == nil && soErr != 0 {
			err = unix.Errno(soErr) //nolint:gosec // an errno
		}
		if err != nil {
			if uc.cl != nil {
				uc.cl.connectFailed(uc, &dialError{&net.OpError{Op: "dial", Net: "tcp", Addr: uc.addr, Err: os.NewSyscallError("connect", err)}})
			} else {
				uc.close()
			}
			return
		}
		if len(uc.out) > 0 {
			out := uc.out
			uc.out = uc.out[:0]
			uc.write(out)
			if uc.closed {
				return
			}
		}
	} else if ev&unix.EPOLLOUT != 0 && len(uc.out) > 0 && uc.cl != nil {
		out := uc.out
		uc.out = uc.out[:0]
		uc.write(out)
		if uc.closed {
			return
		}
	}
	if ev&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		// When the upstream has also closed, read on to the end: edge
		// triggering will not report that end again.
		hup := ev&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0
		uc.hup = uc.hup || hup
		uc.read(hup)
	}
}

// read takes what the upstream sent (toEnd: until the end of the stream). An idle connection that becomes
// readable was closed by the upstream (or sent bytes nobody asked for):
// it leaves the pool.
func (uc *upConn) read(toEnd bool) {
	l := uc.l
	for {
		n, err := unix.Read(uc.fd, l.buf)
		if n > 0 {
			if uc.cl == nil {
				uc.close()
				return
			}
			data := l.buf[:n]
			if len(uc.in) > 0 || n == len(l.buf) {
				uc.in = append(uc.in, data...)
				data = uc.in
			}
			if uc.parse(data) || (n < len(l.buf) && !toEnd) {
				return
			}
			continue
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EAGAIN) {
			return
		}
		if uc.cl == nil {
			uc.close()
			return
		}
		if err == nil {
			err = io.ErrUnexpectedEOF
		} else {
			err = &net.OpError{Op: "read", Net: "tcp", Addr: uc.addr, Err: os.NewSyscallError("read", err)}
		}
		uc.cl.failed(fmt.Errorf("the upstream closed the connection before the whole response: %w", err))
		return
	}
}

// parse reads the response in data (everything received for this attempt
// so far). It returns true when the attempt is over (answered, failed, or
// streaming), false when more bytes are needed.
func (uc *upConn) parse(data []byte) bool {
	l, cl := uc.l, uc.cl
	resp := &cl.resp
	var head []byte // from the final answer's status line
	for {
		head = data
		end := headEnd(data)
		if end < 0 {
			if len(data) > loopMaxHead {
				cl.failed(fmt.Errorf("response head larger than %d bytes", loopMaxHead))
				return true
			}
			uc.keep(data)
			return false
		}
		if err := resp.Header.Read(l.parse.reader(data[:end])); err != nil {
			cl.failed(fmt.Errorf("error when reading response headers: %w", err))
			return true
		}
		st := resp.StatusCode()
		if st >= 200 || st == fasthttp.StatusSwitchingProtocols || uc.interim >= maxInterim {
			data = data[end:]
			break
		}
		// An interim 1xx answer: skip it.
		uc.interim++
		data = data[end:]
	}
	st := resp.StatusCode()
	reusable := !cl.req.Header.ConnectionClose() && !resp.ConnectionClose()
	if cl.req.Header.IsHead() || st < 200 || st == fasthttp.StatusNoContent || st == fasthttp.StatusNotModified {
		resp.SkipBody = true
		uc.done(reusable && len(data) == 0 && st >= 200)
		return true
	}
	n := resp.Header.ContentLength()
	if n < 0 || n > bufferedBodyMax {
		// Chunked, delimited by the end of the connection, or large: the
		// body streams from a goroutine.
		uc.stream(data, n)
		return true
	}
	if len(data) < n {
		// The body is not all here: keep the answer from its status line
		// and parse its head again with the rest (cheap, and rare).
		uc.keep(head)
		return false
	}
	resp.SetBody(data[:n])
	uc.done(reusable && len(data) == n)
	return true
}

// keep saves a partial response for the next read.
func (uc *upConn) keep(data []byte) {
	// data is empty after interim answers that ended the bytes read so
	// far (&data[0] would panic): nothing to keep.
	if len(uc.in) == 0 || len(data) == 0 || &uc.in[0] != &data[0] {
		uc.in = append(uc.in[:0], data...)
	}
}

// done: the response is complete. The connection goes back to the pool,
// or is closed when either side asked for that or it sent more than asked.
func (uc *upConn) done(reusable bool) {
	cl := uc.cl
	uc.cl, cl.uc = nil, nil
	if cap(uc.in) > 16<<10 {
		uc.in = nil
	}
	uc.in = uc.in[:0]
	// An answer that came before the whole request was sent (an early
	// 401 to an upload): the rest of the request is never sent, so the
	// upstream would read the next request on this connection as the rest
	// of this one's body.
	if len(uc.out) > 0 {
		reusable = false
	}
	if reusable && !uc.hup && !uc.l.draining {
		uc.l.release(uc)
	} else {
		uc.close()
	}
	cl.after(nil)
}

func (uc *upConn) close() {
	if uc.closed {
		return
	}
	uc.closed = true
	if uc.cl != nil {
		uc.cl.uc = nil
		uc.cl = nil
	}
	uc.l.closeFd(uc.fd)
}

// idlePool is a loop's idle connections to one target, most recent last.
type idlePool struct{ conns []*upConn }

const maxIdlePerTarget = 256

// upstreamIdleTimeout closes a pooled connection unused this long, as
// fasthttp's client does (MaxIdleConnDuration): one a NAT or load balancer
// dropped without a FIN would otherwise cost a request its per-try timeout.
const upstreamIdleTimeout = 10 * time.Second

// expire closes the connections idle since before cutoff (the oldest
// are first) and reports whether the pool is empty.
func (pool *idlePool) expire(cutoff int64) bool {
	n := 0
	for n < len(pool.conns) && (pool.conns[n].closed || pool.conns[n].idleSince < cutoff) {
		pool.conns[n].close()
		n++
	}
	if n > 0 {
		rest := copy(pool.conns, pool.conns[n:])
		clear(pool.conns[rest:])
		pool.conns = pool.conns[:rest]
	}
	return len(pool.conns) == 0
}

func (l *evLoop) idle(target string) *upConn {
	pool := l.pools[target]
	if pool == nil {
		return nil
	}
	for n := len(pool.conns); n > 0; n = len(pool.conns) {
		uc := pool.conns[n-1]
		pool.conns[n-1] = nil
		pool.conns = pool.conns[:n-1]
		if !uc.closed {
			return uc
		}
	}
	return nil
}

func (l *evLoop) release(uc *upConn) {
	pool := l.pools[uc.target]
	if pool == nil {
		pool = &idlePool{}
		l.pools[uc.target] = pool
	}
	if len(pool.conns) >= maxIdlePerTarget {
		uc.close()
		return
	}
	uc.idleSince = l.now()
	pool.conns = append(pool.conns, uc)
}

func (pool *idlePool) closeAll() {
	for _, uc := range pool.conns {
		uc.close()
	}
	pool.conns = pool.conns[:0]
}
