package h2

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestClientClosedAfterFINEndsCalls: a client sends a call the upstream
// holds (no answer yet), then closes its socket (a bare FIN, no GOAWAY,
// nothing unread: the kernel sends FIN, not RST) and is gone. The relay
// takes the FIN as a half-close (TestClientHalfCloseGetsAnswers) and
// waits for the answer. Before, nothing told it the client was gone: the
// upstream's call ran on until its answer came and failed to write, or
// keepalive gave up (PingInterval + PingTimeout, 75 s by default; the
// per-try timeout does not bound a call whose answer began). Now the
// relay probes a half-closed client with PINGs: the first draws the
// closed socket's RST, the next fails to write, the connection ends, and
// the upstream's call is cancelled. Keepalive and the per-try timeout
// are an hour here: only the probe can end the call within the wait.
func TestClientClosedAfterFINEndsCalls(t *testing.T) {
	var started, cancelled atomic.Int64
	b := startBackend(t, &backend{unary: func(ctx context.Context, _ int, _ string) (string, error) {
		started.Add(1)
		<-ctx.Done()
		cancelled.Add(1)
		return "", ctx.Err()
	}})
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: b.addr, attempts: 1, perTry: time.Hour, pingInterval: time.Hour, pingTimeout: time.Hour})
	r := dialHostile(t, serveDirect(t, h, "echo:50051"))
	// The relay's SETTINGS and its acknowledgement of ours read first:
	// nothing unread when the socket closes.
	for acked, got := false, false; !acked || !got; {
		f, err := r.fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if sf, ok := f.(*http2.SettingsFrame); ok {
			if sf.IsAck() {
				acked = true
			} else {
				got = true
				if err := r.fr.WriteSettingsAck(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	r.call(1, "held")
	waitFor(t, "the upstream to get the call", func() bool { return started.Load() == 1 })
	start := time.Now()
	if err := r.c.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the upstream's call cancelled", func() bool { return cancelled.Load() == 1 })
	waitFor(t, "the connection forgotten", func() bool {
		h.rmu.Lock()
		defer h.rmu.Unlock()
		return len(h.rconns) == 0
	})
	t.Logf("the upstream's call cancelled %v after the client closed", time.Since(start))
}
