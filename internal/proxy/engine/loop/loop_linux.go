//go:build linux

package loop

import (
	"bufio"
	"errors"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/sys/unix"

	"github.com/retrycap/retrycap/internal/proxy/accesslog"
	"github.com/retrycap/retrycap/internal/proxy/forward"
	"github.com/retrycap/retrycap/internal/proxy/netpoll"
)

// evLoop is one event loop: a poller (epoll, its eventfd and posted
// tasks), its timers, and the connections and caches it owns.
type evLoop struct {
	e      *Engine
	f      *forward.Forwarder
	poll   *netpoll.Poller
	buf    []byte // one read buffer for every client socket of the loop
	timers netpoll.Timers

	clients map[*cliConn]struct{}
	pools   map[string]*idlePool
	dns     map[string]*dnsEntry
	targets map[string]string // request host:port -> address, cached
	free    []*call
	parse   forward.HeadParser
	// uri is where a request's target is parsed to see its error, which
	// the request's own lazy parse (URI) drops (client_linux.go).
	uri fasthttp.URI
	// parseAnswer parses answer heads, which may be up to
	// forward.MaxResponseHead (a request's is up to loopMaxHead).
	parseAnswer forward.HeadParser
	wbuf        appendWriter // every answer and request is serialised here, then written
	bw          *bufio.Writer
	sweepT      *netpoll.Timer
	// acceptT ends a pause of accepting (descriptors exhausted): the loop
	// watches the listener again.
	acceptT       *netpoll.Timer
	acceptPaused  bool
	sweepInterval int64
	// upstreamIdle is --upstream-idle-timeout (a field so that a test can
	// shorten it on a running loop).
	upstreamIdle time.Duration
	draining     bool
	stopped      bool
	// nowCache is the clock as of this wake-up, read by now() at its first
	// use after epoll_wait returned (stale is set before each wait).
	nowCache int64
	stale    bool
	// spin is whether and how long the loop polls before it sleeps;
	// spins counts the waits that polled first (Engine.Spins).
	spin  spinWait
	spins atomic.Uint64
	// yielded is when the loop last yielded to the scheduler (yieldEvery);
	// sinceYield counts the calls started since then, pinned whether the
	// loop's goroutine is locked to its thread (pinned).
	yielded    int64
	sinceYield uint64
	pinned     bool
	// pins and unpins count the loop's locks to its thread and releases
	// (Engine.Pins).
	pins, unpins atomic.Uint64
	// calls counts the calls this wake-up started (requests the loop
	// serves itself, not those it hands off: CONNECT, h2c, ...); started
	// adds them up once per wake-up, for other goroutines (Engine.Calls:
	// the proxy's spare P follows the loops' HTTP/1.1 traffic).
	calls   uint64
	started atomic.Uint64
	// alog is the loop's own access-log ring (nil: --access-log=off): its calls log there,
	// sharing no cache line with the other loops.
	alog *accesslog.Ring
}

func newEvLoop(e *Engine) (*evLoop, error) {
	poll, err := netpoll.New()
	if err != nil {
		return nil, err
	}
	l := &evLoop{
		e: e, f: e.f, poll: poll,
		buf:     make([]byte, ReadBufferSize),
		clients: make(map[*cliConn]struct{}),
		pools:   make(map[string]*idlePool),
		dns:     make(map[string]*dnsEntry),
		targets: make(map[string]string),

		upstreamIdle: e.f.Cfg.UpstreamIdleTimeout,
		spin:         newSpinWait(e.f.Cfg.LoopSpin),
		alog:         e.f.AccessLogRing(),
	}
	l.parse.Init(2 * loopMaxHead)
	l.parseAnswer.Init(forward.MaxResponseHead + 1)
	l.bw = bufio.NewWriterSize(&l.wbuf, 16<<10)
	l.sweepT = netpoll.NewTimer(l.sweep)
	l.acceptT = netpoll.NewTimer(l.resumeAccept)
	l.sweepInterval = int64(sweepEvery(e.f.Cfg))
	// EPOLLEXCLUSIVE: one loop is woken per new connection, not all.
	if err := l.poll.Add(e.lnFd, unix.EPOLLIN|unix.EPOLLEXCLUSIVE, acceptHandler{l}); err != nil {
		l.poll.Close()
		return nil, err
	}
	return l, nil
}

// now is the clock for this batch of events: read once per wake-up, not per
// event (the data path is benchmarked against HAProxy), and never before the
// wake-up. The loop once read it only after the batch, so every handler saw
// the time of the wake-up before, stale by the idle time: a per-try timer
// armed after a pause longer than the per-try timeout was due at once, and
// request, keep-alive and pool idle times were off by as much.
func (l *evLoop) now() int64 {
	if l.stale {
		l.refresh()
	}
	return l.nowCache
}

// refresh reads the clock for the rest of this wake-up.
func (l *evLoop) refresh() {
	l.nowCache, l.stale = forward.NowNanos(), false
}

func (l *evLoop) run() {
	// Locked to its thread while busy: see pinned.
	defer l.e.done.Done()
	defer func() {
		left := l.poll.Exit()
		// Tasks posted before the end but not run (a connection dealt to
		// this loop, a drain): run now, so that none is lost; adopt closes
		// its connection.
		l.stopped = true
		l.stale = true
		for _, fn := range left {
			l.runTask(fn)
		}
		l.poll.Close()
	}()
	l.nowCache = forward.NowNanos()
	l.yielded = l.nowCache
	l.timers.Schedule(l.sweepT, l.nowCache+l.sweepInterval)
	for !l.stopped {
		wait := l.timers.WaitMillis(l.nowCache)
		l.stale = true // the handlers Dispatch runs read the clock anew
		n, err := l.await(wait)
		if err != nil {
			l.f.Logger.Printf("event loop: %v", err)
			return
		}
		l.poll.Dispatch(n, l.dispatch, l.runTask)
		if l.calls != 0 {
			l.started.Add(l.calls)
			l.sinceYield += l.calls
			l.calls = 0
		}
		// The same clock for the timers, not a second read (one costs ~4%
		// of a bare wake-up, BenchmarkLoopClock): a timer that fell due
		// while the batch ran fires on the next wake-up, late by the
		// batch's own run time at most.
		now := l.now()
		l.timers.FireDue(now, l.fire)
		if l.draining && len(l.clients) == 0 {
			l.stop()
		}
		if now-l.yielded >= yieldEvery {
			if p := pinned(l.pinned, l.sinceYield, now-l.yielded); p != l.pinned {
				if p {
					runtime.LockOSThread()
					l.pins.Add(1)
				} else {
					runtime.UnlockOSThread()
					l.unpins.Add(1)
				}
				l.pinned = p
			}
			l.yielded, l.sinceYield = now, 0
			runtime.Gosched()
		}
	}
}

// await waits for events for up to wait ms (spinWait: a busy loop polls
// without sleeping for a moment first) and returns how many came.
func (l *evLoop) await(wait int) (int, error) {
	if wait == 0 || l.spin.limit == 0 {
		return l.poll.Poll(wait)
	}
	start := forward.NowNanos()
	if l.spin.should() {
		l.spins.Add(1)
		until := start + l.spin.limit
		for {
			n, err := l.poll.Poll(0)
			if n > 0 || err != nil {
				l.woke(start)
				return n, err
			}
			if forward.NowNanos() >= until {
				break
			}
			netpoll.Yield()
		}
	}
	n, err := l.poll.Poll(wait)
	l.woke(start)
	return n, err
}

// woke records a wait that began at start and ended now, and keeps the
// clock it read for the handlers (the time of the wake-up, as now()
// would read it).
func (l *evLoop) woke(start int64) {
	l.nowCache, l.stale = forward.NowNanos(), false
	l.spin.observe(l.nowCache - start)
}

// A panic in the code a loop runs for one connection (a bug; the fuzz
// tests found two) must not take down the sidecar, and with it every call
// of the pod: dispatch, fire and runTask contain it to that connection,
// which is closed (abandoning its call), log it with its stack and count it
// in retrycap_proxy_loop_panics_total; the loop goes on with the others.

func (l *evLoop) dispatch(h netpoll.Handler, ev uint32) {
	defer l.contain(h)
	h.Event(ev)
}

func (l *evLoop) fire(t *netpoll.Timer) {
	defer l.contain(t.Owner)
	t.Fire()
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
	l.f.M.LoopPanics.Inc()
	l.f.Logger.Printf("event loop: panic, the connection concerned is closed and the loop goes on: %v\n%s", r, debug.Stack())
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

// sweepEvery is how often the sweep runs: once a second, or a quarter of the
// shortest timeout it enforces when that is shorter (a test's), so that a
// timeout fires within a quarter of its bound late at most.
func sweepEvery(cfg *forward.Config) time.Duration {
	d := time.Second
	for _, t := range []time.Duration{cfg.HTTPRequestTimeout, cfg.ClientTimeout, cfg.KeepAliveTimeout, cfg.UpstreamIdleTimeout} {
		if t > 0 && t/4 < d {
			d = t / 4
		}
	}
	return max(d, 5*time.Millisecond)
}

// sweep enforces the client timeouts (HAProxy's): a request head not whole
// within --http-request-timeout of its first byte (of the accept, for a
// connection's first request) and a body not whole within --client-timeout
// of its head get 408 and the connection closes; a connection idle between
// requests for --keepalive-timeout closes.
func (l *evLoop) sweep() {
	cfg := l.f.Cfg
	now := l.now()
	for c := range l.clients {
		if c.call != nil || c.writing() || c.lingerT != nil {
			continue // a lingering connection ends by its own timer
		}
		switch {
		case c.bodySince != 0:
			if now-c.bodySince > int64(cfg.ClientTimeout) {
				c.timedOut(forward.TimeoutClient)
			}
		case c.headStart != 0:
			if now-c.headStart > int64(cfg.HTTPRequestTimeout) {
				c.timedOut(forward.TimeoutHTTPRequest)
			}
		case now-c.lastActive > int64(cfg.KeepAliveTimeout):
			l.f.M.Timeouts.WithLabelValues(forward.TimeoutKeepAlive).Inc()
			c.close()
		}
	}
	// Pooled upstream connections idle too long; pools and DNS entries
	// nobody used for a while go (upstream names may match many hosts).
	for target, pool := range l.pools {
		if pool.expire(now - int64(l.upstreamIdle)) {
			delete(l.pools, target)
		}
	}
	for host, e := range l.dns {
		if !e.pending && len(e.waiters) == 0 && now-e.expires > int64(dnsForget) {
			delete(l.dns, host)
		}
	}
	l.timers.Schedule(l.sweepT, now+l.sweepInterval)
}

// drain stops accepting on this loop and closes idle client connections;
// busy ones close after their answer.
func (l *evLoop) drain() {
	if l.draining {
		return
	}
	l.draining = true
	l.timers.Cancel(l.acceptT)
	l.poll.Forget(l.e.lnFd)
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

// Event accepts the connections waiting on the listener (a bounded batch,
// so that a flood of connects does not starve the requests in flight) and
// deals them out to the loops in turn. Epoll wakes whichever loop is idle
// for the listener, and clients such as load balancers and benchmark tools
// open their connections in one burst: kept by the loop that accepted them,
// they would all land on one loop (measured: 2 loops served as 1).
func (h acceptHandler) Event(uint32) {
	l := h.l
	for i := 0; i < 64; i++ {
		fd, _, err := unix.Accept4(l.e.lnFd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			if forward.Exhausted(err) {
				// The listener stays readable: accepting again at once
				// would spin (and log) at full speed. Stop watching it for a
				// while; the connections open are served on meanwhile.
				l.pauseAccept(l.f.Accept.Paused(err))
				return
			}
			if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.ECONNABORTED) && !errors.Is(err, unix.EINTR) {
				l.f.Logger.Printf("event loop: accept: %v", err)
			}
			return
		}
		if l.f.Reserve.Missing() && !l.f.Reserve.Take() {
			// The admin port's spare descriptor was taken meanwhile: this
			// connection's goes back to it. Not a resume (the pause's
			// backoff goes on): reset, it had the loop retry every 10 ms,
			// each time in the admin port's way.
			_ = unix.Close(fd)
			l.f.Reserve.Take()
			continue
		}
		l.f.Accept.Resumed()
		// As Go does for every TCP connection: small answers go out at once.
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
		to := l.e.loops[int(l.e.nextLoop.Add(1)%uint32(len(l.e.loops)))] //nolint:gosec // a small count
		if to == l {
			l.adopt(fd)
		} else if !to.poll.Post(func() { to.adopt(fd) }) {
			_ = unix.Close(fd) // that loop has ended (drained)
		}
	}
}

// pauseAccept stops watching the listener for d.
func (l *evLoop) pauseAccept(d time.Duration) {
	if l.acceptPaused || l.draining {
		return
	}
	l.acceptPaused = true
	l.poll.Forget(l.e.lnFd)
	l.timers.Schedule(l.acceptT, l.now()+int64(d))
}

// resumeAccept watches the listener again after a pause; connections that
// waited meanwhile are reported at once (the listener is level-triggered).
func (l *evLoop) resumeAccept() {
	if !l.acceptPaused || l.draining || l.stopped {
		return
	}
	l.acceptPaused = false
	if err := l.poll.Add(l.e.lnFd, unix.EPOLLIN|unix.EPOLLEXCLUSIVE, acceptHandler{l}); err != nil {
		l.f.Logger.Printf("event loop: watching the listener again: %v", err)
		l.pauseAccept(time.Second)
	}
}

// adopt makes an accepted connection this loop's.
func (l *evLoop) adopt(fd int) {
	if l.draining || l.stopped {
		_ = unix.Close(fd)
		return
	}
	// A connection's first request head is due within
	// --http-request-timeout of the accept (HAProxy's rule): a silent
	// connection gets 408 then.
	now := l.now()
	c := &cliConn{l: l, fd: fd, lastActive: now, headStart: now}
	if err := l.poll.Add(fd, netpoll.EdgeEvents, c); err != nil {
		_ = unix.Close(fd)
		l.f.Logger.Printf("%v", err)
		return
	}
	l.clients[c] = struct{}{}
}

// render serialises m (a request, or an answer the proxy made) into the
// loop's one output buffer, l.wbuf.b, through fasthttp's writer.
func (l *evLoop) render(m interface{ Write(*bufio.Writer) error }) error {
	l.wbuf.b = l.wbuf.b[:0]
	l.bw.Reset(&l.wbuf)
	if err := m.Write(l.bw); err != nil {
		return err
	}
	return l.bw.Flush()
}

// yieldEvery is how often a loop yields to the Go scheduler. A loop never
// parks in Go (it waits in epoll_wait, a system call), so the schedule tick
// of its P never moves, and the runtime's monitor (sysmon) treats a P whose
// tick has not moved for 10 ms as hogged: every monitor tick it preempts the
// loop (a signal) and, when the loop is in a system call, takes its P away;
// a P the loop then picks up is as stale, and the monitor, finding work
// each time, stays at its shortest sleep (20 µs). Measured under wrk with 2
// loops (perf probes on the runtime, 4 s): 5,071 preemptions, 2,838
// hand-offs of a P and 9,644 monitor wake-ups; with a yield every 5 ms: 165,
// 57 and 1,545, and the proxy's CPU per request at a fixed 15,000 req/s
// 16.9 -> 13.4 µs (docs/benchmarks.md, issue 25's h1perf section). The
// spare P (proxy.followSpareProc, there while the loops are busy) is only
// half of the cure: the monitor leaves a P in a system call alone while
// another is idle, unless its tick is stale.
const yieldEvery = int64(5 * time.Millisecond)

// A busy loop is locked to its thread (pinned), an idle one is not.
//
// Unlocked, every yield (yieldEvery) woke a thread for the idle spare P,
// and that thread took the loop from the run queue: the loop moved to
// another thread (perf: all of the proxy's futex calls were these yields)
// and often to the CPU the other loop ran on, where it waited its turn in
// the kernel's run queue with its connections' answers. Locked, a yield
// hands the P to another thread and back (two more futex wake-ups), but
// the loop stays on its thread. Measured on a quiet machine, 2 loops (docs/
// benchmarks.md, "The loops locked to their threads while busy"):
// saturated under wrk -t2 -c64, locked against unlocked 1.06x req/s and a
// lower p99; at a fixed 2,000 req/s the extra hand-offs cost 6-8 % more CPU
// per request, at 15,000 nothing. Hence the lock only while the loop
// starts pinOnRate calls a second or more, let go below pinOffRate (the
// gap keeps a loop near the bound from switching at every yield).
var (
	pinOnRate  = 5000.0 // calls per second of one loop (variables: a test lowers them)
	pinOffRate = 2500.0
)

// pinned is whether a loop is to be locked to its thread after a yield
// interval of elapsed ns in which it started calls calls, pinned before.
func pinned(was bool, calls uint64, elapsed int64) bool {
	if elapsed <= 0 {
		return was
	}
	rate := float64(calls) * 1e9 / float64(elapsed)
	if was {
		return rate >= pinOffRate
	}
	return rate >= pinOnRate
}
