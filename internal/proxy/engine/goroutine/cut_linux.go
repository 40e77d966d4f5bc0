//go:build linux

package goroutine

import (
	"net"
	"syscall"

	"github.com/retrycap/retrycap/internal/proxy/netpoll"
)

// watchClient starts watching the client of c (the server's connection)
// for its reset; nil when its socket cannot be watched (then the call runs
// as before: a reset client is seen when its attempt ends).
func (e *Engine) watchClient(c net.Conn) *clientCut {
	fd := clientFd(c)
	if fd < 0 {
		return nil
	}
	cut := cutPool.Get().(*clientCut) //nolint:forcetypeassert // the pool holds only these
	tok, err := netpoll.WatchHangup(fd, cut)
	if err != nil {
		cutPool.Put(cut)
		e.watchErr.Do(func() { e.f.Logger.Printf("goroutine engine: clients that go away are not cut: %v", err) })
		return nil
	}
	cut.tok = tok
	return cut
}

func stopWatch(tok uint64) { netpoll.StopHangup(tok) }

// clientFd is the socket under c (through its wrappers: socketOf), -1
// when there is none; the pre-parser's connection keeps it
// (one look per connection).
func clientFd(c net.Conn) int {
	hc, _ := c.(*headConn)
	if hc != nil && hc.fd != 0 {
		return hc.fd - 1
	}
	fd := -1
	c = socketOf(c)
	if sc, ok := c.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			_ = rc.Control(func(s uintptr) { fd = int(s) }) //nolint:gosec // a descriptor
		}
	}
	if hc != nil {
		hc.fd = fd + 1
	}
	return fd
}
