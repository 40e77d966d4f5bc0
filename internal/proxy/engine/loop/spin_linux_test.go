package loop

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/proxy/forward"
	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// TestLoopSpinUnderLoad: with --loop-spin, loops busy with back-to-back
// requests poll before they sleep (Spins counts it), every request is
// answered once, and a per-try timer armed meanwhile still fires: a call
// to an upstream that never answers gets its 504 after the per-try
// timeout, not before and not never.
func TestLoopSpinUnderLoad(t *testing.T) {
	b := proxytest.NewBackend(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		var held []net.Conn // accepted, never answered, closed with the listener's test
		defer func() {
			for _, c := range held {
				_ = c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	const perTry = 300 * time.Millisecond
	p := startLoopsWith(t, "backend=3,hung=1", "backend="+b.Addr()+",hung="+ln.Addr().String(), func(c *forward.Config) {
		c.LoopSpin = time.Millisecond
		c.PerTryTimeout = perTry
	})
	const clients, each = 4, 1000
	wait := backToBack(t, p.Addr(), clients, each)
	c := proxytest.Dial(t, p.Addr())
	start := time.Now()
	c.Send("GET http://hung/ HTTP/1.1\r\nHost: hung\r\n\r\n")
	resp, body := c.Answer("GET")
	took := time.Since(start)
	wait()
	if want := "retrycap-proxy: upstream hung (" + ln.Addr().String() + "): 1 attempt(s), last failed with timeout (no answer within the per-try timeout " + perTry.String() + ")\n"; resp.StatusCode != 504 || body != want {
		t.Fatalf("hung upstream: answer %d %q, want 504 %q", resp.StatusCode, body, want)
	}
	if took < perTry-10*time.Millisecond {
		t.Fatalf("hung upstream answered after %v, before the per-try timeout %v", took, perTry)
	}
	if got := b.Hits.Load(); got != clients*each {
		t.Fatalf("backend received %d requests, want %d", got, clients*each)
	}
	if p.e.Spins() == 0 {
		t.Fatalf("no wait spun under %d back-to-back requests with a 1ms window", clients*each)
	}
	t.Logf("%d waits spun; hung upstream answered after %v", p.e.Spins(), took)
}

// TestLoopSpinNotWhenPaced: a loop that waits longer than the window
// between requests (one every 5 ms, a window of 50µs) never spins: the
// spin costs nothing to a sidecar that is not busy.
func TestLoopSpinNotWhenPaced(t *testing.T) {
	b := proxytest.NewBackend(t, nil)
	p := startLoopsWith(t, "backend=3", "backend="+b.Addr(), func(c *forward.Config) { c.LoopSpin = 50 * time.Microsecond })
	c := proxytest.Dial(t, p.Addr())
	tick := time.NewTicker(5 * time.Millisecond) // pacing the load, not synchronising
	defer tick.Stop()
	for range 40 {
		<-tick.C
		c.Send("GET http://backend/ HTTP/1.1\r\nHost: backend\r\n\r\n")
		if resp, body := c.Answer("GET"); resp.StatusCode != 200 {
			t.Fatalf("answer %s %q, want 200", resp.Status, body)
		}
	}
	if n := p.e.Spins(); n != 0 {
		t.Fatalf("%d waits spun at one request per 5 ms, want 0", n)
	}
}

// TestLoopSpinOff: --loop-spin=0 never spins, however busy.
func TestLoopSpinOff(t *testing.T) {
	b := proxytest.NewBackend(t, nil)
	p := startLoops(t, "backend=3", "backend="+b.Addr()) // LoopSpin 0
	c := proxytest.Dial(t, p.Addr())
	for range 500 {
		c.Send("GET http://backend/ HTTP/1.1\r\nHost: backend\r\n\r\n")
		if resp, body := c.Answer("GET"); resp.StatusCode != 200 {
			t.Fatalf("answer %s %q, want 200", resp.Status, body)
		}
	}
	if n := p.e.Spins(); n != 0 {
		t.Fatalf("%d waits spun with the window at 0", n)
	}
}

// TestLoopPinnedWhileBusy: a loop busy with back-to-back requests is
// locked to its thread and let go when the requests come slowly again;
// every request is answered once throughout, across the lock and the
// release (the bounds are lowered here so that a loaded test machine
// still crosses them: 1,000 and 500 calls a second).
func TestLoopPinnedWhileBusy(t *testing.T) {
	on, off := pinOnRate, pinOffRate
	pinOnRate, pinOffRate = 1000, 500
	t.Cleanup(func() { pinOnRate, pinOffRate = on, off })
	b := proxytest.NewBackend(t, nil)
	p := startLoops(t, "backend=3", "backend="+b.Addr())
	get := func(c *proxytest.Conn) string {
		c.Send("GET http://backend/ HTTP/1.1\r\nHost: backend\r\n\r\n")
		if resp, body := c.Answer("GET"); resp.StatusCode != 200 {
			return resp.Status + " " + body
		}
		return ""
	}
	const clients, each = 4, 1000
	backToBack(t, p.Addr(), clients, each)()
	pins, _ := p.e.Pins()
	if pins == 0 {
		t.Fatalf("no loop was locked to its thread under %d back-to-back requests", clients*each)
	}
	// Then one request every 20 ms (50 a second, under the off rate): the
	// loops let go of their threads at their next yields (an idle loop
	// wakes for its sweep at least once a second).
	c := proxytest.Dial(t, p.Addr())
	tick := time.NewTicker(20 * time.Millisecond) // pacing the load, not synchronising
	defer tick.Stop()
	paced := 0
	for ; paced < 250; paced++ {
		if pins, unpins := p.e.Pins(); pins == unpins {
			break
		}
		<-tick.C
		if e := get(c); e != "" {
			t.Fatalf("paced request %d: %s, want 200", paced, e)
		}
	}
	pins, unpins := p.e.Pins()
	if pins != unpins {
		t.Fatalf("after %d requests at 50 a second, %d of the loops' %d locks were never released", paced, pins-unpins, pins)
	}
	if got, want := b.Hits.Load(), int64(clients*each+paced); got != want {
		t.Fatalf("backend received %d requests, want %d", got, want)
	}
	t.Logf("%d locks and releases; all released after %d paced requests", pins, paced)
}

// backToBack starts clients connections to addr, each sending each GETs
// back to back; the function it returns waits for them and fails the test
// if any answer was not a 200.
func backToBack(t *testing.T, addr string, clients, each int) func() {
	var wg sync.WaitGroup
	errs := make(chan string, clients)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := proxytest.Dial(t, addr)
			for range each {
				c.Send("GET http://backend/ HTTP/1.1\r\nHost: backend\r\n\r\n")
				if resp, body := c.Answer("GET"); resp.StatusCode != 200 {
					errs <- resp.Status + " " + body
					return
				}
			}
		}()
	}
	return func() {
		t.Helper()
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Fatalf("a client got %s, want 200", e)
		}
	}
}
