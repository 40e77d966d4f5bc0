//go:build !linux

package goroutine

import (
	"errors"
	"net"

	"golang.org/x/sys/unix"
)

// idleEnded reports whether anything happened on an idle keep-alive socket
// since its last answer (bytes, EOF, a reset): a peek that finds nothing
// to read yet is the only "still idle".
func idleEnded(fd uintptr) bool {
	var b [1]byte
	n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT) //nolint:gosec // a descriptor
	return !errors.Is(err, unix.EAGAIN) || n > 0
}

// clientClosed: not looked at off Linux (no POLLRDHUP); a client's
// cancellation there counts as the attempt's outcome.
func clientClosed(net.Conn) bool { return false }
