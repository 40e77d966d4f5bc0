//go:build linux

package loop

import (
	"net"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// Engine.Calls counts the HTTP/1.1 requests the loops serve, and not the
// connections they hand off (CONNECT, as gRPC clients behind HTTPS_PROXY
// open their connections; h2c with prior knowledge): the proxy's spare P
// follows it (proxy.followSpareProc), and a gRPC-only sidecar must not
// read as busy.
func TestLoopCallsCountsRequestsNotHandoffs(t *testing.T) {
	b := newBackend(t, func(int64, http.ResponseWriter, *http.Request) {})
	p := startLoops(t, "backend=3", "backend="+b.Addr())
	if got := p.e.Calls(); got != 0 {
		t.Fatalf("Calls %d before any request, want 0", got)
	}
	c := proxytest.Client(p.Addr())
	for i := range 7 {
		if resp := do(t, c, "GET", "http://backend/", nil); resp.StatusCode != 200 {
			t.Fatalf("request %d: status %d, want 200", i, resp.StatusCode)
		}
	}
	proxytest.Eventually(t, "Calls = 7", func() bool { return p.e.Calls() == 7 })

	for range 5 {
		conn, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		if _, err := conn.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		conn, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		if _, err := conn.Write([]byte("CONNECT backend:443 HTTP/1.1\r\nHost: backend:443\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
	}
	proxytest.Eventually(t, "5 h2c and 3 CONNECT hand-offs", func() bool {
		return testutil.ToFloat64(p.f.M.Handoffs.WithLabelValues("h2c")) == 5 &&
			testutil.ToFloat64(p.f.M.Handoffs.WithLabelValues("connect")) == 3
	})
	if got := p.e.Calls(); got != 7 {
		t.Fatalf("Calls %d after 5 h2c connections and 3 CONNECTs, want 7 (unchanged)", got)
	}
}
