//go:build linux

package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// The event-loop engine (--engine=loop, the default on Linux).
//
// Why: with a goroutine per connection, each request costs two parked
// goroutines (client and upstream side), two speculative reads that end in
// EAGAIN and the scheduler's hand-offs between them; on the 2-core bench
// that kept the proxy at 0.8-0.93x of HAProxy's throughput
// (docs/benchmarks/proxy.md). Here a fixed set of loops (GOMAXPROCS of
// them, each a goroutine locked to its thread) own non-blocking sockets
// through epoll: accepted connections are dealt out to the loops in turn, a
// request and its attempts stay on its connection's loop, upstream
// connections are pooled per loop, and a
// socket is read only when epoll says it is readable, as HAProxy does.
//
// What it handles: the common case, an HTTP/1.1 request to a known upstream
// (--upstreams) with no body or a body of known length up to 64 KiB, and
// the whole policy (exchange.go, shared with the other engine). Everything
// else is handed, with the connection, to the goroutine engine (fasthttp's
// server, the same handler as --engine=goroutine), which keeps that
// connection from then on: CONNECT, upgrades, chunked or large request
// bodies, Expect, HTTP/1.0, hosts no upstream names, heads the loop cannot
// parse (fasthttp answers them with its exact errors). A response whose body
// must stream (chunked, close-delimited or over 64 KiB) is decided on the
// loop from its headers, then written by a goroutine that streams the body
// with the same idle timeout as the other engine; the client connection
// goes on in the goroutine engine. So the loop never blocks and never
// buffers more than 64 KiB of body per request, and the uncommon protocol
// paths keep one implementation.

// loopEngine is the set of loops serving one data listener.
type loopEngine struct {
	p       *Proxy
	lnFd    int // a duplicate of the data listener's socket
	loops   []*evLoop
	handoff *handoffListener
	// streams counts response bodies being streamed by goroutines; the
	// drain waits for them.
	streams  sync.WaitGroup
	streamMu sync.Mutex
	// streamConns are the client and upstream connections of the answers
	// being streamed (closed when a drain runs out of time).
	streamConns map[net.Conn]struct{}
	draining    atomic.Bool
	done        sync.WaitGroup
	shutOnce    sync.Once
	nextLoop    atomic.Uint32 // round robin of accepted connections
	loopsDone   chan struct{} // closed when the loops and streams have ended
}

// startLoops starts the engine on the proxy's data listener. Connections
// the loops hand off are served by p.srv through handoff.
func startLoops(p *Proxy, ln net.Listener, handoff *handoffListener) (*loopEngine, error) {
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		return nil, fmt.Errorf("event loop: listener is a %T, not TCP", ln)
	}
	f, err := tl.File()
	if err != nil {
		return nil, fmt.Errorf("event loop: listener socket: %w", err)
	}
	fd, err := unix.Dup(int(f.Fd()))
	_ = f.Close()
	if err != nil {
		return nil, fmt.Errorf("event loop: listener socket: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("event loop: listener socket: %w", err)
	}
	e := &loopEngine{p: p, lnFd: fd, handoff: handoff}
	n := runtime.GOMAXPROCS(0)
	for i := 0; i < n; i++ {
		l, err := newEvLoop(e)
		if err != nil {
			for _, l := range e.loops {
				l.closeFds()
			}
			_ = unix.Close(fd)
			return nil, err
		}
		e.loops = append(e.loops, l)
	}
	for _, l := range e.loops {
		e.done.Add(1)
		go l.run()
	}
	return e, nil
}

// shutdown stops accepting, lets the loops finish the requests in flight
// (their connections close after the answer; idle ones at once), then
// waits for streamed bodies. At ctx's end it closes whatever is left.
func (e *loopEngine) shutdown(ctx context.Context) error {
	// The drain starts once; a second Shutdown waits for the same end.
	e.shutOnce.Do(func() {
		e.draining.Store(true)
		e.loopsDone = make(chan struct{})
		var drained sync.WaitGroup
		for _, l := range e.loops {
			drained.Add(1)
			if !l.post(func() { l.drain(); drained.Done() }) {
				drained.Done() // that loop has ended already
			}
		}
		go func() {
			drained.Wait()
			// No loop watches the listener now: closing it refuses new
			// connections (the proxy closes its own descriptor of it too).
			_ = unix.Close(e.lnFd)
			e.done.Wait()
			e.streams.Wait()
			close(e.loopsDone)
		}()
	})
	select {
	case <-e.loopsDone:
		return nil
	case <-ctx.Done():
		for _, l := range e.loops {
			l.post(func() { l.stop() })
		}
		e.closeStreams()
		return fmt.Errorf("event loop: %w", ctx.Err())
	}
}

// evLoop is one event loop: an epoll set, its timers, and a queue of
// functions other goroutines post to it (DNS answers, drain), woken
// through an eventfd.
type evLoop struct {
	e      *loopEngine
	p      *Proxy
	epfd   int
	wakeFd int
	events []unix.EpollEvent
	buf    []byte      // one read buffer for every client socket of the loop
	fds    []fdHandler // by descriptor number
	// gens[fd] tags fd's registration (in each event's Pad): an event
	// collected for a descriptor that an earlier event of the same batch
	// closed, and whose number a new socket took since, is the old one's
	// and is dropped, as Go's poller does with its sequence numbers.
	gens   []uint32
	gen    uint32
	timers timerHeap

	mu      sync.Mutex
	tasks   []func()
	pending []func() // the loop's copy of tasks, reused
	woken   bool

	clients map[*cliConn]struct{}
	pools   map[string]*idlePool
	dns     map[string]*dnsEntry
	targets map[string]string // request host:port -> address, cached
	free    []*call
	parse   parser
	wbuf    appendWriter // every answer and request is serialised here, then written
	bw      *bufio.Writer
	exited  bool // under mu: the loop's fds are closed, post drops tasks
	sweepT  *timer
	// upstreamIdle is upstreamIdleTimeout (a field so that a test can
	// shorten it on a running loop).
	upstreamIdle time.Duration
	draining     bool
	stopped      bool
	nowCache     int64 // the clock as of this batch of events
}

// fdHandler is what an epoll event is dispatched to.
type fdHandler interface {
	event(ev uint32)
}

const loopReadBuffer = 64 << 10

// edgeEvents is how every connection is watched, as Go's own poller does:
// edge-triggered, so that the set never changes (no epoll_ctl per request)
// and a connection busy with a call is not reported again and again. The
// price of edge triggering is that a read must drain the socket: a read
// that fills the whole buffer is followed by another.
const edgeEvents = unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET

func newEvLoop(e *loopEngine) (*evLoop, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("event loop: epoll: %w", err)
	}
	wfd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		_ = unix.Close(epfd)
		return nil, fmt.Errorf("event loop: eventfd: %w", err)
	}
	l := &evLoop{
		e: e, p: e.p, epfd: epfd, wakeFd: wfd,
		events:  make([]unix.EpollEvent, 256),
		buf:     make([]byte, loopReadBuffer),
		fds:     make([]fdHandler, 1024),
		gens:    make([]uint32, 1024),
		clients: make(map[*cliConn]struct{}),
		pools:   make(map[string]*idlePool),
		dns:     make(map[string]*dnsEntry),
		targets: make(map[string]string),

		upstreamIdle: upstreamIdleTimeout,
	}
	l.parse.init()
	l.bw = bufio.NewWriterSize(&l.wbuf, 16<<10)
	l.sweepT = newTimer(l.sweep)
	if err := l.add(wfd, unix.EPOLLIN, wakeHandler{l}); err != nil {
		l.closeFds()
		return nil, err
	}
	// EPOLLEXCLUSIVE: one loop is woken per new connection, not all.
	if err := l.add(e.lnFd, unix.EPOLLIN|unix.EPOLLEXCLUSIVE, acceptHandler{l}); err != nil {
		l.closeFds()
		return nil, err
	}
	return l, nil
}

func (l *evLoop) closeFds() {
	_ = unix.Close(l.wakeFd)
	_ = unix.Close(l.epfd)
}

func (l *evLoop) add(fd int, events uint32, h fdHandler) error {
	l.gen++
	ev := unix.EpollEvent{Events: events, Fd: int32(fd), Pad: int32(l.gen)} //nolint:gosec // fds fit in int32; the tag is bits
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fmt.Errorf("event loop: epoll add fd %d: %w", fd, err)
	}
	for fd >= len(l.fds) {
		l.fds = append(l.fds, make([]fdHandler, len(l.fds))...)
		l.gens = append(l.gens, make([]uint32, len(l.gens))...)
	}
	l.fds[fd], l.gens[fd] = h, l.gen
	return nil
}

// forget removes fd from the loop without closing it.
func (l *evLoop) forget(fd int) {
	_ = unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	if fd < len(l.fds) {
		l.fds[fd] = nil
	}
}

// closeFd removes fd from the loop and closes it.
func (l *evLoop) closeFd(fd int) {
	l.forget(fd)
	_ = unix.Close(fd)
}

// post runs fn on the loop; callable from any goroutine. It returns false
// when the loop has ended (fn will not run).
func (l *evLoop) post(fn func()) bool {
	l.mu.Lock()
	if l.exited {
		l.mu.Unlock()
		return false
	}
	l.tasks = append(l.tasks, fn)
	wake := !l.woken
	l.woken = true
	l.mu.Unlock()
	if wake {
		var one = [8]byte{1}
		_, _ = unix.Write(l.wakeFd, one[:])
	}
	return true
}

type wakeHandler struct{ l *evLoop }

func (h wakeHandler) event(uint32) {
	var b [8]byte
	_, _ = unix.Read(h.l.wakeFd, b[:])
	h.l.mu.Lock()
	h.l.pending, h.l.tasks = h.l.tasks, h.l.pending[:0]
	h.l.woken = false
	h.l.mu.Unlock()
	for i, fn := range h.l.pending {
		h.l.runTask(fn)
		h.l.pending[i] = nil
	}
}

// now is the clock for this batch of events (one read per wake-up).
func (l *evLoop) now() int64 { return l.nowCache }

func (l *evLoop) run() {
	runtime.LockOSThread()
	defer l.e.done.Done()
	defer func() {
		l.mu.Lock()
		l.exited = true
		left := l.tasks
		l.tasks = nil
		l.mu.Unlock()
		// Tasks posted before the end but not run (a connection dealt to
		// this loop, a drain): run now, so that none is lost; adopt closes
		// its connection.
		l.stopped = true
		for _, fn := range left {
			l.runTask(fn)
		}
		l.closeFds()
	}()
	l.nowCache = nowNanos()
	l.timers.schedule(l.sweepT, l.nowCache+int64(time.Second))
	for !l.stopped {
		wait := l.timers.waitMillis(l.nowCache)
		n, err := unix.EpollWait(l.epfd, l.events, wait)
		l.nowCache = nowNanos()
		if err != nil && !errors.Is(err, unix.EINTR) {
			l.p.logger.Printf("event loop: epoll_wait: %v", err)
			return
		}
		for i := 0; i < n; i++ {
			ev := &l.events[i]
			if fd := int(ev.Fd); fd < len(l.fds) && l.fds[fd] != nil && l.gens[fd] == uint32(ev.Pad) { //nolint:gosec // the tag is bits
				l.dispatch(l.fds[fd], ev.Events)
			}
		}
		l.timers.fireDue(l.nowCache, l.fire)
		if l.draining && len(l.clients) == 0 {
			l.stop()
		}
	}
}

// A panic in the code a loop runs for one connection (a bug; the fuzz
// tests found two) must not take down the sidecar, and with it every call
// of the pod: dispatch, fire and runTask contain it to that connection,
// which is closed (abandoning its call), log it with its stack and count it
// in retrycap_proxy_loop_panics_total; the loop goes on with the others.

func (l *evLoop) dispatch(h fdHandler, ev uint32) {
	defer l.contain(h)
	h.event(ev)
}

func (l *evLoop) fire(t *timer) {
	defer l.contain(t.owner)
	t.fire()
}

func (l *evLoop) runTask(fn func()) {
	defer l.contain(nil)
	fn()
}

// contain is deferred: it recovers a panic and closes what it concerned.
func (l *evLoop) contain(what any) {
	r := recover()
	if r == nil {
		return
	}
	l.p.m.loopPanics.Inc()
	l.p.logger.Printf("event loop: panic, the connection concerned is closed and the loop goes on: %v\n%s", r, debug.Stack())
	switch x := what.(type) {
	case *cliConn:
		x.close()
	case *upConn:
		if x.cl != nil && x.cl.c != nil {
			x.cl.c.close()
		}
		x.close()
	case *call:
		if x.c != nil {
			x.c.close()
		}
	}
}

// sweep closes client connections idle for longer than the idle timeout
// (or, for a partial request head, that long without its end), once a
// second.
func (l *evLoop) sweep() {
	idle := int64(l.p.srv.IdleTimeout)
	for c := range l.clients {
		if c.call == nil && !c.writing() && l.nowCache-c.lastActive > idle {
			c.close()
		}
	}
	// Pooled upstream connections idle too long; pools and DNS entries
	// nobody used for a while go (upstream names may match many hosts).
	for target, pool := range l.pools {
		if pool.expire(l.nowCache - int64(l.upstreamIdle)) {
			delete(l.pools, target)
		}
	}
	for host, e := range l.dns {
		if !e.pending && len(e.waiters) == 0 && l.nowCache-e.expires > int64(dnsForget) {
			delete(l.dns, host)
		}
	}
	l.timers.schedule(l.sweepT, l.nowCache+int64(time.Second))
}

// drain stops accepting on this loop and closes idle client connections;
// busy ones close after their answer.
func (l *evLoop) drain() {
	if l.draining {
		return
	}
	l.draining = true
	l.forget(l.e.lnFd)
	for c := range l.clients {
		if c.call == nil && !c.writing() {
			c.close()
		}
	}
	for _, pool := range l.pools {
		pool.closeAll()
	}
}

// stop closes everything the loop holds and ends it.
func (l *evLoop) stop() {
	for c := range l.clients {
		c.close()
	}
	for _, pool := range l.pools {
		pool.closeAll()
	}
	l.stopped = true
}

type acceptHandler struct{ l *evLoop }

// event accepts the connections waiting on the listener (a bounded batch,
// so that a flood of connects does not starve the requests in flight) and
// deals them out to the loops in turn. Epoll wakes whichever loop is idle
// for the listener, and clients such as load balancers and benchmark tools
// open their connections in one burst: kept by the loop that accepted them,
// they would all land on one loop (measured: 2 loops served as 1).
func (h acceptHandler) event(uint32) {
	l := h.l
	for i := 0; i < 64; i++ {
		fd, _, err := unix.Accept4(l.e.lnFd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.ECONNABORTED) && !errors.Is(err, unix.EINTR) {
				l.p.logger.Printf("event loop: accept: %v", err)
			}
			return
		}
		// As Go does for every TCP connection: small answers go out at once.
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
		to := l.e.loops[int(l.e.nextLoop.Add(1)%uint32(len(l.e.loops)))] //nolint:gosec // a small count
		if to == l {
			l.adopt(fd)
		} else if !to.post(func() { to.adopt(fd) }) {
			_ = unix.Close(fd) // that loop has ended (drained)
		}
	}
}

// adopt makes an accepted connection this loop's.
func (l *evLoop) adopt(fd int) {
	if l.draining || l.stopped {
		_ = unix.Close(fd)
		return
	}
	c := &cliConn{l: l, fd: fd, lastActive: l.nowCache}
	if err := l.add(fd, edgeEvents, c); err != nil {
		_ = unix.Close(fd)
		l.p.logger.Printf("%v", err)
		return
	}
	l.clients[c] = struct{}{}
}

// loopsAvailable: the event loops need fasthttp's answer flag found by
// handoff.go (setServerDefaults).
func loopsAvailable() bool { return noDefaultDateOK }

// writeSome writes b to a non-blocking socket until it is all sent or the
// socket is full; it returns what is left for EPOLLOUT.
func writeSome(fd int, b []byte) (rest []byte, err error) {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		switch {
		case n > 0:
			b = b[n:]
		case errors.Is(err, unix.EINTR):
		case errors.Is(err, unix.EAGAIN):
			return b, nil
		case err == nil:
			return nil, io.ErrShortWrite // 0 bytes taken without an error
		default:
			return nil, err
		}
	}
	return nil, nil
}

// render serialises m (a request or an answer) into the loop's one output
// buffer, l.wbuf.b, through fasthttp's writer.
func (l *evLoop) render(m interface{ Write(*bufio.Writer) error }) error {
	l.wbuf.b = l.wbuf.b[:0]
	l.bw.Reset(&l.wbuf)
	if err := m.Write(l.bw); err != nil {
		return err
	}
	return l.bw.Flush()
}
