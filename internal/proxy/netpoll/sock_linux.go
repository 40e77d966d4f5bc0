//go:build linux

package netpoll

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Recv and Send are read(2) and write(2) for the loops' sockets, as
// recvfrom(2) and sendto(2) without an address, as HAProxy does: the
// kernel serves them from the socket directly, where read and write go
// through the file layer first (the file position's lock, the checks of a
// file write; ~3 % of the proxy's samples under wrk). Send adds
// MSG_NOSIGNAL: a peer gone is EPIPE, with no SIGPIPE raised for the
// runtime to swallow. Like unix.Read they return -1 with the error.
//
// Why raw system calls (and unsafe for the buffer's address): x/sys/unix's
// Sendto returns no byte count (a partial write must be known), and its
// Recvfrom and SendmsgN allocate (1 allocation per send and receive pair,
// measured on a socketpair with testing.AllocsPerRun), where the loops'
// path allocates nothing.
func Recv(fd int, b []byte) (int, error) {
	p := bufPtr(b)
	r, _, e := unix.Syscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(p), uintptr(len(b)), 0, 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

// Send writes b to a socket (see Recv).
func Send(fd int, b []byte) (int, error) {
	p := bufPtr(b)
	r, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(p), uintptr(len(b)), unix.MSG_NOSIGNAL, 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

// RecvRaw and SendRaw are Recv and Send made without telling the Go
// scheduler (RawSyscall): on a non-blocking socket they never block, and
// the scheduler's bookkeeping of a system call is what costs. A goroutine
// entering a system call wakes the runtime's monitor (sysmon) when it
// sleeps, which it does whenever the process was idle for a moment, and
// the monitor, woken, polls every 20 µs for the next millisecond; with
// GOMAXPROCS=1 it also hands the P of a goroutine still in its call at
// the next poll to another thread. Measured on the h2 relay (docs/
// benchmarks.md, "The h2 relay's socket calls"): at 2,000 gRPC calls/s,
// 20 % of the proxy's CPU samples were the monitor's wake-ups. The event
// loops keep Recv and Send: they spend their waits in epoll_wait, a
// system call the scheduler must know of, and are tuned around it
// (loop.yieldEvery).
func RecvRaw(fd int, b []byte) (int, error) {
	p := bufPtr(b)
	r, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(p), uintptr(len(b)), 0, 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

// SendRaw is Send without telling the scheduler (see RecvRaw).
func SendRaw(fd int, b []byte) (int, error) {
	p := bufPtr(b)
	r, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(p), uintptr(len(b)), unix.MSG_NOSIGNAL, 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

var zeroByte byte

// bufPtr is b's first byte, for a system call: converted to uintptr in the
// call's own expression (unsafe.Pointer's rule 4), as x/sys/unix does.
func bufPtr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return unsafe.Pointer(&zeroByte)
	}
	return unsafe.Pointer(&b[0])
}

// WriteSome writes b to a non-blocking socket until it is all sent or the
// socket is full; it returns what is left for EPOLLOUT. On an error, rest
// is what the socket did not take: a caller counting the bytes that left
// (policy.MayResend: a pooled connection whose write failed before any
// byte left may carry the request again) must not count it. (Before issue
// 25's test of that path, rest was nil on an error: a keyless POST whose
// first write failed with EPIPE counted as sent and was answered 502.)
func WriteSome(fd int, b []byte) (rest []byte, err error) {
	for len(b) > 0 {
		n, err := Send(fd, b)
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
