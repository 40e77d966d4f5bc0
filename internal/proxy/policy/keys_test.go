package policy

import (
	"regexp"
	"runtime"
	"testing"
	"time"
)

// A generated key is the prefix and 32 hex digits, recognised as generated
// (so it makes nothing retryable), and fresh each time.
func TestNewKey(t *testing.T) {
	re := regexp.MustCompile(`^retrycap-gen-[0-9a-f]{32}$`)
	a, b := NewKey(), NewKey()
	for _, k := range [][]byte{a, b} {
		if !re.Match(k) || !IsGeneratedKey(k) || RetryableKey(k) {
			t.Fatalf("key %q: format %t generated %t retryable %t, want true true false", k, re.Match(k), IsGeneratedKey(k), RetryableKey(k))
		}
	}
	if string(a) == string(b) {
		t.Fatalf("two keys equal: %q", a)
	}
}

func TestKeyRetryableAndMayResend(t *testing.T) {
	gen := string(NewKey())
	for _, tc := range []struct {
		key   string
		dedup bool
		want  bool
	}{
		{"", false, false}, {"", true, false},
		{"client-key-1", false, true}, {"client-key-1", true, true},
		{gen, false, false}, {gen, true, true},
		{"RETRYCAP-GEN-abc", false, false}, {"RETRYCAP-GEN-abc", true, true},
	} {
		if got := KeyRetryable([]byte(tc.key), tc.dedup); got != tc.want {
			t.Errorf("KeyRetryable(%q, dedup %t) = %t, want %t", tc.key, tc.dedup, got, tc.want)
		}
	}
	for _, tc := range []struct{ wroteAny, replayable, want bool }{
		{false, false, true}, // never reached the upstream: any request
		{false, true, true},
		{true, true, true},   // may have reached it: only a replayable one
		{true, false, false}, // a keyless POST the upstream may be running
	} {
		if got := MayResend(tc.wroteAny, tc.replayable); got != tc.want {
			t.Errorf("MayResend(wroteAny %t, replayable %t) = %t, want %t", tc.wroteAny, tc.replayable, got, tc.want)
		}
	}
}

// A cancelled half-open probe gives its place back: the next attempt
// probes, and the breaker counts nothing for the cancellation.
func TestBreakerCancelProbe(t *testing.T) {
	b := NewBreaker(1, time.Second, time.Second)
	b.Failure(0, false)
	if ok, _ := b.Allow(1); ok {
		t.Fatal("open breaker allowed an attempt")
	}
	now := int64(2 * time.Second)
	if ok, probe := b.Allow(now); !ok || !probe {
		t.Fatalf("half-open: ok %t probe %t, want the probe", ok, probe)
	}
	if ok, _ := b.Allow(now); ok {
		t.Fatal("a second attempt while the probe runs")
	}
	b.Cancel(true)
	if s := b.State(now); s != BreakerHalfOpen {
		t.Fatalf("state %s after a cancelled probe, want half-open", s)
	}
	if ok, probe := b.Allow(now); !ok || !probe {
		t.Fatalf("after the cancel: ok %t probe %t, want a new probe", ok, probe)
	}
	b.Success(now, true)
	if s := b.State(now); s != BreakerClosed {
		t.Fatalf("state %s, want closed", s)
	}
}

// The ledger's memory does not grow with the keys' length: a client picks
// it (up to 1 MB on h2). 1,000 keys of 64 KiB held as they came were 64 MB;
// as digests they are a few hundred KB. Spending stays per key.
func TestKeyLedgerLongKeys(t *testing.T) {
	l := NewKeyLedger(time.Hour, 0)
	key := make([]byte, 64<<10)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range 1000 {
		key[0], key[1], key[len(key)-1] = byte(i), byte(i>>8), 'x'
		l.Add(key, 2, 1)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 8<<20 {
		t.Errorf("1,000 keys of 64 KiB grew the heap by %d bytes: the ledger holds the keys' bytes", grown)
	}
	if l.Len() != 1000 {
		t.Fatalf("%d keys held, want 1000", l.Len())
	}
	key[0], key[1] = 7, 0
	l.Add(key, 1, 2)
	if got := l.Spent(key, 3); got != 3 {
		t.Errorf("key 7 spent %d, want 3 (2 + 1)", got)
	}
	key[len(key)-1] = 'y' // differs in its last byte only
	if got := l.Spent(key, 3); got != 0 {
		t.Errorf("an unseen key spent %d, want 0", got)
	}
	runtime.KeepAlive(l)
}
