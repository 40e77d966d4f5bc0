package h2

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// A client connection nothing is read from gets a PING (both engines, as
// net/http's server does with SendPingTimeout); answered, the next one
// comes after the next quiet interval; unanswered, the connection is
// closed without a GOAWAY. The intervals are Config's, short here; the
// test waits on frames, not on time.

func TestKeepalivePing(t *testing.T) {
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: "127.0.0.1:1", attempts: 1, pingInterval: 50 * time.Millisecond, pingTimeout: 2 * time.Second})
	rc := newRawClient(t, h)
	isPing := func(f http2.Frame) bool { p, ok := f.(*http2.PingFrame); return ok && !p.IsAck() }
	p1 := rc.until("the first PING", isPing).(*http2.PingFrame)
	rc.w <- func() { _ = rc.fr.WritePing(true, p1.Data) }
	p2 := rc.until("the second PING (the first was answered)", isPing).(*http2.PingFrame)
	if p2.Data == p1.Data {
		t.Fatalf("both PINGs carry %v", p1.Data)
	}
	// Not answered: the connection ends, with nothing more written.
	f, err := rc.fr.ReadFrame()
	if err == nil {
		t.Fatalf("after an unanswered PING: %v, want the connection closed", f)
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("after an unanswered PING: %v, want EOF", err)
	}
}

// A client connection without a stream for IdleTimeout gets GOAWAY
// (NO_ERROR, last stream 0) and is closed, on both engines.

func TestIdleConnectionClosed(t *testing.T) {
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: "127.0.0.1:1", attempts: 1, idle: 100 * time.Millisecond})
	rc := newRawClient(t, h)
	g := rc.until("GOAWAY", func(f http2.Frame) bool { _, ok := f.(*http2.GoAwayFrame); return ok }).(*http2.GoAwayFrame)
	if g.ErrCode != http2.ErrCodeNo || g.LastStreamID != 0 {
		t.Fatalf("GOAWAY %v last stream %d, want NO_ERROR 0", g.ErrCode, g.LastStreamID)
	}
	for {
		f, err := rc.fr.ReadFrame()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
				t.Fatalf("after GOAWAY: %v, want EOF", err)
			}
			return
		}
		if _, ok := f.(*http2.SettingsFrame); !ok {
			t.Fatalf("after GOAWAY: %v", f)
		}
	}
}

// The per-try timeout (one timer per client connection on the relay)
// ends an attempt without its response headers: two hanging attempts,
// then the third answers; eight calls at once on one connection, so the
// attempts' timeouts interleave.

func TestPerTryTimeoutRetried(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	b := startBackend(t, &backend{unary: func(ctx context.Context, _ int, in string) (string, error) {
		mu.Lock()
		seen[in]++
		n := seen[in]
		mu.Unlock()
		if n < 3 {
			<-ctx.Done() // hangs until the proxy gives the attempt up
			return "", ctx.Err()
		}
		return "ok " + in, nil
	}})
	h, reg := newHandler(t, proxyOpts{name: "echo", addr: b.addr, attempts: 3, perTry: time.Second,
		retryOn: "connect-failure,reset,timeout,unavailable"})
	theFront.route(t, "echo", h, b.addr)
	cc := dialName(t, "echo")
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := strconv.Itoa(i)
			out, err := callUnary(ctxT(t), cc, in)
			if err == nil && out != "ok "+in {
				err = fmt.Errorf("answer %q", out)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	want := "retrycap_proxy_h2_attempts_total{protocol=grpc,upstream=echo} 24\n" +
		"retrycap_proxy_h2_connections_total{kind=connect} 1\n" +
		"retrycap_proxy_h2_requests_total{code=OK,protocol=grpc,upstream=echo} 8\n" +
		"retrycap_proxy_h2_retries_total{protocol=grpc,upstream=echo} 16\n"
	if got := h2Counters(t, reg); got != want {
		t.Fatalf("metrics:\n%s\nwant:\n%s", got, want)
	}
}

// A client connection's attempts under way form a list in due order:
// with one timeout, start order; an attempt with a shorter timeout (a
// caller's deadline, an upstream's own per-try timeout) goes before those
// due later. Unlinking keeps the others in order, twice is a no-op.
func TestTriesList(t *testing.T) {
	cc := &cconn{h: &Handler{cfg: Config{PerTryTimeout: time.Hour}}, born: time.Now()}
	as := []*ratt{{attemptState: attemptState{n: 1}}, {attemptState: attemptState{n: 2}}, {attemptState: attemptState{n: 3}}, {attemptState: attemptState{n: 4}}}
	for _, a := range as {
		cc.trackTry(a, time.Hour)
	}
	defer cc.tries.Stop()
	order := func() (out []int) {
		for a := cc.tryHead; a != nil; a = a.tnext {
			out = append(out, a.n)
		}
		if cc.tryTail != nil && cc.tryTail.tnext != nil {
			t.Fatal("tail has a successor")
		}
		return out
	}
	for i, step := range []struct {
		untrack int
		want    []int
	}{{2, []int{1, 3, 4}}, {2, []int{1, 3, 4}}, {1, []int{3, 4}}, {4, []int{3}}, {3, nil}} {
		cc.untrackTry(as[step.untrack-1])
		if got := order(); !slices.Equal(got, step.want) {
			t.Fatalf("step %d: list %v, want %v", i, got, step.want)
		}
	}
	if cc.tryHead != nil || cc.tryTail != nil {
		t.Fatal("empty list has a head or a tail")
	}
	for i := 1; i < len(as); i++ {
		if as[i].due < as[i-1].due {
			t.Fatalf("attempt %d due before attempt %d", i+1, i)
		}
	}
	// Mixed timeouts: 1 (1h), 2 (1m: before 1), 3 (2h: the tail),
	// 4 (1s: the head), 5 (30m: between 2 and 1).
	as = []*ratt{{attemptState: attemptState{n: 1}}, {attemptState: attemptState{n: 2}}, {attemptState: attemptState{n: 3}}, {attemptState: attemptState{n: 4}}, {attemptState: attemptState{n: 5}}}
	for i, d := range []time.Duration{time.Hour, time.Minute, 2 * time.Hour, time.Second, 30 * time.Minute} {
		cc.trackTry(as[i], d)
	}
	if got, want := order(), []int{4, 2, 5, 1, 3}; !slices.Equal(got, want) {
		t.Fatalf("mixed timeouts: list %v, want %v", got, want)
	}
	var back []int
	for a := cc.tryTail; a != nil; a = a.tprev {
		back = append(back, a.n)
	}
	if want := []int{3, 1, 5, 2, 4}; !slices.Equal(back, want) {
		t.Fatalf("mixed timeouts backwards: %v, want %v", back, want)
	}
	cc.untrackTry(as[4])
	cc.untrackTry(as[3])
	if got, want := order(), []int{2, 1, 3}; !slices.Equal(got, want) {
		t.Fatalf("after unlinking 5 and 4: %v, want %v", got, want)
	}
}

// The per-try timer is moved only for an attempt due before it: armed
// for an attempt that ended since, it is left be (it fires, finds nothing
// due and re-arms for the head), so a connection's steady calls do not
// move a runtime timer each (before: a Reset per call whenever the list
// was empty, which wakes a thread; docs/decisions.md).
func TestTriesTimerMovedOnlyEarlier(t *testing.T) {
	cc := &cconn{h: &Handler{cfg: Config{PerTryTimeout: time.Hour}}, born: time.Now()}
	a, b, c := &ratt{}, &ratt{}, &ratt{}
	cc.trackTry(a, time.Hour)
	defer cc.tries.Stop()
	if !cc.triesArmed || cc.triesAt != a.due {
		t.Fatalf("after the first attempt: armed %v at %v, want true at %v", cc.triesArmed, cc.triesAt, a.due)
	}
	cc.untrackTry(a)
	cc.trackTry(b, time.Hour) // due after a: the timer stays at a's
	if !cc.triesArmed || cc.triesAt != a.due || b.due <= a.due {
		t.Fatalf("after a later attempt: armed %v at %v (b due %v), want true at %v", cc.triesArmed, cc.triesAt, b.due, a.due)
	}
	cc.trackTry(c, time.Minute) // due before a's: moved to c's
	if !cc.triesArmed || cc.triesAt != c.due {
		t.Fatalf("after an earlier attempt: armed %v at %v, want true at %v", cc.triesArmed, cc.triesAt, c.due)
	}
}
