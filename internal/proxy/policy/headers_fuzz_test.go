package policy

import (
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The header parsers below read what an app or an upstream sends; each
// target checks it against the grammar written as a regular expression or
// with the standard library (a differential: both must agree on every
// input), and that formatting a parsed value and parsing it again gives the
// value back. go test runs the seeds and testdata/fuzz; go test -run '^$'
// -fuzz '^FuzzX$' ./internal/proxy/policy fuzzes one.

// deadlineRE is Retrycap-Deadline's grammar: a decimal integer between
// optional spaces and tabs.
var deadlineRE = regexp.MustCompile(`^[ \t]*([0-9]+)[ \t]*$`)

// wantDeadline is what a Retrycap-Deadline value means by the grammar and
// strconv: a value over MaxDeadline is malformed.
func wantDeadline(b []byte) (int64, bool) {
	m := deadlineRE.FindSubmatch(b)
	if m == nil {
		return 0, false
	}
	n, err := strconv.ParseUint(string(m[1]), 10, 64)
	if err != nil || n > uint64(maxDeadlineMs) {
		return 0, false
	}
	return int64(n), true
}

func FuzzParseDeadlineHeader(f *testing.F) {
	for _, s := range []string{"0", " 250 ", "86400000", "86400001", "-1", "+5", "1.5", "", "\t7\t", "0000000000005", "99999999999999999999", "1e3"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, ok := ParseDeadlineHeader(b)
		want, wantOK := wantDeadline(b)
		if ms != want || ok != wantOK {
			t.Fatalf("ParseDeadlineHeader(%q) = %d, %v; the grammar says %d, %v", b, ms, ok, want, wantOK)
		}
		if ok {
			if m, ok2 := ParseDeadlineHeader(AppendInt(nil, int(ms))); !ok2 || m != ms {
				t.Fatalf("round trip %d -> %d %v", ms, m, ok2)
			}
		}
		// A list holds the smallest well-formed item of its comma-separated items.
		var least int64
		var any bool
		for item := range strings.SplitSeq(string(b), ",") {
			if m, ok := wantDeadline([]byte(item)); ok && (!any || m < least) {
				least, any = m, true
			}
		}
		if m, ok := ParseDeadlineList(b); m != least || ok != any {
			t.Fatalf("ParseDeadlineList(%q) = %d, %v; want %d, %v", b, m, ok, least, any)
		}
	})
}

func FuzzParseDeadlineBaggage(f *testing.F) {
	for _, s := range []string{"retrycap-deadline=300", "a=1, retrycap-deadline=20;p=1", "retrycap-deadline=", ",,,", "=,=", "RETRYCAP-DEADLINE=9", "retrycap-deadline=5,retrycap-deadline=2", "retrycap-budget=3,retrycap-deadline=86400001"} {
		f.Add([]byte(s), int64(250))
	}
	f.Fuzz(func(t *testing.T, b []byte, ms int64) {
		if n, ok := ParseDeadlineBaggage(b); ok && (n < 0 || n > maxDeadlineMs) {
			t.Fatalf("ParseDeadlineBaggage(%q) = %d", b, n)
		}
		ms = min(max(ms, 0), maxDeadlineMs)
		// Writing the member and parsing it back yields the written value, and leaves the
		// budget member (if any) as it was.
		out := AppendDeadlineBaggage(nil, b, ms)
		if m, ok := ParseDeadlineBaggage(out); !ok || m != ms {
			t.Fatalf("AppendDeadlineBaggage(%q, %d) = %q parses to %d, %v", b, ms, out, m, ok)
		}
		n0, ok0 := ParseBaggage(b)
		if n1, ok1 := ParseBaggage(out); ok0 && (!ok1 || n1 > n0) {
			t.Fatalf("AppendDeadlineBaggage(%q) = %q: budget %d, %v -> %d, %v", b, out, n0, ok0, n1, ok1)
		}
	})
}

// grpcTimeoutRE is gRPC's TimeoutValue TimeoutUnit (gRPC over HTTP/2).
var grpcTimeoutRE = regexp.MustCompile(`^([0-9]{1,8})([HMSmun])$`)

func FuzzParseGRPCTimeout(f *testing.F) {
	for _, s := range []string{"100m", "1S", "99999999H", "0n", "123456789m", "5", "m", "-1S", "1s", " 1S", "00000001u"} {
		f.Add([]byte(s), int64(1500*time.Millisecond))
	}
	units := map[string]time.Duration{"H": time.Hour, "M": time.Minute, "S": time.Second, "m": time.Millisecond, "u": time.Microsecond, "n": time.Nanosecond}
	f.Fuzz(func(t *testing.T, b []byte, d int64) {
		got, ok := ParseGRPCTimeout(b)
		var want time.Duration
		m := grpcTimeoutRE.FindSubmatch(b)
		if m != nil {
			n, _ := strconv.ParseInt(string(m[1]), 10, 64)
			u := units[string(m[2])]
			want = maxGRPCTimeout
			if n <= int64(maxGRPCTimeout/u) {
				want = time.Duration(n) * u
			}
		}
		if ok != (m != nil) || got != want {
			t.Fatalf("ParseGRPCTimeout(%q) = %v, %v; the grammar says %v, %v", b, got, ok, want, m != nil)
		}
		// Formatting d and parsing it back rounds down (a hop only lowers a deadline) by less
		// than the unit written, and is exact below 100ms (8 digits of nanoseconds).
		out := AppendGRPCTimeout(nil, time.Duration(d))
		back, ok := ParseGRPCTimeout(out)
		if !ok {
			t.Fatalf("AppendGRPCTimeout(%d) = %q does not parse", d, out)
		}
		want = max(time.Duration(d), 0)
		if back > want || want-back >= units[string(out[len(out)-1:])] || (want < 100000000 && back != want) {
			t.Fatalf("AppendGRPCTimeout(%v) = %q parses to %v", want, out, back)
		}
	})
}

// retryAfterSecondsRE is delay-seconds (RFC 9110 10.2.3), between the
// spaces a field value may carry.
var retryAfterSecondsRE = regexp.MustCompile(`^[ \t]*([0-9]+)[ \t]*$`)

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"120", "0", "-1", "+5", " 7 ", "18446744074", "99999999999999999999999", "Wed, 21 Oct 2015 07:28:00 GMT", "Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "", "1.5"} {
		f.Add(s, uint32(30))
	}
	now := time.Date(2026, 12, 3, 11, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string, secs uint32) {
		wait, ok := ParseRetryAfter(v, now)
		if wait < 0 || (!ok && wait != 0) {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v", v, wait, ok)
		}
		if m := retryAfterSecondsRE.FindStringSubmatch(v); m != nil {
			want := time.Duration(math.MaxInt64)
			if n, err := strconv.ParseUint(m[1], 10, 64); err == nil && n <= uint64(math.MaxInt64/time.Second) {
				want = time.Duration(n) * time.Second
			}
			if !ok || wait != want {
				t.Fatalf("ParseRetryAfter(%q) = %v, %v; delay-seconds %v", v, wait, ok, want)
			}
		} else if ok {
			// Anything else it reads must be an HTTP-date net/http reads too.
			if _, err := http.ParseTime(strings.TrimSpace(v)); err != nil {
				t.Fatalf("ParseRetryAfter(%q) = %v, true: neither delay-seconds nor an HTTP-date (%v)", v, wait, err)
			}
		}
		// Round trips: delay-seconds, and an HTTP-date secs from now.
		if w, ok := ParseRetryAfter(strconv.FormatUint(uint64(secs), 10), now); !ok || w != time.Duration(secs)*time.Second {
			t.Fatalf("ParseRetryAfter(%d) = %v, %v", secs, w, ok)
		}
		date := now.Add(time.Duration(secs) * time.Second).Format(http.TimeFormat)
		if w, ok := ParseRetryAfter(date, now); !ok || w != time.Duration(secs)*time.Second {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v; want %ds", date, w, ok, secs)
		}
	})
}
