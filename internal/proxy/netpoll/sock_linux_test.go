//go:build linux

package netpoll

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// Recv and Send replace read(2) and write(2) on the loops' sockets: each
// outcome the loops branch on must come back as it did (bytes, end of
// stream as 0 and no error, EAGAIN on an empty non-blocking socket, EPIPE
// for a peer gone, with no signal).
func TestRecvSend(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, b := fds[0], fds[1]
	defer unix.Close(a)
	buf := make([]byte, 16)
	if n, err := Recv(b, buf); n != -1 || !errors.Is(err, unix.EAGAIN) {
		t.Fatalf("empty socket: Recv = %d, %v; want -1, EAGAIN", n, err)
	}
	if n, err := Send(a, []byte("hello")); n != 5 || err != nil {
		t.Fatalf("Send = %d, %v; want 5, nil", n, err)
	}
	if n, err := Send(a, nil); n != 0 || err != nil {
		t.Fatalf("Send of nothing = %d, %v; want 0, nil", n, err)
	}
	if n, err := Recv(b, buf); n != 5 || err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("Recv = %d, %q, %v; want 5, hello, nil", n, buf[:max(n, 0)], err)
	}
	if err := unix.Shutdown(a, unix.SHUT_WR); err != nil {
		t.Fatal(err)
	}
	if n, err := Recv(b, buf); n != 0 || err != nil {
		t.Fatalf("after the peer's end: Recv = %d, %v; want 0, nil", n, err)
	}
	_ = unix.Close(b)
	// A peer gone: EPIPE, and no SIGPIPE (MSG_NOSIGNAL); the test process
	// would not see the signal (the runtime ignores it off stdout), so the
	// error is what is checked.
	if n, err := Send(a, []byte("x")); n != -1 || !errors.Is(err, unix.EPIPE) {
		t.Fatalf("to a closed peer: Send = %d, %v; want -1, EPIPE", n, err)
	}
	if rest, err := WriteSome(a, []byte("xyz")); !errors.Is(err, unix.EPIPE) || string(rest) != "xyz" {
		t.Fatalf("WriteSome to a closed peer = %q, %v; want the 3 bytes back, EPIPE", rest, err)
	}
	if n, err := Recv(-1, buf); n != -1 || !errors.Is(err, unix.EBADF) {
		t.Fatalf("Recv on a bad descriptor = %d, %v; want -1, EBADF", n, err)
	}
}
