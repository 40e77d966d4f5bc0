package policy

import (
	"testing"
	"time"
)

func TestRetryOnGRPC(t *testing.T) {
	r, err := ParseRetryOn("connect-failure,503,unavailable, RESOURCE_EXHAUSTED,Deadline-Exceeded,cancelled,internal")
	if err != nil {
		t.Fatal(err)
	}
	for c, want := range map[int]bool{0: false, 1: true, 2: false, 3: false, 4: true, 8: true, 13: true, 14: true, 15: false, 17: false, -1: false} {
		if got := r.GRPC(c); got != want {
			t.Errorf("GRPC(%d) = %v want %v", c, got, want)
		}
	}
	if !r.Status(503) || r.Status(502) {
		t.Fatal("status set wrong")
	}
	if got := r.String(); got != "connect-failure,503,cancelled,deadline-exceeded,resource-exhausted,internal,unavailable" {
		t.Fatalf("String = %q", got)
	}
	// Round trip through the canonical form.
	r2, err := ParseRetryOn(r.String())
	if err != nil || r2 != r {
		t.Fatalf("round trip: %v %v", r2, err)
	}
	for _, bad := range []string{"ok", "OK", "unavailabl", "un_available_"} {
		if _, err := ParseRetryOn(bad); err == nil {
			t.Errorf("ParseRetryOn(%q) accepted", bad)
		}
	}
	if GRPCCodeName(14) != "unavailable" || GRPCCodeName(99) != "99" {
		t.Fatal("GRPCCodeName")
	}
}

func TestDecideGRPC(t *testing.T) {
	ro, _ := ParseRetryOn("connect-failure,reset,503,unavailable")
	p := &Policy{RetryOn: ro, BackoffBase: time.Millisecond, BackoffMax: 4 * time.Millisecond}
	base := Outcome{Attempt: 1, MaxAttempts: 3, GRPC: true, GRPCCode: 14, Status: 200, Retryable: true, Remaining: time.Second}
	cases := []struct {
		name   string
		mod    func(o *Outcome)
		retry  bool
		reason Reason
		wait   time.Duration
	}{
		{"UNAVAILABLE retried", func(o *Outcome) {}, true, ReasonNone, time.Millisecond},
		{"OK is no failure", func(o *Outcome) { o.GRPCCode = 0 }, false, ReasonNone, 0},
		{"INVALID_ARGUMENT not in retryOn", func(o *Outcome) { o.GRPCCode = 3 }, false, ReasonNone, 0},
		{"judged by grpc-status, not by a 503 it rides on", func(o *Outcome) { o.GRPCCode = 0; o.Status = 503 }, false, ReasonNone, 0},
		{"reset retried", func(o *Outcome) { o.Cond = CondReset }, true, ReasonNone, time.Millisecond},
		{"pushback honoured on any code", func(o *Outcome) { o.HasRetryAfter = true; o.RetryAfter = 200 * time.Millisecond }, true, ReasonNone, 200 * time.Millisecond},
		{"pushback 0", func(o *Outcome) { o.HasRetryAfter = true }, true, ReasonNone, 0},
		{"pushback past the deadline", func(o *Outcome) { o.HasRetryAfter = true; o.RetryAfter = 2 * time.Second }, false, ReasonRetryAfter, 0},
		{"pushback stop", func(o *Outcome) { o.PushbackStop = true }, false, ReasonRetryAfter, 0},
		{"attempts used", func(o *Outcome) { o.Attempt = 3 }, false, ReasonAttempts, 0},
		{"message too large to replay", func(o *Outcome) { o.Retryable = false }, false, ReasonNotRetryable, 0},
	}
	for _, c := range cases {
		o := base
		c.mod(&o)
		d := p.Decide(&o, NewRetryBudget(100, 100, time.Second), nil, sec)
		if d.Retry != c.retry || d.Reason != c.reason || d.Wait != c.wait {
			t.Errorf("%s: got %+v want retry=%v reason=%v wait=%v", c.name, d, c.retry, c.reason, c.wait)
		}
	}
}
