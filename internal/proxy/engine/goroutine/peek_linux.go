//go:build linux

package goroutine

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// peekByte looks at the next byte of a socket without taking it or
// waiting. unix.Recvfrom allocates the sender's address (a RawSockaddrAny
// that escapes, 113 bytes per call): with a pooled connection checked on
// every request it was the goroutine engine's one allocation per request.
// A connected socket needs no address, so the system call gets none.
func peekByte(fd uintptr, b *[1]byte) (int, error) {
	n, _, errno := unix.Syscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1, unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil //nolint:gosec // at most 1
}
