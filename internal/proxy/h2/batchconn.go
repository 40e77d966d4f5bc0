package h2

import (
	"errors"
	"io"
	"net"
	"os"

	"sync"
	"syscall"
	"time"
)

// batchConn batches the relay's writes to one connection; nothing but the
// connection's own writer goroutine ever waits on its socket: an upstream
// connection's reader hands a client its answer by appending frames here
// (and at most makes one non-blocking write of them, below), so a client
// that stops reading blocks only its own writer, never the reader that
// serves every other client of that upstream (as x/net's server waits on
// a socket only in its serve loop's writer, never in a handler).
//
// A Write appends to the pending buffer and marks the connection dirty;
// the goroutine that wrote kicks every dirty connection's writer
// (Handler.flushDirty) once it has no more input at hand: a reader
// goroutine when its buffered reader is drained (so the frames of every
// stream in one read(2) go out in one write(2) per connection), a timer
// when it is done. A write that nobody kicked within flushSafetyNet (a
// path that forgot) is kicked by a timer.
//
// When the writer is idle, Flush first makes one non-blocking write(2)
// of what is pending itself (tryWrite: the socket is non-blocking, and
// the attempt never waits for it to become writable; a Flush that finds
// another Flush in that write leaves its bytes to it), and hands the
// writer only what the kernel did not take at once: the common case, a
// socket with room, costs no wake-up of another goroutine (with a P to
// spare, the runtime runs that writer on another thread: a futex wake
// and a cross-CPU hand-off per batch, measured in docs/benchmarks.md).
// The flusher thus never blocks on another connection's socket, as
// before: what it cannot write now, the connection's own writer does.
//
// What may be pending is bounded, as x/net's server bounds its queued
// control frames (maxQueuedControlFrames): answer DATA is written only
// while pending is under softMax (room; above it the streams wait as
// for a flow-control window and onDrain resumes them), and a connection
// whose pending passes hardMax (a peer that floods PING or SETTINGS and
// never reads the answers) has failed: onFail ends it. A write(2) that
// does not finish within writeTimeout fails the connection too
// (net/http's WriteTimeout, x/net's WriteByteTimeout): a client that
// stops reading loses its own connection, nothing else.
type batchConn struct {
	net.Conn
	h            *Handler
	writeTimeout time.Duration
	// rc is the socket under Conn's wrappers, for tryWrite; nil when
	// there is none (a pipe in a test): the writer writes everything.
	rc syscall.RawConn
	// tryWrite's callback and its argument and result (under writing).
	tryFn func(fd uintptr) bool
	try   []byte
	tried int
	// The writer's own writes to rc (writeSock), its callback, what is
	// left to write and the error met.
	sockFn   func(fd uintptr) bool
	sockLeft []byte
	sockErr  error
	// onDrain runs on the writer goroutine when pending fell under
	// softMax/2 after a caller found no room; onFail once when the
	// connection failed (write error, timeout, hardMax).
	onDrain func()
	onFail  func(err error)

	mu       sync.Mutex
	cond     sync.Cond // the writer waits on it; so does Close for a write(2) to end
	pending  []byte
	spare    []byte
	writing  bool // the writer, or a Flush (inlining), is in write(2)
	inlining bool // a Flush is in its non-blocking write(2)
	queued   bool // in h.dirty
	kicked   bool // the writer may write what is pending
	wantRoom bool
	// closeWait: Close waits for a Flush's write(2) to end.
	closeWait bool
	inlined   int64     // bytes Flush wrote itself (tests read it)
	dl        time.Time // the write deadline set
	err       error
	failed    bool // onFail ran
	closed    bool
}

const (
	// softMax: above it no answer DATA is added (the streams wait).
	softMax = 256 << 10
	// hardMax: above it the peer is not reading what it makes the relay
	// write (control frames, headers): the connection ends. 1 MiB holds
	// ~60,000 PING acknowledgements (x/net: 10,000 queued control frames).
	hardMax = softMax + 1<<20
	// spareMax is the largest buffer kept for the next batch.
	spareMax = softMax
	// inlineMax is the most Flush writes itself (a larger batch is the
	// writer's: the flusher is not held copying it).
	inlineMax = 64 << 10
	// inlineRounds is the most non-blocking writes one Flush makes, the
	// later ones of what other Flushes added meanwhile.
	inlineRounds   = 4
	flushSafetyNet = 2 * time.Millisecond
	// defaultWriteTimeout bounds one write(2) of a batch (Config.WriteTimeout).
	defaultWriteTimeout = 10 * time.Second
)

// errStuck is a connection whose peer does not read what it makes the relay write.
var errStuck = errors.New("retrycap-proxy: peer not reading: more than 1.25 MiB of frames pending")

func newBatchConn(h *Handler, c net.Conn) *batchConn {
	b := &batchConn{Conn: c, h: h, writeTimeout: h.cfg.WriteTimeout, rc: rawConn(c)}
	if b.writeTimeout <= 0 {
		b.writeTimeout = defaultWriteTimeout
	}
	b.cond.L = &b.mu
	b.tryFn = b.rawWrite
	b.sockFn = b.sockWriteSome
	go b.writeLoop()
	return b
}

func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	if b.err != nil || b.closed {
		err := b.err
		b.mu.Unlock()
		if err == nil {
			err = net.ErrClosed
		}
		return 0, err
	}
	b.pending = append(b.pending, p...)
	if len(b.pending) > hardMax {
		b.err = errStuck
		b.pending = nil
		b.cond.Broadcast()
		b.mu.Unlock()
		b.fail(errStuck)
		return 0, errStuck
	}
	enqueue := !b.queued
	if enqueue {
		b.queued = true
	}
	b.mu.Unlock()
	if enqueue {
		b.h.markDirty(b)
	}
	return len(p), nil
}

// room is how many bytes of answer DATA may be added now; at 0 the
// caller waits for onDrain.
func (b *batchConn) room() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := softMax - len(b.pending)
	if r <= 0 {
		b.wantRoom = true
		r = 0
	}
	return r
}

// headRoom reports whether a header block of at most need bytes may be
// added now without passing hardMax (which fails the connection, every
// stream on it): always when nothing is pending (a block alone is under
// hardMax: its list is at most relayMaxHeaderList), else only if it fits;
// if not, onDrain tells the caller when the writer drained.
func (b *batchConn) headRoom(need int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pending) == 0 || len(b.pending)+need <= hardMax {
		return true
	}
	b.wantRoom = true
	return false
}

// Flush writes what is pending: at once what the socket takes without
// waiting (when the writer is idle), the rest from the writer goroutine.
// It never blocks.
//
// A Flush that finds another Flush in its write(2) leaves what it added
// to that one, which writes it next (at most inlineRounds writes in all,
// each non-blocking) instead of waking the writer goroutine: with two Ps
// two client readers flush one upstream connection at once all the
// time, and each such hand-off woke the writer twice (once to find the
// write under way, once to write), a thread woken per call.
func (b *batchConn) Flush() error {
	b.mu.Lock()
	b.queued = false
	if b.inlining && !b.kicked {
		err := b.err
		b.mu.Unlock()
		return err
	}
	for round := 0; round < inlineRounds && len(b.pending) > 0 && !b.kicked && !b.writing && !b.wantRoom &&
		b.rc != nil && len(b.pending) <= inlineMax && b.err == nil && !b.closed; round++ {
		buf := b.pending
		b.pending, b.spare = b.spare[:0], nil // never two owners of one array
		b.writing, b.inlining = true, true
		b.mu.Unlock()
		n := b.tryWrite(buf)
		b.mu.Lock()
		b.writing, b.inlining = false, false
		b.inlined += int64(n)
		if b.closeWait || b.kicked {
			// Close waits for the write to end; so does the writer,
			// kicked by another Flush meanwhile.
			b.cond.Broadcast()
		}
		short := n < len(buf)
		if short {
			// The rest goes first, then what came meanwhile.
			rest := copy(buf, buf[n:])
			buf = append(buf[:rest], b.pending...)
			b.pending, buf = buf, b.pending
		}
		if cap(buf) <= spareMax && b.spare == nil {
			b.spare = buf[:0]
		}
		if short {
			break // the socket is full: the writer waits for room
		}
	}
	if len(b.pending) > 0 && !b.kicked {
		b.kicked = true
		b.cond.Broadcast()
	}
	err := b.err
	b.mu.Unlock()
	return err
}

// tryWrite makes one non-blocking write(2) of p and returns how much the
// kernel took: 0 on EAGAIN, or on any error (the writer goroutine then
// writes p and meets the error itself, with its handling).
func (b *batchConn) tryWrite(p []byte) int {
	b.try, b.tried = p, 0
	_ = b.rc.Write(b.tryFn)
	n := b.tried
	b.try = nil
	return n
}

// rawWrite is tryWrite's callback (a method value made once: a closure
// per write would be an allocation); b.writing is held, so try and
// tried are its alone.
func (b *batchConn) rawWrite(fd uintptr) bool {
	k, err := sockWrite(fd, b.try)
	if err == nil && k > 0 {
		b.tried = k
	}
	return true // never wait for the socket: that is the writer's
}

// rawConn is the socket under c's wrappers, nil if none (socketOf).
func rawConn(c net.Conn) syscall.RawConn {
	s, ok := socketOf(c).(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := s.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// socketOf is the socket under c's wrappers (those that name the
// connection they wrap by NetConn, as tls.Conn does), nil if none.
func socketOf(c net.Conn) net.Conn {
	for range 8 {
		if _, ok := c.(syscall.Conn); ok {
			return c
		}
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = w.NetConn()
	}
	return nil
}

// writeLoop is the connection's writer goroutine; it ends with the
// connection.
func (b *batchConn) writeLoop() {
	b.mu.Lock()
	for {
		for !b.closed && b.err == nil && (!b.kicked || len(b.pending) == 0 || b.writing) {
			b.cond.Wait()
		}
		if b.closed || b.err != nil {
			b.mu.Unlock()
			return
		}
		buf := b.pending
		b.pending, b.spare = b.spare[:0], nil // never two owners of one array
		b.kicked = len(b.pending) > 0
		b.writing = true
		// The deadline is renewed only once half of it is gone (setting
		// it re-arms a runtime timer, per write(2) a measurable cost):
		// a write(2) still ends within writeTimeout, and gets at least
		// half of it. Under mu: Close's shorter deadline is not overwritten.
		if now := time.Now(); b.dl.Sub(now) < b.writeTimeout/2 {
			b.dl = now.Add(b.writeTimeout)
			_ = b.SetWriteDeadline(b.dl)
		}
		b.mu.Unlock()
		err := b.write(buf)
		b.mu.Lock()
		b.writing = false
		b.cond.Broadcast()
		if cap(buf) <= spareMax {
			b.spare = buf[:0]
		}
		if err != nil {
			if b.err == nil {
				b.err = err
			}
			b.mu.Unlock()
			b.fail(err)
			return
		}
		// Whatever came while writing goes next, without another kick.
		b.kicked = len(b.pending) > 0
		drain := b.wantRoom && len(b.pending) < softMax/2
		if drain {
			b.wantRoom = false
			if b.onDrain != nil {
				b.mu.Unlock()
				b.onDrain()
				b.mu.Lock()
			}
		}
	}
}

// write is the writer's write of buf: to the socket directly when there
// is one (as tryWrite writes; the wrappers above it add nothing to a
// write), waiting for room in Go's poller within the write deadline, with
// no system call the scheduler is told of (netpoll.SendRaw says why);
// else through Conn.
func (b *batchConn) write(buf []byte) error {
	if b.rc == nil {
		_, err := b.Conn.Write(buf)
		return err
	}
	b.sockLeft, b.sockErr = buf, nil
	err := b.rc.Write(b.sockFn)
	b.sockLeft = nil
	if err == nil {
		err = b.sockErr
	}
	if err != nil {
		return &net.OpError{Op: "write", Net: b.LocalAddr().Network(), Source: b.LocalAddr(), Addr: b.RemoteAddr(), Err: err}
	}
	return nil
}

// sockWriteSome is write's callback: it writes until all is sent (true),
// the socket is full (false: the poller waits for room) or an error.
func (b *batchConn) sockWriteSome(fd uintptr) bool {
	for len(b.sockLeft) > 0 {
		n, err := sockWrite(fd, b.sockLeft)
		switch {
		case n > 0:
			b.sockLeft = b.sockLeft[n:]
		case errors.Is(err, syscall.EINTR):
		case errors.Is(err, syscall.EAGAIN):
			return false
		case err == nil:
			b.sockErr = io.ErrShortWrite
			return true
		default:
			b.sockErr = os.NewSyscallError("write", err)
			return true
		}
	}
	return true
}

// fail runs onFail once.
func (b *batchConn) fail(err error) {
	b.mu.Lock()
	run := !b.failed && !b.closed
	b.failed = true
	b.mu.Unlock()
	if run && b.onFail != nil {
		b.onFail(err)
	}
}

// Close writes what is pending (at most a second: a last GOAWAY should go
// out, a stuck peer must not hold the close), then closes. A write(2)
// under way ends first (within that second): after Close nothing touches
// the connection (a hijacked one is recycled once its handler returns).
func (b *batchConn) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.cond.Broadcast()
	if b.writing {
		_ = b.SetWriteDeadline(time.Now().Add(time.Second))
	}
	b.closeWait = true
	for b.writing {
		b.cond.Wait()
	}
	buf, err := b.pending, b.err
	b.pending = nil
	b.mu.Unlock()
	if len(buf) > 0 && err == nil {
		_ = b.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = b.Conn.Write(buf)
	}
	return b.Conn.Close()
}

// markDirty queues a connection with pending writes for flushDirty. The
// safety net is armed only when it is not already: a timer reset per
// batch moved the runtime's next timer earlier each time, which wakes
// the thread sleeping in the netpoller (a futex or eventfd wake per
// batch); armed once, it fires at most every flushSafetyNet, and a
// write waits for it no longer than before.
func (h *Handler) markDirty(b *batchConn) {
	h.dmu.Lock()
	h.dirty = append(h.dirty, b)
	arm := !h.dtArmed
	h.dtArmed = true
	h.dmu.Unlock()
	if arm {
		h.dtimer.Reset(flushSafetyNet)
	}
}

// safetyNet is the timer's: it flushes what nobody did; the next
// markDirty arms it again.
func (h *Handler) safetyNet() {
	h.dmu.Lock()
	h.dtArmed = false
	h.dmu.Unlock()
	h.flushDirty()
}

// flushDirty flushes every connection written to since the last flush,
// each with its own non-blocking write(2) (flush), whatever the number of
// connections and of Ps; a connection's writer writes only what its
// socket did not take at once.
func (h *Handler) flushDirty() {
	for {
		h.dmu.Lock()
		d := h.dirty
		h.dirty = h.spareDirty[:0]
		h.spareDirty = nil
		h.dmu.Unlock()
		if len(d) == 0 {
			h.dmu.Lock()
			if h.spareDirty == nil {
				h.spareDirty = d[:0]
			}
			h.dmu.Unlock()
			return
		}
		// An upstream's answers to many clients are written here one
		// after the other, not by the clients' writers side by side:
		// with one P those ran one after the other all the same, each
		// behind whatever else was runnable (a client's answer waited
		// 0.17 ms for its writer at the median, 8 ms at p99), and with
		// two each hand-off was a goroutine woken per answer, 0.4-0.8
		// writer writes per call at 2,000 gRPC calls/s over 64
		// connections (docs/decisions.md). Each write is non-blocking:
		// a client that does not read holds nobody here.
		for i, b := range d {
			_ = b.Flush()
			d[i] = nil
		}
		h.dmu.Lock()
		if h.spareDirty == nil {
			h.spareDirty = d[:0]
		}
		h.dmu.Unlock()
	}
}
