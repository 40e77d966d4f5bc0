package proxy

import (
	"runtime"
	"time"
)

// The spare P follows the event loops' traffic.
//
// Each loop waits in epoll_wait, a blocking system call that holds its P:
// with no P spare, the runtime's monitor takes a waiting loop's P away and
// the loop must get one back on every return from the kernel (6-8 % of the
// proxy's CPU per request under wrk, 1 loop; without the spare P, HTTP/1.1
// lost 3-9 % of its req/s in the third session's quiet re-measure). So the
// process runs one P more than it has loops. But the h2/gRPC relay runs on
// ordinary goroutines, not on the loops, and with that P idle every batch
// the relay's netpoll readies wakes a second thread (perf: 30 % of the
// samples in the kernel's finish_task_switch, 11 % in wake-ups): without
// the spare P, a gRPC call over one connection cost 0.67-0.94x the CPU.
// Parking an idle loop in the runtime's poller instead (so that it holds
// no P) was tried and cost HTTP/1.1 more than the spare P saves gRPC
// (docs/benchmarks.md, "The spare P and the loops' wait").
//
// So the P is there while the loops carry HTTP/1.1 traffic and goes when
// they have carried none for a while: a sidecar whose traffic is gRPC only
// (the loops accept its connections, read their CONNECT or h2c preface and
// hand them off) runs without it, one with HTTP/1.1 traffic as before. The
// calls the loops serve are counted, not their wake-ups nor the requests
// they hand off: new gRPC connections wake the loops too. The threshold
// is low because the spare P pays at low rates as well: at 150 requests/s
// a build with no spare P spent 1.2-1.5x main's CPU (the monitor takes the
// P of a loop asleep in epoll_wait, and hands it to another thread to
// watch the network). A change of GOMAXPROCS stops the
// world for a moment, hence the hysteresis: the P comes back after the
// first window with traffic, and goes after spareOffWindows without.
const (
	// spareWindow is how often the loops' calls are counted.
	spareWindow = time.Second
	// spareOnCalls is the calls per window that bring the spare P in
	// (or keep it). Below it, whether the P is there costs nothing
	// measurable either way.
	spareOnCalls = 10
	// spareOffWindows is how many windows in a row below spareOnCalls let
	// the spare P go.
	spareOffWindows = 5
)

// spareState is the spare P's state: on, and the quiet windows in a row
// counted while on.
type spareState struct {
	on    bool
	quiet int
}

// next is the state after a window in which the loops started calls calls.
func (s spareState) next(calls uint64) spareState {
	switch {
	case calls >= spareOnCalls:
		return spareState{on: true}
	case !s.on:
		return s
	case s.quiet+1 >= spareOffWindows:
		return spareState{}
	default:
		return spareState{on: true, quiet: s.quiet + 1}
	}
}

// followSpareProc starts with the spare P (loops = GOMAXPROCS as set: the
// environment, the container's CPU limit) and, every spareWindow until
// stop closes, sets GOMAXPROCS to the loops' number plus the spare P or
// not, from the loops' requests (calls: the running total). Only Main does
// this: tests start many proxies in one process.
func followSpareProc(loops int, calls func() uint64, stop <-chan struct{}) {
	runtime.GOMAXPROCS(loops + 1)
	go func() {
		t := time.NewTicker(spareWindow)
		defer t.Stop()
		s, last := spareState{on: true}, calls()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			total := calls()
			n := s.next(total - last)
			last = total
			if n.on != s.on {
				procs := loops
				if n.on {
					procs++
				}
				runtime.GOMAXPROCS(procs)
			}
			s = n
		}
	}()
}
