//go:build linux

package loop

import "golang.org/x/sys/unix"

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
// (call.failed) when the request is replayable. For one that is not (check),
// the socket itself is looked at first (idleEnded: a zero-timeout poll, one
// system call): a close the loop has not processed yet (its event may be
// in the same epoll batch as the request's) is seen before the write, so
// the request goes on a fresh connection instead of failing with 502.
func (l *evLoop) idle(target string, check bool) *upConn {
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
		if uc.hup || uc.idleSince < cutoff || (check && idleEnded(uc.fd)) {
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

// idleEnded reports whether anything happened on an idle keep-alive socket
// since its last answer: bytes, the upstream's close, a reset or an error
// (poll(2) with a zero timeout; a failed poll counts as ended). The
// goroutine engine's check of a pooled connection, which the loop makes
// before it sends a request that is not safe to repeat.
func idleEnded(fd int) bool {
	fds := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLRDHUP}} //nolint:gosec // a descriptor
	n, err := unix.Poll(fds[:], 0)
	return err != nil || n > 0 && fds[0].Revents != 0
}
