//go:build linux

package netpoll

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

type recorder struct{ events []uint32 }

func (r *recorder) Event(ev uint32) { r.events = append(r.events, ev) }

// parkedInRuntime polls (up to 10 s) until a goroutine waits in
// Poller.Wait parked in the runtime's poller ("IO wait"), not in a system
// call ("syscall", which holds a thread and, until the monitor takes it,
// a P: what the spare P was for). It returns the goroutine's header.
func parkedInRuntime(t *testing.T) string {
	t.Helper()
	buf := make([]byte, 1<<20)
	var last string
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		n := runtime.Stack(buf, true)
		for _, g := range bytes.Split(buf[:n], []byte("\n\n")) {
			if !bytes.Contains(g, []byte("netpoll.(*Poller).Wait")) {
				continue
			}
			head, _, _ := strings.Cut(string(g), "\n")
			last = head
			if strings.Contains(head, "[IO wait") {
				return head
			}
		}
	}
	t.Fatalf("no goroutine parked in Poller.Wait in the runtime's poller; last seen: %q", last)
	return ""
}

// The wait's states: a poll that does not block, a park that a deadline,
// a posted task or a socket's event ends, a deadline already past, and a
// deadline set again after it changed (the poller keeps the last one set).
func TestWaitStates(t *testing.T) {
	cases := []struct {
		name string
		// before runs before Wait; during runs once Wait is parked (nil:
		// Wait is expected to return without parking).
		before, during func(t *testing.T, p *Poller, c *pair)
		block          bool
		deadline       time.Duration // from now; 0: none
		wantEvents     int           // events dispatched to the socket's handler
		wantTasks      int
		notBefore      bool // Wait returned at the deadline, not before
	}{
		{name: "nothing ready, no block", block: false},
		{name: "deadline passes", block: true, deadline: 30 * time.Millisecond, notBefore: true},
		{name: "deadline already past", block: true, deadline: -time.Millisecond},
		{
			name: "posted task ends the park", block: true,
			during:    func(_ *testing.T, p *Poller, _ *pair) { p.Post(func() {}) },
			wantTasks: 1,
		},
		{
			name: "posted task ends a park with a far deadline", block: true, deadline: time.Hour,
			during:    func(_ *testing.T, p *Poller, _ *pair) { p.Post(func() {}) },
			wantTasks: 1,
		},
		{
			name: "readable socket ends the park", block: true,
			during:     func(t *testing.T, _ *Poller, c *pair) { c.write(t) },
			wantEvents: 1,
		},
		{
			name: "ready before the wait: no park", block: true,
			before:     func(t *testing.T, _ *Poller, c *pair) { c.write(t) },
			wantEvents: 1,
		},
		{
			name: "ready before a poll that does not block", block: false,
			before:     func(t *testing.T, _ *Poller, c *pair) { c.write(t) },
			wantEvents: 1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Close)
			c := newPair(t)
			rec := &recorder{}
			if err := p.Add(c.fd, EdgeEvents, rec); err != nil {
				t.Fatal(err)
			}
			// The socket is writable from the start: that first edge is
			// consumed here, so that the cases see only their own.
			if err := p.Wait(false, time.Time{}, func(h Handler, ev uint32) { h.Event(ev) }, nil); err != nil {
				t.Fatal(err)
			}
			rec.events = nil
			if tc.before != nil {
				tc.before(t, p, c)
			}
			var deadline time.Time
			if tc.deadline != 0 {
				deadline = time.Now().Add(tc.deadline)
			}
			tasks := 0
			done := make(chan error, 1)
			go func() {
				done <- p.Wait(tc.block, deadline, func(h Handler, ev uint32) { h.Event(ev) }, func(fn func()) { tasks++; fn() })
			}()
			if tc.during != nil {
				parkedInRuntime(t)
				tc.during(t, p, c)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if tc.notBefore && time.Now().Before(deadline) {
				t.Fatalf("Wait returned before its deadline")
			}
			if len(rec.events) != tc.wantEvents {
				t.Fatalf("%d events dispatched (%x), want %d", len(rec.events), rec.events, tc.wantEvents)
			}
			if tc.wantEvents > 0 && rec.events[0]&unix.EPOLLIN == 0 {
				t.Fatalf("event %x, want EPOLLIN", rec.events[0])
			}
			if tasks != tc.wantTasks {
				t.Fatalf("%d tasks ran, want %d", tasks, tc.wantTasks)
			}
		})
	}
}

// A deadline that passed is not kept for the next park: a Wait without a
// deadline after one that ended at its deadline parks until it is woken
// (it returned at once, nothing dispatched, when the cached deadline was
// not cleared).
func TestWaitDeadlineThenNone(t *testing.T) {
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if err := p.Wait(true, time.Now().Add(5*time.Millisecond), nil, nil); err != nil {
		t.Fatal(err)
	}
	ran := 0
	done := make(chan error, 1)
	go func() { done <- p.Wait(true, time.Time{}, nil, func(fn func()) { ran++; fn() }) }()
	parkedInRuntime(t)
	p.Post(func() {})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if ran != 1 {
		t.Fatalf("%d tasks ran, want 1", ran)
	}
}

// A closed poller's descriptor leaves the runtime's poller with it: many
// pollers made and closed leave no descriptor behind.
func TestCloseReleasesDescriptors(t *testing.T) {
	count := func() int {
		ents, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(ents)
		buf := make([]byte, 1<<16)
		n := 0
		for {
			k, err := unix.ReadDirent(ents, buf)
			if err != nil {
				t.Fatal(err)
			}
			if k == 0 {
				return n
			}
			_, c, _ := unix.ParseDirent(buf[:k], -1, nil)
			n += c
		}
	}
	before := count()
	for range 50 {
		p, err := New()
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Wait(true, time.Now().Add(-time.Second), nil, nil); err != nil {
			t.Fatal(err)
		}
		p.Close()
	}
	if after := count(); after != before {
		t.Fatalf("%d descriptors open after 50 pollers closed, %d before", after, before)
	}
}

type pair struct {
	fd   int // watched
	peer int
}

func newPair(t *testing.T) *pair {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Close(fds[0]); _ = unix.Close(fds[1]) })
	return &pair{fd: fds[0], peer: fds[1]}
}

func (c *pair) write(t *testing.T) {
	t.Helper()
	if n, err := unix.Write(c.peer, []byte("x")); n != 1 || err != nil {
		t.Fatalf("write: %d %v", n, err)
	}
}
