//go:build !linux

package goroutine

import "net"

// watchClient: clients are not watched off Linux (no epoll); a reset
// client is seen when its attempt ends.
func (e *Engine) watchClient(net.Conn) *clientCut { return nil }

func stopWatch(uint64) {}
