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
		calls uint64
		want  spareState
	}{
		{on(0), spareOnCalls, on(0)},
		{on(0), 1_000_000, on(0)},
		{on(3), spareOnCalls, on(0)}, // a busy window resets the count
		{on(0), spareOnCalls - 1, on(1)},
		{on(0), 0, on(1)},
		{on(spareOffWindows - 2), 0, on(spareOffWindows - 1)},
		{on(spareOffWindows - 1), 0, off}, // the last quiet window
		{on(spareOffWindows - 1), spareOnCalls - 1, off},
		{off, 0, off},
		{off, spareOnCalls - 1, off},
		{off, spareOnCalls, on(0)},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%+v/%d", c.from, c.calls), func(t *testing.T) {
			if got := c.from.next(c.calls); got != c.want {
				t.Fatalf("%+v after %d calls: %+v, want %+v", c.from, c.calls, got, c.want)
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
