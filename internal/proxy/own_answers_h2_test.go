package proxy

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// TestOwnAnswersAlikeH2: the same case reads the same on both protocols.
// Each request goes to one proxy over HTTP/1.1 and over HTTP/2 (h2c with
// prior knowledge): the status, Retrycap-Exhausted and body must be the
// documented ones on both (docs/proxy.md, "The proxy's own answers"), and
// a gRPC call's grpc-message the same text. Before, the HTTP/2 relay's 508
// named the catch-all upstream and lacked the advice, its timeouts read
// "context deadline exceeded" where HTTP/1.1's read "fasthttp: timeout",
// and neither named the upstream's address or the limit.
func TestOwnAnswersAlikeH2(t *testing.T) {
	b, _ := newDualBackend(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/nobody" {
			// A length and no body: over HTTP/2 one HEADERS frame with
			// END_STREAM and content-length 5, a malformed answer.
			w.Header().Set("Content-Length", "5")
			w.WriteHeader(http.StatusOK)
			return
		}
		<-r.Context().Done() // silent
	})
	goneLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := goneLn.Addr().String()
	_ = goneLn.Close()
	// hung's own per-try timeout (200ms) is the limit its answers name.
	p := startProxy(t, "--upstreams", "hung=3/200ms,gone=2,svc=3/200ms", "--resolve", "hung="+b.addr()+",svc="+b.addr()+",gone="+gone,
		"--per-try-timeout", "5s", "--breaker-failures", "100")
	hung := "retrycap-proxy: upstream hung (" + b.addr() + "): 1 attempt(s), last failed with timeout "
	cases := []struct {
		name, host string
		hdr        map[string]string
		status     int
		exhausted  string
		body       string
	}{
		{"508 addressed to the proxy itself", p.Addr(), nil, 508, "",
			"retrycap-proxy: request addressed to the proxy itself (" + p.Addr() + "): loop refused; send requests for upstreams through HTTP_PROXY in absolute form\n"},
		{"504 per-try timeout", "hung", nil, 504, "", hung + "(no answer within the per-try timeout 200ms)\n"},
		{"504 the deadline cut the attempt", "hung", map[string]string{"Retrycap-Deadline": "100"}, 504, "deadline",
			hung + "(no answer before the call's deadline); not retried: deadline\n"},
		{"504 no time left", "hung", map[string]string{"Retrycap-Deadline": "0"}, 504, "deadline",
			"retrycap-proxy: upstream hung: no time left (Retrycap-Deadline: 0): nothing forwarded\n"},
		{"503 attempts on a refused connection", "gone", nil, 503, "attempts",
			"retrycap-proxy: upstream gone (" + gone + "): 2 attempt(s), last failed with connect-failure (dial: dial tcp " + gone + ": connect: connection refused); not retried: attempts\n"},
	}
	clients := map[string]*http.Client{"HTTP/1.1": clientFor(p), "HTTP/2": h2Client(t, p)}
	for _, tc := range cases {
		for _, proto := range []string{"HTTP/1.1", "HTTP/2"} {
			resp, body := doBody(t, clients[proto], "GET", "http://"+tc.host+"/ok", tc.hdr)
			if resp.StatusCode != tc.status || resp.Header.Get("Retrycap-Exhausted") != tc.exhausted || body != tc.body {
				t.Errorf("%s over %s: %d Retrycap-Exhausted %q\n%q\nwant %d %q\n%q", tc.name, proto, resp.StatusCode,
					resp.Header.Get("Retrycap-Exhausted"), body, tc.status, tc.exhausted, tc.body)
			}
		}
	}
	// A malformed answer over HTTP/2 to a POST without a key: a bad
	// answer, in the words of HTTP/1.1's to a POST without a key
	// (TestOwnAnswersAlike, "502 a bad answer to a POST without a key").
	// Before: "last failed with reset (retrycap-proxy: malformed answer
	// from upstream: content-length 5 without a body)". (Over HTTP/1.1 the
	// same backend's answer is a connection closed early: no bad answer.)
	resp, body := doBody(t, clients["HTTP/2"], "POST", "http://svc/nobody", nil)
	if want := "retrycap-proxy: upstream svc (" + b.addr() + "): 1 attempt(s), last failed with bad-answer (the upstream's answer is malformed: content-length 5 without a body); not retried: not-retryable\n"; resp.StatusCode != 502 || resp.Header.Get("Retrycap-Exhausted") != "" || body != want {
		t.Errorf("malformed answer over HTTP/2: %d Retrycap-Exhausted %q\n%q\nwant 502 \"\"\n%q", resp.StatusCode, resp.Header.Get("Retrycap-Exhausted"), body, want)
	}
	// gRPC: the per-try timeout's answer in grpc-message (UNAVAILABLE, as
	// the relay answers a call it gives up), the HTTP answer's text.
	var tr metadata.MD
	err = grpcDirect(t, p).Invoke(context.Background(), "/seam.Test/Call", new(emptypb.Empty), new(emptypb.Empty), grpc.Trailer(&tr))
	want := strings.Replace(hung, "hung", "svc", 1) + "(no answer within the per-try timeout 200ms)"
	if grpcstatus.Code(err) != codes.Unavailable || grpcstatus.Convert(err).Message() != want {
		t.Errorf("gRPC: %v\nwant UNAVAILABLE %q", err, want)
	}
}
