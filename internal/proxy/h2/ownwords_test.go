package h2

import (
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestOwnWordsNoAuthority: a request without :authority is refused 400 in
// the words of HTTP/1.1's "request has no host": no upstream was tried, so
// none is named (before: "retrycap-proxy: upstream unknown: request has
// no :authority", as if the catch-all had been).
func TestOwnWordsNoAuthority(t *testing.T) {
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: "127.0.0.1:1", attempts: 1, perTry: 10 * time.Second})
	c := dialHostile(t, serveDirect(t, h, ""))
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.block(":method", "GET", ":scheme", "http", ":path", "/"), EndHeaders: true, EndStream: true}); err != nil {
		t.Fatal(err)
	}
	heads, data, rst := c.readStream(1)
	const want = "retrycap-proxy: request has no :authority\n"
	if rst != -1 || len(heads) != 1 || field(heads[0], ":status") != "400" || string(data) != want {
		t.Fatalf("reset %d, headers %s, body %q; want 400 %q", rst, brief(heads...), data, want)
	}
}
