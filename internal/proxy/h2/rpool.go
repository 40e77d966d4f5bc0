package h2

import (
	"slices"
	"sync"
	"time"
)

// waiter is an attempt queued for a connection, and the use of its
// stream it belongs to (rstream.gen: a queued attempt whose stream ended
// and was reused is not the new call's).
type waiter struct {
	a   *ratt
	gen uint32
}

// rpool is one upstream address's connections.
type rpool struct {
	h    *Handler
	addr string

	mu      sync.Mutex
	conns   []*upconn
	dialing bool
	waiters []waiter // attempts waiting for a connection with room
}

func (h *Handler) relayPool(addr string) *rpool {
	if v, ok := h.rpools.Load(addr); ok {
		return v.(*rpool)
	}
	v, _ := h.rpools.LoadOrStore(addr, &rpool{h: h, addr: addr})
	return v.(*rpool)
}

// acquire reserves a stream on a connection with room, or queues a for
// the next one (dialing it); the caller holds a's client connection's mu.
func (p *rpool) acquire(a *ratt) *upconn {
	p.mu.Lock()
	defer p.mu.Unlock()
	// A request that may not be sent twice looks at the socket first, as
	// the HTTP/1.1 engines do: a close the reader has not read yet.
	check := !a.s.cs.retryable
	for _, uc := range p.conns {
		if check && uc.peerGone() {
			continue
		}
		if uc.reserve() {
			return uc
		}
	}
	a.to(attQueued)
	p.waiters = append(p.waiters, waiter{a, a.s.gen})
	// Past Config.MaxUpstreamConns no connection is dialled: the waiters
	// take the slots the open ones free (upconn.close kicks the pool when
	// a full one gets one). An upstream's SETTINGS_MAX_CONCURRENT_STREAMS
	// is per connection: without a bound, clients' streams over it became
	// connections without end (1 advertised, 300 calls: 157 connections).
	if !p.dialing && !p.refusing() && len(p.conns) < p.h.cfg.MaxUpstreamConns {
		p.dialing = true
		go p.dial()
	}
	return nil
}

// refusing reports whether a connection of the pool has the upstream's
// SETTINGS_MAX_CONCURRENT_STREAMS 0 (RFC 9113 6.5.2: no new stream; an
// upstream shedding load says so): the upstream refuses streams, and a new
// connection would say the same. The waiters wait for a stream's room
// (its SETTINGS raise the limit, or a connection goes: kick), each within
// its per-try timeout, as x/net's Transport waits on its connection for a
// slot. Before, every freshly dialled connection sent them to dial the
// next at once: one call waiting for 1 s opened 4,524 connections to the
// upstream (TestMaxStreamsZeroNoDialStorm). p.mu held.
func (p *rpool) refusing() bool {
	for _, uc := range p.conns {
		uc.mu.Lock()
		zero := uc.maxStreams == 0 && !uc.goAway && !uc.closed
		uc.mu.Unlock()
		if zero {
			return true
		}
	}
	return false
}

// waitRoom queues a (its slot on uc given back) until uc's writer
// drained enough for its header block (onDrain kicks the pool); the
// caller holds a's client connection's mu. No connection is dialled for
// it: the upstream is slow to read, not short of streams. If uc drained
// between the check and the queueing, the pool is kicked at once (no
// lost wake-up).
func (p *rpool) waitRoom(a *ratt, uc *upconn, need int) {
	p.mu.Lock()
	a.to(attQueued)
	p.waiters = append(p.waiters, waiter{a, a.s.gen})
	p.mu.Unlock()
	if uc.cw.headRoom(need) {
		p.kick()
	}
}

// forget drops a queued attempt whose call ended (its per-try timeout, its
// client's reset) from the queue; the caller holds a's client
// connection's mu, as for acquire. Before, it stayed there until the next
// kick, which an upstream giving no room (SETTINGS_MAX_CONCURRENT_STREAMS
// 0, every connection full at Config.MaxUpstreamConns) does not give:
// one entry per ended call, without bound (TestEndedWaitersLeaveThePool).
func (p *rpool) forget(a *ratt) {
	p.mu.Lock()
	p.waiters = slices.DeleteFunc(p.waiters, func(w waiter) bool { return w.a == a })
	p.mu.Unlock()
}

// kick hands the waiting attempts another try (a connection got room),
// from a goroutine of its own: the caller may hold a client connection's
// mu, and the waiters take theirs.
func (p *rpool) kick() {
	p.mu.Lock()
	ws := p.waiters
	p.waiters = nil
	p.mu.Unlock()
	if len(ws) == 0 {
		return
	}
	go func() {
		for _, w := range ws {
			w.a.retryAcquire(w.gen, nil)
		}
		p.h.flushDirty()
	}()
}

func (p *rpool) dial() {
	uc, err := p.h.dialUp(p)
	p.mu.Lock()
	p.dialing = false
	if err == nil {
		p.conns = append(p.conns, uc)
	}
	ws := p.waiters
	p.waiters = nil
	p.mu.Unlock()
	if err == nil {
		uc.mu.Lock()
		uc.idleSince = time.Now()
		uc.idle = time.AfterFunc(upIdleTimeout, uc.onIdle)
		uc.mu.Unlock()
		go uc.readLoop()
	}
	for _, w := range ws {
		w.a.retryAcquire(w.gen, err)
	}
	p.h.flushDirty()
}

func (p *rpool) remove(uc *upconn) {
	p.mu.Lock()
	removed := false
	for i, c := range p.conns {
		if c == uc {
			p.conns = append(p.conns[:i:i], p.conns[i+1:]...)
			removed = true
			break
		}
	}
	p.mu.Unlock()
	if removed {
		// Waiters that a refusing connection held back (refusing) dial
		// now that it is gone.
		p.kick()
	}
}

// relayClosePools closes every upstream connection (Shutdown).
func (h *Handler) relayClosePools() {
	h.rpools.Range(func(_, v any) bool {
		p := v.(*rpool)
		p.mu.Lock()
		conns := p.conns
		p.conns = nil
		p.mu.Unlock()
		for _, uc := range conns {
			_ = uc.cw.Close()
		}
		return true
	})
}
