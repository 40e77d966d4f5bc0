package h2

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/net/http2"
)

// TestUpstreamDeadlineAtTheDeadline: an upstream that honours the
// grpc-timeout it was forwarded ends the call with its own
// DEADLINE_EXCEEDED at the very moment the proxy's deadline timer fires;
// which reaches the relay first is a race a loaded machine decides (the
// CI flake of TestH2DeadlineStreamingGRPC). The answer must not depend
// on it: when the upstream's code 4 arrives with the call's deadline gone,
// the client gets the proxy's deadline answer, exactly as if its timer had
// come first. The race is made deterministic with the relay's clock
// (Config.Now): the script moves it past the call's 10 s deadline just
// before the upstream's code 4, while the real timer is still 10 s away.
// A code 4 with time left is the upstream's own and passed on unchanged.
func TestUpstreamDeadlineAtTheDeadline(t *testing.T) {
	const (
		// ADDR: the upstream's address, as the proxy names it.
		streamed = "retrycap-proxy: upstream echo (ADDR): deadline exceeded while the answer streamed"
		cut      = "retrycap-proxy: upstream echo (ADDR): 1 attempt(s), last failed with timeout (no answer before the call's deadline); not retried: deadline"
		own      = "context deadline exceeded"
	)
	for _, tc := range []struct {
		name string
		// answer is the upstream's: "stream" (headers, a message, then
		// trailers), "trailers" (headers, then trailers, no message),
		// "only" (trailers-only).
		answer string
		late   bool // the clock passes the deadline before the code 4
		// What the client gets: its header blocks' grpc-status,
		// grpc-message and retrycap-exhausted (of the last block), the
		// DATA bytes.
		blocks    int
		message   string
		exhausted string
		data      bool
		denied    float64 // retries_denied_total{reason="deadline"}
	}{
		{"message then code 4 after the deadline", "stream", true, 2, streamed, "deadline", true, 0},
		{"headers then code 4 after the deadline", "trailers", true, 1, cut, "deadline", false, 1},
		{"trailers-only code 4 after the deadline", "only", true, 1, cut, "deadline", false, 1},
		{"message then code 4 with time left", "stream", false, 2, own, "", true, 0},
		{"trailers-only code 4 with time left", "only", false, 1, own, "", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var skew atomic.Int64
			addr, streams := scriptedUpstream(t, nil, func(p *upPeer, f http2.Frame) {
				if f.Header().Type != http2.FrameData || !f.Header().Flags.Has(http2.FlagDataEndStream) {
					return
				}
				id := f.Header().StreamID
				if tc.answer != "only" {
					p.headers(id, false, ":status", "200", "content-type", "application/grpc")
				}
				if tc.answer == "stream" {
					p.do(func(fr *http2.Framer) { _ = fr.WriteData(id, false, grpcMessage("m1")) })
				}
				if tc.late {
					skew.Store(int64(11 * time.Second))
				}
				if tc.answer == "only" {
					p.headers(id, true, ":status", "200", "content-type", "application/grpc", "grpc-status", "4", "grpc-message", own)
				} else {
					p.headers(id, true, "grpc-status", "4", "grpc-message", own)
				}
			})
			h, _ := newHandler(t, proxyOpts{name: "echo", addr: addr, attempts: 3, perTry: 30 * time.Second,
				now: func() int64 { return time.Now().UnixNano() + skew.Load() }})
			c := dialHostile(t, serveDirect(t, h, ""))
			if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.grpcHeaders("grpc-timeout", "10S"), EndHeaders: true}); err != nil {
				t.Fatal(err)
			}
			if err := c.fr.WriteData(1, true, grpcMessage("in")); err != nil {
				t.Fatal(err)
			}
			heads, data, rst := c.readStream(1)
			if rst != -1 || len(heads) != tc.blocks {
				t.Fatalf("reset %d, %d header blocks %s; want none, %d", rst, len(heads), brief(heads...), tc.blocks)
			}
			last := heads[len(heads)-1]
			if got := field(last, "grpc-status"); got != "4" {
				t.Fatalf("grpc-status %q, want 4 (%s)", got, brief(heads...))
			}
			if want := encodeMessage(strings.Replace(tc.message, "ADDR", addr, 1)); field(last, "grpc-message") != want {
				t.Fatalf("grpc-message %q, want %q", field(last, "grpc-message"), want)
			}
			var ex []string
			for _, hb := range heads {
				ex = append(ex, fieldValues(hb, "retrycap-exhausted")...)
			}
			if want := []string{tc.exhausted}; tc.exhausted == "" && len(ex) != 0 || tc.exhausted != "" && (len(ex) != 1 || ex[0] != want[0]) {
				t.Fatalf("retrycap-exhausted %q, want %q", ex, tc.exhausted)
			}
			if wantData := string(grpcMessage("m1")); tc.data && string(data) != wantData || !tc.data && len(data) != 0 {
				t.Fatalf("data %q, want message m1: %v", data, tc.data)
			}
			if n := streams.Load(); n != 1 {
				t.Fatalf("the upstream saw %d requests, want 1 (code 4 is not retried)", n)
			}
			if n := testutil.ToFloat64(h.m.requests.WithLabelValues("echo", "grpc", "DEADLINE_EXCEEDED")); n != 1 {
				t.Fatalf("requests{DEADLINE_EXCEEDED} = %v, want 1", n)
			}
			if n := testutil.ToFloat64(h.m.attempts.WithLabelValues("echo", "grpc")); n != 1 {
				t.Fatalf("attempts = %v, want 1", n)
			}
			if n := testutil.ToFloat64(h.m.denied.WithLabelValues("echo", "grpc", "deadline")); n != tc.denied {
				t.Fatalf("retries_denied{deadline} = %v, want %v", n, tc.denied)
			}
		})
	}
}
