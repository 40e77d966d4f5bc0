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
	wait := 5 * time.Millisecond
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
			l.r.Take()
		}
		time.Sleep(wait)
		wait = min(2*wait, time.Second)
	}
}

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
