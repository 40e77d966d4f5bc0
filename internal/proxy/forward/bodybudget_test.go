package forward

import (
	"testing"
	"time"
)

// waitFor polls cond every millisecond for at most 20 s (a bound on a
// failure, not a synchronisation).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20s", what)
		}
	}
}

type grown struct {
	ok    bool
	inUse int64
}

func growAsync(b *BodyBudget, h *Hold, n int64, done <-chan struct{}) <-chan grown {
	ch := make(chan grown, 1)
	go func() {
		ok, inUse := b.Grow(h, n, time.Now().Add(time.Minute), done)
		ch <- grown{ok, inUse}
	}()
	return ch
}

// TestBodyBudgetShares: of 1 MiB, bodies over 64 KiB together hold at most
// 983,040 (a sixteenth kept); small bodies take any byte free; a hold
// that grows past 64 KiB counts in the large share whole.
func TestBodyBudgetShares(t *testing.T) {
	b := NewBodyBudget(1 << 20)
	if b.LargeMax() != 983040 {
		t.Fatalf("LargeMax %d, want 983040", b.LargeMax())
	}
	var s1, a, c, big, s2, s3, s4 Hold
	steps := []struct {
		h     *Hold
		n     int64
		ok    bool
		inUse int64
	}{
		{&s1, 1024, true, 1024},
		{&a, 524288, true, 525312},
		{&c, 40000, true, 565312},    // small so far
		{&c, 353216, true, 918528},   // grows to 393,216: large, 917,504 in all
		{&big, 70000, false, 918528}, // over the large share, though the budget has room
		{&s2, 65536, true, 984064},   // small ones take what is left
		{&s3, 64512, true, 1048576},
		{&s4, 1, false, 1048576}, // the whole budget is held
	}
	for i, st := range steps {
		if ok, inUse := b.Reserve(st.h, st.n); ok != st.ok || inUse != st.inUse {
			t.Fatalf("step %d: Reserve(%d) = %v, %d; want %v, %d", i, st.n, ok, inUse, st.ok, st.inUse)
		}
	}
	if got, want := b.RefusedBody(&big, 70000, 70000, 918528), "retrycap-proxy: request body of 70000 bytes refused: 918528 of the proxy's 1048576 buffered-body bytes (--max-buffered-body-bytes) are in use; bodies over 65536 bytes may hold 983040 (the rest is kept for smaller ones)\n"; got != want {
		t.Errorf("large words %q, want %q", got, want)
	}
	if got, want := b.RefusedBody(&s4, 1, 1, 1048576), "retrycap-proxy: request body of 1 bytes refused: 1048576 of the proxy's 1048576 buffered-body bytes (--max-buffered-body-bytes) are in use\n"; got != want {
		t.Errorf("small words %q, want %q", got, want)
	}
	for _, h := range []*Hold{&s1, &a, &c, &s2, &s3} {
		b.Release(h)
	}
	if b.InUse() != 0 || b.large != 0 || b.Refused() != 2 {
		t.Fatalf("after the releases: in use %d, large %d, refused %d; want 0, 0, 2", b.InUse(), b.large, b.Refused())
	}
}

// TestBodyBudgetGrowWaits: a growth that does not fit waits, the oldest
// body first; a large Reserve does not pass a waiter (a small one does);
// when only waiting bodies hold bytes the youngest is refused; a waiter
// whose hold is released, or whose done is closed, or whose deadline
// passed, gets false.
func TestBodyBudgetGrowWaits(t *testing.T) {
	b := NewBodyBudget(1 << 20) // large bodies: 983,040
	var a, y, other, late, small Hold
	mustReserve := func(h *Hold, n int64) {
		t.Helper()
		if ok, _ := b.Reserve(h, n); !ok {
			t.Fatalf("Reserve(%d) refused", n)
		}
	}
	mustReserve(&a, 262144)     // the oldest
	mustReserve(&y, 262144)     // younger
	mustReserve(&other, 262144) // held by no waiter
	ga := growAsync(b, &a, 524288, nil)
	waitFor(t, "a waits", func() bool { return b.Waiting() == 1 })
	if ok, _ := b.Reserve(&late, 70000); ok {
		t.Fatal("a large Reserve passed the waiting body")
	}
	mustReserve(&small, 1024) // a small one may
	b.Release(&small)
	gy := growAsync(b, &y, 524288, nil)
	waitFor(t, "y waits", func() bool { return b.Waiting() == 2 })
	// other, no waiter, holds bytes: nobody is refused while it may free
	// them. Released, only waiters hold bytes (524,288) and a still does
	// not fit (1,048,576 large, over 983,040): y, the younger, is refused;
	// its bytes released, a fits.
	b.Release(&other)
	if g := <-gy; g.ok || g.inUse != 524288 {
		t.Fatalf("y: %+v, want refused with 524288 in use", g)
	}
	b.Release(&y)
	if g := <-ga; !g.ok || g.inUse != 786432 {
		t.Fatalf("a: %+v, want granted, 786432 in use", g)
	}
	if b.Waiting() != 0 {
		t.Fatalf("%d waiting, want 0", b.Waiting())
	}

	// A waiter released (its connection closed) or done, or out of time.
	var w Hold
	mustReserve(&w, 65537)
	gw := growAsync(b, &w, 524288, nil)
	waitFor(t, "w waits", func() bool { return b.Waiting() == 1 })
	b.Release(&w)
	if g := <-gw; g.ok {
		t.Fatalf("a released waiter granted: %+v", g)
	}
	done := make(chan struct{})
	gd := growAsync(b, &w, 524288, done)
	waitFor(t, "w waits", func() bool { return b.Waiting() == 1 })
	close(done)
	if g := <-gd; g.ok {
		t.Fatalf("a done waiter granted: %+v", g)
	}
	if ok, _ := b.Grow(&w, 524288, time.Now(), nil); ok {
		t.Fatal("granted after its deadline")
	}
	b.Release(&w)
	b.Release(&a)
	if b.InUse() != 0 || b.Waiting() != 0 || b.waitHeld != 0 || b.large != 0 {
		t.Fatalf("after: in use %d, waiting %d, waitHeld %d, large %d; want 0", b.InUse(), b.Waiting(), b.waitHeld, b.large)
	}
}

// TestBodyBudgetReleaseFreedPart: an outgrown buffer of 1 MiB or more comes
// back after the collection, the hold going on with the rest, large.
func TestBodyBudgetReleaseFreedPart(t *testing.T) {
	b := NewBodyBudget(64 << 20)
	var h Hold
	if ok, _ := b.Reserve(&h, 3<<20); !ok {
		t.Fatal("refused")
	}
	b.ReleaseFreedPart(&h, 1<<20)
	waitFor(t, "the part released", func() bool { return b.InUse() == 2<<20 })
	b.mu.Lock()
	n, large, l := h.n, h.large, b.large
	b.mu.Unlock()
	if n != 2<<20 || !large || l != 2<<20 {
		t.Fatalf("hold %d large %v, budget large %d; want 2 MiB, true, 2 MiB", n, large, l)
	}
	b.ReleaseFreed(&h)
	waitFor(t, "all released", func() bool { return b.InUse() == 0 })
}
