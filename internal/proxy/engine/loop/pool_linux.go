//go:build linux

package loop

// idlePool is a loop's idle connections to one target, most recent last.
type idlePool struct{ conns []*upConn }

const maxIdlePerTarget = 256

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

// idle takes the most recent pooled connection to target that may still be
// trusted: one idle longer than --upstream-idle-timeout (l.upstreamIdle) is
// closed, not reused (the upstream may have closed it: Node.js does after
// 5 s), as is one whose end the upstream closed (hup). The sweep closes the
// others; a connection closed meanwhile is caught by the re-send
// (call.failed).
func (l *evLoop) idle(target string) *upConn {
	pool := l.pools[target]
	if pool == nil {
		return nil
	}
	cutoff := l.now() - int64(l.upstreamIdle)
	for n := len(pool.conns); n > 0; n = len(pool.conns) {
		uc := pool.conns[n-1]
		pool.conns[n-1] = nil
		pool.conns = pool.conns[:n-1]
		if uc.closed {
			continue
		}
		if uc.hup || uc.idleSince < cutoff {
			uc.close()
			continue
		}
		return uc
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
