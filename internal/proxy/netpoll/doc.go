// Package netpoll is the event loops' poller: an epoll set with an eventfd
// to wake it and a queue of tasks other goroutines post to it, the timer
// heap a loop sleeps on, and the socket helpers a loop needs (non-blocking
// writes, handing a descriptor to Go's own poller), and the hang-up watch
// (WatchHangup: the resets of client sockets that goroutines serve, so
// that a client that went away has its upstream work cut), and PeerClosed (a
// zero-timeout poll for a peer's FIN or reset that the reader has not read
// yet: the goroutine engine's and the h2 relay's). It knows nothing of
// HTTP (no fasthttp, no net/http): the engine in package loop builds on it,
// and the h2 relay reads and writes its sockets with RecvRaw and SendRaw and
// runs its client connections' loops with RunParked (a loop whose waits are
// parked in Go's own poller, not a thread blocked in epoll_wait).
//
// The poller is Linux only (epoll); the timer heap is portable.
package netpoll
