package h2

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

// upPool holds the HTTP/2 connections to one known upstream address as
// net/http ClientConns (Transport.NewClientConn, Go 1.26), outside the
// Transport's own pool: that pool's lookup (getConn, a lock, a wantConn
// and a channel per request even with a single connection) was 9 % of the
// proxy's CPU under load. Here a request reserves a stream on the first
// connection with room (one atomic load and the connection's own lock);
// the pool's lock is taken only to dial. A connection is dropped from the
// pool when it becomes unusable (GOAWAY, closed, idle timeout), through
// its state hook or, at the latest, at the next dial (prune); a full one (the upstream's MAX_CONCURRENT_STREAMS
// reached) gets a sibling, as the Transport does.
type upPool struct {
	h     *Handler
	addr  string
	conns atomic.Pointer[[]*http.ClientConn] // copy on write, under mu

	mu      sync.Mutex
	dialing *dialWait // the dial under way, nil if none
}

// dialWait is a dial the requests that found no room wait for together,
// so a down upstream costs one dial per wave of calls, not one each in turn.
type dialWait struct {
	done chan struct{}
	err  error
}

// pool returns the pool of addr.
func (h *Handler) pool(addr string) *upPool {
	if v, ok := h.pools.Load(addr); ok {
		return v.(*upPool)
	}
	v, _ := h.pools.LoadOrStore(addr, &upPool{h: h, addr: addr})
	return v.(*upPool)
}

// get reserves a stream on a connection to the address (dialing one if
// none has room); the caller makes exactly one RoundTrip on it.
func (p *upPool) get(ctx context.Context) (*http.ClientConn, error) {
	for {
		if s := p.conns.Load(); s != nil {
			for _, cc := range *s {
				if cc.Reserve() == nil {
					return cc, nil
				}
			}
		}
		p.mu.Lock()
		p.prune()
		d := p.dialing
		if d == nil {
			d = &dialWait{done: make(chan struct{})}
			p.dialing = d
			go p.dial(d)
		}
		p.mu.Unlock()
		select {
		case <-d.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if d.err != nil {
			return nil, d.err
		}
	}
}

// dial opens a connection for the waiters of d; bounded by the dial's own
// timeout (Config.Dial), not by one waiter's context.
func (p *upPool) dial(d *dialWait) {
	ctx, cancel := context.WithTimeout(context.Background(), p.h.cfg.PerTryTimeout)
	defer cancel()
	cc, err := p.h.tr.NewClientConn(ctx, "http", p.addr)
	p.mu.Lock()
	if err == nil {
		p.add(cc)
	} else {
		var de *dialError
		if !errors.As(err, &de) {
			err = &dialError{err}
		}
		d.err = err
	}
	p.dialing = nil
	p.mu.Unlock()
	close(d.done)
	if cc != nil {
		// After it is in the pool: the hook may run at once and remove it.
		cc.SetStateHook(p.changed)
	}
}

// add puts cc in the pool; p.mu held.
func (p *upPool) add(cc *http.ClientConn) {
	var s []*http.ClientConn
	if old := p.conns.Load(); old != nil {
		s = append(s, *old...)
	}
	s = append(s, cc)
	p.conns.Store(&s)
}

// prune drops the connections that became unusable (an idle one the
// library closed, say) without their state hook having run yet, so the
// list cannot grow with dead ones; p.mu held.
func (p *upPool) prune() {
	old := p.conns.Load()
	if old == nil {
		return
	}
	s := make([]*http.ClientConn, 0, len(*old))
	for _, c := range *old {
		if c.Err() == nil {
			s = append(s, c)
		} else {
			_ = c.Close()
		}
	}
	if len(s) != len(*old) {
		p.conns.Store(&s)
	}
}

// changed is a connection's state hook: an unusable one leaves the pool
// and is closed (its streams have ended or failed with it).
func (p *upPool) changed(cc *http.ClientConn) {
	if cc.Err() == nil {
		return
	}
	p.mu.Lock()
	if old := p.conns.Load(); old != nil {
		s := make([]*http.ClientConn, 0, len(*old))
		for _, c := range *old {
			if c != cc {
				s = append(s, c)
			}
		}
		p.conns.Store(&s)
	}
	p.mu.Unlock()
	_ = cc.Close()
}

// closeAll closes every connection of every pool (Shutdown, after the
// client connections ended).
func (h *Handler) closeAll() {
	h.pools.Range(func(_, v any) bool {
		p := v.(*upPool)
		p.mu.Lock()
		old := p.conns.Load()
		p.conns.Store(nil)
		p.mu.Unlock()
		if old != nil {
			for _, cc := range *old {
				_ = cc.Close()
			}
		}
		return true
	})
}

// unprocessed reports whether a RoundTrip on a ClientConn failed before
// the upstream processed the stream, so that it may be re-sent on another
// connection without counting an attempt: a GOAWAY whose last-stream-id is
// below the stream's, a REFUSED_STREAM, a connection that was unusable
// when the stream was to start. http.Transport decides the same
// (http2canRetryError in net/http's h2_bundle.go) but its errors are
// unexported, so they are recognised by their text (Go 1.26's);
// TestUnprocessedStreamResent makes an upstream send both and fails if a
// Go release changes them.
func unprocessed(err error) bool {
	if err == nil {
		return false
	}
	s := err.Error()
	return s == "http2: Transport received Server's graceful shutdown GOAWAY" ||
		s == "http2: client conn not usable" ||
		s == "http2: client conn could not be established" ||
		strings.Contains(s, "; REFUSED_STREAM")
}
