package proxy

import (
	"fmt"
	"testing"
)

// The spare P's state from one window to the next: on at once in a busy
// window, off only after spareOffWindows quiet ones in a row; a busy
// window resets the count.
func TestSpareStateNext(t *testing.T) {
	on := func(quiet int) spareState { return spareState{on: true, quiet: quiet} }
	off := spareState{}
	cases := []struct {
		from  spareState
		wakes uint64
		want  spareState
	}{
		{on(0), spareOnWakeups, on(0)},
		{on(0), 1_000_000, on(0)},
		{on(3), spareOnWakeups, on(0)}, // a busy window resets the count
		{on(0), spareOnWakeups - 1, on(1)},
		{on(0), 0, on(1)},
		{on(spareOffWindows - 2), 0, on(spareOffWindows - 1)},
		{on(spareOffWindows - 1), 0, off}, // the last quiet window
		{on(spareOffWindows - 1), spareOnWakeups - 1, off},
		{off, 0, off},
		{off, spareOnWakeups - 1, off},
		{off, spareOnWakeups, on(0)},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%+v/%d", c.from, c.wakes), func(t *testing.T) {
			if got := c.from.next(c.wakes); got != c.want {
				t.Fatalf("%+v after %d wake-ups: %+v, want %+v", c.from, c.wakes, got, c.want)
			}
		})
	}
	// From the start (on), spareOffWindows quiet windows and not one fewer.
	s := on(0)
	for i := 1; i <= spareOffWindows; i++ {
		s = s.next(0)
		if s.on != (i < spareOffWindows) {
			t.Fatalf("after %d quiet windows: on=%v", i, s.on)
		}
	}
}
