//go:build linux

package h2

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/sys/unix"

	"github.com/retrycap/retrycap/internal/proxy/netpoll"
)

// The relay's event loops: GOMAXPROCS of them per Handler (fixed at the
// first connection), each an epoll set of client sockets whose waits are
// made in Go's poller (netpoll.RunParked). A client connection whose
// socket can be read directly (takeHeld) is dealt to one in turn; its
// loop receives what the socket holds when the set says it is readable
// (edge-triggered: until a receive comes back short), handles every
// whole frame at once (consume) and, once per turn over the ready
// connections, flushes every connection written to (Handler.flushDirty):
// one goroutine woken per batch of clients, not one per client, and one
// write per dirty socket per turn. Nothing on a loop waits: what could
// (the answers of a client that half-closed, the close of a socket with
// frames pending) is the connection's own ServeConn goroutine's, which
// otherwise waits for the loop's verdict. A loop ends when its last
// connection did, and starts again with the next.

// loopSys is a loop-read connection's platform part; only the loop
// touches it but lp (set once, before the connection is dealt).
type loopSys struct {
	lp    atomic.Pointer[rloop]
	fd    int
	on    bool // in the loop's set
	hup   bool // the peer's FIN or a reset is reported: read to the end
	timer *netpoll.Timer
}

// rloop is one event loop.
type rloop struct {
	h      *Handler
	poll   *netpoll.Poller
	timers netpoll.Timers
	epoch  time.Time
	buf    []byte   // what a receive gets, for every connection of the loop
	spare  [][]byte // pend buffers given back, for reuse
	again  []*cconn // connections not drained in their turn (maxRecvs)
	conns  map[*cconn]struct{}
	turnFn func(n int) (bool, time.Time, bool)
	dispFn func(netpoll.Handler, uint32)
	runFn  func(func())

	mu      sync.Mutex
	n       int  // its connections, dealt and not ended
	running bool // its goroutine runs (poll is open)
}

const (
	// loopBuf is a loop's receive buffer: several frames of the largest
	// size the relay reads.
	loopBuf = 64 << 10
	// pendCap is what a connection's pending frame may take: a frame of
	// the largest size and its header (what is left of a frame always
	// fits behind its start).
	pendCap = relayMaxFrame + frameHeaderLen
	// maxRecvs is the most receives one connection gets per turn; one
	// that had more waiting is served again on the next turn, after the
	// others (a client sending without pause does not hold the loop).
	maxRecvs = 4
	// loopSpare is the most pend buffers a loop keeps for reuse.
	loopSpare = 16
)

// loopsOn says whether client connections may be dealt to event loops
// (a test turns them off to run the reader goroutines' path).
var loopsOn atomic.Bool

func init() { loopsOn.Store(true) }

// deal puts cc on one of h's loops (starting it if it had ended), its
// socket fd, held the bytes its wrappers had read; false when there is
// no loop for it (loops off, or one would not start).
func (h *Handler) deal(cc *cconn, sock *sockReader, held []byte) bool {
	if !loopsOn.Load() || sock == nil {
		return false
	}
	fd := -1
	if err := sock.rc.Control(func(f uintptr) { fd = int(f) }); err != nil || fd < 0 {
		return false
	}
	h.loopOnce.Do(func() {
		h.loops = make([]*rloop, runtime.GOMAXPROCS(0))
		for i := range h.loops {
			h.loops[i] = &rloop{h: h}
		}
	})
	l := h.loops[h.nextLoop.Add(1)%uint32(len(h.loops))] //nolint:gosec // a small count
	l.mu.Lock()
	if !l.running {
		if err := l.start(); err != nil {
			l.mu.Unlock()
			h.cfg.Logger.Printf("h2 relay: event loop: %v (the connection is read by a goroutine)", err)
			return false
		}
	}
	l.n++
	poll := l.poll
	l.mu.Unlock()
	cc.lr.sys.fd = fd
	cc.lr.sys.lp.Store(l)
	poll.Post(func() { l.adopt(cc, held, poll) })
	return true
}

// start opens the loop's poller and starts its goroutine; l.mu held.
func (l *rloop) start() error {
	p, err := netpoll.New()
	if err != nil {
		return err
	}
	l.poll, l.running = p, true
	if l.buf == nil {
		l.buf = make([]byte, loopBuf)
		l.epoch = time.Now()
		l.turnFn, l.dispFn, l.runFn = l.turn, l.dispatch, func(fn func()) { fn() }
	}
	go l.run(p)
	return nil
}

func (l *rloop) run(p *netpoll.Poller) {
	err := p.RunParked(l.turnFn)
	if err != nil {
		l.h.cfg.Logger.Printf("h2 relay: event loop: %v", err)
		// Its connections end (their ServeConn goroutines close them),
		// those dealt and not adopted yet too; the next connection dealt
		// starts the loop anew.
		l.mu.Lock()
		l.running = false
		left := p.Exit()
		l.mu.Unlock()
		for _, fn := range left {
			fn()
		}
		for cc := range l.conns {
			l.end(cc, loopEnd)
		}
	}
	p.Close()
}

// now is the loop's clock, for its timers.
func (l *rloop) now() int64 { return int64(time.Since(l.epoch)) }

// turn is one turn of the loop (netpoll.RunParked): the n events, the
// connections left from the last turn, the timers due, then one flush of
// every connection written to.
func (l *rloop) turn(n int) (bool, time.Time, bool) {
	if n > 0 {
		l.poll.Dispatch(n, l.dispFn, l.runFn)
	}
	if again := l.again; len(again) > 0 {
		l.again = nil
		for i, cc := range again {
			again[i] = nil
			if cc.lr.sys.on {
				l.readable(cc)
			}
		}
		if l.again == nil {
			l.again = again[:0]
		}
	}
	now := l.now()
	l.timers.FireDue(now, func(t *netpoll.Timer) { t.Fire() })
	l.h.flushDirty()
	l.mu.Lock()
	if l.n == 0 {
		// The last connection ended: so does the loop (tasks posted
		// meanwhile concern ended connections: stop asks of them).
		l.running = false
		left := l.poll.Exit()
		l.mu.Unlock()
		for _, fn := range left {
			fn()
		}
		return false, time.Time{}, true
	}
	l.mu.Unlock()
	var dl time.Time
	if w := l.timers.WaitMillis(now); w >= 0 {
		dl = l.epoch.Add(time.Duration(now) + time.Duration(w)*time.Millisecond)
	}
	return len(l.again) > 0, dl, false
}

func (l *rloop) dispatch(h netpoll.Handler, ev uint32) {
	cc := h.(*cconn) //nolint:forcetypeassert // only client connections are watched
	if ev&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		// The FIN (or a reset) came before this event was collected: no
		// edge follows it, so a short receive is not the last one: the
		// end is read too.
		cc.lr.sys.hup = true
	}
	if cc.lr.sys.on {
		l.readable(cc)
	}
}

// Event is netpoll.Handler's (the loop dispatches by type, not through it).
func (cc *cconn) Event(uint32) {}

// adopt watches cc's socket and handles what its wrappers held.
func (l *rloop) adopt(cc *cconn, held []byte, p *netpoll.Poller) {
	sys := &cc.lr.sys
	l.mu.Lock()
	live := l.running && l.poll == p
	l.mu.Unlock()
	if !live { // the loop's wait failed: it is not read
		l.verdict(cc, loopEnd)
		return
	}
	if err := l.poll.Add(sys.fd, unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLET, cc); err != nil {
		l.h.cfg.Logger.Printf("h2 relay: %v", err)
		l.verdict(cc, loopEnd)
		return
	}
	sys.on = true
	if l.conns == nil {
		l.conns = map[*cconn]struct{}{}
	}
	l.conns[cc] = struct{}{}
	sys.timer = netpoll.NewTimer(func() { l.timeout(cc) })
	cc.lr.mid, cc.lr.since = true, cc.born // the preface and SETTINGS: from the start
	l.timers.Schedule(sys.timer, int64(cc.born.Add(cc.h.cfg.RequestTimeout).Sub(l.epoch)))
	if cc.stop.Load() {
		l.end(cc, loopEnd)
		return
	}
	if len(held) > 0 {
		l.take(cc, held, false)
	}
	// What came before the socket was watched is reported by epoll_ctl
	// (a ready socket is queued at once).
}

// readable receives what cc's socket holds and handles it.
func (l *rloop) readable(cc *cconn) {
	sys := &cc.lr.sys
	for i := 0; ; i++ {
		if cc.stop.Load() {
			l.end(cc, loopEnd)
			return
		}
		lr := &cc.lr
		var space []byte
		inPend := len(lr.pend) > 0
		if inPend {
			space = lr.pend[len(lr.pend):cap(lr.pend)]
		} else {
			space = l.buf
		}
		n, err := netpoll.RecvRaw(sys.fd, space)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return
		case err != nil:
			l.end(cc, loopEnd) // reset, or gone: as the reader's read error
			return
		case n == 0:
			l.end(cc, cc.atEOF(len(lr.pend)))
			return
		}
		if inPend {
			lr.pend = lr.pend[:len(lr.pend)+n]
			if !l.take(cc, lr.pend, true) {
				return
			}
		} else if !l.take(cc, l.buf[:n], false) {
			return
		}
		cc.lastRead.Store(int64(time.Since(cc.born)))
		if n < len(space) && !sys.hup {
			return // drained: the next bytes are a new edge
		}
		if i+1 >= maxRecvs {
			l.again = append(l.again, cc)
			return
		}
	}
}

// take handles in (cc's pend, or the loop's buffer) and keeps what is
// left of it in pend; false when the connection ended.
func (l *rloop) take(cc *cconn, in []byte, inPend bool) bool {
	lr := &cc.lr
	used, v := cc.consume(in)
	if v != loopGoOn {
		l.end(cc, v)
		return false
	}
	rest := in[used:]
	switch {
	case inPend:
		k := copy(lr.pend, rest)
		lr.pend = lr.pend[:k]
		if k == 0 {
			l.givePend(cc)
		}
	case len(rest) > 0:
		lr.pend = append(l.getPend(), rest...)
	}
	if lr.underWay(len(lr.pend)) {
		if !lr.mid {
			lr.mid, lr.since = true, time.Now()
			l.timers.Schedule(lr.sys.timer, int64(lr.since.Add(cc.h.cfg.RequestTimeout).Sub(l.epoch)))
		}
	} else {
		lr.mid = false
		l.timers.Cancel(lr.sys.timer)
		cc.hr.trim() // waiting for the client: no large decoding buffer kept
	}
	return true
}

// timeout ends a connection whose preface, SETTINGS or frame did not
// come whole within RequestTimeout, as the reader's deadline does.
func (l *rloop) timeout(cc *cconn) {
	if !cc.lr.sys.on {
		return
	}
	if cc.lr.phase == phasePreface {
		cc.h.m.closed.WithLabelValues("timeout").Inc()
	} else {
		cc.readErr(http2.FrameHeader{}, errReadTimeout)
	}
	l.end(cc, loopEnd)
}

func (l *rloop) getPend() []byte {
	if k := len(l.spare); k > 0 {
		b := l.spare[k-1]
		l.spare[k-1] = nil
		l.spare = l.spare[:k-1]
		return b
	}
	return make([]byte, 0, pendCap)
}

func (l *rloop) givePend(cc *cconn) {
	b := cc.lr.pend
	cc.lr.pend = nil
	if b != nil && len(l.spare) < loopSpare {
		l.spare = append(l.spare, b[:0])
	}
}

// end takes cc off the loop and hands it back to its ServeConn
// goroutine with verdict v (loopEnd, loopHalfOpen).
func (l *rloop) end(cc *cconn, v int) {
	sys := &cc.lr.sys
	if !sys.on {
		return
	}
	sys.on = false
	delete(l.conns, cc)
	l.poll.Forget(sys.fd) // before the socket is closed (by that goroutine)
	l.timers.Cancel(sys.timer)
	l.givePend(cc)
	l.verdict(cc, v)
}

// verdict hands cc back to its ServeConn goroutine; the loop has one
// connection less.
func (l *rloop) verdict(cc *cconn, v int) {
	l.mu.Lock()
	l.n--
	l.mu.Unlock()
	cc.verdict <- v
}

// stopLoop asks cc's loop to end it (stopReader); any goroutine.
func (cc *cconn) stopLoop() {
	l := cc.lr.sys.lp.Load()
	if l == nil {
		return
	}
	l.mu.Lock()
	p := l.poll
	running := l.running
	l.mu.Unlock()
	if running {
		p.Post(func() { l.end(cc, loopEnd) })
	}
}
