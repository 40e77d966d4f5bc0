//go:build linux

package loop

import (
	"time"
)

// idlePool is a loop's idle connections to one target, most recent last.
type idlePool struct{ conns []*upConn }

const maxIdlePerTarget = 256

// upstreamIdleTimeout closes a pooled connection unused this long, as
// fasthttp's client does (MaxIdleConnDuration): one a NAT or load balancer
// dropped without a FIN would otherwise cost a request its per-try timeout.
const upstreamIdleTimeout = 10 * time.Second

// expire closes the connections idle since before cutoff (the oldest
// are first) and reports whether the pool is empty.
func (pool *idlePool) expire(cutoff int64) bool {
	n := 0
	for n < len(pool.conns) && (pool.conns[n].closed || pool.conns[n].idleSince < cutoff) {
		pool.conns[n].close()
		n++
	}
	if n > 0 {
		rest := copy(pool.conns, pool.conns[n:])
		clear(pool.conns[rest:])
		pool.conns = pool.conns[:rest]
	}
	return len(pool.conns) == 0
}

func (l *evLoop) idle(target string) *upConn {
	pool := l.pools[target]
	if pool == nil {
		return nil
	}
	for n := len(pool.conns); n > 0; n = len(pool.conns) {
		uc := pool.conns[n-1]
		pool.conns[n-1] = nil
		pool.conns = pool.conns[:n-1]
		if !uc.closed {
			return uc
		}
	}
	return nil
}

func (l *evLoop) release(uc *upConn) {
	pool := l.pools[uc.target]
	if pool == nil {
		pool = &idlePool{}
		l.pools[uc.target] = pool
	}
	if len(pool.conns) >= maxIdlePerTarget {
		uc.close()
		return
	}
	uc.idleSince = l.now()
	pool.conns = append(pool.conns, uc)
}

func (pool *idlePool) closeAll() {
	for _, uc := range pool.conns {
		uc.close()
	}
	pool.conns = pool.conns[:0]
}
