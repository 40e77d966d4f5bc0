package h2

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// frame writes one HTTP/2 frame (RFC 9113 4.1) with a payload.
func frame(t *testing.T, c net.Conn, typ, flags byte, stream uint32, payload []byte) {
	t.Helper()
	var h [9]byte
	h[0], h[1], h[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	h[3], h[4] = typ, flags
	binary.BigEndian.PutUint32(h[5:], stream)
	if _, err := c.Write(append(h[:], payload...)); err != nil {
		t.Errorf("write frame: %v", err)
	}
}

// refusingUpstream answers its first connection's first stream by refusing
// it as refuse does (it never processes it), and serves every later
// connection with a real h2c server that answers "ok" and counts.
func refusingUpstream(t *testing.T, refuse func(c net.Conn, stream uint32)) (addr string, served *atomic.Int64, refusedStreams *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served, refusedStreams = new(atomic.Int64), new(atomic.Int64)
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	later := newConnListener()
	srv := &http.Server{Protocols: &protos, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		served.Add(1)
		_, _ = io.WriteString(w, "ok")
	})}
	go func() { _ = srv.Serve(later) }()
	t.Cleanup(func() { _ = srv.Close(); _ = ln.Close() })
	go func() {
		first := true
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !first {
				later.push(c)
				continue
			}
			first = false
			go func() {
				defer c.Close()
				var preface [len(ClientPreface)]byte
				if _, err := io.ReadFull(c, preface[:]); err != nil {
					return
				}
				frame(t, c, 0x4, 0, 0, nil) // SETTINGS, defaults
				for {
					var h [9]byte
					if _, err := io.ReadFull(c, h[:]); err != nil {
						return
					}
					n := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
					if _, err := io.CopyN(io.Discard, c, int64(n)); err != nil {
						return
					}
					stream := binary.BigEndian.Uint32(h[5:]) & 0x7fffffff
					switch {
					case h[3] == 0x4 && h[4]&0x1 == 0: // their SETTINGS: ACK
						frame(t, c, 0x4, 0x1, 0, nil)
					case h[3] == 0x1: // HEADERS: a request
						refusedStreams.Add(1)
						refuse(c, stream)
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), served, refusedStreams
}

// A stream the upstream never processed (a GOAWAY whose last-stream-id is
// below it, or REFUSED_STREAM) is re-sent on a new connection of the
// upstream's pool: the client gets the answer, and it is one attempt (the
// upstream allows one), counted as re-sent.
func TestUnprocessedStreamResent(t *testing.T) {
	goaway := func(c net.Conn, last uint32) {
		// GOAWAY, NO_ERROR: no stream above last was processed.
		p := make([]byte, 8)
		binary.BigEndian.PutUint32(p, last)
		frame(t, c, 0x7, 0, 0, p)
	}
	for _, tc := range []struct {
		name   string
		refuse func(c net.Conn, stream uint32)
		resent int64
	}{
		{"goaway", func(c net.Conn, _ uint32) { goaway(c, 0) }, 1},
		// The connection stays usable after a REFUSED_STREAM (as with the
		// Transport, the stream is re-sent on it); this upstream then
		// goes away without processing the second try either.
		{"refused-stream", func(c net.Conn, stream uint32) {
			if stream == 1 {
				frame(t, c, 0x3, 0, stream, []byte{0, 0, 0, 0x7}) // RST_STREAM REFUSED_STREAM
				return
			}
			goaway(c, 1)
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, served, refused := refusingUpstream(t, tc.refuse)
			h, _ := newHandler(t, proxyOpts{name: "web", addr: addr, attempts: 1})
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ln.Close() })
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					go h.ServeConn(c, "")
				}
			}()
			var protos http.Protocols
			protos.SetUnencryptedHTTP2(true)
			tr := &http.Transport{Protocols: &protos, DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, ln.Addr().String())
			}}
			t.Cleanup(tr.CloseIdleConnections)
			c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			resp, err := c.Get("http://web/x")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(body) != "ok" {
				t.Fatalf("answer %d %q, want 200 ok", resp.StatusCode, body)
			}
			if refused.Load() != tc.resent || served.Load() != 1 {
				t.Fatalf("refused %d, served %d; want %d and 1", refused.Load(), served.Load(), tc.resent)
			}
			if got := testutil.ToFloat64(h.m.attempts.WithLabelValues("web", "h2")); got != 1 {
				t.Fatalf("attempts %v, want 1", got)
			}
			if got := testutil.ToFloat64(h.m.resent.WithLabelValues("web", "h2")); got != float64(tc.resent) {
				t.Fatalf("resent %v, want %d", got, tc.resent)
			}
		})
	}
}

// connListener is a listener that accepts only the connections pushed to it.
type connListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newConnListener() *connListener {
	return &connListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *connListener) push(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.closed:
		return false
	}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *connListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// resettingUpstream is a raw h2c upstream that reads each request whole
// (HEADERS and its body up to END_STREAM) and then resets the TCP
// connection, as a backend that crashes mid-request: every request it
// read may have had its side effect. It counts the requests it saw per
// x-id header (HEADERS received).
func resettingUpstream(t *testing.T) (string, func(id string) int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	var mu sync.Mutex
	seen := map[string]int{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var preface [len(ClientPreface)]byte
				if _, err := io.ReadFull(c, preface[:]); err != nil {
					return
				}
				fr := http2.NewFramer(c, c)
				fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
				_ = fr.WriteSettings()
				for {
					f, err := fr.ReadFrame()
					if err != nil {
						return
					}
					switch f := f.(type) {
					case *http2.SettingsFrame:
						if !f.IsAck() {
							_ = fr.WriteSettingsAck()
						}
					case *http2.MetaHeadersFrame:
						mu.Lock()
						seen[f.PseudoValue("method")+" "+fieldValue(f.RegularFields(), "x-id")]++
						mu.Unlock()
					case *http2.DataFrame:
						if f.StreamEnded() {
							if tc, ok := c.(*net.TCPConn); ok {
								_ = tc.SetLinger(0) // RST, not FIN
							}
							return
						}
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), func(id string) int {
		mu.Lock()
		defer mu.Unlock()
		return seen[id]
	}
}

// A POST without an Idempotency-Key that reached the upstream, which then
// reset the connection, is answered 502 and never re-sent (it may have
// been executed): only a stream the upstream provably never processed is
// (TestUnprocessedStreamResent). One at a time each POST reaches the
// upstream exactly once; 30 POSTs and 30 PUTs at once over one client
// connection (a reset then also hits streams of other calls, whose
// HEADERS may or may not have been read): each POST at most once and
// answered 502, each PUT (retryable by method) at most its 3 attempts.
func TestWrittenRequestNotResent(t *testing.T) {
	addr, seen := resettingUpstream(t)
	h, _ := newHandler(t, proxyOpts{name: "web", addr: addr, attempts: 3})
	front := serveDirect(t, h, "")
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &protos, DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, front)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	do := func(m, id string) (int, string, error) {
		req, _ := http.NewRequest(m, "http://web/order", strings.NewReader("order "+id))
		req.Header.Set("X-Id", id)
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	for i := range 10 {
		id := "seq" + strconv.Itoa(i)
		if st, body, err := do("POST", id); err != nil || st != http.StatusBadGateway {
			t.Fatalf("POST %s: %d %q, %v; want 502", id, st, body, err)
		}
		if n := seen("POST " + id); n != 1 {
			t.Fatalf("POST %s reached the upstream %d times, want exactly 1", id, n)
		}
	}
	const calls = 30
	errs := make(chan error, 2*calls)
	for i := range calls {
		for _, m := range []string{"POST", "PUT"} {
			go func() {
				id := strconv.Itoa(i)
				st, body, err := do(m, id)
				// POST: 502, not retryable; PUT: the proxy's 503 once its
				// attempts are spent.
				want := map[string]int{"POST": http.StatusBadGateway, "PUT": http.StatusServiceUnavailable}[m]
				if err == nil && st != want {
					err = fmt.Errorf("%s %s: %d %q; want %d", m, id, st, body, want)
				}
				errs <- err
			}()
		}
	}
	for range 2 * calls {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	posts := 0
	for i := range calls {
		id := strconv.Itoa(i)
		n := seen("POST " + id)
		if n > 1 {
			t.Fatalf("POST %s reached the upstream %d times, want at most 1", id, n)
		}
		posts += n
		if n := seen("PUT " + id); n > 3 {
			t.Fatalf("PUT %s reached the upstream %d times, want at most 3", id, n)
		}
	}
	t.Logf("concurrent phase: %d of %d POSTs reached the upstream (once each), all answered 502", posts, calls)
}
