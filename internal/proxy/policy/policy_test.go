package policy

import (
	"strings"
	"sync"
	"testing"
	"time"
)

const sec = int64(time.Second)

func TestRetryBudgetFloorAndPercent(t *testing.T) {
	// 20 %, floor 1/s over a 10 s window = 10 retries.
	b := NewRetryBudget(20, 1, 10*time.Second)
	now := 100 * sec
	granted := 0
	for i := 0; i < 100; i++ {
		b.Deposit(now)
		for j := 0; j < 2; j++ { // each request wants 2 retries
			if b.TryWithdraw(now) {
				granted++
			}
		}
	}
	if granted != 20 {
		t.Fatalf("granted %d retries for 100 requests at 20%%, want 20", granted)
	}
	b2 := NewRetryBudget(20, 1, 10*time.Second)
	g2 := 0
	for i := 0; i < 10; i++ {
		b2.Deposit(now)
		for j := 0; j < 5; j++ {
			if b2.TryWithdraw(now) {
				g2++
			}
		}
	}
	if g2 != 10 {
		t.Fatalf("floor: granted %d, want 10", g2)
	}
}

// Under 100 % failure for several windows, retries in every window stay
// within max(floor, percent of that window's requests).
func TestRetryBudgetSlidingUnderFailure(t *testing.T) {
	const window = time.Second
	b := NewRetryBudget(10, 5, window)
	start := 1000 * sec
	step := int64(time.Millisecond) // 1000 requests/s, each wants a retry
	var events []int64              // times of granted retries
	var reqs []int64
	for now := start; now < start+5*sec; now += step {
		b.Deposit(now)
		reqs = append(reqs, now)
		if b.TryWithdraw(now) {
			events = append(events, now)
		}
	}
	// For every window aligned to the bucket grid, count retries and requests.
	bucket := int64(window) / budgetBuckets
	for ws := start; ws+int64(window) <= start+5*sec; ws += bucket {
		we := ws + int64(window)
		r, q := 0, 0
		for _, e := range events {
			if e >= ws && e < we {
				r++
			}
		}
		for _, e := range reqs {
			if e >= ws && e < we {
				q++
			}
		}
		limit := max(5, q*10/100)
		if r > limit {
			t.Fatalf("window at %d: %d retries > limit %d (%d requests)", ws-start, r, limit, q)
		}
	}
	if len(events) < 4*100 { // steady state must still grant about 10 %
		t.Fatalf("only %d retries granted over 5 s", len(events))
	}
}

func TestBreaker(t *testing.T) {
	b := NewBreaker(3, 10*time.Second, time.Second)
	now := 50 * sec
	for i := 0; i < 3; i++ {
		ok, probe := b.Allow(now)
		if !ok || probe {
			t.Fatalf("attempt %d refused while closed", i)
		}
		b.Failure(now, false)
	}
	if s := b.State(now); s != BreakerOpen {
		t.Fatalf("state %v after 3 failures", s)
	}
	if ok, _ := b.Allow(now + sec/2); ok {
		t.Fatal("open breaker allowed a call")
	}
	// After openFor: one probe, the rest fail fast.
	ok, probe := b.Allow(now + sec)
	if !ok || !probe {
		t.Fatalf("half-open did not allow the probe: %v %v", ok, probe)
	}
	if ok2, _ := b.Allow(now + sec); ok2 {
		t.Fatal("second call during the probe allowed")
	}
	// Probe fails: open again for openFor.
	b.Failure(now+sec, true)
	if ok, _ := b.Allow(now + sec + sec/2); ok {
		t.Fatal("reopened breaker allowed a call")
	}
	ok, probe = b.Allow(now + 2*sec)
	if !ok || !probe {
		t.Fatal("no second probe")
	}
	b.Success(now+2*sec, true)
	if s := b.State(now + 2*sec); s != BreakerClosed {
		t.Fatalf("state %v after a successful probe", s)
	}
	// Failures spread wider than the window never open it.
	b2 := NewBreaker(3, time.Second, time.Second)
	for i := int64(0); i < 10; i++ {
		b2.Failure(now+i*sec, false)
	}
	if s := b2.State(now + 10*sec); s != BreakerClosed {
		t.Fatalf("sparse failures opened the breaker: %v", s)
	}
}

func TestBreakerSingleProbeConcurrent(t *testing.T) {
	b := NewBreaker(1, time.Second, time.Second)
	b.Failure(0, false)
	var wg sync.WaitGroup
	var mu sync.Mutex
	probes := 0
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ok, p := b.Allow(2 * sec); ok && p {
				mu.Lock()
				probes++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if probes != 1 {
		t.Fatalf("%d probes, want 1", probes)
	}
}

func TestBackoff(t *testing.T) {
	base, mx := 10*time.Millisecond, 50*time.Millisecond
	want := []time.Duration{10, 20, 40, 50, 50}
	for i, w := range want {
		if got := Backoff(base, mx, i+1, false); got != w*time.Millisecond {
			t.Errorf("no-jitter backoff %d = %v want %v", i+1, got, w*time.Millisecond)
		}
		for k := 0; k < 200; k++ {
			if got := Backoff(base, mx, i+1, true); got < 0 || got > w*time.Millisecond {
				t.Fatalf("jittered backoff %d = %v outside [0,%v]", i+1, got, w*time.Millisecond)
			}
		}
	}
	if Backoff(0, mx, 3, true) != 0 {
		t.Fatal("zero base must not wait")
	}
}

func TestRetryOn(t *testing.T) {
	r, err := ParseRetryOn("connect-failure, reset,502,503,504,429")
	if err != nil {
		t.Fatal(err)
	}
	if !r.Status(503) || !r.Status(429) || r.Status(500) || r.Status(404) {
		t.Fatal("status set wrong")
	}
	if !r.Cond(CondReset) || r.Cond(CondTimeout) || r.Cond(CondNone) {
		t.Fatal("cond set wrong")
	}
	if got := r.String(); got != "connect-failure,reset,429,502,503,504" {
		t.Fatalf("String = %q", got)
	}
	for _, bad := range []string{"600", "5xy", "connect"} {
		if _, err := ParseRetryOn(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Fatalf("ParseRetryOn(%q) err = %v", bad, err)
		}
	}
}

func TestDecide(t *testing.T) {
	ro, _ := ParseRetryOn("connect-failure,reset,502,503,504,429")
	p := &Policy{RetryOn: ro, BackoffBase: time.Millisecond, BackoffMax: 4 * time.Millisecond, Jitter: false}
	base := Outcome{Attempt: 1, MaxAttempts: 3, Status: 503, Retryable: true, Remaining: time.Second}
	cases := []struct {
		name   string
		mod    func(o *Outcome)
		retry  bool
		reason Reason
		wait   time.Duration
	}{
		{"503 retried", func(o *Outcome) {}, true, ReasonNone, time.Millisecond},
		{"second retry waits longer", func(o *Outcome) { o.Attempt = 2 }, true, ReasonNone, 2 * time.Millisecond},
		{"200 not a failure", func(o *Outcome) { o.Status = 200 }, false, ReasonNone, 0},
		{"500 not in retryOn", func(o *Outcome) { o.Status = 500 }, false, ReasonNone, 0},
		{"404 not in retryOn", func(o *Outcome) { o.Status = 404 }, false, ReasonNone, 0},
		{"timeout not in retryOn", func(o *Outcome) { o.Cond = CondTimeout }, false, ReasonNone, 0},
		{"refused retried", func(o *Outcome) { o.Cond = CondConnectFailure }, true, ReasonNone, time.Millisecond},
		{"attempts used", func(o *Outcome) { o.Attempt = 3 }, false, ReasonAttempts, 0},
		{"chain limited", func(o *Outcome) { o.MaxAttempts = 1; o.ChainLimited = true }, false, ReasonChain, 0},
		{"POST without key", func(o *Outcome) { o.Retryable = false }, false, ReasonNotRetryable, 0},
		{"exhausted below", func(o *Outcome) { o.ExhaustedResp = true }, false, ReasonExhaustedBelow, 0},
		{"retry-after honoured", func(o *Outcome) { o.Status = 429; o.HasRetryAfter = true; o.RetryAfter = 30 * time.Millisecond }, true, ReasonNone, 30 * time.Millisecond},
		{"retry-after too long", func(o *Outcome) { o.Status = 429; o.HasRetryAfter = true; o.RetryAfter = 2 * time.Second }, false, ReasonRetryAfter, 0},
		// The caller's deadline: sec+100ms. A retry after 1ms backoff needs half of a 100ms try (50ms).
		{"deadline: room for a retry", func(o *Outcome) {
			o.Deadline = DeadlineAt(sec, 100*time.Millisecond, true)
			o.PerTry = 100 * time.Millisecond
		}, true, ReasonNone, time.Millisecond},
		{"deadline: half a try left exactly", func(o *Outcome) {
			o.Deadline = DeadlineAt(sec, 51*time.Millisecond, true)
			o.PerTry = 100 * time.Millisecond
		}, true, ReasonNone, time.Millisecond},
		{"deadline: a sliver left", func(o *Outcome) {
			o.Deadline = DeadlineAt(sec, 50*time.Millisecond, true)
			o.PerTry = 100 * time.Millisecond
		}, false, ReasonDeadline, 0},
		{"deadline: no per-try, half of arrived", func(o *Outcome) {
			o.Deadline = DeadlineAt(sec, 40*time.Millisecond, true)
			o.Arrived = 100 * time.Millisecond
		}, false, ReasonDeadline, 0},
		{"deadline cut the attempt", func(o *Outcome) { o.Cond = CondConnectFailure; o.DeadlineCut = true }, false, ReasonDeadline, 0},
	}
	for _, c := range cases {
		o := base
		c.mod(&o)
		d := p.Decide(&o, NewRetryBudget(100, 100, time.Second), NewBreaker(0, time.Second, time.Second), sec)
		if d.Retry != c.retry || d.Reason != c.reason || d.Wait != c.wait {
			t.Errorf("%s: got %+v want retry=%v reason=%v wait=%v", c.name, d, c.retry, c.reason, c.wait)
		}
	}
	// Budget and breaker deny.
	o := base
	if d := p.Decide(&o, NewRetryBudget(0, 0, time.Second), nil, sec); d.Reason != ReasonBudget {
		t.Errorf("empty budget: %+v", d)
	}
	br := NewBreaker(1, time.Second, time.Second)
	br.Failure(sec, false)
	if d := p.Decide(&o, nil, br, sec); d.Reason != ReasonBreaker {
		t.Errorf("open breaker: %+v", d)
	}
}

func TestParseUpstreams(t *testing.T) {
	us, err := ParseUpstreams("order=3, inventory=2*4,db, api.example.com=2")
	if err != nil {
		t.Fatal(err)
	}
	want := []Upstream{{Name: "order", Attempts: 3, Calls: 1}, {Name: "inventory", Attempts: 2, Calls: 4}, {Name: "db", Calls: 1}, {Name: "api.example.com", Attempts: 2, Calls: 1}}
	if len(us) != len(want) {
		t.Fatalf("%+v", us)
	}
	for i := range want {
		if us[i] != want[i] {
			t.Errorf("%d: %+v want %+v", i, us[i], want[i])
		}
	}
	for _, c := range []struct{ in, col string }{
		{"order=0", "column 1"}, {"order=3, pay=x", "column 10"}, {"a,,b", "column 3"},
		{"Order=3", "column 1"}, {"a=2*0", "column 1"}, {"a, a", "column 4"},
	} {
		_, err := ParseUpstreams(c.in)
		if err == nil || !strings.Contains(err.Error(), c.col) {
			t.Errorf("ParseUpstreams(%q) err = %v, want %s", c.in, err, c.col)
		}
	}
}

func TestMatchHost(t *testing.T) {
	cases := []struct {
		host, name string
		ok         bool
	}{
		{"order", "order", true}, {"ORDER", "order", true}, {"order.shop", "order", true},
		{"order.shop.svc.cluster.local", "order", true}, {"order.shop.svc", "order", true},
		{"order.shop.example", "order", false}, {"orders", "order", false},
		{"order.shop", "order.shop", true}, {"order.shop.svc.cluster.local.", "order.shop", true},
		{"order.other", "order.shop", false}, {"api.example.com", "api.example.com", true},
		{"x.api.example.com", "api.example.com", false},
	}
	for _, c := range cases {
		if got := MatchHost([]byte(c.host), c.name); got != c.ok {
			t.Errorf("MatchHost(%q,%q) = %v", c.host, c.name, got)
		}
	}
}

func TestKeyLedger(t *testing.T) {
	l := NewKeyLedger(time.Second, 2)
	l.Add([]byte("a"), 2, 0)
	l.Add([]byte("a"), 1, 1)
	if got := l.Spent([]byte("a"), 2); got != 3 {
		t.Fatalf("spent %d", got)
	}
	if got := l.Spent([]byte("a"), 2+2*sec); got != 0 {
		t.Fatalf("expired key spent %d", got)
	}
	l.Add([]byte("b"), 1, 0)
	l.Add([]byte("c"), 1, 0)
	l.Add([]byte("d"), 1, 0)
	if l.Len() != 2 || l.Spent([]byte("b"), 0) != 0 {
		t.Fatalf("LRU bound not kept: len %d", l.Len())
	}
}

func BenchmarkRetryDecision(b *testing.B) {
	ro, _ := ParseRetryOn("connect-failure,reset,502,503,504")
	p := &Policy{RetryOn: ro, BackoffBase: 25 * time.Millisecond, BackoffMax: time.Second, Jitter: true}
	budget := NewRetryBudget(20, 10, 10*time.Second)
	br := NewBreaker(1<<30, 30*time.Second, 10*time.Second)
	hdr := []byte(" 4 ")
	bag := []byte("userId=alice,retrycap-budget=3;p=1")
	b.ReportAllocs()
	b.ResetTimer()
	now := sec
	for i := 0; i < b.N; i++ {
		now += 1000
		n := IncomingBudget(hdr, true, bag, true, 4)
		s := SplitBudget(3, n)
		budget.Deposit(now)
		br.Allow(now)
		o := Outcome{Attempt: 1, MaxAttempts: s.Attempts, Status: 503, Retryable: true, Remaining: time.Second}
		d := p.Decide(&o, budget, br, now)
		_ = d
	}
}

func BenchmarkAppendBaggage(b *testing.B) {
	src := []byte("userId=alice,retrycap-budget=3;p=1")
	dst := make([]byte, 0, 128)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		dst = AppendBaggage(dst[:0], src, 2)
	}
}

func TestGeneratedKeys(t *testing.T) {
	for _, tc := range []struct {
		key                  string
		generated, retryable bool
	}{
		{"", false, false},
		{"k-1", false, true},
		{"retrycap-gen-00112233445566778899aabbccddeeff", true, false},
		{"Retrycap-Gen-x", true, false},
		{"retrycap-gen-", true, false},
		{"retrycap-ge", false, true},
		{"x-retrycap-gen-1", false, true},
	} {
		if got := IsGeneratedKey([]byte(tc.key)); got != tc.generated {
			t.Errorf("IsGeneratedKey(%q) = %v", tc.key, got)
		}
		if got := RetryableKey([]byte(tc.key)); got != tc.retryable {
			t.Errorf("RetryableKey(%q) = %v", tc.key, got)
		}
	}
}
