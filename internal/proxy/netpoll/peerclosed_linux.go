//go:build linux

package netpoll

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// PeerClosed reports whether c's peer closed its end or reset it (its FIN
// or RST arrived), whether or not c's reader has read up to it: POLLRDHUP,
// POLLHUP or POLLERR from a zero-timeout poll(2). Bytes waiting (a
// pipelined request, an answer) are not a close. false when c is no
// socket. The goroutine engine asks it of a client before it starts the
// upstream call; the h2 relay of a pooled upstream connection before a
// stream that may not be sent twice (the loop engine's idleEnded asks the
// same of its own sockets).
func PeerClosed(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	_ = rc.Control(func(fd uintptr) {
		fds := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}} //nolint:gosec // a descriptor
		if n, err := unix.Poll(fds[:], 0); err == nil && n > 0 {
			closed = fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0
		}
	})
	return closed
}
