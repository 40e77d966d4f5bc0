package h2

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
)

// Writes from many goroutines reach the peer whole and in each writer's
// order; Close sends what is pending first; a Write after Close is refused.
func TestCoalesceConnOrderAndClose(t *testing.T) {
	a, b := net.Pipe()
	c := newCoalesceConn(a)
	var got bytes.Buffer
	read := make(chan error, 1)
	go func() { _, err := io.Copy(&got, b); read <- err }()
	const writers, each = 8, 200
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				// One line per write; a record is never split by another's.
				if _, err := c.Write([]byte("w" + strconv.Itoa(w) + " " + strconv.Itoa(i) + "\n")); err != nil {
					t.Error(err)
					return
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
	_ = b.Close()
	<-read
	next := make([]int, writers)
	lines := bytes.Split(bytes.TrimSuffix(got.Bytes(), []byte("\n")), []byte("\n"))
	if len(lines) != writers*each {
		t.Fatalf("%d lines, want %d", len(lines), writers*each)
	}
	for _, l := range lines {
		var w, i int
		ws, is, _ := bytes.Cut(l[1:], []byte(" "))
		w, _ = strconv.Atoi(string(ws))
		i, _ = strconv.Atoi(string(is))
		if i != next[w] {
			t.Fatalf("writer %d: line %d after %d", w, i, next[w]-1)
		}
		next[w]++
	}
}

// A failed write is returned by every later Write.
func TestCoalesceConnStickyError(t *testing.T) {
	a, b := net.Pipe()
	_ = b.Close()
	c := newCoalesceConn(a)
	defer c.Close()
	_, _ = c.Write([]byte("x")) // accepted: the failure comes from the writer
	<-c.done                    // the writer stops on the error
	if _, err := c.Write([]byte("y")); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("write after a failed write: %v, want io.ErrClosedPipe", err)
	}
}
