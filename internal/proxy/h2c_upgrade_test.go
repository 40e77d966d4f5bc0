package proxy

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c" //nolint:staticcheck // the one server that accepts an h2c upgrade (net/http's Protocols serve prior knowledge only): the upstream this case needs

	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// Issue 25, part 3: "Upgrade: h2c" on HTTP/1.1 never becomes a tunnel. The
// upstream below accepts the upgrade (x/net's h2c handler: 101, then
// HTTP/2 on the connection); before the fix the proxy passed the 101 on
// and piped the connection: every stream after it reached the upstream
// with the client's Retrycap-Budget (1000) and no retry policy. The proxy
// now serves the request as HTTP/1.1 (its Upgrade and HTTP2-Settings
// deleted): the upstream answers HTTP/1.1, the budget is clamped, the
// policy retries.

// h2cBackend is an upstream that accepts h2c upgrades; it records each
// request's protocol, budget and upgrade fields, and answers 503 to the
// first failFirst requests.
type h2cBackend struct {
	ln        net.Listener
	failFirst int
	mu        sync.Mutex
	seen      []string // "PROTO budget=B upgrade=U settings=S"
}

func newH2CBackend(t *testing.T, failFirst int) *h2cBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &h2cBackend{ln: ln, failFirst: failFirst}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.seen = append(b.seen, fmt.Sprintf("%s budget=%s upgrade=%s settings=%t", r.Proto, r.Header.Get("Retrycap-Budget"), r.Header.Get("Upgrade"), r.Header.Get("HTTP2-Settings") != ""))
		n := len(b.seen)
		b.mu.Unlock()
		if n <= b.failFirst {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok "+r.URL.Path)
	})
	srv := &http.Server{Handler: h2c.NewHandler(h, &http2.Server{}), ReadHeaderTimeout: 10 * time.Second} //nolint:staticcheck // see the import
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return b
}

func (b *h2cBackend) requests() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.seen...)
}

const h2cUpgradeHead = "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nRetrycap-Budget: 1000\r\n"

// TestH2CUpgradeServedAsHTTP11 drives the upgrade with a raw socket: the
// answer is the policy's HTTP/1.1 200 after two 503s (3 attempts, budgets
// 2, 1, 1 of a cap of 4), never a 101; the connection stays HTTP/1.1 and
// serves the next request.
func TestH2CUpgradeServedAsHTTP11(t *testing.T) {
	b := newH2CBackend(t, 2)
	p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.ln.Addr().String(), "--chain-cap", "4")
	c := proxytest.Dial(t, p.Addr())
	c.Send("GET http://svc/up HTTP/1.1\r\nHost: svc\r\n" + h2cUpgradeHead + "\r\n")
	resp := c.Expect("GET", 200, "ok /up")
	if resp.Proto != "HTTP/1.1" || resp.Header.Get("Upgrade") != "" {
		t.Fatalf("answer %s with Upgrade %q, want HTTP/1.1 without", resp.Proto, resp.Header.Get("Upgrade"))
	}
	c.Send("GET http://svc/next HTTP/1.1\r\nHost: svc\r\nRetrycap-Budget: 1000\r\n\r\n")
	c.Expect("GET", 200, "ok /next")
	want := []string{
		"HTTP/1.1 budget=2 upgrade= settings=false",
		"HTTP/1.1 budget=1 upgrade= settings=false",
		"HTTP/1.1 budget=1 upgrade= settings=false",
		"HTTP/1.1 budget=2 upgrade= settings=false",
	}
	if got := b.requests(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the upstream saw\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestH2CUpgradeCurl: curl --http2 over the proxy (it asks for the h2c
// upgrade) gets an HTTP/1.1 answer, and the upstream a plain HTTP/1.1
// request with the budget clamped.
func TestH2CUpgradeCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl not installed: TestH2CUpgradeServedAsHTTP11 checks the same with a raw socket")
	}
	b := newH2CBackend(t, 0)
	p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.ln.Addr().String(), "--chain-cap", "4")
	out, err := exec.Command(curl, "-sS", "-i", "--http2", "--max-time", "20", "-x", "http://"+p.Addr(), "-H", "Retrycap-Budget: 1000", "http://svc/curl").CombinedOutput()
	if err != nil {
		t.Fatalf("curl: %v\n%s", err, out)
	}
	got := string(out)
	if !strings.HasPrefix(got, "HTTP/1.1 200 OK\r\n") || !strings.HasSuffix(got, "\r\n\r\nok /curl") || strings.Contains(got, "101") {
		t.Fatalf("curl got %q, want an HTTP/1.1 200 \"ok /curl\" and no 101", got)
	}
	if got, want := strings.Join(b.requests(), "\n"), "HTTP/1.1 budget=2 upgrade= settings=false"; got != want {
		t.Fatalf("the upstream saw %q, want %q", got, want)
	}
}
