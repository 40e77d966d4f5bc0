//go:build linux

package goroutine

import (
	"net"

	"golang.org/x/sys/unix"

	"github.com/retrycap/retrycap/internal/proxy/netpoll"
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
// through its wrappers: socketOf) closed its end or reset it
// (netpoll.PeerClosed). Bytes waiting (a pipelined request) are not a
// close.
func clientClosed(c net.Conn) bool { return netpoll.PeerClosed(socketOf(c)) }

// socketOf is the connection under c's wrappers: those that name theirs by
// NetConn, as tls.Conn does (the pre-parser, a hand-off's prefix, the h2c
// sniffer), and fasthttp's hijacked connection, which names it by
// UnsafeConn (the HTTP/1.1 served inside a CONNECT tunnel to a known
// upstream: without it that client's close and reset went unseen, and
// curl -p --max-time 1 had its GET retried after it had gone).
func socketOf(c net.Conn) net.Conn {
	for {
		switch w := c.(type) {
		case interface{ NetConn() net.Conn }:
			c = w.NetConn()
		case interface{ UnsafeConn() net.Conn }:
			c = w.UnsafeConn()
		default:
			return c
		}
	}
}
