package loop

import (
	"testing"
	"time"
)

// TestSpinWait: a loop spins only once its recent waits were shorter than
// the window, stops after long ones, and never with the window at 0.
func TestSpinWait(t *testing.T) {
	us := int64(time.Microsecond)
	tests := []struct {
		name  string
		limit time.Duration
		gaps  []int64 // waits observed, in order
		want  bool
	}{
		{"a new loop does not spin", 50 * time.Microsecond, nil, false},
		{"off never spins", 0, []int64{0, 0, 0, 0, 0, 0, 0, 0}, false},
		{"a new loop: 20 short waits do not make it spin", 50 * time.Microsecond, repeat(1*us, 20), false},
		{"100 short waits: spins", 50 * time.Microsecond, repeat(5*us, 100), true},
		{"a long wait after short ones stops it", 50 * time.Microsecond, append(repeat(5*us, 100), 2000*us), false},
		{"waits at the window: no spin", 50 * time.Microsecond, repeat(50*us, 200), false},
		{"waits just under the window: spins", 50 * time.Microsecond, repeat(40*us, 200), true},
		// An hour idle weighs as a second: 8 short waits after it do not
		// bring it back, 100 do (the average decays by 7/8 per wait).
		{"after an idle hour, 8 short waits: no spin yet", 50 * time.Microsecond, append([]int64{int64(time.Hour)}, repeat(1*us, 8)...), false},
		{"after an idle hour, 100 short waits: spins", 50 * time.Microsecond, append([]int64{int64(time.Hour)}, repeat(1*us, 100)...), true},
		{"a negative gap (clock) counts as 0", 50 * time.Microsecond, repeat(-int64(time.Hour), 100), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSpinWait(tc.limit)
			for _, g := range tc.gaps {
				s.observe(g)
			}
			if got := s.should(); got != tc.want {
				t.Fatalf("should() = %v after %d waits (average %d ns, window %s), want %v", got, len(tc.gaps), s.gapAvg, tc.limit, tc.want)
			}
		})
	}
}

func repeat(v int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = v
	}
	return out
}
