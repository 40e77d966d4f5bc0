package h2

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/retrycap/retrycap/internal/proxy/accesslog"
)

// The eighteenth round (branch h2red18): an answer's gRPC status as the
// relay reads it (retry decision, requests_total's code, the access
// log's grpc_status) against what grpc-go v1.85's client reads from the
// same bytes, called directly against the same raw upstream.

// grpcReadCase is one answer shape: the head's :status and content-type
// ("" none), the grpc-status value ("" none), and where it goes: "only"
// (trailers-only: one block with END_STREAM), "open" (headers, then
// trailers holding the grpc-status, no message), "data" (headers, one
// message, trailers).
type grpcReadCase struct {
	status, ct, gs, shape string
	extra                 int // grpcReadExtras[extra]: fields beside grpc-status
}

// grpcReadExtras are fields sent beside grpc-status: a
// grpc-status-details-bin of another code (grpc-go: INTERNAL), of the
// same code, one that is no google.rpc.Status (ignored), two of another
// code (ignored), a -bin value that is not base64 (INTERNAL).
var grpcReadExtras = func() [][]string {
	bin := func(st *spb.Status) string {
		b, err := proto.Marshal(st)
		if err != nil {
			panic(err)
		}
		return base64.RawStdEncoding.EncodeToString(b)
	}
	other, same := bin(&spb.Status{Code: 0, Message: "fine"}), bin(&spb.Status{Code: 14, Message: "down"})
	return [][]string{
		nil,
		{"grpc-status-details-bin", other},
		{"grpc-status-details-bin", same},
		{"grpc-status-details-bin", base64.RawStdEncoding.EncodeToString([]byte{0xff, 0xff})},
		{"grpc-status-details-bin", other, "grpc-status-details-bin", other},
		{"x-trace-bin", "!!!!"},
	}
}()

func (c grpcReadCase) name() string {
	ct := strings.NewReplacer("/", "_", "+", "_").Replace(c.ct)
	return strings.Join([]string{c.status, "ct=" + ct, "gs=" + c.gs, c.shape, "extra=" + strconv.Itoa(c.extra)}, "-")
}

// answer writes c's answer on stream id.
func (c grpcReadCase) answer(p *upPeer, id uint32) {
	head := []string{":status", c.status}
	if c.ct != "" {
		head = append(head, "content-type", c.ct)
	}
	var gs []string
	if c.gs != "" {
		gs = []string{"grpc-status", c.gs}
	}
	gs = append(gs, grpcReadExtras[c.extra]...)
	switch c.shape {
	case "only":
		p.headers(id, true, append(head, gs...)...)
	case "open":
		p.headers(id, false, head...)
		p.headers(id, true, gs...)
	case "data":
		p.headers(id, false, head...)
		p.do(func(fr *http2.Framer) { _ = fr.WriteData(id, false, grpcMessage("ok")) })
		p.headers(id, true, gs...)
	}
}

// serverStreamCall calls method on cc as a server-streaming method and
// reads it to its end: the code it returns is the one the transport read
// (a unary call adds its own INTERNAL for an OK without a message, which
// no reading of the status could change).
func serverStreamCall(t *testing.T, cc *grpc.ClientConn, method string) error {
	st, err := cc.NewStream(ctxT(t), &grpc.StreamDesc{ServerStreams: true}, method)
	if err != nil {
		return err
	}
	if err := st.SendMsg(wrapperspb.String("x")); err != nil && err != io.EOF {
		return err
	}
	for {
		if err := st.RecvMsg(new(wrapperspb.StringValue)); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

// TestGRPCAnswerReadAsGRPCGo: every HTTP status (12) x content-type x
// grpc-status (none, 0, 14, 13, malformed) x shape, and the
// grpc-status-details-bin and -bin shapes of grpcReadExtras, called directly with
// grpc-go and through the relay (three attempts, UNAVAILABLE and
// INTERNAL retried): the same code at the client; the upstream executes
// the call three times exactly when that code is retryable and no
// message was passed on (a gRPC head then a message commits the call),
// else once; requests_total counts the client's code once; every attempt's
// access-log line has grpc_status the client's code (0 for a committed
// answer, as documented: the decision read it at the message).
//
// Before: a trailers-only 503 under gRPC's content-type without
// grpc-status was retried as UNAVAILABLE (three executions) where
// grpc-go reads UNKNOWN (it ignores :status under gRPC's content-type);
// a missing grpc-status was counted and logged INTERNAL where the client
// sees UNKNOWN, and retried when INTERNAL is retryable; an answer without
// gRPC's content-type was read by its grpc-status (a 200 text/plain with
// grpc-status 14 retried, where grpc-go reads UNKNOWN from the 200; a
// 503 text/plain with grpc-status 0 counted OK where it reads UNAVAILABLE).
func TestGRPCAnswerReadAsGRPCGo(t *testing.T) {
	var cases []grpcReadCase
	for _, st := range []string{"200", "204", "302", "400", "401", "403", "404", "429", "500", "502", "503", "504"} {
		for _, ct := range []string{"application/grpc", "application/grpc+proto", "application/grpcx", "text/plain", ""} {
			for _, gs := range []string{"", "0", "14", "13", "abc"} {
				for _, shape := range []string{"only", "open", "data"} {
					if st == "204" && shape == "data" {
						// A message in a 204 is malformed HTTP (RFC 9113
						// 8.1.1): the relay refuses it as a bad answer,
						// not retried (the upstream answered: INTERNAL,
						// TestGRPCAnsweredNotResent), where grpc-go reads
						// the status.
						continue
					}
					cases = append(cases, grpcReadCase{st, ct, gs, shape, 0})
				}
			}
		}
	}
	for extra := 1; extra < len(grpcReadExtras); extra++ {
		for _, gs := range []string{"", "14", "0"} {
			for _, shape := range []string{"only", "open"} {
				cases = append(cases, grpcReadCase{"200", "application/grpc", gs, shape, extra})
			}
		}
	}
	// The upstream answers by the request's :path: /case/<index>.
	var mu sync.Mutex
	paths := map[*upPeer]map[uint32]int{}
	execs := make([]int, len(cases))
	up, _ := scriptedUpstream(t, nil, func(p *upPeer, f http2.Frame) {
		id := f.Header().StreamID
		mu.Lock()
		if mh, ok := f.(*http2.MetaHeadersFrame); ok {
			n, err := strconv.Atoi(strings.TrimPrefix(mh.PseudoValue("path"), "/case/"))
			if err != nil || n < 0 || n >= len(cases) {
				mu.Unlock()
				p.do(func(fr *http2.Framer) { _ = fr.WriteRSTStream(id, http2.ErrCodeProtocol) })
				return
			}
			if paths[p] == nil {
				paths[p] = map[uint32]int{}
			}
			paths[p][id] = n
			execs[n]++
		}
		n, known := paths[p][id]
		mu.Unlock()
		if known && f.Header().Type == http2.FrameData && f.Header().Flags.Has(http2.FlagDataEndStream) {
			cases[n].answer(p, id)
		}
	})
	direct, err := grpc.NewClient("passthrough:///"+up, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDisableRetry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = direct.Close() })
	out := &lockedBuf{}
	w := accesslog.New("client", out, 0)
	const name = "r18read"
	h, _ := newHandler(t, proxyOpts{name: name, addr: up, attempts: 3, accessLog: w, retryOn: "connect-failure,reset,unavailable,internal"})
	theFront.route(t, name, h, up)
	relayed := dialName(t, name)
	call := func(cc *grpc.ClientConn, n int) error { return serverStreamCall(t, cc, "/case/"+strconv.Itoa(n)) }
	want := make([]codes.Code, len(cases))
	wantExecs := make([]int, len(cases))
	for n, c := range cases {
		errDirect := call(direct, n)
		want[n] = status.Code(errDirect)
		mu.Lock()
		if execs[n] != 1 {
			mu.Unlock()
			t.Fatalf("%s: grpc-go directly: %d executions, want 1", c.name(), execs[n])
		}
		mu.Unlock()
		label := codeLabel(int(want[n]))
		before := testutil.ToFloat64(h.m.requests.WithLabelValues(name, "grpc", label))
		errRelay := call(relayed, n)
		if got := status.Code(errRelay); got != want[n] {
			t.Errorf("%s: through the relay %v; grpc-go directly %v", c.name(), errRelay, errDirect)
		}
		committed := c.shape == "data" && grpcContentType(c.ct)
		wantExecs[n] = 1
		if !committed && (want[n] == codes.Unavailable || want[n] == codes.Internal) {
			wantExecs[n] = 3
		}
		mu.Lock()
		got := execs[n] - 1
		mu.Unlock()
		if got != wantExecs[n] {
			t.Errorf("%s: through the relay %d executions, want %d (grpc-go reads %v)", c.name(), got, wantExecs[n], want[n])
		}
		if d := testutil.ToFloat64(h.m.requests.WithLabelValues(name, "grpc", label)) - before; d != 1 {
			t.Errorf("%s: requests_total{code=%s} went up by %v, want 1", c.name(), label, d)
		}
	}
	// Pinned, not only differential: what grpc-go v1.85 reads for the
	// shapes the relay read otherwise.
	for _, p := range []struct {
		c    grpcReadCase
		code codes.Code
	}{
		{grpcReadCase{"503", "application/grpc", "", "only", 0}, codes.Unknown},
		{grpcReadCase{"503", "application/grpc", "14", "only", 0}, codes.Unavailable},
		{grpcReadCase{"200", "application/grpc", "", "only", 0}, codes.Unknown},
		{grpcReadCase{"200", "application/grpc", "", "open", 0}, codes.Unknown},
		{grpcReadCase{"200", "text/plain", "14", "only", 0}, codes.Unknown},
		{grpcReadCase{"200", "", "14", "open", 0}, codes.Unknown},
		{grpcReadCase{"503", "text/plain", "0", "only", 0}, codes.Unavailable},
		{grpcReadCase{"400", "application/grpcx", "0", "only", 0}, codes.Internal},
		{grpcReadCase{"503", "text/plain", "abc", "only", 0}, codes.Unknown},
		{grpcReadCase{"200", "application/grpc", "14", "only", 1}, codes.Internal},
		{grpcReadCase{"200", "application/grpc", "14", "open", 1}, codes.Internal},
		{grpcReadCase{"200", "application/grpc", "14", "only", 2}, codes.Unavailable},
		{grpcReadCase{"200", "application/grpc", "14", "only", 3}, codes.Unavailable},
		{grpcReadCase{"200", "application/grpc", "14", "only", 4}, codes.Unavailable},
		{grpcReadCase{"200", "application/grpc", "14", "only", 5}, codes.Internal},
	} {
		found := false
		for n, c := range cases {
			if c == p.c {
				found = true
				if want[n] != p.code {
					t.Errorf("%s: grpc-go reads %v, pinned %v", c.name(), want[n], p.code)
				}
			}
		}
		if !found {
			t.Errorf("%s: pinned but not in the table", p.c.name())
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	lines := map[int][]int{}
	for _, l := range strings.Split(strings.TrimSpace(out.b.String()), "\n") {
		var rec struct {
			Path       string `json:"path"`
			GRPCStatus *int   `json:"grpc_status"`
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec.GRPCStatus == nil {
			t.Fatalf("access-log line %q: %v", l, err)
		}
		n, _ := strconv.Atoi(strings.TrimPrefix(rec.Path, "/case/"))
		lines[n] = append(lines[n], *rec.GRPCStatus)
	}
	for n, c := range cases {
		w := int(want[n])
		if c.shape == "data" && grpcContentType(c.ct) {
			w = 0
		}
		if len(lines[n]) != wantExecs[n] {
			t.Errorf("%s: %d access-log lines, want %d", c.name(), len(lines[n]), wantExecs[n])
			continue
		}
		for _, g := range lines[n] {
			if g != w {
				t.Errorf("%s: access log grpc_status %d, want %d", c.name(), g, w)
			}
		}
	}
}

// TestGRPCReadBlock: grpcRead on blocks the table above cannot send
// through grpc-go's own encoder or that need exact figures: the order of
// a malformed grpc-status, a -bin value that is not base64 (grpc-go's
// client: INTERNAL, "transport: malformed ..."), a negative code.
func TestGRPCReadBlock(t *testing.T) {
	f := func(kv ...string) []hpack.HeaderField {
		var out []hpack.HeaderField
		for i := 0; i+1 < len(kv); i += 2 {
			out = append(out, hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		fs        []hpack.HeaderField
		status    int
		head, end bool
		code      int
		known     bool
	}{
		{"grpc-head-open", f("content-type", "application/grpc", "grpc-status", "14"), 200, true, false, 0, false},
		{"grpc-head-open-malformed-status", f("content-type", "application/grpc", "grpc-status", "x"), 200, true, false, codeUnknown, true},
		{"malformed-before-text-ct", f("grpc-status", "x", "content-type", "text/plain"), 503, true, true, codeUnknown, true},
		{"text-ct-503", f("content-type", "text/plain", "grpc-status", "0"), 503, true, false, codeUnavailable, true},
		{"no-ct-200", f("grpc-status", "0"), 200, true, true, codeUnknown, true},
		{"no-ct-401", nil, 401, true, true, 16, true},
		{"grpc-ct-after-text-ct", f("content-type", "text/plain", "content-type", "application/grpc", "grpc-status", "0"), 503, true, true, codeOK, true},
		{"bad-bin", f("content-type", "application/grpc", "grpc-status", "14", "x-bin", "!!!!"), 200, true, true, codeInternal, true},
		{"bad-bin-open", f("content-type", "application/grpc", "x-bin", "a"), 200, true, false, codeInternal, true},
		{"good-bin-unpadded", f("content-type", "application/grpc", "grpc-status", "14", "x-bin", "YWI"), 200, true, true, codeUnavailable, true},
		{"good-bin-padded", f("content-type", "application/grpc", "grpc-status", "14", "x-bin", "YWI="), 200, true, true, codeUnavailable, true},
		{"trailers-none", nil, 0, false, true, codeUnknown, true},
		{"trailers-bad-details-bin", f("grpc-status", "0", "grpc-status-details-bin", "%%"), 0, false, true, codeInternal, true},
		{"trailers-last-wins", f("grpc-status", "14", "grpc-status", "0"), 0, false, true, codeOK, true},
		{"trailers-negative", f("grpc-status", "-1"), 0, false, true, 1<<32 - 1, true},
		{"trailers-reserved-bin-like-te", f("te", "trailers", "grpc-status", "4"), 0, false, true, codeDeadline, true},
	} {
		code, known := grpcRead(tc.fs, tc.status, tc.head, tc.end)
		if code != tc.code || known != tc.known {
			t.Errorf("%s: grpcRead = %d, %v; want %d, %v", tc.name, code, known, tc.code, tc.known)
		}
	}
}
