package h2

import (
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/net/http2"

	"github.com/retrycap/retrycap/internal/proxy/accesslog"
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

// lateAfterJudge is a clock (Config.Now) that runs an hour late from the
// moment an attempt's judgement has read it: the retry it decides (room
// left then) finds the call's deadline gone when it is due, as on a
// machine stalled through the backoff, without a race: the judgement is
// recognised by its caller, (*callState).judge.
func lateAfterJudge() func() int64 {
	var late atomic.Bool
	return func() int64 {
		now := time.Now().UnixNano()
		if late.Load() {
			return now + int64(time.Hour)
		}
		var pcs [1]uintptr
		if runtime.Callers(2, pcs[:]) == 1 {
			if f, _ := runtime.CallersFrames(pcs[:]).Next(); strings.HasSuffix(f.Function, ".(*callState).judge") {
				late.Store(true)
			}
		}
		return now
	}
}

// ended reports a frame that ends the request (its HEADERS or DATA with
// END_STREAM).
func ended(f http2.Frame) bool {
	fh := f.Header()
	return (fh.Type == http2.FrameHeaders || fh.Type == http2.FrameData) && fh.Flags&0x1 != 0 // END_STREAM
}

// TestOwnWordsOutOfTime: a retry whose backoff ran into the deadline is
// answered as the HTTP/1.1 path answers it (forward.Exchange.giveUp with
// reason deadline): the last failure without an answer in
// forward.GaveUpBody's words, 504 (gRPC: DEADLINE_EXCEEDED) marked
// deadline; a last answer passed on, marked deadline. Before, the relay's
// own answer read "retrycap-proxy: upstream echo: deadline exceeded: 1
// attempt(s); no time left for the next" in every case (and, a gRPC call's
// deadline timer in the backoff, "; the deadline passed in the backoff").
func TestOwnWordsOutOfTime(t *testing.T) {
	for _, tc := range []struct {
		name string
		grpc bool
		// reset: the upstream resets the stream (INTERNAL_ERROR), else
		// answers 503 (gRPC: trailers-only UNAVAILABLE).
		reset bool
		// silent: the upstream never answers (the per-try timeout).
		silent bool
		// backward: the clock runs an hour early from the upstream's
		// answer on and the answer asks for a 60 s pushback: the retry's
		// wait fits by the clock, the call's deadline timer (300 ms, set
		// before) fires in it (onDeadline). Else lateAfterJudge.
		backward bool
		status   string // :status, and grpc-status for gRPC
		grpcSt   string
		message  string // the body (gRPC: grpc-message), ADDR the upstream's address
	}{
		{name: "plain, reset", reset: true, status: "504",
			message: "retrycap-proxy: upstream echo (ADDR): 1 attempt(s), last failed with reset (stream error: stream ID 1; INTERNAL_ERROR); not retried: deadline\n"},
		{name: "plain, 503 passed on", status: "503"},
		// The per-try timeout ended the last attempt, not the deadline:
		// its limit named, as HTTP/1.1 names it (AttemptWords, not cut).
		{name: "plain, per-try timeout", silent: true, status: "504",
			message: "retrycap-proxy: upstream echo (ADDR): 1 attempt(s), last failed with timeout (no answer within the per-try timeout 100ms); not retried: deadline\n"},
		{name: "gRPC, reset", grpc: true, reset: true, status: "200", grpcSt: "4",
			message: "retrycap-proxy: upstream echo (ADDR): 1 attempt(s), last failed with reset (stream error: stream ID 1; INTERNAL_ERROR); not retried: deadline"},
		{name: "gRPC, deadline timer in the backoff", grpc: true, backward: true, status: "200", grpcSt: "14", message: "busy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var early atomic.Bool
			addr, streams := scriptedUpstream(t, nil, func(p *upPeer, f http2.Frame) {
				if !ended(f) {
					return
				}
				id := f.Header().StreamID
				switch {
				case tc.silent:
				case tc.reset:
					p.do(func(fr *http2.Framer) { _ = fr.WriteRSTStream(id, http2.ErrCodeInternal) })
				case tc.grpc:
					if tc.backward {
						early.Store(true)
					}
					p.headers(id, true, ":status", "200", "content-type", "application/grpc", "grpc-status", "14", "grpc-message", "busy",
						"grpc-retry-pushback-ms", "60000")
				default:
					p.headers(id, true, ":status", "503")
				}
			})
			now := lateAfterJudge()
			if tc.backward {
				now = func() int64 {
					if early.Load() {
						return time.Now().UnixNano() - int64(time.Hour)
					}
					return time.Now().UnixNano()
				}
			}
			h, _ := newHandler(t, proxyOpts{name: "echo", addr: addr, attempts: 3, perTry: 100 * time.Millisecond, now: now,
				retryOn: "connect-failure,reset,timeout,503,unavailable"})
			c := dialHostile(t, serveDirect(t, h, ""))
			if tc.grpc {
				timeout := "10S"
				if tc.backward {
					timeout = "300m"
				}
				if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.grpcHeaders("grpc-timeout", timeout), EndHeaders: true}); err != nil {
					t.Fatal(err)
				}
				if err := c.fr.WriteData(1, true, grpcMessage("in")); err != nil {
					t.Fatal(err)
				}
			} else if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, EndStream: true,
				BlockFragment: c.block(":method", "GET", ":scheme", "http", ":path", "/", ":authority", "echo", "retrycap-deadline", "10000")}); err != nil {
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
			}
			if field(hd, ":status") != tc.status || field(hd, "grpc-status") != tc.grpcSt || field(hd, "retrycap-exhausted") != "deadline" || got != want {
				t.Fatalf("got %s, body %q\nwant :status %s, grpc-status %q, retrycap-exhausted deadline, %q", brief(hd), data, tc.status, tc.grpcSt, want)
			}
			if n := streams.Load(); n != 1 {
				t.Fatalf("the upstream saw %d requests, want 1", n)
			}
			proto := "h2"
			if tc.grpc {
				proto = "grpc"
			}
			if n := testutil.ToFloat64(h.m.denied.WithLabelValues("echo", proto, "deadline")); n != 1 {
				t.Fatalf("retries_denied{deadline} = %v, want 1", n)
			}
		})
	}
}

// TestOwnWordsBadAnswer: an answer the relay refuses as malformed is a bad
// answer, as on the HTTP/1.1 path (forward.BadAnswer): retried as a reset,
// answered "last failed with bad-answer (the upstream's answer is
// malformed: ...)", logged "error":"bad-answer". Before: "last failed
// with reset (retrycap-proxy: malformed answer from upstream: ...)" and
// "error":"reset".
func TestOwnWordsBadAnswer(t *testing.T) {
	addr, streams := scriptedUpstream(t, nil, func(p *upPeer, f http2.Frame) {
		if ended(f) {
			p.headers(f.Header().StreamID, true, ":status", "200", "content-length", "5")
		}
	})
	out := &lockedBuf{}
	w := accesslog.New("client", out, 0)
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: addr, attempts: 2, accessLog: w})
	c := dialHostile(t, serveDirect(t, h, ""))
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, EndStream: true,
		BlockFragment: c.block(":method", "GET", ":scheme", "http", ":path", "/", ":authority", "echo")}); err != nil {
		t.Fatal(err)
	}
	heads, data, rst := c.readStream(1)
	want := "retrycap-proxy: upstream echo (" + addr + "): 2 attempt(s), last failed with bad-answer (the upstream's answer is malformed: content-length 5 without a body); not retried: attempts\n"
	if rst != -1 || len(heads) != 1 || field(heads[0], ":status") != "503" || field(heads[0], "retrycap-exhausted") != "attempts" || string(data) != want {
		t.Fatalf("reset %d, headers %s, body %q; want 503 retrycap-exhausted attempts %q", rst, brief(heads...), data, want)
	}
	if n := streams.Load(); n != 2 {
		t.Fatalf("the upstream saw %d requests, want 2 (a bad answer is retried as a reset)", n)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	log := out.b.String()
	if n, m := strings.Count(log, "\n"), strings.Count(log, `"error":"bad-answer"`); n != 2 || m != 2 {
		t.Fatalf("access log: %d lines, %d with \"error\":\"bad-answer\"; want 2, 2:\n%s", n, m, log)
	}
}
