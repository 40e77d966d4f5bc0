package storm

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/labapp"
)

const ms = time.Millisecond

func samplesOf(pairs ...float64) []Sample {
	var out []Sample
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, Sample{At: time.Duration(pairs[i] * float64(time.Second)), PaymentRequests: pairs[i+1], Retries: pairs[i+1] / 2})
	}
	return out
}

func TestValueAtAndDelta(t *testing.T) {
	s := samplesOf(0, 0, 1, 10, 2, 30, 3, 30)
	cases := []struct {
		at   time.Duration
		want float64
	}{
		{-time.Second, 0}, {0, 0}, {500 * ms, 5}, {time.Second, 10}, {1500 * ms, 20}, {3 * time.Second, 30}, {9 * time.Second, 30},
	}
	for _, c := range cases {
		if got := ValueAt(s, c.at, paymentOf); got != c.want {
			t.Errorf("ValueAt(%s) = %v, want %v", c.at, got, c.want)
		}
	}
	if got := Delta(s, 500*ms, 1500*ms, paymentOf); got != 15 {
		t.Errorf("Delta = %v, want 15", got)
	}
	if got := Delta(s, 0, 2*time.Second, retriesOf); got != 15 {
		t.Errorf("Delta retries = %v, want 15", got)
	}
	if got := ValueAt(nil, time.Second, paymentOf); got != 0 {
		t.Errorf("no samples: %v", got)
	}
	if got := Rates(s, time.Second, 4, paymentOf); !reflect.DeepEqual(got, []float64{10, 20, 0, 0}) {
		t.Errorf("Rates = %v", got)
	}
	if got := Rates(s, 500*ms, 2, paymentOf); !reflect.DeepEqual(got, []float64{10, 10}) {
		t.Errorf("Rates per half second = %v", got)
	}
}

// users sends one user request every step from 0 to end; fate decides.
func users(step, end time.Duration, fate func(sent time.Duration) (lifetime time.Duration, ok bool)) []UserRequest {
	var out []UserRequest
	for t := time.Duration(0); t < end; t += step {
		l, ok := fate(t)
		out = append(out, UserRequest{Sent: t, Done: t + l, OK: ok, Attempts: 1})
	}
	return out
}

// failBetween fails what is sent in [from, to), each failure taking lifetime.
func failBetween(from, to, lifetime time.Duration) func(time.Duration) (time.Duration, bool) {
	return func(s time.Duration) (time.Duration, bool) {
		if s >= from && s < to {
			return lifetime, false
		}
		return 10 * ms, true
	}
}

func TestRecoveryAfter(t *testing.T) {
	restore := 10 * time.Second
	end := 30 * time.Second
	cases := []struct {
		name string
		us   []UserRequest
		want Recovery
	}{
		{"at once", users(100*ms, end, failBetween(5*time.Second, restore, 0)),
			Recovery{Recovered: true, After: 0, Observed: 20 * time.Second}},
		{"after 2.5 s", users(100*ms, end, failBetween(5*time.Second, restore+2500*ms, 0)),
			Recovery{Recovered: true, After: 2500 * ms, Observed: 20 * time.Second}},
		// 1 failure in 20 per second is 95 %: healthy.
		{"5 % failures is healthy", users(50*ms, end, func(s time.Duration) (time.Duration, bool) {
			if s >= 5*time.Second && s < restore {
				return 0, false
			}
			return 0, s%time.Second != 0
		}), Recovery{Recovered: true, After: 0, Observed: 20 * time.Second}},
		{"never", users(100*ms, end, failBetween(5*time.Second, end, 0)),
			Recovery{Recovered: false, Observed: 20 * time.Second, LowerBound: 17 * time.Second}},
		// A healthy second, then failures again: not yet recovered.
		{"relapse", users(100*ms, end, func(s time.Duration) (time.Duration, bool) {
			inOutage := s >= 5*time.Second && s < restore
			relapse := s >= restore+time.Second && s < restore+2*time.Second
			return 0, !inOutage && !relapse
		}), Recovery{Recovered: true, After: 2 * time.Second, Observed: 20 * time.Second}},
		// Seconds in which nothing was sent (10 s to 20 s) are no evidence
		// of health: the first healthy start is 19.1 s, whose first window
		// holds the request sent at 20 s.
		{"silence", append(users(100*ms, restore, failBetween(5*time.Second, restore, 0)),
			users(100*ms, end, func(s time.Duration) (time.Duration, bool) { return 0, true })[200:]...),
			Recovery{Recovered: true, After: 9100 * ms, Observed: 20 * time.Second}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := RecoveryAfter(c.us, restore, end, DefaultRecovery); got != c.want {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
	// 2 failures in 20: 90 %, not healthy.
	us := users(50*ms, end, func(s time.Duration) (time.Duration, bool) {
		return 0, s%time.Second != 0 && s%time.Second != 50*ms
	})
	if got := RecoveryAfter(us, restore, end, DefaultRecovery); got.Recovered {
		t.Fatalf("90 %% counted as recovered: %+v", got)
	}
}

func TestRecoveryRatio(t *testing.T) {
	step := 100 * ms
	cases := []struct {
		name          string
		naive, rc     Recovery
		ratio         float64
		atLeast, okay bool
	}{
		{"both recovered", Recovery{Recovered: true, After: 20 * time.Second}, Recovery{Recovered: true, After: time.Second}, 20, false, true},
		{"naive never", Recovery{LowerBound: 27 * time.Second}, Recovery{Recovered: true, After: 500 * ms}, 54, true, true},
		{"retrycap within a step", Recovery{Recovered: true, After: 3 * time.Second}, Recovery{Recovered: true, After: 0}, 30, true, true},
		{"retrycap never", Recovery{LowerBound: 27 * time.Second}, Recovery{LowerBound: 27 * time.Second}, 0, false, false},
	}
	for _, c := range cases {
		r, al, ok := RecoveryRatio(c.naive, c.rc, step)
		if math.Abs(r-c.ratio) > 1e-9 || al != c.atLeast || ok != c.okay {
			t.Errorf("%s: got %v %v %v, want %v %v %v", c.name, r, al, ok, c.ratio, c.atLeast, c.okay)
		}
	}
}

// PerFailedExact joins the requests payment received to the failed user requests of the
// outage by storm-op, whenever they came: hand-built records, exact counts.
func TestPerFailedExact(t *testing.T) {
	tl := Timeline{OutageStart: 5 * time.Second, Restore: 15 * time.Second, LoadEnd: 30 * time.Second}
	user := func(op string, sent time.Duration, ok bool) UserRequest {
		return UserRequest{Op: op, Sent: sent, Done: sent + 10*time.Second, OK: ok, GaveUp: !ok}
	}
	// n attempts at tier for op, 100 ms apart from at (past the user's give-up and the restore
	// included: they count all the same).
	at := func(tier, op string, from time.Duration, n int) []TierAttempt {
		var out []TierAttempt
		for k := range n {
			out = append(out, TierAttempt{Tier: tier, Op: op, At: from + time.Duration(k)*100*ms})
		}
		return out
	}
	join := func(parts ...[]TierAttempt) []TierAttempt {
		var out []TierAttempt
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	cases := []struct {
		name     string
		users    []UserRequest
		attempts []TierAttempt
		want     PerFailedCount
	}{{
		name:  "every tier exhausted its tries: 27 each, the work running past the give-up and the restore",
		users: []UserRequest{user("a", 5*time.Second, false), user("b", 9*time.Second, false), user("c", 14900*ms, false)},
		attempts: join(at("payment", "a", 5*time.Second, 27), at("payment", "b", 9*time.Second, 27), at("payment", "c", 14900*ms, 27),
			at("order", "a", 5*time.Second, 9), at("gateway", "b", 9*time.Second, 3)),
		want: PerFailedCount{Failed: 3, Requests: 81, Mean: 27, Max: 27, Full: 27, AtFull: 3},
	}, {
		name: "only failed user requests sent in [outage, restore) count; ok ones and others' attempts do not",
		users: []UserRequest{
			user("before", 4999*ms, false), user("ok", 6*time.Second, true), user("x", 7*time.Second, false),
			user("restore", 15*time.Second, false), user("y", 8*time.Second, false),
		},
		attempts: join(at("payment", "before", 4*time.Second, 27), at("payment", "ok", 6*time.Second, 1), at("payment", "x", 7*time.Second, 18),
			at("payment", "restore", 15*time.Second, 27), at("payment", "y", 8*time.Second, 27)),
		// x: its order call got an answer on its 18th request (payment back), 18 < 27.
		want: PerFailedCount{Failed: 2, Requests: 45, Mean: 22.5, Max: 27, Full: 27, AtFull: 1, Below: 1},
	}, {
		name: "the capped arm: refused before payment counts 0, the edge client's retry adds to its user request",
		users: []UserRequest{
			user("r1", 6*time.Second, false), user("r2", 6*time.Second, false), user("r3", 7*time.Second, false), user("r4", 8*time.Second, false),
		},
		attempts: join(at("payment", "r1", 6*time.Second, 4), at("payment", "r2", 6*time.Second, 1), at("payment", "r4", 8*time.Second, 30)),
		want:     PerFailedCount{Failed: 4, Requests: 35, Mean: 8.75, Max: 30, Full: 27, Below: 3, Above: 1},
	}, {
		name:     "an attempt without an op, or with one of no user request, is unmatched and counted for none",
		users:    []UserRequest{user("a", 6*time.Second, false), {Sent: 7 * time.Second}},
		attempts: join(at("payment", "", 6*time.Second, 2), at("payment", "ghost", 6*time.Second, 3), at("payment", "a", 6*time.Second, 1)),
		want:     PerFailedCount{Failed: 2, Requests: 1, Mean: 0.5, Max: 1, Full: 27, Below: 2, Unmatched: 5},
	}, {
		name:     "nothing failed in the outage: nothing counted, mean 0",
		users:    []UserRequest{user("ok", 6*time.Second, true)},
		attempts: at("payment", "ok", 6*time.Second, 1),
		want:     PerFailedCount{Full: 27},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := PerFailedExact(c.users, c.attempts, "payment", tl, 27); got != c.want {
				t.Fatalf("got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

func TestComputeAndJudge(t *testing.T) {
	tl := Timeline{OutageStart: 5 * time.Second, Restore: 15 * time.Second, LoadEnd: 30 * time.Second}
	// A naive failure takes 3 s (the user's timeout), a retrycap one 200 ms.
	naiveUsers := users(100*ms, tl.LoadEnd, failBetween(tl.OutageStart, tl.LoadEnd, 3*time.Second))
	rcUsers := users(100*ms, tl.LoadEnd, failBetween(tl.OutageStart, tl.Restore+time.Second, 200*ms))
	// Payment requests: 10/s before, naive 270/s from the outage on; retrycap 2/s in the outage.
	naiveS := samplesOf(0, 0, 5, 50, 15, 2750, 30, 6800)
	rcS := samplesOf(0, 0, 5, 50, 15, 70, 30, 220)
	for i := range naiveS {
		naiveS[i].Retries = naiveS[i].PaymentRequests * 26 / 27
		rcS[i].Retries = rcS[i].PaymentRequests / 10
		// Per proxy, each counter on its own: the retrycap arm's all at the gateway's.
		naiveS[i].HopRetries = [3]float64{naiveS[i].PaymentRequests / 50, naiveS[i].PaymentRequests / 25, naiveS[i].PaymentRequests / 2}
		rcS[i].HopRetries = [3]float64{0, rcS[i].Retries, 0}
	}
	n := Compute(ArmNaive, naiveUsers, naiveS, tl, DefaultRecovery)
	c := Compute(ArmRetrycap, rcUsers, rcS, tl, DefaultRecovery)
	if n.HopRetriesInOutage != [3]float64{54, 108, 1350} || c.HopRetriesInOutage != [3]float64{0, 2, 0} {
		t.Fatalf("retries in the outage per proxy: naive %v, retrycap %v", n.HopRetriesInOutage, c.HopRetriesInOutage)
	}
	if n.Sent != 300 || n.OK != 50 || n.Failed != 250 || n.FailedInOutage != 100 || n.PaymentInOutage != 2700 || n.PerFailed != nil {
		t.Fatalf("naive: %+v", n)
	}
	if n.Recovery != (Recovery{Observed: 15 * time.Second, LowerBound: 12 * time.Second}) {
		t.Fatalf("naive recovery %+v", n.Recovery)
	}
	if c.FailedInOutage != 100 || c.Recovery != (Recovery{Recovered: true, After: time.Second, Observed: 15 * time.Second}) {
		t.Fatalf("retrycap: %+v", c)
	}
	n.PerFailed = &PerFailedCount{Failed: 100, Requests: 2700, Mean: 27, Max: 27, Full: 27, AtFull: 100}
	c.PerFailed = &PerFailedCount{Failed: 100, Requests: 20, Mean: 0.2, Max: 4, Full: 27, Below: 100}
	if n.Wait != (Wait{N: 100, P50: 3 * time.Second, P99: 3 * time.Second, Max: 3 * time.Second}) ||
		c.Wait != (Wait{N: 100, P50: 200 * ms, P99: 200 * ms, Max: 200 * ms}) {
		t.Fatalf("waits: naive %+v, retrycap %+v", n.Wait, c.Wait)
	}
	n.Orphans = &Orphans{Attempts: 1200, Checked: 6800}
	c.Orphans = &Orphans{Checked: 500}
	n.Charges, c.Charges = 40, 40 // POSTs charged, none twice
	if len(n.PaymentRate) != 30 || n.PaymentRate[0] != 10 || n.PaymentRate[10] != 270 || len(n.SuccessRate) != 30 || n.SuccessRate[4] != 1 || n.SuccessRate[5] != 0 {
		t.Fatalf("series: %v %v", n.PaymentRate, n.SuccessRate)
	}
	ts := Judge(n, c, 4, DefaultRecovery.Step, 5400*ms)
	want := []Target{
		{"requests at payment per failed user request (max, exact)", "<= cap 4", "4, mean 0.20, of 100 (naive 27, mean 27.00)", true},
		{"retries during the outage", ">= 94 % fewer", "99.9 % fewer (2 vs 2600)", true},
		{"time to recover", ">= 10x shorter", ">= 12.0x", true},
		{"duplicated POST side effects", "0", "0 (naive 0)", true},
		{"user's wait during the outage, p99", "<= 5.65 s (max time to answer 5.40 s + 250 ms)", "200 ms (naive 3.00 s)", true},
		{"orphaned attempts (started after the user stopped waiting)", "0", "0 of 500 attempts checked (naive 1200 of 6800)", true},
	}
	if !reflect.DeepEqual(ts, want) {
		t.Fatalf("targets:\n%+v\nwant\n%+v", ts, want)
	}
	// The cap bounds every user request: one over it misses, however low the mean; none
	// counted, or no count, is no pass.
	for _, pc := range []struct {
		p   *PerFailedCount
		got string
	}{
		{&PerFailedCount{Failed: 100, Requests: 5, Mean: 0.05, Max: 5, Full: 27}, "5, mean 0.05, of 100 (naive 27, mean 27.00)"},
		{&PerFailedCount{Full: 27}, "not measured (no user request sent in the outage failed)"},
		{nil, "not counted"},
	} {
		c2 := c
		c2.PerFailed = pc.p
		if ts := Judge(n, c2, 4, DefaultRecovery.Step, 5400*ms); ts[0].Met || ts[0].Got != pc.got {
			t.Errorf("per failed %+v: %+v", pc.p, ts[0])
		}
	}
	if got := FormatPerFailed(n.PerFailed); got != "27.00 (max 27; 100 of 100 at 27)" {
		t.Errorf("FormatPerFailed: %q", got)
	}
	if got := FormatPerFailed(&PerFailedCount{Failed: 4, Requests: 35, Mean: 8.75, Max: 30, Full: 27, Below: 3, Above: 1, Unmatched: 5}); got != "8.75 (max 30; 0 of 4 at 27), 5 at payment unmatched" {
		t.Errorf("FormatPerFailed, unmatched: %q", got)
	}
	if got := FormatPerFailed(nil); got != "not counted" {
		t.Errorf("FormatPerFailed(nil): %q", got)
	}
	c.Duplicates, c.Recovery.After = 1, 2*time.Second
	c.Wait.P99, c.Orphans = 5651*ms, &Orphans{Attempts: 1, Checked: 500}
	ts = Judge(n, c, 4, DefaultRecovery.Step, 5400*ms)
	if ts[2].Met || ts[2].Got != ">= 6.0x" || ts[3].Met || ts[4].Met || ts[4].Got != "5.65 s (naive 3.00 s)" ||
		ts[5].Met || ts[5].Got != "1 of 500 attempts checked (naive 1200 of 6800)" {
		t.Fatalf("missed targets: %+v", ts)
	}
	// Nothing checked is no pass: no attempt joined, or no logs read; no user request in the
	// outage is no wait measured.
	c.Orphans, c.Wait = &Orphans{}, Wait{}
	if ts = Judge(n, c, 4, DefaultRecovery.Step, 5400*ms); ts[4].Met || ts[5].Met || ts[5].Got != "0 of 0 attempts checked (naive 1200 of 6800)" {
		t.Fatalf("nothing checked: %+v", ts[4:])
	}
	c.Orphans = nil
	if ts = Judge(n, c, 4, DefaultRecovery.Step, 5400*ms); ts[5].Met || ts[5].Got != "not measured" {
		t.Fatalf("not measured: %+v", ts[5])
	}
	if s := FormatRecovery(n.Recovery); s != "did not recover within 15.0 s (> 12.0 s)" {
		t.Fatalf("FormatRecovery: %q", s)
	}
}

func TestFormatWait(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{{0, "0.0 ms"}, {694 * time.Microsecond, "0.7 ms"}, {9949 * time.Microsecond, "9.9 ms"}, {10 * ms, "10 ms"}, {339600 * time.Microsecond, "340 ms"},
		{999 * ms, "999 ms"}, {time.Second, "1.00 s"}, {5363 * ms, "5.36 s"}} {
		if got := FormatWait(c.d); got != c.want {
			t.Errorf("FormatWait(%s) = %q, want %q", c.d, got, c.want)
		}
	}
}

func TestReduction(t *testing.T) {
	for _, c := range []struct{ naive, rc, want float64 }{{100, 6, 94}, {100, 0, 100}, {0, 5, 0}, {10, 20, -100}} {
		if got := Reduction(c.naive, c.rc); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("Reduction(%v, %v) = %v, want %v", c.naive, c.rc, got, c.want)
		}
	}
}

func TestSideEffects(t *testing.T) {
	s := NewSideEffects()
	steps := []struct {
		op, key string
		want    Outcome
	}{
		{"1", "k1", Charged},
		{"1", "k1", Replayed},  // a retry with the same key
		{"2", "", Charged},     // no key
		{"2", "", Duplicate},   // the same operation without a key again
		{"2", "k2", Duplicate}, // a key first seen, but the operation was charged
		{"", "", Charged},      // unknown operation: never a duplicate
		{"", "", Charged},
	}
	for i, st := range steps {
		if got := s.Record(st.op, st.key); got != st.want {
			t.Fatalf("step %d %+v: %v, want %v", i, st, got, st.want)
		}
	}
	if c, r, d := s.Counts(); c != 6 || r != 1 || d != 2 {
		t.Fatalf("counts %d %d %d", c, r, d)
	}
}

func TestLoadMixAndProxyArgs(t *testing.T) {
	s27, s18 := Scenarios["storm27"], Scenarios["incident18"]
	if s27.Amplification() != 27 || s18.Amplification() != 18 {
		t.Fatalf("amplification %d, %d", s27.Amplification(), s18.Amplification())
	}
	if got := s18.Chain(); got != "client x2 -> gateway x1 -> order x3 -> payment x3 = 18" {
		t.Fatalf("chain %q", got)
	}
	var got []userSpec
	for i := 0; i < 5; i++ {
		got = append(got, loadMix(i, s27))
	}
	want := []userSpec{{"GET", "", "0"}, {"GET", "", "1"}, {"GET", "", "2"}, {"POST", "key-3", "3"}, {"POST", "", "4"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("storm27 mix %+v", got)
	}
	if u := loadMix(7, s18); u.key != "key-7" || u.method != "GET" {
		t.Fatalf("incident18 GET carries a key: %+v", u)
	}
	if u := loadMix(9, s18); u.key != "" || u.method != "POST" {
		t.Fatalf("incident18 POST without key: %+v", u)
	}
	naive := strings.Join(proxyArgs(s27, ArmNaive, 2, 5400*ms), " ")
	if naive != "--service order --upstreams payment=3 --per-try-timeout 500ms --backoff-base 100ms --backoff-max 2s "+
		"--chain-cap 0 --backoff-jitter=false --budget-percent 100 --budget-min-per-second 1000000 --breaker-failures 0 "+
		"--retry-methods GET,HEAD,OPTIONS,PUT,DELETE,POST,PATCH --retry-on connect-failure,reset,timeout,5xx,unavailable" {
		t.Fatalf("naive order proxy: %s", naive)
	}
	rc := strings.Join(proxyArgs(s18, ArmRetrycap, 0, 2700*ms), " ")
	if rc != "--service client --upstreams gateway=1 --per-try-timeout 6s --backoff-base 100ms --backoff-max 2s "+
		"--chain-cap 3 --backoff-jitter=true --budget-percent 20 --budget-min-per-second 10 --budget-window 10s "+
		"--breaker-failures 50 --breaker-window 10s --breaker-open-for 500ms --entrypoint --max-time-to-answer 2.7s" {
		t.Fatalf("retrycap entry proxy: %s", rc)
	}
}

func TestParseCounters(t *testing.T) {
	text := `# HELP retrycap_proxy_attempts_total Attempts.
# TYPE retrycap_proxy_attempts_total counter
retrycap_proxy_attempts_total{upstream="payment"} 135
retrycap_proxy_attempts_total{upstream="unknown"} 0
retrycap_proxy_retries_total{upstream="payment"} 1.5e+02
retrycap_proxy_requests_total{code="200",upstream="payment"} 7
go_goroutines 12
`
	m, err := parseCounters(strings.NewReader(text), "retrycap_proxy_attempts_total", "retrycap_proxy_retries_total")
	if err != nil {
		t.Fatal(err)
	}
	if m["retrycap_proxy_attempts_total"]["payment"] != 135 || m["retrycap_proxy_retries_total"]["payment"] != 150 || len(m) != 2 {
		t.Fatalf("%v", m)
	}
	// What is not a count of requests is refused, naming the series and the value (before: a
	// NaN, a negative or a fractional value was summed, a series twice was summed twice, a
	// series without upstream and an error page's lines were passed over, reading 0).
	const typ = "# TYPE retrycap_proxy_retries_total counter\n"
	for _, tc := range []struct{ in, want string }{
		{`retrycap_proxy_retries_total{upstream="x"} nope` + "\n", `not a text exposition: text format parsing error in line 1: expected float as value, got "nope"`},
		{typ + `retrycap_proxy_retries_total{upstream="x"} NaN` + "\n", `retrycap_proxy_retries_total{upstream="x"}: value NaN is not a count of requests (want a whole number from 0 to 2^53)`},
		{typ + `retrycap_proxy_retries_total{upstream="x"} +Inf` + "\n", `retrycap_proxy_retries_total{upstream="x"}: value +Inf is not a count of requests (want a whole number from 0 to 2^53)`},
		{typ + `retrycap_proxy_retries_total{upstream="x"} -2` + "\n", `retrycap_proxy_retries_total{upstream="x"}: value -2 is not a count of requests (want a whole number from 0 to 2^53)`},
		{typ + `retrycap_proxy_retries_total{code="200",upstream="x"} 2.5` + "\n", `retrycap_proxy_retries_total{code="200", upstream="x"}: value 2.5 is not a count of requests (want a whole number from 0 to 2^53)`},
		{`retrycap_proxy_retries_total{upstream="x"} 1e300` + "\n", `retrycap_proxy_retries_total{upstream="x"}: value 1e+300 is not a count of requests (want a whole number from 0 to 2^53)`},
		{typ + `retrycap_proxy_retries_total{code="200"} 2` + "\n", `retrycap_proxy_retries_total{code="200"}: no upstream label`},
		{typ + `retrycap_proxy_retries_total{upstream="x"} 2` + "\n" + `retrycap_proxy_retries_total{upstream="x"} 3` + "\n", `retrycap_proxy_retries_total{upstream="x"}: given twice, with values 2 and 3`},
		{"# TYPE retrycap_proxy_retries_total gauge\n" + `retrycap_proxy_retries_total{upstream="x"} 2` + "\n", `retrycap_proxy_retries_total is a gauge, not a counter`},
		{"", "nothing was read: the exposition holds no metric"},
		{"<html><body>Bad Gateway</body></html>\n", `not a text exposition: text format parsing error in line 1: invalid metric name`},
	} {
		_, err := parseCounters(strings.NewReader(tc.in), "retrycap_proxy_retries_total")
		if err == nil || err.Error() != tc.want || !errors.As(err, new(errNotCounts)) {
			t.Errorf("%q:\ngot  %v\nwant %s", tc.in, err, tc.want)
		}
	}
	// The same series twice with one value is taken once; a family not exported yet is 0.
	m, err = parseCounters(strings.NewReader(typ+`retrycap_proxy_retries_total{upstream="x"} 4`+"\n"+`retrycap_proxy_retries_total{upstream="x"} 4`+"\n"+`retrycap_proxy_retries_total{code="503",upstream="x"} 1`+"\ngo_goroutines 3\n"),
		"retrycap_proxy_retries_total", "retrycap_proxy_attempts_total")
	if err != nil || m["retrycap_proxy_retries_total"]["x"] != 5 || len(m["retrycap_proxy_attempts_total"]) != 0 {
		t.Fatalf("%v %v", m, err)
	}
}

// TestScrapeRefusesAnErrorPage: a /metrics that answers an HTTP error is not read as an
// exposition of zeros.
func TestScrapeRefusesAnErrorPage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "retrycap_proxy_retries_total{upstream=\"payment\"} 0", http.StatusBadGateway)
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	c := &chain{scrapeHC: &http.Client{Timeout: 5 * time.Second}}
	_, err := c.scrape(context.Background(), &labapp.ProxyProc{AdminAddr: addr})
	if want := "metrics of " + addr + ": HTTP 502, not the proxy's metrics"; err == nil || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
}

func TestOptionsValidation(t *testing.T) {
	// The default run: payment hung (not killed) for 20 s of a 50 s load, the user's timeout
	// 10 s (an app client's default), the retrycap arm's max time to answer 9 s.
	if o, sc, err := (Options{}).withDefaults(); err != nil || o.Duration != 50*time.Second || o.OutageStart != 5*time.Second ||
		o.OutageLength != 20*time.Second || o.Outage != OutageHang || o.UserTimeout != 10*time.Second ||
		sc.Name != "storm27" || o.workers() != 5 || o.queue() != 100 {
		t.Fatalf("defaults: %+v %v", o, err)
	}
	if o, _, err := Short().withDefaults(); err != nil || o.Outage != OutageHang || o.UserTimeout != 3*time.Second || o.Duration != 16*time.Second ||
		o.OutageStart != 2*time.Second || o.OutageLength != 5*time.Second {
		t.Fatalf("short: %+v %v", o, err)
	}
	if o, _, err := Short().withDefaults(); err != nil || o.MaxTimeToAnswer != 2700*ms {
		t.Fatalf("short: max time to answer %s, %v; want 2.7s (a tenth under the user's 3s)", o.MaxTimeToAnswer, err)
	}
	if o, _, _ := (Options{}).withDefaults(); o.MaxTimeToAnswer != 9*time.Second {
		t.Fatalf("default max time to answer %s, want 9s", o.MaxTimeToAnswer)
	}
	if o, _, _ := (Options{Outage: OutageKill}).withDefaults(); o.Outage != OutageKill {
		t.Fatalf("outage kill given, got %q", o.Outage)
	}
	cases := []struct {
		o    Options
		want string
	}{
		{Options{Scenario: "storm99"}, `storm: scenario "storm99": unknown, want one of incident18, storm27`},
		{Options{RPS: -1}, "storm: rps -1: want 1..2000"},
		{Options{Capacity: 5}, "storm: capacity 5 req/s x work 50ms = 0.25 workers: want at least 1"},
		// Before: accepted; the lab then made a queue of that many slots and capacity x work
		// payment workers (5e9 goroutines for --capacity 99999999999).
		{Options{Capacity: 99999999999}, "storm: capacity 99999999999: want 1..100000 requests/s"},
		{Options{Duration: 27 * time.Second}, "storm: duration 27s: must leave at least 3s after the outage (5s + 20s) to judge recovery"},
		{Options{Outage: "flood"}, `storm: outage "flood": unknown, want kill or hang`},
		{Options{MaxTimeToAnswer: 11 * time.Second}, "storm: max time to answer 11s: want 1ms..the user timeout (10s)"},
		{Options{MaxTimeToAnswer: -time.Second}, "storm: max time to answer -1s: want 1ms..the user timeout (10s)"},
		{Options{OutageLength: -time.Second}, "storm: durations must be positive (duration 50s, outage start 5s, outage length -1s, user timeout 10s)"},
		// Before: accepted, the sum outage start + length + recovery wrapped to a negative time.
		{Options{OutageStart: 1 << 62, OutageLength: 1 << 62}, "storm: durations must be at most 1h0m0s (duration 50s, outage start 1281023h53m38.427387904s, outage length 1281023h53m38.427387904s, user timeout 10s)"},
		{Options{Duration: time.Hour + 1}, "storm: durations must be at most 1h0m0s (duration 1h0m0.000000001s, outage start 5s, outage length 20s, user timeout 10s)"},
		{Options{UserTimeout: 99999 * time.Hour}, "storm: durations must be at most 1h0m0s (duration 50s, outage start 5s, outage length 20s, user timeout 99999h0m0s)"},
	}
	for _, c := range cases {
		if _, _, err := c.o.withDefaults(); err == nil || err.Error() != c.want {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
}

// A user request that gave up stopped waiting at its timeout, however late the edge client's
// goroutine saw it; one with an answer stopped when it had it.
func TestUserDone(t *testing.T) {
	for _, c := range []struct {
		sent, done time.Duration
		gaveUp     bool
		want       time.Duration
	}{
		{5 * time.Second, 21900 * ms, true, 15 * time.Second},        // recorded 6.9 s late: the timeout
		{5 * time.Second, 14999 * ms, true, 14999 * ms},              // the timer fires a moment before sent + timeout
		{5 * time.Second, 16 * time.Second, false, 16 * time.Second}, // an answer: as seen
		{5 * time.Second, 5001 * ms, false, 5001 * ms},
	} {
		if got := userDone(c.sent, c.done, 10*time.Second, c.gaveUp); got != c.want {
			t.Errorf("userDone(%s, %s, 10s, %v) = %s, want %s", c.sent, c.done, c.gaveUp, got, c.want)
		}
	}
}

func TestWaitOf(t *testing.T) {
	// Ten user requests sent in the window [1 s, 2 s), waits 10, 20, ..., 100 ms, the last two
	// given up; one before and one after the window, which do not count.
	us := []UserRequest{{Sent: 500 * ms, Done: 9 * time.Second}}
	for i := 1; i <= 10; i++ {
		sent := time.Second + time.Duration(i)*50*ms
		us = append(us, UserRequest{Sent: sent, Done: sent + time.Duration(11-i)*10*ms, GaveUp: i <= 2})
	}
	us = append(us, UserRequest{Sent: 2 * time.Second, Done: 20 * time.Second})
	cases := []struct {
		name     string
		users    []UserRequest
		from, to time.Duration
		want     Wait
	}{
		// Nearest rank: p50 is the 5th of 10 (50 ms), p99 the 10th (100 ms).
		{"ten", us, time.Second, 2 * time.Second, Wait{N: 10, GaveUp: 2, P50: 50 * ms, P99: 100 * ms, Max: 100 * ms}},
		// All twelve: p50 the 6th (60 ms), p99 the 12th (18 s).
		{"all", us, 0, time.Minute, Wait{N: 12, GaveUp: 2, P50: 60 * ms, P99: 18 * time.Second, Max: 18 * time.Second}},
		{"one", us[:1], 0, time.Second, Wait{N: 1, P50: 8500 * ms, P99: 8500 * ms, Max: 8500 * ms}},
		{"none", us, 30 * time.Second, time.Minute, Wait{}},
	}
	for _, c := range cases {
		if got := WaitOf(c.users, c.from, c.to); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
	// 200 waits of 1..200 ms: p50 is the 100th (100 ms), p99 the 198th.
	var many []UserRequest
	for i := 200; i >= 1; i-- {
		many = append(many, UserRequest{Sent: time.Duration(200-i) * ms, Done: time.Duration(200-i)*ms + time.Duration(i)*ms})
	}
	if got := WaitOf(many, 0, time.Second); got.P50 != 100*ms || got.P99 != 198*ms || got.Max != 200*ms || got.N != 200 {
		t.Fatalf("200 waits: %+v", got)
	}
}

func TestOrphanedAttempts(t *testing.T) {
	const timeout = 3 * time.Second
	users := []UserRequest{
		// Gave up at 3 s (its timeout): Done is 3.002 s, a little late; it stopped waiting at
		// Sent + timeout = 4 s.
		{Op: "1", Sent: time.Second, Done: 4002 * ms, GaveUp: true},
		// Answered (an error) at 2.5 s, before its timeout (at 5 s): stopped waiting at 2.5 s.
		{Op: "2", Sent: 2 * time.Second, Done: 2500 * ms},
		// Answered at once, nothing after.
		{Op: "3", Sent: 3 * time.Second, Done: 3100 * ms, OK: true},
	}
	attempts := []TierAttempt{
		{"gateway", "1", time.Second}, {"order", "1", 1100 * ms}, {"payment", "1", 1200 * ms},
		{"payment", "1", 4 * time.Second},  // at the give-up instant: not after it
		{"payment", "1", 4001 * ms},        // orphaned
		{"order", "1", 5 * time.Second},    // orphaned
		{"gateway", "2", 2 * time.Second},  //
		{"payment", "2", 2600 * ms},        // orphaned: after the answer
		{"gateway", "3", 3 * time.Second},  //
		{"payment", "3", 3050 * ms},        //
		{"payment", "", 3 * time.Second},   // no storm-op
		{"payment", "99", 3 * time.Second}, // no such user request
	}
	got := OrphanedAttempts(users, attempts, timeout, Tiers())
	want := Orphans{Attempts: 3, ByTier: map[string]int{"gateway": 0, "order": 1, "payment": 2}, Users: 2, Checked: 10, Unmatched: 2}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if got := OrphanedAttempts(users, nil, timeout, Tiers()); got.Checked != 0 || got.Attempts != 0 || len(got.ByTier) != 3 {
		t.Fatalf("no attempts: %+v", got)
	}
}
