package h2

import (
	"sync"
	"testing"

	"golang.org/x/net/http2"
)

// TestFragmentInPathRefused: a "#" in :path is malformed (RFC 9113 8.3.1:
// :path holds the absolute-path and query productions of the target URI,
// neither of which has a "#"; RFC 9110 7.1: a fragment is never sent) and
// is not forwarded (RFC 9113 8.1.1): the stream is reset PROTOCOL_ERROR,
// nothing reaches the upstream, as the HTTP/1.1 side answers 400 since
// branch h1red18. x/net's server takes it (answers 200). Before, the relay
// passed ":path /users/1#/../2" on as it came: an upstream (or a hop
// behind it) that reads a fragment off the target ran "/users/1". A "#"
// escaped as "%23" still goes through, unchanged.
func TestFragmentInPathRefused(t *testing.T) {
	ref := xnetModServer(t)
	for _, tc := range []struct{ name, path, want string }{
		{"fragment", "/x#frag", "rst:1:PROTOCOL_ERROR"},
		{"fragment-dot-segments", "/users/1#/../2", "rst:1:PROTOCOL_ERROR"},
		{"fragment-after-query", "/x?a=b#c", "rst:1:PROTOCOL_ERROR"},
		{"empty-fragment", "/x#", "rst:1:PROTOCOL_ERROR"},
		{"escaped", "/x%23frag?a=%23", "status:1:200"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var paths []string
			up, seen := scriptedUpstream(t, nil, func(p *upPeer, f http2.Frame) {
				if mh, ok := f.(*http2.MetaHeadersFrame); ok {
					mu.Lock()
					paths = append(paths, mh.PseudoValue("path"))
					mu.Unlock()
				}
				if f.Header().Flags.Has(http2.FlagDataEndStream) && (f.Header().Type == http2.FrameData || f.Header().Type == http2.FrameHeaders) {
					p.headers(f.Header().StreamID, true, ":status", "200")
				}
			})
			h, _ := newHandler(t, proxyOpts{name: "web", addr: up, attempts: 1})
			relay := serveDirect(t, h, "")
			seq := func(fr *http2.Framer, h func(...string) []byte) {
				_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h(":method", "DELETE", ":scheme", "http", ":path", tc.path, ":authority", "web"), EndHeaders: true, EndStream: true})
			}
			if xnet := diffOutcome(t, ref, true, seq); xnet != "status:1:200" {
				t.Fatalf("x/net's server: %s, want status:1:200 (the reference drifted)", xnet)
			}
			if got := diffOutcome(t, relay, true, seq); got != tc.want {
				mu.Lock()
				t.Errorf("relay: %s, want %s (the upstream got :path %q)", got, tc.want, paths)
				mu.Unlock()
			}
			want := int64(0)
			if tc.want == "status:1:200" {
				want = 1
			}
			if n := seen.Load(); n != want {
				t.Errorf("the upstream got %d requests, want %d", n, want)
			}
			mu.Lock()
			defer mu.Unlock()
			if want == 1 && (len(paths) != 1 || paths[0] != tc.path) {
				t.Errorf("the upstream got :path %q, want %q", paths, tc.path)
			}
		})
	}
}
