package proxy

import (
	"net"
	"sync"
	"time"

	"github.com/retrycap/retrycap/internal/proxy/forward"
)

// reserveListener is the admin listener: it keeps a spare descriptor
// (forward.Reserve) so that /healthz, /readyz and /metrics answer while the
// data path has exhausted the process's descriptors (EMFILE). An accept that
// fails for want of descriptors frees the spare and accepts again; the
// spare is taken back when that connection closes. With no spare to free it
// waits with a backoff (net/http would retry too, but log each retry).
type reserveListener struct {
	net.Listener
	r *forward.Reserve
}

func newReserveListener(ln net.Listener, r *forward.Reserve) *reserveListener {
	r.Take()
	return &reserveListener{Listener: ln, r: r}
}

func (l *reserveListener) Accept() (net.Conn, error) {
	wait := reserveWaitMin
	for {
		c, err := l.Listener.Accept()
		if err == nil {
			return c, nil
		}
		if !forward.Exhausted(err) {
			return nil, err
		}
		if l.r.Use() {
			if c, err = l.Listener.Accept(); err == nil {
				return &spareConn{Conn: c, r: l.r}, nil
			}
			// The data path's accept took the descriptor freed for this
			// one (it gives it back at once, forward.Reserve), or the
			// connection went: try again soon.
			l.r.Take()
		} else if l.r.Take() {
			// The spare was missing and a descriptor is free again: the
			// admin port has its spare back before the data path takes it.
			continue
		}
		// The pause stays short: a spare lost to the data path comes back
		// within its accept's close, and the admin port is what a kubelet
		// probes (a 1 s backoff after a few lost rounds took /healthz past
		// a 5 s probe timeout under load: TestDescriptorExhaustion).
		time.Sleep(wait)
		wait = min(2*wait, reserveWaitMax)
	}
}

// The admin listener's wait between accepts while descriptors are
// exhausted and its spare is out (at most 20 wake-ups a second).
const (
	reserveWaitMin = time.Millisecond
	reserveWaitMax = 50 * time.Millisecond
)

func (l *reserveListener) Close() error {
	l.r.Close()
	return l.Listener.Close()
}

// spareConn is an admin connection accepted on the spare descriptor: its
// close takes the spare back (or leaves it missing, for the data path to
// give back: forward.Reserve).
type spareConn struct {
	net.Conn
	r    *forward.Reserve
	once sync.Once
}

func (c *spareConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.r.Take() })
	return err
}
