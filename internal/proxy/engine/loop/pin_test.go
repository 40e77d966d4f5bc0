package loop

import (
	"testing"
	"time"
)

func TestPinned(t *testing.T) {
	ms := int64(time.Millisecond)
	for _, c := range []struct {
		name    string
		was     bool
		calls   uint64
		elapsed int64
		want    bool
	}{
		{"idle stays unpinned", false, 0, 5 * ms, false},
		{"below the on rate", false, 24, 5 * ms, false},               // 4,800/s
		{"at the on rate", false, 25, 5 * ms, true},                   // 5,000/s
		{"saturated", false, 150, 5 * ms, true},                       // 30,000/s
		{"pinned, between the rates, stays", true, 13, 5 * ms, true},  // 2,600/s
		{"pinned, at the off rate, stays", true, 25, 10 * ms, true},   // 2,500/s
		{"pinned, below the off rate, goes", true, 12, 5 * ms, false}, // 2,400/s
		{"a long idle wait lowers the rate", true, 100, 1000 * ms, false},
		{"unpinned, between the rates, stays", false, 13, 5 * ms, false},
		{"no time passed keeps the state", true, 0, 0, true},
		{"no time passed keeps the state, unpinned", false, 10, 0, false},
	} {
		if got := pinned(c.was, c.calls, c.elapsed); got != c.want {
			t.Errorf("%s: pinned(%v, %d calls, %v) = %v, want %v", c.name, c.was, c.calls, time.Duration(c.elapsed), got, c.want)
		}
	}
}
