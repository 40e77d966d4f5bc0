package policy

import (
	"testing"
	"time"
)

func TestParseDeadlineHeader(t *testing.T) {
	for _, tc := range []struct {
		in   string
		ms   int64
		good bool
	}{
		{"1500", 1500, true},
		{" \t250 ", 250, true},
		{"0", 0, true},
		{"86400000", 86400000, true},
		{"86400001", 0, false}, // over a day: huge, absent
		{"99999999999", 0, false},
		{"-5", 0, false},
		{"+5", 0, false},
		{"1.5", 0, false},
		{"1s", 0, false},
		{"", 0, false},
		{"  ", 0, false},
		{"0x10", 0, false},
	} {
		ms, ok := ParseDeadlineHeader([]byte(tc.in))
		if ms != tc.ms || ok != tc.good {
			t.Errorf("ParseDeadlineHeader(%q) = %d, %t; want %d, %t", tc.in, ms, ok, tc.ms, tc.good)
		}
	}
}

func TestParseDeadlineListAndBaggage(t *testing.T) {
	for _, tc := range []struct {
		list, bag string
		lms, bms  int64
		lok, bok  bool
	}{
		{"900, 300,junk,-1", "a=1,retrycap-deadline=700;p=1,Retrycap-Deadline=400,retrycap-deadline=x", 300, 400, true, true},
		{"junk", "retrycap-budget=4", 0, 0, false, false},
		{"5,0", "retrycap-deadline=0", 0, 0, true, true},
		{",,", "retrycap-deadline", 0, 0, false, false},
	} {
		if ms, ok := ParseDeadlineList([]byte(tc.list)); ms != tc.lms || ok != tc.lok {
			t.Errorf("ParseDeadlineList(%q) = %d, %t; want %d, %t", tc.list, ms, ok, tc.lms, tc.lok)
		}
		if ms, ok := ParseDeadlineBaggage([]byte(tc.bag)); ms != tc.bms || ok != tc.bok {
			t.Errorf("ParseDeadlineBaggage(%q) = %d, %t; want %d, %t", tc.bag, ms, ok, tc.bms, tc.bok)
		}
	}
}

func TestIncomingDeadline(t *testing.T) {
	for _, tc := range []struct {
		name    string
		headers []string
		bag     string
		max     time.Duration
		want    time.Duration
		ok      bool
	}{
		{"none", nil, "", 0, 0, false},
		{"entry bound only", nil, "", 3 * time.Second, 3 * time.Second, true},
		{"caller lowers", []string{"1200"}, "", 3 * time.Second, 1200 * time.Millisecond, true},
		{"caller cannot raise", []string{"9000"}, "retrycap-deadline=8000", 3 * time.Second, 3 * time.Second, true},
		{"repeated header, smallest", []string{"900", "400,800"}, "", 0, 400 * time.Millisecond, true},
		{"baggage lower than header", []string{"900"}, "retrycap-deadline=350", 0, 350 * time.Millisecond, true},
		{"malformed is absent", []string{"-1", "soon"}, "retrycap-deadline=-3", 0, 0, false},
		{"malformed beside max", []string{"abc"}, "", 2 * time.Second, 2 * time.Second, true},
		{"zero: gone", []string{"0"}, "", 2 * time.Second, 0, true},
	} {
		var hs [][]byte
		for _, h := range tc.headers {
			hs = append(hs, []byte(h))
		}
		got, ok := IncomingDeadline(hs, []byte(tc.bag), tc.bag != "", tc.max)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: IncomingDeadline = %v, %t; want %v, %t", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestDeadlineArithmetic(t *testing.T) {
	const ms = int64(time.Millisecond)
	d := DeadlineAt(1000*ms, 2*time.Second, true)
	for _, tc := range []struct {
		now  int64
		want int64
		gone bool
	}{
		{1000 * ms, 2000, false},
		{1000*ms + 1, 1999, false}, // rounded down: a hop only lowers it
		{2999 * ms, 1, false},
		{2999*ms + 1, 0, true},
		{3000 * ms, 0, true},
		{5000 * ms, 0, true},
	} {
		if got := d.HeaderMs(tc.now); got != tc.want || d.Gone(tc.now) != tc.gone {
			t.Errorf("at %dns: HeaderMs %d, Gone %t; want %d, %t", tc.now, got, d.Gone(tc.now), tc.want, tc.gone)
		}
	}
	for _, tc := range []struct {
		now    int64
		perTry time.Duration
		want   time.Duration
		cut    bool
	}{
		{1000 * ms, time.Second, time.Second, false},
		{1000 * ms, 2 * time.Second, 2 * time.Second, false},
		{1500 * ms, time.Second, time.Second, false},
		{2500 * ms, time.Second, 500 * time.Millisecond, true},
		{1000 * ms, 0, 2 * time.Second, true},
	} {
		got, cut := d.TryTimeout(tc.now, tc.perTry)
		if got != tc.want || cut != tc.cut {
			t.Errorf("TryTimeout(%d, %v) = %v, %t; want %v, %t", tc.now, tc.perTry, got, cut, tc.want, tc.cut)
		}
	}
	// A retry needs half a try's timeout left after its backoff.
	for _, tc := range []struct {
		now             int64
		backoff, perTry time.Duration
		arrived         time.Duration
		fits            bool
	}{
		{1000 * ms, 100 * time.Millisecond, time.Second, 2 * time.Second, true},
		{2400 * ms, 100 * time.Millisecond, time.Second, 2 * time.Second, true},  // 500ms left = half
		{2401 * ms, 100 * time.Millisecond, time.Second, 2 * time.Second, false}, // 499ms
		{2900 * ms, 0, 0, 2 * time.Second, false},                                // 100ms of 1s (half of arrived)
		{1900 * ms, 100 * time.Millisecond, 0, 2 * time.Second, true},            // 1s of 1s
		{3000 * ms, 0, time.Millisecond, 2 * time.Second, false},                 // nothing left
	} {
		if got := d.RetryFits(tc.now, tc.backoff, tc.perTry, tc.arrived); got != tc.fits {
			t.Errorf("RetryFits(%d, %v, %v, %v) = %t; want %t", tc.now, tc.backoff, tc.perTry, tc.arrived, got, tc.fits)
		}
	}
	var none Deadline
	if none.Set() || none.Gone(0) || !none.RetryFits(0, time.Hour, time.Second, 0) {
		t.Fatal("the zero Deadline must be none")
	}
	if got, cut := none.TryTimeout(0, time.Second); got != time.Second || cut {
		t.Fatalf("no deadline: TryTimeout = %v, %t", got, cut)
	}
}

func TestAppendDeadlineBaggage(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"", "retrycap-deadline=750"},
		{"a=1", "a=1,retrycap-deadline=750"},
		{"retrycap-deadline=900,retrycap-budget=3, Retrycap-Deadline=100", "retrycap-deadline=750,retrycap-budget=3"},
	} {
		if got := string(AppendDeadlineBaggage(nil, []byte(tc.src), 750)); got != tc.want {
			t.Errorf("AppendDeadlineBaggage(%q) = %q; want %q", tc.src, got, tc.want)
		}
	}
	// The budget member is unchanged by the refactor.
	if got := string(AppendBaggage(nil, []byte("retrycap-deadline=9,retrycap-budget=7"), 2)); got != "retrycap-deadline=9,retrycap-budget=2" {
		t.Errorf("AppendBaggage = %q", got)
	}
}

// deadline is a Retrycap-Exhausted value, as the four are.
func TestReasonDeadline(t *testing.T) {
	if ReasonDeadline.String() != "deadline" || !ReasonDeadline.Exhausts() || ReasonRetryAfter.Exhausts() {
		t.Fatalf("ReasonDeadline: %q exhausts=%t; retry-after exhausts=%t", ReasonDeadline, ReasonDeadline.Exhausts(), ReasonRetryAfter.Exhausts())
	}
}
