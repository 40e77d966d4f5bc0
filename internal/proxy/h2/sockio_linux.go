//go:build linux

package h2

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/retrycap/retrycap/internal/proxy/netpoll"
)

// sockReader reads a TCP socket through its syscall.RawConn with
// netpoll.RecvRaw: Go's poller still parks the reader while the socket is
// empty and keeps the read deadline, but a read that finds data makes no
// system call the scheduler is told of (netpoll.RecvRaw says why that
// matters). Its errors are worded as net.Conn's, so logs read the same.
type sockReader struct {
	c   net.Conn
	rc  syscall.RawConn
	p   []byte
	n   int
	err error
	fn  func(fd uintptr) bool // recv, made once (a method value per read would allocate)
}

// newSockReader reads c's socket directly when c is one (not a wrapper
// around one: a wrapper may hold bytes of its own, or be TLS), else nil.
func newSockReader(c net.Conn) *sockReader {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	r := &sockReader{c: c, rc: rc}
	r.fn = r.recv
	return r
}

func (r *sockReader) recv(fd uintptr) bool {
	for {
		n, err := netpoll.RecvRaw(int(fd), r.p)
		switch {
		case err == nil:
			r.n = n
			return true
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return false // the poller waits for data (or the deadline)
		default:
			r.err = os.NewSyscallError("read", err)
			return true
		}
	}
}

func (r *sockReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.p, r.n, r.err = p, 0, nil
	err := r.rc.Read(r.fn)
	r.p = nil
	if err == nil {
		err = r.err
	}
	switch {
	case err != nil:
		return 0, &net.OpError{Op: "read", Net: r.c.LocalAddr().Network(), Source: r.c.LocalAddr(), Addr: r.c.RemoteAddr(), Err: err}
	case r.n == 0:
		return 0, io.EOF
	}
	return r.n, nil
}

// sockWrite is one non-blocking write(2) for batchConn.tryWrite, made
// without telling the scheduler (netpoll.SendRaw).
func sockWrite(fd uintptr, p []byte) (int, error) { return netpoll.SendRaw(int(fd), p) }

// peerClosed reports whether c's peer has closed its end, whether or not
// the connection's reader has read up to it (netpoll.PeerClosed), as the
// loop engine looks at a pooled connection before a request that may not
// be sent twice (engine/loop idleEnded).
func peerClosed(c net.Conn) bool { return netpoll.PeerClosed(c) }
