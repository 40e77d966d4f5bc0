//go:build !linux

package proxy

import (
	"context"
	"errors"
	"net"
)

// The event loops use epoll: elsewhere --engine=loop serves with the
// goroutine engine.

type loopEngine struct{}

func loopsAvailable() bool { return false }

func startLoops(*Proxy, net.Listener, *handoffListener) (*loopEngine, error) {
	return nil, errors.New("event loop: Linux only")
}

func (*loopEngine) shutdown(context.Context) error { return nil }
