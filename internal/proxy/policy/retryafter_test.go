package policy

import (
	"math"
	"net/http"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{"3", 3 * time.Second, true},
		{" 120 ", 120 * time.Second, true},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
		{"Wed, 02 Dec 2026 04:00:30 GMT", 30 * time.Second, true}, // IMF-fixdate
		{"Wednesday, 02-Dec-26 04:01:00 GMT", time.Minute, true},  // RFC 850
		{"Wed Dec  2 04:00:05 2026", 5 * time.Second, true},       // asctime
		{"Wed, 02 Dec 2026 03:59:00 GMT", 0, true},                // past: no wait
		{"Wed, 02 Dec 2026 04:00:30 +0000", 0, false},             // not an HTTP-date
		{"99999999999999999999", math.MaxInt64, true},             // past int64: saturated, longer than any deadline (was absent: a retry at once)
	}
	for _, c := range cases {
		got, ok := ParseRetryAfter(c.in, now)
		if got != c.want || ok != c.ok {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// The date forms are exactly the ones net/http accepts (the test may use
// net/http; the package may not).
func TestParseRetryAfterMatchesNetHTTP(t *testing.T) {
	now := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	for _, v := range []string{
		"Wed, 02 Dec 2026 04:00:30 GMT", "Wednesday, 02-Dec-26 04:01:00 GMT", "Wed Dec  2 04:00:05 2026",
		"Wed, 02 Dec 2026 04:00:30 +0000", "2026-12-02T04:00:30Z", "",
	} {
		ht, herr := http.ParseTime(v)
		got, ok := ParseRetryAfter(v, now)
		if ok != (herr == nil) {
			t.Errorf("%q: ok %v, net/http err %v", v, ok, herr)
			continue
		}
		if ok && got != max(ht.Sub(now), 0) {
			t.Errorf("%q: %v, net/http %v", v, got, ht.Sub(now))
		}
	}
}
