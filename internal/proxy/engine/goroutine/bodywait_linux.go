//go:build linux

package goroutine

import "github.com/retrycap/retrycap/internal/proxy/netpoll"

// resetWatch closes its channel when the watched socket is reset
// (netpoll.Hungup: on the watcher's goroutine, at most once).
type resetWatch chan struct{}

func (w resetWatch) Hungup() { close(w) }

// watchReset returns a channel closed when c's client resets its socket,
// and the watch's stop; a nil channel (never closed) when the socket
// cannot be watched.
func watchReset(c *headConn) (<-chan struct{}, func()) {
	fd := clientFd(c)
	if fd < 0 {
		return nil, func() {}
	}
	w := make(resetWatch)
	tok, err := netpoll.WatchHangup(fd, w)
	if err != nil {
		return nil, func() {}
	}
	return w, func() { netpoll.StopHangup(tok) }
}
