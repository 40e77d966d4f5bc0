//go:build linux

package h2

import (
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/sys/unix"

	"github.com/retrycap/retrycap/internal/proxy/accesslog"
	"github.com/retrycap/retrycap/internal/proxy/policy"
)

// A client that left after its FIN (curl --max-time closes its socket
// whole: a FIN, no GOAWAY) is not served any more: the PING the relay
// probes it with at the FIN draws the closed socket's RST, which ends the
// connection at once (watchReset): the attempt under way is its own
// cancellation (reset upstream, not retried, the breaker not charged,
// logged "cancelled"), and a backoff under way sends no retry; a client
// that only shut its write side still reads, and is served, retries
// included. The relay's FIN probe runs once (Handler.finEvery an hour):
// what the relay does must follow from the RST the first probe drew, not
// from a later probe's failing write.

// goneBackend is an h2c upstream (x/net's server) whose answer to an
// execution depends on the path and the execution's number:
//
//	/fail-after/...  1: 503; 2: held until release (then reset:
//	                 RST_STREAM) or the relay resets it (cut); later:
//	                 200 "ok"
//	/retry-after/... 1: 503 with Retry-After: 2; later: 200 "ok"
//	/half/...        1: held until release, then 503; later: 200 "ok"
type goneBackend struct {
	addr    string
	mu      sync.Mutex
	execs   map[string]int
	held    chan struct{} // an execution is held
	release chan struct{} // closed: the held execution goes on
	cut     chan struct{} // a held execution the relay reset
}

func startGoneBackend(t *testing.T) *goneBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &goneBackend{addr: ln.Addr().String(), execs: map[string]int{}, held: make(chan struct{}, 1), release: make(chan struct{}), cut: make(chan struct{}, 1)}
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: &protos, Handler: http.HandlerFunc(b.serve)}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	t.Cleanup(func() {
		select {
		case <-b.release:
		default:
			close(b.release)
		}
	})
	return b
}

func (b *goneBackend) serve(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	b.execs[r.URL.Path]++
	n := b.execs[r.URL.Path]
	b.mu.Unlock()
	hold := func() {
		b.held <- struct{}{}
		select {
		case <-b.release:
		case <-r.Context().Done():
			b.cut <- struct{}{}
			panic(http.ErrAbortHandler)
		}
	}
	switch kind := strings.Split(r.URL.Path, "/")[1]; {
	case kind == "fail-after" && n == 1, kind == "retry-after" && n == 1:
		if kind == "retry-after" {
			w.Header().Set("Retry-After", "2")
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("down"))
	case kind == "fail-after" && n == 2:
		hold()
		panic(http.ErrAbortHandler) // RST_STREAM: a reset, in --retry-on
	case kind == "half" && n == 1:
		hold()
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("down"))
	default:
		_, _ = w.Write([]byte("ok"))
	}
}

func (b *goneBackend) count(path string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.execs[path]
}

// goneRelay is a relay with one upstream "web" at addr (3 attempts, the
// per-try timeout an hour: only the upstream ends an attempt), its
// breaker opening at 2 failures, and its access log; the client's FIN is
// probed once (finEvery an hour).
func goneRelay(t *testing.T, addr string) (*Handler, *goneLog, *policy.Breaker, func() string) {
	t.Helper()
	lg := &goneLog{}
	lg.w = accesslog.New("client", &lg.buf, 0)
	br := policy.NewBreaker(2, time.Minute, time.Minute)
	h, reg := newHandler(t, proxyOpts{name: "web", addr: addr, attempts: 3, perTry: time.Hour, breaker: br, accessLog: lg.w})
	h.finEvery = time.Hour
	return h, lg, br, func() string { return h2Counters(t, reg) }
}

type goneLog struct {
	w   *accesslog.Writer
	buf lockedBuf
}

// lines closes the log and returns its lines, time and duration masked.
func (l *goneLog) lines(t *testing.T) string {
	t.Helper()
	if err := l.w.Close(); err != nil {
		t.Fatal(err)
	}
	return logTime.ReplaceAllStringFunc(l.buf.b.String(), func(m string) string {
		if m[1] == 't' {
			return "TIME"
		}
		return "DUR"
	})
}

// goneClient is a raw h2 client of the relay at addr (prior knowledge,
// routed by :authority) that has read everything the relay sent before
// its first request (its SETTINGS, the connection's WINDOW_UPDATE, the
// acknowledgement of ours): closing its socket then sends a FIN, not a
// RST, as curl's does.
func goneClient(t *testing.T, addr string) *hostileClient {
	t.Helper()
	r := dialHostile(t, addr)
	_ = r.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	for acked, got := false, false; !acked || !got; {
		f, err := r.fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if sf, ok := f.(*http2.SettingsFrame); ok {
			if sf.IsAck() {
				acked = true
			} else {
				got = true
				if err := r.fr.WriteSettingsAck(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return r
}

// get sends GET path on stream 1, the request ended with its headers.
func (r *hostileClient) get(path string) {
	r.t.Helper()
	blk := r.block(":method", "GET", ":scheme", "http", ":path", path, ":authority", "web")
	if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk, EndStream: true, EndHeaders: true}); err != nil {
		r.t.Fatal(err)
	}
}

// theConn is the Handler's one client connection.
func theConn(t *testing.T, h *Handler) *cconn {
	t.Helper()
	var cc *cconn
	waitFor(t, "the client connection", func() bool {
		h.rmu.Lock()
		defer h.rmu.Unlock()
		for c := range h.rconns {
			cc = c
		}
		return len(h.rconns) == 1
	})
	return cc
}

// relayReset reports whether the relay's socket of cc is reset (TCP state
// CLOSE: the client's RST arrived) or gone: read from the kernel, not by
// the relay's own check.
func relayReset(cc *cconn) bool {
	rc := rawConn(cc.nc)
	if rc == nil {
		return false
	}
	state := uint8(0)
	if err := rc.Control(func(fd uintptr) {
		if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			state = info.State
		}
	}); err != nil {
		return true // closed by the relay
	}
	return state == 7 // TCP_CLOSE
}

func connsGone(h *Handler) bool {
	h.rmu.Lock()
	defer h.rmu.Unlock()
	return len(h.rconns) == 0
}

const goneLine = `{"log":"retrycap-access",TIME,"service":"client","upstream":"web","method":"GET","authority":"web",`

// TestClientLeftAttemptCancelled: curl's case. Attempt 1 is a 503,
// retried; attempt 2 is held while the client closes its socket (a FIN);
// the relay's probe draws the closed socket's RST, and the connection
// ends: attempt 2 is reset upstream (the per-try timeout is an hour) and
// is the client's cancellation: no attempt 3, the line "cancelled", the
// breaker charged with attempt 1's 503 only (threshold 2: closed; one
// failure more opens it). Before, the FIN was a half-close: attempt 2 ran
// on until it failed (curl: its per-try timeout), and that failure,
// judged the upstream's, was retried (curl saw a third attempt start
// after it had exited) or here, with threshold 2, opened the breaker.
func TestClientLeftAttemptCancelled(t *testing.T) {
	b := startGoneBackend(t)
	h, lg, br, counters := goneRelay(t, b.addr)
	r := goneClient(t, serveDirect(t, h, ""))
	cc := theConn(t, h)
	const path = "/fail-after/1"
	r.get(path)
	<-b.held // attempt 2 at the upstream
	if n := b.count(path); n != 2 {
		t.Fatalf("%d executions before the close, want 2", n)
	}
	if err := r.c.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the client's RST at the relay (its FIN probed)", func() bool { return relayReset(cc) })
	waitFor(t, "the connection ended", func() bool { return connsGone(h) })
	select {
	case <-b.cut: // attempt 2's stream reset by the relay
	case <-time.After(10 * time.Second):
		t.Fatal("attempt 2 not reset upstream")
	}
	if n := b.count(path); n != 2 {
		t.Fatalf("%d executions, want 2: a retry was sent for a client that had left", n)
	}
	want := goneLine + `"path":"/fail-after/1","attempt":1,"status":503,DUR}` + "\n" +
		goneLine + `"path":"/fail-after/1","attempt":2,"status":0,DUR,"error":"cancelled"}` + "\n"
	if got := lg.lines(t); got != want {
		t.Fatalf("access log:\n%s\nwant:\n%s", got, want)
	}
	wantM := "retrycap_proxy_h2_attempts_total{protocol=h2,upstream=web} 2\n" +
		"retrycap_proxy_h2_connections_total{kind=prior-knowledge} 1\n" +
		"retrycap_proxy_h2_retries_total{protocol=h2,upstream=web} 1\n"
	if got := counters(); got != wantM {
		t.Fatalf("metrics:\n%s\nwant:\n%s", got, wantM)
	}
	checkOneFailure(t, br)
}

// checkOneFailure asserts the breaker (threshold 2) counted exactly one
// failure: closed now, open after one more.
func checkOneFailure(t *testing.T, br *policy.Breaker) {
	t.Helper()
	now := time.Now().UnixNano()
	if st := br.State(now); st != policy.BreakerClosed {
		t.Fatalf("breaker %v, want closed (one failure counted, threshold 2)", st)
	}
	br.Failure(now, false)
	if st := br.State(now); st != policy.BreakerOpen {
		t.Fatalf("breaker %v after one failure more, want open: it had counted none", st)
	}
}

// TestClientLeftDuringBackoffNoRetry: the upstream answers 503 with
// Retry-After: 2; the client closes its socket (a FIN) during the wait
// and the probe draws its RST, which ends the connection and the wait:
// no retry is sent. One execution, one line (the 503), the retry decided
// then counted in retries_total and nothing after. Before, the retry
// went out 2 s later for nobody (unless the relay's next probe, a second
// after the FIN, won the race: curl's TestCurlMaxTimeBackoff failed now
// and then).
func TestClientLeftDuringBackoffNoRetry(t *testing.T) {
	b := startGoneBackend(t)
	h, lg, br, counters := goneRelay(t, b.addr)
	r := goneClient(t, serveDirect(t, h, ""))
	cc := theConn(t, h)
	const path = "/retry-after/1"
	r.get(path)
	waitFor(t, "the backoff after the 503", func() bool {
		cc.mu.Lock()
		defer cc.mu.Unlock()
		s := cc.streams[1]
		return s != nil && s.timer != nil
	})
	if err := r.c.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the client's RST at the relay (its FIN probed)", func() bool { return relayReset(cc) })
	waitFor(t, "the connection ended", func() bool { return connsGone(h) })
	if n := b.count(path); n != 1 {
		t.Fatalf("%d executions, want 1: the retry was sent after the client left", n)
	}
	want := goneLine + `"path":"/retry-after/1","attempt":1,"status":503,DUR}` + "\n"
	if got := lg.lines(t); got != want {
		t.Fatalf("access log:\n%s\nwant:\n%s", got, want)
	}
	wantM := "retrycap_proxy_h2_attempts_total{protocol=h2,upstream=web} 1\n" +
		"retrycap_proxy_h2_connections_total{kind=prior-knowledge} 1\n" +
		"retrycap_proxy_h2_retries_total{protocol=h2,upstream=web} 1\n"
	if got := counters(); got != wantM {
		t.Fatalf("metrics:\n%s\nwant:\n%s", got, wantM)
	}
	checkOneFailure(t, br)
}

// TestClientHalfClosedStillRetried: a client that shuts its write side
// (a FIN) but reads on, with its attempt held upstream: the relay's probe
// reaches it (no RST), so the attempt's 503 is the upstream's failure,
// retried, and the client gets the retry's 200 "ok"; then the connection
// ends. Two executions, two lines (503, 200), the breaker charged once.
func TestClientHalfClosedStillRetried(t *testing.T) {
	b := startGoneBackend(t)
	h, lg, br, counters := goneRelay(t, b.addr)
	r := goneClient(t, serveDirect(t, h, ""))
	cc := theConn(t, h)
	const path = "/half/1"
	r.get(path)
	<-b.held
	if err := r.c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	// The probe, read: the relay saw the FIN, and this client reads.
	for {
		f, err := r.fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := f.(*http2.PingFrame); ok && !p.IsAck() && p.Data == finProbeData {
			break
		}
	}
	close(b.release) // attempt 1: 503
	var status, body string
	for ended := false; !ended; {
		f, err := r.fr.ReadFrame()
		if err != nil {
			t.Fatalf("read: %v (status %q, body %q)", err, status, body)
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			status = field(f.Fields, ":status")
			ended = f.StreamEnded()
		case *http2.DataFrame:
			body += string(f.Data())
			ended = f.StreamEnded()
		case *http2.RSTStreamFrame:
			t.Fatalf("stream reset %v", f.ErrCode)
		}
	}
	if status != "200" || body != "ok" {
		t.Fatalf("answer %s %q, want 200 \"ok\"", status, body)
	}
	waitFor(t, "the connection ended", func() bool { return connsGone(h) })
	cc.mu.Lock()
	fin := cc.fin
	cc.mu.Unlock()
	if !fin {
		t.Fatal("the relay did not take the client's FIN for one")
	}
	if n := b.count(path); n != 2 {
		t.Fatalf("%d executions, want 2", n)
	}
	want := goneLine + `"path":"/half/1","attempt":1,"status":503,DUR}` + "\n" +
		goneLine + `"path":"/half/1","attempt":2,"status":200,DUR}` + "\n"
	if got := lg.lines(t); got != want {
		t.Fatalf("access log:\n%s\nwant:\n%s", got, want)
	}
	wantM := "retrycap_proxy_h2_attempts_total{protocol=h2,upstream=web} 2\n" +
		"retrycap_proxy_h2_connections_total{kind=prior-knowledge} 1\n" +
		"retrycap_proxy_h2_requests_total{code=200,protocol=h2,upstream=web} 1\n" +
		"retrycap_proxy_h2_retries_total{protocol=h2,upstream=web} 1\n"
	if got := counters(); got != wantM {
		t.Fatalf("metrics:\n%s\nwant:\n%s", got, wantM)
	}
	checkOneFailure(t, br)
}
