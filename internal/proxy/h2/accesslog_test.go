package h2

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrycap/retrycap/internal/proxy/accesslog"
)

// lockedBuf is the access log's output, read by the test after Close.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

var logTime = regexp.MustCompile(`"time":"[^"]*"|"duration_us":[0-9]+`)

// Every attempt of a gRPC call is one access-log line in the HTTP/1.1
// path's format, with grpc_status; an entry proxy charges a call's
// Idempotency-Key in its ledger, so the client's retry with the same key
// after the chain budget is spent is refused without an attempt
// (UNAVAILABLE, retrycap-exhausted: chain) and logs nothing.

func TestAccessLogAndKeyLedger(t *testing.T) {
	b := startBackend(t, &backend{unary: failWith(codes.Unavailable)})
	out := &lockedBuf{}
	w := accesslog.New("client", out, 0)
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: b.addr, attempts: 3, chainCap: 4, accessLog: w, entrypoint: true})
	theFront.route(t, "echo", h, b.addr)
	cc := dialName(t, "echo")
	ctx := metadata.AppendToOutgoingContext(ctxT(t), "idempotency-key", "k1", "baggage", "storm-op=7")
	if _, err := callUnary(ctx, cc, "x"); status.Code(err) != codes.Unavailable {
		t.Fatalf("first call: %v", err)
	}
	var tr metadata.MD
	_, err := callUnary(ctx, cc, "x", grpc.Trailer(&tr))
	if status.Code(err) != codes.Unavailable || status.Convert(err).Message() != "retrycap-proxy: upstream echo: chain budget of this Idempotency-Key is spent" {
		t.Fatalf("retry with the spent key: %v", err)
	}
	if got := b.attempts.Load(); got != 3 {
		t.Fatalf("server saw %d attempts, want 3 (the second call refused)", got)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	line := func(n, budget int, exhausted string) string {
		s := `{"log":"retrycap-access",TIME,"service":"client","upstream":"echo","method":"POST","authority":"echo:50051",` +
			`"path":"/retrycap.test.Echo/Call","attempt":` + itoa(n) + `,"budget_in":4,"budget_out":` + itoa(budget) +
			`,"status":200,"grpc_status":14,DUR`
		if exhausted != "" {
			s += `,"exhausted":"` + exhausted + `"`
		}
		return s + `,"idempotency_key":"k1","storm_op":"7"}` + "\n"
	}
	want := line(1, 2, "") + line(2, 1, "") + line(3, 1, "attempts")
	got := logTime.ReplaceAllStringFunc(out.b.String(), func(m string) string {
		if m[1] == 't' {
			return "TIME"
		}
		return "DUR"
	})
	if got != want {
		t.Fatalf("access log:\n%s\nwant:\n%s", got, want)
	}
}

func itoa(n int) string { return string(rune('0' + n)) }

// At an entrypoint a gRPC call without a key gets none: its retries follow
// grpc-status, not the HTTP/1.1 method and key rules (the generated key is
// for plain HTTP/2 POST and PATCH).

func TestEntrypointGeneratesNoKeyForGRPC(t *testing.T) {
	b := startBackend(t, &backend{})
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: b.addr, attempts: 3, chainCap: 4, entrypoint: true})
	theFront.route(t, "echo", h, b.addr)
	cc := dialName(t, "echo")
	if _, err := callUnary(ctxT(t), cc, "x"); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.seen) != 1 || len(b.seen[0].Get("idempotency-key")) != 0 {
		t.Fatalf("server saw %d calls, idempotency-key %q; want 1 call and none", len(b.seen), b.seen[0].Get("idempotency-key"))
	}
	if got := h.ledger.Len(); got != 0 {
		t.Fatalf("ledger holds %d keys, want 0", got)
	}
}

// The refusal of a request whose header list is over the upstream's
// SETTINGS_MAX_HEADER_LIST_SIZE (branch h2red19) writes its access-log
// line, as the proxy's other own answers: attempt 0 (nothing went
// upstream), the status answered (gRPC: 200 with grpc_status 13
// INTERNAL; plain HTTP/2: 431), "error":"header-list". Before, it wrote
// none: a refused call left no trace in the log.
func TestOverUpstreamHeaderListLogged(t *testing.T) {
	out := &lockedBuf{}
	w := accesslog.New("client", out, 0)
	b := startBackend(t, &backend{}, grpc.MaxHeaderListSize(2000))
	h, _ := newHandler(t, proxyOpts{name: "hl", addr: b.addr, attempts: 3, accessLog: w})
	theFront.route(t, "hl", h, b.addr)
	cc := dialName(t, "hl")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-big", strings.Repeat("r", 3000))
	if _, err := callUnary(ctx, cc, "big"); status.Code(err) != codes.Internal {
		t.Fatalf("oversized call: %v; want INTERNAL", err)
	}
	up, _ := scriptedUpstream(t, []http2.Setting{{ID: http2.SettingMaxHeaderListSize, Val: 1000}}, nil)
	h2, _ := newHandler(t, proxyOpts{name: "web", addr: up, attempts: 3, accessLog: w})
	r := dialHostile(t, serveDirect(t, h2, ""))
	_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.block(":method", "GET", ":scheme", "http", ":path", "/x", ":authority", "web", "x-big", strings.Repeat("h", 1500)), EndHeaders: true, EndStream: true})
	if heads, _, _ := r.readStream(1); field(heads[0], ":status") != "431" {
		t.Fatalf("plain request: %v; want 431", brief(heads...))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want := `{"log":"retrycap-access",TIME,"service":"client","upstream":"hl","method":"POST","authority":"hl:50051","path":"/retrycap.test.Echo/Call","attempt":0,"status":200,"grpc_status":13,DUR,"error":"header-list"}` + "\n" +
		`{"log":"retrycap-access",TIME,"service":"client","upstream":"web","method":"GET","authority":"web","path":"/x","attempt":0,"status":431,DUR,"error":"header-list"}` + "\n"
	got := logTime.ReplaceAllStringFunc(out.b.String(), func(m string) string {
		if m[1] == 't' {
			return "TIME"
		}
		return "DUR"
	})
	if got != want {
		t.Fatalf("access log:\n%s\nwant:\n%s", got, want)
	}
}
