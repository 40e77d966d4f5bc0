package loop

import "time"

// A loop that is busy spins for a moment before it sleeps.
//
// Where the time went at saturation (hack/bench-proxy.sh's per-request
// accounting, wrk -t2 -c64 on 2 cores): the proxy spent less CPU per
// request than HAProxy, the client and the backend the same, yet the
// machine sat idle 3.1-5.4 µs per request beside the loops against
// HAProxy's 1.6-2.6, and served fewer requests. A loop that finds
// nothing ready sleeps in epoll_wait; on this VM its CPU halts and the
// next answer, microseconds later, wakes it through the hypervisor.
// So a loop whose recent waits were all shorter than the spin window
// polls without sleeping (epoll_wait with timeout 0), yielding its CPU
// to any other runnable thread between polls (sched_yield: it takes no
// CPU from the app, the client or the backend), for at most that
// window, then sleeps as before. A loop whose waits are longer (a
// sidecar at a few thousand requests a second or less) never spins:
// the window is a bound on what a spin can cost per wake-up, and the
// average keeps it for loops where events come within it. HAProxy's
// `busy-polling` is the same idea, unbounded and off by default; Go's
// scheduler spins its threads for work the same way, bounded.
type spinWait struct {
	limit int64 // the spin window, ns; 0: never spin
	// gapAvg is a moving average (1/8 weight) of how long the loop's
	// waits took until events came, spun or slept.
	gapAvg int64
}

// spinGapCap bounds one wait's weight in the average: after a long idle
// time, a few dozen short waits bring it back under the window.
const spinGapCap = int64(time.Second)

func newSpinWait(limit time.Duration) spinWait {
	// Starts as after a long idle time: a loop spins once some 80 waits
	// in a row were short (a busy one reaches that within milliseconds),
	// not because its first few were.
	return spinWait{limit: int64(limit), gapAvg: spinGapCap}
}

// should reports whether the next wait spins first.
func (s *spinWait) should() bool { return s.limit > 0 && s.gapAvg < s.limit }

// observe records a wait that took gap ns until events came (or until
// its timeout).
func (s *spinWait) observe(gap int64) {
	gap = max(0, min(gap, spinGapCap))
	s.gapAvg += (gap - s.gapAvg) / 8
}
