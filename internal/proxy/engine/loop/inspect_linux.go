//go:build linux

package loop

import "time"

// What the loops hold, for diagnostics and for the tests of the assembled
// proxy (package proxy), which drive it through real sockets and check
// what the loops did.

// ClientState is what a loop knows of one of its client connections.
type ClientState struct {
	Loop    int  // the loop's index
	FD      int  // the socket
	Writing bool // answer bytes wait for the socket to take them
	EOF     bool // the client's end was seen
	Unread  bool // the loop stopped reading with bytes possibly left in the socket
}

// NumLoops is the number of loops.
func (e *Engine) NumLoops() int { return len(e.loops) }

// Spins is how many waits of the loops polled before they slept (--loop-spin).
func (e *Engine) Spins() uint64 {
	var n uint64
	for _, l := range e.loops {
		n += l.spins.Load()
	}
	return n
}

// Pins is how many times a loop was locked to its thread, busy, and
// unpins how many times it was let go, idle again (pinned).
func (e *Engine) Pins() (pins, unpins uint64) {
	for _, l := range e.loops {
		pins += l.pins.Load()
		unpins += l.unpins.Load()
	}
	return pins, unpins
}

// Calls is the number of calls the loops have started: the HTTP/1.1
// requests they serve themselves, not those they hand off to the goroutine
// engine (CONNECT tunnels, as gRPC clients behind HTTPS_PROXY open them;
// h2c; HTTP/1.0; ...). It lags by the loops' current wake-ups.
func (e *Engine) Calls() uint64 {
	var n uint64
	for _, l := range e.loops {
		n += l.started.Load()
	}
	return n
}

// Clients is the state of every client connection, asked on each loop in
// turn (a loop that does not answer within a second is skipped).
func (e *Engine) Clients() []ClientState {
	var all []ClientState
	for i, l := range e.loops {
		all = append(all, ask(l, func() []ClientState {
			var cs []ClientState
			for c := range l.clients {
				cs = append(cs, ClientState{Loop: i, FD: c.fd, Writing: c.writing(), EOF: c.eof, Unread: c.unread})
			}
			return cs
		})...)
	}
	return all
}

// IdleUpstreams counts the upstream connections in the loops' pools.
func (e *Engine) IdleUpstreams() int {
	n := 0
	for _, l := range e.loops {
		n += ask(l, func() int {
			k := 0
			for _, pool := range l.pools {
				for _, uc := range pool.conns {
					if !uc.closed {
						k++
					}
				}
			}
			return k
		})
	}
	return n
}

// ask runs fn on l and returns its result, waiting for at most a second
// (then, or when l has ended, the zero value).
func ask[T any](l *evLoop, fn func() T) T {
	done := make(chan T, 1)
	var zero T
	if !l.poll.Post(func() { done <- fn() }) {
		return zero
	}
	select {
	case v := <-done:
		return v
	case <-time.After(time.Second):
		return zero
	}
}
