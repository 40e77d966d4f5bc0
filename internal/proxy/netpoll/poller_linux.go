//go:build linux

package netpoll

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Handler is what an epoll event is dispatched to.
type Handler interface {
	Event(ev uint32)
}

// EdgeEvents is how a loop watches every connection, as Go's own poller
// does: edge-triggered, so that the set never changes (no epoll_ctl per
// request) and a connection busy with a call is not reported again and
// again. The price of edge triggering is that a read must drain the
// socket: a read that fills the whole buffer is followed by another.
const EdgeEvents = unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET

// Poller is one event loop's epoll set, and a queue of functions other
// goroutines post to it, woken through an eventfd. It is used from the
// loop's goroutine, except Post and Queued.
//
// The loop never blocks in epoll_wait (a blocking system call holds its
// P, and the proxy then needed a spare P, whose wake-ups cost the h2
// relay's goroutines 13 % CPU per call): Wait polls the set without
// blocking and, when nothing is ready, parks the loop's goroutine in Go's
// own poller, where the epoll descriptor is registered like a socket (an
// epoll set is readable while one of its events is ready). The loops and
// every other goroutine then share the Ps, and a loop is woken by the
// runtime's netpoll like any goroutine.
type Poller struct {
	epfd   int
	wakeFd int
	events []unix.EpollEvent
	// file is epfd in the runtime's poller; raw parks on it (Wait).
	file *os.File
	raw  syscall.RawConn
	// deadline is the one set on file last (set again only on a change:
	// the next timer moves far less often than the loop parks).
	deadline time.Time
	// ready and pollErr are the result of the last poll in raw's read
	// function, readFn (a method value made once: no allocation per park).
	ready   int
	pollErr error
	readFn  func(uintptr) bool
	fds     []Handler // by descriptor number
	// gens[fd] tags fd's registration (in each event's Pad): an event
	// collected for a descriptor that an earlier event of the same batch
	// closed, and whose number a new socket took since, is the old one's
	// and is dropped, as Go's poller does with its sequence numbers.
	gens []uint32
	gen  uint32

	mu      sync.Mutex
	tasks   []func()
	pending []func() // the loop's copy of tasks, reused
	woken   bool
	exited  bool // under mu: the poller has ended, Post drops tasks
}

// New creates a poller.
func New() (*Poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("event loop: epoll: %w", err)
	}
	wfd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		_ = unix.Close(epfd)
		return nil, fmt.Errorf("event loop: eventfd: %w", err)
	}
	p := &Poller{
		epfd: epfd, wakeFd: wfd,
		events: make([]unix.EpollEvent, 256),
		fds:    make([]Handler, 1024),
		gens:   make([]uint32, 1024),
	}
	p.readFn = p.pollReady
	if err := p.Add(wfd, unix.EPOLLIN, nil); err != nil {
		p.Close()
		return nil, err
	}
	if err := p.openParking(); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// openParking registers the epoll descriptor with the runtime's poller
// (os.NewFile does, for a non-blocking descriptor). A descriptor the
// runtime could not register has no deadlines: that is the check.
func (p *Poller) openParking() error {
	if err := unix.SetNonblock(p.epfd, true); err != nil {
		return fmt.Errorf("event loop: epoll descriptor %d non-blocking: %w", p.epfd, err)
	}
	f := os.NewFile(uintptr(p.epfd), "epoll") //nolint:gosec // a descriptor just created
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		// Not f.Close: the descriptor is closed by Close, once.
		return fmt.Errorf("event loop: epoll descriptor %d in the runtime's poller: %w", p.epfd, err)
	}
	raw, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("event loop: epoll descriptor %d in the runtime's poller: %w", p.epfd, err)
	}
	p.file, p.raw = f, raw
	return nil
}

// Close closes the poller's own descriptors (not those it watches).
func (p *Poller) Close() {
	_ = unix.Close(p.wakeFd)
	if p.file != nil {
		_ = p.file.Close() // deregisters epfd from the runtime's poller, closes it
		return
	}
	_ = unix.Close(p.epfd)
}

// Add watches fd for events, dispatching them to h.
func (p *Poller) Add(fd int, events uint32, h Handler) error {
	p.gen++
	ev := unix.EpollEvent{Events: events, Fd: int32(fd), Pad: int32(p.gen)} //nolint:gosec // fds fit in int32; the tag is bits
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fmt.Errorf("event loop: epoll add fd %d: %w", fd, err)
	}
	for fd >= len(p.fds) {
		p.fds = append(p.fds, make([]Handler, len(p.fds))...)
		p.gens = append(p.gens, make([]uint32, len(p.gens))...)
	}
	p.fds[fd], p.gens[fd] = h, p.gen
	return nil
}

// Forget stops watching fd without closing it.
func (p *Poller) Forget(fd int) {
	_ = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	if fd < len(p.fds) {
		p.fds[fd] = nil
	}
}

// CloseFd stops watching fd and closes it.
func (p *Poller) CloseFd(fd int) {
	p.Forget(fd)
	_ = unix.Close(fd)
}

// Post has fn run on the loop (by Wait); callable from any goroutine. It
// returns false when the poller has ended (fn will not run).
func (p *Poller) Post(fn func()) bool {
	p.mu.Lock()
	if p.exited {
		p.mu.Unlock()
		return false
	}
	p.tasks = append(p.tasks, fn)
	wake := !p.woken
	p.woken = true
	p.mu.Unlock()
	if wake {
		var one = [8]byte{1}
		_, _ = unix.Write(p.wakeFd, one[:])
	}
	return true
}

// Queued is the number of tasks posted and not run yet.
func (p *Poller) Queued() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.tasks)
}

// Exit ends the poller: Post refuses from now on. It returns the tasks
// posted before and not run, for the loop to run (so that none is lost).
func (p *Poller) Exit() []func() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.exited = true
	left := p.tasks
	p.tasks = nil
	return left
}

// Wait hands each ready event to dispatch with its handler, and each task
// posted to run. When nothing is ready and block is set, it first parks
// the goroutine in the runtime's poller until an event comes or deadline
// passes (the zero time: no deadline); a wait that ends at the deadline
// returns nil with nothing dispatched.
func (p *Poller) Wait(block bool, deadline time.Time, dispatch func(Handler, uint32), run func(func())) error {
	var n int
	if !block {
		n = p.poll()
	} else {
		if !deadline.Equal(p.deadline) {
			if err := p.file.SetReadDeadline(deadline); err != nil {
				return fmt.Errorf("epoll: deadline: %w", err)
			}
			p.deadline = deadline
		}
		// Read polls (readFn) and parks while nothing is ready; an event
		// that comes between the poll and the park makes the epoll set
		// readable, which the runtime's edge-triggered watch reports, so
		// the park returns at once. A deadline already past returns
		// before any poll: nothing is dispatched and the loop fires its
		// timers, then polls without blocking.
		p.ready, p.pollErr = 0, nil
		err := p.raw.Read(p.readFn)
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("epoll: park: %w", err)
		}
		if p.pollErr != nil {
			return p.pollErr
		}
		n = p.ready
	}
	if n < 0 {
		return p.pollErr
	}
	for i := 0; i < n; i++ {
		ev := &p.events[i]
		fd := int(ev.Fd)
		if fd == p.wakeFd {
			p.runTasks(run)
			continue
		}
		if fd < len(p.fds) && p.fds[fd] != nil && p.gens[fd] == uint32(ev.Pad) { //nolint:gosec // the tag is bits
			dispatch(p.fds[fd], ev.Events)
		}
	}
	return nil
}

// pollReady is raw's read function: done when an event is ready or the
// poll failed.
func (p *Poller) pollReady(uintptr) bool {
	p.ready = p.poll()
	return p.ready != 0
}

// poll is epoll_wait without blocking: the number of events ready, or -1
// with pollErr set. A raw system call: it never blocks, so the runtime
// need not be told (x/sys's EpollWait is a blocking call's Syscall6, which
// readies the P for a hand-off and takes it back).
// epoll_pwait with no signal mask is epoll_wait, on every architecture
// (arm64 has no epoll_wait).
func (p *Poller) poll() int {
	for {
		r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(p.epfd), uintptr(unsafe.Pointer(&p.events[0])), uintptr(len(p.events)), 0, 0, 0)
		switch e {
		case 0:
			return int(r)
		case unix.EINTR:
			continue
		default:
			p.pollErr = fmt.Errorf("epoll_wait: %w", e)
			return -1
		}
	}
}

func (p *Poller) runTasks(run func(func())) {
	var b [8]byte
	_, _ = unix.Read(p.wakeFd, b[:])
	p.mu.Lock()
	p.pending, p.tasks = p.tasks, p.pending[:0]
	p.woken = false
	p.mu.Unlock()
	for i, fn := range p.pending {
		run(fn)
		p.pending[i] = nil
	}
}
