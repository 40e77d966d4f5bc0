package proxy

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/sidecar"
)

// TestDurationFlagBounds (issue 25): every duration flag is bounded. Before, --backoff-base
// 99999h held a request for years, --per-try-timeout 2562047h made attempts x per-try wrap
// int64 nanoseconds, and --keepalive-timeout 99999h kept idle connections forever: all were
// taken. Each bound is accepted and one nanosecond past it is refused, naming flag and value.
func TestDurationFlagBounds(t *testing.T) {
	const maxInt64 = "2562047h47m16.854775807s"
	for _, c := range []struct {
		flag     string
		ok       []string
		bad      []string
		why      string
		extraArg []string
	}{
		{"per-try-timeout", []string{"1ms", "1h"}, []string{"999999ns", "1h0m0.000000001s", "99999h", maxInt64, "0s", "-1ms"}, "must be 1ms..1h", nil},
		{"max-time-to-answer", []string{"0s", "1ms", "24h"}, []string{"999us", "24h0m0.000000001s", "99999h", maxInt64, "-1ns"}, "must be 0 (none) or 1ms..24h", nil},
		{"backoff-base", []string{"0s", "1ms", "1m"}, []string{"1ns", "1m0.000000001s", "99999h", maxInt64, "-1s"}, "must be 0 (no wait) or 1ms..1m", []string{"--backoff-max=1m"}},
		{"backoff-max", []string{"1m", "100ms"}, []string{"1m0.000000001s", "99999h", maxInt64, "-1s"}, "must be 0 (no wait) or 1ms..1m", nil},
		{"budget-window", []string{"1ms", "1s", "60s"}, []string{"999us", "1m0.000000001s", "99999h"}, "must be 1ms..1m", nil},
		{"breaker-window", []string{"1ms", "1h"}, []string{"999us", "1h0m0.000000001s", maxInt64, "0s"}, "must be 1ms..1h", nil},
		{"breaker-open-for", []string{"1ms", "1h"}, []string{"999us", "1h0m0.000000001s", maxInt64}, "must be 1ms..1h", nil},
		{"key-ttl", []string{"1ns", "24h"}, []string{"0s", "24h0m0.000000001s", maxInt64}, "must be > 0 and at most 24h", nil},
		{"drain-timeout", []string{"24h"}, []string{"0s", "24h0m0.000000001s"}, "must be > 0 and at most 24h", nil},
		{"http-request-timeout", []string{"24h"}, []string{"-1s", "99999h"}, "must be > 0 and at most 24h", nil},
		{"keepalive-timeout", []string{"24h"}, []string{"0s", "99999h"}, "must be > 0 and at most 24h", nil},
		{"client-timeout", []string{"24h"}, []string{"0s", maxInt64}, "must be > 0 and at most 24h", nil},
		{"upstream-idle-timeout", []string{"24h"}, []string{"0s", "99999h"}, "must be > 0 and at most 24h", nil},
		{"stream-idle-timeout", []string{"0s", "1ms", "24h"}, []string{"999us", "-1s", "24h0m0.000000001s", maxInt64}, "must be 0 (never) or 1ms..24h", nil},
	} {
		for _, v := range c.ok {
			if _, err := ParseFlags(append([]string{"--" + c.flag + "=" + v}, c.extraArg...), io.Discard); err != nil {
				t.Errorf("--%s=%s refused: %v", c.flag, v, err)
			}
		}
		for _, v := range c.bad {
			_, err := ParseFlags(append([]string{"--" + c.flag + "=" + v}, c.extraArg...), io.Discard)
			// The value as the injector would write it (sidecar.Duration): "99999h", not "99999h0m0s".
			d, perr := time.ParseDuration(v)
			if perr != nil {
				t.Fatal(perr)
			}
			shown := sidecar.Duration(d)
			want := `invalid value "` + shown + `" for --` + c.flag + `: ` + c.why
			if err == nil || err.Error() != want {
				t.Errorf("--%s=%s:\n got %v\nwant %s", c.flag, v, err, want)
			}
		}
	}
	// --backoff-max below --backoff-base, both in range.
	_, err := ParseFlags([]string{"--backoff-base=1s", "--backoff-max=500ms"}, io.Discard)
	if want := `invalid value "500ms" for --backoff-max: must be >= --backoff-base (1s)`; err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

// TestDurationFlagExit2: the command exits 2 and names flag and value.
func TestDurationFlagExit2(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Main([]string{"--check", "--backoff-base=99999h"}, &out, &errOut)
	if want := `invalid value "99999h" for --backoff-base: must be 0 (no wait) or 1ms..1m`; code != 2 || !strings.Contains(errOut.String(), want) {
		t.Fatalf("exit %d, stderr %q, want 2 and %q", code, errOut.String(), want)
	}
}
