package h2

import (
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/net/http2"
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
