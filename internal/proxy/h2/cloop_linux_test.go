//go:build linux

package h2

import (
	"bytes"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// A client connection over TCP is read by a loop (not by a goroutine of
// its own), and a loop whose connections all ended stops: a Handler
// with no client keeps no loop running.
func TestLoopReadsAndStops(t *testing.T) {
	b := startBackend(t, &backend{})
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: b.addr, attempts: 1})
	addr := serveDirect(t, h, "echo:50051")
	r := dialHostile(t, addr)
	r.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	r.call(1, "x")
	if heads, data, rst := r.readStream(1); rst != -1 || len(heads) != 2 || !bytes.Equal(data, grpcMessage("ok")) {
		t.Fatalf("answer: %d header blocks, %q, reset %d", len(heads), data, rst)
	}
	h.rmu.Lock()
	onLoop := 0
	for cc := range h.rconns {
		if cc.lr.sys.lp.Load() != nil && cc.br == nil {
			onLoop++
		}
	}
	h.rmu.Unlock()
	if onLoop != 1 {
		t.Fatalf("%d connections on a loop, want 1", onLoop)
	}
	_ = r.c.Close()
	waitFor(t, "every loop stopped", func() bool {
		h.loopOnce.Do(func() {})
		for _, l := range h.loops {
			l.mu.Lock()
			running := l.running
			l.mu.Unlock()
			if running {
				return false
			}
		}
		return true
	})
}
