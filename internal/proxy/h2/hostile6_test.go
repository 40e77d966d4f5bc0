package h2

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// The sixth adversarial round (branch h2red17): what the earlier rounds
// left out, as a hostile client and a misbehaving upstream would send it.

// TestInformationalThenUnprocessedNotResent: an upstream that answered a
// request with a 1xx (100 Continue, 103 Early Hints) has processed it,
// whatever a REFUSED_STREAM or a GOAWAY below the stream after it claims
// (RFC 9113 8.7: REFUSED_STREAM is "prior to any processing"), as the
// relay already held for a final answer's headers. Before, the 1xx did not
// count: the stream was re-sent as never processed, a keyless POST
// reaching the upstream twice (and, refused each time, seven times), not
// counted as an attempt. Now: a POST arrives once and is answered 502
// not-retryable; a GET is retried by the policy, as after any reset, the
// second try counted as an attempt.
func TestInformationalThenUnprocessedNotResent(t *testing.T) {
	for _, tc := range []struct {
		name, status, method string
		goaway               bool
		arrivals             int64
		code, why            string
	}{
		{"103-refused-POST", "103", "POST", false, 1, "502", "last failed with reset (stream error: stream ID 1; REFUSED_STREAM); not retried: not-retryable"},
		{"100-refused-POST", "100", "POST", false, 1, "502", "last failed with reset (stream error: stream ID 1; REFUSED_STREAM); not retried: not-retryable"},
		{"103-goaway-below-POST", "103", "POST", true, 1, "502", "last failed with reset (retrycap-proxy: upstream sent GOAWAY below the stream); not retried: not-retryable"},
		{"103-refused-GET", "103", "GET", false, 2, "200", ""},
		{"103-goaway-below-GET", "103", "GET", true, 2, "200", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			first := true
			up, arrivals := scriptedUpstream(t, nil, func(p *upPeer, f http2.Frame) {
				id := f.Header().StreamID
				if !f.Header().Flags.Has(http2.FlagDataEndStream) || f.Header().Type != http2.FrameData && f.Header().Type != http2.FrameHeaders {
					return
				}
				mu.Lock()
				fail := first
				first = false
				mu.Unlock()
				if !fail {
					p.headers(id, false, ":status", "200")
					p.do(func(fr *http2.Framer) { _ = fr.WriteData(id, true, []byte("ok")) })
					return
				}
				p.headers(id, false, ":status", tc.status, "link", "</a.css>; rel=preload")
				if tc.goaway {
					p.do(func(fr *http2.Framer) { _ = fr.WriteGoAway(0, http2.ErrCodeNo, nil) })
					_ = p.c.Close()
					return
				}
				p.do(func(fr *http2.Framer) { _ = fr.WriteRSTStream(id, http2.ErrCodeRefusedStream) })
			})
			h, _ := newHandler(t, proxyOpts{name: "web", addr: up, attempts: 3})
			r := dialHostile(t, serveDirect(t, h, ""))
			blk := r.block(":method", tc.method, ":scheme", "http", ":path", "/x", ":authority", "web")
			if tc.method == "GET" {
				_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk, EndHeaders: true, EndStream: true})
			} else {
				_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk, EndHeaders: true})
				_ = r.fr.WriteData(1, true, []byte("pay once"))
			}
			heads, data, rst := r.readStream(1)
			if rst != -1 || len(heads) != 1 || field(heads[0], ":status") != tc.code {
				t.Fatalf("answer %v %q reset %d, want %s", heads, data, rst, tc.code)
			}
			if tc.why == "" && string(data) != "ok" || tc.why != "" && !strings.Contains(string(data), "1 attempt(s), "+tc.why) {
				t.Fatalf("body %q, want %q", data, tc.why)
			}
			if n := arrivals.Load(); n != tc.arrivals {
				t.Fatalf("the upstream got the request %d times, want %d", n, tc.arrivals)
			}
			if got := testutil.ToFloat64(h.m.resent.WithLabelValues("web", "h2")); got != 0 {
				t.Fatalf("re-sent %v times as never processed, want 0", got)
			}
			if got := testutil.ToFloat64(h.m.attempts.WithLabelValues("web", "h2")); got != float64(tc.arrivals) {
				t.Fatalf("attempts %v, want %d", got, tc.arrivals)
			}
		})
	}
}

// TestGRPCStatusInOpenHeadersAsGRPCGo: a gRPC answer's headers that do
// not end the stream are not its status, as grpc-go's client reads them
// (http2Client.operateHeaders: grpc-status counts only in a block with
// END_STREAM, and a gRPC content-type makes :status irrelevant): the
// answer goes on with its messages and trailers. The relay judged such a
// block by its grpc-status (or, for a non-200 :status, by that):
// grpc-status 14 (or :status 503) was retried while the upstream went on
// to complete the call, three executions and UNAVAILABLE (UNKNOWN) for a
// call grpc-go gets "ok" from; grpc-status 0 ended the call at the
// headers and dropped the message that followed (INTERNAL, "received no
// response message"). Each case is called through the relay and
// directly (the same upstream, grpc-go bypassing HTTPS_PROXY for a
// loopback address): the same result, one execution through the relay.
func TestGRPCStatusInOpenHeadersAsGRPCGo(t *testing.T) {
	for _, tc := range []struct {
		name string
		head []string
		out  string
		code codes.Code
	}{
		{"grpc-status-14", []string{":status", "200", "content-type", "application/grpc", "grpc-status", "14"}, "ok", codes.OK},
		{"grpc-status-0", []string{":status", "200", "content-type", "application/grpc", "grpc-status", "0"}, "ok", codes.OK},
		{"grpc-status-13-message", []string{":status", "200", "content-type", "application/grpc+proto", "grpc-status", "13", "grpc-message", "no"}, "ok", codes.OK},
		{"status-503-grpc-content-type", []string{":status", "503", "content-type", "application/grpc"}, "ok", codes.OK},
		// Not gRPC's content-type: grpc-go fails the call from the HTTP
		// status (Unavailable for 503), and the relay retries it as that
		// (each attempt failed the same way: three executions).
		{"status-503-text", []string{":status", "503", "content-type", "text/plain"}, "", codes.Unavailable},
		{"status-503-text-grpc-status-0", []string{":status", "503", "content-type", "text/plain", "grpc-status", "0"}, "", codes.Unavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, arrivals := scriptedUpstream(t, nil, func(p *upPeer, f http2.Frame) {
				if f.Header().Type != http2.FrameData || !f.Header().Flags.Has(http2.FlagDataEndStream) {
					return
				}
				id := f.Header().StreamID
				p.headers(id, false, tc.head...)
				p.do(func(fr *http2.Framer) { _ = fr.WriteData(id, false, grpcMessage("ok")) })
				p.headers(id, true, "grpc-status", "0")
			})
			direct, err := grpc.NewClient("passthrough:///"+up, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDisableRetry())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = direct.Close() })
			out, err := callUnary(ctxT(t), direct, "x")
			if out != tc.out || status.Code(err) != tc.code {
				t.Fatalf("grpc-go direct: %q, %v; want %q, %v", out, err, tc.out, tc.code)
			}
			if n := arrivals.Load(); n != 1 {
				t.Fatalf("direct: %d executions, want 1", n)
			}
			name := "r17-" + tc.name
			h, _ := newHandler(t, proxyOpts{name: name, addr: up, attempts: 3})
			theFront.route(t, name, h, up)
			out, err = callUnary(ctxT(t), dialName(t, name), "x")
			if out != tc.out || status.Code(err) != tc.code {
				t.Fatalf("through the relay: %q, %v; want %q, %v", out, err, tc.out, tc.code)
			}
			want := int64(2)
			if tc.code != codes.OK {
				want = 4 // three attempts through the relay
			}
			if n := arrivals.Load(); n != want {
				t.Fatalf("through the relay: %d executions, want %d", n-1, want-1)
			}
		})
	}
}

// TestGRPCStatusRepeatedAsGRPCGo: an answer with grpc-status more than
// once is read as grpc-go's client reads it (operateHeaders: every value
// parsed, one malformed makes the call UNKNOWN; else the last counts),
// in a trailers-only answer and in trailers after headers. The relay read
// the first: "14" then "0" was retried three times (three executions)
// where grpc-go's client reads 0, and "14" then "abc" too where it
// reads UNKNOWN (nothing to retry). Each is called directly and through
// the relay (three attempts, UNAVAILABLE retried): the same code, and
// three executions only when it is UNAVAILABLE.
func TestGRPCStatusRepeatedAsGRPCGo(t *testing.T) {
	for _, values := range [][]string{{"14", "0"}, {"0", "14"}, {"14", "abc"}, {"abc", "14"}, {"14", "14"}, {"14", "-1"}} {
		for _, only := range []bool{true, false} {
			name := "r17st-" + strings.Join(values, "-") + map[bool]string{true: "-trailers-only", false: "-trailers"}[only]
			t.Run(name, func(t *testing.T) {
				var fields []string
				for _, v := range values {
					fields = append(fields, "grpc-status", v)
				}
				up, arrivals := scriptedUpstream(t, nil, func(p *upPeer, f http2.Frame) {
					if f.Header().Type != http2.FrameData || !f.Header().Flags.Has(http2.FlagDataEndStream) {
						return
					}
					id := f.Header().StreamID
					head := []string{":status", "200", "content-type", "application/grpc"}
					if only {
						p.headers(id, true, append(head, fields...)...)
						return
					}
					p.headers(id, false, head...)
					p.headers(id, true, fields...)
				})
				direct, err := grpc.NewClient("passthrough:///"+up, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDisableRetry())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = direct.Close() })
				_, err = callUnary(ctxT(t), direct, "x")
				want := status.Code(err)
				h, _ := newHandler(t, proxyOpts{name: name, addr: up, attempts: 3})
				theFront.route(t, name, h, up)
				_, err = callUnary(ctxT(t), dialName(t, name), "x")
				if got := status.Code(err); got != want {
					t.Fatalf("through the relay: %v; grpc-go directly: %v", err, want)
				}
				execs := int64(1)
				if want == codes.Unavailable {
					execs = 3
				}
				if n := arrivals.Load() - 1; n != execs {
					t.Fatalf("through the relay: %d executions, want %d (grpc-go reads %v)", n, execs, want)
				}
			})
		}
	}
}

// TestNoStreamOpenedAfterUpstreamGoAway: a stream slot reserved on an
// upstream connection (rpool.acquire) just before the upstream's GOAWAY
// is read must not be opened on it: its id would be above the GOAWAY's
// last-stream-id, a stream the upstream ignores (RFC 9113 6.8), left
// waiting for the per-try timeout (a keyless POST answered 504, though
// it never ran) or for the connection's end while the upstream finishes
// the streams below. open now gives the slot back and reports the
// connection gone, so the caller takes another (dispatch). The race is
// narrow (the reader's GOAWAY between acquire and open); the test makes
// it: the slot reserved by hand, the GOAWAY read, then open.
func TestNoStreamOpenedAfterUpstreamGoAway(t *testing.T) {
	peers := make(chan *upPeer, 4)
	up, _ := scriptedUpstream(t, nil, func(p *upPeer, f http2.Frame) {
		if _, ok := f.(*http2.MetaHeadersFrame); ok {
			peers <- p // held: no answer, stream 1 stays open below the GOAWAY
		}
	})
	h, _ := newHandler(t, proxyOpts{name: "web", addr: up, attempts: 1})
	r := dialHostile(t, serveDirect(t, h, ""))
	_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.block(":method", "GET", ":scheme", "http", ":path", "/hold", ":authority", "web"), EndHeaders: true, EndStream: true})
	p := <-peers
	pool := h.relayPool(up)
	pool.mu.Lock()
	if len(pool.conns) != 1 {
		pool.mu.Unlock()
		t.Fatalf("%d upstream connections, want 1", len(pool.conns))
	}
	uc := pool.conns[0]
	pool.mu.Unlock()
	if !uc.reserve() {
		t.Fatal("no slot on the upstream connection")
	}
	p.do(func(fr *http2.Framer) { _ = fr.WriteGoAway(1, http2.ErrCodeNo, nil) })
	waitFor(t, "the relay to read the GOAWAY", func() bool {
		uc.mu.Lock()
		defer uc.mu.Unlock()
		return uc.goAway
	})
	a := &ratt{}
	pseudo := []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: "/x"}, {Name: ":authority", Value: "web"}}
	ok, err := uc.open(a, pseudo, nil, nil, true)
	uc.mu.Lock()
	id, registered, active := a.id, uc.streams[a.id] == a && a.id != 0, uc.active
	if registered {
		delete(uc.streams, a.id) // a is no call's: the connection's end must not find it
		uc.active--
	}
	uc.mu.Unlock()
	if ok || err != nil || registered {
		t.Fatalf("open after the GOAWAY: ok %v, err %v, stream %d opened; want not opened", ok, err, id)
	}
	if active != 1 {
		t.Fatalf("%d slots taken, want 1 (stream 1's; the reserved one given back)", active)
	}
}

// TestExpectContinueAnsweredByTheRelay: a request with "expect:
// 100-continue" whose body is still to come gets the relay's own 100
// Continue at once, as the HTTP/1.1 path answers it (docs/proxy.md); the
// body then flows to the upstream, whose own 100 is not passed on (the
// relay drops 1xx). Before, the client waited for a 100 that never came,
// for its own timeout (curl's --expect100-timeout, 1 s by default; Go's
// Transport.ExpectContinueTimeout) on every such request: 3 s with curl
// --expect100-timeout 3, where x/net's server answered in 32 ms; Go's
// Transport waited its ExpectContinueTimeout. One with END_STREAM on its
// HEADERS (no body) gets no 100.
func TestExpectContinueAnsweredByTheRelay(t *testing.T) {
	up := xnetServer(t)
	h, _ := newHandler(t, proxyOpts{name: "web", addr: up, attempts: 1})
	relay := serveDirect(t, h, "")
	r := dialHostile(t, relay)
	_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.block(":method", "POST", ":scheme", "http", ":path", "/x", ":authority", "web", "expect", "100-Continue"), EndHeaders: true})
	// The 100 comes before any body was sent: the read is the proof.
	heads, _, rst := r.readUntilHeaders(1)
	if rst != -1 || field(heads, ":status") != "100" || len(heads) != 1 {
		t.Fatalf("before the body: %v, reset %d; want only :status 100", heads, rst)
	}
	_ = r.fr.WriteData(1, true, []byte("body"))
	final, data, rst := r.readStream(1)
	if rst != -1 || len(final) != 1 || field(final[0], ":status") != "200" || string(data) != "ok" {
		t.Fatalf("answer %v %q reset %d; want one 200 \"ok\" (no second 100)", final, data, rst)
	}
	// No body: no 100.
	_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: r.block(":method", "GET", ":scheme", "http", ":path", "/x", ":authority", "web", "expect", "100-continue"), EndHeaders: true, EndStream: true})
	final, data, rst = r.readStream(3)
	if rst != -1 || len(final) != 1 || field(final[0], ":status") != "200" || string(data) != "ok" {
		t.Fatalf("GET: %v %q reset %d; want one 200 \"ok\"", final, data, rst)
	}
	// curl waits up to 30 s for a 100 before it sends the body; the
	// command's deadline is 15 s.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "curl", "-sS", "--http2-prior-knowledge", "-H", "Host: web", "-H", "Expect: 100-continue",
		"--expect100-timeout", "30", "--data-binary", "@-", "-w", " %{http_code}", "http://"+relay+"/x")
	cmd.Stdin = strings.NewReader(strings.Repeat("a", 2000))
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "ok 200" {
		t.Fatalf("curl: %q, %v", out, err)
	}
	// Go's Transport the same: it waits up to 30 s for the 100, the
	// client's deadline is 15 s.
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &protos, ExpectContinueTimeout: 30 * time.Second, DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, relay)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	req, err := http.NewRequest(http.MethodPost, "http://web/x", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Expect", "100-continue")
	resp, err := (&http.Client{Transport: tr, Timeout: 15 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("Go's Transport: %d %q %v", resp.StatusCode, body, err)
	}
}

// readUntilHeaders reads the client's frames until a header block on
// stream id (returned), or its reset.
func (r *hostileClient) readUntilHeaders(id uint32) (fields []hpack.HeaderField, data []byte, rst int) {
	r.t.Helper()
	_ = r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		f, err := r.fr.ReadFrame()
		if err != nil {
			r.t.Fatalf("stream %d: read: %v", id, err)
		}
		if f.Header().StreamID != id {
			continue
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			return f.Fields, data, -1
		case *http2.DataFrame:
			data = append(data, f.Data()...)
		case *http2.RSTStreamFrame:
			return nil, data, int(f.ErrCode)
		}
	}
}

// smallFieldBomb is a gRPC call's header block with n fields more, each
// the one byte 0x90 (HPACK static index 16, "accept-encoding: gzip,
// deflate": 60 bytes of header list, 40 of the relay's memory as an
// hpack.HeaderField), in frames of at most 16 KiB.
func (r *hostileClient) smallFieldBomb(id uint32, n int) int {
	blk := append(r.grpcHeaders(), bytes.Repeat([]byte{0x90}, n)...)
	for first, b := true, blk; first || len(b) > 0; first = false {
		k := min(len(b), 16384)
		if first {
			_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: b[:k], EndHeaders: k == len(b)})
		} else {
			_ = r.fr.WriteContinuation(id, k == len(b), b[:k])
		}
		b = b[k:]
	}
	return len(blk)
}

// TestSmallFieldBombBounded: an HPACK bomb of many small fields (one
// byte each on the wire, a static-table index) under the 1 MiB header
// list limit: 17,000 fields a request, 17 KB sent, 680 KB of fields the
// relay holds while the call is under way (x/net's server accepts the
// same). 100 such calls on one connection, held by an upstream that
// never answers: before, they all went upstream and the relay's heap
// grew by 66.9 MiB for 1.6 MiB sent (and 1,000 of them, the streams a
// connection may open, about 670 MiB). Now a connection's open streams
// hold at most maxHeldFields request fields: three calls go upstream,
// the 97 others are refused (REFUSED_STREAM: never processed), the heap
// grows by less than 8 MiB (3.0-5.4 measured); once the client resets
// the three, three fit again, and trailers that would pass the bound
// reset their stream (ENHANCE_YOUR_CALM). An idle connection keeps no large decoding buffer after
// such a block (hreader.trim): 50 connections that each sent one (a
// malformed one, reset at once) hold less than 4 MiB after a GC (before,
// 680 KB each: 34 MiB).
func TestSmallFieldBombBounded(t *testing.T) {
	up, seen, _ := countingUpstream(t)
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: up, attempts: 1})
	addr := serveDirect(t, h, "echo:50051")
	const streams, fields = 100, 17000
	hs := sampleHeap()
	r := dialHostile(t, addr)
	wire := 0
	for i := range streams {
		wire += r.smallFieldBomb(uint32(2*i+1), fields)
	}
	refused := map[uint32]bool{}
	_ = r.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	for len(refused) < streams-3 {
		f, err := r.fr.ReadFrame()
		if err != nil {
			t.Fatalf("after %d refusals: %v", len(refused), err)
		}
		if rst, ok := f.(*http2.RSTStreamFrame); ok {
			if rst.ErrCode != http2.ErrCodeRefusedStream || rst.StreamID < 7 {
				t.Fatalf("stream %d reset %v; want REFUSED_STREAM for streams 7 and above", rst.StreamID, rst.ErrCode)
			}
			refused[rst.StreamID] = true
		}
	}
	waitFor(t, "three calls upstream", func() bool { return seen.Load() == 3 })
	g := hs.growth()
	t.Logf("%d calls, %d KiB of header blocks: %d refused, %d upstream, heap peak growth %.1f MiB", streams, wire>>10, len(refused), seen.Load(), float64(g)/(1<<20))
	if g > 8<<20 {
		t.Fatalf("heap grew %.1f MiB for %d KiB sent, want < 8 MiB", float64(g)/(1<<20), wire>>10)
	}
	for _, id := range []uint32{1, 3, 5} {
		_ = r.fr.WriteRSTStream(id, http2.ErrCodeCancel)
	}
	waitFor(t, "the three calls forgotten", func() bool {
		h.rmu.Lock()
		defer h.rmu.Unlock()
		for cc := range h.rconns {
			cc.mu.Lock()
			n := len(cc.streams)
			cc.mu.Unlock()
			if n != 0 {
				return false
			}
		}
		return true
	})
	r.smallFieldBomb(201, fields)
	r.smallFieldBomb(203, fields)
	r.smallFieldBomb(205, fields)
	waitFor(t, "three calls upstream again", func() bool { return seen.Load() == 6 })
	// Trailers past the bound reset their stream (ENHANCE_YOUR_CALM),
	// the calls held go on.
	_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 207, BlockFragment: r.grpcHeaders(), EndHeaders: true})
	_ = r.fr.WriteData(207, false, grpcMessage("x"))
	tr := bytes.Repeat([]byte{0x90}, fields)
	_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 207, BlockFragment: tr[:16384], EndStream: true})
	_ = r.fr.WriteContinuation(207, true, tr[16384:])
	if _, _, rst := r.readStream(207); rst != int(http2.ErrCodeEnhanceYourCalm) {
		t.Fatalf("trailers past the bound: reset %d, want ENHANCE_YOUR_CALM", rst)
	}
	waitFor(t, "the fourth call upstream (its HEADERS were forwarded before the trailers)", func() bool { return seen.Load() == 7 })

	// Retained: malformed blocks (no :path) of 17,000 fields, one per
	// connection, each reset at once; the connections stay open, idle.
	runtime.GC()
	before := heapInuse()
	var idle []*hostileClient
	for range 50 {
		c := dialHostile(t, addr)
		blk := append(c.block(":method", "GET", ":scheme", "http", ":authority", "echo:50051"), bytes.Repeat([]byte{0x90}, fields)...)
		_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk[:16384]})
		_ = c.fr.WriteContinuation(1, true, blk[16384:])
		_, _, rst := c.readStream(1)
		if rst != int(http2.ErrCodeProtocol) {
			t.Fatalf("malformed bomb: reset %d, want PROTOCOL_ERROR", rst)
		}
		idle = append(idle, c)
	}
	runtime.GC()
	held := int64(heapInuse()) - int64(before)
	t.Logf("50 idle connections after a bomb each: %.1f MiB held", float64(held)/(1<<20))
	if held > 4<<20 {
		t.Fatalf("50 idle connections hold %.1f MiB, want < 4 MiB", float64(held)/(1<<20))
	}
	_ = idle
}
