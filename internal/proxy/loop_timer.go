package proxy

import "container/heap"

// timer is one pending callback of an event loop; a timer belongs to one
// owner (a call's per-try timeout or backoff, a loop's sweep) and is
// rescheduled rather than reallocated.
type timer struct {
	when  int64 // nowNanos time it fires at
	idx   int   // position in the heap; -1 when not scheduled
	fire  func()
	owner any // what a panic in fire closes (a *call), or nil
}

func newTimer(fire func()) *timer { return &timer{idx: -1, fire: fire} }

// timerHeap is a loop's timers, earliest first: O(log n) to schedule,
// cancel or fire, and the loop sleeps until the earliest.
type timerHeap []*timer

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].when < h[j].when }
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *timerHeap) Push(x any) {
	t := x.(*timer) //nolint:forcetypeassert // only timers are pushed
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

// schedule (re)arms t to fire at when.
func (h *timerHeap) schedule(t *timer, when int64) {
	t.when = when
	if t.idx >= 0 {
		heap.Fix(h, t.idx)
		return
	}
	heap.Push(h, t)
}

// cancel disarms t; a no-op when it is not armed.
func (h *timerHeap) cancel(t *timer) {
	if t.idx >= 0 {
		heap.Remove(h, t.idx)
	}
}

// waitMillis is how long the loop may sleep in epoll_wait: until the
// earliest timer (rounded up to a millisecond, so that it is due on waking),
// or forever (-1) without timers.
func (h timerHeap) waitMillis(now int64) int {
	if len(h) == 0 {
		return -1
	}
	d := h[0].when - now
	if d <= 0 {
		return 0
	}
	return int((d + 999_999) / 1_000_000)
}

// fireDue runs every timer due at now, earliest first, through run. A
// timer may schedule timers (itself included); those due already run in
// this call.
func (h *timerHeap) fireDue(now int64, run func(*timer)) {
	for len(*h) > 0 && (*h)[0].when <= now {
		t := heap.Pop(h).(*timer) //nolint:forcetypeassert // only timers are pushed
		run(t)
	}
}
