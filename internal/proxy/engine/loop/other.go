//go:build !linux

package loop

import (
	"context"
	"errors"
	"net"

	"github.com/retrycap/retrycap/internal/proxy/forward"
)

// The event loops use epoll: elsewhere --engine=loop serves with the
// goroutine engine.

// Engine is the event-loop engine; it does not run here.
type Engine struct{}

// Available reports whether the event loops can run here: not without epoll.
func Available() bool { return false }

// Start fails: the event loops are Linux only.
func Start(*forward.Forwarder, net.Listener, Sink, int) (*Engine, error) {
	return nil, errors.New("event loop: Linux only")
}

// Shutdown does nothing.
func (*Engine) Shutdown(context.Context) error { return nil }

// ClientState is what a loop knows of one of its client connections.
type ClientState struct {
	Loop, FD             int
	Writing, EOF, Unread bool
}

// NumLoops is 0: no loops run here.
func (*Engine) NumLoops() int { return 0 }

// Calls is 0: no loops run here.
func (*Engine) Calls() uint64 { return 0 }

// Clients is empty: no loops run here.
func (*Engine) Clients() []ClientState { return nil }

// IdleUpstreams is 0: no loops run here.
func (*Engine) IdleUpstreams() int { return 0 }
