package h2

import (
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/retrycap/retrycap/internal/proxy/accesslog"
)

// Session 15 (branch h2bad): the relay's answers to an upstream that
// breaks the protocol on one stream, to a failure given up after the
// deadline passed, and to a gRPC call that arrives with no time left, each
// in the HTTP/1.1 path's words.

// TestBadAnswerOnOneStream: an upstream answer that breaks RFC 9113 on its
// stream (a field x/net refuses, a frame the stream may not carry) is a
// bad answer as on HTTP/1.1 (forward.BadAnswer): retried as a reset,
// answered "last failed with bad-answer (the upstream's answer is
// malformed: ...)" in forward.Reason's words for a refused field (no
// bytes of it), logged "error":"bad-answer". Before, each read "last
// failed with reset (stream error: stream ID 1; PROTOCOL_ERROR; invalid
// header field value for \"x-bad\")" or "reset (retrycap-proxy: upstream
// sent DATA before HEADERS)", logged "error":"reset".
func TestBadAnswerOnOneStream(t *testing.T) {
	for _, tc := range []struct {
		name   string
		grpc   bool
		answer func(p *upPeer, id uint32)
		why    string
	}{
		{"invalid header value", false, func(p *upPeer, id uint32) { p.headers(id, true, ":status", "200", "x-bad", "a\x01b") },
			"invalid header value"},
		{"invalid header name", false, func(p *upPeer, id uint32) { p.headers(id, true, ":status", "200", "X-Upper", "1") },
			"invalid header name"},
		{"pseudo-header after a regular field", false, func(p *upPeer, id uint32) { p.headers(id, true, "x-a", "1", ":status", "200") },
			"pseudo-header after a regular field"},
		{"unknown pseudo-header", false, func(p *upPeer, id uint32) { p.headers(id, true, ":status", "200", ":foo", "x") },
			"unknown pseudo-header"},
		{"duplicate :status", false, func(p *upPeer, id uint32) { p.headers(id, true, ":status", "200", ":status", "204") },
			"duplicate pseudo-header"},
		{"request pseudo-header in an answer", false, func(p *upPeer, id uint32) { p.headers(id, true, ":status", "200", ":path", "/") },
			"request pseudo-headers in an answer"},
		{"DATA before HEADERS", false, func(p *upPeer, id uint32) {
			p.do(func(fr *http2.Framer) { _ = fr.WriteData(id, false, []byte("early")) })
		}, "DATA before its HEADERS"},
		{"WINDOW_UPDATE of 0 on the stream", false, func(p *upPeer, id uint32) {
			p.do(func(fr *http2.Framer) {
				fr.AllowIllegalWrites = true
				_ = fr.WriteWindowUpdate(id, 0)
				fr.AllowIllegalWrites = false
			})
		}, "a frame RFC 9113 forbids on its stream (PROTOCOL_ERROR)"},
		// gRPC: the answer's headers are held until a message or the
		// trailers, so a broken end is still the attempt's failure; it
		// came after the upstream's headers: not retried (session 18,
		// grpcmal18), INTERNAL. Before, retried: two executions.
		{"trailers without END_STREAM", true, func(p *upPeer, id uint32) {
			p.headers(id, false, ":status", "200", "content-type", "application/grpc")
			p.headers(id, false, "grpc-status", "0")
		}, "trailers without END_STREAM"},
		{"a pseudo-header in the trailers", true, func(p *upPeer, id uint32) {
			p.headers(id, false, ":status", "200", "content-type", "application/grpc")
			p.headers(id, true, ":status", "200", "grpc-status", "0")
		}, "a pseudo-header in its trailers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The upstream's streams the relay reset: every one that the
			// upstream left open (all but "a pseudo-header in the
			// trailers", which ended it). Before, an early DATA or open
			// trailers were taken for the stream's end: none reset, the
			// upstream's stream left open there, its slot taken.
			var resets atomic.Int64
			addr, streams := scriptedUpstream(t, nil, func(p *upPeer, f http2.Frame) {
				if _, ok := f.(*http2.RSTStreamFrame); ok {
					resets.Add(1)
				}
				if ended(f) {
					tc.answer(p, f.Header().StreamID)
				}
			})
			out := &lockedBuf{}
			w := accesslog.New("client", out, 0)
			h, _ := newHandler(t, proxyOpts{name: "echo", addr: addr, attempts: 2, accessLog: w})
			c := dialHostile(t, serveDirect(t, h, ""))
			if tc.grpc {
				c.call(1, "in")
			} else if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, EndStream: true,
				BlockFragment: c.block(":method", "GET", ":scheme", "http", ":path", "/", ":authority", "echo")}); err != nil {
				t.Fatal(err)
			}
			heads, data, rst := c.readStream(1)
			execs, reason := 2, "attempts"
			if tc.grpc {
				execs, reason = 1, "not-retryable"
			}
			want := "retrycap-proxy: upstream echo (" + addr + "): " + strconv.Itoa(execs) + " attempt(s), last failed with bad-answer (the upstream's answer is malformed: " +
				tc.why + "); not retried: " + reason
			if rst != -1 || len(heads) != 1 {
				t.Fatalf("reset %d, %d header blocks %s; want one", rst, len(heads), brief(heads...))
			}
			hd := heads[0]
			if tc.grpc {
				if field(hd, ":status") != "200" || field(hd, "grpc-status") != "13" || field(hd, "retrycap-exhausted") != "" ||
					field(hd, "grpc-message") != encodeMessage(want) || len(data) != 0 {
					t.Fatalf("got %s, data %q; want grpc-status 13, no retrycap-exhausted, grpc-message %q", brief(hd), data, encodeMessage(want))
				}
			} else if field(hd, ":status") != "503" || field(hd, "retrycap-exhausted") != "attempts" || string(data) != want+"\n" {
				t.Fatalf("got %s, body %q; want 503 retrycap-exhausted attempts %q", brief(hd), data, want+"\n")
			}
			if n := streams.Load(); n != int64(execs) {
				t.Fatalf("the upstream saw %d requests, want %d (a bad answer is retried as a reset, but for a gRPC call answered)", n, execs)
			}
			wantResets := int64(execs)
			if tc.name == "a pseudo-header in the trailers" {
				wantResets = 0
			}
			waitFor(t, "the upstream's streams reset", func() bool { return resets.Load() >= wantResets })
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if n := resets.Load(); n != wantResets {
				t.Fatalf("the relay reset %d of the upstream's streams, want %d", n, wantResets)
			}
			log := out.b.String()
			if n, m := strings.Count(log, "\n"), strings.Count(log, `"error":"bad-answer"`); n != execs || m != execs {
				t.Fatalf("access log: %d lines, %d with \"error\":\"bad-answer\"; want %d, %d:\n%s", n, m, execs, execs, log)
			}
		})
	}
}

// streamEnd is what a client read of one stream: its header blocks, DATA
// bytes and reset code (-1: none).
type streamEnd struct {
	heads [][]hpack.HeaderField
	data  []byte
	rst   int
}

// readStreams reads the client's frames until every stream of ids ended
// (END_STREAM or RST_STREAM); a GOAWAY or the connection's end fails the
// test.
func (r *hostileClient) readStreams(ids ...uint32) map[uint32]*streamEnd {
	r.t.Helper()
	out := map[uint32]*streamEnd{}
	for _, id := range ids {
		out[id] = &streamEnd{rst: -1}
	}
	_ = r.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	for left := len(ids); left > 0; {
		f, err := r.fr.ReadFrame()
		if err != nil {
			r.t.Fatalf("read: %v", err)
		}
		if ga, ok := f.(*http2.GoAwayFrame); ok {
			r.t.Fatalf("GOAWAY %v %q", ga.ErrCode, ga.DebugData())
		}
		s := out[f.Header().StreamID]
		if s == nil {
			continue
		}
		end := false
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			s.heads = append(s.heads, f.Fields)
			end = f.StreamEnded()
		case *http2.DataFrame:
			s.data = append(s.data, f.Data()...)
			end = f.StreamEnded()
		case *http2.RSTStreamFrame:
			s.rst, end = int(f.ErrCode), true
		}
		if end {
			left--
		}
	}
	return out
}

// TestBadHPACKBlockFailsItsConnection: an upstream header block that does
// not decode (an HPACK index past both tables) is a COMPRESSION_ERROR on
// the whole connection (RFC 9113 4.3: the decoder's state is lost). The
// stream it was for gets a bad answer ("bad-answer", retried as a reset:
// the GET is answered from a new connection); the other stream on the
// connection, a keyless POST the upstream had read whole, lost its
// connection: a reset, never re-sent (it may have run: no GOAWAY said it
// did not), 502. Before, the GET's first attempt read "reset
// (retrycap-proxy: upstream connection lost: http2: HPACK: ...)".
func TestBadHPACKBlockFailsItsConnection(t *testing.T) {
	var posts, ends atomic.Int64
	var getID atomic.Uint32
	addr, streams := scriptedUpstream(t, nil, func(p *upPeer, f http2.Frame) {
		mh, isHead := f.(*http2.MetaHeadersFrame)
		if isHead {
			switch mh.PseudoValue("method") {
			case "POST":
				posts.Add(1)
			case "GET":
				if p.n > 1 {
					p.headers(mh.StreamID, false, ":status", "200")
					p.do(func(fr *http2.Framer) { _ = fr.WriteData(mh.StreamID, true, []byte("ok")) })
					return
				}
				getID.Store(mh.StreamID)
			}
		}
		if !ended(f) || p.n > 1 || ends.Add(1) != 2 {
			return
		}
		// Both requests in, whole: the GET's answer does not decode.
		p.do(func(fr *http2.Framer) {
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: getID.Load(), BlockFragment: []byte{0xbf}, EndHeaders: true, EndStream: true})
		})
	})
	out := &lockedBuf{}
	w := accesslog.New("client", out, 0)
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: addr, attempts: 2, accessLog: w})
	c := dialHostile(t, serveDirect(t, h, ""))
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true,
		BlockFragment: c.block(":method", "POST", ":scheme", "http", ":path", "/order", ":authority", "echo")}); err != nil {
		t.Fatal(err)
	}
	if err := c.fr.WriteData(1, true, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, EndHeaders: true, EndStream: true,
		BlockFragment: c.block(":method", "GET", ":scheme", "http", ":path", "/", ":authority", "echo")}); err != nil {
		t.Fatal(err)
	}
	got := c.readStreams(1, 3)
	post, get := got[1], got[3]
	if get.rst != -1 || len(get.heads) != 1 || field(get.heads[0], ":status") != "200" || string(get.data) != "ok" {
		t.Fatalf("GET: reset %d, headers %s, body %q; want 200 \"ok\" from a new connection", get.rst, brief(get.heads...), get.data)
	}
	want := "retrycap-proxy: upstream echo (" + addr + "): 1 attempt(s), last failed with reset (retrycap-proxy: upstream connection lost: " +
		"http2: HPACK: decoding error: invalid indexed representation index 63); not retried: not-retryable\n"
	if post.rst != -1 || len(post.heads) != 1 || field(post.heads[0], ":status") != "502" || field(post.heads[0], "retrycap-exhausted") != "" ||
		string(post.data) != want {
		t.Fatalf("POST: reset %d, headers %s, body %q; want 502 %q", post.rst, brief(post.heads...), post.data, want)
	}
	if n, m := posts.Load(), streams.Load(); n != 1 || m != 3 {
		t.Fatalf("the upstream saw the POST %d times and %d requests; want 1 and 3 (the POST once, the GET twice)", n, m)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	log := out.b.String()
	if n, b, r := strings.Count(log, "\n"), strings.Count(log, `"error":"bad-answer"`), strings.Count(log, `"error":"reset"`); n != 3 || b != 1 || r != 1 {
		t.Fatalf("access log: %d lines, %d bad-answer, %d reset; want 3, 1, 1:\n%s", n, b, r, log)
	}
}

// TestGiveUpAfterDeadlineKeepsReason: a failure given up for a reason
// other than the deadline keeps that reason's answer when the deadline
// has passed meanwhile, as forward.Exchange.giveUp answers: its status by
// the reason (502 not-retryable, 503 attempts; gRPC UNAVAILABLE), its
// words "not retried: <reason>". Before, any failure given up after the
// deadline was the deadline's answer: 504 (gRPC DEADLINE_EXCEEDED)
// "not retried: deadline", retrycap-exhausted: deadline, for a keyless
// POST that could never have been retried.
func TestGiveUpAfterDeadlineKeepsReason(t *testing.T) {
	const reset = "retrycap-proxy: upstream echo (ADDR): 1 attempt(s), last failed with reset (stream error: stream ID 1; INTERNAL_ERROR); not retried: "
	for _, tc := range []struct {
		name, method string
		grpc         bool
		attempts     int
		status       string
		grpcSt       string
		exhausted    string
		message      string
	}{
		{"keyless POST", "POST", false, 3, "502", "", "", reset + "not-retryable"},
		{"GET, out of attempts", "GET", false, 1, "503", "", "attempts", reset + "attempts"},
		{"gRPC, out of attempts", "", true, 1, "200", "14", "attempts", reset + "attempts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var skew atomic.Int64
			addr, streams := scriptedUpstream(t, nil, func(p *upPeer, f http2.Frame) {
				if !ended(f) {
					return
				}
				// The call's 10 s are gone by the relay's clock when the
				// reset comes.
				skew.Store(int64(11 * time.Second))
				p.do(func(fr *http2.Framer) { _ = fr.WriteRSTStream(f.Header().StreamID, http2.ErrCodeInternal) })
			})
			h, _ := newHandler(t, proxyOpts{name: "echo", addr: addr, attempts: tc.attempts, perTry: 30 * time.Second,
				now: func() int64 { return time.Now().UnixNano() + skew.Load() }})
			c := dialHostile(t, serveDirect(t, h, ""))
			if tc.grpc {
				if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.grpcHeaders("grpc-timeout", "10S"), EndHeaders: true}); err != nil {
					t.Fatal(err)
				}
				if err := c.fr.WriteData(1, true, grpcMessage("in")); err != nil {
					t.Fatal(err)
				}
			} else if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, EndStream: true,
				BlockFragment: c.block(":method", tc.method, ":scheme", "http", ":path", "/", ":authority", "echo", "retrycap-deadline", "10000")}); err != nil {
				t.Fatal(err)
			}
			heads, data, rst := c.readStream(1)
			if rst != -1 || len(heads) != 1 {
				t.Fatalf("reset %d, %d header blocks %s; want one", rst, len(heads), brief(heads...))
			}
			hd := heads[0]
			want := strings.Replace(tc.message, "ADDR", addr, 1)
			got := string(data)
			if tc.grpc {
				want, got = encodeMessage(want), field(hd, "grpc-message")
			} else {
				want += "\n"
			}
			if field(hd, ":status") != tc.status || field(hd, "grpc-status") != tc.grpcSt || field(hd, "retrycap-exhausted") != tc.exhausted || got != want {
				t.Fatalf("got %s, body %q\nwant :status %s, grpc-status %q, retrycap-exhausted %q, %q", brief(hd), data, tc.status, tc.grpcSt, tc.exhausted, want)
			}
			if n := streams.Load(); n != 1 {
				t.Fatalf("the upstream saw %d requests, want 1", n)
			}
			proto := "h2"
			if tc.grpc {
				proto = "grpc"
			}
			if n := testutil.ToFloat64(h.m.denied.WithLabelValues("echo", proto, "deadline")); n != 0 {
				t.Fatalf("retries_denied{deadline} = %v, want 0", n)
			}
		})
	}
}

// TestNoTimeLeftGRPCWords: a gRPC call that arrives with less than a
// millisecond left is answered at once, nothing forwarded, in the
// HTTP/1.1 path's words (forward.Exchange.deadlineIn): grpc-message
// "retrycap-proxy: upstream echo: no time left (Retrycap-Deadline: 0):
// nothing forwarded", DEADLINE_EXCEEDED, retrycap-exhausted: deadline.
// Before: "retrycap-proxy: upstream echo: deadline exceeded: no time
// left: nothing forwarded".
func TestNoTimeLeftGRPCWords(t *testing.T) {
	const want = "retrycap-proxy: upstream echo: no time left (Retrycap-Deadline: 0): nothing forwarded"
	for _, timeout := range []string{"0n", "999u"} {
		t.Run(timeout, func(t *testing.T) {
			addr, streams := scriptedUpstream(t, nil, nil)
			h, _ := newHandler(t, proxyOpts{name: "echo", addr: addr, attempts: 3})
			c := dialHostile(t, serveDirect(t, h, ""))
			if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.grpcHeaders("grpc-timeout", timeout), EndHeaders: true}); err != nil {
				t.Fatal(err)
			}
			if err := c.fr.WriteData(1, true, grpcMessage("in")); err != nil {
				t.Fatal(err)
			}
			heads, data, rst := c.readStream(1)
			if rst != -1 || len(heads) != 1 || len(data) != 0 {
				t.Fatalf("reset %d, %d header blocks %s, data %q; want one trailers-only answer", rst, len(heads), brief(heads...), data)
			}
			hd := heads[0]
			if field(hd, ":status") != "200" || field(hd, "grpc-status") != "4" || field(hd, "retrycap-exhausted") != "deadline" ||
				field(hd, "grpc-message") != encodeMessage(want) {
				t.Fatalf("got %s; want grpc-status 4, retrycap-exhausted deadline, grpc-message %q", brief(hd), encodeMessage(want))
			}
			if n := streams.Load(); n != 0 {
				t.Fatalf("the upstream saw %d requests, want 0", n)
			}
		})
	}
}

// TestMaxStreamsZeroNoDialStorm: an upstream whose SETTINGS say
// MAX_CONCURRENT_STREAMS 0 (RFC 9113 6.5.2: no new stream, an upstream
// shedding load) gets one connection: the call waits on it for a slot
// (as x/net's Transport waits on its connection) and goes out when the
// upstream raises the limit. Before, each fresh connection sent the
// waiting call to dial the next at once: 4,524 connections in the 1 s
// one call waited.
func TestMaxStreamsZeroNoDialStorm(t *testing.T) {
	var peer atomic.Pointer[upPeer]
	var conns atomic.Int64
	addr, streams := scriptedUpstream(t, []http2.Setting{{ID: http2.SettingMaxConcurrentStreams, Val: 0}}, func(p *upPeer, f http2.Frame) {
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			conns.Add(1)
			peer.Store(p)
		}
		if ended(f) {
			p.headers(f.Header().StreamID, false, ":status", "200")
			p.do(func(fr *http2.Framer) { _ = fr.WriteData(f.Header().StreamID, true, []byte("ok")) })
		}
	})
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: addr, attempts: 1, perTry: 10 * time.Second})
	c := dialHostile(t, serveDirect(t, h, ""))
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, EndStream: true,
		BlockFragment: c.block(":method", "GET", ":scheme", "http", ":path", "/", ":authority", "echo")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the call queued on the refusing connection", func() bool {
		v, ok := h.rpools.Load(addr)
		if !ok || peer.Load() == nil {
			return false
		}
		p := v.(*rpool)
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.waiters) == 1 && !p.dialing
	})
	if n := conns.Load(); n != 1 {
		t.Fatalf("the upstream got %d connections for one call it refused streams to, want 1", n)
	}
	peer.Load().do(func(fr *http2.Framer) {
		_ = fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 100})
	})
	heads, data, rst := c.readStream(1)
	if rst != -1 || len(heads) != 1 || field(heads[0], ":status") != "200" || string(data) != "ok" {
		t.Fatalf("reset %d, headers %s, body %q; want 200 \"ok\"", rst, brief(heads...), data)
	}
	if n, m := conns.Load(), streams.Load(); n != 1 || m != 1 {
		t.Fatalf("the upstream got %d connections and %d requests, want 1 and 1", n, m)
	}
}
