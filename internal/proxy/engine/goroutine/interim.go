package goroutine

import (
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/retrycap/retrycap/internal/proxy/forward"
)

// interimSink passes the interim (1xx) answers of a call's attempts on to
// its client (forward.Exchange.Interim decides which), written straight to
// the client's connection ahead of fasthttp's writer: set only when every
// earlier answer on that connection went out (interimOK). It is used on
// the handler's goroutine, which the transport runs on.
type interimSink struct {
	x    *forward.Exchange
	conn net.Conn
}

// relay writes the interim answer of status st whose head is head, if it
// is passed on, within idle (a client that does not read holds the call
// no longer). A failed write may have left part of the 1xx on the
// connection, after which no answer would parse: the connection is
// closed (the answer's write then fails as for a client gone). s may be
// nil (nothing is passed on).
func (s *interimSink) relay(st int, head []byte, idle time.Duration) {
	if s == nil {
		return
	}
	b := s.x.Interim(st, head)
	if b == nil {
		return
	}
	_ = s.conn.SetWriteDeadline(time.Now().Add(idle))
	if _, err := s.conn.Write(b); err != nil {
		_ = s.conn.Close()
		return
	}
	_ = s.conn.SetWriteDeadline(time.Time{})
}

// interimOf is the sink of the call req belongs to (nil: none).
func (t *streamTransport) interimOf(req *fasthttp.Request) *interimSink {
	t.cutMu.Lock()
	defer t.cutMu.Unlock()
	return t.interims[req]
}

func (t *streamTransport) setInterim(req *fasthttp.Request, s *interimSink) {
	t.cutMu.Lock()
	defer t.cutMu.Unlock()
	if s == nil {
		delete(t.interims, req)
		return
	}
	if t.interims == nil {
		t.interims = make(map[*fasthttp.Request]*interimSink)
	}
	t.interims[req] = s
}
