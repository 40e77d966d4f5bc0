//go:build linux

package netpoll

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// WriteSome writes b to a non-blocking socket until it is all sent or the
// socket is full; it returns what is left for EPOLLOUT. On an error, rest
// is what the socket did not take: a caller counting the bytes that left
// (policy.MayResend: a pooled connection whose write failed before any
// byte left may carry the request again) must not count it. (Before issue
// 25's test of that path, rest was nil on an error: a keyless POST whose
// first write failed with EPIPE counted as sent and was answered 502.)
func WriteSome(fd int, b []byte) (rest []byte, err error) {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		switch {
		case n > 0:
			b = b[n:]
		case errors.Is(err, unix.EINTR):
		case errors.Is(err, unix.EAGAIN):
			return b, nil
		case err == nil:
			return b, io.ErrShortWrite // 0 bytes taken without an error
		default:
			return b, err
		}
	}
	return nil, nil
}

// FileConn turns a socket a loop owned into a net.Conn on Go's poller; fd
// is closed (the net.Conn holds a duplicate).
func FileConn(fd int, name string) (net.Conn, error) {
	f := os.NewFile(uintptr(fd), name)
	nc, err := net.FileConn(f) // a duplicate; the original closes below
	_ = f.Close()
	if err != nil {
		return nil, err
	}
	return nc, nil
}

// ListenerFd is a non-blocking duplicate of a TCP listener's socket, for
// loops to accept on.
func ListenerFd(ln net.Listener) (int, error) {
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		return -1, fmt.Errorf("event loop: listener is a %T, not TCP", ln)
	}
	f, err := tl.File()
	if err != nil {
		return -1, fmt.Errorf("event loop: listener socket: %w", err)
	}
	fd, err := unix.Dup(int(f.Fd()))
	_ = f.Close()
	if err != nil {
		return -1, fmt.Errorf("event loop: listener socket: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		return -1, fmt.Errorf("event loop: listener socket: %w", err)
	}
	return fd, nil
}
