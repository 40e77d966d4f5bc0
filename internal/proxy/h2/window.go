package h2

// Flow-control windows (RFC 9113 section 5.2) as types, as x/net's
// server and transport keep them: an outflow is a window the relay sends
// into (a peer's receive window as the relay counts it), an inflow one a
// peer sends into (the relay's receive window, with what was consumed and
// not yet given back).

// outflow is a send window: what may still be sent.
type outflow struct{ n int64 }

// available is what may be sent now (<= 0: nothing).
func (f *outflow) available() int64 { return f.n }

// take charges n bytes sent.
func (f *outflow) take(n int64) { f.n -= n }

// add credits a WINDOW_UPDATE's increment or a SETTINGS_INITIAL_WINDOW_SIZE
// change (negative); false when the window passes 2^31-1, a
// FLOW_CONTROL_ERROR.
func (f *outflow) add(n int64) bool {
	f.n += n
	return f.n <= maxWindow
}

// inflow is a receive window: avail what the peer may still send, unsent
// what was consumed (passed on) and not yet given back in a WINDOW_UPDATE.
type inflow struct {
	avail, unsent int64
	// quantum: bytes are given back in WINDOW_UPDATEs of at least this
	// (a quarter of the window), not one per frame.
	quantum int64
}

func newInflow(window int64) inflow { return inflow{avail: window, quantum: window / 4} }

// take charges n bytes received (padding included); false when the peer
// sent more than the window allowed, a FLOW_CONTROL_ERROR.
func (f *inflow) take(n int64) bool {
	if n > f.avail {
		return false
	}
	f.avail -= n
	return true
}

// add gives back n consumed bytes; it returns the increment of the
// WINDOW_UPDATE to send now (0: not yet a quantum).
func (f *inflow) add(n int64) uint32 {
	f.unsent += n
	if f.unsent < f.quantum {
		return 0
	}
	k := f.unsent
	f.unsent = 0
	f.avail += k
	return uint32(k)
}
