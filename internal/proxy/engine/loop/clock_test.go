//go:build linux

package loop

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/retrycap/retrycap/internal/proxy/forward"
	"github.com/retrycap/retrycap/internal/proxy/netpoll"
	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// The loop's clock after an idle wait. A loop reads the clock once per
// wake-up; it once read it only after a batch of events, so each handler
// saw the time of the wake-up before, stale by however long the loop had
// slept: a per-try timer armed from it was due at once after a pause longer
// than the per-try timeout (an attempt at a healthy upstream timed out after
// 31 µs, one at a hung upstream lasted 320 ms of 500). These tests idle a
// loop longer than the per-try timeout, which is the scenario, not a
// synchronisation: nothing waits for the proxy by sleeping.

const (
	clockPerTry = time.Second             // a healthy answer under a loaded CI machine stays well inside it
	clockIdle   = 1500 * time.Millisecond // > clockPerTry
)

// quiet pushes every loop's sweep an hour out, so that only sockets and
// tasks wake a loop: between two requests it sleeps in epoll_wait.
func quiet(t *testing.T, p *testProxy) {
	t.Helper()
	for _, l := range p.e.loops {
		set := make(chan struct{})
		l.poll.Post(func() {
			l.sweepInterval = int64(time.Hour)
			l.timers.Schedule(l.sweepT, l.now()+l.sweepInterval)
			close(set)
		})
		proxytest.Wait(t, set, "the sweep pushed out on the loop")
	}
}

func withPerTry(cfg *forward.Config) { cfg.PerTryTimeout = clockPerTry }

// TestLoopClockFreshInTask: a task posted to a loop that slept sees a
// clock no older than its posting.
func TestLoopClockFreshInTask(t *testing.T) {
	p := startLoops(t, "backend=1", "backend=127.0.0.1:1")
	quiet(t, p)
	for i, l := range p.e.loops {
		time.Sleep(clockIdle / 3) // the loop idle in epoll_wait
		before := forward.NowNanos()
		var got int64
		done := make(chan struct{})
		l.poll.Post(func() { got = l.now(); close(done) })
		proxytest.Wait(t, done, "the task run")
		if got < before {
			t.Fatalf("loop %d: a task posted at %d saw the clock at %d, %v stale", i, before, got, time.Duration(before-got))
		}
	}
}

// TestLoopPerTryAfterIdleHealthy: two GETs clockIdle apart on one
// keep-alive connection to a healthy upstream: both answered 200, each
// with exactly one attempt (the second was once timed out at once on the
// pooled connection and re-sent: two executions at the upstream).
func TestLoopPerTryAfterIdleHealthy(t *testing.T) {
	b := proxytest.NewBackend(t, nil)
	p := startLoopsWith(t, "backend=3", "backend="+b.Addr(), withPerTry)
	quiet(t, p)
	c := proxytest.Dial(t, p.Addr())
	c.Send("GET http://backend/one HTTP/1.1\r\nHost: backend\r\n\r\n")
	c.Expect("", 200, "/one:")
	time.Sleep(clockIdle)
	c.Send("GET http://backend/two HTTP/1.1\r\nHost: backend\r\n\r\n")
	c.Expect("", 200, "/two:")
	ltWantIdle(t, p)
	reqs := b.Requests()
	if len(reqs) != 2 || reqs[0].URI != "http://backend/one" && reqs[0].URI != "/one" || reqs[1].URI != "http://backend/two" && reqs[1].URI != "/two" {
		t.Fatalf("the upstream served %+v, want /one then /two, once each", reqs)
	}
	if n := b.Conns.Load(); n != 1 {
		t.Fatalf("the upstream saw %d connections, want 1 (the pooled one re-used, never timed out)", n)
	}
	up := p.f.Upstreams[0]
	if n := testutil.ToFloat64(up.M.Attempts); n != 2 {
		t.Fatalf("%v attempts counted, want 2", n)
	}
	if n := testutil.ToFloat64(p.f.M.StaleResends); n != 0 {
		t.Fatalf("%v stale re-sends, want 0", n)
	}
}

// TestLoopPerTryAfterIdleHung: after the loop idled clockIdle, an attempt
// at an upstream that accepts and never answers lasts the per-try timeout,
// measured at the upstream from its accept to the proxy's close.
func TestLoopPerTryAfterIdleHung(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	held := make(chan time.Duration, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		accepted := time.Now()
		defer conn.Close()
		_, err = io.Copy(io.Discard, conn) // until the proxy closes its end
		if err != nil && !errors.Is(err, net.ErrClosed) {
			t.Logf("hung upstream: reading: %v", err)
		}
		held <- time.Since(accepted)
	}()
	p := startLoopsWith(t, "backend=1", "backend="+ln.Addr().String(), withPerTry)
	quiet(t, p)
	c := proxytest.Dial(t, p.Addr())
	proxytest.Eventually(t, "the client connection adopted by a loop", func() bool {
		return ltClientFlags(p, func(*cliConn) bool { return true })
	})
	time.Sleep(clockIdle)
	c.Send("GET http://backend/hung HTTP/1.1\r\nHost: backend\r\n\r\n")
	resp, body := c.Answer("")
	if want := "retrycap-proxy: upstream backend (" + ln.Addr().String() + "): 1 attempt(s), last failed with timeout (no answer within the per-try timeout " + clockPerTry.String() + ")\n"; resp.StatusCode != 504 || body != want {
		t.Fatalf("answer %d %q, want 504 %q", resp.StatusCode, body, want)
	}
	var d time.Duration
	select {
	case d = <-held:
	case <-time.After(proxytest.Bound):
		t.Fatalf("the hung upstream's connection not closed within %v", proxytest.Bound)
	}
	// A lower bound only. The timer is armed from the clock of the
	// wake-up that read the request, a few microseconds before the connect,
	// and the upstream's goroutine sees its accept a scheduling delay late:
	// hence the 10 ms of slack, far below the stale clock's shortfall (the
	// attempt was cut at once, after ~0 ms).
	if d < clockPerTry-10*time.Millisecond {
		t.Fatalf("the attempt held the upstream %v, want the per-try timeout %v", d, clockPerTry)
	}
	t.Logf("the attempt held the upstream %v (per-try timeout %v)", d, clockPerTry)
}

// TestLoopPoolCutoffAfterIdle: a pooled upstream connection idle longer
// than --upstream-idle-timeout is not re-used by the first request after
// the loop slept (the cutoff was once taken from the stale clock, so the
// connection looked idle for no time at all), even before a sweep closed it.
func TestLoopPoolCutoffAfterIdle(t *testing.T) {
	b := proxytest.NewBackend(t, nil)
	p := startLoops(t, "backend=3", "backend="+b.Addr())
	quiet(t, p)
	for _, l := range p.e.loops {
		set := make(chan struct{})
		l.poll.Post(func() { l.upstreamIdle = clockPerTry; close(set) })
		proxytest.Wait(t, set, "idle timeout set on the loop")
	}
	c := proxytest.Dial(t, p.Addr())
	c.Send("GET http://backend/one HTTP/1.1\r\nHost: backend\r\n\r\n")
	c.Expect("", 200, "/one:")
	if n := ltIdleUpstreams(p); n != 1 {
		t.Fatalf("%d pooled upstream connections after a request, want 1", n)
	}
	time.Sleep(clockIdle) // idle past the idle timeout, no sweep
	c.Send("GET http://backend/two HTTP/1.1\r\nHost: backend\r\n\r\n")
	c.Expect("", 200, "/two:")
	if n := b.Conns.Load(); n != 2 {
		t.Fatalf("the upstream saw %d connections, want 2 (the one idle past the timeout not re-used)", n)
	}
}

// TestLoopHeadStartAfterIdle: the --http-request-timeout of a keep-alive
// connection's next request runs from its first byte, not from the loop's
// previous wake-up (a request after a pause was once cut that much early).
func TestLoopHeadStartAfterIdle(t *testing.T) {
	b := proxytest.NewBackend(t, nil)
	p := startLoops(t, "backend=3", "backend="+b.Addr())
	quiet(t, p)
	c := proxytest.Dial(t, p.Addr())
	c.Send("GET http://backend/one HTTP/1.1\r\nHost: backend\r\n\r\n")
	c.Expect("", 200, "/one:")
	time.Sleep(clockIdle)
	before := forward.NowNanos()
	c.Send("GET http://backend/two HTTP/1.1\r\n") // a partial head
	var start, active int64
	proxytest.Eventually(t, "the partial head read", func() bool {
		return ltClientFlags(p, func(c *cliConn) bool {
			start, active = c.headStart, c.lastActive
			return c.headStart != 0
		})
	})
	if start < before || active < before {
		t.Fatalf("a head begun at %d: its start taken at %d (%v early), the connection's activity at %d",
			before, start, time.Duration(before-start), active)
	}
	c.Send("Host: backend\r\n\r\n")
	c.Expect("", 200, "/two:")
}

// BenchmarkLoopClock is the cost of the loop's clock against a wake-up:
// now() within a batch (the cached value), the one read a wake-up pays
// (now() after the wait), and, as the anchor in the same run, a wake-up of
// an idle poller by a posted task (eventfd write, epoll_wait, eventfd read).
func BenchmarkLoopClock(b *testing.B) {
	l := &evLoop{}
	l.refresh()
	var sink int64
	b.Run("cached", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			sink += l.now()
		}
	})
	b.Run("wake-read", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			l.stale = true
			sink += l.now()
		}
	})
	b.Run("wake-up", func(b *testing.B) {
		poll, err := netpoll.New()
		if err != nil {
			b.Fatal(err)
		}
		defer poll.Close()
		ran := 0
		task := func() { ran++ }
		run := func(fn func()) { fn() }
		b.ReportAllocs()
		for range b.N {
			poll.Post(task)
			if _, err := poll.Wait(-1, nil, run); err != nil {
				b.Fatal(err)
			}
		}
		if ran != b.N {
			b.Fatalf("%d tasks ran, want %d", ran, b.N)
		}
	})
	if sink == 0 {
		b.Fatal("the clock read 0")
	}
}
