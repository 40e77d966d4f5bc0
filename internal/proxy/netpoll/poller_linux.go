//go:build linux

package netpoll

import (
	"errors"
	"fmt"
	"sync"

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
type Poller struct {
	epfd   int
	wakeFd int
	events []unix.EpollEvent
	fds    []Handler // by descriptor number
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
	if err := p.Add(wfd, unix.EPOLLIN, nil); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Close closes the poller's own descriptors (not those it watches).
func (p *Poller) Close() {
	_ = unix.Close(p.wakeFd)
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

// Wait waits for events for up to msec milliseconds (-1: until one comes)
// and hands each to dispatch with its handler, and each task posted to run;
// it returns how many events the wait collected (0: none, or an
// interrupted wait, with nothing dispatched).
func (p *Poller) Wait(msec int, dispatch func(Handler, uint32), run func(func())) (int, error) {
	n, err := p.Poll(msec)
	if n > 0 {
		p.Dispatch(n, dispatch, run)
	}
	return n, err
}

// Poll is Wait's first half: it waits for events for up to msec
// milliseconds (0: only those ready now) and returns how many it
// collected, for Dispatch; an interrupted wait collects none.
func (p *Poller) Poll(msec int) (int, error) {
	n, err := unix.EpollWait(p.epfd, p.events, msec)
	if err != nil {
		if errors.Is(err, unix.EINTR) {
			return 0, nil
		}
		return 0, fmt.Errorf("epoll_wait: %w", err)
	}
	return n, nil
}

// Dispatch is Wait's second half: it hands the n events Poll collected
// to dispatch with their handlers, and runs the tasks posted.
func (p *Poller) Dispatch(n int, dispatch func(Handler, uint32), run func(func())) {
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
}

// Yield gives the thread's CPU to another runnable thread, if the kernel
// has one for it (sched_yield): what a spinning wait does between polls,
// so that it takes no CPU from a thread with work.
func Yield() {
	_, _, _ = unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
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
