package h2

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// tcpPair is a loopback TCP connection: a the relay's end, b its peer's,
// a's send buffer small (so that a write(2) is often partial; a small
// receive buffer too would make loopback crawl on delayed ACKs).
func tcpPair(t *testing.T) (a, b net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	b, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	a = <-acc
	if a == nil {
		t.Fatal("accept failed")
	}
	_ = a.(*net.TCPConn).SetWriteBuffer(16 << 10)
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	return a, b
}

// Writes from many goroutines, each flushing now and then, some large,
// reach the peer whole and in each writer's order; Close sends what is
// pending; a Write after it is refused. Over a pipe (no socket: the
// writer goroutine writes everything) and over TCP with small buffers
// (Flush's non-blocking write(2) takes part of the batches, often only a
// part of one, the writer the rest).
func TestBatchConnOrderFlushAndClose(t *testing.T) {
	t.Run("pipe", func(t *testing.T) {
		a, b := net.Pipe()
		if n := testBatchOrder(t, a, b); n != 0 {
			t.Fatalf("%d bytes written by Flush over a pipe, want 0 (no socket)", n)
		}
	})
	t.Run("tcp", func(t *testing.T) {
		a, b := tcpPair(t)
		if n := testBatchOrder(t, a, b); n == 0 {
			t.Fatal("no byte written by Flush itself over TCP")
		}
	})
}

// testBatchOrder runs the order test over a (the batchConn's) and b (the
// reader's), and returns how many bytes Flush wrote itself.
func testBatchOrder(t *testing.T, a, b net.Conn) int64 {
	h := &Handler{}
	h.dtimer = time.AfterFunc(time.Hour, h.safetyNet) // the safety net flushes what no writer did
	c := newBatchConn(h, a)
	var got bytes.Buffer
	read := make(chan error, 1)
	go func() { _, err := io.Copy(&got, b); read <- err }()
	const writers, each = 8, 300
	pad := bytes.Repeat([]byte("x"), 4<<10)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				rec := []byte("w" + strconv.Itoa(w) + " " + strconv.Itoa(i))
				if i%50 == 7 {
					rec = append(append(rec, ' '), pad...)
				}
				if _, err := c.Write(append(rec, '\n')); err != nil {
					t.Error(err)
					return
				}
				if i%3 == 0 {
					_ = c.Flush()
				}
			}
		}()
	}
	wg.Wait()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("late")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after close: %v, want net.ErrClosed", err)
	}
	// c.Close closed a after its last write: b reads everything, then EOF.
	if err := <-read; err != nil {
		t.Fatalf("reading: %v", err)
	}
	_ = b.Close()
	next := make([]int, writers)
	lines := bytes.Split(bytes.TrimSuffix(got.Bytes(), []byte("\n")), []byte("\n"))
	if len(lines) != writers*each {
		t.Fatalf("%d lines, want %d", len(lines), writers*each)
	}
	for _, l := range lines {
		f := bytes.Fields(l[1:])
		w, _ := strconv.Atoi(string(f[0]))
		i, _ := strconv.Atoi(string(f[1]))
		if i != next[w] || len(f) == 3 && len(f[2]) != len(pad) {
			t.Fatalf("writer %d: line %d (%d fields) after %d", w, i, len(f), next[w]-1)
		}
		next[w]++
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inlined
}

// A peer that does not read: the writer's write(2) blocks, the frames
// pile up to hardMax, the next Write fails with errStuck, onFail runs
// once, and Close returns within its one-second bound. Over a pipe
// (unbuffered: nothing is written until b reads) and over TCP (Flush's
// non-blocking write fills the socket's buffers, then takes nothing and
// never waits: the writer blocks, the flusher does not).
func TestBatchConnPeerNotReading(t *testing.T) {
	t.Run("pipe", func(t *testing.T) {
		a, b := net.Pipe()
		defer b.Close()
		testPeerNotReading(t, a, 0)
	})
	t.Run("tcp", func(t *testing.T) {
		a, b := tcpPair(t)
		_ = b.(*net.TCPConn).SetReadBuffer(16 << 10)
		// The kernel takes what fits in a's send and b's receive buffer
		// before any write blocks: those bytes were accepted too.
		testPeerNotReading(t, a, sockBuf(t, a, unix.SO_SNDBUF)+sockBuf(t, b, unix.SO_RCVBUF))
	})
}

// sockBuf is the kernel's size of one of c's socket buffers.
func sockBuf(t *testing.T, c net.Conn, opt int) int {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var serr error
	if err := rc.Control(func(fd uintptr) { n, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, opt) }); err != nil {
		t.Fatal(err)
	}
	if serr != nil {
		t.Fatal(serr)
	}
	return n
}

// testPeerNotReading: inKernel is what the socket's buffers take before a
// write blocks.
func testPeerNotReading(t *testing.T, a net.Conn, inKernel int) {
	h := &Handler{cfg: Config{WriteTimeout: time.Hour}}
	h.dtimer = time.AfterFunc(time.Hour, h.safetyNet)
	c := newBatchConn(h, a)
	var fails []error
	var mu sync.Mutex
	c.onFail = func(err error) { mu.Lock(); fails = append(fails, err); mu.Unlock() }
	ping := make([]byte, 17) // a PING acknowledgement's size
	var n int
	var err error
	for n = 0; n < 1<<20; n++ {
		if _, err = c.Write(ping); err != nil {
			break
		}
		if n%100 == 0 {
			_ = c.Flush()
		}
	}
	if !errors.Is(err, errStuck) {
		t.Fatalf("write %d: %v, want errStuck", n, err)
	}
	// The writer took one batch before it blocked (at most hardMax), the
	// kernel's buffers what fits them, pending the rest up to hardMax.
	if n*17 > 2*hardMax+inKernel {
		t.Fatalf("%d bytes accepted before errStuck, want <= %d (%d in the kernel's buffers)", n*17, 2*hardMax+inKernel, inKernel)
	}
	mu.Lock()
	if len(fails) != 1 || !errors.Is(fails[0], errStuck) {
		t.Fatalf("onFail calls %v, want one errStuck", fails)
	}
	mu.Unlock()
	start := time.Now()
	_ = c.Close()
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Close took %v with the peer not reading", d)
	}
}

// A write(2) that does not finish within the write timeout fails the
// connection (onFail with the deadline error).
func TestBatchConnWriteTimeout(t *testing.T) {
	h := &Handler{cfg: Config{WriteTimeout: 50 * time.Millisecond}}
	h.dtimer = time.AfterFunc(time.Hour, h.safetyNet)
	a, b := net.Pipe()
	defer b.Close()
	c := newBatchConn(h, a)
	failed := make(chan error, 1)
	c.onFail = func(err error) { failed <- err }
	if _, err := c.Write([]byte("never read")); err != nil {
		t.Fatal(err)
	}
	_ = c.Flush()
	select {
	case err := <-failed:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("onFail(%v), want a deadline error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no failure 10 s after a 50 ms write timeout")
	}
	_ = c.Close()
}

// BenchmarkBatchConnFlush: one small batch (a unary answer's frames,
// 120 bytes) written and flushed per op over loopback TCP, and the op
// ends when the peer has read it (a call's hand-off, one at a time),
// "inline" (Flush's own non-blocking write(2)) beside "writer" (the same
// connection without its socket: every batch handed to the writer
// goroutine, as before), in one run. cpu-ns/op is the process's CPU
// (both ends: the peer is the same in both); with GOMAXPROCS 2 the
// writer hand-off wakes a second thread.
//
//	go test -run '^$' -bench BatchConnFlush -cpu 1,2 ./internal/proxy/h2/
func BenchmarkBatchConnFlush(b *testing.B) {
	for _, mode := range []string{"inline", "writer"} {
		b.Run(mode, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			got := make(chan struct{})
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				var buf [120]byte
				for {
					if _, err := io.ReadFull(c, buf[:]); err != nil {
						return
					}
					got <- struct{}{}
				}
			}()
			nc, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			h := &Handler{}
			h.dtimer = time.AfterFunc(time.Hour, h.safetyNet)
			c := newBatchConn(h, nc)
			if mode == "writer" {
				c.rc = nil
			}
			frame := bytes.Repeat([]byte("f"), 120)
			b.ReportAllocs()
			cpu := startCPU()
			for b.Loop() {
				if _, err := c.Write(frame); err != nil {
					b.Fatal(err)
				}
				h.flushDirty()
				<-got
			}
			cpu.report(b)
			b.StopTimer()
			_ = c.Close()
			c.mu.Lock()
			inl := c.inlined
			c.mu.Unlock()
			if mode == "writer" && inl != 0 || mode == "inline" && inl == 0 {
				b.Fatalf("%s: %d bytes written by Flush itself", mode, inl)
			}
		})
	}
}

// flushDirty writes every dirty connection itself, with one P and with
// two: their writers would only run one after the other on one P, each
// behind whatever else is runnable, and with two each hand-off was a
// goroutine woken per answer (the sidecar runs at GOMAXPROCS=2;
// docs/decisions.md, "The h2 relay's answers written by the goroutine
// that made them, at any GOMAXPROCS"). Before the fourteenth session
// every byte went through the writers (inlined 0 for each of the 8
// connections); up to the eighteenth, still with two Ps (a batch of
// more than four connections was the writers').
func TestFlushDirtyInlineWithOneP(t *testing.T) {
	for _, tc := range []struct {
		procs   int
		inlined int64
	}{{1, 100}, {2, 100}} {
		t.Run("GOMAXPROCS="+strconv.Itoa(tc.procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(tc.procs))
			h := &Handler{}
			h.dtimer = time.AfterFunc(time.Hour, h.safetyNet)
			defer h.dtimer.Stop()
			// The safety net stays unarmed (markDirty arms it only when
			// dtArmed is false): fired between two of the writes below on
			// a loaded machine, it flushed the first few connections as a
			// batch of at most four, inline with any number of Ps.
			h.dtArmed = true
			const conns = 8
			cs := make([]*batchConn, conns)
			peers := make([]net.Conn, conns)
			for i := range cs {
				a, b := tcpPair(t)
				cs[i], peers[i] = newBatchConn(h, a), b
				t.Cleanup(func() { _ = cs[i].Close() })
				msg := []byte(strconv.Itoa(i) + " " + string(bytes.Repeat([]byte("x"), 98)))[:100]
				if _, err := cs[i].Write(msg); err != nil {
					t.Fatal(err)
				}
			}
			h.flushDirty()
			for i, c := range cs {
				c.mu.Lock()
				inl := c.inlined
				c.mu.Unlock()
				if inl != tc.inlined {
					t.Errorf("conn %d: %d bytes written by flushDirty itself, want %d", i, inl, tc.inlined)
				}
				got := make([]byte, 100)
				if _, err := io.ReadFull(peers[i], got); err != nil {
					t.Fatalf("conn %d: %v", i, err)
				}
				want := []byte(strconv.Itoa(i) + " " + string(bytes.Repeat([]byte("x"), 98)))[:100]
				if !bytes.Equal(got, want) {
					t.Fatalf("conn %d: peer read %q, want %q", i, got, want)
				}
			}
		})
	}
}

// A Flush that finds another Flush in its write(2) leaves its bytes to
// that one, which writes them in its next non-blocking write: the
// writer goroutine is not woken for them (before, the second Flush
// kicked it: 5 of the 10 bytes were the writer's, and the writer was
// woken twice, once to find the write under way, once to write).
func TestFlushLeavesBytesToTheFlushUnderWay(t *testing.T) {
	a, b := tcpPair(t)
	h := &Handler{}
	h.dtimer = time.AfterFunc(time.Hour, h.safetyNet)
	defer h.dtimer.Stop()
	h.dtArmed = true // the safety net stays out of it
	c := newBatchConn(h, a)
	t.Cleanup(func() { _ = c.Close() })
	real := c.tryFn
	var second sync.Once
	c.tryFn = func(fd uintptr) bool {
		// The first Flush is in its write: another goroutine writes and
		// flushes now, and returns before this write is made.
		second.Do(func() {
			done := make(chan error, 1)
			go func() {
				if _, err := c.Write([]byte("world")); err != nil {
					done <- err
					return
				}
				done <- c.Flush()
			}()
			if err := <-done; err != nil {
				t.Error(err)
			}
		})
		return real(fd)
	}
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	inl, kicked, left := c.inlined, c.kicked, len(c.pending)
	c.mu.Unlock()
	if inl != 10 || kicked || left != 0 {
		t.Errorf("after the first Flush: %d bytes written by the Flushes, writer kicked %v, %d bytes pending; want 10, false, 0", inl, kicked, left)
	}
	got := make([]byte, 10)
	if _, err := io.ReadFull(b, got); err != nil {
		t.Fatal(err)
	}
	if string(got) != "helloworld" {
		t.Errorf("peer read %q, want %q", got, "helloworld")
	}
}
