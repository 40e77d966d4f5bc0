//go:build linux

package loop

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/retrycap/retrycap/internal/proxy/forward"
	"github.com/retrycap/retrycap/internal/proxy/netpoll"
)

// Engine is the set of loops serving one data listener.
type Engine struct {
	f       *forward.Forwarder
	lnFd    int // a duplicate of the data listener's socket
	loops   []*evLoop
	handoff Sink
	// streams counts response bodies being streamed by goroutines; the
	// drain waits for them.
	streams  sync.WaitGroup
	streamMu sync.Mutex
	// streamConns are the client and upstream connections of the answers
	// being streamed (closed when a drain runs out of time).
	streamConns map[net.Conn]struct{}
	// drainCut: a drain ran out of time and closed them: the bodies it
	// cut are the proxy's ("cut":"proxy"), whichever read or write failed.
	drainCut  atomic.Bool
	draining  atomic.Bool
	done      sync.WaitGroup
	shutOnce  sync.Once
	nextLoop  atomic.Uint32 // round robin of accepted connections
	loopsDone chan struct{} // closed when the loops and streams have ended
	// watchErr: a hang-up watch that could not start is logged once.
	watchErr sync.Once
}

// Available reports whether the event loops can run here (Linux: epoll).
func Available() bool { return true }

// Start starts the engine on the proxy's data listener: GOMAXPROCS loops.
// The connections the loops do not serve themselves go to handoff (the
// goroutine engine's listener), with the bytes read of them.
// n is the number of loops; 0 is GOMAXPROCS.
func Start(f *forward.Forwarder, ln net.Listener, handoff Sink, n int) (*Engine, error) {
	fd, err := netpoll.ListenerFd(ln)
	if err != nil {
		return nil, err
	}
	e := &Engine{f: f, lnFd: fd, handoff: handoff}
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	for i := 0; i < n; i++ {
		l, err := newEvLoop(e)
		if err != nil {
			for _, l := range e.loops {
				l.poll.Close()
			}
			_ = unix.Close(fd)
			return nil, err
		}
		e.loops = append(e.loops, l)
	}
	for _, l := range e.loops {
		e.done.Add(1)
		go l.run()
	}
	return e, nil
}

// Shutdown stops accepting, lets the loops finish the requests in flight
// (their connections close after the answer; idle ones at once), then
// waits for streamed bodies. At ctx's end it closes whatever is left.
func (e *Engine) Shutdown(ctx context.Context) error {
	// The drain starts once; a second Shutdown waits for the same end.
	e.shutOnce.Do(func() {
		e.draining.Store(true)
		e.loopsDone = make(chan struct{})
		var drained sync.WaitGroup
		for _, l := range e.loops {
			drained.Add(1)
			if !l.poll.Post(func() { l.drain(); drained.Done() }) {
				drained.Done() // that loop has ended already
			}
		}
		go func() {
			drained.Wait()
			// No loop watches the listener now: closing it refuses new
			// connections (the proxy closes its own descriptor of it too).
			_ = unix.Close(e.lnFd)
			e.done.Wait()
			e.streams.Wait()
			close(e.loopsDone)
		}()
	})
	select {
	case <-e.loopsDone:
		return nil
	case <-ctx.Done():
		for _, l := range e.loops {
			l.poll.Post(func() { l.stop() })
		}
		e.closeStreams()
		// The bodies it cut end at once (their reads and writes fail):
		// waited for, so that their lines reach the access log, which
		// closes after the drain.
		forward.WaitBounded(&e.streams, forward.CutWait)
		return fmt.Errorf("event loop: %w", ctx.Err())
	}
}
