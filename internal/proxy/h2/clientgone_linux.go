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
	_ = rc.Control(func(fd uintptr) {
		fds := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}} //nolint:gosec // a descriptor
		if n, err := unix.Poll(fds[:], 0); err == nil && n > 0 {
			reset = fds[0].Revents&(unix.POLLHUP|unix.POLLERR) != 0
		}
	})
	return reset
}
