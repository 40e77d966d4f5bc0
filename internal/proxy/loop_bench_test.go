//go:build linux

package proxy

import (
	"bufio"
	"bytes"
	"net"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/valyala/fasthttp"
)

// BenchmarkLoopForward is one keep-alive client sending GETs through the
// event loop to a fasthttp backend on loopback: the whole path with the
// client's and the upstream's socket I/O. The client and the backend do
// not allocate per request, so allocs/op is the proxy's.
func BenchmarkLoopForward(b *testing.B) {
	p := benchLoopRequests(b, []byte("GET http://backend/ HTTP/1.1\r\nHost: backend\r\nRetrycap-Budget: 3\r\n\r\n"))
	if n := testutil.CollectAndCount(p.m.Handoffs); n != 0 {
		b.Fatalf("%d hand-off reasons counted: the loop did not serve every request", n)
	}
}

// benchLoopRequests sends req b.N times over one keep-alive connection through a loop-engine
// proxy (args added to the deployed defaults) to a fasthttp backend answering "ok", reading each
// answer whole; it returns the proxy, timer stopped, for the caller's checks.
func benchLoopRequests(b *testing.B, req []byte, args ...string) *Proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("ok") }}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Shutdown() })
	// The retry budget and breaker as deployed (their defaults), not the
	// tests' permissive settings: this is the sidecar's path.
	p := startProxyOn(b, "loop", append([]string{"--upstreams", "backend=3", "--resolve", "backend=" + ln.Addr().String(), "--chain-cap", "4",
		"--breaker-failures", "50", "--budget-percent", "20", "--budget-min-per-second", "10"}, args...)...)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	br := bufio.NewReaderSize(c, 4096)
	want := []byte("\r\n\r\nok")
	buf := make([]byte, 4096)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		// The answer is small: read until its head and the 2-byte body.
		n := 0
		for !bytes.HasSuffix(buf[:n], want) {
			m, err := br.Read(buf[n:])
			if err != nil {
				b.Fatalf("after %q: %v", buf[:n], err)
			}
			n += m
		}
		if !bytes.HasPrefix(buf[:n], []byte("HTTP/1.1 200 ")) {
			b.Fatalf("answer %q", buf[:n])
		}
	}
	b.StopTimer()
	return p
}
