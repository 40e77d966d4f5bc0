package goroutine

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/retrycap/retrycap/internal/proxy/forward"
)

// upConn is an upstream connection as the engine dials it: it counts the
// bytes read of it and remembers when it last served, so that a pooled
// connection is never trusted blindly (forward.Stale): one idle longer than
// --upstream-idle-timeout, or whose end the upstream closed, is not reused,
// and a request that fails on a reused one before any byte of an answer came
// back is re-sent once on a fresh connection when no byte of it was written,
// or, replayable and written, repeated as the exchange's next attempt
// (forward.StaleError): it counts the bytes written of it too.
type upConn struct {
	net.Conn
	rc    syscall.RawConn // for the non-blocking look at the socket (nil: none)
	nread atomic.Int64
	// nwritten: bytes the socket took (written only by the goroutine
	// holding the connection for an exchange).
	nwritten int64
	// used: it served a request (it is a pooled connection when acquired
	// again); idleSince: when its last answer ended.
	used      bool
	idleSince time.Time
	// closedPeek is what peek found: the upstream's end is closed (EOF, a
	// reset, or bytes nobody asked for).
	closedPeek bool
	peekFn     func(fd uintptr) bool
}

func newUpConn(c net.Conn) *upConn {
	u := &upConn{Conn: c}
	if sc, ok := c.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			u.rc = rc
		}
	}
	u.peekFn = u.peek
	return u
}

func (u *upConn) Read(p []byte) (int, error) {
	n, err := u.Conn.Read(p)
	u.nread.Add(int64(n))
	return n, err
}

func (u *upConn) Write(p []byte) (int, error) {
	n, err := u.Conn.Write(p)
	u.nwritten += int64(n)
	return n, err
}

func (u *upConn) peek(fd uintptr) bool {
	// Anything on an idle keep-alive connection (EOF, a reset, stray bytes)
	// means it must not carry a request.
	u.closedPeek = idleEnded(fd)
	return true
}

// alive reports whether a pooled connection may carry a request: idle no
// longer than maxIdle, and its end not closed by the upstream.
func (u *upConn) alive(now time.Time, maxIdle time.Duration) bool {
	if now.Sub(u.idleSince) > maxIdle {
		return false
	}
	if u.rc == nil {
		return true
	}
	u.closedPeek = false
	if err := u.rc.Read(u.peekFn); err != nil {
		return false
	}
	return !u.closedPeek
}

// staleErr reports whether err, on a connection that had read nread bytes
// before the request was sent, is one the upstream's earlier close explains:
// no byte of an answer came back and it is not a timeout (a timeout means
// the request may be in the app's hands).
func staleErr(err error, readBefore, readNow int64) bool {
	if err == nil || readNow != readBefore {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, net.ErrClosed)
}

// pauseListener is the data listener of the goroutine engine: on descriptor
// exhaustion (EMFILE, ENFILE, and the kernel's ENOBUFS/ENOMEM) Accept pauses
// with a backoff instead of failing (fasthttp's server would exit on such an
// error: "Permanent error when accepting new connections"), logs once per
// interval and counts each pause; the connections already open are served
// on meanwhile.
type pauseListener struct {
	net.Listener
	e     *Engine
	f     *forward.Forwarder
	pause *forward.AcceptPause
}

func (l *pauseListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err == nil {
			if l.f.Reserve.Missing() && !l.f.Reserve.Take() {
				// The admin port's spare descriptor was taken meanwhile:
				// this connection's goes back to it. Not a resume: the
				// pause goes on growing (reset, it had this accept retry
				// every 10 ms, each time in the admin port's way).
				_ = c.Close()
				l.f.Reserve.Take()
				continue
			}
			l.pause.Resumed()
			// Read through the pre-parser (preparse.go), as every
			// connection the engine serves.
			return l.e.newHeadConn(c), nil
		}
		if !forward.Exhausted(err) {
			return nil, err
		}
		time.Sleep(l.pause.Paused(err))
	}
}
