package proxy

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestSlowChunkedResponsePassesThrough: the per-try timeout bounds the time
// to the headers, not the body, so an answer that streams for longer than
// it (5 chunks 300 ms apart, 1 s per-try timeout) arrives whole, once.
func TestSlowChunkedResponsePassesThrough(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	b := newBackend(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
		rc := http.NewResponseController(w)
		w.WriteHeader(200)
		for i := range 5 {
			if i > 0 {
				select {
				case <-release:
					return
				case <-slowTick():
				}
			}
			_, _ = fmt.Fprintf(w, "chunk %d\n", i)
			_ = rc.Flush()
		}
	})
	p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.addr(), "--per-try-timeout", "1s", "--retry-on", "timeout,reset,503")
	resp, err := clientFor(p).Get("http://svc/slow")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Errorf("status %d want 200", resp.StatusCode)
	}
	if want := "chunk 0\nchunk 1\nchunk 2\nchunk 3\nchunk 4\n"; string(body) != want {
		t.Errorf("body %q want %q", body, want)
	}
	if got := b.hits.Load(); got != 1 {
		t.Errorf("backend received %d requests, want 1", got)
	}
	if got := testutil.ToFloat64(p.upstreamByName("svc").M.Attempts); got != 1 {
		t.Errorf("attempts metric %v want 1", got)
	}
}

// patternReader yields size bytes of a pattern seeded by seed.
func patternReader(seed byte, size int64) io.Reader {
	block := make([]byte, 64<<10)
	for i := range block {
		block[i] = seed + byte(i*13)
	}
	return io.LimitReader(repeatReader(block), size)
}

type repeatReader []byte

func (r repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		n += copy(p[n:], r)
	}
	return n, nil
}

// TestLargeFailedResponseRetried: a 503 with a 32 MiB body is retried on its
// status alone; the bodies of the retried attempts are not read (the
// backend's writes of them fail once the socket buffers are full, which
// 32 MiB exceeds), and the client gets the last attempt's body, whole.
func TestLargeFailedResponseRetried(t *testing.T) {
	const size = 32 << 20
	var mu sync.Mutex
	written := map[int64]error{}
	b := newBackend(t, func(n int64, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.WriteHeader(503)
		_, err := io.Copy(w, patternReader(byte(n), size))
		mu.Lock()
		written[n] = err
		mu.Unlock()
	})
	p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.addr())
	resp, err := clientFor(p).Get("http://svc/big")
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	got, err := io.Copy(h, resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("read after %d bytes: %v", got, err)
	}
	if resp.StatusCode != 503 {
		t.Errorf("status %d want 503", resp.StatusCode)
	}
	if e := resp.Header.Get("Retrycap-Exhausted"); e != "attempts" {
		t.Errorf("Retrycap-Exhausted %q want attempts", e)
	}
	want := sha256.New()
	_, _ = io.Copy(want, patternReader(3, size))
	if got != size || !bytes.Equal(h.Sum(nil), want.Sum(nil)) {
		t.Errorf("client got %d bytes (checksum match %v), want attempt 3's %d bytes", got, bytes.Equal(h.Sum(nil), want.Sum(nil)), size)
	}
	if got := b.hits.Load(); got != 3 {
		t.Errorf("backend received %d requests, want 3", got)
	}
	if got := testutil.ToFloat64(p.upstreamByName("svc").M.Attempts); got != 3 {
		t.Errorf("attempts metric %v want 3", got)
	}
	waitBackendWrites(t, &mu, written, 3)
	mu.Lock()
	defer mu.Unlock()
	for n := int64(1); n <= 2; n++ {
		if written[n] == nil {
			t.Errorf("attempt %d: the backend wrote its whole 32 MiB body; want it cut by the proxy", n)
		}
	}
	if written[3] != nil {
		t.Errorf("attempt 3: backend write: %v; want the whole body delivered", written[3])
	}
}

// slowTick is the pace of the slow backend: the behaviour under test, not
// synchronisation.
func slowTick() <-chan time.Time { return time.After(300 * time.Millisecond) }

// waitBackendWrites polls until the backend's handlers for n requests have
// returned.
func waitBackendWrites(t *testing.T, mu *sync.Mutex, written map[int64]error, n int) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		done := len(written)
		mu.Unlock()
		if done >= n {
			return
		}
	}
	t.Fatalf("the backend's %d handlers did not return within 10s", n)
}

// TestStreamedBodyCutIsNotHidden: an upstream that dies in the middle of a
// streamed body (after the headers went to the client, so no retry) makes
// the client see a truncated body, not a complete-looking one.
func TestStreamedBodyCutIsNotHidden(t *testing.T) {
	b := newBackend(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
		c, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 1048576\r\n\r\n")
		_, _ = buf.Write(make([]byte, 200<<10))
		_ = buf.Flush()
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // RST, not FIN
		}
		c.Close()
	})
	p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.addr(), "--retry-on", "reset,503")
	resp, err := clientFor(p).Get("http://svc/cut")
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("status %d want 200", resp.StatusCode)
	}
	if err == nil || n >= 1<<20 {
		t.Errorf("client read %d bytes, error %v; want fewer than 1048576 and an error", n, err)
	}
	if got := b.hits.Load(); got != 1 {
		t.Errorf("backend received %d requests, want 1", got)
	}
}
