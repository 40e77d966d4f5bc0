package h2

import (
	"net"
	"sync"
	"time"
)

// batchConn batches the relay's writes to one connection without a
// writer goroutine: a Write appends to a pending buffer and marks the
// connection dirty; the goroutine that wrote flushes every dirty
// connection (Handler.flushDirty) once it has no more input at hand: a
// reader goroutine when its buffered reader is drained (so the frames of
// every stream in one read(2) go out in one write(2) per connection), a
// timer when it is done. A write that nobody flushed within
// flushSafetyNet (a path that forgot) is flushed by a timer.
//
// A Write over batchMax pending bytes writes at once (the caller then
// waits for the socket, as flow control and TCP back-pressure want).
type batchConn struct {
	net.Conn
	h *Handler

	mu      sync.Mutex
	cond    sync.Cond // signalled when a write(2) returns
	pending []byte
	spare   []byte
	writing bool // a Flush is in write(2); it writes what comes meanwhile too
	queued  bool // in h.dirty
	err     error
	closed  bool
}

const (
	batchMax       = 256 << 10
	flushSafetyNet = 2 * time.Millisecond
)

func newBatchConn(h *Handler, c net.Conn) *batchConn {
	b := &batchConn{Conn: c, h: h}
	b.cond.L = &b.mu
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
	big := len(b.pending) > batchMax
	enqueue := !b.queued && !big
	if enqueue {
		b.queued = true
	}
	b.mu.Unlock()
	if big {
		return len(p), b.Flush()
	}
	if enqueue {
		b.h.markDirty(b)
	}
	return len(p), nil
}

// Flush writes what is pending; a Flush under way elsewhere writes it
// instead (after its own write returns).
func (b *batchConn) Flush() error {
	b.mu.Lock()
	b.queued = false
	for !b.writing && !b.closed && len(b.pending) > 0 && b.err == nil {
		buf := b.pending
		b.pending, b.spare = b.spare[:0], nil // never two owners of one array
		b.writing = true
		b.mu.Unlock()
		_, err := b.Conn.Write(buf)
		b.mu.Lock()
		b.writing = false
		b.cond.Broadcast()
		if cap(buf) <= batchMax {
			b.spare = buf[:0]
		}
		if err != nil && b.err == nil {
			b.err = err
		}
	}
	err := b.err
	b.mu.Unlock()
	return err
}

// Close writes what is pending (at most a second: a last GOAWAY should go
// out, a stuck peer must not hold the close), then closes. A write(2)
// under way ends first: after Close nothing touches the connection (a
// hijacked one is recycled once its handler returns).
func (b *batchConn) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
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

// markDirty queues a connection with pending writes for flushDirty.
func (h *Handler) markDirty(b *batchConn) {
	h.dmu.Lock()
	h.dirty = append(h.dirty, b)
	first := len(h.dirty) == 1
	h.dmu.Unlock()
	if first {
		h.dtimer.Reset(flushSafetyNet)
	}
}

// flushDirty flushes every connection written to since the last flush.
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
