package policy

import "testing"

func TestLoggedBudget(t *testing.T) {
	cases := []struct {
		on      bool
		s       Split
		n       int
		in, out int
	}{
		{false, Split{Attempts: 3, First: 8}, 1, -1, -1},
		{true, Split{Attempts: 1, First: 10}, 1, 10, 10},
		{true, Split{Attempts: 3, First: 8}, 1, 10, 8},
		{true, Split{Attempts: 3, First: 8}, 2, 10, 1},
		{true, Split{Attempts: 3, First: 8}, 3, 10, 1},
		{true, SplitBudget(3, 2), 1, 2, 1},
		{true, SplitBudget(3, 2), 2, 2, 1},
	}
	for _, c := range cases {
		in, out := LoggedBudget(c.on, c.s, c.n)
		if in != c.in || out != c.out {
			t.Errorf("LoggedBudget(%v, %+v, %d) = %d, %d; want %d, %d", c.on, c.s, c.n, in, out, c.in, c.out)
		}
	}
}

func TestDecisionExhausted(t *testing.T) {
	cases := []struct {
		d    Decision
		want string
	}{
		{Decision{}, ""},
		{Decision{Retry: true}, ""},
		{Decision{Retry: true, Reason: ReasonBudget}, ""},
		{Decision{Reason: ReasonRetryAfter}, "retry-after"},
		{Decision{Reason: ReasonBreaker}, "breaker"},
	}
	for _, c := range cases {
		if got := c.d.Exhausted(); got != c.want {
			t.Errorf("%+v.Exhausted() = %q, want %q", c.d, got, c.want)
		}
	}
}
