package forward

import (
	"bufio"
	"bytes"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// The one-pass lookups (headers.go) must leave the headers exactly as
// looking every name up does, and read the same budget, baggage and key.
func TestSeenMatchesFullLookup(t *testing.T) {
	p := New(testConfig(), nil)
	requests := []string{
		"GET http://backend/ HTTP/1.1\r\nHost: backend\r\n\r\n",
		"GET http://backend/ HTTP/1.0\r\nHost: backend\r\n\r\n",
		"GET http://backend/ HTTP/1.0\r\nHost: backend\r\nConnection: keep-alive\r\n\r\n",
		"GET http://backend/ HTTP/1.1\r\nHost: backend\r\nConnection: close\r\n\r\n",
		"GET http://backend/ HTTP/1.1\r\nHost: backend\r\nconnection: X-Secret, keep-alive\r\nx-secret: s\r\nkeep-alive: timeout=5\r\n\r\n",
		"GET http://backend/ HTTP/1.1\r\nHost: backend\r\nTE: trailers\r\nPROXY-CONNECTION: keep-alive\r\nProxy-Authorization: Basic eA==\r\nProxy-Authenticate: x\r\n\r\n",
		"GET http://backend/ HTTP/1.1\r\nHost: backend\r\nretrycap-budget: 3\r\nRetrycap-Budget: 2\r\nbaggage: a=1\r\nBaggage: retrycap-budget=1\r\n\r\n",
		"GET http://backend/ HTTP/1.1\r\nHost: backend\r\nConnection: Retrycap-Budget, Idempotency-Key\r\nRetrycap-Budget: 3\r\nIdempotency-Key: k1\r\n\r\n",
		"POST http://backend/ HTTP/1.1\r\nHost: backend\r\nidempotency-key: k2\r\nContent-Length: 2\r\nCookie: a=b;c=d\r\n\r\nok",
		"POST http://backend/ HTTP/1.1\r\nHost: backend\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n2\r\nok\r\n0\r\nX-T: 1\r\n\r\n",
		"GET http://backend/ HTTP/1.1\r\nHost: backend\r\nX-A: Connection: close\r\nUpgrade-Insecure-Requests: 1\r\nTrailer: X-B\r\n\r\n",
	}
	for _, raw := range requests {
		var a, b fasthttp.Request
		for _, r := range []*fasthttp.Request{&a, &b} {
			if err := r.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
				t.Fatalf("%q: %v", raw, err)
			}
		}
		na, bagA, keyA := p.requestHeadersSeen(&a.Header, SeenAll, &Scratch{})
		nb, bagB, keyB := p.requestHeaders(&b.Header, &Scratch{})
		if na != nb || bagA != bagB || !bytes.Equal(keyA, keyB) {
			t.Errorf("%q: full lookup n=%d bag=%v key=%q, one pass n=%d bag=%v key=%q", raw, na, bagA, keyA, nb, bagB, keyB)
		}
		if ha, hb := a.Header.String(), b.Header.String(); ha != hb || a.Header.ConnectionClose() != b.Header.ConnectionClose() {
			t.Errorf("%q: full lookup leaves\n%q, one pass\n%q", raw, ha, hb)
		}
	}
	responses := []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nconnection: X-Hop\r\nx-hop: s\r\nKEEP-ALIVE: timeout=5\r\nUpgrade: h2c\r\nSet-Cookie: a=b\r\n\r\nok",
		"HTTP/1.1 503 Unavailable\r\nContent-Length: 2\r\nretrycap-exhausted: budget\r\nretry-after: 1\r\nProxy-Authenticate: x\r\nTe: y\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n2\r\nok\r\n0\r\nX-T: 1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTrailer: X-T\r\n\r\nok",
		// The Connection-only fast path (connectionOnlyAtEnd) and each case it leaves to the rebuild.
		"HTTP/1.1 200 OK\r\nServer: nginx\r\nDate: Tue, 01 Dec 2026 15:00:00 GMT\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nX-A: 1\r\nContent-Length: 2\r\nConnection: keep-alive\r\nconnection: close\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nX-A: 1\r\nX-A: 2\r\nX-B: 3\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nX-A: 1\r\nX-Hop: 2\r\nConnection: Keep-Alive, X-Hop\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nX-A: 1\r\nConnection: , close ,\r\nSet-Cookie: a=b\r\nContent-Length: 2\r\n\r\nok",
	}
	for _, raw := range responses {
		var a, b fasthttp.Response
		for _, r := range []*fasthttp.Response{&a, &b} {
			if err := r.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
				t.Fatalf("%q: %v", raw, err)
			}
		}
		found := ScanResponseHeaders(&b.Header)
		for _, k := range []struct {
			name string
			bit  Seen
		}{{"Retrycap-Exhausted", seenExhausted}, {"Retry-After", seenRetryAfter}} {
			if len(b.Header.Peek(k.name)) > 0 && found&k.bit == 0 {
				t.Errorf("%q: %s present, not seen", raw, k.name)
			}
		}
		stripResponseHopByHopSeen(&a.Header, SeenAll, &Scratch{})
		stripResponseHopByHop(&b.Header, &Scratch{})
		if ha, hb := a.Header.String(), b.Header.String(); ha != hb || a.Header.ConnectionClose() != b.Header.ConnectionClose() {
			t.Errorf("%q: full lookup leaves\n%q, one pass\n%q", raw, ha, hb)
		}
	}
}

// Either path deletes the Connection field and moves nothing (the fields as All yields them:
// the ones fasthttp keeps apart first).
func TestStripResponseConnectionAtEnd(t *testing.T) {
	for raw, want := range map[string]string{
		"HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Length: 2\r\nX-A: 1\r\nX-A: 2\r\nConnection: keep-alive\r\n\r\nok": "Content-Length: 2\r\nServer: nginx\r\nX-A: 1\r\nX-A: 2\r\n",
		"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nX-A: 1\r\nX-A: 2\r\nX-B: 3\r\nContent-Length: 2\r\n\r\nok":        "Content-Length: 2\r\nX-A: 1\r\nX-A: 2\r\nX-B: 3\r\n",
	} {
		var r fasthttp.Response
		if err := r.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		r.Header.SetNoDefaultContentType(true)
		stripResponseHopByHop(&r.Header, &Scratch{})
		got := ""
		for k, v := range r.Header.All() {
			got += string(k) + ": " + string(v) + "\r\n"
		}
		if got != want {
			t.Errorf("%q: got\n%q, want\n%q", raw, got, want)
		}
	}
}
