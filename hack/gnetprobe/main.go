package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"

	"github.com/panjf2000/gnet/v2"
)

const maxHead = 64 << 10 // a request or response head larger than this is refused

var crlf2 = []byte("\r\n\r\n")

// client is the state of one client connection; upstream, of one backend
// connection. Both live on one event loop and are touched only from it.
type client struct {
	conn       gnet.Conn
	loop       *loopState
	up         *upstream // the backend connection of the request in flight
	head       bool      // the request in flight is a HEAD
	closeAfter bool      // close once the response is written
	closed     bool
	line       []byte // scratch for the origin-form request line
}

type upstream struct {
	conn      gnet.Conn // nil while dialling
	client    *client   // nil when idle
	pending   []byte    // request to send once the connection opens
	streaming bool      // response delimited by the connection's close
}

type loopState struct{ idle []*upstream }

type proxy struct {
	gnet.BuiltinEventEngine
	backend net.Addr
	loops   sync.Map // gnet.EventLoop -> *loopState
}

func main() {
	listen := flag.String("listen", "127.0.0.1:18085", "HOST:PORT to serve on")
	backend := flag.String("backend", "127.0.0.1:18080", "HOST:PORT every request goes to")
	flag.Parse()
	addr, err := net.ResolveTCPAddr("tcp", *backend)
	if err == nil {
		err = gnet.Run(&proxy{backend: addr}, "tcp://"+*listen,
			gnet.WithMulticore(true), gnet.WithNumEventLoop(runtime.GOMAXPROCS(0)),
			gnet.WithTCPNoDelay(gnet.TCPNoDelay))
	}
	fmt.Fprintf(os.Stderr, "gnetprobe: %v\n", err)
	os.Exit(1)
}

func (p *proxy) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	if u, ok := c.Context().(*upstream); ok { // a backend connection we registered
		u.conn = c
		if u.client == nil { // its client went away while it was dialling
			p.release(u)
			return nil, gnet.None
		}
		out := u.pending
		u.pending = nil
		return out, gnet.None
	}
	ls, _ := p.loops.LoadOrStore(c.EventLoop(), &loopState{})
	c.SetContext(&client{conn: c, loop: ls.(*loopState)})
	return nil, gnet.None
}

func (p *proxy) OnTraffic(c gnet.Conn) gnet.Action {
	switch s := c.Context().(type) {
	case *client:
		return p.serve(s)
	case *upstream:
		return p.relay(s)
	}
	return gnet.Close
}

func (p *proxy) OnClose(c gnet.Conn, _ error) gnet.Action {
	switch s := c.Context().(type) {
	case *client:
		s.closed = true
		if u := s.up; u != nil {
			u.client, s.up = nil, nil
			if u.conn != nil { // a response may be under way: drop the connection
				_ = u.conn.Close()
			}
		}
	case *upstream:
		idle := s.client == nil
		for i, u := range p.loopOf(c).idle {
			if u == s {
				ls := p.loopOf(c)
				ls.idle = append(ls.idle[:i], ls.idle[i+1:]...)
				break
			}
		}
		if !idle {
			p.fail(s)
		}
	}
	return gnet.None
}

func (p *proxy) loopOf(c gnet.Conn) *loopState {
	ls, _ := p.loops.LoadOrStore(c.EventLoop(), &loopState{})
	return ls.(*loopState)
}

// serve forwards the client's next complete request, if there is one and
// none is in flight.
func (p *proxy) serve(cl *client) gnet.Action {
	if cl.up != nil || cl.closed {
		return gnet.None
	}
	buf, _ := cl.conn.Peek(0)
	end := bytes.Index(buf, crlf2)
	if end < 0 {
		if len(buf) > maxHead {
			return p.reply(cl, "431 Request Header Fields Too Large", true)
		}
		return gnet.None
	}
	nl := bytes.IndexByte(buf, '\n')
	method, rest, ok1 := bytes.Cut(bytes.TrimRight(buf[:nl], "\r"), []byte(" "))
	target, version, ok2 := bytes.Cut(rest, []byte(" "))
	bodyLen, chunked, closeHdr, ok3 := scanHeaders(buf[nl+1 : end+2])
	if !ok1 || !ok2 || !ok3 {
		return p.reply(cl, "400 Bad Request", true)
	}
	if chunked {
		return p.reply(cl, "411 Length Required", true)
	}
	total := end + 4 + max(bodyLen, 0)
	if len(buf) < total {
		return gnet.None
	}
	if after, found := bytes.CutPrefix(target, []byte("http://")); found {
		target = []byte("/")
		if i := bytes.IndexByte(after, '/'); i >= 0 {
			target = after[i:]
		}
	}
	cl.line = append(append(append(append(append(cl.line[:0], method...), ' '), target...), ' '), version...)
	cl.line = append(cl.line, "\r\n"...)
	cl.head = string(method) == "HEAD"
	cl.closeAfter = closeHdr || string(version) == "HTTP/1.0"
	parts := [][]byte{cl.line, buf[nl+1 : total]}

	ls := cl.loop
	if n := len(ls.idle); n > 0 {
		u := ls.idle[n-1]
		ls.idle = ls.idle[:n-1]
		u.client, cl.up = cl, u
		_, _ = u.conn.Writev(parts) // on error gnet closes u, and OnClose answers 502
	} else {
		u := &upstream{client: cl, pending: append(append([]byte(nil), parts[0]...), parts[1]...)}
		cl.up = u
		el := cl.conn.EventLoop()
		ch, err := el.Register(gnet.NewContext(context.Background(), u), p.backend)
		if err != nil {
			cl.up = nil
			_, _ = cl.conn.Discard(total)
			return p.reply(cl, "502 Bad Gateway", false)
		}
		go func() { // a failed dial never reaches the loop's callbacks
			if r := <-ch; r.Err != nil {
				_ = el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
					p.fail(u)
					return nil
				}))
			}
		}()
	}
	_, _ = cl.conn.Discard(total)
	return gnet.None
}

// relay passes the backend's response back to its client once complete.
func (p *proxy) relay(u *upstream) gnet.Action {
	c := u.conn
	buf, _ := c.Peek(0)
	cl := u.client
	if cl == nil {
		return gnet.Close // bytes on an idle connection: not ours to keep
	}
	if u.streaming {
		_, _ = cl.conn.Write(buf)
		_, _ = c.Discard(len(buf))
		return gnet.None
	}
	end := bytes.Index(buf, crlf2)
	if end < 0 {
		if len(buf) > maxHead {
			u.client, cl.up = nil, nil
			p.reply(cl, "502 Bad Gateway", true)
			return gnet.Close
		}
		return gnet.None
	}
	bodyLen, chunked, closeHdr, ok := scanHeaders(buf[bytes.IndexByte(buf, '\n')+1 : end+2])
	code := 0
	if len(buf) >= 12 {
		code = int(buf[9]-'0')*100 + int(buf[10]-'0')*10 + int(buf[11]-'0')
	}
	if !ok || code < 100 || code > 999 || code == 101 {
		u.client, cl.up = nil, nil
		p.reply(cl, "502 Bad Gateway", true)
		return gnet.Close
	}
	total := end + 4
	switch {
	case cl.head || code < 200 || code == 204 || code == 304:
	case chunked:
		n := chunkedLen(buf[total:])
		if n < 0 {
			return gnet.None
		}
		total += n
	case bodyLen >= 0:
		total += bodyLen
	default: // delimited by the close: stream it
		u.streaming = true
		cl.closeAfter = true
		total = len(buf)
	}
	if len(buf) < total {
		return gnet.None
	}
	_, _ = cl.conn.Write(buf[:total])
	_, _ = c.Discard(total)
	if u.streaming {
		return gnet.None
	}
	if code < 200 { // an interim response: the final one follows
		return p.relay(u)
	}
	u.client, cl.up = nil, nil
	action := gnet.None
	if closeHdr {
		action = gnet.Close
	} else {
		p.release(u)
	}
	if cl.closeAfter {
		_ = cl.conn.Close()
	} else if cl.conn.InboundBuffered() > 0 {
		p.serve(cl)
	}
	return action
}

func (p *proxy) release(u *upstream) {
	ls := p.loopOf(u.conn)
	ls.idle = append(ls.idle, u)
}

// fail ends a request whose backend connection failed or closed early.
func (p *proxy) fail(u *upstream) {
	cl := u.client
	if cl == nil || cl.up != u {
		return
	}
	u.client, cl.up = nil, nil
	if u.streaming {
		_ = cl.conn.Close()
		return
	}
	p.reply(cl, "502 Bad Gateway", false)
}

func (p *proxy) reply(cl *client, status string, closeConn bool) gnet.Action {
	if cl.closed {
		return gnet.Close
	}
	_, _ = cl.conn.Write([]byte("HTTP/1.1 " + status + "\r\nContent-Length: 0\r\n\r\n"))
	if closeConn || cl.closeAfter {
		_ = cl.conn.Close()
		return gnet.Close
	}
	return gnet.None
}

// scanHeaders reads the fields this probe needs: Content-Length (-1 when
// absent), chunked Transfer-Encoding and Connection: close.
func scanHeaders(h []byte) (bodyLen int, chunked, closeConn, ok bool) {
	bodyLen = -1
	for len(h) > 0 {
		line := h
		if i := bytes.IndexByte(h, '\n'); i >= 0 {
			line, h = h[:i], h[i+1:]
		} else {
			h = nil
		}
		name, value, found := bytes.Cut(bytes.TrimRight(line, "\r"), []byte(":"))
		if !found {
			return 0, false, false, false
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, valid := atoi(value)
			if !valid || (bodyLen >= 0 && n != bodyLen) {
				return 0, false, false, false
			}
			bodyLen = n
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.Contains(bytes.ToLower(value), []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			closeConn = closeConn || bytes.Contains(bytes.ToLower(value), []byte("close"))
		}
	}
	return bodyLen, chunked, closeConn, true
}

// chunkedLen is the length of a complete chunked body at the start of b
// (chunks, last chunk, trailers), or -1 if b does not hold all of it yet.
func chunkedLen(b []byte) int {
	n := 0
	for {
		i := bytes.IndexByte(b[n:], '\n')
		if i < 0 {
			return -1
		}
		size := 0
		for _, ch := range b[n : n+i] {
			d := hexDigit(ch)
			if d < 0 {
				break // extension, ';' or '\r'
			}
			size = size<<4 | d
		}
		n += i + 1
		if size == 0 { // trailers up to an empty line
			for {
				j := bytes.IndexByte(b[n:], '\n')
				if j < 0 {
					return -1
				}
				empty := j == 0 || (j == 1 && b[n] == '\r')
				n += j + 1
				if empty {
					return n
				}
			}
		}
		n += size + 2
		if n > len(b) {
			return -1
		}
	}
}

func hexDigit(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

func atoi(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 12 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
