//go:build linux

package netpoll

import (
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// A client that went away must not leave its upstream request running
// (issue 25; nginx's proxy_ignore_client_abort off, HAProxy's abortonclose,
// Envoy's reset of the upstream stream). The event loops see their own
// sockets' resets in their epoll sets; a socket served by a goroutine (the
// goroutine engine's calls, the answers the loops hand to a goroutine to
// stream) is blocked on its upstream side, and nobody reads the client's.
// WatchHangup watches such a socket in one epoll set of its own, for the
// events epoll always reports: EPOLLERR and EPOLLHUP, what a reset (RST)
// raises. A FIN alone raises neither (EPOLLRDHUP is not asked for): it is
// a half-close, whose client still reads the answer, and is not watched.

// Hungup is told when a watched socket was reset. It runs on the watcher's
// goroutine with the watcher's lock held (so that it never runs after
// StopHangup returned): it must not block, nor call StopHangup.
type Hungup interface {
	Hungup()
}

// hangups is the process's one watch: one epoll set, one goroutine,
// started at the first watch.
var hangups struct {
	once  sync.Once
	err   error
	epfd  int
	mu    sync.Mutex
	next  uint64
	watch map[uint64]hangup
}

type hangup struct {
	fd int
	h  Hungup
}

// WatchHangup watches fd (a connected socket) until StopHangup(tok) or its
// reset, which calls h.Hungup once. A socket reset already is reported at
// once. The caller keeps fd open until StopHangup returned.
func WatchHangup(fd int, h Hungup) (tok uint64, err error) {
	w := &hangups
	w.once.Do(startHangups)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	w.next++
	tok = w.next
	// The token rides in the event's data (Fd and Pad are its two halves),
	// so that an event collected for a watch that ended meanwhile, its
	// descriptor number since reused, finds nothing.
	ev := unix.EpollEvent{Events: unix.EPOLLONESHOT, Fd: int32(uint32(tok)), Pad: int32(uint32(tok >> 32))} //nolint:gosec // bits of the token
	if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return 0, fmt.Errorf("hang-up watch: epoll add fd %d: %w", fd, err)
	}
	w.watch[tok] = hangup{fd: fd, h: h}
	return tok, nil
}

// StopHangup ends the watch tok (0: none). It reports whether the watch was
// still on; false: it had fired (Hungup has returned) or was stopped.
func StopHangup(tok uint64) bool {
	if tok == 0 {
		return false
	}
	w := &hangups
	w.mu.Lock()
	defer w.mu.Unlock()
	hu, ok := w.watch[tok]
	if !ok {
		return false
	}
	delete(w.watch, tok)
	_ = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, hu.fd, nil)
	return true
}

// HangupsWatched is the number of sockets watched now (tests: nothing is
// left watched once the calls ended).
func HangupsWatched() int {
	w := &hangups
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.watch)
}

func startHangups() {
	w := &hangups
	w.epfd, w.err = unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if w.err != nil {
		w.err = fmt.Errorf("hang-up watch: epoll: %w", w.err)
		return
	}
	w.watch = make(map[uint64]hangup)
	go runHangups()
}

// runHangups is the watcher's goroutine, for the life of the process (a
// thread blocked in epoll_wait: nothing to do between resets).
func runHangups() {
	w := &hangups
	evs := make([]unix.EpollEvent, 64)
	for {
		n, err := unix.EpollWait(w.epfd, evs, -1)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			// Not expected of a valid epoll set; the watches already made
			// would never fire, so new ones are refused (WatchHangup).
			w.mu.Lock()
			w.err = fmt.Errorf("hang-up watch: epoll_wait: %w", err)
			w.mu.Unlock()
			return
		}
		w.mu.Lock()
		for i := range evs[:n] {
			tok := uint64(uint32(evs[i].Fd)) | uint64(uint32(evs[i].Pad))<<32 //nolint:gosec // bits of the token
			hu, ok := w.watch[tok]
			if !ok {
				continue
			}
			delete(w.watch, tok)
			_ = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, hu.fd, nil)
			hu.h.Hungup()
		}
		w.mu.Unlock()
	}
}
