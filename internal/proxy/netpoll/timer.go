package netpoll

import "container/heap"

// Timer is one pending callback of an event loop; a timer belongs to one
// owner (a call's per-try timeout or backoff, a loop's sweep) and is
// rescheduled rather than reallocated.
type Timer struct {
	when int64 // the time (on the loop's clock, nanoseconds) it fires at
	idx  int   // position in the heap; -1 when not scheduled
	Fire func()
	// Owner is what a panic in Fire concerns (the loop closes it), or nil.
	Owner any
}

// NewTimer is a timer that runs fire; it is not scheduled yet.
func NewTimer(fire func()) *Timer { return &Timer{idx: -1, Fire: fire} }

// Timers is a loop's timers, earliest first: O(log n) to schedule, cancel
// or fire, and the loop sleeps until the earliest.
type Timers struct{ h timerHeap }

type timerHeap []*Timer

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].when < h[j].when }
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *timerHeap) Push(x any) {
	t := x.(*Timer) //nolint:forcetypeassert // only timers are pushed
	t.idx = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.idx = -1
	return t
}

// Schedule (re)arms t to fire at when.
func (ts *Timers) Schedule(t *Timer, when int64) {
	t.when = when
	if t.idx >= 0 {
		heap.Fix(&ts.h, t.idx)
		return
	}
	heap.Push(&ts.h, t)
}

// Cancel disarms t; a no-op when it is not armed.
func (ts *Timers) Cancel(t *Timer) {
	if t.idx >= 0 {
		heap.Remove(&ts.h, t.idx)
	}
}

// WaitMillis is how long the loop may sleep in epoll_wait: until the
// earliest timer (rounded up to a millisecond, so that it is due on waking),
// or forever (-1) without timers.
func (ts *Timers) WaitMillis(now int64) int {
	if len(ts.h) == 0 {
		return -1
	}
	d := ts.h[0].when - now
	if d <= 0 {
		return 0
	}
	return int((d + 999_999) / 1_000_000)
}

// FireDue runs every timer due at now, earliest first, through run. A
// timer may schedule timers (itself included); those due already run in
// this call.
func (ts *Timers) FireDue(now int64, run func(*Timer)) {
	for len(ts.h) > 0 && ts.h[0].when <= now {
		t := heap.Pop(&ts.h).(*Timer) //nolint:forcetypeassert // only timers are pushed
		run(t)
	}
}
