package h2

import (
	"net"
	"sync"
	"time"
)

// coalesceConn batches the writes of an HTTP/2 connection into fewer
// syscalls. Go's HTTP/2 server and transport flush after nearly every
// frame (a request's HEADERS, then each DATA frame, then END_STREAM; an
// answer's HEADERS, DATA and trailers as separate frame writes), one write
// syscall each, from whichever goroutine holds the connection's write
// lock. Here a Write only appends to a pending buffer; one writer
// goroutine per connection writes whatever has accumulated since its last
// write. Under load the frames of many streams go out in one syscall;
// when idle a write costs one goroutine wake-up more.
//
// The pending buffer is bounded (a Write waits while it holds more than
// coalesceMax bytes), so HTTP/2 flow control and TCP back-pressure still
// reach the writers. A write error is returned by every later Write.
type coalesceConn struct {
	net.Conn
	mu      sync.Mutex
	cond    sync.Cond // signalled when pending shrinks or the writer stops
	pending []byte
	spare   []byte
	err     error
	closed  bool
	kick    chan struct{} // 1-buffered: wake the writer
	done    chan struct{} // closed when the writer exits
}

const coalesceMax = 256 << 10

func newCoalesceConn(c net.Conn) *coalesceConn {
	cc := &coalesceConn{Conn: c, kick: make(chan struct{}, 1), done: make(chan struct{})}
	cc.cond.L = &cc.mu
	go cc.writer()
	return cc
}

func (c *coalesceConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	for len(c.pending) > coalesceMax && c.err == nil && !c.closed {
		c.cond.Wait()
	}
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return 0, err
	}
	if c.closed {
		c.mu.Unlock()
		return 0, net.ErrClosed
	}
	wake := len(c.pending) == 0
	c.pending = append(c.pending, b...)
	c.mu.Unlock()
	if wake {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
	return len(b), nil
}

func (c *coalesceConn) writer() {
	defer close(c.done)
	for {
		c.mu.Lock()
		for len(c.pending) == 0 && !c.closed {
			c.mu.Unlock()
			<-c.kick
			c.mu.Lock()
		}
		if len(c.pending) == 0 && c.closed {
			c.mu.Unlock()
			return
		}
		buf := c.pending
		c.pending = c.spare[:0]
		c.mu.Unlock()
		_, err := c.Conn.Write(buf)
		c.mu.Lock()
		if cap(buf) <= coalesceMax {
			c.spare = buf[:0]
		} else {
			c.spare = nil
		}
		if err != nil && c.err == nil {
			c.err = err
		}
		c.cond.Broadcast()
		stop := c.err != nil
		c.mu.Unlock()
		if stop {
			return
		}
	}
}

// Close writes what is pending (for at most a second: a last GOAWAY
// should go out, a stuck peer must not hold the close), then closes.
func (c *coalesceConn) Close() error {
	c.mu.Lock()
	already := c.closed
	c.closed = true
	c.cond.Broadcast()
	c.mu.Unlock()
	if !already {
		select {
		case c.kick <- struct{}{}:
		default:
		}
		select {
		case <-c.done:
		case <-time.After(time.Second):
		}
	}
	return c.Conn.Close()
}
