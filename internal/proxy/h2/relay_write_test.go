package h2

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Writes from many goroutines, each flushing now and then, some larger
// than batchMax (written at once), reach the peer whole and in each
// writer's order; Close sends what is pending; a Write after it is refused.
func TestBatchConnOrderFlushAndClose(t *testing.T) {
	h := &Handler{}
	h.dtimer = time.AfterFunc(time.Hour, h.flushDirty) // the safety net flushes what no writer did
	a, b := net.Pipe()
	c := newBatchConn(h, a)
	var got bytes.Buffer
	read := make(chan error, 1)
	go func() { _, err := io.Copy(&got, b); read <- err }()
	const writers, each = 8, 300
	pad := bytes.Repeat([]byte("x"), batchMax/3)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				rec := []byte("w" + strconv.Itoa(w) + " " + strconv.Itoa(i))
				if i%50 == 7 {
					rec = append(append(rec, ' '), pad...) // pending grows past batchMax
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
	_ = b.Close()
	<-read
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
}
