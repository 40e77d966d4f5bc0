package h2

import (
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestEndedWaitersLeaveThePool: an attempt queued for a connection (the upstream advertises
// SETTINGS_MAX_CONCURRENT_STREAMS 0, an upstream shedding load) whose call ends while it waits
// (its per-try timeout) leaves the pool's queue. Before (review19), it stayed there until the
// next kick, which a refusing upstream never gives: 60 calls of a client timing out one after
// the other left 60 waiters, each holding its attempt, without bound while the upstream refused.
// Stated bound: no waiter once every call has ended.
func TestEndedWaitersLeaveThePool(t *testing.T) {
	var peer atomic.Pointer[upPeer]
	addr, streams := scriptedUpstream(t, []http2.Setting{{ID: http2.SettingMaxConcurrentStreams, Val: 0}}, func(p *upPeer, f http2.Frame) {
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			peer.Store(p)
		}
	})
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: addr, attempts: 1, perTry: 20 * time.Millisecond})
	c := dialHostile(t, serveDirect(t, h, ""))
	const calls = 60
	for i := range calls {
		id := uint32(2*i + 1)
		if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndHeaders: true, EndStream: true,
			BlockFragment: c.block(":method", "GET", ":scheme", "http", ":path", "/", ":authority", "echo")}); err != nil {
			t.Fatal(err)
		}
		heads, _, rst := c.readStream(id)
		if rst != -1 || len(heads) != 1 || field(heads[0], ":status") != "504" {
			t.Fatalf("call %d: reset %d, headers %s; want 504 (per-try timeout)", i, rst, brief(heads...))
		}
	}
	v, ok := h.rpools.Load(addr)
	if !ok || peer.Load() == nil {
		t.Fatal("no pool, or the upstream saw no connection")
	}
	p := v.(*rpool)
	p.mu.Lock()
	n := len(p.waiters)
	p.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d waiters queued after %d calls ended, want 0", n, calls)
	}
	if m := streams.Load(); m != 0 {
		t.Fatalf("the refusing upstream got %d streams, want 0", m)
	}
}
