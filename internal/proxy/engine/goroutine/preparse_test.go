package goroutine

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/retrycap/retrycap/internal/proxy/forward"
)

// splitConn is a client connection that brings a fixed wire k bytes per
// read (then the end of stream), and records what is written to it.
type splitConn struct {
	wire []byte
	k    int
	out  bytes.Buffer
}

func (c *splitConn) Read(p []byte) (int, error) {
	if len(c.wire) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.k)], c.wire)
	c.wire = c.wire[n:]
	return n, nil
}

func (c *splitConn) Write(p []byte) (int, error)      { return c.out.Write(p) }
func (c *splitConn) Close() error                     { return nil }
func (c *splitConn) LocalAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
func (c *splitConn) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2} }
func (c *splitConn) SetDeadline(time.Time) error      { return nil }
func (c *splitConn) SetReadDeadline(time.Time) error  { return nil }
func (c *splitConn) SetWriteDeadline(time.Time) error { return nil }

// The pre-parser follows a pipeline of requests (no body, a Content-Length
// body, a chunked one with an extension and a trailer, each body holding
// bytes shaped like a bare-LF head) through fasthttp's server, the wire
// cut into reads of every size from 1 byte to all of it: the requests are
// answered, in order, and the bare-LF head (or a chunked request's
// bare-LF trailers) that ends the wire gets forward.MalformedAnswer,
// whatever the cut; without it, the answers only.
func TestHeadConnEverySplit(t *testing.T) {
	fake := "GET /f HTTP/1.1\nHost: f\n\n"
	requests := "GET /a HTTP/1.1\r\nHost: a\r\n\r\n" +
		"POST /b HTTP/1.1\r\nHost: a\r\nContent-Length: 25\r\n\r\n" + fake +
		"POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"5;x=y\r\nGET /\r\n14\r\nf HTTP/1.1\nHost: f\n\n\r\n0\r\nX-T: 1\r\n\r\n" +
		"GET /d HTTP/1.1\r\nHost: a\r\n\r\n"
	ok := "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	refusal := string(forward.MalformedAnswer("a line ends in a bare LF"))
	for _, c := range []struct {
		name, wire, want string
	}{
		{"ending in a bare-LF head", requests + "GET /lf HTTP/1.1\r\nHost: a\n\r\n", strings.Repeat(ok, 4) + refusal},
		{"ending in a request", requests, strings.Repeat(ok, 4)},
		{"ending in bare-LF trailers", requests + "POST /t HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nX-T: 1\n\r\n", strings.Repeat(ok, 4) + refusal},
		// A chunk line of 4 KiB (Go's maxLineLength, with its CRLF) is
		// refused; one byte less passes.
		{"ending in a 4 KiB chunk line", requests + "POST /t HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2;" + strings.Repeat("e", 4096-4) + "\r\nhi\r\n0\r\n\r\n",
			strings.Repeat(ok, 4) + string(forward.MalformedAnswer("a chunk line longer than 4 KiB"))},
		{"ending in a chunk line of 4 KiB less one", requests + "POST /t HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2;" + strings.Repeat("e", 4096-5) + "\r\nhi\r\n0\r\n\r\n",
			strings.Repeat(ok, 5)},
		{"ending in a bare-LF empty line after the last chunk", requests + "POST /t HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\n", strings.Repeat(ok, 4) + refusal},
	} {
		for k := 1; k <= len(c.wire); k++ {
			var bodies []string
			srv := &fasthttp.Server{
				Handler: func(ctx *fasthttp.RequestCtx) {
					servedRequest(ctx.Conn())
					bodies = append(bodies, string(ctx.Path())+"="+string(ctx.Request.Body()))
					ctx.SetBodyString("ok")
				},
				// The engine's error handler's answer to refused trailers (requestError).
				ErrorHandler: func(ctx *fasthttp.RequestCtx, err error) {
					if why := bodyRefusedWhy(ctx.Conn()); why != "" {
						refuseParsed(ctx, why)
						return
					}
					ctx.Error("unexpected: "+err.Error(), fasthttp.StatusBadRequest)
				},
				NoDefaultServerHeader: true, NoDefaultContentType: true, NoDefaultDate: true,
				ReadBufferSize: 8192, Logger: discard{},
			}
			sc := &splitConn{wire: []byte(c.wire), k: k}
			_ = srv.ServeConn(newHeadConn(sc))
			if got := sc.out.String(); got != c.want {
				t.Fatalf("%s, reads of %d bytes: the client got\n%q\nwant\n%q", c.name, k, got, c.want)
			}
			want := "/a= /b=" + fake + " /c=GET /f HTTP/1.1\nHost: f\n\n /d="
			if strings.Count(c.want, ok) == 5 {
				want += " /t=hi"
			}
			if strings.Join(bodies, " ") != want {
				t.Fatalf("%s, reads of %d bytes: the handler got %q, want %q", c.name, k, bodies, want)
			}
		}
	}
}

type discard struct{}

func (discard) Printf(string, ...any) {}

func TestChunkSize(t *testing.T) {
	for _, c := range []struct {
		line string
		size int64
		ok   bool
	}{
		{"5\r\n", 5, true},
		{"1a\r\n", 26, true},
		{"FF;ext=1\r\n", 255, true},
		{"0\r\n", 0, true},
		{"10 \r\n", 16, true},
		{"\r\n", 0, false},
		{"x\r\n", 0, false},
		{"5\n", 0, false},
		{"1234567890abcdef\r\n", 0, false}, // beyond what a body may be
	} {
		size, ok := chunkSize([]byte(c.line))
		if size != c.size || ok != c.ok {
			t.Errorf("chunkSize(%q) = %d, %t; want %d, %t", c.line, size, ok, c.size, c.ok)
		}
	}
}

// reqConn brings n copies of req, one per read (a keep-alive client
// waiting for each answer), and discards what is written.
type reqConn struct {
	splitConn
	req []byte
	n   int
}

func (c *reqConn) Read(p []byte) (int, error) {
	if c.n == 0 {
		return 0, io.EOF
	}
	c.n--
	return copy(p, c.req), nil
}

func (c *reqConn) Write(p []byte) (int, error) { return len(p), nil }

// BenchmarkHeadConn is fasthttp's server serving keep-alive GETs (the
// bench's request, one per read), without and with the pre-parser: its
// cost per request, next to the whole proxy's (docs/benchmarks.md).
func BenchmarkHeadConn(b *testing.B) {
	req := []byte("GET http://backend/ HTTP/1.1\r\nHost: backend\r\n\r\n")
	for _, wrap := range []bool{false, true} {
		b.Run(map[bool]string{false: "fasthttp", true: "fasthttp+headConn"}[wrap], func(b *testing.B) {
			srv := &fasthttp.Server{
				Handler: func(ctx *fasthttp.RequestCtx) {
					servedRequest(ctx.Conn())
					ctx.SetBodyString("ok")
				},
				NoDefaultServerHeader: true, NoDefaultContentType: true, NoDefaultDate: true,
				ReadBufferSize: 8192, Logger: discard{},
			}
			var c net.Conn = &reqConn{req: req, n: b.N}
			if wrap {
				c = newHeadConn(c)
			}
			b.ReportAllocs()
			b.ResetTimer()
			_ = srv.ServeConn(c)
		})
	}
}

// BenchmarkHeadConnRead is the pre-parser alone: one keep-alive GET per
// read, served before the next (what fasthttp's server does around it).
func BenchmarkHeadConnRead(b *testing.B) {
	req := []byte("GET http://backend/ HTTP/1.1\r\nHost: backend\r\n\r\n")
	c := newHeadConn(&reqConn{req: req, n: b.N})
	p := make([]byte, 8192)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if n, err := c.Read(p); n != len(req) || err != nil {
			b.Fatalf("read %d, %v", n, err)
		}
		servedRequest(c)
	}
}
