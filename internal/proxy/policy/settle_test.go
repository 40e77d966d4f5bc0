package policy

import (
	"testing"
	"time"
)

func TestOutcomeFault(t *testing.T) {
	cases := []struct {
		name string
		o    Outcome
		want bool
	}{
		{"200", Outcome{Status: 200}, false},
		{"404", Outcome{Status: 404}, false},
		{"429", Outcome{Status: 429}, false},
		{"500", Outcome{Status: 500}, true},
		{"503", Outcome{Status: 503}, true},
		{"timeout", Outcome{Cond: CondTimeout}, true},
		{"reset", Outcome{Cond: CondReset}, true},
		{"connect-failure", Outcome{Cond: CondConnectFailure}, true},
		{"grpc OK", Outcome{GRPC: true, Status: 200}, false},
		{"grpc NOT_FOUND", Outcome{GRPC: true, Status: 200, GRPCCode: 5}, false},
		{"grpc RESOURCE_EXHAUSTED", Outcome{GRPC: true, Status: 200, GRPCCode: 8}, false},
		{"grpc UNKNOWN", Outcome{GRPC: true, Status: 200, GRPCCode: 2}, true},
		{"grpc DEADLINE_EXCEEDED", Outcome{GRPC: true, Status: 200, GRPCCode: 4}, true},
		{"grpc INTERNAL", Outcome{GRPC: true, Status: 200, GRPCCode: 13}, true},
		{"grpc UNAVAILABLE", Outcome{GRPC: true, Status: 200, GRPCCode: 14}, true},
		{"grpc DATA_LOSS", Outcome{GRPC: true, Status: 200, GRPCCode: 15}, true},
		// gRPC is judged by its code, never by the HTTP status it rode on.
		{"grpc OK on 500", Outcome{GRPC: true, Status: 500}, false},
		{"grpc reset", Outcome{GRPC: true, Cond: CondReset}, true},
	}
	for _, c := range cases {
		if got := c.o.Fault(); got != c.want {
			t.Errorf("%s: Fault() = %v, want %v", c.name, got, c.want)
		}
		c.o.ClientGone = true
		if got := c.o.Cancelled(); got != c.want {
			t.Errorf("%s, client gone: Cancelled() = %v, want %v (a failure after the client left is its cancellation)", c.name, got, c.want)
		}
		c.o.ClientGone = false
		if c.o.Cancelled() {
			t.Errorf("%s, client present: Cancelled() = true", c.name)
		}
	}
}

// Settle and Judge: the breaker's accounting and the retry decision of
// one attempt, from a closed breaker (threshold 1: a Failure opens it)
// and from a half-open one whose probe the attempt was.
func TestSettleJudge(t *testing.T) {
	ro, err := ParseRetryOn("connect-failure,reset,timeout,502,503,504,unavailable")
	if err != nil {
		t.Fatal(err)
	}
	p := &Policy{RetryOn: ro, BackoffBase: time.Millisecond, BackoffMax: 4 * time.Millisecond}
	const openFor = 10 * time.Second
	now := 1000 * sec
	base := Outcome{Attempt: 1, MaxAttempts: 3, Retryable: true, Remaining: time.Minute}
	with := func(f func(o *Outcome)) Outcome { o := base; f(&o); return o }
	cases := []struct {
		name      string
		o         Outcome
		halfOpen  bool // the breaker is half-open and this attempt was its probe
		judged    bool
		d         Decision
		breaker   BreakerState // after
		nextProbe bool         // half-open after: the next Allow is the probe
		logged    string
	}{
		{"ok", with(func(o *Outcome) { o.Status = 200 }), false, true, Decision{}, BreakerClosed, false, ""},
		{"503", with(func(o *Outcome) { o.Status = 503 }), false, true, Decision{Retry: false, Reason: ReasonBreaker}, BreakerOpen, false, ""},
		{"timeout", with(func(o *Outcome) { o.Cond = CondTimeout }), false, true, Decision{Reason: ReasonBreaker}, BreakerOpen, false, "timeout"},
		{"client gone, timeout", with(func(o *Outcome) { o.Cond, o.ClientGone = CondTimeout, true }), false, false, Decision{}, BreakerClosed, false, "cancelled"},
		{"client gone, reset", with(func(o *Outcome) { o.Cond, o.ClientGone = CondReset, true }), false, false, Decision{}, BreakerClosed, false, "cancelled"},
		{"client gone, 503", with(func(o *Outcome) { o.Status, o.ClientGone = 503, true }), false, false, Decision{}, BreakerClosed, false, "cancelled"},
		{"client gone, grpc UNAVAILABLE", with(func(o *Outcome) { o.GRPC, o.Status, o.GRPCCode, o.ClientGone = true, 200, 14, true }), false, false, Decision{}, BreakerClosed, false, "cancelled"},
		{"client gone, 200", with(func(o *Outcome) { o.Status, o.ClientGone = 200, true }), false, true, Decision{}, BreakerClosed, false, ""},
		{"client gone, not retryable", with(func(o *Outcome) { o.Cond, o.ClientGone, o.Retryable = CondReset, true, false }), false, false, Decision{}, BreakerClosed, false, "cancelled"},
		{"probe ok", with(func(o *Outcome) { o.Status = 200 }), true, true, Decision{}, BreakerClosed, false, ""},
		{"probe 503", with(func(o *Outcome) { o.Status = 503 }), true, true, Decision{Reason: ReasonBreaker}, BreakerOpen, false, ""},
		{"probe abandoned", with(func(o *Outcome) { o.Cond, o.ClientGone = CondReset, true }), true, false, Decision{}, BreakerHalfOpen, true, "cancelled"},
		{"probe answered, client gone", with(func(o *Outcome) { o.Status, o.ClientGone = 200, true }), true, true, Decision{}, BreakerClosed, false, ""},
		// A stale pooled connection's reset after the write (resendcap):
		// judged and retried, but no breaker failure (threshold 1 stays
		// closed); a probe's place is given back.
		{"stale", with(func(o *Outcome) { o.Cond, o.Stale = CondReset, true }), false, true, Decision{Retry: true}, BreakerClosed, false, "stale"},
		{"stale, last attempt", with(func(o *Outcome) { o.Cond, o.Stale, o.Attempt = CondReset, true, 3 }), false, true, Decision{Reason: ReasonAttempts}, BreakerClosed, false, "stale"},
		{"stale, chain-limited", with(func(o *Outcome) { o.Cond, o.Stale, o.Attempt, o.ChainLimited = CondReset, true, 3, true }), false, true, Decision{Reason: ReasonChain}, BreakerClosed, false, "stale"},
		{"probe stale", with(func(o *Outcome) { o.Cond, o.Stale = CondReset, true }), true, true, Decision{Reason: ReasonBreaker}, BreakerHalfOpen, true, "stale"},
		{"client gone, stale", with(func(o *Outcome) { o.Cond, o.Stale, o.ClientGone = CondReset, true, true }), false, false, Decision{}, BreakerClosed, false, "cancelled"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			br := NewBreaker(1, 10*time.Second, openFor)
			probe := false
			at := now
			if c.halfOpen {
				br.Failure(now-int64(openFor)-sec, false)
				var ok bool
				if ok, probe = br.Allow(now); !ok || !probe {
					t.Fatalf("setup: Allow = %v, %v; want the probe", ok, probe)
				}
			}
			o := c.o
			d := p.Judge(&o, nil, br, probe, at)
			if d.Retry != c.d.Retry || d.Reason != c.d.Reason {
				t.Errorf("Judge = %+v, want retry %v reason %v", d, c.d.Retry, c.d.Reason)
			}
			if got := br.State(at); got != c.breaker {
				t.Errorf("breaker %v, want %v", got, c.breaker)
			}
			if c.breaker == BreakerHalfOpen {
				if ok, pr := br.Allow(at); ok != c.nextProbe || pr != c.nextProbe {
					t.Errorf("next Allow = %v, %v; want %v, %v", ok, pr, c.nextProbe, c.nextProbe)
				}
			}
			if got := o.LoggedError(); got != c.logged {
				t.Errorf("LoggedError = %q, want %q", got, c.logged)
			}
			if got := d.Exhausted(); c.o.Cancelled() && got != "" {
				t.Errorf("a cancelled attempt logs exhausted %q, want none", got)
			}
			// Settle alone says the same and counts the same.
			br2 := NewBreaker(1, 10*time.Second, openFor)
			o2 := c.o
			if got := Settle(&o2, br2, false, at); got != c.judged {
				t.Errorf("Settle = %v, want %v", got, c.judged)
			}
			if got := Settle(&o2, nil, false, at); got != c.judged {
				t.Errorf("Settle without a breaker = %v, want %v", got, c.judged)
			}
		})
	}
}

// The retry budget: a cancelled attempt takes nothing from it even when
// it has room and the failure would be retried; the same failure with its
// client present withdraws one.
func TestJudgeCancelledSpendsNoBudget(t *testing.T) {
	ro, err := ParseRetryOn("reset")
	if err != nil {
		t.Fatal(err)
	}
	p := &Policy{RetryOn: ro, BackoffBase: time.Millisecond, BackoffMax: time.Millisecond}
	now := 1000 * sec
	budget := NewRetryBudget(100, 0, 10*time.Second)
	budget.Deposit(now)
	budget.Deposit(now)
	br := NewBreaker(0, time.Second, time.Second) // off
	gone := Outcome{Attempt: 1, MaxAttempts: 3, Retryable: true, Remaining: time.Minute, Cond: CondReset, ClientGone: true}
	for range 5 {
		o := gone
		if d := p.Judge(&o, budget, br, false, now); d != (Decision{}) {
			t.Fatalf("cancelled: %+v, want the zero decision", d)
		}
	}
	if got := budget.Available(now); got != 2 {
		t.Fatalf("budget %d after 5 cancelled attempts, want 2", got)
	}
	stayed := gone
	stayed.ClientGone = false
	if d := p.Judge(&stayed, budget, br, false, now); !d.Retry || d.Wait != time.Millisecond {
		t.Fatalf("client present: %+v, want a retry after 1ms", d)
	}
	if got := budget.Available(now); got != 1 {
		t.Fatalf("budget %d after one retry, want 1", got)
	}
}

// Judge is on every attempt's path: it allocates nothing, whichever way
// the attempt ended.
func TestJudgeAllocatesNothing(t *testing.T) {
	ro, err := ParseRetryOn("connect-failure,reset,503")
	if err != nil {
		t.Fatal(err)
	}
	p := &Policy{RetryOn: ro, BackoffBase: time.Millisecond, BackoffMax: time.Second, Jitter: true}
	budget := NewRetryBudget(20, 10, 10*time.Second)
	br := NewBreaker(1<<30, 30*time.Second, 10*time.Second)
	for _, o := range []Outcome{
		{Attempt: 1, MaxAttempts: 3, Retryable: true, Remaining: time.Second, Status: 200},
		{Attempt: 1, MaxAttempts: 3, Retryable: true, Remaining: time.Second, Status: 503},
		{Attempt: 1, MaxAttempts: 3, Retryable: true, Remaining: time.Second, Cond: CondReset, ClientGone: true},
	} {
		now := sec
		if a := testing.AllocsPerRun(100, func() {
			now += 1000
			budget.Deposit(now)
			o := o
			_ = p.Judge(&o, budget, br, false, now)
			_ = o.LoggedError()
		}); a != 0 {
			t.Errorf("%+v: %v allocations per Judge, want 0", o, a)
		}
	}
}

// BenchmarkJudge is the end of a failed attempt through Judge; its anchor,
// BenchmarkJudgeAnchorDecide, is what each engine did before (the breaker
// told by hand, then Decide), in the same run.
func BenchmarkJudge(b *testing.B)             { benchJudge(b, true) }
func BenchmarkJudgeAnchorDecide(b *testing.B) { benchJudge(b, false) }

func benchJudge(b *testing.B, judge bool) {
	ro, _ := ParseRetryOn("connect-failure,reset,502,503,504")
	p := &Policy{RetryOn: ro, BackoffBase: 25 * time.Millisecond, BackoffMax: time.Second, Jitter: true}
	budget := NewRetryBudget(20, 10, 10*time.Second)
	br := NewBreaker(1<<30, 30*time.Second, 10*time.Second)
	b.ReportAllocs()
	now := sec
	for b.Loop() {
		now += 1000
		budget.Deposit(now)
		_, probe := br.Allow(now)
		o := Outcome{Attempt: 1, MaxAttempts: 3, Status: 503, Retryable: true, Remaining: time.Second}
		if judge {
			_ = p.Judge(&o, budget, br, probe, now)
			continue
		}
		br.Failure(now, probe)
		_ = p.Decide(&o, budget, br, now)
	}
}

// A stale pooled connection's reset after the write (Outcome.Stale,
// resendcap) is retried whatever --retry-on says (as it was re-sent before
// it was an attempt), at once (the connection was stale: no backoff), and
// takes its retry from the retry budget like any retry.
func TestDecideStale(t *testing.T) {
	ro, err := ParseRetryOn("503")
	if err != nil {
		t.Fatal(err)
	}
	p := &Policy{RetryOn: ro, BackoffBase: time.Second, BackoffMax: time.Second}
	now := 1000 * sec
	o := Outcome{Attempt: 1, MaxAttempts: 3, Retryable: true, Remaining: time.Minute, Cond: CondReset}
	if d := p.Decide(&o, nil, nil, now); d.Retry || d.Reason != ReasonNone {
		t.Fatalf("a plain reset --retry-on does not name: %+v, want no retry, no reason", d)
	}
	o.Stale = true
	if d := p.Decide(&o, nil, nil, now); !d.Retry || d.Wait != 0 {
		t.Fatalf("stale: %+v, want a retry at once", d)
	}
	empty := NewRetryBudget(0, 0, 10*time.Second)
	if d := p.Decide(&o, empty, nil, now); d.Retry || d.Reason != ReasonBudget {
		t.Fatalf("stale, empty retry budget: %+v, want reason budget", d)
	}
	o.Retryable = false
	if d := p.Decide(&o, nil, nil, now); d.Retry || d.Reason != ReasonNotRetryable {
		t.Fatalf("stale, not retryable: %+v, want reason not-retryable", d)
	}
}

// An attempt bounded by the caller's time left (CallerBound) that ran out
// of it (a timeout, a 504, a DEADLINE_EXCEEDED) is not a breaker failure,
// but is judged; any other failure of such an attempt is, and a timeout
// past the policy's own bound still is: threshold 2, the breaker opens at
// the second counted failure exactly.
func TestSettleCallerBound(t *testing.T) {
	const now = int64(time.Second)
	for _, c := range []struct {
		name    string
		o       Outcome
		counted bool
	}{
		{"timeout", Outcome{Cond: CondTimeout, CallerBound: true, DeadlineCut: true}, false},
		{"504", Outcome{Status: 504, CallerBound: true}, false},
		{"grpc DEADLINE_EXCEEDED", Outcome{GRPC: true, Status: 200, GRPCCode: 4, CallerBound: true}, false},
		{"503", Outcome{Status: 503, CallerBound: true}, true},
		{"reset", Outcome{Cond: CondReset, CallerBound: true}, true},
		{"grpc UNAVAILABLE", Outcome{GRPC: true, Status: 200, GRPCCode: 14, CallerBound: true}, true},
		{"grpc 504 status on OK", Outcome{GRPC: true, Status: 504, CallerBound: true}, false},
		{"timeout past the per-try bound", Outcome{Cond: CondTimeout}, true},
		{"504 with room", Outcome{Status: 504}, true},
	} {
		br := NewBreaker(2, time.Minute, time.Minute)
		for i := range 2 {
			o := c.o
			if !Settle(&o, br, false, now) {
				t.Fatalf("%s: not judged", c.name)
			}
			want := BreakerClosed
			if c.counted && i == 1 {
				want = BreakerOpen
			}
			if got := br.State(now); got != want {
				t.Fatalf("%s: after %d, breaker %v, want %v", c.name, i+1, got, want)
			}
		}
	}
	// A half-open probe cut by its caller's deadline gives its place back:
	// the next attempt probes.
	br := NewBreaker(1, time.Minute, time.Millisecond)
	br.Failure(now, false)
	later := now + int64(time.Second)
	if ok, probe := br.Allow(later); !ok || !probe {
		t.Fatalf("Allow = %v %v, want the probe", ok, probe)
	}
	o := Outcome{Cond: CondTimeout, CallerBound: true, DeadlineCut: true}
	Settle(&o, br, true, later)
	if ok, probe := br.Allow(later); !ok || !probe {
		t.Fatalf("after the probe's caller ran out of time: Allow = %v %v, want a new probe", ok, probe)
	}
}

func TestCallerSet(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		d    time.Duration
		ok   bool
		max  time.Duration
		want bool
	}{
		{0, false, 0, false},                // no deadline
		{500 * ms, true, 0, true},           // the caller's, no bound of the proxy's
		{500 * ms, true, 3000 * ms, true},   // the caller lowered it
		{3000 * ms, true, 3000 * ms, false}, // --max-time-to-answer itself
		{3000 * ms, true, 3000*ms + 400*time.Microsecond, false},
		{2999 * ms, true, 3000*ms + 400*time.Microsecond, true},
	} {
		if got := CallerSet(c.d, c.ok, c.max); got != c.want {
			t.Errorf("CallerSet(%v, %v, %v) = %v, want %v", c.d, c.ok, c.max, got, c.want)
		}
	}
}
