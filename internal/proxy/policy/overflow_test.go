package policy

import (
	"math"
	"testing"
	"time"

	"github.com/retrycap/retrycap/api/v1alpha1/defaults"
)

// TestBackoffSaturates (issue 25): base x 2^(n-1) saturates at max (or at the largest duration
// with no cap) instead of wrapping. Before, Backoff(2^62, maxInt64, 2) was -2^63 (a negative
// wait: an immediate retry), Backoff(1ns, maxInt64, 100) was 0, and with jitter the largest c
// made rand.Int64N(c+1) panic.
func TestBackoffSaturates(t *testing.T) {
	const maxD = time.Duration(math.MaxInt64)
	bound := defaults.BackoffBoundMax
	for _, tc := range []struct {
		base, max time.Duration
		n         int
		want      time.Duration
	}{
		{1 << 62, maxD, 2, maxD},
		{1 << 62, maxD, 3, maxD},
		{1 << 62, 0, 2, maxD}, // no cap
		{1, maxD, 100, maxD},
		{1, maxD, 63, 1 << 62},
		{1, maxD, 64, maxD},
		{1, maxD, math.MaxInt, maxD},
		{maxD, maxD, 1, maxD},
		{maxD, maxD, math.MaxInt, maxD},
		{maxD, bound, 5, bound}, // base over max: max
		{bound, bound, 100, bound},
		{bound + 1, bound + 1, 100, bound + 1},
		{time.Millisecond, bound, 17, bound}, // 1ms x 2^16 = 65.5s > 1m
		{time.Millisecond, bound, 16, 32768 * time.Millisecond},
		{100 * time.Millisecond, 2 * time.Second, math.MaxInt, 2 * time.Second},
		{-1, maxD, 3, 0},
		{time.Second, maxD, 0, 0},
		{time.Second, maxD, -5, 0},
	} {
		if got := Backoff(tc.base, tc.max, tc.n, false); got != tc.want {
			t.Errorf("Backoff(%d, %d, %d) = %d, want %d", tc.base, tc.max, tc.n, got, tc.want)
		}
		for range 50 {
			if got := Backoff(tc.base, tc.max, tc.n, true); got < 0 || got > tc.want {
				t.Fatalf("Backoff(%d, %d, %d, jitter) = %d, want 0..%d", tc.base, tc.max, tc.n, got, tc.want)
			}
		}
	}
}

// TestRetryAfterSaturates: delay-seconds past the largest duration is the largest duration (a
// wait no deadline covers: no retry), never a wrapped short wait. Before, "18446744074" (2^64 ns
// / 1e9, rounded up) read as 290.448384ms and 9223372037 as a negative wait.
func TestRetryAfterSaturates(t *testing.T) {
	now := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	const maxD = time.Duration(math.MaxInt64)
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"9223372036", 9223372036 * time.Second}, // the largest whole-second duration
		{"9223372037", maxD},
		{"18446744074", maxD},
		{"9223372036854775807", maxD},
		{"9223372036854775808", maxD}, // past int64
		{"4611686018", 4611686018 * time.Second},
		{"Fri, 31 Dec 9999 23:59:59 GMT", maxD - now.Sub(now)}, // time.Sub saturates
	} {
		got, ok := ParseRetryAfter(tc.in, now)
		if !ok || got != tc.want {
			t.Errorf("ParseRetryAfter(%q) = %d, %t; want %d, true", tc.in, got, ok, tc.want)
		}
	}
	// Through Decide: a 503 asking for so long a wait is not retried (reason retry-after).
	p := &Policy{RetryOn: mustRetryOn(t, "503"), BackoffBase: time.Millisecond, BackoffMax: time.Second}
	for _, v := range []string{"18446744074", "9223372037", "99999999999999999999"} {
		ra, has := ParseRetryAfter(v, now)
		o := &Outcome{Attempt: 1, MaxAttempts: 3, Status: 503, Retryable: true, RetryAfter: ra, HasRetryAfter: has, Remaining: 10 * time.Second}
		if d := p.Decide(o, nil, nil, 0); d.Retry || d.Reason != ReasonRetryAfter {
			t.Errorf("Retry-After: %s: %+v, want no retry (retry-after)", v, d)
		}
	}
}

// TestRetryNeverOutlastsTheDeadline (item 5 of issue 25): whatever the backoff (up to the bound
// and past it), the Retry-After and the time left, a retry Decide allows starts before the
// caller's deadline, with at least half a try left: its Wait is never negative and never as
// long as the time left.
func TestRetryNeverOutlastsTheDeadline(t *testing.T) {
	const ms = int64(time.Millisecond)
	const maxD = time.Duration(math.MaxInt64)
	start := int64(1_000_000) * ms
	for _, bk := range []struct{ base, max time.Duration }{
		{time.Millisecond, time.Millisecond}, {100 * time.Millisecond, 2 * time.Second},
		{defaults.BackoffBoundMax, defaults.BackoffBoundMax}, {1 << 62, maxD},
	} {
		for _, jitter := range []bool{false, true} {
			p := &Policy{RetryOn: mustRetryOn(t, "503"), BackoffBase: bk.base, BackoffMax: bk.max, Jitter: jitter}
			for _, arrived := range []time.Duration{time.Millisecond, 500 * time.Millisecond, 5 * time.Second, time.Minute, defaults.MaxTimeToAnswerMax, 1 << 62} {
				dl := DeadlineAt(start, arrived, true)
				for _, elapsed := range []time.Duration{0, arrived / 3, arrived - 1, arrived, arrived + time.Hour} {
					now := start + int64(elapsed)
					for _, ra := range []struct {
						d   time.Duration
						has bool
					}{{0, false}, {0, true}, {time.Second, true}, {maxD, true}} {
						for attempt := 1; attempt <= 40; attempt += 13 {
							o := &Outcome{Attempt: attempt, MaxAttempts: 100, Status: 503, Retryable: true,
								RetryAfter: ra.d, HasRetryAfter: ra.has, Remaining: dl.Left(now),
								Deadline: dl, PerTry: 0, Arrived: arrived}
							d := p.Decide(o, nil, nil, now)
							if !d.Retry {
								continue
							}
							if left := dl.Left(now); d.Wait < 0 || d.Wait >= left || left-d.Wait < arrived/2 {
								t.Fatalf("base %v max %v jitter %t arrived %v elapsed %v retry-after %v attempt %d: wait %v with %v left",
									bk.base, bk.max, jitter, arrived, elapsed, ra, attempt, d.Wait, left)
							}
						}
					}
				}
			}
		}
	}
}

// TestRetryFitsDoesNotWrap: Left - backoff wrapped to a large positive time when the deadline
// was past and the backoff near the largest duration (-2ns - maxInt64 = maxInt64).
func TestRetryFitsDoesNotWrap(t *testing.T) {
	dl := DeadlineAt(0, time.Second, true)
	now := int64(time.Second) + 2 // 2ns past the deadline
	for _, b := range []time.Duration{math.MaxInt64, math.MaxInt64 - 1, 1 << 62, -1, math.MinInt64} {
		if dl.RetryFits(now, b, time.Millisecond, time.Second) {
			t.Errorf("RetryFits(2ns past the deadline, backoff %d) = true", b)
		}
	}
	if dl.RetryFits(0, math.MaxInt64, time.Millisecond, time.Second) {
		t.Error("RetryFits(a second left, backoff maxInt64) = true")
	}
}

func mustRetryOn(t *testing.T, s string) RetryOn {
	t.Helper()
	r, err := ParseRetryOn(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
