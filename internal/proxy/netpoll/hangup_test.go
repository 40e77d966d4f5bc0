//go:build linux

package netpoll

import (
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// tcpPair is a connected pair of loopback TCP sockets: the client's end
// and the server's, whose descriptor is watched.
func tcpPair(t testing.TB) (client *net.TCPConn, server *net.TCPConn, fd int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(); _ = s.Close() })
	rc, err := s.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	_ = rc.Control(func(f uintptr) { fd = int(f) }) //nolint:gosec // a descriptor
	return c.(*net.TCPConn), s.(*net.TCPConn), fd
}

type countHangup struct{ n atomic.Int64 }

func (c *countHangup) Hungup() { c.n.Add(1) }

// waitFor polls cond every millisecond for up to 20 s (the proxy tests'
// bound on a loaded CI machine).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20s", what)
		}
	}
}

// rdhup reports whether fd's peer has shut down its write side (the FIN
// has arrived), without reading.
func rdhup(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}} //nolint:gosec // a descriptor
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents&unix.POLLRDHUP != 0
}

// A watch fires once on the peer's reset, never on its FIN (a half-close:
// the peer may still read), and never after StopHangup returned.
func TestHangupResetNotFIN(t *testing.T) {
	finC, _, finFd := tcpPair(t)
	rstC, _, rstFd := tcpPair(t)
	stopC, _, stopFd := tcpPair(t)
	var fin, rst, stopped countHangup
	finTok, err := WatchHangup(finFd, &fin)
	if err != nil {
		t.Fatal(err)
	}
	rstTok, err := WatchHangup(rstFd, &rst)
	if err != nil {
		t.Fatal(err)
	}
	stopTok, err := WatchHangup(stopFd, &stopped)
	if err != nil {
		t.Fatal(err)
	}
	if finTok == rstTok || rstTok == stopTok || finTok == 0 {
		t.Fatalf("tokens %d %d %d: want distinct, non-zero", finTok, rstTok, stopTok)
	}
	// The FIN first, arrived (seen by poll), then a reset on another
	// socket: the watcher reports in the order the sockets became ready,
	// so once the reset fired, a FIN that fired would have too.
	if err := finC.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the FIN arriving", func() bool { return rdhup(finFd) })
	if !StopHangup(stopTok) {
		t.Fatal("StopHangup of a watch on: false")
	}
	_ = stopC.SetLinger(0)
	_ = stopC.Close()
	_ = rstC.SetLinger(0)
	_ = rstC.Close()
	waitFor(t, "the reset reported", func() bool { return rst.n.Load() == 1 })
	if got := fin.n.Load(); got != 0 {
		t.Fatalf("a FIN (half-close) reported %d times, want 0", got)
	}
	if got := stopped.n.Load(); got != 0 {
		t.Fatalf("a stopped watch reported %d times, want 0", got)
	}
	if StopHangup(rstTok) {
		t.Fatal("StopHangup of a watch that fired: true, want false")
	}
	// The half-closed peer now resets too: reported once.
	_ = finC.SetLinger(0)
	_ = finC.Close()
	waitFor(t, "the half-closed peer's reset reported", func() bool { return fin.n.Load() == 1 })
	if StopHangup(finTok) || StopHangup(0) {
		t.Fatal("StopHangup of an ended watch, or of none: true, want false")
	}
	if got := HangupsWatched(); got != 0 {
		t.Fatalf("%d sockets still watched, want 0", got)
	}
}

// A socket reset before the watch began is reported at once.
func TestHangupAlreadyReset(t *testing.T) {
	c, _, fd := tcpPair(t)
	_ = c.SetLinger(0)
	_ = c.Close()
	waitFor(t, "the reset arriving", func() bool {
		fds := []unix.PollFd{{Fd: int32(fd)}} //nolint:gosec // a descriptor
		n, err := unix.Poll(fds, 0)
		return err == nil && n > 0 && fds[0].Revents&unix.POLLHUP != 0
	})
	var h countHangup
	if _, err := WatchHangup(fd, &h); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the earlier reset reported", func() bool { return h.n.Load() == 1 })
}

// BenchmarkHangupWatchStop is what the goroutine engine adds to each call
// (and the loop to each streamed answer): a watch begun and stopped on a
// live socket (two epoll_ctl calls, the watcher's lock and map).
func BenchmarkHangupWatchStop(b *testing.B) {
	_, _, fd := tcpPair(b)
	var h countHangup
	b.ReportAllocs()
	for b.Loop() {
		tok, err := WatchHangup(fd, &h)
		if err != nil {
			b.Fatal(err)
		}
		StopHangup(tok)
	}
}
