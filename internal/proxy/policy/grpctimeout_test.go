package policy

import (
	"testing"
	"time"
)

// grpc-timeout's grammar (gRPC over HTTP/2): 1-8 digits and a unit, nothing
// else; a malformed value counts as absent.
func TestParseGRPCTimeout(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"100m", 100 * time.Millisecond, true},
		{"2S", 2 * time.Second, true},
		{"1H", time.Hour, true},
		{"3M", 3 * time.Minute, true},
		{"1199905u", 1199905 * time.Microsecond, true},
		{"0n", 0, true},
		{"99999999n", 99999999, true},
		{"99999999H", maxGRPCTimeout, true}, // over time.Duration's range: bounded
		{"", 0, false},
		{"m", 0, false},
		{"100", 0, false},        // no unit
		{"100s", 0, false},       // not a unit (S is)
		{"-1m", 0, false},        // a sign
		{" 1m", 0, false},        // a blank
		{"1.5S", 0, false},       // a fraction
		{"123456789m", 0, false}, // 9 digits
		{"1e3m", 0, false},       // not digits
		{"１m", 0, false},         // not ASCII
	} {
		got, ok := ParseGRPCTimeout([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseGRPCTimeout(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// A forwarded grpc-timeout is in the finest unit whose value fits 8
// digits, rounded down (a hop only lowers it), and reads back as at most
// the time it was written from.
func TestAppendGRPCTimeout(t *testing.T) {
	for _, tc := range []struct {
		in   time.Duration
		want string
	}{
		{0, "0n"},
		{-time.Second, "0n"},
		{999, "999n"},
		{99999999, "99999999n"},
		{100000000, "100000u"},
		{1199905500 * time.Nanosecond, "1199905u"},
		{30 * time.Second, "30000000u"},
		{100 * time.Second, "100000m"},
		{26 * time.Hour, "93600000m"},
		{30 * 24 * time.Hour, "2592000S"},
		{maxGRPCTimeout, "76861433M"},
	} {
		got := string(AppendGRPCTimeout(nil, tc.in))
		if got != tc.want {
			t.Errorf("AppendGRPCTimeout(%v) = %q, want %q", tc.in, got, tc.want)
			continue
		}
		if back, ok := ParseGRPCTimeout([]byte(got)); !ok || back > max(tc.in, 0) {
			t.Errorf("%q reads back as %v, %v: more than %v", got, back, ok, tc.in)
		}
	}
}
