//go:build linux

package goroutine

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// idleEnded reports whether anything happened on an idle keep-alive socket
// since its last answer: bytes, the upstream's close (POLLRDHUP, or POLLIN
// with EOF), a reset or an error. poll(2) with a zero timeout looks without
// reading or waiting, and needs no buffer or address: unix.Recvfrom with
// MSG_PEEK allocated the sender's address (113 bytes per call), the
// goroutine engine's one allocation per request on a pooled connection.
// A failed poll counts as ended: the connection is not reused.
func idleEnded(fd uintptr) bool {
	fds := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLRDHUP}} //nolint:gosec // a descriptor
	n, err := unix.Poll(fds[:], 0)
	return err != nil || n > 0 && fds[0].Revents != 0
}

// clientClosed reports whether the client of c (the server's connection,
// through the wrappers that name theirs by NetConn, as tls.Conn does: the
// pre-parser, a hand-off's prefix, the h2c sniffer) closed its end or reset
// it: POLLRDHUP, POLLHUP or POLLERR, with a zero-timeout poll(2). Bytes
// waiting (a pipelined request) are not a close.
func clientClosed(c net.Conn) bool {
	for {
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = w.NetConn()
	}
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
