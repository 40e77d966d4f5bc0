package h2

import (
	"bytes"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestUpstreamSmallFieldBombBounded: an upstream answering every call
// with 17,000 small fields (one byte each on the wire, a static-table
// index: 17 KB sent, 680 KB of fields the relay holds while the answer is
// under way), its streams left open. 100 keyless POSTs on one client
// connection: the answers to a connection's open streams hold at most
// maxHeldFields fields, as its requests do, so three answers pass on and
// the 97 others are bad answers: 502 in the relay's words, each call sent
// upstream once (a POST without a key is never re-sent), its upstream
// stream reset; the heap grows by less than 12 MiB (5.0-6.8 measured on
// a quiet machine, 8.3 once under a load of 10: the sampled heap holds the
// test's own decoding of the three 17,001-field answers it reads, and a
// GC running late). Before, every answer was held whole: 100 x 680 KB,
// 77.6 MiB.
func TestUpstreamSmallFieldBombBounded(t *testing.T) {
	const streams, fields = 100, 17000
	var resets atomic.Int64
	up, seen := scriptedUpstream(t, nil, func(p *upPeer, f http2.Frame) {
		switch f.(type) {
		case *http2.RSTStreamFrame:
			resets.Add(1)
			return
		}
		if !ended(f) {
			return
		}
		id := f.Header().StreamID
		blk := append(p.block(":status", "200"), bytes.Repeat([]byte{0x90}, fields)...)
		p.do(func(fr *http2.Framer) {
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: blk[:16384]})
			_ = fr.WriteContinuation(id, true, blk[16384:])
		})
	})
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: up, attempts: 3, perTry: 30 * time.Second})
	hs := sampleHeap()
	r := dialHostile(t, serveDirect(t, h, "echo:50051"))
	for i := range streams {
		if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), EndHeaders: true, EndStream: true,
			BlockFragment: r.block(":method", "POST", ":scheme", "http", ":path", "/p", ":authority", "echo")}); err != nil {
			t.Fatal(err)
		}
	}
	want := "retrycap-proxy: upstream echo (" + up + "): 1 attempt(s), last failed with bad-answer (the upstream's answer is malformed: an answer of " +
		strconv.Itoa(fields+1) + " header fields past the 65536 the client connection's streams may hold); not retried: not-retryable\n"
	passed, refused := 0, 0
	body := map[uint32][]byte{}
	status := map[uint32]string{}
	_ = r.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	for passed+refused < streams {
		f, err := r.fr.ReadFrame()
		if err != nil {
			t.Fatalf("after %d passed, %d refused: %v", passed, refused, err)
		}
		id := f.Header().StreamID
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			status[id] = field(f.Fields, ":status")
			if status[id] == "200" {
				if n := len(f.Fields); n != fields+1 {
					t.Fatalf("stream %d: %d fields passed on, want %d", id, n, fields+1)
				}
				passed++
			}
		case *http2.DataFrame:
			body[id] = append(body[id], f.Data()...)
			if f.StreamEnded() {
				if status[id] != "502" || string(body[id]) != want {
					t.Fatalf("stream %d: %s %q; want 502 %q", id, status[id], body[id], want)
				}
				refused++
			}
		case *http2.RSTStreamFrame:
			t.Fatalf("stream %d reset %v", id, f.ErrCode)
		}
	}
	g := hs.growth()
	t.Logf("%d calls: %d answers passed on, %d refused; heap peak growth %.1f MiB", streams, passed, refused, float64(g)/(1<<20))
	if passed != 3 || refused != streams-3 {
		t.Fatalf("%d answers passed on, %d refused; want 3 and %d", passed, refused, streams-3)
	}
	if g > 12<<20 {
		t.Fatalf("heap grew %.1f MiB, want < 12 MiB", float64(g)/(1<<20))
	}
	if n := seen.Load(); n != streams {
		t.Fatalf("the upstream saw %d calls, want %d (a keyless POST is sent once)", n, streams)
	}
	waitFor(t, "the refused answers' upstream streams reset", func() bool { return resets.Load() == streams-3 })
}
