package goroutine

import (
	"net"
	"sync"
)

// Handoff is the goroutine engine's listener under the event loop: it
// accepts nothing from the network, only the connections the loops hand
// over (with the bytes they had read), so that fasthttp's server serves
// them with its own accounting, timeouts and graceful shutdown.
type Handoff struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

// NewHandoff is a hand-off listener that reports addr as its address.
func NewHandoff(addr net.Addr) *Handoff {
	return &Handoff{addr: addr, conns: make(chan net.Conn, 256), done: make(chan struct{})}
}

func (h *Handoff) Accept() (net.Conn, error) {
	select {
	case c := <-h.conns:
		return c, nil
	case <-h.done:
		return nil, net.ErrClosed
	}
}

// Close ends Accept. Connections handed over but not accepted yet are
// closed: the server stops calling Accept once it is closed, and would
// never take them.
func (h *Handoff) Close() error {
	h.once.Do(func() { close(h.done) })
	h.closeQueued()
	return nil
}

func (h *Handoff) closeQueued() {
	for {
		select {
		case c := <-h.conns:
			_ = c.Close()
		default:
			return
		}
	}
}

func (h *Handoff) Addr() net.Addr { return h.addr }

// Push hands c over; it never blocks the caller (a loop). After Close, c
// is closed instead.
func (h *Handoff) Push(c net.Conn) {
	select {
	case <-h.done:
		_ = c.Close()
	case h.conns <- c:
		h.closedMeanwhile()
	default:
		go func() {
			select {
			case h.conns <- c:
				h.closedMeanwhile()
			case <-h.done:
				_ = c.Close()
			}
		}()
	}
}

// closedMeanwhile: a connection queued as (or after) the listener closed
// would never be accepted; close what is queued.
func (h *Handoff) closedMeanwhile() {
	select {
	case <-h.done:
		h.closeQueued()
	default:
	}
}
