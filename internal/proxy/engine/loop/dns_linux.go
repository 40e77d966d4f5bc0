//go:build linux

package loop

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/retrycap/retrycap/internal/proxy/forward"
)

// dnsEntry is a loop's cached resolution of one host name.
type dnsEntry struct {
	ips     []netip.Addr
	err     error
	expires int64 // 0: never resolved
	next    int   // round robin over ips
	pending bool
	waiters []dnsWaiter
}

type dnsWaiter struct {
	cl   *call
	seq  uint64
	port string
}

// Cached answers live this long; a failure is cached shortly, so that a
// missing name is not looked up for every request.
const (
	dnsTTL         = 5 * time.Second
	dnsFailureTTL  = time.Second
	dnsLookupLimit = 10 * time.Second
	// dnsForget drops an entry this long past its expiry.
	dnsForget = time.Minute
)

// lookupNetIP is the loops' resolver (a variable for tests).
var lookupNetIP = net.DefaultResolver.LookupNetIP

// lookup resolves host off the loop and posts the answer back to it.
func (l *evLoop) lookup(host string, e *dnsEntry) {
	if e.pending {
		return
	}
	e.pending = true
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), dnsLookupLimit)
		ips, err := lookupNetIP(ctx, "ip", host)
		cancel()
		l.poll.Post(func() { l.resolved(host, e, ips, err) })
	}()
}

func (l *evLoop) resolved(host string, e *dnsEntry, ips []netip.Addr, err error) {
	e.pending = false
	now := l.now()
	if err == nil && len(ips) == 0 {
		err = fmt.Errorf("lookup %s: no addresses", host)
	}
	if err != nil {
		if len(e.ips) == 0 {
			e.err = err
		}
		e.expires = now + int64(dnsFailureTTL)
	} else {
		for i, ip := range ips {
			ips[i] = ip.Unmap()
		}
		e.ips, e.err, e.expires = ips, nil, now+int64(dnsTTL)
	}
	waiters := e.waiters
	e.waiters = nil
	for _, w := range waiters {
		if w.cl.seq != w.seq || w.cl.c == nil {
			continue // that attempt timed out, or its client left
		}
		if e.err != nil {
			w.cl.failed(&forward.DialError{Err: &net.OpError{Op: "dial", Net: "tcp", Err: e.err}})
			continue
		}
		e.next++
		w.cl.connectAny(e.ips, e.next, w.port)
	}
}
