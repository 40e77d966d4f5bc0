package h2

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// interimUpstream answers every request (at its END_STREAM) with the
// header blocks of its script, each a :status and fields, the last one
// final: with a body "ok" when it is 200, else empty.
func interimUpstream(t *testing.T, script ...[]string) (string, func() int64) {
	up, seen := scriptedUpstream(t, nil, func(p *upPeer, f http2.Frame) {
		h := f.Header()
		if !h.Flags.Has(http2.FlagDataEndStream) || h.Type != http2.FrameData && h.Type != http2.FrameHeaders {
			return
		}
		for i, kv := range script {
			last := i == len(script)-1
			p.headers(h.StreamID, last && kv[1] != "200", kv...)
			if last && kv[1] == "200" {
				p.do(func(fr *http2.Framer) { _ = fr.WriteData(h.StreamID, true, []byte("ok")) })
			}
		}
	})
	return up, seen.Load
}

func statuses(heads [][]hpack.HeaderField) string {
	var out []string
	for _, h := range heads {
		out = append(out, field(h, ":status"))
	}
	return strings.Join(out, " ")
}

// An h2 upstream's 103 Early Hints (and 102) reach the h2 client as
// HEADERS without END_STREAM before the final answer only with
// --pass-interim-answers (Config.PassInterim), the HTTP/1.1 path's flag:
// its 100 never (the relay answers Expect itself), content-length and
// connection fields stripped; without the flag all are dropped, as
// before. Before, the flag did not reach the relay: the 103 was dropped
// whatever it said.
func TestInterimAnswersPassedH2(t *testing.T) {
	bothPaths(t, func(t *testing.T) {
		up, _ := interimUpstream(t,
			[]string{":status", "100"},
			[]string{":status", "103", "link", "</app.css>; rel=preload", "content-length", "0"},
			[]string{":status", "102"},
			[]string{":status", "200", "content-type", "text/plain"})
		for _, on := range []bool{false, true} {
			h, _ := newHandler(t, proxyOpts{name: "web", addr: up, attempts: 3, passInterim: on})
			r := dialHostile(t, serveDirect(t, h, ""))
			_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.block(":method", "GET", ":scheme", "http", ":path", "/", ":authority", "web"), EndHeaders: true, EndStream: true})
			heads, body, rst := r.readStream(1)
			want := "200"
			if on {
				want = "103 102 200"
			}
			if got := statuses(heads); got != want || rst != -1 || string(body) != "ok" {
				t.Fatalf("pass=%t: statuses %q (%v), body %q, reset %d; want %q, body \"ok\"", on, got, brief(heads...), body, rst, want)
			}
			if on && (len(heads[0]) != 2 || field(heads[0], "link") != "</app.css>; rel=preload" || len(heads[1]) != 1) {
				t.Fatalf("the 1xx blocks: %v; want [:status 103, link] [:status 102]", brief(heads...))
			}
		}
	})
}

// An attempt whose 1xx went to the client is not retried (its answer has
// begun, as on the HTTP/1.1 path and in Envoy's router): a GET answered
// 103 then 503 (retryable, 3 attempts allowed) is tried once and the 503
// passed on; without the flag, the 103 dropped, it is tried 3 times.
func TestInterimAnswerStopsRetriesH2(t *testing.T) {
	bothPaths(t, func(t *testing.T) {
		for _, on := range []bool{false, true} {
			up, seen := interimUpstream(t,
				[]string{":status", "103", "link", "</a.js>; rel=preload"},
				[]string{":status", "503"})
			h, reg := newHandler(t, proxyOpts{name: "web", addr: up, attempts: 3, passInterim: on})
			r := dialHostile(t, serveDirect(t, h, ""))
			_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.block(":method", "GET", ":scheme", "http", ":path", "/", ":authority", "web"), EndHeaders: true, EndStream: true})
			heads, _, rst := r.readStream(1)
			wantS, wantN, wantA := "503", int64(3), "3 2"
			if on {
				wantS, wantN, wantA = "103 503", 1, "1 0"
			}
			if got := statuses(heads); got != wantS || rst != -1 {
				t.Fatalf("pass=%t: statuses %q, reset %d; want %q", on, got, rst, wantS)
			}
			if n := seen(); n != wantN {
				t.Fatalf("pass=%t: the upstream got %d requests, want %d", on, n, wantN)
			}
			if got := metricValues(t, reg, "retrycap_proxy_h2_attempts_total", "retrycap_proxy_h2_retries_total"); got != wantA {
				t.Fatalf("pass=%t: attempts, retries: %s; want %s", on, got, wantA)
			}
		}
	})
}

// The 1xx passed on for one call are bounded as the HTTP/1.1 path's
// (forward.MaxInterimRelayed, 64 KiB of header list): five 103s of three
// 5,002-byte links each (15,156 bytes of list each): four are passed on
// (60,624 bytes), the fifth would be 75,780 and is dropped, the final
// answer comes. A gRPC call gets none.
func TestInterimAnswersBoundedH2(t *testing.T) {
	link := "<" + strings.Repeat("l", 5000) + ">"
	hint := []string{":status", "103", "link", link, "link", link, "link", link}
	up, _ := interimUpstream(t, hint, hint, hint, hint, hint, []string{":status", "200"})
	h, _ := newHandler(t, proxyOpts{name: "web", addr: up, attempts: 3, passInterim: true})
	r := dialHostile(t, serveDirect(t, h, ""))
	_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.block(":method", "GET", ":scheme", "http", ":path", "/", ":authority", "web"), EndHeaders: true, EndStream: true})
	heads, body, _ := r.readStream(1)
	if got := statuses(heads); got != "103 103 103 103 200" || len(heads[3]) != 4 || field(heads[3], "link") != link || string(body) != "ok" {
		t.Fatalf("statuses %q (%v), body %q; want \"103 103 103 103 200\", each 103 with its links", got, brief(heads...), body)
	}
	_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: r.grpcHeaders(), EndHeaders: true})
	_ = r.fr.WriteData(3, true, grpcMessage("x"))
	heads, _, _ = r.readStream(3)
	if got := statuses(heads); got != "200" {
		t.Fatalf("gRPC call: statuses %q; want \"200\" (no 1xx)", got)
	}
}

// Go's HTTP/2 client through the relay sees the upstream's 103 in
// httptrace's Got1xxResponse, with its Link, then the 200.
func TestInterimAnswersGoClientH2(t *testing.T) {
	up, _ := interimUpstream(t,
		[]string{":status", "103", "link", "</app.css>; rel=preload"},
		[]string{":status", "200"})
	h, _ := newHandler(t, proxyOpts{name: "web", addr: up, attempts: 3, passInterim: true})
	addr := serveDirect(t, h, "")
	tr := &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, a string, _ *tls.Config) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
	defer tr.CloseIdleConnections()
	var mu sync.Mutex
	var got []string
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, hdr textproto.MIMEHeader) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, http.StatusText(code)+": "+hdr.Get("Link"))
		return nil
	}}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctxT(t), trace), "GET", "http://web/", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if resp.StatusCode != 200 || string(body) != "ok" || strings.Join(got, "|") != "Early Hints: </app.css>; rel=preload" {
		t.Fatalf("got %d %q, 1xx %q; want 200 \"ok\", Early Hints with its link", resp.StatusCode, body, got)
	}
}
