//go:build linux

package h2

import (
	"net"

	"golang.org/x/sys/unix"
)

// sockReset reports whether c's socket was reset or closed both ways
// (poll(2): POLLHUP or POLLERR), which a socket whose peer only shut its
// write side never is: a client that sent a FIN and still reads leaves
// POLLRDHUP alone; one that closed its socket whole answers the relay's
// next frame (the FIN probe's PING) with a RST, and then this holds.
// false when c has no socket under it (socketOf).
func sockReset(c net.Conn) bool {
	rc := rawConn(c)
	if rc == nil {
		return false
	}
	reset := false
	_ = rc.Control(func(fd uintptr) { reset = fdReset(fd) })
	return reset
}

func fdReset(fd uintptr) bool {
	fds := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}} //nolint:gosec // a descriptor
	n, err := unix.Poll(fds[:], 0)
	return err == nil && n > 0 && fds[0].Revents&(unix.POLLHUP|unix.POLLERR) != 0
}

// watchReset calls wake once c's socket is reset (sockReset), its read
// deadline passes or it is closed, without a thread of its own: Go's
// poller parks the goroutine and wakes it on the socket's next event
// (the RST's POLLERR/POLLHUP; the peer's FIN is already read and wakes
// nobody again). Only while the connection's reader reads nothing more
// (waitAnswers): it takes the socket's read lock. false when c has no
// socket under it.
func watchReset(c net.Conn, wake func()) bool {
	rc := rawConn(c)
	if rc == nil {
		return false
	}
	go func() {
		_ = rc.Read(fdReset)
		wake()
	}()
	return true
}
