package goroutine

import (
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/retrycap/retrycap/internal/proxy/forward"
)

// TestHeadConnHoldsAfterPossibleTunnel: a request that may become a tunnel
// (Upgrade, CONNECT) does not end the pre-parser's scan, whatever the
// cut of the wire into reads: if its handler does not make it a tunnel,
// what follows is scanned as requests (a chunk line of 4 KiB is refused);
// if it does (stopScan, then Hijack), what follows passes unread (a
// bare-LF head inside the tunnel is data). Empty lines before a request
// line do not end it either. Before, each of the first three got "ok"
// twice: the scan had stopped and the long chunk line was read.
func TestHeadConnHoldsAfterPossibleTunnel(t *testing.T) {
	flood := "POST /f HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2;" + strings.Repeat("e", 4096-4) + "\r\nhi\r\n0\r\n\r\n"
	ok := "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	refused := string(forward.MalformedAnswer("a chunk line longer than 4 KiB"))
	tunnelled := "GET /x HTTP/1.1\nHost: x\n\n"
	for _, c := range []struct{ name, wire, want string }{
		{"a refused upgrade", "GET /u HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n" + flood, ok + refused},
		{"a refused upgrade with a body", "POST /u HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nContent-Length: 3\r\n\r\nabc" + flood, ok + refused},
		{"two empty lines", "\r\n\r\n" + flood, refused},
		{"a tunnel", "GET /tunnel HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n" + tunnelled, "101 " + tunnelled},
	} {
		for k := 1; k <= len(c.wire); k += 1 + k/64 {
			hijacked := make(chan struct{})
			srv := &fasthttp.Server{
				Handler: func(ctx *fasthttp.RequestCtx) {
					servedRequest(ctx.Conn())
					if string(ctx.Path()) == "/tunnel" {
						stopScan(ctx.Conn())
						ctx.HijackSetNoResponse(true)
						ctx.Hijack(func(hc net.Conn) {
							defer close(hijacked)
							_, _ = hc.Write([]byte("101 "))
							buf := make([]byte, 64)
							for {
								n, err := hc.Read(buf)
								_, _ = hc.Write(buf[:n])
								if err != nil {
									return
								}
							}
						})
						return
					}
					ctx.SetBodyString("ok")
				},
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
			if strings.HasPrefix(c.want, "101 ") {
				<-hijacked // the hijack handler runs on a goroutine of its own
			}
			if got := sc.out.String(); got != c.want {
				t.Fatalf("%s, reads of %d bytes: the client got\n%q\nwant\n%q", c.name, k, got, c.want)
			}
		}
	}
}
