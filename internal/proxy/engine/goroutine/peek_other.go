//go:build !linux

package goroutine

import "golang.org/x/sys/unix"

// peekByte looks at the next byte of a socket without taking it or waiting.
func peekByte(fd uintptr, b *[1]byte) (int, error) {
	n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT) //nolint:gosec // a descriptor
	return n, err
}
