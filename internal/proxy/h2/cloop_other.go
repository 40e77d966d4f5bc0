//go:build !linux

package h2

// Without epoll every client connection is read by its own goroutine.

type loopSys struct{}

func (h *Handler) deal(*cconn, *sockReader, []byte) bool { return false }

func (cc *cconn) stopLoop() {}

type rloop struct{}
