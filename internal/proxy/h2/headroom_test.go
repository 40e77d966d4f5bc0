package h2

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestBigHeaderBlocksWaitForRoom: request header blocks of ~1 MiB each
// (under the 1 MiB MAX_HEADER_LIST_SIZE the relay advertises), many at
// once, toward an upstream that stops reading after the first: once the
// kernel's buffers are full, the blocks pile up in the upstream
// connection's pending writes, whose bound (1.25 MiB, hardMax) fails the
// connection and every call on it. Before, the second block pending did
// exactly that: calls failed with "peer not reading". Now an attempt
// whose block does not fit waits in its pool's queue until the writer
// drained: every call is answered OK, on the one upstream connection,
// each request reaching the upstream once.
func TestBigHeaderBlocksWaitForRoom(t *testing.T) {
	const calls = 12
	release := make(chan struct{})
	var once sync.Once
	var conns sync.Map
	addr, streams := scriptedUpstream(t, nil, func(p *upPeer, f http2.Frame) {
		conns.Store(p.n, true)
		if mh, ok := f.(*http2.MetaHeadersFrame); ok && mh.PseudoValue("method") != "" {
			once.Do(func() { <-release }) // stops reading until the test saw an attempt wait
			p.grpcOK(mh.StreamID)
		}
	})
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: addr, attempts: 1, perTry: 20 * time.Second})
	c := dialHostile(t, serveDirect(t, h, ""))
	big := strings.Repeat("b", relayMaxHeaderList-4096)
	for i := range calls {
		id := uint32(2*i + 1)
		blk := c.block(":method", "POST", ":scheme", "http", ":path", methodCall, ":authority", "echo:50051",
			"content-type", "application/grpc", "te", "trailers", "x-big", big, "x-n", strconv.Itoa(i))
		first := true
		for len(blk) > 0 || first {
			n := min(len(blk), 16384)
			var err error
			if first {
				err = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: blk[:n], EndStream: true, EndHeaders: n == len(blk)})
			} else {
				err = c.fr.WriteContinuation(id, n == len(blk), blk[:n])
			}
			if err != nil {
				t.Fatal(err)
			}
			blk, first = blk[n:], false
		}
	}
	// Poll until an attempt waits for room on the connection, or the
	// connection failed (the old behaviour).
	p := h.relayPool(addr)
	waited, failed := false, false
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end) && !waited && !failed; time.Sleep(5 * time.Millisecond) {
		p.mu.Lock()
		waited = len(p.waiters) > 0
		for _, uc := range p.conns {
			failed = failed || uc.werr.Load() != nil
		}
		p.mu.Unlock()
	}
	close(release)
	if failed {
		t.Fatal("the upstream connection failed: its pending writes passed the bound")
	}
	if !waited {
		t.Fatal("no attempt ever waited for room: the upstream's socket never filled")
	}
	// Every stream's frames, in whatever order the answers come.
	heads := map[uint32][][]hpack.HeaderField{}
	data := map[uint32][]byte{}
	_ = c.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	for ended := 0; ended < calls; {
		f, err := c.fr.ReadFrame()
		if err != nil {
			t.Fatalf("read after %d answers: %v", ended, err)
		}
		id := f.Header().StreamID
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			heads[id] = append(heads[id], f.Fields)
		case *http2.DataFrame:
			data[id] = append(data[id], f.Data()...)
		case *http2.RSTStreamFrame:
			t.Fatalf("stream %d reset %v", id, f.ErrCode)
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v", f.ErrCode)
		}
		if id != 0 && f.Header().Flags.Has(http2.FlagDataEndStream) && (f.Header().Type == http2.FrameHeaders || f.Header().Type == http2.FrameData) {
			ended++
		}
	}
	for i := range calls {
		id := uint32(2*i + 1)
		if hs := heads[id]; len(hs) != 2 || field(hs[1], "grpc-status") != "0" || string(data[id]) != string(grpcMessage("ok")) {
			t.Fatalf("call %d: %s, data %q; want OK with message ok", i, brief(hs...), data[id])
		}
	}
	if n := streams.Load(); n != calls {
		t.Fatalf("the upstream saw %d requests, want %d", n, calls)
	}
	n := 0
	conns.Range(func(any, any) bool { n++; return true })
	if n != 1 {
		t.Fatalf("the upstream saw %d connections, want 1 (none failed)", n)
	}
}
