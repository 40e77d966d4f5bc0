package h2

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/retrycap/retrycap/internal/proxy/accesslog"
)

// Session 18, branch grpcmal18: a gRPC call whose upstream answered (a
// header block of any kind, well-formed or not, DATA) is never sent to
// it again; what the client is told, against grpc-go called directly.

// malCase is one upstream behaviour on a call, by arrival (1-based, the
// case's own count: grpc-go directly makes the first, the relay the
// rest).
type malCase struct {
	name   string
	answer func(p *upPeer, id uint32, arrival int)
	// execs: the call's arrivals at the upstream through the relay;
	// directExecs grpc-go's directly (0: 1).
	execs, directExecs int
	// same: the relay's code and message are grpc-go's own directly;
	// else code, and msg (the relay's grpc-message after "retrycap-proxy:
	// upstream mal18 (ADDR): ", ID the upstream stream of the last
	// arrival), and direct, grpc-go's code called directly (pinned).
	same         bool
	code, direct codes.Code
	msg          string
	// logErr: each access-log line's error ("" none); denied: the
	// retries denied as not-retryable.
	logErr string
	denied float64
}

func malHead(st string, end bool, kv ...string) func(p *upPeer, id uint32, _ int) {
	return func(p *upPeer, id uint32, _ int) {
		head := []string{}
		if st != "" {
			head = append(head, ":status", st)
		}
		p.headers(id, end, append(append(head, "content-type", "application/grpc"), kv...)...)
	}
}

// TestGRPCAnsweredNotResent: every shape in which the upstream answered
// a gRPC call and the relay cannot pass the answer on (a head without
// :status, one not a number or outside 100-599, a 1xx ending the stream,
// a message in a 204, DATA before HEADERS) or the attempt failed after
// it (RST_STREAM of any code, REFUSED_STREAM included, a lost
// connection, after a 200 or a 1xx), called directly with grpc-go and
// through the relay (three attempts, reset and UNAVAILABLE retried): the
// relay sends the call once, and tells INTERNAL, naming the field and
// value or the failure, not-retryable in its words, its metric
// (requests_total{code=INTERNAL}, retries_denied_total{not-retryable})
// and its access-log line (error bad-answer or reset). Where the answer
// can go on as grpc-go reads it (a content-length under gRPC's
// content-type, which grpc-go ignores), it does: the client reads what
// grpc-go reads. Unchanged, as the boundary: an RST_STREAM before any
// header is retried (three executions), a REFUSED_STREAM before any is
// re-sent as never processed, and a well-formed answer of headers then
// grpc-status 14 without a message is retried (DESIGN.md).
//
// Before: each of the first kind was retried as a reset, three
// executions, then UNAVAILABLE "3 attempt(s), last failed with
// bad-answer ...; not retried: attempts" (a trailers-only grpc-status 0
// without :status, which grpc-go reads OK, ran three times); a
// content-length 5 on a trailers-only answer was a bad answer too (three
// executions where grpc-go reads OK).
func TestGRPCAnsweredNotResent(t *testing.T) {
	rst := func(code http2.ErrCode) func(p *upPeer, id uint32) {
		return func(p *upPeer, id uint32) { p.do(func(fr *http2.Framer) { _ = fr.WriteRSTStream(id, code) }) }
	}
	then := func(a func(p *upPeer, id uint32, n int), b func(p *upPeer, id uint32)) func(p *upPeer, id uint32, n int) {
		return func(p *upPeer, id uint32, n int) { a(p, id, n); b(p, id) }
	}
	const notRetried = "; not retried: not-retryable"
	bad := func(why string) string {
		return "1 attempt(s), last failed with bad-answer (the upstream's answer is malformed: " + why + ")" + notRetried
	}
	cases := []malCase{
		{name: "no-status", answer: malHead("", true, "grpc-status", "0"), execs: 1, code: codes.Internal, direct: codes.OK,
			msg: bad("missing :status"), logErr: "bad-answer", denied: 1},
		{name: "status-abc", answer: malHead("abc", true, "grpc-status", "0"), execs: 1, code: codes.Internal, direct: codes.OK,
			msg: bad(`malformed :status "abc"`), logErr: "bad-answer", denied: 1},
		{name: "status-600", answer: malHead("600", true, "grpc-status", "0"), execs: 1, code: codes.Internal, direct: codes.OK,
			msg: bad(`:status outside 100-599: "600"`), logErr: "bad-answer", denied: 1},
		{name: "status-099", answer: malHead("099", true, "grpc-status", "0"), execs: 1, code: codes.Internal, direct: codes.OK,
			msg: bad(`:status outside 100-599: "099"`), logErr: "bad-answer", denied: 1},
		{name: "status-103-end", answer: malHead("103", true, "grpc-status", "0"), execs: 1, code: codes.Internal, direct: codes.OK,
			msg: bad("1xx informational answer with END_STREAM"), logErr: "bad-answer", denied: 1},
		{name: "status-no-14", answer: malHead("", true, "grpc-status", "14"), execs: 1, code: codes.Internal, direct: codes.Unavailable,
			msg: bad("missing :status"), logErr: "bad-answer", denied: 1},
		{name: "message-in-204", answer: func(p *upPeer, id uint32, _ int) {
			p.headers(id, false, ":status", "204", "content-type", "application/grpc")
			p.do(func(fr *http2.Framer) { _ = fr.WriteData(id, false, grpcMessage("ok")) })
			p.headers(id, true, "grpc-status", "0")
		}, execs: 1, code: codes.Internal, direct: codes.OK,
			msg: bad("content in an answer that has none (POST, 204)"), logErr: "bad-answer", denied: 1},
		{name: "data-before-headers", answer: func(p *upPeer, id uint32, _ int) {
			p.do(func(fr *http2.Framer) { _ = fr.WriteData(id, true, grpcMessage("ok")) })
		}, execs: 1, code: codes.Internal, direct: codes.Internal,
			msg: bad("DATA before its HEADERS"), logErr: "bad-answer", denied: 1},
		{name: "200-then-rst-internal", answer: then(malHead("200", false), rst(http2.ErrCodeInternal)), execs: 1, code: codes.Internal, direct: codes.Internal,
			msg: "1 attempt(s), last failed with reset (stream error: stream ID ID; INTERNAL_ERROR)" + notRetried, logErr: "reset", denied: 1},
		{name: "200-then-rst-refused", answer: then(malHead("200", false), rst(http2.ErrCodeRefusedStream)), execs: 1, directExecs: 2, code: codes.Internal, direct: codes.Unavailable,
			msg: "1 attempt(s), last failed with reset (stream error: stream ID ID; REFUSED_STREAM)" + notRetried, logErr: "reset", denied: 1},
		{name: "103-then-rst-refused", answer: then(malHead("103", false), rst(http2.ErrCodeRefusedStream)), execs: 1, directExecs: 2, code: codes.Internal, direct: codes.Unavailable,
			msg: "1 attempt(s), last failed with reset (stream error: stream ID ID; REFUSED_STREAM)" + notRetried, logErr: "reset", denied: 1},
		{name: "200-then-conn-lost", answer: func(p *upPeer, id uint32, _ int) {
			malHead("200", false)(p, id, 0)
			_ = p.c.Close()
		}, execs: 1, code: codes.Internal, direct: codes.Unavailable,
			msg: "1 attempt(s), last failed with reset (retrycap-proxy: upstream connection lost)" + notRetried, logErr: "reset", denied: 1},
		// Passed on as grpc-go reads them: content-length ignored.
		{name: "content-length-only-0", answer: malHead("200", true, "grpc-status", "0", "content-length", "5"), execs: 1, same: true},
		{name: "content-length-only-14", answer: malHead("200", true, "grpc-status", "14", "content-length", "5"), execs: 3, same: true, logErr: ""},
		{name: "content-length-message", answer: func(p *upPeer, id uint32, _ int) {
			p.headers(id, false, ":status", "200", "content-type", "application/grpc", "content-length", "5")
			p.do(func(fr *http2.Framer) { _ = fr.WriteData(id, false, grpcMessage("ok")) })
			p.headers(id, true, "grpc-status", "0")
		}, execs: 1, same: true},
		// The boundary, unchanged.
		{name: "rst-before-headers", answer: func(p *upPeer, id uint32, _ int) { rst(http2.ErrCodeInternal)(p, id) }, execs: 3, code: codes.Unavailable, direct: codes.Internal,
			msg: "3 attempt(s), last failed with reset (stream error: stream ID ID; INTERNAL_ERROR); not retried: attempts", logErr: "reset"},
		{name: "refused-before-headers", answer: func(p *upPeer, id uint32, n int) {
			if n%2 == 1 {
				rst(http2.ErrCodeRefusedStream)(p, id)
				return
			}
			p.grpcOK(id)
		}, execs: 2, directExecs: 2, same: true},
		{name: "open-then-14", answer: func(p *upPeer, id uint32, _ int) {
			p.headers(id, false, ":status", "200", "content-type", "application/grpc")
			p.headers(id, true, "grpc-status", "14", "grpc-message", "down")
		}, execs: 3, same: true},
	}
	var mu sync.Mutex
	paths := map[*upPeer]map[uint32]int{}
	arrivals := make([]int, len(cases))
	lastID := make([]uint32, len(cases))
	up, _ := scriptedUpstream(t, nil, func(p *upPeer, f http2.Frame) {
		id := f.Header().StreamID
		mu.Lock()
		if mh, ok := f.(*http2.MetaHeadersFrame); ok {
			n, err := strconv.Atoi(strings.TrimPrefix(mh.PseudoValue("path"), "/mal/"))
			if err != nil || n < 0 || n >= len(cases) {
				mu.Unlock()
				p.do(func(fr *http2.Framer) { _ = fr.WriteRSTStream(id, http2.ErrCodeProtocol) })
				return
			}
			if paths[p] == nil {
				paths[p] = map[uint32]int{}
			}
			paths[p][id] = n
			arrivals[n]++
			lastID[n] = id
		}
		n, known := paths[p][id]
		arrival := 0
		if known {
			arrival = arrivals[n]
		}
		mu.Unlock()
		if known && f.Header().Type == http2.FrameData && f.Header().Flags.Has(http2.FlagDataEndStream) {
			cases[n].answer(p, id, arrival)
		}
	})
	direct, err := grpc.NewClient("passthrough:///"+up, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDisableRetry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = direct.Close() })
	out := &lockedBuf{}
	w := accesslog.New("client", out, 0)
	const name = "mal18"
	h, _ := newHandler(t, proxyOpts{name: name, addr: up, attempts: 3, accessLog: w})
	theFront.route(t, name, h, up)
	relayed := dialName(t, name)
	call := func(cc *grpc.ClientConn, n int) error { return serverStreamCall(t, cc, "/mal/"+strconv.Itoa(n)) }
	denied := h.m.denied.WithLabelValues(name, "grpc", "not-retryable")
	for n, c := range cases {
		errD := call(direct, n)
		mu.Lock()
		directArrivals := arrivals[n]
		mu.Unlock()
		// grpc-go's own transparent retry re-sends after REFUSED_STREAM,
		// after the headers too (it commits a call at its first message).
		wantDirect := max(c.directExecs, 1)
		if directArrivals != wantDirect {
			t.Fatalf("%s: grpc-go directly: %d arrivals, want %d", c.name, directArrivals, wantDirect)
		}
		wantCode, wantMsg := c.code, ""
		if c.same {
			wantCode, wantMsg = status.Code(errD), status.Convert(errD).Message()
		} else if got := status.Code(errD); got != c.direct {
			t.Errorf("%s: grpc-go directly reads %v (%v), pinned %v", c.name, got, errD, c.direct)
		}
		label := codeLabel(int(wantCode))
		before, deniedBefore := testutil.ToFloat64(h.m.requests.WithLabelValues(name, "grpc", label)), testutil.ToFloat64(denied)
		errR := call(relayed, n)
		mu.Lock()
		got, id := arrivals[n]-directArrivals, lastID[n]
		mu.Unlock()
		if !c.same {
			wantMsg = "retrycap-proxy: upstream " + name + " (" + up + "): " + strings.ReplaceAll(c.msg, "stream ID ID", "stream ID "+strconv.Itoa(int(id)))
		}
		if status.Code(errR) != wantCode || status.Convert(errR).Message() != wantMsg {
			t.Errorf("%s: through the relay %v %q, want %v %q (grpc-go directly: %v)", c.name, status.Code(errR), status.Convert(errR).Message(), wantCode, wantMsg, errD)
		}
		if got != c.execs {
			t.Errorf("%s: the upstream got the call %d times through the relay, want %d", c.name, got, c.execs)
		}
		if d := testutil.ToFloat64(h.m.requests.WithLabelValues(name, "grpc", label)) - before; d != 1 {
			t.Errorf("%s: requests_total{code=%s} went up by %v, want 1", c.name, label, d)
		}
		if d := testutil.ToFloat64(denied) - deniedBefore; d != c.denied {
			t.Errorf("%s: retries_denied_total{not-retryable} went up by %v, want %v", c.name, d, c.denied)
		}
	}
	if got := testutil.ToFloat64(h.m.resent.WithLabelValues(name, "grpc")); got != 1 {
		t.Errorf("re-sent as never processed %v times, want 1 (refused-before-headers)", got)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	lines := map[int][]string{}
	for _, l := range strings.Split(strings.TrimSpace(out.b.String()), "\n") {
		var rec struct {
			Path       string `json:"path"`
			Error      string `json:"error"`
			Status     int    `json:"status"`
			GRPCStatus *int   `json:"grpc_status"`
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("access-log line %q: %v", l, err)
		}
		// A failed attempt has no answer: status 0, no grpc_status.
		if rec.Error != "" && (rec.Status != 0 || rec.GRPCStatus != nil) || rec.Error == "" && rec.GRPCStatus == nil {
			t.Errorf("access-log line %q: status and grpc_status disagree with its error", l)
		}
		n, _ := strconv.Atoi(strings.TrimPrefix(rec.Path, "/mal/"))
		lines[n] = append(lines[n], rec.Error)
	}
	for n, c := range cases {
		want := c.execs
		if c.name == "refused-before-headers" {
			want = 1 // a re-send as never processed is no attempt
		}
		if len(lines[n]) != want {
			t.Errorf("%s: %d access-log lines %q, want %d", c.name, len(lines[n]), lines[n], want)
			continue
		}
		for _, e := range lines[n] {
			if e != c.logErr {
				t.Errorf("%s: access-log error %q, want %q", c.name, e, c.logErr)
			}
		}
	}
}
