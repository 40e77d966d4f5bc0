//go:build linux

package loop

import (
	"errors"
	"io"
	"net"
	"os"

	"github.com/valyala/fasthttp"
	"golang.org/x/sys/unix"

	"github.com/retrycap/retrycap/internal/proxy/forward"
	"github.com/retrycap/retrycap/internal/proxy/netpoll"
)

// upConn is a connection to an upstream, owned by one loop: serving one
// attempt, or idle in the loop's pool for its target.
type upConn struct {
	l       *evLoop
	fd      int
	target  string
	addr    *net.TCPAddr
	cl      *call  // the attempt it serves; nil when idle
	out     []byte // request bytes the socket did not take yet
	in      []byte // response bytes read so far (when not all in one read)
	interim int    // 1xx answers skipped
	got     int    // bytes read for the attempt it serves (0: no byte of an answer yet)
	// sent: bytes of the attempt's request the socket took (0: none left
	// for the upstream; the request provably never reached it).
	sent       int
	connecting bool
	closed     bool
	idleSince  int64 // when it went back to the pool
	// hup: the upstream closed its end. An answer that came with that end
	// is its last: pooled, the connection would fail the next request, and
	// epoll (edge-triggered) would not report the end again.
	hup bool
}

// send writes the call's request.
func (uc *upConn) send(cl *call) {
	l := uc.l
	uc.cl, cl.uc = cl, uc
	uc.in, uc.interim, uc.got, uc.sent = uc.in[:0], 0, 0, 0
	// The request URI goes upstream as the client sent it, as the other
	// engine's clients send it (DisablePathNormalizing): /./, // and
	// escapes such as %2F or %7E are not rewritten.
	cl.req.URI().DisablePathNormalizing = true
	err := l.render(forward.RequestWriter{R: &cl.req})
	if err != nil {
		cl.failed(err)
		return
	}
	if uc.connecting {
		uc.out = append(uc.out[:0], l.wbuf.b...)
		return
	}
	uc.write(l.wbuf.b)
}

func (uc *upConn) write(b []byte) {
	rest, err := netpoll.WriteSome(uc.fd, b)
	uc.sent += len(b) - len(rest)
	if err != nil {
		uc.cl.failed(&net.OpError{Op: "write", Net: "tcp", Addr: uc.addr, Err: os.NewSyscallError("write", err)})
		return
	}
	uc.out = append(uc.out[:0], rest...)
}

func (uc *upConn) Event(ev uint32) {
	if uc.closed {
		return
	}
	if uc.connecting {
		if ev&(unix.EPOLLOUT|unix.EPOLLERR|unix.EPOLLHUP) == 0 {
			return
		}
		uc.connecting = false
		soErr, err := unix.GetsockoptInt(uc.fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err == nil && soErr != 0 {
			err = unix.Errno(soErr) //nolint:gosec // an errno
		}
		if err != nil {
			if uc.cl != nil {
				uc.cl.connectFailed(uc, &forward.DialError{Err: &net.OpError{Op: "dial", Net: "tcp", Addr: uc.addr, Err: os.NewSyscallError("connect", err)}})
			} else {
				uc.close()
			}
			return
		}
		if len(uc.out) > 0 {
			out := uc.out
			uc.out = uc.out[:0]
			uc.write(out)
			if uc.closed {
				return
			}
		}
	} else if ev&unix.EPOLLOUT != 0 && len(uc.out) > 0 && uc.cl != nil {
		out := uc.out
		uc.out = uc.out[:0]
		uc.write(out)
		if uc.closed {
			return
		}
	}
	if ev&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		// When the upstream has also closed, read on to the end: edge
		// triggering will not report that end again.
		hup := ev&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0
		uc.hup = uc.hup || hup
		uc.read(hup)
	}
}

// read takes what the upstream sent (toEnd: until the end of the stream). An idle connection that becomes
// readable was closed by the upstream (or sent bytes nobody asked for):
// it leaves the pool.
func (uc *upConn) read(toEnd bool) {
	l := uc.l
	for {
		n, err := netpoll.Recv(uc.fd, l.buf)
		if n > 0 {
			if uc.cl == nil {
				uc.close()
				return
			}
			uc.got += n
			data := l.buf[:n]
			if len(uc.in) > 0 || n == len(l.buf) {
				uc.in = append(uc.in, data...)
				data = uc.in
			}
			if uc.parse(data) || (n < len(l.buf) && !toEnd) {
				return
			}
			continue
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EAGAIN) {
			return
		}
		if uc.cl == nil {
			uc.close()
			return
		}
		if err == nil {
			err = io.ErrUnexpectedEOF
		} else {
			err = &net.OpError{Op: "read", Net: "tcp", Addr: uc.addr, Err: os.NewSyscallError("read", err)}
		}
		uc.cl.failed(forward.ClosedEarly(err))
		return
	}
}

// parse reads the response in data (everything received for this attempt
// so far). It returns true when the attempt is over (answered, failed, or
// streaming), false when more bytes are needed.
func (uc *upConn) parse(data []byte) bool {
	l, cl := uc.l, uc.cl
	resp := &cl.resp
	var head []byte // from the final answer's status line
	for {
		head = data
		end, refuse := forward.CheckAnswerHead(data)
		if end < 0 {
			if len(data) > forward.MaxResponseHead {
				cl.failed(forward.ErrAnswerHeadTooLarge)
				return true
			}
			uc.keep(data)
			return false
		}
		if end > forward.MaxResponseHead {
			cl.failed(forward.ErrAnswerHeadTooLarge)
			return true
		}
		if refuse != nil {
			cl.failed(refuse)
			return true
		}
		err := resp.Header.Read(l.parseAnswer.Reader(data[:end]))
		if err != nil {
			if id, ok := forward.IdentityAnswer(data[:end]); ok {
				// Transfer-Encoding: identity, refused by the parser:
				// read without its framing fields, to the close.
				err = resp.Header.Read(l.parseAnswer.Reader(id))
			}
		}
		if err != nil {
			// The whole head is here: a head the parser refuses is the
			// upstream's bad answer, not a transport failure.
			cl.failed(forward.AnswerParseError(err, data[:end]))
			return true
		}
		forward.DropTrailerField(&resp.Header)
		skip, err := forward.Interim(resp.StatusCode(), uc.interim)
		if err != nil {
			cl.failed(err)
			return true
		}
		if skip {
			if b := cl.x.Interim(resp.StatusCode(), data[:end]); b != nil {
				// Passed on to the client now: the connection has no
				// earlier answer pending (a call starts only once the
				// previous answer is out).
				cl.c.interim(b)
			}
		}
		data = data[end:]
		if !skip {
			break
		}
		// An interim 1xx answer: passed on or skipped.
		uc.interim++
	}
	st := resp.StatusCode()
	if st == fasthttp.StatusSwitchingProtocols {
		// An upgrade is never served here (handed off): nobody asked.
		cl.failed(forward.ErrUnsolicitedSwitch)
		return true
	}
	reusable := !cl.req.Header.ConnectionClose() && !resp.ConnectionClose()
	if cl.req.Header.IsHead() || st < 200 || st == fasthttp.StatusNoContent || st == fasthttp.StatusNotModified {
		resp.SkipBody = true
		uc.done(reusable && len(data) == 0 && st >= 200)
		return true
	}
	n := resp.Header.ContentLength()
	if n < 0 || n > forward.BufferedBodyMax {
		// Chunked, delimited by the end of the connection, or large: the
		// body streams from a goroutine.
		uc.stream(data, n)
		return true
	}
	if len(data) < n {
		// The body is not all here: keep the answer from its status line
		// and parse its head again with the rest (cheap, and rare).
		uc.keep(head)
		return false
	}
	resp.SetBody(data[:n])
	uc.done(reusable && len(data) == n)
	return true
}

// keep saves a partial response for the next read.
func (uc *upConn) keep(data []byte) {
	// data is empty after interim answers that ended the bytes read so
	// far (&data[0] would panic): nothing to keep.
	if len(uc.in) == 0 || len(data) == 0 || &uc.in[0] != &data[0] {
		uc.in = append(uc.in[:0], data...)
	}
}

// done: the response is complete. The connection goes back to the pool,
// or is closed when either side asked for that or it sent more than asked.
func (uc *upConn) done(reusable bool) {
	cl := uc.cl
	uc.cl, cl.uc = nil, nil
	if cap(uc.in) > 16<<10 {
		uc.in = nil
	}
	uc.in = uc.in[:0]
	// An answer that came before the whole request was sent (an early
	// 401 to an upload): the rest of the request is never sent, so the
	// upstream would read the next request on this connection as the rest
	// of this one's body.
	if len(uc.out) > 0 {
		reusable = false
	}
	if reusable && !uc.hup && !uc.l.draining {
		uc.l.release(uc)
	} else {
		uc.close()
	}
	cl.after(nil)
}

func (uc *upConn) close() {
	if uc.closed {
		return
	}
	uc.closed = true
	if uc.cl != nil {
		uc.cl.uc = nil
		uc.cl = nil
	}
	uc.l.poll.CloseFd(uc.fd)
}
