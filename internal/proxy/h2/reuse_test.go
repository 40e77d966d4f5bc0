package h2

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestReusedStreamCarriesNothingOver: a call that leaves every kind of
// state on its stream (a retry after UNAVAILABLE: a second attempt and
// grpc-previous-rpc-attempts; the caller's deadline: its timer; metadata;
// a 100 KiB answer through the windows) ends, its stream is kept for the
// connection's next (cconn.free), and the next stream made from it equals,
// field by field, one made new from the same header block, but for the
// buffers it keeps (empty) and its use count (one more); its first
// attempt is reset too, and what still names the old use (an upstream
// stream id, the use count) is told apart.
func TestReusedStreamCarriesNothingOver(t *testing.T) {
	big := strings.Repeat("x", 100<<10)
	back := startBackend(t, &backend{unary: func(_ context.Context, n int, _ string) (string, error) {
		if n == 1 {
			return "", status.Error(codes.Unavailable, "first attempt fails")
		}
		return big, nil
	}})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	h, _ := newHandler(t, proxyOpts{name: "reuse", addr: back.addr, attempts: 3, chainCap: 4, now: func() int64 { return now }})
	theFront.route(t, "reuse", h, back.addr)
	conn := dialName(t, "reuse")
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(ctxT(t), "x-first", "1"), 30*time.Second)
	defer cancel()
	if out, err := callUnary(ctx, conn, "hello"); err != nil || out != big {
		t.Fatalf("call: %d bytes, %v", len(out), err)
	}
	if n := back.attempts.Load(); n != 2 {
		t.Fatalf("%d attempts at the backend, want 2 (a retry)", n)
	}
	var cc *cconn
	waitFor(t, "the ended stream kept for reuse", func() bool {
		h.rmu.Lock()
		defer h.rmu.Unlock()
		for c := range h.rconns {
			cc = c
		}
		if cc == nil {
			return false
		}
		cc.mu.Lock()
		defer cc.mu.Unlock()
		return len(cc.free) == 1 && len(cc.streams) == 0
	})
	cc.mu.Lock()
	defer cc.mu.Unlock()
	old := cc.free[0]
	oldGen, oldUC, oldID := old.gen, old.first.uc, old.first.id
	if oldUC == nil || oldID == 0 || old.first.n != 1 || !old.first.closed || old.n != 2 {
		t.Fatalf("the first call's stream: first attempt uc %p id %d n %d closed %v, attempts %d; want a closed first attempt and a retry",
			oldUC, oldID, old.first.n, old.first.closed, old.n)
	}
	blk := &hblock{streamID: cc.maxSeen + 2, npseudo: 4, fields: []hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: methodCall},
		{Name: ":authority", Value: "reuse:50051"}, {Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
	}}
	reused := newStream(cc, blk)
	if reused != old {
		t.Fatal("the next stream is not the one kept")
	}
	kept := cc.free
	cc.free = nil
	fresh := newStream(cc, blk)
	cc.free = kept
	if reused.gen != oldGen+1 || reused.cc != cc || reused.first.s != reused {
		t.Fatalf("reused: gen %d (was %d), cc %p (want %p), first.s %p (want %p)", reused.gen, oldGen, reused.cc, cc, reused.first.s, reused)
	}
	for _, s := range []*rstream{reused, fresh} {
		for name, b := range map[string]*[]byte{"body": &s.body, "outq": &s.outq, "first.q": &s.first.q} {
			if len(*b) != 0 {
				t.Fatalf("%s holds %d bytes", name, len(*b))
			}
			*b = nil
		}
	}
	if !reflect.DeepEqual(reused.useState, fresh.useState) {
		t.Fatalf("reused stream's state differs from a new one's:\nreused %+v\nnew    %+v", reused.useState, fresh.useState)
	}
	if !reflect.DeepEqual(reused.first.attemptState, fresh.first.attemptState) {
		t.Fatalf("reused first attempt's state differs from a new one's:\nreused %+v\nnew    %+v", reused.first.attemptState, fresh.first.attemptState)
	}
	if reused.first.on(oldUC, oldID) {
		t.Fatal("the reused first attempt still takes the old upstream stream's frames")
	}
}
