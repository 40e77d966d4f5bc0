package policy

import (
	"testing"
)

func TestParseBudgetHeader(t *testing.T) {
	cases := []struct {
		in string
		n  int
		ok bool
	}{
		{"4", 4, true}, {" 12\t", 12, true}, {"1", 1, true},
		{"", 0, false}, {"0", 0, false}, {"-1", 0, false}, {"+3", 0, false},
		{"3a", 0, false}, {"3 4", 0, false}, {"99999999999", 0, false},
		{"1073741824", 1073741824, true}, {"1073741825", 0, false},
	}
	for _, c := range cases {
		n, ok := ParseBudgetHeader([]byte(c.in))
		if n != c.n || ok != c.ok {
			t.Errorf("ParseBudgetHeader(%q) = %d,%v want %d,%v", c.in, n, ok, c.n, c.ok)
		}
	}
}

func TestParseBaggage(t *testing.T) {
	cases := []struct {
		in string
		n  int
		ok bool
	}{
		{"retrycap-budget=3", 3, true},
		{"userId=alice, retrycap-budget=2;prop=x, other=1", 2, true},
		{"Retrycap-Budget = 5", 5, true},
		{"retrycap-budget=x", 0, false},
		{"retrycap-budgets=3", 0, false},
		{"a=1,b=2", 0, false},
		{"", 0, false},
		{",,retrycap-budget=7,", 7, true},
	}
	for _, c := range cases {
		n, ok := ParseBaggage([]byte(c.in))
		if n != c.n || ok != c.ok {
			t.Errorf("ParseBaggage(%q) = %d,%v want %d,%v", c.in, n, ok, c.n, c.ok)
		}
	}
}

func TestAppendBaggage(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", "retrycap-budget=2"},
		{"a=1", "a=1,retrycap-budget=2"},
		{"a=1, retrycap-budget=9;p, b=2", "a=1,retrycap-budget=2,b=2"},
		{"retrycap-budget=9,retrycap-budget=8", "retrycap-budget=2"},
	}
	for _, c := range cases {
		got := string(AppendBaggage(nil, []byte(c.in), 2))
		if got != c.want {
			t.Errorf("AppendBaggage(%q) = %q want %q", c.in, got, c.want)
		}
	}
}

func TestIncomingBudget(t *testing.T) {
	cases := []struct {
		h, b      string
		hh, hb    bool
		cap, want int
	}{
		{"", "", false, false, 4, 4},
		{"2", "", true, false, 4, 2},
		{"100", "", true, false, 4, 4}, // spoofed above the cap is clamped
		{"junk", "", true, false, 4, 4},
		{"", "retrycap-budget=3", false, true, 4, 3},
		{"3", "retrycap-budget=2", true, true, 4, 2},
	}
	for _, c := range cases {
		got := IncomingBudget([]byte(c.h), c.hh, []byte(c.b), c.hb, c.cap)
		if got != c.want {
			t.Errorf("IncomingBudget(%q,%q,cap %d) = %d want %d", c.h, c.b, c.cap, got, c.want)
		}
	}
}

func TestSplitBudget(t *testing.T) {
	cases := []struct{ attempts, n, wantAtt, wantFirst int }{
		{3, 4, 3, 2}, {3, 2, 2, 1}, {3, 1, 1, 1}, {1, 4, 1, 4}, {5, 100, 5, 96}, {0, 0, 1, 1},
	}
	for _, c := range cases {
		s := SplitBudget(c.attempts, c.n)
		if s.Attempts != c.wantAtt || s.First != c.wantFirst {
			t.Errorf("SplitBudget(%d,%d) = %+v", c.attempts, c.n, s)
		}
		sum := 0
		for i := 1; i <= s.Attempts; i++ {
			sum += s.BudgetFor(i)
		}
		if n := max(c.n, 1); sum > n {
			t.Errorf("SplitBudget(%d,%d): forwarded %d > n", c.attempts, c.n, sum)
		}
	}
}

// chainLoad computes, with the split applied at every hop, how many requests
// the last service receives when everything fails: the invariant the chain
// test checks with real processes.
func chainLoad(n int, hops []int) int {
	if len(hops) == 0 {
		return 1
	}
	s := SplitBudget(hops[0], n)
	total := 0
	for i := 1; i <= s.Attempts; i++ {
		total += chainLoad(s.BudgetFor(i), hops[1:])
	}
	return total
}

func TestChainInvariant(t *testing.T) {
	for cap := 1; cap <= 30; cap++ {
		for _, hops := range [][]int{{3, 3, 3}, {2, 3, 3, 3}, {5}, {1, 1, 1}, {4, 1, 4}} {
			load := chainLoad(cap, hops)
			if load > cap {
				t.Fatalf("cap %d hops %v: load %d", cap, hops, load)
			}
		}
	}
	if got := chainLoad(4, []int{3, 3, 3}); got != 4 {
		t.Fatalf("storm27 with cap 4 = %d, want 4", got)
	}
}

func FuzzParseBudgetHeader(f *testing.F) {
	for _, s := range []string{"4", " 1 ", "0", "-3", "abc", "99999999999999999999", "1073741824", "\t7\t", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, ok := ParseBudgetHeader(b)
		if ok && (n < 1 || n > maxBudget) {
			t.Fatalf("%q -> %d", b, n)
		}
		if !ok && n != 0 {
			t.Fatalf("%q -> %d with !ok", b, n)
		}
		if ok {
			// Round trip: the canonical form parses to the same value.
			if m, ok2 := ParseBudgetHeader(AppendInt(nil, n)); !ok2 || m != n {
				t.Fatalf("round trip %d -> %d %v", n, m, ok2)
			}
		}
		if got := IncomingBudget(b, true, nil, false, 4); got < 1 || got > 4 {
			t.Fatalf("clamp %q -> %d", b, got)
		}
	})
}

func FuzzParseBaggage(f *testing.F) {
	for _, s := range []string{"retrycap-budget=3", "a=1, retrycap-budget=2;p=1", "retrycap-budget=", ",,,", "=,=", "RETRYCAP-BUDGET=9", "retrycap-budget=1,retrycap-budget=2"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, ok := ParseBaggage(b)
		if ok && (n < 1 || n > maxBudget) {
			t.Fatalf("%q -> %d", b, n)
		}
		// Writing the member and parsing it back yields the written value.
		out := AppendBaggage(nil, b, 3)
		if m, ok := ParseBaggage(out); !ok || m != 3 {
			t.Fatalf("AppendBaggage(%q) = %q parses to %d,%v", b, out, m, ok)
		}
	})
}
