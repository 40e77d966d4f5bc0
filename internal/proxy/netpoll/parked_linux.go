//go:build linux

package netpoll

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// RunParked runs a loop on p whose waits are made in Go's own poller, not
// in a thread blocked in epoll_wait: the poller's epoll descriptor is
// itself watched by the runtime (an epoll set is readable while it has
// events), so the loop's goroutine parks like any goroutine waiting for
// a socket and is woken by the runtime's poller. With GOMAXPROCS=1 a
// loop blocked in epoll_wait held the only P in a system call until the
// runtime's monitor handed it off (20 µs or more each time), and other
// goroutines ran on another thread meanwhile; parked, it costs no thread
// and no hand-off. The h2 relay's client connections are read this way
// (its other goroutines, the upstream readers, share the P).
//
// turn is called with the number of events collected into the poller
// (0: none, on a wake-up by the deadline or a first look), to dispatch
// them (Dispatch) and do the loop's work; it returns whether to look
// again at once (more events may be waiting, or work is left: a full
// batch, a connection not drained), the deadline by which to be called
// again even without events (the zero time: none), and stop to end.
// RunParked returns when turn says stop, or on an error of the wait.
//
// Every descriptor the loop watches must be edge-triggered (EdgeEvents,
// or EPOLLET), its wake-up eventfd included (set here): an epoll_wait
// that collects fewer events than it has room for then drained the set,
// and any later event is a new edge for the runtime's poller, so the
// loop parks without a last epoll_wait that finds nothing.
func (p *Poller) RunParked(turn func(n int) (again bool, deadline time.Time, stop bool)) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLET, Fd: int32(p.wakeFd)} //nolint:gosec // fds fit in int32
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_MOD, p.wakeFd, &ev); err != nil {
		return fmt.Errorf("event loop: eventfd edge-triggered: %w", err)
	}
	fd, err := unix.Dup(p.epfd)
	if err != nil {
		return fmt.Errorf("event loop: epoll descriptor: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		return fmt.Errorf("event loop: epoll descriptor: %w", err)
	}
	f := os.NewFile(uintptr(fd), "epoll") // non-blocking: on the runtime's poller
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("event loop: epoll descriptor: %w", err)
	}
	k := &parked{p: p, turn: turn, f: f}
	k.fn = k.poll
	for {
		// The whole loop runs inside one Read while no deadline passes:
		// Read resets the descriptor's readiness once, at its start, and
		// each turn that parks (fn false) waits for the next edge, which
		// the runtime keeps for it if it came meanwhile.
		err := rc.Read(k.fn)
		if k.err != nil {
			return k.err
		}
		if k.stop {
			return nil
		}
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("event loop: wait: %w", err)
		}
		// The deadline passed: cleared, and turn runs at once (the next
		// Read's first epoll_wait) to fire what is due and ask anew.
		k.armd = time.Time{}
		_ = f.SetReadDeadline(time.Time{})
	}
}

// parked is RunParked's state, for its Read callback (made once: a
// method value per wait would allocate).
type parked struct {
	p    *Poller
	f    *os.File
	turn func(n int) (bool, time.Time, bool)
	fn   func(fd uintptr) bool
	armd time.Time // the deadline set on the descriptor
	stop bool
	err  error
}

// poll is one or more turns: an epoll_wait that does not block (made
// without telling the scheduler: it never blocks, RecvRaw says why that
// matters) and turn; false parks the Read until the set's next edge or
// the deadline, true ends it (stop, an error).
func (k *parked) poll(fd uintptr) bool {
	for {
		ev := k.p.events
		r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, fd, uintptr(unsafe.Pointer(&ev[0])), uintptr(len(ev)), 0, 0, 0)
		if e != 0 {
			if e == unix.EINTR {
				continue
			}
			k.err = fmt.Errorf("event loop: epoll_wait: %w", e)
			return true
		}
		n := int(r)
		again, dl, stop := k.turn(n)
		if stop {
			k.stop = true
			return true
		}
		if again || n == len(ev) {
			// Other goroutines run first (the loop shares its P with
			// those its turns give work to: with GOMAXPROCS=1 the upstream
			// readers the requests it read go to); a loop that is never
			// idle would otherwise hold the P until it is preempted.
			runtime.Gosched()
			continue
		}
		if !dl.Equal(k.armd) {
			// A deadline already past makes the wait below return at
			// once (os.ErrDeadlineExceeded).
			k.armd = dl
			_ = k.f.SetReadDeadline(dl)
		}
		return false
	}
}
