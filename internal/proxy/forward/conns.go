package forward

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Connection management both engines share: the accept pause on descriptor
// exhaustion, and the self-loop check on an address dialled.

// Timeout kinds, the label of retrycap_proxy_timeouts_total{kind}.
const (
	TimeoutHTTPRequest = "http-request" // a request head not whole within --http-request-timeout (408)
	TimeoutClient      = "client"       // a request body not whole within --client-timeout (408)
	TimeoutKeepAlive   = "keep-alive"   // an idle client connection closed after --keepalive-timeout
)

// Exhausted reports whether an accept failed for want of descriptors or
// kernel memory: the listener stays readable, so accepting again at once
// would spin.
func Exhausted(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}

// The accept pause: it starts at acceptPauseMin and doubles up to
// acceptPauseMax while accepts keep failing; one log line per
// acceptLogEvery at most.
const (
	acceptPauseMin = 10 * time.Millisecond
	acceptPauseMax = time.Second
	acceptLogEvery = 10 * time.Second
)

// AcceptPause is the backoff of a data listener's accepts on descriptor
// exhaustion, shared by the loops (each pauses its own watch of the
// listener) and the goroutine engine's listener.
type AcceptPause struct {
	f       *Forwarder
	mu      sync.Mutex
	next    time.Duration // the next pause
	lastLog time.Time
	since   int // pauses since the last log line
	paused  atomic.Bool
}

// Paused records an accept that failed with err (Exhausted) and returns how
// long to wait before accepting again.
func (p *AcceptPause) Paused(err error) time.Duration {
	p.f.M.AcceptPauses.Inc()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused.Store(true)
	if p.next < acceptPauseMin {
		p.next = acceptPauseMin
	}
	d := p.next
	p.next = min(2*p.next, acceptPauseMax)
	p.since++
	if now := time.Now(); now.Sub(p.lastLog) >= acceptLogEvery {
		p.f.Logger.Printf("accept: %v: accepting paused (%d pause(s) since the last line, now %s); open connections and the admin port are served on", err, p.since, d)
		p.lastLog, p.since = now, 0
	}
	return d
}

// Resumed records an accept that succeeded: the backoff starts over.
func (p *AcceptPause) Resumed() {
	if !p.paused.Load() {
		return
	}
	p.mu.Lock()
	p.paused.Store(false)
	p.next = 0
	p.mu.Unlock()
}

// Reserve is one spare descriptor kept for the admin port, so that
// /healthz, /readyz and /metrics answer while the data path has exhausted
// the process's descriptors: the admin listener frees it to accept on
// EMFILE and takes it back when that connection closes. A data accept that
// finds it missing (its descriptor taken meanwhile) gives the descriptor it
// just got back for it, closing that connection (as HAProxy refuses
// connections over maxconn).
type Reserve struct {
	mu      sync.Mutex
	f       *os.File
	missing atomic.Bool
}

// Take opens the spare unless it is held; false if that failed.
func (r *Reserve) Take() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		f, err := os.Open(os.DevNull)
		if err != nil {
			r.missing.Store(true)
			return false
		}
		r.f = f
	}
	r.missing.Store(false)
	return true
}

// Use closes the spare so that its descriptor can be used; false if there
// was none.
func (r *Reserve) Use() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return false
	}
	_ = r.f.Close()
	r.f = nil
	r.missing.Store(true)
	return true
}

// Missing reports whether the spare is used or could not be taken back.
func (r *Reserve) Missing() bool { return r.missing.Load() }

// Close releases the spare for good.
func (r *Reserve) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f != nil {
		_ = r.f.Close()
		r.f = nil
	}
	r.missing.Store(false)
}

// IsSelfAddr reports whether ip:port is the data listener: its port on a
// loopback or unspecified address or the listener's own (an upstream whose
// name resolves to the proxy itself, --upstreams localhost=2 say, would loop
// until descriptors run out).
func (f *Forwarder) IsSelfAddr(ip netip.Addr, port int) bool {
	if f.selfAddr == nil || port != f.selfAddr.Port {
		return false
	}
	ip = ip.Unmap()
	if ip.IsLoopback() || ip.IsUnspecified() {
		return true
	}
	self, ok := netip.AddrFromSlice(f.selfAddr.IP)
	return ok && self.Unmap() == ip
}

// IsSelfConn is IsSelfAddr of a connection's remote address.
func (f *Forwarder) IsSelfConn(c net.Conn) bool {
	a, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return false
	}
	ip, ok := netip.AddrFromSlice(a.IP)
	return ok && f.IsSelfAddr(ip, a.Port)
}

// LoopError is an attempt refused because its address is the proxy's own.
type LoopError struct{ Addr string }

func (e *LoopError) Error() string {
	return "loop refused: " + e.Addr + " is this proxy's own data listener (an upstream resolving to the proxy itself)"
}

// SelfLoopBody is the answer's body for a request the proxy would send to
// itself.
func SelfLoopBody(what string) string {
	return "retrycap-proxy: request for " + what + " would be sent to the proxy itself: loop refused; an upstream must not resolve to the proxy's own address (--upstreams, --resolve)\n"
}
